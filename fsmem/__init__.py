"""fsmem: one shared, durable memory for AI agents and the humans who run them.

The memory is a plain directory of Markdown files with YAML front matter;
`fsmem.Memory(root)` lists, greps, reads, searches and writes it within a
token budget. The public result types and every error fsmem raises are
importable from here; each is loaded on first use, so `import fsmem` (and the
CLI's start-up) costs only what is used. Type checkers read the same names
from the imports under TYPE_CHECKING (`tests/test_vocabulary.py` holds the two
lists equal).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
__version__ = "0.3.0"

# public name -> module that defines it
_EXPORTS = {
    "Memory": "fsmem.memory",
    "CheckResult": "fsmem.operations.upkeep",
    "IndexResult": "fsmem.operations.upkeep",
    "Budget": "fsmem.budget",
    "Page": "fsmem.budget",
    "Listing": "fsmem.query.listing",
    "ListEntry": "fsmem.query.listing",
    "GrepResult": "fsmem.query.grep",
    "GrepMatch": "fsmem.query.grep",
    "ReadResult": "fsmem.query.reading",
    "ContextBlock": "fsmem.query.context",
    "StatsResult": "fsmem.query.stats",
    "WriteResult": "fsmem.store.writing",
    "SearchResult": "fsmem.search.ranking",
    "SearchHit": "fsmem.search.ranking",
    "RecallResult": "fsmem.search.recall",
    "ConsolidationReport": "fsmem.consolidate.apply",
    "FsmemError": "fsmem.errors",
    "RootNotFound": "fsmem.errors",
    "NotAMemory": "fsmem.errors",
    "PathEscape": "fsmem.errors",
    "NotFound": "fsmem.errors",
    "OutOfScope": "fsmem.errors",
    "AlreadyExists": "fsmem.errors",
    "InvalidArgument": "fsmem.errors",
    "EditConflict": "fsmem.errors",
    "ReadOnly": "fsmem.errors",
    "LockTimeout": "fsmem.errors",
    "ConsolidationRunning": "fsmem.errors",
    "PatternTimeout": "fsmem.errors",
    "ConfigError": "fsmem.errors",
    "ChangedOnDisk": "fsmem.errors",
    "MemoryToolError": "fsmem.errors",
    "StorageError": "fsmem.errors",
    "WorkerDied": "fsmem.errors",
    "MissingDependency": "fsmem.errors",
    "SecretFound": "fsmem.errors",
    "HistoryOff": "fsmem.errors",
    "HistoryError": "fsmem.errors",
    "SyncFailed": "fsmem.errors",
    "SyncRefused": "fsmem.errors",
    "ConfigHeld": "fsmem.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # what the type checker reads; at run time each name is loaded on first use
    from collections.abc import Callable

    from fsmem.budget import Budget as Budget, Page as Page
    from fsmem.consolidate.apply import ConsolidationReport as ConsolidationReport
    from fsmem.errors import (
        AlreadyExists as AlreadyExists,
        ChangedOnDisk as ChangedOnDisk,
        ConfigError as ConfigError,
        ConfigHeld as ConfigHeld,
        ConsolidationRunning as ConsolidationRunning,
        EditConflict as EditConflict,
        FsmemError as FsmemError,
        HistoryError as HistoryError,
        HistoryOff as HistoryOff,
        InvalidArgument as InvalidArgument,
        LockTimeout as LockTimeout,
        MemoryToolError as MemoryToolError,
        MissingDependency as MissingDependency,
        NotAMemory as NotAMemory,
        NotFound as NotFound,
        OutOfScope as OutOfScope,
        PathEscape as PathEscape,
        PatternTimeout as PatternTimeout,
        ReadOnly as ReadOnly,
        RootNotFound as RootNotFound,
        SecretFound as SecretFound,
        StorageError as StorageError,
        SyncFailed as SyncFailed,
        SyncRefused as SyncRefused,
        WorkerDied as WorkerDied,
    )
    from fsmem.memory import Memory as Memory
    from fsmem.operations.upkeep import CheckResult as CheckResult, IndexResult as IndexResult
    from fsmem.query.context import ContextBlock as ContextBlock
    from fsmem.query.grep import GrepMatch as GrepMatch, GrepResult as GrepResult
    from fsmem.query.listing import ListEntry as ListEntry, Listing as Listing
    from fsmem.query.reading import ReadResult as ReadResult
    from fsmem.query.stats import StatsResult as StatsResult
    from fsmem.search.ranking import SearchHit as SearchHit, SearchResult as SearchResult
    from fsmem.search.recall import RecallResult as RecallResult
    from fsmem.store.writing import WriteResult as WriteResult


def _lazy_names(package: str, exports: dict[str, str], namespace: dict[str, object]) -> Callable[[str], object]:
    """A package's `__getattr__` (PEP 562) for names loaded on first use: `exports` maps each name to the module
    that defines it (relative to `package` when it starts with a dot); a name once loaded is kept in `namespace`,
    so it is looked up here only once."""

    def load(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return load


__getattr__ = _lazy_names("fsmem", _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
