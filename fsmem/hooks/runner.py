"""What `fsmem hook claude-code` does for each event, over an open `Memory`: give context, or save the session.

Every problem is the caller's to log, never Claude Code's: the command maps
anything raised here to a log line and exit 0 (`fsmem.cli.hook`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fsmem.errors import FsmemError
from fsmem.hooks import claude_code as cc

if TYPE_CHECKING:
    from fsmem.memory import Memory


@dataclass
class Outcome:
    """What the hook did: what it prints for Claude Code, and what it logs."""

    stdout: str = ""
    saved_lines: int = 0
    note: str | None = None
    problems: list[str] = field(default_factory=list)
    finished: bool = True  # False: the time budget ran out; the next command finishes the rest
    subagent_lines: int = 0


def session_start(memory: Memory) -> Outcome:
    """The memory's context block as `fsmem context` prints it (controls shown as text, as the prompt hook's block
    is: `fsmem.hooks.prompting`), as the SessionStart JSON whose `additionalContext` Claude Code adds."""
    from fsmem.cli.printing import visible

    block = visible(memory.context().to_text())
    answer = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": block}}
    return Outcome(stdout=json.dumps(answer, ensure_ascii=False))


def save_session(memory: Memory, event: cc.HookEvent, *, deadline: float | None = None) -> Outcome:
    """The transcript's lines that its session note does not hold yet, saved whatever their length, then those of
    the session's subagents, then what earlier events left unfinished, until `deadline` (`time.monotonic()`).

    What the deadline leaves is listed as pending for the next command; a line that the secrets policy refuses
    is left out (and named in `problems`), the rest is saved.
    """
    from fsmem.operations.transcripts import finish_pending, save_transcript

    outcome = Outcome()
    if not event.session_id:
        outcome.problems.append(f"{event.name}: the event has no session_id; nothing saved")
        return outcome
    if event.transcript_path is None:
        outcome.problems.append(f"{event.name}: the event has no transcript_path; nothing saved")
        return outcome
    saved = save_transcript(memory, event.transcript_path, session=event.session_id, deadline=deadline)
    outcome.problems += saved.problems
    if saved.note is not None:
        outcome.note, outcome.saved_lines = Path(saved.note).stem, saved.lines
    outcome.finished = saved.finished
    pending = cc.Pending(memory.root)
    for subagent in _subagents(event.transcript_path):
        if deadline is not None and time.monotonic() >= deadline:
            pending.add(os.path.abspath(subagent), event.session_id)
            outcome.finished = False
            continue
        try:
            done = save_transcript(memory, str(subagent), session=event.session_id, deadline=deadline)
        except (FsmemError, OSError) as exc:  # one subagent's broken file keeps none of the others out
            outcome.problems.append(f"{subagent.name}: {exc}")
            continue
        outcome.problems += done.problems
        outcome.subagent_lines += done.lines
        outcome.finished = outcome.finished and done.finished
    if deadline is None or time.monotonic() < deadline:
        for other in finish_pending(memory, deadline=deadline):
            outcome.problems += other.problems
    return outcome


def _subagents(transcript: str) -> list[Path]:
    """The session's subagent transcripts: `<session>/subagents/*.jsonl` beside `<session>.jsonl`."""
    folder = Path(transcript).with_suffix("") / "subagents"
    try:
        return sorted(p for p in folder.glob("*.jsonl") if p.is_file() and not p.is_symlink())
    except OSError:
        return []
