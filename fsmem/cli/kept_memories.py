"""The memories a one-shot request opens (`fsmem.cli.answering`), kept open for the next one.

A `Memory` opened anew for every request starts cold (its cache connection, the counts of its listings, its
search index's kept state), which was most of an `ls` asked of the watcher; a kept one answers as a new one
would, as the server's kept views do. Before the socket is there, the memory a plain request opens is opened and
the caches that exist are caught up (`Kept.warm`): each cache's first catch-up on the change feed is a walk of
every file (3-8 s at 100k files), and the tokenizer loads once per process; done then, while commands still walk
as without a watcher, and not in the first request of each kind, which would hold every command behind it past
`rendezvous.READY_SECONDS` into a walk of its own.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEPT = 4  # memories kept open between requests, one per (root, agent) asked as; the least recent is closed
RACY_NS = 1_000_000_000  # an fsmem.yaml changed this recently is read again at the next request (Config.load)


class Kept:
    """The memories requests opened, kept open for the next request of the same root and agent.

    A kept memory is given again only while fsmem.yaml is as it was when it was opened (its stamp, as
    `Config.load` keeps its parsed copy; one changed within the last second is never kept, since an edit within
    the same tick of the clock would not move the stamp) and `.fsmem` is still no link; everything else a
    memory holds is kept in step with the files by its catalog and search index, as in any long-lived process.
    """

    def __init__(self) -> None:
        self.memories: OrderedDict[tuple[str, str | None], tuple[tuple[int, int, int, int], Any]] = OrderedDict()

    def open(self, given: str | None, agent: str | None) -> Any:
        """The memory `Memory(given, agent=agent)` would open: a kept one, or a new one (kept if it may be)."""
        from fsmem.memory import Memory
        from fsmem.names import CONFIG_FILE, find_root
        from fsmem.store.root import refuse_state_link

        root = find_root(given)
        try:
            found = os.stat(os.path.join(root, CONFIG_FILE)) if root is not None else None
        except OSError:
            found = None
        if root is None or found is None:
            return Memory(given, agent=agent)  # it says why there is no memory
        stamp = (found.st_mtime_ns, found.st_size, found.st_ino, found.st_ctime_ns)
        key = (root, agent)
        kept = self.memories.pop(key, None)
        if kept is not None and kept[0] == stamp:
            refuse_state_link(Path(root))
            self.memories[key] = kept
            return kept[1]
        if kept is not None:
            kept[1].close()
        memory = Memory(given, agent=agent)
        if stamp[0] < time.time_ns() - RACY_NS:
            self.memories[key] = (stamp, memory)
            while len(self.memories) > KEPT:
                self.memories.popitem(last=False)[1][1].close()
        return memory

    def warm(self, root: str, say: Callable[[str], None]) -> None:
        """Open the memory of a request without --agent and catch up the caches it already has on disk
        (`fsmem.warming`), so the first requests need no walk, and settle the process (`settle`). What fails
        here is left for the request that needs it, which says why."""
        from fsmem.errors import FsmemError
        from fsmem.warming import settle, warm

        try:
            warm(self.open(root, None))
        except (OSError, FsmemError) as exc:
            say(f"the first one-shot reads will catch up the caches themselves: {exc}")
        settle()

    def holds(self, memory: Any) -> bool:
        """Whether `memory` is kept (its command must not close it)."""
        return any(kept is memory for _, kept in self.memories.values())

    def close(self) -> None:
        while self.memories:
            self.memories.popitem()[1][1].close()
