"""Claude Code's transcripts: one `<session>.jsonl`, a projects folder (`~/.claude/projects/`) of them, and a part of one.

The hook and `fsmem import claude-code` read a transcript with the same functions: `read_part` renders the
complete lines from a byte offset (with `fsmem.hooks.claude_code.summarise`), and what a session is called
(`identity`, `title_of`) comes from its records, so that whoever saves a line renders it the same way. A
subagent's transcript (`<session>/subagents/agent-<id>.jsonl`, its records `isSidechain` with an `agentId`)
carries its parent's `sessionId`: it is its own conversation, keyed `<session>-agent-<id>`, naming its parent.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.hooks.claude_code import NOT_JSON, one_line, read_line, records, session_name, summarise, title_of
from fsmem.importers import CWD_CHARS, Conversation, bounded_key, fault, utc
from fsmem.store import outside_files


def transcripts(path: Path) -> list[Path]:
    """The transcripts at `path`: the file itself, or the regular `.jsonl` files of a folder and of its
    sub-folders (a projects folder holds `<project>/<session>.jsonl` and `<project>/<session>/subagents/`), in a
    stable order."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise fault(str(path), "neither a transcript (.jsonl) nor a folder of them")
    found = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".jsonl")]
    return [p for p in found if stat.S_ISREG(os.lstat(p).st_mode)]  # no symlink, FIFO or device is opened


@dataclass
class Part:
    """What a transcript holds from byte `start` to `end`: its summary lines and what its records say of it.

    `end` is after the last complete line read; `at_end` says nothing complete follows it (yet). `bad` holds the
    line numbers (counted from `start`) that are not a JSON object.
    """

    start: int
    end: int = 0
    lines: list[str] = field(default_factory=list)
    session: str | None = None
    agent: str | None = None
    title: str | None = None
    started: _dt.datetime | None = None
    ended: _dt.datetime | None = None
    bad: list[int] = field(default_factory=list)
    at_end: bool = False
    cwd: str | None = None  # the working folder the part's first record that names one names


def read_part(path: str | os.PathLike[str], start: int, limit: int | None = None) -> Part:
    """The complete lines of the transcript `path` from byte `start`, stopping once `limit` bytes are read.

    A last line without its newline is taken only when it is a whole JSON object; otherwise it is still being
    written, and is left for whoever reads next. Nothing past the size the file had when opened is read but the
    end of the line that size cuts: a transcript written faster than it is read would never be finished.
    """
    fd, _ = outside_files.open_regular(path, what="the transcript")
    with os.fdopen(fd, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        stream.seek(start)
        return _read(stream, start, limit, size)


def _read(stream: Any, start: int, limit: int | None, size: int) -> Part:
    part = Part(start=start, end=start)
    number = 0
    while (limit is None or part.end - start < limit) and part.end < size:
        line = read_line(stream)
        if not line.size:
            part.at_end = True
            break
        number += 1
        ((_, record),) = (list(records([line.raw])) or [(0, None)]) if line.raw is not None else [(0, NOT_JSON)]
        if not line.whole and (record is NOT_JSON or not isinstance(record, dict)):
            part.at_end = True  # still being written
            break
        part.end += line.size
        if record is None:
            continue
        if record is NOT_JSON or not isinstance(record, dict):
            part.bad.append(number)
            continue
        _take(part, record)
    else:
        part.at_end = not stream.peek(1) if hasattr(stream, "peek") else False
    return part


def _take(part: Part, record: dict[str, Any]) -> None:
    if part.session is None and isinstance(record.get("sessionId"), str) and record["sessionId"].strip():
        part.session = record["sessionId"].strip()
    if part.agent is None and record.get("isSidechain") is True and isinstance(record.get("agentId"), str):
        part.agent = record["agentId"].strip() or None
    if part.title is None:
        part.title = title_of(record)
    if part.cwd is None and isinstance(record.get("cwd"), str) and 0 < len(record["cwd"].strip()) <= CWD_CHARS:
        part.cwd = record["cwd"]
    when = utc(record.get("timestamp"))
    if when is not None:
        part.started = when if part.started is None else min(part.started, when)
        part.ended = when if part.ended is None else max(part.ended, when)
    part.lines.extend(summarise(record))


@dataclass(frozen=True)
class Identity:
    """Whose transcript a file is: its session, and for a subagent's, the agent (its parent being the session)."""

    session: str
    agent: str | None = None

    @property
    def key(self) -> str:
        """The conversation's key: the session id, or `<session>-agent-<id>` for a subagent's transcript."""
        return bounded_key(self.session if self.agent is None else f"{self.session}-agent-{self.agent}")

    @property
    def parent(self) -> str | None:
        """The parent session's note name, for a subagent's transcript."""
        return None if self.agent is None else session_name(bounded_key(self.session))


def identity(path: str | os.PathLike[str], session: str | None = None) -> Identity:
    """Whose transcript `path` is: `session` (the hook event's), else the session id that names the file (Claude
    Code names it so, and the hook's event carries it), else the one its first records name.

    A file under a `subagents/` folder whose records name no agent is its parent's subagent all the same,
    named by its file name.
    """
    fd, _ = outside_files.open_regular(path, what="the transcript")
    found = Part(start=0)
    with os.fdopen(fd, "rb") as stream:
        for _, record in records(_first_lines(stream)):
            if isinstance(record, dict):
                _take(found, record)
            if found.session is not None and (found.agent is not None or record_is_main(record)):
                break
    where = Path(path)
    agent = found.agent
    if agent is None and where.parent.name == "subagents":
        agent = where.stem.removeprefix("agent-")
    if session is None and agent is None and _SESSION_FILE.match(where.stem):
        session = where.stem  # a resumed session's file starts with records of the session it resumed
    return Identity(session or found.session or where.stem, agent)


_SESSION_FILE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")  # <session id>.jsonl


def record_is_main(record: Any) -> bool:
    return isinstance(record, dict) and record.get("isSidechain") is False


def _first_lines(stream: Any, count: int = 20) -> Iterator[bytes]:
    for _ in range(count):
        line = read_line(stream)
        if not line.size:
            return
        if line.raw is not None:
            yield line.raw


def read(path: Path) -> Iterator[Conversation]:
    """One conversation per transcript at `path` (one that says nothing is left out); a line that is not JSON stops
    the import, naming its file and line."""
    for transcript in transcripts(path):
        conversation = _conversation(transcript)
        if conversation is not None:
            yield conversation


def _conversation(path: Path) -> Conversation | None:
    part = read_part(path, 0)
    if part.bad:
        raise fault(f"{path} line {part.bad[0]}", "not a JSON record of a Claude Code transcript")
    if not part.lines:
        return None
    who = identity(path)
    return Conversation(
        source="claude-code",
        key=who.key,
        title=part.title or one_line(path.stem, 120),
        started=part.started,
        ended=part.ended,
        lines=tuple(part.lines),
        where=str(path),
        transcript=os.path.abspath(path),
        transcript_end=part.end,
        parent=who.parent,
        cwd=part.cwd,
    )
