"""What one `fsmem consolidate` run did (or, with dry_run, would do): counts, files, problems, held-back notes.

A run is told apart by what an operator must do about it (`fsmem consolidate`'s exit codes): nothing new,
something consolidated, or something skipped that a person must fix (`skipped`). The command prints each
line after the run's time (`to_log`), so a log that a scheduler appends to says when; `to_text` is the same
report without it, for commit messages and tool answers, which carry their own time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.consolidate.plan import Plan

# How a problem that left a note or document out ends: it stays out, run after run, until a person fixes it.
SKIPPED = ("; note skipped", "; notes skipped", "; document skipped")

COUNT_NAMES = (
    "notes_read",
    "notes_consolidated",
    "facts_added",
    "facts_confirmed",
    "superseded",
    "retracted",
    "observations_added",
    "observations_merged",
    "documents_read",
    "sessions_digested",
)


@dataclass
class ConsolidationReport:
    """What one `fsmem consolidate` run did (or, with dry_run, would do)."""

    dry_run: bool = False
    time: str = ""  # when the run started, ISO 8601 with its UTC offset (FSMEM_NOW when set)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_NAMES, 0))
    files_written: list[str] = field(default_factory=list)
    # where each file written really is: through an in-memory link, the file it leads to (what history commits)
    landed: list[str] = field(default_factory=list, repr=False)
    notes_archived: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    held_back: list[tuple[str, str]] = field(default_factory=list)  # (note, its date) dated after today
    temp_files_removed: list[str] = field(default_factory=list)
    index_changed: bool = False
    attempts: int = 0
    diff: str = ""

    def wrote(self, done: list[tuple[Path, bytes, str, str]]) -> None:
        """Files written, each (where, bytes, memory path as the run names it, memory path it landed on)."""
        self.files_written += [rel for _full, _data, rel, _landed in done]
        self.landed += [landed for *_, landed in done]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"time": self.time, "dry_run": self.dry_run, **self.counts}
        data.update(
            files_written=self.files_written,
            notes_archived=self.notes_archived,
            conflicts=self.conflicts,
            problems=[{"path": p, "line": n, "message": m} for p, n, m in self.problems],
            skipped=self.skipped,
            held_back=[{"path": p, "date": d} for p, d in self.held_back],
            temp_files_removed=self.temp_files_removed,
            index_changed=self.index_changed,
            attempts=self.attempts,
        )
        if self.dry_run:
            data["diff"] = self.diff
        return data

    def to_text(self) -> str:
        c = self.counts
        lines = []
        if self.dry_run:
            lines.append(self.diff.rstrip("\n") if self.diff else "(nothing would change)")
        lines += [f"{p}:{n}: {m}" for p, n, m in self.problems]
        lines += [f"{p}: changed on disk while consolidating; left as it is, retried next run" for p in self.conflicts]
        lines += [f"{p}: dated {d}, after today: held back until then" for p, d in self.held_back]
        if self.temp_files_removed:
            lines.append(f"removed {len(self.temp_files_removed)} temporary file(s) left by an interrupted write")
        verb = "would consolidate" if self.dry_run else "consolidated"
        lines.append(
            f"{verb} {c['notes_consolidated']} of {c['notes_read']} note(s): {c['facts_added']} fact(s) added, "
            f"{c['facts_confirmed']} confirmed, {c['superseded']} superseded, {c['retracted']} retracted, "
            f"{c['observations_added']} observation(s) added, {c['observations_merged']} merged"
            + (f", {c['sessions_digested']} session(s) digested" if c["sessions_digested"] else "")
        )
        if not self.dry_run:
            index = "; INDEX.md updated" if self.index_changed else ""
            archived = f"; {len(self.notes_archived)} note(s) archived" if self.notes_archived else ""
            lines.append(f"{len(self.files_written)} file(s) written{archived}{index}")
        return "\n".join(lines)

    def to_log(self) -> str:
        """`to_text` with each line after the run's time, as `fsmem consolidate` prints it (a dry run's diff
        stays as it is, so it still applies)."""
        text = self.to_text()
        diff = self.diff.rstrip("\n") if self.dry_run and self.diff else ""
        head, rest = (diff, text[len(diff) :].lstrip("\n")) if diff else ("", text)
        timed = "\n".join(f"{self.time} {line}" if self.time else line for line in rest.split("\n"))
        return f"{head}\n{timed}" if head else timed

    @property
    def skipped(self) -> list[str]:
        """The notes and documents this run left out for a problem a person must fix (exit 3 on the CLI)."""
        return sorted({path for path, _, message in self.problems if message.endswith(SKIPPED)})

    @property
    def empty(self) -> bool:
        return self.counts["notes_read"] == 0 and self.counts["sessions_digested"] == 0

    def add(self, plan: Plan) -> None:
        """Add one attempt's counts and findings (a retry only plans what the earlier attempts left)."""
        for name in COUNT_NAMES:
            self.counts[name] += plan.counts.get(name, 0)
        for problem in plan.problems:
            if problem not in self.problems:
                self.problems.append(problem)
        self.held_back = list(plan.held_back)
