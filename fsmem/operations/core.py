"""What every operation works on: one memory's root, configuration, agent, budget, scope, counter and catalog.

`Core` is opened once (`Memory` is one) and handed to each operation as its
first argument. Its history and its search index are found on first use, so
that an operation that needs neither pays nothing for them. The helpers below
apply the rules every operation shares: the containment rule and the agent's
scope for the paths it is given, and the front-matter filters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from fsmem import faces
from fsmem.budget import Budget, echo
from fsmem.config import CONFIG_FILE, Config
from fsmem.errors import HistoryError, HistoryOff, InvalidArgument, NotFound
from fsmem.store import host, logs
from fsmem.store.cache import timestamp_us
from fsmem.store.catalog import Catalog
from fsmem.store.paths import relative, resolve
from fsmem.store.root import discover_root, refuse_state_link
from fsmem.store.scope import Scope
from fsmem.tokens import TokenCounter

if TYPE_CHECKING:
    from fsmem.history.repo import Repo
    from fsmem.search.index import SearchIndex
    from fsmem.search.settings import SearchSettings
    from fsmem.store.selection import Selection

Prefixes = str | Iterable[str] | Scope | None


class Core:
    """One open memory, as the agent `agent` sees it: within its budget and read-only flag, and its `scope`.

    `agent` selects that agent's budget (and read-only flag) from fsmem.yaml;
    per-call `max_tokens` / `max_results` may narrow it, never widen it.
    `scope` (path prefixes such as `["topics/"]`) is the part of the memory
    this agent reaches: everything outside behaves as if it did not exist, in
    every answer, listing, total, search and context (`fsmem.store.scope`).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, agent: str | None = None, scope: Prefixes = None):
        self.root = discover_root(root)
        refuse_state_link(self.root)
        self.config = Config.load(self.root)
        self.agent = agent
        self.budget: Budget = self.config.budget_for(agent)
        self.scope: Scope | None = Scope.of(scope)
        self.tokens = TokenCounter(self.config.tokenizer)
        self.catalog = Catalog(self.root, self.tokens, scope=self.scope)

    def close(self) -> None:
        """Give back this object's share of the change feed and of its repository's `git cat-file` readers, and
        close its cache connection (a later call opens them again). A memory that is dropped does the same when
        it is collected. A search index's merge still running behind the answer that built it is waited for
        first, so the count memo written at the close does not wait on its lock."""
        search_index = getattr(self, "_search_index", None)
        if search_index is not None:
            search_index.wait_merged()
        self.catalog.close()
        self.forget_history()

    def path(self, user_path: str | os.PathLike[str] | None, *, want: str = "any") -> Path:
        """Resolve an agent- or user-supplied path by the containment rule (`fsmem.store.paths.resolve`) and the scope.

        `want="any"` lets a folder above the scope pass (it is listed filtered); `want="file"` does not.
        """
        return resolve(self.root, user_path, want=want, scope=self.scope)

    def visible(self) -> Callable[[str], bool] | None:
        """For a scoped memory, the test a file path must pass to be seen (its link target in scope too); else None.

        The set is the catalog's rows in scope (`fsmem.store.selection`), brought up to date when called.
        """
        if self.scope is None:
            return None
        return self.catalog.visible().__contains__

    @property
    def host_id(self) -> str:
        """This copy's id: default session notes are named after the agent and it (`researcher-1a2b3c4d`). A
        host-local setting (`fsmem.history.host_settings`: `git config fsmem.hostId`, or `.fsmem/` without git),
        never `notes.host_id` in fsmem.yaml, which every clone shares and a remote could set."""
        if not hasattr(self, "_host_id"):
            from fsmem.history import host_settings

            self._host_id = host.host_id(self.root, host_settings.get(self.root, "notes.host_id"))
        return self._host_id

    @property
    def secrets_policy(self) -> str:
        """What happens to text that looks like a secret: refuse, redact or allow (fsmem.yaml `secrets.policy`)."""
        return self.config.secrets.policy

    @property
    def history(self) -> Repo | None:
        """The git repository that versions this memory, or None: not in a git work tree, ignored by the one
        it is in, or `history: {enabled: false}` in fsmem.yaml. Found once per object; no git process runs
        for a memory without a `.git` above it."""
        if not hasattr(self, "_repo"):
            self._repo: Repo | None = None
            enabled = self.config.history.enabled
            from fsmem.history import may_have_history  # a few stat calls; the git machinery only when it may

            if may_have_history(self.root, enabled):
                from fsmem.history.repo import discover

                try:
                    self._repo = discover(self.root, self.host_id, enabled=enabled)
                except HistoryError as exc:  # no git command: the memory works, without history
                    logs.history_problem(self.root, "discover", self.agent, exc)
                    self._history_refused = exc  # what a history command then says (require_history)
        return self._repo

    def forget_history(self) -> None:
        """Look for the repository again at the next use (after history was set up); the one found is given back."""
        repo = self.__dict__.pop("_repo", None)
        self.__dict__.pop("_host_id", None)
        self.__dict__.pop("_history_refused", None)
        if repo is not None:
            repo.close()

    @property
    def search_index(self) -> SearchIndex:
        """The row index under .fsmem/ (created on first use, kept in step with the files)."""
        if getattr(self, "_search_index", None) is None:
            from fsmem.search.index import shared_index  # the index and its engine load with the first search

            self._search_index = shared_index(self.root)
        return self._search_index

    @property
    def search_settings(self) -> SearchSettings:
        """How search ranks and cuts its answers (fsmem.yaml `search:`); loaded by the first search."""
        return self.config.search


