"""The one write path: every write to a memory, by any face, is one transaction.

    with transaction(memory) as tx:      # the agent may write; the write lock is held
        result = writing.edit(...)       # the files change, atomically
        tx.wrote(result)                 # its exact bytes go to the history journal
    # lock released: the journal is committed, the search index and the change feed are told

`Memory`'s writes (note, write, edit, rm, mv, restore, revert, index) and
Claude's memory tool over an fsmem memory (`fsmem.agents.memory_tool`) all
write this way; consolidation and sync keep their own commit (one commit for
a whole run) and end the same way (`after_change`). Text is screened for
secrets before the lock (`screen`).

A write and its history fail together. Where the write lets it (`ahead`: note, write, edit, rm, mv, restore, revert,
import, and every command of the memory tool), the
journal entry is stored before the file changes, so that an entry that cannot be written (a full disk)
fails the command with nothing changed; an entry recorded after its write (`record`) that cannot be written
fails the command, saying the change was made. A commit that cannot be made leaves the entry pending, for
the next writer, and `fsmem check` reports it; both problems are logged to `.fsmem/logs/history.jsonl`
(`fsmem.store.logs`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from fsmem.config import CONFIG_FILE
from fsmem.errors import FsmemError, HistoryError, ReadOnly, StorageError
from fsmem.format import secrets
from fsmem.operations.core import Core
from fsmem.store import logs
from fsmem.store.cache import DatabaseError, cache_path
from fsmem.store.files import file_lock
from fsmem.store.writing import Change, WriteResult

if TYPE_CHECKING:
    from fsmem.history.repo import Repo


def require_writable(memory: Core) -> None:
    """ReadOnly for an agent that fsmem.yaml (or its token) makes read-only."""
    if memory.budget.read_only:
        raise ReadOnly(
            f"agent {memory.agent!r} is read-only in {CONFIG_FILE}; it may list, grep, read and search, not write"
        )


def screen(memory: Core, text: str, what: str) -> str:
    """Text about to be stored, under the secrets policy (refused with SecretFound, redacted, or as it is)."""
    if not isinstance(text, str):
        return text
    return secrets.screen(text, memory.secrets_policy, what)


def screen_value(memory: Core, value: Any, what: str) -> Any:
    """A front-matter value about to be stored, screened like text (each item of a list)."""
    if isinstance(value, str):
        return screen(memory, value, what)
    if isinstance(value, list):
        return [screen_value(memory, item, what) for item in value]
    return value


class Transaction:
    """What one write changed, gathered under the write lock: journalled at once, committed after the lock."""

    def __init__(self, memory: Core, repo: Repo | None):
        self.memory = memory
        self.repo = repo
        self.paths: list[str] = []
        self.journaled: set[int] = set()  # results journalled `ahead` of their write
        self.folders = False  # a folder went as a whole: the search index looks at everything

    @property
    def keeps_history(self) -> bool:
        """Whether the bytes before and after each change are wanted (the memory has history)."""
        return self.repo is not None

    def record(self, message: str | Callable[[], str], changes: list[Change], paths: Iterable[str]) -> None:
        """Journal `changes` under `message` (made only when there is history) and note `paths` as changed.

        A journal entry that cannot be written fails the command (HistoryError), after the write it records:
        the message says that the change was made, and that it will be committed as made outside fsmem.
        """
        self.paths.extend(paths)
        if self.repo is None or not changes:
            return
        from fsmem.history import journal

        try:
            journal.record(self.repo, self.memory.agent, message if isinstance(message, str) else message(), changes)
        except (FsmemError, OSError) as exc:
            logs.history_problem(self.memory.root, "record", self.memory.agent, exc)
            raise HistoryError(
                f"{changes[0].path} was changed, but its history entry could not be written ({_reason(exc)}); "
                "the change will be committed as one made outside fsmem"
            ) from exc

    @contextlib.contextmanager
    def ahead(self, result: WriteResult, message: str | None = None, *, fields: Iterable[str] = ()) -> Iterator[None]:
        """Journal `result` before the write it describes (the body of this block) is made: an entry that cannot
        be stored fails the write with nothing changed (StorageError); a write that fails withdraws its entry.
        A change the body adds to `result.changes` (an undo's INDEX.md, known once the files are written) joins
        the entry before it is published. `wrote` then journals it no more."""
        if self.repo is None or not result.changes:
            yield
            return
        from fsmem.history import journal

        text = message or journal.describe(
            result.action, result.path, result.changes, created=result.created, fields=fields
        )
        try:
            name = journal.prepare(self.repo, self.memory.agent, text, result.changes)
        except (FsmemError, OSError) as exc:
            raise StorageError(
                f"{result.path}: its history entry could not be written ({_reason(exc)}); nothing was changed"
            ) from exc
        if name is None:
            yield
            return
        planned = list(result.changes)
        try:
            yield
        except BaseException:
            journal.withdraw(self.repo, name)
            raise
        try:
            if result.changes != planned:
                journal.prepare(self.repo, self.memory.agent, text, result.changes, name=name)
            journal.publish(self.repo, name)
        except OSError as exc:
            logs.history_problem(self.memory.root, "record", self.memory.agent, exc)
            raise HistoryError(
                f"{result.path} was changed, but its history entry could not be kept ({_reason(exc)}); "
                "the change will be committed as one made outside fsmem"
            ) from exc
        self.journaled.add(id(result))

    def wrote(
        self,
        result: WriteResult,
        message: str | None = None,
        *,
        fields: Iterable[str] = (),
        paths: Iterable[str] | None = None,
    ) -> WriteResult:
        """Journal what `result` changed, under `message` or the one that describes it (naming the front-matter
        `fields` a write set); `paths` changed, by default the result's path. Returns `result`."""

        def described() -> str:
            from fsmem.history import journal

            return journal.describe(result.action, result.path, result.changes, created=result.created, fields=fields)

        paths = [result.path] if paths is None else paths
        if id(result) in self.journaled:
            self.paths.extend(paths)
            return result
        self.record(message or described, result.changes, paths)
        return result

    def changed_folder(self) -> None:
        """A folder was removed or moved as a whole: the search index looks at every file again."""
        self.folders = True


@contextlib.contextmanager
def transaction(memory: Core) -> Iterator[Transaction]:
    """One write: the agent may write, and the write lock is held for the body. Once the lock is released,
    what the body journalled is committed and the search index and the change feed are told of the paths it
    changed (of those it changed before it failed, too)."""
    require_writable(memory)
    repo = memory.history
    tx = Transaction(memory, repo)
    try:
        with file_lock(memory.root):
            if repo is not None:  # a write a killed writer made, committed before this one changes its files
                from fsmem.history import journal

                journal.adopt(repo)
            yield tx
    finally:
        if tx.paths:
            commit(memory, repo)
            after_change(memory, tx.paths, folders=tx.folders)


def _reason(exc: BaseException) -> str:
    """What the system said, without the path fsmem already names."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def commit(memory: Core, repo: Repo | None) -> None:
    """Commit what is pending, unless another process is already doing it (it will take ours too)."""
    if repo is None:
        return
    from fsmem.history import journal

    try:
        journal.drain(repo)
    except (FsmemError, OSError) as exc:
        logs.history_problem(memory.root, "commit", memory.agent, exc)


def after_change(memory: Core, paths: list[str] | None, *, folders: bool = False, mark: bool = True) -> None:
    """Tell the change feed, if one runs, that the metadata cache must look at `paths` (None: any file may have
    changed), and update the search index for them (all of it with `folders`, when a folder went as a whole).
    `fsmem watch`, which learnt of its changes from the feed, passes `mark=False`: told again, the feed would
    hand them back as new ones every settle time, and watch would never go quiet.

    Only an index that exists is updated (a memory never searched pays
    nothing), and a failure here never fails the write: every search stats
    the files and re-reads what changed anyway.
    """
    if paths is not None and mark:
        memory.catalog.changed(paths)
    if not cache_path(memory.root).exists():
        return
    try:
        if paths is None or folders or any(os.path.isdir(memory.root / p) for p in paths):
            memory.search_index.refresh()
        else:
            memory.search_index.update(paths)
    except (OSError, DatabaseError, FsmemError):
        pass
