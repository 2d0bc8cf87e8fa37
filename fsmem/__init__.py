"""fsmem: one shared, durable memory for AI agents and the humans who run them.

The memory is a plain directory of Markdown files with YAML front matter;
`fsmem.Memory(root)` lists, greps, reads, searches and writes it within a
token budget. The public result types and errors are importable from here;
each is loaded on first use, so `import fsmem` (and the CLI's start-up) costs
only what is used. Type checkers read the same names from `__init__.pyi`.
"""

from __future__ import annotations

import importlib

__version__ = "0.3.0"

# public name -> module that defines it
_EXPORTS = {
    "Memory": "fsmem.memory",
    "CheckResult": "fsmem.memory",
    "IndexResult": "fsmem.memory",
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
    "PatternTimeout": "fsmem.errors",
    "ConfigError": "fsmem.errors",
    "ChangedOnDisk": "fsmem.errors",
    "MemoryToolError": "fsmem.errors",
    "MissingDependency": "fsmem.errors",
    "HistoryOff": "fsmem.errors",
    "HistoryError": "fsmem.errors",
    "SyncFailed": "fsmem.errors",
}

__all__ = [
    "__version__",
    "Memory",
    "CheckResult",
    "IndexResult",
    "Budget",
    "Page",
    "Listing",
    "ListEntry",
    "GrepResult",
    "GrepMatch",
    "ReadResult",
    "ContextBlock",
    "StatsResult",
    "WriteResult",
    "SearchResult",
    "SearchHit",
    "RecallResult",
    "ConsolidationReport",
    "FsmemError",
    "RootNotFound",
    "NotAMemory",
    "PathEscape",
    "NotFound",
    "OutOfScope",
    "AlreadyExists",
    "InvalidArgument",
    "EditConflict",
    "ReadOnly",
    "LockTimeout",
    "PatternTimeout",
    "ConfigError",
    "ChangedOnDisk",
    "MemoryToolError",
    "MissingDependency",
    "HistoryOff",
    "HistoryError",
    "SyncFailed",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fsmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
