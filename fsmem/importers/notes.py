"""A conversation as a session note: its text when new, and what a longer copy adds to it. Pure.

The note is an episode, dated by the conversation's own start (`sessions/YYYY/MM/DD/<session>.md`, UTC),
and holds what was said in fenced blocks of FENCE_LINES lines, so that consolidation files none of it into a
document while search still finds it, a few exchanges a row. Its front matter names the conversation
(`source`, `conversation`) and is the one record of how much of it the memory holds (`Held`): how many of its
lines (`imported_lines`, with a digest of them that each new line extends) and, for a Claude Code transcript,
the bytes of the transcript those lines come from (`imported_bytes`). The Claude Code hook and `fsmem import`
both read and move this record, so either continues where the other stopped, and no line comes in twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt
from fsmem.hooks.claude_code import fenced, session_name
from fsmem.importers import Conversation

SOURCES = {"claude-code": "Claude Code session", "chatgpt": "ChatGPT conversation", "claude": "Claude conversation"}
CWD_FIELD = "cwd"  # a Claude Code session's working folder (`cwd`, as Claude Code names it): the project digest's
DESCRIPTIONS = {"claude-code": "Claude Code session, saved from its transcript by fsmem"}


def session_of(conversation: Conversation) -> str:
    """The note's session name: the hook's for a Claude Code session (one note either way), else `chatgpt-<id>`."""
    return session_name(conversation.key, prefix=conversation.source)


def digest(lines: Sequence[str], previous: str = "") -> str:
    """The digest of the lines a note holds, extended line by line from `previous` (the digest of those before):
    whoever adds lines moves it on without reading the earlier ones, and a conversation that changed before its
    end is noticed."""
    h = previous
    for line in lines:
        h = hashlib.sha256(f"{h}\n{line}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return h


def _whole_digest(lines: Sequence[str]) -> str:
    """The digest as fsmem import wrote it before it could be extended: one hash of all the lines."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Held:
    """How much of a conversation a note holds: its first `lines` lines (`digest` of them) and, for a transcript,
    the `bytes` of it that those lines come from (None when a note does not say)."""

    lines: int = 0
    digest: str = ""
    bytes: int | None = None

    def after(self, lines: Sequence[str], end: int | None) -> Held:
        """The record once `lines` (those after these, read up to byte `end`) are held too."""
        return Held(self.lines + len(lines), digest(lines, self.digest), end)

    def holds_start_of(self, lines: Sequence[str]) -> bool:
        """Whether these are the first lines of `lines`, as they were when they were saved."""
        if self.lines > len(lines):
            return False
        first = lines[: self.lines]
        return digest(first) == self.digest or _whole_digest(first) == self.digest

    def fields(self) -> dict[str, Any]:
        found: dict[str, Any] = {"imported_lines": self.lines, "imported_digest": self.digest}
        if self.bytes is not None:
            found["imported_bytes"] = self.bytes
        return found


def held_in(front: Mapping[str, Any]) -> Held | None:
    """The record of a note's front matter; None when it has none (a note fsmem import or the hook did not write)."""
    lines, sign, size = front.get("imported_lines"), front.get("imported_digest"), front.get("imported_bytes")
    if not isinstance(lines, int) or not _count(lines) or not isinstance(sign, str):
        return None
    return Held(lines, sign, size if _count(size) else None)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _stamp(conversation: Conversation, which: str) -> str:
    when = conversation.started if which == "started" else (conversation.ended or conversation.started)
    assert when is not None
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def block(conversation: Conversation, lines: Sequence[str], *, first: bool) -> str:
    """One part of the note: a level-1 heading naming it (a line of prose would be an observation for
    topic/Inbox), then its lines in fenced blocks (consolidation reads none of it)."""
    what = SOURCES[conversation.source]
    if conversation.parent is not None:
        what = f"Subagent of {what} {conversation.parent}"
    heading = f"# {what}: {conversation.title}" if first else f"# {what}, continued"
    return "\n".join([heading, *fenced(list(lines))]) + "\n"


def new_note(conversation: Conversation, lines: Sequence[str], held: Held) -> str:
    """The whole note of a conversation seen for the first time: `lines` as shown, `held` the record of them."""
    session = session_of(conversation)
    source = conversation.source
    description = DESCRIPTIONS.get(source, f"{SOURCES[source]} imported by fsmem import {source}")
    if conversation.parent is not None:
        description = f"a subagent's transcript of Claude Code session {conversation.parent}, saved by fsmem"
    front = {
        "title": conversation.title,
        "description": description,
        "type": "episodic",
        "session": session,
        "source": source,
        "conversation": conversation.key,
        **({"parent_session": conversation.parent} if conversation.parent is not None else {}),
        **({CWD_FIELD: conversation.cwd} if conversation.cwd is not None else {}),
        "created": _stamp(conversation, "started"),
        "updated": _stamp(conversation, "ended"),
        **held.fields(),
    }
    return fmt.render(front, block(conversation, lines, first=True))


def extended(
    text: str, conversation: Conversation, lines: Sequence[str], held: Held, *, front: Mapping[str, Any] | None = None
) -> str:
    """The note `text` with `lines` (those after the ones it holds) added, its record moved on to `held`."""
    body = text if text.endswith("\n") else text + "\n"
    if lines:
        body += "\n" + block(conversation, lines, first=False)
    fields: dict[str, Any] = held.fields()
    if conversation.ended or conversation.started:
        fields = {"updated": _stamp(conversation, "ended"), **fields}
    if front is None:
        front = fmt.split(text).front_matter
    if front.get("conversation") != conversation.key:  # a note the hook wrote before it kept this record
        fields.update(source=conversation.source, conversation=conversation.key)
    if conversation.cwd is not None and CWD_FIELD not in front:  # a note saved before fsmem kept the folder
        fields[CWD_FIELD] = conversation.cwd
    return fmt.set_fields(body, fields)
