"""An imported conversation as a session note: its text when new, and what a longer copy adds to it. Pure.

The note is an episode, dated by the conversation's own start (`sessions/YYYY/MM/DD/<session>.md`, UTC),
and holds what was said in fenced blocks of FENCE_LINES lines, as the Claude Code hook writes its part, so
that consolidation files none of it into a document while search still finds it, a few exchanges a row. Its front matter names the
conversation (`source`, `conversation`) and how many of its lines the memory holds (`imported_lines`,
with a digest of them): importing the same conversation again adds only the lines after those.
"""

from __future__ import annotations

import hashlib

from fsmem import format as fmt
from fsmem.hooks.claude_code import fenced, session_name
from fsmem.importers import Conversation

SOURCES = {"claude-code": "Claude Code session", "chatgpt": "ChatGPT conversation", "claude": "Claude conversation"}


def session_of(conversation: Conversation) -> str:
    """The note's session name: the hook's for a Claude Code session (one note either way), else `chatgpt-<id>`."""
    return session_name(conversation.key, prefix=conversation.source)


def digest(lines: tuple[str, ...] | list[str]) -> str:
    """What the lines already imported were, so that a conversation that changed before its end is noticed."""
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()[:16]


def _stamp(conversation: Conversation, which: str) -> str:
    when = conversation.started if which == "started" else (conversation.ended or conversation.started)
    assert when is not None
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def block(conversation: Conversation, lines: tuple[str, ...] | list[str], *, first: bool) -> str:
    """One import's part of the note: a level-1 heading naming it (a line of prose would be an observation for
    topic/Inbox), then its lines in a fenced block (consolidation reads none of it)."""
    what = SOURCES[conversation.source]
    heading = f"# {what}: {conversation.title}" if first else f"# {what}, continued"
    return "\n".join([heading, *fenced(lines)]) + "\n"


def new_note(conversation: Conversation, lines: tuple[str, ...]) -> str:
    """The whole note of a conversation imported for the first time."""
    session = session_of(conversation)
    front = {
        "title": conversation.title,
        "description": f"{SOURCES[conversation.source]} imported by fsmem import {conversation.source}",
        "type": "episodic",
        "session": session,
        "source": conversation.source,
        "conversation": conversation.key,
        "created": _stamp(conversation, "started"),
        "updated": _stamp(conversation, "ended"),
        "imported_lines": len(conversation.lines),
        "imported_digest": digest(conversation.lines),
    }
    return fmt.render(front, block(conversation, lines, first=True))


def extended(text: str, conversation: Conversation, lines: tuple[str, ...]) -> str:
    """The note `text` with a conversation's `lines` after those it holds added, its fields moved on."""
    body = text if text.endswith("\n") else text + "\n"
    body += "\n" + block(conversation, lines, first=False)
    return fmt.set_fields(
        body,
        {
            "updated": _stamp(conversation, "ended"),
            "imported_lines": len(conversation.lines),
            "imported_digest": digest(conversation.lines),
        },
    )
