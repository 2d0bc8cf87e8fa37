"""History people already have, read as conversations or notes for `fsmem import` (`fsmem.operations.importing`).

Each reader turns one format into `Conversation`s (claude-code, chatgpt, claude) or Markdown files
(markdown), one at a time, and raises `fault(...)`, an InvalidArgument naming the file and the line that is wrong. They read
only what they are given; writing into the memory is the operation's.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass

from fsmem.errors import InvalidArgument
from fsmem.hooks.claude_code import TEXT_CHARS
from fsmem.spec.params import IMPORT_FORMATS

FORMATS = tuple(IMPORT_FORMATS)
__all__ = ["CWD_CHARS", "FORMATS", "KEY_CHARS", "TEXT_CHARS", "Conversation", "bounded_key", "fault", "utc"]


KEY_CHARS = 1_000  # of a conversation's id in its note's front matter, which is read only up to 64 KiB
CWD_CHARS = 4_096  # of a session's working folder (PATH_MAX): a longer one is no folder, and is not kept


def bounded_key(key: str) -> str:
    """A conversation's id as its note holds it: the id, or one longer than KEY_CHARS cut with a digest of the
    whole (an id of 70,000 characters made a front matter that no command could read, so no line came in after
    the first)."""
    if len(key) <= KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{key[: KEY_CHARS - 17]}-{digest}"


def fault(where: str, problem: str) -> InvalidArgument:
    """The error for an input that is not what its format says: `where` names the file and the line (or position)."""
    return InvalidArgument(f"{where}: {problem}; nothing was imported")


@dataclass(frozen=True)
class Conversation:
    """One conversation as an imported note holds it.

    `key` is the format's own id of it (stable across exports), `started` and `ended` its own times (UTC),
    `lines` what was said, one line per message, tool call and tool result; `where` says where it was read.
    """

    source: str
    key: str
    title: str
    started: _dt.datetime | None
    ended: _dt.datetime | None
    lines: tuple[str, ...]
    where: str
    transcript: str | None = None  # a Claude Code transcript's absolute path (the hook's offsets know it by it)
    transcript_end: int = 0  # and the byte offset after its last complete line
    parent: str | None = None  # a subagent's transcript: its parent session's note name
    cwd: str | None = None  # a Claude Code session's working folder, as its transcript's records name it


def utc(value: object) -> _dt.datetime | None:
    """A timestamp as exports write it (unix seconds, or ISO 8601 with Z or an offset) in UTC; None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return _dt.datetime.fromtimestamp(value, _dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value.strip():
        try:
            when = _dt.datetime.fromisoformat(value.strip())
            return when.replace(tzinfo=_dt.UTC) if when.tzinfo is None else when.astimezone(_dt.UTC)
        except (OverflowError, ValueError):  # a time whose offset takes it past year 1 or 9999 in UTC
            return None
    return None
