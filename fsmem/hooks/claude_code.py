"""Claude Code's hook events and transcripts, read as fsmem needs them: the event, one summary line per message.

Claude Code runs a hook with one JSON object on standard input (`session_id`,
`transcript_path`, `cwd`, `hook_event_name`). The transcript is a JSONL file
that only grows. The hook and `fsmem import claude-code` render its records with
the same functions here (`summarise`, `title_of`), and keep the same record of
what of it the memory holds (the session note's front matter:
`fsmem.importers.notes`), so either may follow the other. `Pending` is the
host-local list of transcripts whose saving an event left unfinished, for the
next command to finish. Parsing and summarising are pure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument
from fsmem.names import STATE_DIR
from fsmem.state_files import read_state
from fsmem.store.files import atomic_write, state_dir

EVENTS = ("SessionStart", "SessionEnd", "PreCompact", "Stop", "UserPromptSubmit")
SAVING_EVENTS = ("SessionEnd", "PreCompact")
STDIN_LIMIT = 1 << 20  # the event object is small; a megabyte is ample
TEXT_CHARS = 2_000  # one message's text in a session note, whoever saved it; a tool call or result is one short line
LINE_CHARS = 300  # a short line: a tool call's input
FENCE_LINES = 8  # lines per fenced block: each block is one row of a search answer, a few exchanges long
STATE = ("hooks", "claude-code")
LINE_LIMIT = 64 << 20  # bytes of a transcript line held; a longer one is read past, as a line that is no record
_SKIP_CHUNK = 1 << 20
MAX_FAILURES = 3  # attempts to finish a pending transcript that fail before it is dropped from the list


@dataclass(frozen=True)
class HookEvent:
    """The fields of a Claude Code hook event that fsmem uses."""

    name: str
    session_id: str
    transcript_path: str | None
    cwd: str | None
    stop_hook_active: bool = False  # Stop: Claude Code goes on because a Stop hook blocked it already
    prompt: str | None = None  # UserPromptSubmit: what the person typed (untrusted, of any length)


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
    prompt = data.get("prompt")
    return HookEvent(
        name=name,
        session_id=_NOT_TEXT.sub("\ufffd", session.strip()),  # as a transcript's records name it: text a note holds
        transcript_path=path if isinstance(path, str) and path else None,
        cwd=cwd if isinstance(cwd, str) else None,
        stop_hook_active=data.get("stop_hook_active") is not False,  # anything but a plain false: never block
        prompt=prompt if isinstance(prompt, str) else None,
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


def summarise(record: Any, *, text_chars: int = TEXT_CHARS) -> list[str]:
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


# what Claude Code writes into a user message for a slash command, a shell escape or a hook: never a title
_MARKUP = re.compile(
    r"^\s*(<(command-name|command-message|command-args|command-contents|local-command-stdout|local-command-stderr"
    r"|local-command-caveat|bash-input|bash-stdout|bash-stderr|system-reminder|user-prompt-submit-hook)>"
    r"|\[Request interrupted by user|Caveat: The messages below were generated by the user while running local)"
)


def title_of(record: Any) -> str | None:
    """The title this record gives its session, if it is the first that gives one: a `summary` record's summary, or
    the text a person typed (never a slash command's markup, a command's output or a tool result)."""
    if not isinstance(record, dict):
        return None
    if record.get("type") == "summary":
        summary = record.get("summary")
        return one_line(summary, 120) if isinstance(summary, str) and summary.strip() else None
    if record.get("type") != "user" or record.get("isMeta") or not isinstance(record.get("message"), dict):
        return None
    text = _text_of(record["message"].get("content"))
    if not text.strip() or _MARKUP.match(text):
        return None
    return one_line(text, 120)


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


NOT_JSON: Any = object()  # what `records` gives for a line that is not JSON


@dataclass(frozen=True)
class Line:
    """One line of a transcript as `read_line` reads it: its bytes (None for one past LINE_LIMIT, never held), the
    bytes it takes in the file, and whether it ends with its newline (a last line may still be being written)."""

    raw: bytes | None
    size: int
    whole: bool


def read_line(stream: Any, limit: int = LINE_LIMIT) -> Line:
    """The next line of the binary `stream`, held only when it is at most `limit` bytes; a longer line is read past
    a megabyte at a time, so a transcript of one line of gigabytes (a sparse file, a runaway tool output) costs
    time in proportion to its size and no more memory than `limit`. A size of 0 is the end of the file."""
    raw = stream.readline(limit + 1)
    if len(raw) <= limit or raw.endswith(b"\n"):
        return Line(raw, len(raw), raw.endswith(b"\n"))
    size = len(raw)
    del raw
    while True:
        chunk = stream.readline(_SKIP_CHUNK)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return Line(None, size, bool(chunk))


def records(lines: Iterable[bytes], first: int = 1) -> Iterator[tuple[int, Any]]:
    """(line number, record) of each line of a transcript that is not blank; NOT_JSON for one that is not JSON."""
    for number, raw in enumerate(lines, start=first):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if _NOT_TEXT_ESCAPE.search(raw):
                record = storable_text(record)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, a number too long to convert, nested too deep
            record = NOT_JSON
        yield number, record


_NOT_TEXT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def storable_text(value: Any) -> Any:
    """Parsed JSON `value` with each lone surrogate and NUL in its strings made U+FFFD. JSON may escape either
    (`"\\ud83d"`: a JavaScript string cut inside an emoji; `"\\u0000"`: a tool's binary output): UTF-8 cannot hold
    the one, so no note holding it could be written, and a note holding the other is no text to grep or search."""
    return replaced_in_strings(value, _NOT_TEXT)


def replaced_in_strings(value: Any, pattern: re.Pattern[str]) -> Any:
    """Parsed JSON `value` with what `pattern` matches in its strings, keys included, made U+FFFD."""
    if isinstance(value, str):
        return pattern.sub("\ufffd", value)
    if isinstance(value, list):
        return [replaced_in_strings(item, pattern) for item in value]
    if isinstance(value, dict):
        return {replaced_in_strings(key, pattern): replaced_in_strings(item, pattern) for key, item in value.items()}
    return value


def fenced(lines: list[str] | tuple[str, ...]) -> list[str]:
    """`lines` in fenced blocks of FENCE_LINES, each after a blank line: search ranks a block as one row, so a long
    session is many rows a few exchanges long, not one row of the whole event."""
    out: list[str] = []
    for start in range(0, len(lines), FENCE_LINES):
        out += ["", "```text", *lines[start : start + FENCE_LINES], "```"]
    return out


class Pending:
    """Transcripts whose saving an event left unfinished (its time ran out), under `.fsmem/hooks/claude-code/pending/`.

    Host-local: the paths are this machine's. What of each is in the memory is the session note's record, not
    this; an entry only says that the next command (an event, `import`, `consolidate`) should finish it.
    """

    def __init__(self, root: Path):
        self.root = root

    def _path(self, transcript: str) -> Path:
        digest = hashlib.sha256(transcript.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return state_dir(self.root, *STATE, "pending") / f"{digest}.json"

    def add(self, transcript: str, session: str) -> None:
        self._write(transcript, session, self._failures(transcript))

    def failed(self, transcript: str, session: str) -> bool:
        """Count one more attempt to finish `transcript` that failed; True when it was the last (MAX_FAILURES),
        and the entry is dropped: a save that fails each time (a note that is not UTF-8) is not retried, and
        logged, at every event of every session for ever."""
        failures = self._failures(transcript) + 1
        if failures >= MAX_FAILURES:
            self.done(transcript)
            return True
        self._write(transcript, session, failures)
        return False

    def _write(self, transcript: str, session: str, failures: int) -> None:
        record: dict[str, Any] = {"transcript": transcript, "session_id": session}
        if failures:
            record["failures"] = failures
        data = json.dumps(record).encode("utf-8")
        atomic_write(self._path(transcript), data, durable=False, root=self.root, generated=True)

    def _failures(self, transcript: str) -> int:
        """How many attempts to finish `transcript` failed so far (0 when it is not listed)."""
        try:
            data = json.loads(read_state(self._path(transcript)).decode("utf-8"))
        except (OSError, ValueError):
            return 0
        failures = data.get("failures") if isinstance(data, dict) else None
        return failures if isinstance(failures, int) and not isinstance(failures, bool) and failures > 0 else 0

    def done(self, transcript: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(transcript).unlink()

    def entries(self) -> list[tuple[str, str]]:
        """(transcript, session id) of each unfinished transcript, oldest first."""
        folder = self.root.joinpath(STATE_DIR, *STATE, "pending")
        found = []
        try:
            paths = sorted(folder.glob("*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))
        except OSError:
            return []
        for path in paths:
            try:
                data = json.loads(read_state(path).decode("utf-8"))
                transcript, session = data["transcript"], data["session_id"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if isinstance(transcript, str) and isinstance(session, str):
                found.append((transcript, session))
        return found


def legacy_offset(root: Path, session_id: str, transcript: str) -> int | None:
    """The byte offset that the hook before fsmem kept one record in the note kept for this transcript, if any."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    try:
        data = json.loads(read_state(root.joinpath(STATE_DIR, *STATE, f"{digest}.json")).decode("utf-8"))
    except (OSError, ValueError):
        return None
    offset = data.get("offset") if isinstance(data, dict) and data.get("transcript") == transcript else None
    return offset if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0 else None
