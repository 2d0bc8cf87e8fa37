"""Claude Code's hook events, read as fsmem needs them: the event, the transcript's new lines, one summary line each.

Claude Code runs a hook with one JSON object on standard input (`session_id`,
`transcript_path`, `cwd`, `hook_event_name`). The transcript is a JSONL file
that only grows; what the hook already saved is kept as a byte offset in
`.fsmem/hooks/claude-code/` (host-local state, never a memory file), so a second
event saves only the lines after it. Parsing and summarising are pure; reading
the file and the offset are the only I/O here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument
from fsmem.store import given
from fsmem.store.files import atomic_write, file_lock, state_dir

EVENTS = ("SessionStart", "SessionEnd", "PreCompact")
SAVING_EVENTS = ("SessionEnd", "PreCompact")
STDIN_LIMIT = 1 << 20  # the event object is small; a megabyte is ample
TRANSCRIPT_CHUNK = 8 << 20  # at most this much of a transcript is read per event; the rest comes next time
LINE_CHARS = 300  # one summary line
NOTE_CHARS = 24_000  # one event's part of the session note
FENCE_LINES = 8  # lines per fenced block: each block is one row of a search answer, a few exchanges long
STATE = ("hooks", "claude-code")


@dataclass(frozen=True)
class HookEvent:
    """The fields of a Claude Code hook event that fsmem uses."""

    name: str
    session_id: str
    transcript_path: str | None
    cwd: str | None


def parse_event(text: str) -> HookEvent:
    """The event in `text` (the hook's standard input), or InvalidArgument saying what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"the hook's input is not JSON ({exc.msg}, line {exc.lineno})") from None
    except ValueError:  # a number too long to convert, among others
        raise InvalidArgument("the hook's input is not JSON that fsmem can read") from None
    if not isinstance(data, dict):
        raise InvalidArgument("the hook's input is not a JSON object")
    name = data.get("hook_event_name")
    if not isinstance(name, str) or not name:
        raise InvalidArgument("the hook's input has no hook_event_name")
    session = data.get("session_id")
    if not isinstance(session, str) or not session.strip():
        session = ""
    path = data.get("transcript_path")
    cwd = data.get("cwd")
    return HookEvent(
        name=name,
        session_id=session.strip(),
        transcript_path=path if isinstance(path, str) and path else None,
        cwd=cwd if isinstance(cwd, str) else None,
    )


def session_name(session_id: str, prefix: str = "claude-code") -> str:
    """The note's session name: `prefix-` and the id in the letters a session name may hold.

    An id that had to be changed to fit gets a digest of the whole id, so two ids never share a note.
    """
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", session_id).strip("-")[:60]
    if cleaned != session_id or not cleaned:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        cleaned = f"{cleaned[:48]}-{digest}".strip("-")
    return f"{prefix}-{cleaned}"


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _text_of(content: Any) -> str:
    """The text of a message's or tool result's content: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def _tool_input(value: Any) -> str:
    """A tool call's input in one line of `key=value` pairs (strings shown as they are), never raw JSON."""
    if not isinstance(value, dict):
        return one_line(str(value), 160)
    parts = []
    for key, item in value.items():
        shown = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
        parts.append(f"{key}={one_line(shown, 120)}")
    return one_line(", ".join(parts), 200)


def summarise(record: Any, *, text_chars: int = LINE_CHARS) -> list[str]:
    """The lines one transcript record contributes: a line per text, tool call and tool result; none for the rest.

    A text is cut at `text_chars`; a tool call or result always at a short line. Every line starts with
    its role (`user:`, `assistant:`, `tool call`, `tool result`), so none can close the note's fence.
    """
    if not isinstance(record, dict) or record.get("isMeta") or record.get("type") not in ("user", "assistant"):
        return []
    message = record.get("message")
    if not isinstance(message, dict):
        return []
    role = "user" if record.get("type") == "user" else "assistant"
    return content_lines(role, message.get("content"), text_chars=text_chars)


def content_lines(role: str, content: Any, *, text_chars: int = LINE_CHARS) -> list[str]:
    """The lines of one message's content (a string, or Anthropic's blocks: text, tool_use, tool_result)."""
    if isinstance(content, str):
        return [f"{role}: {one_line(content, text_chars)}"] if content.strip() else []
    if not isinstance(content, list):
        return []
    lines = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            lines.append(f"{role}: {one_line(block['text'], text_chars)}")
        elif kind == "tool_use":
            lines.append(f"tool call {one_line(str(block.get('name') or '?'), 60)}: {_tool_input(block.get('input'))}")
        elif kind == "tool_result":
            text = _text_of(block.get("content"))
            rows = len(text.splitlines())
            outcome = "tool error" if block.get("is_error") else "tool result"
            more = f" ({rows} lines)" if rows > 1 else ""
            lines.append(f"{outcome}{more}: {one_line(text, 200) or '(empty)'}")
    return lines


@dataclass(frozen=True)
class NewPart:
    """What a transcript holds after the saved offset: its summary lines, the offset after them, and lines skipped."""

    lines: list[str]
    offset: int
    bad_lines: int


def new_part(data: bytes, start: int, *, chunk: int = TRANSCRIPT_CHUNK) -> NewPart:
    """The summary of the complete lines in `data` (the transcript's bytes from offset `start`).

    A last line without its newline is still being written: it is left for the next event. A line that
    is not JSON is counted and skipped, and so is a line longer than a whole `chunk`, which would
    otherwise hold the offset where it is for ever.
    """
    end = data.rfind(b"\n") + 1
    if end == 0 and len(data) >= chunk:
        return NewPart([], start + len(data), 1)
    lines: list[str] = []
    bad = 0
    for _, record in records(data[:end].splitlines()):
        if record is NOT_JSON:
            bad += 1
            continue
        lines.extend(summarise(record))
    return NewPart(lines, start + end, bad)


NOT_JSON: Any = object()  # what `records` gives for a line that is not JSON


def records(lines: Iterable[bytes], first: int = 1) -> Iterator[tuple[int, Any]]:
    """(line number, record) of each line of a transcript that is not blank; NOT_JSON for one that is not JSON.

    The one reader of transcripts: the hook skips a bad line, `fsmem import claude-code` refuses the file.
    """
    for number, raw in enumerate(lines, start=first):
        if not raw.strip():
            continue
        try:
            yield number, json.loads(raw)
        except ValueError:  # not JSON, not UTF-8, or a number too long to convert
            yield number, NOT_JSON


def read_from(path: str, offset: int) -> tuple[bytes, int]:
    """At most TRANSCRIPT_CHUNK bytes of the regular file `path` from `offset`, and where they start.

    A file now shorter than `offset` was replaced: it is read from its start.
    """
    fd, info = given.open_regular(path, what="the transcript")
    try:
        if info.st_size < offset:
            offset = 0
        os.lseek(fd, offset, os.SEEK_SET)
        parts = []
        left = TRANSCRIPT_CHUNK
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts), offset
    finally:
        os.close(fd)


