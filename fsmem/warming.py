"""A long-lived process's memory warmed: the caches it already has on disk caught up before the first call.

`fsmem watch`, `fsmem serve` and the process that answers one-shot reads hold
the memory's change feed; each cache's first catch-up on it is a walk of every
file (3-8 s at 100k files), and the tokenizer loads once per process. Done at
the start, in the background of a server, none of it is paid by the first
call. Nothing the memory does not have is built: a memory never searched or
grepped pays for no index.
"""

from __future__ import annotations

import os
from typing import Any


def warm(memory: Any) -> None:
    """Catch up `memory`'s metadata rows, its search index if one holds files, its grep word index and the
    index's list of words if that index exists, and load its tokenizer. Raises what a cache raises
    (`FsmemError`, `OSError`): the call that needs that cache then says why."""
    from fsmem.names import STATE_DIR
    from fsmem.query import grep_words
    from fsmem.tokens import get_encoding

    memory.catalog.sync()
    index = memory.search_index
    if index.guarded(_holds_files):
        index.refresh()
    if os.path.exists(os.path.join(memory.root, STATE_DIR, grep_words.INDEX_FILE)):
        words = grep_words.caught_up(memory.root)
        if words is not None:
            words.load_vocabulary()  # what a grep of a part of a word reads: 0.3 s of CPU at 100k files
    get_encoding(memory.tokens.encoding_name)


def _holds_files(conn: Any) -> bool:
    """Whether the search index has been built (a first search builds it; warming does not)."""
    return conn.execute("SELECT 1 FROM search_files LIMIT 1").fetchone() is not None
