"""fsmem.yaml from a remote: which settings it changes, which of those guard this host, and whether to take it.

A remote's fsmem.yaml is read as every fsmem.yaml is (bounded: `fsmem.config.parse_config`) and compared
setting by setting with the merge base's. A change is held (sync stops before merging and names the
settings) until a person runs `fsmem sync --accept-config`, which takes exactly the file that sync showed.
A standing policy lives in the clone's own `.git/config`, which git never sends to a remote nor takes
from one: `git config fsmem.acceptConfig settings` takes a change that touches no security setting
without asking. Security settings are held whatever the policy says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fsmem import faces
from fsmem.store.paths import shown

ACCEPT_KEY = "fsmem.acceptConfig"
ACCEPT_SETTINGS = "settings"  # the one standing policy: take changes that touch no security setting
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(not set)"})()
# What guards this host: what may be stored (secrets), whether changes are recorded (history), where sync
# sends them (sync), which installed code runs (extractors); and, under budgets, read_only anywhere, the
# agent list (who gets more than the default, or any access once closed) and whether it is closed.
SECURITY = (("secrets",), ("history",), ("sync",), ("consolidate", "extractors"), ("budgets", "closed"))
AGENTS = ("budgets", "agents")
SHOWN_CHANGES = 6
SHOWN_VALUE_CHARS = 60


@dataclass(frozen=True)
class SettingChange:
    """One setting a remote's fsmem.yaml changes: its key path, and the values before and after."""

    key: tuple[str, ...]
    old: Any
    new: Any

    @property
    def security(self) -> bool:
        if any(self.key[: len(prefix)] == prefix for prefix in SECURITY) or "read_only" in self.key:
            return True
        return AGENTS[: len(self.key)] == self.key or (self.key[:2] == AGENTS and len(self.key) == 3)

    def text(self) -> str:
        name = ".".join(part if "." not in part else repr(part) for part in self.key) or "(the whole file)"
        where = f"{shown(name)} {_value(self.old)} -> {_value(self.new)}"
        return where + (" (a security setting)" if self.security else "")


def changes(base: Any, theirs: Any) -> list[SettingChange]:
    """Every setting whose value differs, leaf by leaf where both sides hold a mapping; security settings first."""
    found: list[SettingChange] = []

    def walk(key: tuple[str, ...], old: Any, new: Any) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            for name in sorted({*old, *new}, key=str):
                walk((*key, str(name)), old.get(name, MISSING), new.get(name, MISSING))
        elif type(old) is not type(new) or old != new:  # `true` and `1` differ as settings
            found.append(SettingChange(key, old, new))

    walk((), base, theirs)
    return sorted(found, key=lambda change: (not change.security, change.key))


def _value(value: Any) -> str:
    if value is MISSING:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        text = f"'{value}'"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    text = text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 1] + "…"
    return shown(text)


def listed(found: list[SettingChange]) -> str:
    shown_ = [change.text() for change in found[:SHOWN_CHANGES]]
    more = len(found) - SHOWN_CHANGES
    return ", ".join(shown_) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Decision:
    """Whether a remote's fsmem.yaml change is taken, and why (for the sync's report or its refusal)."""

    take: bool
    why: str


def decide(found: list[SettingChange], *, policy: str, accepted: bool) -> Decision:
    """`accepted`: a person ran --accept-config after a sync showed this very file."""
    if accepted:
        return Decision(True, "as accepted with --accept-config")
    if policy == ACCEPT_SETTINGS and not any(change.security for change in found):
        return Decision(True, f"by the standing policy {ACCEPT_KEY}={ACCEPT_SETTINGS} in .git/config")
    if policy == ACCEPT_SETTINGS:
        return Decision(False, f"{ACCEPT_KEY}={ACCEPT_SETTINGS} takes other settings, never a security setting")
    return Decision(False, "")


def held_message(label: str, root: str, found: list[SettingChange], decision: Decision, *, again: bool) -> str:
    """The one line of a held change: what it changes, that nothing happened, and what a person does next."""
    since = " (it changed since the last sync showed it)" if again else ""
    policy = f" ({decision.why})" if decision.why else ""
    return (
        f"{label} changes fsmem.yaml{since}: {listed(found)}{policy}; nothing was merged or pushed. "
        f"Review it (git -C {shown(root)} diff HEAD {label} -- fsmem.yaml), then run "
        f"{faces.call('sync', accept_config=True)} to take it"
    )
