"""Running a consolidation: the lock, `apply` (careful writes), retries, the report and the log line."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem import format as fmt
from fsmem.consolidate import extractors as ex, plan as C
from fsmem.errors import LockTimeout
from fsmem.store.files import atomic_write, file_lock, state_dir

if TYPE_CHECKING:
    from fsmem.memory import Memory

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
)
LOG_FILE = "consolidate.jsonl"


@dataclass
class ConsolidationReport:
    """What one `fsmem consolidate` run did (or, with dry_run, would do)."""

    dry_run: bool = False
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_NAMES, 0))
    files_written: list[str] = field(default_factory=list)
    notes_archived: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    index_changed: bool = False
    attempts: int = 0
    diff: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dry_run": self.dry_run, **self.counts}
        data.update(
            files_written=self.files_written,
            notes_archived=self.notes_archived,
            conflicts=self.conflicts,
            problems=[{"path": p, "line": n, "message": m} for p, n, m in self.problems],
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
        verb = "would consolidate" if self.dry_run else "consolidated"
        lines.append(
            f"{verb} {c['notes_consolidated']} of {c['notes_read']} note(s): {c['facts_added']} fact(s) added, "
            f"{c['facts_confirmed']} confirmed, {c['superseded']} superseded, {c['retracted']} retracted, "
            f"{c['observations_added']} observation(s) added, {c['observations_merged']} merged"
        )
        if not self.dry_run:
            index = "; INDEX.md updated" if self.index_changed else ""
            archived = f"; {len(self.notes_archived)} note(s) archived" if self.notes_archived else ""
            lines.append(f"{len(self.files_written)} file(s) written{archived}{index}")
        return "\n".join(lines)

    @property
    def empty(self) -> bool:
        return self.counts["notes_read"] == 0

    def add(self, plan: C.Plan) -> None:
        for name in COUNT_NAMES:
            self.counts[name] += plan.counts.get(name, 0)
        for problem in plan.problems:
            if problem not in self.problems:
                self.problems.append(problem)


class _Writes:
    """Counts file writes; with FSMEM_CONSOLIDATE_KILL_AFTER=N the process SIGKILLs itself after write N."""

    def __init__(self) -> None:
        raw = os.environ.get(C.KILL_ENV, "")
        self.kill_after = int(raw) if raw.isdigit() else None
        self.count = 0

    def done(self) -> None:
        self.count += 1
        if self.kill_after is not None and self.count >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def apply(root: Path, plan: C.Plan, report: ConsolidationReport, writes: _Writes, progress: C.Progress | None) -> None:
    """Write the plan: documents first, then the `consolidated:` marks of the notes they took nothing back from.

    Each file is replaced only if it still holds the bytes the plan was made
    from; otherwise it is left alone, reported as a conflict, and the notes
    feeding it stay unmarked so the next attempt (or run) merges them again.
    """
    blocked: set[str] = set()
    documents = [c for c in plan.changes if c.kind == "document"]
    notes = [c for c in plan.changes if c.kind == "note"]
    total = len(documents) + len(notes)
    number = 0
    for chunk in _chunks(documents):
        with file_lock(root):  # held for a few writes at a time, so Memory.write/note interleave
            for change in chunk:
                number += 1
                if progress:
                    progress("writing", number, total)
                path = root / change.path
                expected = None if change.old is None else change.old.encode("utf-8")
                if _current(path) != expected:
                    report.conflicts.append(change.path)
                    blocked |= plan.feeds.get(change.path, set())
                    continue
                atomic_write(path, change.new.encode("utf-8"))
                writes.done()
                report.files_written.append(change.path)
    for chunk in _chunks(notes):
        with file_lock(root):
            for change in chunk:
                number += 1
                if progress:
                    progress("writing", number, total)
                if change.path in blocked:
                    report.counts["notes_consolidated"] -= 1
                    continue
                if _mark_note(root / change.path, change):
                    writes.done()
                    report.files_written.append(change.path)


def _chunks(changes: list[C.Change], size: int = 32) -> list[list[C.Change]]:
    return [changes[i : i + size] for i in range(0, len(changes), size)]


def _mark_note(path: Path, change: C.Change) -> bool:
    """Set `consolidated:` on the note as it is now; it may have grown since it was read, and keeps what was added."""
    data = _current(path)
    if data is None:
        return False
    text, bad = fmt.decode(data)
    if bad or fmt.split(text).problems:
        return False
    marked = fmt.set_fields(text, {C.CONSOLIDATED_FIELD: C.body_digest(change.new)})
    if marked == text:
        return False
    atomic_write(path, marked.encode("utf-8"))
    return True


def archive(root: Path, settings: C.Settings, report: ConsolidationReport) -> None:
    """Move fully consolidated notes to the archive folder (never overwriting anything there)."""
    folder = root / C.SESSIONS
    from fsmem.store.catalog import walk
    from fsmem.store.paths import relative

    for path in walk(root, folder) if folder.is_dir() else []:
        rel = relative(root, path)
        with file_lock(root):
            data = _current(path)
            if data is None:
                continue
            text, bad = fmt.decode(data)
            if bad or fmt.split(text).front_matter.get(C.CONSOLIDATED_FIELD) != C.body_digest(text):
                continue
            target = root / settings.archive_dir / rel[len(C.SESSIONS) + 1 :]
            if target.exists():
                report.problems.append(
                    (rel, 1, f"not archived: {settings.archive_dir}/{rel[len(C.SESSIONS) + 1 :]} exists")
                )
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(path, target)
        report.notes_archived.append(rel)


def unified_diff(plan: C.Plan) -> str:
    parts = []
    for change in sorted(plan.changes, key=lambda c: (c.kind != "document", c.path)):
        old = (change.old or "").splitlines(keepends=True)
        new = change.new.splitlines(keepends=True)
        source = "/dev/null" if change.old is None else f"a/{change.path}"
        parts.extend(difflib.unified_diff(old, new, source, f"b/{change.path}"))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in parts)


def run(memory: Memory, *, dry_run: bool = False, progress: C.Progress | None = None) -> ConsolidationReport:
    """One consolidation of `memory`; refuses to overlap another one."""
    from fsmem.consolidate import index_md

    root = memory.root
    settings = C.Settings.from_section(memory.config.section("consolidate"))
    extractors = ex.load(settings.extractors)
    report = ConsolidationReport(dry_run=dry_run)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(root, "consolidate", wait=False))
        except LockTimeout:
            raise LockTimeout(
                "another 'fsmem consolidate' is running on this memory; this run changed nothing "
                "(notes written meanwhile are consolidated by the next run)"
            ) from None
        writes = _Writes()
        for attempt in range(1, settings.max_attempts + 1):
            report.attempts = attempt
            inputs = C.gather(root, settings, extractors, progress)
            plan = C.plan(inputs, settings)
            report.add(plan)
            if dry_run:
                report.diff = unified_diff(plan)
                return report
            conflicts_before = len(report.conflicts)
            apply(root, plan, report, writes, progress)
            if len(report.conflicts) == conflicts_before:
                break
            if attempt < settings.max_attempts:
                report.conflicts = report.conflicts[:conflicts_before]  # retried: only a final conflict is reported
        if settings.archive:
            archive(root, settings, report)
        report.index_changed = index_md.write_index(memory)
        if report.index_changed:
            writes.done()
        _log(root, report, time.monotonic() - started)
        return report


def _log(root: Path, report: ConsolidationReport, seconds: float) -> None:
    """One JSON line per run in .fsmem/logs/consolidate.jsonl (machine state; the only wall-clock value)."""
    entry = {
        "time": fmt.now_iso(),
        "seconds": round(seconds, 3),
        **report.counts,
        "files_written": len(report.files_written),
        "conflicts": report.conflicts,
        "problems": len(report.problems),
        "index_changed": report.index_changed,
    }
    path = state_dir(root, "logs") / LOG_FILE
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
