"""A long-lived process's memory warmed: the caches it already has on disk caught up before the first call.

`fsmem watch`, `fsmem serve` and the process that answers one-shot reads hold
the memory's change feed; each cache's first catch-up on it is a walk of every
file (3-8 s at 100k files), and the tokenizer loads once per process. Done at
the start, in the background of a server, none of it is paid by the first
call. Nothing the memory does not have is built: a memory never searched or
grepped pays for no index.

What such a process has made by then lives as long as it does; `settle` tells
Python's cyclic garbage collector to stop walking it.
"""

from __future__ import annotations

import gc
import importlib
import os
from typing import Any

# What a first search, grep, read or ls imports besides what `warm` does: imported by `settle`, so that the collector
# does not walk their objects either (tests/test_warming.py holds the list to what a search imports)
ANSWERING_MODULES = (
    "Stemmer",
    "fsmem.operations.reads",
    "fsmem.operations.search",
    "fsmem.query.as_of",
    "fsmem.query.listing",
    "fsmem.query.reading",
    "fsmem.search.ranking",
    "fsmem.spec.operations",
    "fsmem.spec.schema",
    "yaml",
)


def warm(memory: Any) -> None:
    """Catch up `memory`'s metadata rows, its search index if one holds files (and make what every question
    reads of it: `fsmem.search.scoring.warm`), its grep word index and the index's list of words if that index
    exists, and load its tokenizer. Raises what a cache raises
    (`FsmemError`, `OSError`): the call that needs that cache then says why."""
    from fsmem.names import STATE_DIR
    from fsmem.query import grep_words
    from fsmem.store import kill_points
    from fsmem.tokens import get_encoding

    memory.catalog.sync()
    kill_points.reached("warm")
    index = memory.search_index
    if index.guarded(_holds_files):
        from fsmem.search import scoring

        index.refresh()
        scoring.warm(index)
    if os.path.exists(os.path.join(memory.root, STATE_DIR, grep_words.INDEX_FILE)):
        words = grep_words.caught_up(memory.root)
        if words is not None:
            words.load_vocabulary()  # what a grep of a part of a word reads: 0.3 s of CPU at 100k files
    get_encoding(memory.tokens.encoding_name)


def settle() -> None:
    """Import what answering needs (`ANSWERING_MODULES`), then move every object the process holds out of the
    cyclic collector's walks (`gc.freeze`): a long-lived process calls it once its memories are warm.

    A full collection walks every container the process holds, and falls within whichever call allocates at
    that moment: at 100k files, after 60 new questions, one took 9.7 ms of CPU settled against 26.2 ms not
    (docs/performance.md, `bench_settle.py`). Frozen objects are still freed when their last
    reference goes; only a cycle among them would stay, and what exists after warming is the process's own.
    """
    for name in ANSWERING_MODULES:
        importlib.import_module(name)
    gc.collect()  # what is garbage now is not kept
    gc.freeze()


def _holds_files(conn: Any) -> bool:
    """Whether the search index has been built (a first search builds it; warming does not)."""
    return conn.execute("SELECT 1 FROM search_files LIMIT 1").fetchone() is not None
