"""Claude Code's transcripts: one `<session>.jsonl`, or a projects folder (`~/.claude/projects/`) of them.

Each transcript is read with the hook's own reader (`fsmem.hooks.claude_code.records`), line by line, so
a long one is never held whole; a line that is not JSON stops the import, naming the file and the line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from fsmem.hooks.claude_code import NOT_JSON, one_line, records, summarise
from fsmem.importers import TEXT_CHARS, Conversation, fault, utc


def transcripts(path: Path) -> list[Path]:
    """The transcripts at `path`: the file itself, or the regular `.jsonl` files of a folder and of its
    sub-folders (a projects folder holds `<project>/<session>.jsonl`), in a stable order."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise fault(str(path), "neither a transcript (.jsonl) nor a folder of them")
    found = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / name for name in sorted(files) if name.endswith(".jsonl")]
    return [p for p in found if stat.S_ISREG(os.lstat(p).st_mode)]  # no symlink, FIFO or device is opened


def read(path: Path) -> Iterator[Conversation]:
    """One conversation per transcript at `path` (one that says nothing is left out)."""
    for transcript in transcripts(path):
        conversation = _conversation(transcript)
        if conversation is not None:
            yield conversation


def _conversation(path: Path) -> Conversation | None:
    lines: list[str] = []
    session = summary = first_text = None
    started = ended = None
    with open(path, "rb") as stream:
        for number, record in records(stream):
            if record is NOT_JSON:
                raise fault(f"{path} line {number}", "not a JSON record of a Claude Code transcript")
            if not isinstance(record, dict):
                raise fault(f"{path} line {number}", "not a JSON object")
            if session is None and isinstance(record.get("sessionId"), str) and record["sessionId"].strip():
                session = record["sessionId"].strip()
            if record.get("type") == "summary" and isinstance(record.get("summary"), str):
                summary = summary or record["summary"]
            when = utc(record.get("timestamp"))
            if when is not None:
                started = when if started is None else min(started, when)
                ended = when if ended is None else max(ended, when)
            said = summarise(record, text_chars=TEXT_CHARS)
            if first_text is None:
                first_text = next((line[len("user: ") :] for line in said if line.startswith("user: ")), None)
            lines.extend(said)
        end = stream.tell()
    if not lines:
        return None
    title = summary or first_text or path.stem
    return Conversation(
        source="claude-code",
        key=session or path.stem,
        title=one_line(title, 120),
        started=started,
        ended=ended,
        lines=tuple(lines),
        where=str(path),
        transcript=os.path.abspath(path),
        transcript_end=end,
    )
