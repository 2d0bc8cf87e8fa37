"""Old spellings kept for one release: each still works and says what replaced it.

0.2 settled one name per idea across the CLI, the Python API, the tool
schemas and JSON (see the vocabulary table in docs/guide.md). The names below were
renamed then and go away in 0.3.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

from fsmem.errors import InvalidArgument

T = TypeVar("T")

# (where, old spelling, new spelling): what 0.2 renamed; the vocabulary test checks each old one still works.
RENAMED = (
    ("search", "k", "max_results"),
    ("grep", "context", "context_lines"),
    ("recall", "context", "seen"),
    ("watch", "quiet", "settle"),
    ("evaluate", "ks", "sweep"),
    ("Memory", "write_index", "index"),
    ("cli", "eval", "evaluate"),
    ("tools", "list", "ls"),
    ("grep JSON", "total_matches", "total"),
)


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A DeprecationWarning naming the replacement, attributed to the caller's line (shown once per line)."""
    warnings.warn(
        f"{old} is deprecated since fsmem 0.2 and goes away in 0.3; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed(old: str, old_value: T | None, new: str, new_value: T | None) -> T | None:
    """The value given under either name; both at once is an error, the old one warns."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InvalidArgument(f"give {new} only ({old} is its deprecated name)")
    warn(old, new, stacklevel=4)
    return old_value
