"""History (git): log, show and diff within the budget, restore and revert as new commits, sync between hosts.

Every history answer goes through the agent's view of the history
(`fsmem.history.view`); restore and revert write through the one write path,
INDEX.md following in their commit. The git machinery is imported by the
operation that runs it, never by a read of the files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fsmem import faces, format as fmt
from fsmem.budget import echo
from fsmem.errors import InvalidArgument, StorageError
from fsmem.operations import upkeep
from fsmem.operations.core import Core, in_scope, require_history, whole_memory
from fsmem.operations.transaction import Transaction, require_writable, transaction
from fsmem.query import reading
from fsmem.store import writing
from fsmem.store.paths import relative

if TYPE_CHECKING:
    from fsmem.history.queries import DiffResult, LogResult, ShowResult
    from fsmem.history.repo import Repo
    from fsmem.history.sync import SyncResult
    from fsmem.history.view import HistoryView


def _view(memory: Core, repo: Repo | None = None) -> HistoryView:
    """The history as this agent may see it (`fsmem.history.view`); every history answer goes through it."""
    from fsmem.history.view import HistoryView

    return HistoryView(repo or require_history(memory), memory.scope)


def _narrowed_to(memory: Core, path: str | None, what: str) -> str | None:
    """The memory path a history query narrows to; a scoped agent must name one wholly in its scope."""
    if path is None:
        whole_memory(memory, f"{what} without a path")
        return None
    target = memory.path(path)
    in_scope(memory, target, path)
    return relative(memory.root, target)


def _cut(memory: Core, lines: str | None, max_tokens: int | None) -> dict[str, Any]:
    """Which lines of a history answer to show and how much of them fits, as `read` cuts a file."""
    start, end = reading.parse_range(lines) if lines else (1, None)
    return {
        "start": start,
        "end": end,
        "max_tokens": memory.budget.narrowed(max_tokens).max_tokens,
        "max_line_chars": memory.config.read.max_line_chars,
    }


def log(
    memory: Core,
    path: str | None = None,
    *,
    since: str | None = None,
    agent: str | None = None,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> LogResult:
    """Who changed what, when, with what message: one row per commit, newest first, within the budget.

    `path` narrows to one file or folder, `since` to commits at or after a
    date, `agent` to that agent's commits.
    """
    from fsmem.history import queries

    budget = memory.budget.narrowed(max_tokens, max_results)
    rel = _narrowed_to(memory, path, "history log")
    if since is not None and fmt.parse_timestamp(since) is None:
        raise InvalidArgument(f"{faces.arg('since')} takes an ISO 8601 date such as 2026-11-01, not {echo(since)}")
    return queries.log(
        _view(memory),
        memory.tokens.count,
        rel,
        since=since,
        agent=agent,
        offset=offset,
        max_results=budget.max_results,
        max_tokens=budget.max_tokens,
    )


def show(memory: Core, path: str, *, at: str, lines: str | None = None, max_tokens: int | None = None) -> ShowResult:
    """The file as it was at a revision or date (`at`), line-numbered and cut at the budget like `read`."""
    from fsmem.history import queries

    rel = relative(memory.root, memory.path(path, want="file"))
    cut = _cut(memory, lines, max_tokens)
    return queries.show(_view(memory), memory.tokens, rel, at, **cut)


def diff(
    memory: Core,
    rev: str | None = None,
    path: str | None = None,
    *,
    lines: str | None = None,
    max_tokens: int | None = None,
) -> DiffResult:
    """What changed since `rev` (a revision, a date, or `A..B`; default: what is not committed yet), as a
    unified diff cut at the budget, with the next `lines` to ask for."""
    from fsmem.history import queries

    rel = _narrowed_to(memory, path, "history diff")
    cut = _cut(memory, lines, max_tokens)
    return queries.diff(_view(memory), memory.tokens, rev, rel, **cut)


def restore(memory: Core, path: str, *, at: str) -> writing.WriteResult:
    """Put a file back as it was at a revision or date (`at`), as a new commit; nothing is rewritten."""
    from fsmem.history import undo

    require_writable(memory)
    rel = relative(memory.root, memory.path(path, want="file"))
    repo = require_history(memory)
    with transaction(memory) as tx:
        changes, message = undo.plan_restore(_view(memory, repo), memory.root, rel, at)
        result = _undone(memory, tx, "restore", rel, changes, message)
    undo.verify(repo, memory.root, "restore", result.changes)
    return result


def revert(memory: Core, rev: str) -> writing.WriteResult:
    """Undo what one commit changed, as a new commit (a file changed since is merged, or the revert refused)."""
    from fsmem.history import undo

    require_writable(memory)
    whole_memory(memory, "history revert")
    repo = require_history(memory)

    archive = memory.config.consolidate.archive_dir
    with transaction(memory) as tx:
        changes, message, label = undo.plan_revert(
            repo, memory.root, rev, lambda rel: memory.path(rel, want="file"), archive_dir=archive
        )
        result = _undone(memory, tx, "revert", label, changes, message)
    undo.verify(repo, memory.root, "revert", result.changes)
    return result


def _undone(
    memory: Core, tx: Transaction, action: str, label: str, changes: list[writing.Change], message: str
) -> writing.WriteResult:
    """A restore's or revert's planned `changes` written, journalled before they are (`Transaction.ahead`), as
    every write is: killed after its files changed, it is committed as its own by the next command, never left
    in git status outside history. INDEX.md, regenerated after, joins the same entry."""
    from fsmem.history import undo

    planned = writing.WriteResult(action, label, changes=changes)  # INDEX.md's change is added to its list
    with tx.ahead(planned, message):
        result = undo.apply(require_history(memory), memory.root, action, label, changes)
        _index_follows(memory, result)
    tx.wrote(planned, message, paths=[change.path for change in changes])
    return result


def _index_follows(memory: Core, result: writing.WriteResult) -> None:
    """INDEX.md regenerated in an undo's commit (`index_md.follow`); a scoped memory writes only inside its scope."""
    if memory.scope is not None:
        return
    from fsmem.consolidate import index_md

    settings = memory.config.consolidate
    index_md.follow(memory.root, result.changes, settings.index_max_tokens, memory.tokens.count)


