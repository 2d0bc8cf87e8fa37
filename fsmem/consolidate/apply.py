"""Running a consolidation: the locks, `apply` (careful writes: `batch_writes`), retries, the archive, INDEX.md and
the log line."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from fsmem import format as fmt
from fsmem.consolidate import digest_run, extractors as ex, ledger as L, plan as C, subjects
from fsmem.consolidate.batch_writes import Writes, write_batch
from fsmem.consolidate.dates import SESSIONS
from fsmem.consolidate.notes import NoteEntry
from fsmem.consolidate.relink import relink
from fsmem.consolidate.report import COUNT_NAMES, ConsolidationReport
from fsmem.errors import ConsolidationRunning, FsmemError, LockTimeout
from fsmem.store import beneath
from fsmem.store.cache import chunks
from fsmem.store.files import append_lines, file_lock, remove_temp_files, state_dir

__all__ = ["COUNT_NAMES", "ConsolidationReport", "apply", "run", "unified_diff"]
LOG_FILE = "consolidate.jsonl"
CHUNK = 256  # files written per hold of the write lock (a fraction of a second), so Memory.write/note interleave


def _current(path: Path) -> bytes | None:
    """The file's bytes now; None when there is no file to read (gone, or made a folder or unreadable since it was
    planned: the write then finds it taken, and counts a conflict instead of failing the run)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


READ_ONLY = "read-only (no one may write it): left as a person made it, and the notes for it wait (chmod u+w)"


def _read_only(full: Path) -> bool:
    """Whether a person made the file read-only (`beneath.read_only`): consolidation leaves it as it is."""
    try:
        return beneath.read_only(full.stat())
    except OSError:
        return False


def _real(root: Path, change: C.Change) -> Path:
    """Where a file's bytes live, checked by the memory's path rule (when it was read): a link stays a link."""
    from fsmem.store.paths import resolve

    full = change.full if change.full is not None else resolve(root, change.path)
    return Path(os.path.realpath(full)) if os.path.islink(full) else full


