"""File names that every operating system can hold: what Windows and macOS refuse, as pure string checks.

A memory written on Linux is cloned and synced onto Windows and macOS, whose
file systems refuse some names Linux takes (a device name, a ':', a trailing
dot) or fold two names into one (letter case, and on macOS Unicode normalisation:
`café` written with one code point or two; `twin_key` is what such a file system
compares, and `fsmem.store.paths.case_twin` checks a folder with it). fsmem refuses to
create such names on every platform, and `fsmem sync` to take them from a remote;
`fsmem check` reports the ones already stored.
"""

from __future__ import annotations

import unicodedata

# Windows' device names (with any extension, in any case; its digits include the superscripts ¹ ² ³, and the
# console has two names of its own), and the characters Windows (and, for ':', macOS) keeps for itself.
DEVICE_NAMES = frozenset(
    [
        "con",
        "prn",
        "aux",
        "nul",
        "conin$",
        "conout$",
        *(f"{port}{n}" for port in ("com", "lpt") for n in [*"123456789", "\u00b9", "\u00b2", "\u00b3"]),
    ]
)
UNPORTABLE_CHARACTERS = '<>:"|?*\\'


def portable_problem(name: str) -> str | None:
    """Why a Windows or macOS file system cannot hold this name, or None.

    Checked for every name fsmem creates, on every platform, so that a memory written on Linux can be
    cloned and synced anywhere; names already stored are reported by `fsmem check`, never hidden.
    """
    if name.isalnum():  # the common case: no punctuation, so nothing below can apply but a device name
        return _device_problem(name)
    held = [c for c in UNPORTABLE_CHARACTERS if c in name]
    if held:
        listed = " ".join(f"'{c}'" for c in held)
        return f'holds {listed}, which Windows cannot hold in a file name (none of < > : " | ? * \\)'
    if name.endswith((".", " ")):
        return "ends in a dot or a space, which Windows drops from a file name"
    return _device_problem(name)


def twin_key(name: str) -> str:
    """What a case-insensitive, normalisation-insensitive file system (macOS, Windows) compares of a name: two
    names with one key are one file there."""
    if name.isascii():
        return name.casefold()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name).casefold())


def twin_problem(name: str, twin: str, shown_twin: str, copy: str = "copy") -> str:
    """Why `name` cannot stand beside `twin` (same `twin_key`), naming the twin as `shown_twin`."""
    if unicodedata.normalize("NFC", name) == unicodedata.normalize("NFC", twin):
        return (
            f"differs only by Unicode normalisation from {shown_twin} (the same letters, encoded otherwise), "
            f"which a macOS {copy} cannot hold beside it"
        )
    return f"differs only by letter case from {shown_twin}, which a macOS or Windows {copy} cannot hold beside it"


def _device_problem(name: str) -> str | None:
    device = name.split(".", 1)[0].rstrip(" ").lower()
    if device in DEVICE_NAMES:
        return f"is named {device.upper()}, a device name Windows reserves with any extension and in any case"
    return None
