"""`Memory`: the one public object. Every CLI command, agent tool and server is a thin adapter over it.

Its methods carry the same names and parameters as the CLI commands and
return typed results with `to_dict()` (the `--json` form) and `to_text()` (what
a human or a model reads). Each method is an operation of `fsmem.operations`:
one function, in the module of its concern, over the open memory (`Core`, which
`Memory` is). This module only assembles them, and is the API's one error
boundary: arguments are checked on the way in against the annotations and the
declared limits (`fsmem.arguments`), and only `FsmemError` leaves a method (`fsmem_errors`).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fsmem.arguments import ArgumentCheck
from fsmem.errors import guarded
from fsmem.operations.core import Core
from fsmem.store.root import ROOT_ENV, discover_root
from fsmem.store.template import template_dir

if TYPE_CHECKING:
    from fsmem.history.sync import SyncResult
    from fsmem.operations import (
        distill as distilling,
        history as history_ops,
        importing,
        reads,
        search as searching,
        upkeep,
        writes,
    )
    from fsmem.operations.stat import stat as _stat
    from fsmem.operations.timeline import timeline as _timeline
    from fsmem.operations.upkeep import CheckResult, IndexResult
    from fsmem.store.catalog import walk

SESSION_ENV = "FSMEM_SESSION"  # the session a note goes to (fsmem.operations.writes holds the same name)
# names this module exports from where they are defined, loaded on first use
_EXPORTS = {
    "CheckResult": "fsmem.operations.upkeep",
    "IndexResult": "fsmem.operations.upkeep",
    "walk": "fsmem.store.catalog",
}


def _public(method: Callable[..., Any], where: str, operation: str | None = None) -> Callable[..., Any]:
    check = ArgumentCheck(method, where, operation)  # a declared operation's limits too (fsmem.arguments.LIMITS)

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = check(args, kwargs)  # arguments of the annotated types, or InvalidArgument
        owner = args[0] if args and isinstance(args[0], Core) else None
        return guarded(lambda: method(*args, **kwargs), lambda: getattr(owner, "root", None))

    return checked


def fsmem_errors(cls: type) -> type:
    """Every public method of `cls` (its own and those it inherits) raises only FsmemError: an OSError
    (ENAMETOOLONG, EACCES, ENOSPC…) becomes StorageError and non-text InvalidArgument here, the API's one
    boundary (`fsmem.errors.translated`)."""
    found: dict[str, Any] = {}  # each name once, as the class resolves it: a wrapper is never wrapped again
    for owner in reversed([base for base in cls.__mro__ if base is not object]):
        found.update(vars(owner))
    for name, value in found.items():
        if (name.startswith("_") and name != "__init__") or isinstance(value, (property, type)):
            continue
        where = f"{cls.__name__}()" if name == "__init__" else f"{cls.__name__}.{name}()"
        if isinstance(value, classmethod):
            setattr(cls, name, classmethod(_public(value.__func__, where)))
        elif callable(value):
            setattr(cls, name, _public(value, where))
    return cls


class _Operation:
    """A method of `Memory` whose operation module is imported on its first use, then checked on the way in as
    `fsmem_errors` checks every method: `fsmem grep` imports grep's machinery, not consolidation's or git's."""

    def __init__(self, target: str):
        self.target = target  # "module:function" under fsmem.operations

    def __set_name__(self, owner: type, name: str) -> None:
        self.owner, self.name = owner, name

    def load(self) -> Callable[..., Any]:
        """The checked method, put on the class in place of this placeholder."""
        module, attribute = self.target.split(":")
        function = getattr(importlib.import_module(f"fsmem.operations.{module}"), attribute)
        checked = _public(function, f"{self.owner.__name__}.{self.name}()", self.name)
        setattr(self.owner, self.name, checked)
        return checked

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        checked = self.load()
        return checked if obj is None else checked.__get__(obj, owner)


def _declared_method(cls: type, name: str) -> Callable[..., Any]:
    """The checked method of the declared operation `name` (its spec's function), put on `cls` for next time."""
    if name.startswith("_"):
        raise AttributeError(name)
    from fsmem.spec import declared

    op = declared().get(name)
    if op is None:
        raise AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
    method = _Operation(op.function)
    method.__set_name__(cls, name)
    return method.load()


class _Declared(type):
    """`Memory`'s type: each operation declared in `fsmem.spec` is a method of it, made from the declaration's
    function path when first asked for, so that no list of the operations is kept here beside the spec."""

    if not TYPE_CHECKING:  # the type checker reads the methods from Memory's own TYPE_CHECKING block

        def __getattr__(cls, name: str) -> Any:
            return _declared_method(cls, name)

    def __dir__(cls) -> list[str]:
        from fsmem.spec import declared

        return sorted({*super().__dir__(), *declared()})


@fsmem_errors
class Memory(Core, metaclass=_Declared):
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
        from fsmem.operations import creation

        return creation.init(cls, directory, git=git)

    @classmethod
    def setup_clone(
        cls, directory: str | os.PathLike[str] | None = None, *, agent: str | None = None, remote: str | None = None
    ) -> SyncResult:
        """`fsmem sync --setup` of a git clone (`fsmem.operations.creation.setup_clone`)."""
        from fsmem.operations import creation

        return creation.setup_clone(cls, directory, agent=agent, remote=remote)

    # What a type checker (a user's editor) reads: each operation's function itself, by the module of its concern.
    # At run time the declared ones come from the spec (`_Declared`); tests/test_vocabulary.py holds this to it.
    if TYPE_CHECKING:
        # -- queries: fsmem.operations.reads ------------------------------------------------------------
        ls = reads.ls
        grep = reads.grep
        read = reads.read
        links = reads.links
        files = reads.files
        meta = reads.meta
        superseded_ranges = reads.superseded_ranges
        timeline = _timeline
        stat = _stat

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
        distill = distilling.distill
    else:
        # Every other operation's method is made from its declaration (`fsmem.spec`) when first asked for
        # (`_Declared`). These are not operations of the spec: Python's own, or a part of another one.
        files = _Operation("reads:files")
        meta = _Operation("reads:meta")
        superseded_ranges = _Operation("reads:superseded_ranges")
        watch = _Operation("upkeep:watch")  # `fsmem watch` runs it with callbacks no other face has
        sync = _Operation("history:sync")  # `fsmem sync` is hand-written: --setup runs before a memory opens
        # grep is declared in the spec, and named here too: the lean `fsmem grep` (`fsmem.cli.lean`) calls it
        # before the spec is loaded; tests/test_vocabulary.py holds this path to the spec's
        grep = _Operation("reads:grep")

        def __getattr__(self, name: str) -> Any:
            """A declared operation's method, on its first use through a memory (`_Declared`)."""
            return _declared_method(type(self), name).__get__(self, type(self))


__all__ = ["Memory", "discover_root", "template_dir", "CheckResult", "IndexResult", "walk", "ROOT_ENV", "SESSION_ENV"]


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fsmem.memory' has no attribute {name!r}")