def apply(
    root: Path,
    plan: C.Plan,
    report: ConsolidationReport,
    writes: Writes,
    progress: C.Progress | None,
    ledger: L.Ledger | None = None,
) -> dict[str, subjects.DirectoryEntry]:
    """Write the plan: documents first, then the `consolidated:` marks of the notes they took nothing back from.

    Each file is replaced only if it still holds the bytes the plan was made
    from; otherwise it is left alone, reported as a conflict, and the notes
    feeding it stay unmarked so the next attempt (or run) merges them again.
    Returns directory entries of the documents written, for INDEX.md.
    """
    blocked: set[str] = set()
    fresh: dict[str, subjects.DirectoryEntry] = {}
    documents = [c for c in plan.changes if c.kind == "document"]
    notes = [c for c in plan.changes if c.kind == "note"]
    tick = _ticker(progress, len(documents) + len(notes))
    consolidated: set[str] = set()
    for chunk in chunks(documents, CHUNK):
        with file_lock(root):
            batch = []
            for change in chunk:
                tick()
                try:
                    full = _real(root, change)
                except FsmemError as exc:
                    report.problems.append((change.path, 1, f"{exc}; document skipped"))
                    blocked |= plan.feeds.get(change.path, set())
                    continue
                read = None if change.old is None else change.old.encode("utf-8")
                if _read_only(full):
                    report.problems.append((change.path, 1, READ_ONLY))
                    blocked |= plan.feeds.get(change.path, set())
                    continue
                if _current(full) != read:
                    report.conflicts.append(change.path)
                    blocked |= plan.feeds.get(change.path, set())
                    continue
                batch.append((full, change.new.encode("utf-8"), change.path, read))
            if ledger is not None and batch:
                ledger.wrote(
                    [(rel, hashlib.sha256(data).hexdigest(), plan.holds.get(rel, {})) for _f, data, rel, _r in batch]
                )
            changed: list[str] = []
            refused: list[tuple[str, int, str]] = []
            done = write_batch(root, batch, writes, report.problems, changed, refused)
            for rel in changed:  # saved by a person after the check above: theirs is kept, the notes merged again
                report.conflicts.append(rel)
                blocked |= plan.feeds.get(rel, set())
            for rel, line, why in refused:  # a folder a person made read-only: its notes wait
                report.problems.append((rel, line, why))
                blocked |= plan.feeds.get(rel, set())
            report.wrote(done)
            for full, _data, rel, _landed in done:
                if rel in plan.fronts:
                    front, text = plan.fronts[rel]
                    fresh[rel] = subjects.entry_from(rel, full.stat(), front, text)
    for chunk in chunks(notes, CHUNK):
        with file_lock(root):
            marks = []
            for change in chunk:
                tick()
                entry = plan.notes[change.path]
                marked = None if change.path in blocked else _marked_note(root, change, entry)
                if marked is None:
                    report.counts["notes_consolidated"] -= 1
                    continue
                marks.append((marked[0], marked[1], change.path, entry, marked[2], marked[3]))
            if ledger is not None and marks:
                ledger.will_mark([m[3] for m in marks])
            changed, refused = [], []
            done = write_batch(root, [(m[0], m[1], m[2], m[5]) for m in marks], writes, None, changed, refused)
            report.counts["notes_consolidated"] -= len(changed)  # saved meanwhile: left unmarked for the next run
            report.counts["notes_consolidated"] -= len(refused)  # in a read-only folder: left unmarked
            report.problems += refused
            report.wrote(done)
            written = {rel for _full, _data, rel, _landed in done}
            if ledger is not None:
                with ledger.transaction():
                    for full, _data, rel, entry, grew, _read in marks:
                        if rel in written:
                            ledger.marked(entry, None if grew else full.stat())
                            consolidated.add(rel)
    if ledger is not None:
        ledger.forget(sorted(d for d in plan.holds if plan.feeds.get(d, set()) <= consolidated))
    return fresh


def _marked_note(root: Path, change: C.Change, entry: NoteEntry) -> tuple[Path, bytes, bool, bytes] | None:
    """(where, bytes, grew, the bytes they were made from) of the note with its mark set; it may have grown since
    it was read, and keeps what was added."""
    try:
        full = _real(root, change)
    except FsmemError:
        return None
    data = _current(full)
    if data is None or _read_only(full):
        return None
    if change.old is not None and data == change.old.encode("utf-8"):
        return full, change.new.encode("utf-8"), False, data
    text, bad = fmt.decode(data)
    if bad or fmt.split(text).problems:
        return None
    marked = fmt.set_fields(text, {C.CONSOLIDATED_FIELD: entry.digest})
    return (full, marked.encode("utf-8"), True, data) if marked != text else None


def _ticker(progress: C.Progress | None, total: int) -> Callable[[], None]:
    """What counts one more file written, for the progress bar (nothing without one)."""
    done = itertools.count(1)
    return (lambda: progress("writing", next(done), total)) if progress else (lambda: None)


def archive(root: Path, settings: C.Settings, report: ConsolidationReport) -> None:
    """Move fully consolidated notes to the archive folder (never overwriting anything there); not from or to a
    folder of notes reached through a link (`NoteFolders`: the notes walk has said so)."""
    from fsmem.store.catalog import walk_stats
    from fsmem.store.note_folders import NoteFolders
    from fsmem.store.paths import resolve

    if NoteFolders(root, settings.archive_dir).refused:
        return
    folder = root / SESSIONS
    for rel, _full, _stat in walk_stats(root, folder) if folder.is_dir() else []:
        archived = f"{settings.archive_dir}/{rel[len(SESSIONS) + 1 :]}"
        with file_lock(root):
            try:
                source, target = resolve(root, rel), resolve(root, archived)
            except FsmemError as exc:
                report.problems.append((rel, 1, f"not archived: {exc}"))
                continue
            data = _current(source)
            if data is None or os.path.islink(source):
                continue
            text, bad = fmt.decode(data)
            if bad or fmt.split(text).front_matter.get(C.CONSOLIDATED_FIELD) != C.body_digest(text):
                continue
            if os.path.lexists(target):
                report.problems.append((rel, 1, f"not archived: {archived} exists"))
                continue
            try:
                beneath.rename(root, rel, archived)
            except (FsmemError, FileExistsError) as exc:
                report.problems.append((rel, 1, f"not archived: {exc}"))
                continue
        report.notes_archived.append(rel)