def note_text(lines: list[str], *, first: bool) -> str:
    """The note block for `lines`: a heading, then the lines in a fenced block, so that consolidation files none
    of it into a document, within NOTE_CHARS."""
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > NOTE_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"… {len(lines) - len(kept)} more lines of this part left out")
    # a level-1 heading: consolidation takes a line of prose as an observation for topic/Inbox, a heading never
    heading = "# Claude Code session (transcript summary)" if first else "# Claude Code session, continued"
    return "\n".join([heading, *fenced(kept)])


def fenced(lines: list[str] | tuple[str, ...]) -> list[str]:
    """`lines` in fenced blocks of FENCE_LINES, each after a blank line: search ranks a block as one row, so a long
    session is many rows a few exchanges long, not one row of the whole event."""
    out: list[str] = []
    for start in range(0, len(lines), FENCE_LINES):
        out += ["", "```text", *lines[start : start + FENCE_LINES], "```"]
    return out


class Offsets:
    """The per-session byte offsets already saved, under `.fsmem/hooks/claude-code/` (host-local state)."""

    def __init__(self, root: Path):
        self.root = root

    def _path(self, session_id: str) -> Path:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return state_dir(self.root, *STATE) / f"{digest}.json"

    def lock(self, session_id: str) -> AbstractContextManager[None]:
        """The lock that keeps two events of one session from saving the same lines."""
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return file_lock(self.root, f"hook-{digest}", timeout=5.0)

    def get(self, session_id: str, transcript: str) -> int:
        """The offset saved for this session's transcript (0 when none, or for another transcript file)."""
        try:
            data = json.loads(self._path(session_id).read_text("utf-8"))
        except (OSError, ValueError):
            return 0
        if not isinstance(data, dict) or data.get("transcript") != transcript:
            return 0
        offset = data.get("offset")
        return offset if isinstance(offset, int) and offset >= 0 else 0

    def put(self, session_id: str, transcript: str, offset: int) -> None:
        record = {"session_id": session_id, "transcript": transcript, "offset": offset}
        atomic_write(self._path(session_id), json.dumps(record).encode("utf-8"), durable=False)
