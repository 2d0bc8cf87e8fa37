"""The upkeep of a memory: check it, regenerate INDEX.md, consolidate notes, watch it, and what agents get
beyond files (the pre-injected context, the retrieval statistics).

INDEX.md is written through the one write path; a consolidation with
history is one commit of its own (`fsmem.history.worktree.consolidation`)
and then tells the search index and the change feed like every write.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fsmem import faces
from fsmem.config import STATE_DIR
from fsmem.errors import FsmemError, InvalidArgument, guarded
from fsmem.format.links import UNRESOLVED
from fsmem.operations.core import Core, selection, whole_memory
from fsmem.operations.transaction import after_change, require_writable, transaction
from fsmem.query.links import SHOWN_CANDIDATES, Resolver
from fsmem.store import paths as _paths
from fsmem.store.meta import EXACT_COUNT_LIMIT, LEFT_OUT_LIMIT
from fsmem.store.selection import Selection

if TYPE_CHECKING:  # and imported where used: a read (ls, grep, read) loads none of these
    from fsmem.consolidate.apply import ConsolidationReport
    from fsmem.consolidate.settings import Progress
    from fsmem.query.context import ContextBlock
    from fsmem.query.stats import StatsResult
    from fsmem.watch import WatchStats


@dataclass
class CheckResult:
    """What `fsmem check` found: every problem as (path, line, message), and how many files it looked at."""

    problems: list[tuple[str, int, str]]
    files: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "problems": [{"path": p, "line": n, "message": m} for p, n, m in self.problems],
        }

    def to_text(self) -> str:
        lines = [f"{p}:{n}: {m}" for p, n, m in self.problems]
        lines.append(f"[{len(self.problems)} problem(s) in {self.files} files]")
        return "\n".join(lines)

    @property
    def empty(self) -> bool:
        return not self.problems


@dataclass
class IndexResult:
    """What `fsmem index` did: whether INDEX.md changed."""

    changed: bool
    path: str = "INDEX.md"
    replaced: list[str] = field(default_factory=list)  # a link where INDEX.md should be, replaced by the file

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "changed": self.changed, **({"replaced": self.replaced} if self.replaced else {})}

    def to_text(self) -> str:
        return "\n".join([f"{self.path} {'updated' if self.changed else 'unchanged'}", *self.replaced])


def check(memory: Core, path: str | None = None) -> CheckResult:
    """Every problem in every file, as (path, line, message); files that cannot be read are problems too.

    Beside each file's own problems: a name a Windows or macOS copy cannot hold (with the rename), a note dated in the future (consolidate holds it back), what the last
    sync held or refused, what a killed git or fsmem left in the history, and keyed facts that cannot be read or
    whose citation no longer supports their value (`fsmem.query.fact_check`).
    """
    from fsmem.consolidate.dates import future_note_problem, today

    chosen = selection(memory, path)
    found = memory.catalog.problems(chosen)
    problems = [(m.path, line, message) for m in found.metas for line, message in m.problems]
    problems += link_problems(memory, chosen)
    problems += [(shown, 1, reason) for shown, reason in found.skipped]
    problems += [
        (
            rel,
            1,
            f"too large to search ({size:,} bytes, over {EXACT_COUNT_LIMIT:,}): search finds none of its lines, "
            "grep does; split it into smaller files"
            if size <= LEFT_OUT_LIMIT
            else f"too large ({size:,} bytes, over {LEFT_OUT_LIMIT:,}): left out of grep, search and history,"
            " read only in part, kept on disk as it is; split it into smaller files",
        )
        for rel, size in memory.catalog.too_large(chosen)
    ]
    from fsmem.store.names import unportable

    chosen_paths = memory.catalog.paths(selection(memory, path))
    problems += [(rel, 1, message) for rel, message in unportable(chosen_paths)]
    from fsmem.history.health import edited_copies
    from fsmem.query import fact_check

    problems += edited_copies(memory.root, chosen_paths)
    problems += fact_check.problems(
        memory.root,
        chosen_paths,
        memory.config.consolidate.archive_dir,
        contains=memory.scope.contains if memory.scope is not None else None,
        whole=path is None and memory.scope is None,
    )
    problems += fact_check.twin_notes(memory.root, chosen_paths, memory.config.consolidate.archive_dir)
    problems += note_link_problems(memory, found.links)
    day = today()
    for rel, created in found.created:
        message = future_note_problem(rel, {"created": created}, day)
        if message:
            problems.append((rel, 1, message))
    if path is None and os.path.exists(os.path.join(memory.root, STATE_DIR, "history", "trust.json")):
        from fsmem.history.trust_record import recorded_problems

        problems += recorded_problems(memory.root)
    if path is None and memory.scope is None and memory.history is not None:
        from fsmem.history import health

        problems += health.problems(memory.history)
        reported = {problem[0] for problem in problems}  # a link the walk reports already is not said twice
        problems += [found for found in health.link_problems(memory.history) if found[0] not in reported]
    if path is None and memory.config.notes.host_id:
        from fsmem.history.host_settings import shared_host_id

        problems.append(shared_host_id(memory.config.notes.host_id))
    problems.sort(key=lambda p: (p[0], p[1]))
    return CheckResult(problems=problems, files=found.total + len(found.skipped))


def note_link_problems(memory: Core, links: list[tuple[str, str]]) -> list[tuple[str, int, str]]:
    """A problem per session note that is a symbolic link consolidation will not take (`fsmem.store.note_folders`),
    among `links` ((path, real target) of each link check looks at)."""
    from fsmem.store.note_folders import NoteFolders

    folders = NoteFolders(memory.root, memory.config.consolidate.archive_dir)
    found = folders.folder_problems("; consolidate skips its notes")
    for rel, target in links:
        problem = folders.link_problem(target) if folders.holds(rel) else None
        if problem is not None:
            found.append((rel, 1, problem + "; consolidate skips it"))
    return found


def link_problems(memory: Core, chosen: Selection) -> list[tuple[str, int, str]]:
    """A problem per [[link]] that leads to no memory file or to several (`fsmem.query.links`)."""
    found = []
    for row in Resolver(memory.catalog).broken(chosen):
        if row.outcome.status == UNRESOLVED:
            found.append((row.path, row.line, f"link {row.written} leads to no memory file"))
        else:
            names = ", ".join(row.outcome.paths[:SHOWN_CANDIDATES])
            more = len(row.outcome.paths) - SHOWN_CANDIDATES
            names += f" and {more} more" if more > 0 else ""
            found.append(
                (
                    row.path,
                    row.line,
                    f"link {row.written} is ambiguous: {len(row.outcome.paths)} files answer to it ({names})",
                )
            )
    return found


def index(memory: Core) -> IndexResult:
    """Regenerate INDEX.md (the table of contents of entities and topics); says whether it changed."""
    whole_memory(memory, "index")
    require_writable(memory)
    from fsmem.consolidate import index_md

    settings = memory.config.consolidate
    replaced: list[str] = []
    with transaction(memory) as tx:
        change = index_md.rewrite(memory.root, settings.index_max_tokens, memory.tokens.count, replaced=replaced)
        if change is not None:
            tx.record("index INDEX.md", [change], [change.path])
    return IndexResult(changed=change is not None, replaced=replaced)


def consolidate(memory: Core, dry_run: bool = False, *, progress: Progress | None = None) -> ConsolidationReport:
    """Merge new session notes into entity and topic documents; `dry_run` returns the diff and writes nothing."""
    whole_memory(memory, "consolidate")
    if not dry_run:
        require_writable(memory)
    from fsmem.consolidate import apply as consolidate_apply

    settings = memory.config.consolidate
    archive_dir = settings.archive_dir
    _paths.config_dir(archive_dir, "consolidate.archive_dir", memory.root)

    def run() -> ConsolidationReport:
        return consolidate_apply.run(memory.root, settings, memory.tokens.count, dry_run=dry_run, progress=progress)

    if not dry_run:
        _finish_transcripts(memory)
    repo = None if dry_run else memory.history
    if repo is None:
        report = run()
    else:
        from fsmem.history import worktree

        report = worktree.consolidation(repo, run, archive_dir=archive_dir, agent=memory.agent)
    if not dry_run:
        after_change(memory, list(dict.fromkeys([*report.files_written, *report.landed])))  # names and files written
    return report


def _finish_transcripts(memory: Core) -> None:
    """What Claude Code hook events left unsaved (their time ran out) comes in first, so consolidation sees it."""
    from fsmem.operations.transcripts import finish_pending

    try:
        finish_pending(memory)
    except (FsmemError, OSError):
        pass  # the hook's own work: the next event or import finishes it


def watch(
    memory: Core,
    *,
    settle: float | None = None,
    log: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    consolidate: bool = False,
    consolidate_after: float | None = None,
    wait: Callable[[threading.Event, float], bool] | None = None,
) -> WatchStats:
    """Keep the metadata cache and INDEX.md current as files change, until `stop` (a threading.Event) is set.

    `settle` (seconds, default `watch.settle_seconds` in fsmem.yaml, else
    0.5) is how long the memory must be still before a burst of events is
    acted on. `consolidate` also consolidates once session notes have been
    still for `consolidate_after` seconds (default
    `watch.consolidate_after_seconds`, else 60). `wait(stop, seconds)` spends the time between two looks at
    the change feed (`fsmem.watch.watch`).
    """
    from fsmem import watch as _watch

    if settle is None:
        settle = memory.config.watch.settle_seconds
    if consolidate_after is None:
        consolidate_after = memory.config.watch.consolidate_after_seconds
    if settle < 0 or consolidate_after < 0:
        raise InvalidArgument(f"{faces.arg('settle')} and {faces.arg('consolidate_after')} must be 0 or more seconds")
    whole_memory(memory, "watch")
    writable = not memory.budget.read_only
    return _watch.watch(
        memory.root,
        memory.catalog,
        settle=settle,
        log=log,
        stop=stop,
        ready=ready,
        write_index=(lambda: guarded(lambda: index(memory).changed, memory.root)) if writable else None,
        consolidate=(lambda: guarded(lambda: _consolidate(memory), memory.root)) if writable and consolidate else None,
        consolidate_after=consolidate_after,
        on_change=lambda files: after_change(memory, None if files is None else sorted(files), mark=False),
        wait=wait,
    )


_consolidate = consolidate  # for watch, whose argument of that name is a flag


def stats(memory: Core, since: str | None = None, agent: str | None = None) -> StatsResult:
    """Per-tool figures from the retrieval log: calls, p50/p95 latency, mean tokens, shares."""
    from fsmem.query import stats as _stats

    return _stats.stats(memory.root, since=since, agent=agent)


def context(memory: Core, *, as_of: str | None = None, max_tokens: int | None = None) -> ContextBlock:
    """The block to pre-inject at the start of a turn: profile/ first, then INDEX.md, within the budget.

    With `as_of`, the profile's keyed facts as they held on that date (INDEX.md is shown as it is).
    """
    from fsmem.query import as_of as _as_of, context as _context

    stamp = _as_of.bound(as_of) if as_of is not None else None
    budget = memory.budget.narrowed(max_tokens)
    within = memory.catalog.visible_test() if memory.scope is not None else None
    return _context.build(
        memory.root, memory.catalog, memory.tokens, max_tokens=budget.max_tokens, within=within, as_of=stamp
    )
