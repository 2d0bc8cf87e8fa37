"""File names that every operating system can hold: what Windows and macOS refuse, as pure string checks.

A memory written on Linux is cloned and synced onto Windows and macOS, whose
file systems refuse some names Linux takes (a device name, a ':', a trailing
dot) or fold two names into one (letter case; `fsmem.store.paths.case_twin`
checks that one, as it needs the folder). fsmem refuses to create such names on
every platform; `fsmem check` reports the ones already stored.
"""

from __future__ import annotations

# Windows' device names (with any extension, in any case), and the characters Windows (and, for ':', macOS)
# keeps for itself.
DEVICE_NAMES = frozenset(
    ["con", "prn", "aux", "nul", *(f"com{n}" for n in range(1, 10)), *(f"lpt{n}" for n in range(1, 10))]
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


def _device_problem(name: str) -> str | None:
    device = name.split(".", 1)[0].rstrip(" ").lower()
    if device in DEVICE_NAMES:
        return f"is named {device.upper()}, a device name Windows reserves with any extension and in any case"
    return None