def unified_diff(plan: C.Plan) -> str:
    parts: list[str] = []
    for change in sorted(plan.changes, key=lambda c: (c.kind != "document", c.path)):
        old = (change.old or "").splitlines(keepends=True)
        new = change.new.splitlines(keepends=True)
        source = "/dev/null" if change.old is None else f"a/{change.path}"
        parts.extend(difflib.unified_diff(old, new, source, f"b/{change.path}"))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in parts)


def run(
    root: Path,
    settings: C.Settings,
    count_tokens: Callable[[str], int],
    *,
    dry_run: bool = False,
    progress: C.Progress | None = None,
) -> ConsolidationReport:
    """One consolidation of the memory at `root` (`settings`: fsmem.yaml's `consolidate`); refuses to overlap
    another one.

    `count_tokens` counts tokens for INDEX.md's cap.
    """
    from fsmem.consolidate import index_md
    from fsmem.store.paths import config_dir

    settings = dataclasses.replace(settings, archive_dir=config_dir(settings.archive_dir, "consolidate.archive_dir"))
    extractors = ex.load(settings.extractors)
    report = ConsolidationReport(dry_run=dry_run, time=fmt.now_iso())
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(root, "consolidate", wait=False))
        except LockTimeout:
            raise ConsolidationRunning(
                f"at {report.time} another 'fsmem consolidate' was running on this memory; this run changed nothing "
                "(notes written meanwhile are consolidated by the next run)"
            ) from None
        if not dry_run:
            with file_lock(root):
                report.temp_files_removed = remove_temp_files(root)
        signature = L.signature(settings.extractors, settings.default_subject)
        ledger = L.Ledger(root, signature, settings.default_subject, dry_run=dry_run)
        stack.callback(ledger.close, False)
        writes = Writes()
        fresh: dict[str, subjects.DirectoryEntry] = {}
        for attempt in range(1, settings.max_attempts + 1):
            report.attempts = attempt
            inputs = C.gather(root, settings, extractors, ledger, progress)
            plan = C.plan(inputs, settings)
            report.add(plan)
            if dry_run:
                digest_run.run(root, settings, report, None, plan)
                report.diff = unified_diff(plan)
                return report
            ledger.commit()
            conflicts_before = len(report.conflicts)
            fresh.update(apply(root, plan, report, writes, progress, ledger))
            if len(report.conflicts) == conflicts_before:
                break
            if attempt < settings.max_attempts:
                report.conflicts = report.conflicts[:conflicts_before]  # retried: only a final conflict is reported
        fresh.update(digest_run.run(root, settings, report, lambda own: apply(root, own, report, writes, None)))
        if settings.archive:
            archive(root, settings, report)
            relink(
                root,
                settings,
                report,
                lambda batch, changed: report.wrote(write_batch(root, batch, writes, None, changed)),
            )
        replaced: list[str] = []
        try:
            report.index_changed = index_md.write_index(
                root, settings.index_max_tokens, count_tokens, fresh, replaced=replaced
            )
            report.problems += [(index_md.INDEX_FILE, 1, line.split(" ", 1)[1]) for line in replaced]
        except FsmemError as exc:
            report.problems.append((index_md.INDEX_FILE, 1, f"{exc}; not written"))
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
        "held_back": len(report.held_back),
        "index_changed": report.index_changed,
    }
    path = state_dir(root, "logs") / LOG_FILE
    append_lines(path, (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8"))
