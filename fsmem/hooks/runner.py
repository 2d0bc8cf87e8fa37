"""What `fsmem hook claude-code` does for each event, over an open `Memory`: give context, or save the session.

Every problem is the caller's to log, never Claude Code's: the command maps
anything raised here to a log line and exit 0 (`fsmem.cli.hook`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fsmem.errors import SecretFound
from fsmem.format import secrets
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


def session_start(memory: Memory) -> Outcome:
    """The memory's context block, as the SessionStart JSON whose `additionalContext` Claude Code adds."""
    block = memory.context().to_text()
    answer = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": block}}
    return Outcome(stdout=json.dumps(answer, ensure_ascii=False))


def save_session(memory: Memory, event: cc.HookEvent) -> Outcome:
    """The transcript's lines after the saved offset, appended to the session's note; the offset moved past them.

    A line that the secrets policy refuses is left out (and named in `problems`), the rest is saved.
    """
    outcome = Outcome()
    if not event.session_id:
        outcome.problems.append(f"{event.name}: the event has no session_id; nothing saved")
        return outcome
    if event.transcript_path is None:
        outcome.problems.append(f"{event.name}: the event has no transcript_path; nothing saved")
        return outcome
    offsets = cc.Offsets(memory.root)
    with offsets.lock(event.session_id):
        start = offsets.get(event.session_id, event.transcript_path)
        data, start = cc.read_from(event.transcript_path, start)
        part = cc.new_part(data, start)
        if part.bad_lines:
            outcome.problems.append(f"{part.bad_lines} transcript lines are not JSON; skipped")
        kept = []
        for number, line in enumerate(part.lines, start=1):
            try:
                kept.append(secrets.screen(line, memory.secrets_policy, f"transcript line {number}"))
            except SecretFound as exc:
                outcome.problems.append(f"{exc}; that line is left out")
        if kept:
            outcome.note = cc.session_name(event.session_id)
            memory.note(cc.note_text(kept, first=start == 0), session=outcome.note)
            outcome.saved_lines = len(kept)
        if part.offset != start or start == 0:
            offsets.put(event.session_id, event.transcript_path, part.offset)
    return outcome
