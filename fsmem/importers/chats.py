"""ChatGPT's and Claude.ai's exports: `conversations.json`, a JSON array of conversations, read one at a time.

ChatGPT keeps each conversation as a tree of message nodes (`mapping`, each with its `parent`); what the
app shows is the chain from `current_node` up to the root, so that chain is what is imported, and edited
or regenerated branches are not. Claude.ai keeps a list of `chat_messages`, each with a `sender` and its
`text` or Anthropic content blocks (summarised as the Claude Code hook summarises them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fsmem.hooks.claude_code import content_lines, one_line, storable_text
from fsmem.importers import TEXT_CHARS, Conversation, bounded_key, fault, utc
from fsmem.importers.jsonstream import ArrayReader, Item, JSONFault

ENCODING_ERRORS = "strict"


EXPORT_FILE = "conversations.json"


def export_file(path: Path) -> Path:
    """The export's conversations.json: `path` itself, or the file of that name in the unzipped export `path`."""
    if path.is_dir() and (path / EXPORT_FILE).is_file():
        return path / EXPORT_FILE
    return path


def items(path: Path) -> Iterator[Item]:
    """The conversations of the export at `path`, one at a time; fault at the first fault."""
    path = export_file(path)
    if not path.is_file():  # a folder without the file, a FIFO, a device: never opened
        raise fault(str(path), f"not an export's {EXPORT_FILE} (nor a folder holding one)")
    try:
        with open(path, encoding="utf-8", errors=ENCODING_ERRORS, newline="") as stream:
            yield from ArrayReader(stream)
    except JSONFault as exc:
        raise fault(f"{path} line {exc.line} column {exc.column}", exc.message) from None
    except UnicodeDecodeError as exc:
        raise fault(str(path), f"not UTF-8 (byte {exc.start} of a read)") from None
    except OSError as exc:
        raise fault(str(path), f"cannot be read ({exc.strerror or exc})") from None


def _conversations(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where it stands, the object) of each conversation of the export: the file, its line and its number."""
    for item in items(path):
        where = f"{export_file(path)} line {item.line} (conversation {item.index + 1})"
        if not isinstance(item.value, dict):
            raise fault(where, "a conversation is not a JSON object")
        yield where, storable_text(item.value)


def _fallback_key(conversation: dict[str, Any]) -> str:
    seed = json.dumps([conversation.get("title") or conversation.get("name"), conversation.get("create_time")])
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def _named(conversation: dict[str, Any], key: Any, title: Any) -> tuple[str, str]:
    """A conversation's key and title as the export gives them, or, where it gives none, its fallback key and
    "Untitled"."""
    return (
        bounded_key(key) if isinstance(key, str) and key.strip() else _fallback_key(conversation),
        one_line(title, 120) if isinstance(title, str) and title.strip() else "Untitled",
    )


def chatgpt(path: Path) -> Iterator[Conversation]:
    """Each conversation of a ChatGPT export, its shown branch in order."""
    for where, value in _conversations(path):
        mapping = value.get("mapping")
        if not isinstance(mapping, dict):
            raise fault(where, "the conversation has no mapping of messages")
        chain = _shown_chain(mapping, value.get("current_node"), where)
        lines: list[str] = []
        times = []
        for node in chain:
            message = node.get("message")
            if message is None:
                continue
            if not isinstance(message, dict):
                raise fault(where, f"node {one_line(str(node.get('id')), 40)}: the message is not an object")
            lines.extend(_chatgpt_lines(message))
            when = utc(message.get("create_time"))
            if when is not None:
                times.append(when)
        key, title = _named(value, value.get("conversation_id") or value.get("id"), value.get("title"))
        yield Conversation(
            source="chatgpt",
            key=key,
            title=title,
            started=utc(value.get("create_time")) or min(times, default=None),
            ended=utc(value.get("update_time")) or max(times, default=None),
            lines=tuple(lines),
            where=where,
        )


def _shown_chain(mapping: dict[str, Any], current: Any, where: str) -> list[dict[str, Any]]:
    """The nodes from the root to `current` (the last node when it is not given), each once."""
    if not isinstance(current, str) or current not in mapping:
        current = next(reversed(mapping), None) if mapping else None
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        node = mapping[current]
        if not isinstance(node, dict):
            raise fault(where, f"node {one_line(current, 40)} is not an object")
        chain.append(node)
        current = node.get("parent")
    chain.reverse()
    return chain


def _parts_text(content: dict[str, Any]) -> str:
    """A ChatGPT message's text: its string parts (an image or a file stands as [image] or [file])."""
    parts = content.get("parts")
    if isinstance(parts, list):
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("content_type") or "")
                out.append("[image]" if "image" in kind else f"[{kind or 'attachment'}]")
        return " ".join(p for p in out if p.strip())
    text = content.get("text") or content.get("result")
    return text if isinstance(text, str) else ""


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _chatgpt_lines(message: dict[str, Any]) -> list[str]:
    author = _mapping(message.get("author"))
    role = author.get("role")
    metadata = _mapping(message.get("metadata"))
    if role == "system" or metadata.get("is_visually_hidden_from_conversation"):
        return []
    content = _mapping(message.get("content"))
    kind = content.get("content_type")
    if kind in ("user_editable_context", "thoughts", "reasoning_recap", "model_editable_context"):
        return []
    text = _parts_text(content)
    if not text.strip():
        return []
    if role == "tool":
        name = author.get("name") or "tool"
        return [f"tool result ({one_line(str(name), 40)}): {one_line(text, 200)}"]
    recipient = message.get("recipient")
    if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        return [f"tool call {one_line(recipient, 60)}: {one_line(text, 200)}"]
    if role not in ("user", "assistant"):
        return []
    return [f"{role}: {one_line(text, TEXT_CHARS)}"]


def claude(path: Path) -> Iterator[Conversation]:
    """Each conversation of a Claude.ai export, its messages in order."""
    for where, value in _conversations(path):
        messages = value.get("chat_messages")
        if not isinstance(messages, list):
            raise fault(where, "the conversation has no chat_messages list")
        lines: list[str] = []
        times = []
        for number, message in enumerate(messages, start=1):
            if not isinstance(message, dict):
                raise fault(where, f"message {number} is not an object")
            role = "user" if message.get("sender") == "human" else "assistant"
            content = message.get("content")
            found = content_lines(role, content, text_chars=TEXT_CHARS) if isinstance(content, list) else []
            if not found and isinstance(message.get("text"), str):
                found = content_lines(role, message["text"], text_chars=TEXT_CHARS)
            lines.extend(found)
            when = utc(message.get("created_at"))
            if when is not None:
                times.append(when)
        key, title = _named(value, value.get("uuid"), value.get("name"))
        yield Conversation(
            source="claude",
            key=key,
            title=title,
            started=utc(value.get("created_at")) or min(times, default=None),
            ended=max(times, default=None) or utc(value.get("updated_at")),
            lines=tuple(lines),
            where=where,
        )