# -- the rules every operation applies to what it is given -----------------------------------------------
class Report:
    """An answer of the spec's kind `report`, what a task over the memory did: one row, never cut at a budget."""

    rows = 1
    truncated = False


def existing(memory: Core, user_path: str, want: str = "any") -> Path:
    """The path named, which must exist (NotFound, suggesting ls, otherwise)."""
    path = memory.path(user_path, want=want)
    if not path.exists():
        raise NotFound(f"{relative(memory.root, path)} does not exist; list files with ls")
    return path


def in_scope(memory: Core, target: Path, raw: str) -> None:
    """Refuse a folder that is not wholly in scope (for rm, mv and history, which act on everything in it)."""
    if memory.scope is not None:
        memory.scope.check(relative(memory.root, target), raw, "file")


def whole_memory(memory: Core, what: str) -> None:
    """Refuse, for a scoped agent, an operation that works on the whole memory."""
    if memory.scope is not None:
        raise InvalidArgument(
            f"{what} works on the whole memory; this agent's scope is {memory.scope.describe()}. Run it without a scope"
        )


def _no_time(text: str) -> bool:
    from fsmem import format as fmt  # the format's modules, which a plain grep's selection does not need

    return fmt.parse_timestamp(text) is None


def selection(
    memory: Core,
    path: str | None,
    *,
    depth: int | None = None,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
) -> Selection:
    """What a listing under `path` with these filters asks the catalog (`fsmem.store.selection`)."""
    from fsmem.store.selection import Selection

    start = existing(memory, path) if path else None
    if updated_after is not None and _no_time(updated_after):
        raise InvalidArgument(
            f"{faces.arg('updated_after')} takes an ISO 8601 date such as 2024-05-01, not {echo(updated_after)}"
        )
    rel = relative(memory.root, start) if start is not None else None
    return Selection.of(
        rel,
        start_is_file=start is not None and not start.is_dir(),
        depth=depth,
        type=type,
        tag=tag,
        updated_after_us=timestamp_us(updated_after),
    )


def require_history(memory: Core) -> Repo:
    """The repository, with what fsmem wrote committed; HistoryOff (saying how to turn it on) without one."""
    repo = memory.history
    if repo is None:
        refused = getattr(memory, "_history_refused", None)
        if refused is not None:  # a repository history will not use (fsmem.history.git_dir), or no git
            raise HistoryError(str(refused))
        from fsmem.history import turn_on

        raise HistoryOff(
            f"this memory has no history (it is not in a git work tree, or history is off in {CONFIG_FILE}); "
            + turn_on(memory.root)
        )
    from fsmem.history import journal

    journal.drain(repo, wait=True)  # what fsmem wrote is in the history before it is asked about
    return repo
