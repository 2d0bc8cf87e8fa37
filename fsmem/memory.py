"""`Memory`: the one public object. Every CLI command, agent tool and server is a thin adapter over it.

Its methods carry the same names and parameters as the CLI commands and
return typed results with `to_dict()` (the `--json` form) and `to_text()` (what
a human or a model reads). Each method is an operation of `fsmem.operations`:
one function, in the module of its concern, over the open memory (`Core`, which
`Memory` is). This module only assembles them, and is the API's one error
boundary: arguments are checked at the door against the annotations
(`fsmem.arguments`), and only `FsmemError` leaves a method (`fsmem_errors`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fsmem.arguments import Door
from fsmem.errors import guarded
from fsmem.operations import (
    creation,
    history as history_ops,
    importing,
    reads,
    search as searching,
    upkeep,
    writes,
)
from fsmem.operations.core import Core
from fsmem.operations.timeline import timeline as _timeline
from fsmem.operations.upkeep import CheckResult, IndexResult
from fsmem.store.catalog import walk
from fsmem.store.root import ROOT_ENV, discover_root
from fsmem.store.template import template_dir

if TYPE_CHECKING:
    from fsmem.history.sync import SyncResult

SESSION_ENV = writes.SESSION_ENV


def _public(method: Callable[..., Any], where: str) -> Callable[..., Any]:
    door = Door(method, where)

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = door(args, kwargs)  # arguments of the annotated types, or InvalidArgument
        owner = args[0] if args and isinstance(args[0], Core) else None
        return guarded(lambda: method(*args, **kwargs), lambda: getattr(owner, "root", None))

    return checked


def fsmem_errors(cls: type) -> type:
    """Every public method of `cls` (its own and those it inherits) raises only FsmemError: an OSError
    (ENAMETOOLONG, EACCES, ENOSPC…) becomes StorageError and non-text InvalidArgument here, the API's one
    boundary (`fsmem.errors.translated`)."""
    for owner in reversed([base for base in cls.__mro__ if base is not object]):
        for name, value in vars(owner).items():
            if (name.startswith("_") and name != "__init__") or isinstance(value, (property, type)):
                continue
            where = f"{cls.__name__}()" if name == "__init__" else f"{cls.__name__}.{name}()"
            if isinstance(value, classmethod):
                setattr(cls, name, classmethod(_public(value.__func__, where)))
            elif callable(value):
                setattr(cls, name, _public(value, where))
    return cls


@fsmem_errors
class Memory(Core):
    """A memory directory: list, grep, read, write and check it within a read budget.

    `agent` selects that agent's budget (and read-only flag) from fsmem.yaml;
    per-call `max_tokens` / `max_results` may narrow it, never widen it.
    `scope` (path prefixes such as `["topics/"]`) is the part of the memory
    this agent reaches: everything outside behaves as if it did not exist, in
    every answer, listing, total, search and context (`fsmem.store.scope`).
    """

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creation: fsmem.operations.creation -------------------------------------------------------
    @classmethod
    def init(cls, directory: str | os.PathLike[str], *, git: bool = False) -> Memory:
        """Make `directory` a memory, with history given `git` (`fsmem.operations.creation.init`)."""
        return creation.init(cls, directory, git=git)

    @classmethod
    def setup_clone(
        cls, directory: str | os.PathLike[str] | None = None, *, agent: str | None = None, remote: str | None = None
    ) -> SyncResult:
        """`fsmem sync --setup` of a git clone (`fsmem.operations.creation.setup_clone`)."""
        return creation.setup_clone(cls, directory, agent=agent, remote=remote)

    # -- queries: fsmem.operations.reads ------------------------------------------------------------
    ls = reads.ls
    grep = reads.grep
    read = reads.read
    links = reads.links
    files = reads.files
    meta = reads.meta
    superseded_ranges = reads.superseded_ranges
    timeline = _timeline

    # -- writes, each one transaction: fsmem.operations.writes --------------------------------------
    note = writes.note
    write = writes.write
    edit = writes.edit
    rm = writes.rm
    mv = writes.mv

    # -- upkeep, and what agents get beyond files: fsmem.operations.upkeep --------------------------
    check = upkeep.check
    index = upkeep.index
    consolidate = upkeep.consolidate
    watch = upkeep.watch
    stats = upkeep.stats
    context = upkeep.context

    # -- history (git): fsmem.operations.history ----------------------------------------------------
    log = history_ops.log
    show = history_ops.show
    diff = history_ops.diff
    restore = history_ops.restore
    revert = history_ops.revert
    sync = history_ops.sync

    # -- search and recall: fsmem.operations.search -------------------------------------------------
    search = searching.search
    recall = searching.recall

    # -- history from outside the memory (never a tool): fsmem.operations.importing -----------------
    import_from = importing.import_from


__all__ = ["Memory", "discover_root", "template_dir", "CheckResult", "IndexResult", "walk", "ROOT_ENV", "SESSION_ENV"]
