"""Type stub of fsmem's lazy exports (see __init__.py)."""

from fsmem.budget import Budget, Page
from fsmem.consolidate.apply import ConsolidationReport
from fsmem.errors import (
    AlreadyExists,
    ChangedOnDisk,
    ConfigError,
    EditConflict,
    FsmemError,
    HistoryError,
    HistoryOff,
    InvalidArgument,
    LockTimeout,
    MemoryToolError,
    MissingDependency,
    NotAMemory,
    NotFound,
    OutOfScope,
    PathEscape,
    PatternTimeout,
    ReadOnly,
    RootNotFound,
    SyncFailed,
)
from fsmem.memory import CheckResult, IndexResult, Memory
from fsmem.query.context import ContextBlock
from fsmem.query.grep import GrepMatch, GrepResult
from fsmem.query.listing import ListEntry, Listing
from fsmem.query.reading import ReadResult
from fsmem.query.stats import StatsResult
from fsmem.search.ranking import SearchHit, SearchResult
from fsmem.search.recall import RecallResult
from fsmem.store.writing import WriteResult

__version__: str
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