def sync(
    memory: Core,
    remote: str | None = None,
    *,
    setup: bool = False,
    accept_config: bool = False,
    repair: bool = False,
) -> SyncResult:
    """Fetch, merge, consolidate and push, until the push goes through (bounded); `setup` only sets up this
    clone (merge driver, .gitattributes, .gitignore; what `git clone` put there checked and repaired) and
    commits that. What the remote sends crosses fsmem.history.trust first: `accept_config` takes the
    fsmem.yaml change the last sync held; `repair` merges without what it refused."""
    from fsmem.history import sync as _sync

    require_writable(memory)
    whole_memory(memory, "history sync")
    if setup:
        notes: list[str] = []
        found = setup_history(memory, create=False, notes=notes)
        return _sync.SyncResult(remote=remote or "", setup=True, found=found, boundary=notes)
    repo = require_history(memory)
    return _sync.sync(
        repo,
        remote,
        settings=memory.config.sync,
        consolidate=lambda: upkeep.consolidate(memory),
        index=lambda: upkeep.index(memory).changed,
        threshold_of=lambda: memory.config.consolidate.near_duplicate_threshold,
        accept_config=accept_config,
        repair=repair,
    )


def setup_history(memory: Core, *, create: bool, notes: list[str] | None = None) -> str:
    """Set history up (fsmem.history.sync.setup); returns what was found of the remote's branches."""
    from fsmem.history import sync as _sync

    memory.forget_history()
    _, found = _sync.setup(memory.root, create=create, host=memory.host_id, agent=memory.agent, notes=notes)
    memory.forget_history()
    if memory.history is None:
        raise StorageError(f"{memory.root}: history could not be turned on (is the folder ignored by git?)")
    return found
