"""rg's first pass of a grep, kept while the change feed says that no memory file changed.

A team's agents grep for the same names again and again, and each grep of a
memory is one rg pass over every file (most of a server's work under load
when nothing is kept). In a process whose change feed is trusted
(`fsmem.store.feed`), the feed names every memory file written, renamed or
deleted since a consumer last asked; this module is such a consumer. While
nothing changed, the same rg command line over the same files prints the
same bytes, so its output is kept and given again; any change, a full walk
of the feed (its start, an overflow, its periodic check) or an untrusted feed
lets everything kept go. Only rg's raw output is kept: what a call makes of
it (its scope, superseded lines, its page and budget) is worked out again at
every call, so two agents with different scopes never share an answer.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

CONSUMER = "grep"  # the feed's name for what this module keeps
MAX_BYTES = 16 << 20  # of outputs kept per memory root
MAX_OUTPUT = 4 << 20  # a longer output is not kept (at 100k files a count pass prints about 4 MB)


class Outputs:
    """One memory root's kept outputs, and the generation they belong to (moved by every change).

    A plain class, not a dataclass: making one execs its methods at import, which each `fsmem grep`
    paid before it printed."""

    __slots__ = ("lock", "generation", "entries", "size", "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.generation = 0
        self.entries: OrderedDict[tuple, bytes | None] = OrderedDict()
        self.size = 0

    def get(self, key: tuple, generation: int) -> tuple[bool, bytes | None]:
        """(found, output): None is a kept answer too (the output passed its limit)."""
        with self.lock:
            if generation != self.generation or key not in self.entries:
                return False, None
            self.entries.move_to_end(key)
            return True, self.entries[key]

    def put(self, key: tuple, generation: int, output: bytes | None) -> None:
        """Keep `output`, unless a change was seen since the call that made it caught up (it may predate it)."""
        size = len(output or b"")
        with self.lock:
            if generation != self.generation or size > MAX_OUTPUT or key in self.entries:
                return
            self.entries[key] = output
            self.size += size
            while self.size > MAX_BYTES:
                _, dropped = self.entries.popitem(last=False)
                self.size -= len(dropped or b"")

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0


class Kept:
    """An `Rg` whose whole outputs (`output`) are kept for this call's generation; streamed passes run rg."""

    def __init__(self, rg: Any, command: list[str], outputs: Outputs, generation: int):
        self.rg, self.command, self.outputs, self.generation = rg, tuple(command), outputs, generation

    @classmethod
    def of(cls, rg: Any, root: Path, command: list[str]) -> Any:
        """`rg` itself where nothing may be kept, else `rg` keeping its outputs."""
        found = caught_up(root)
        return rg if found is None else cls(rg, command, *found)

    def output(self, args: list[str], *, limit: int | None = None, each: Any = None) -> bytes | None:
        """`Rg.output`: a kept output is given whole (`each` sees none of it), another as rg prints it."""
        key = (*self.command, *args, limit)
        found, output = self.outputs.get(key, self.generation)
        if not found:
            output = self.rg.output(args, limit=limit, each=each)
            self.outputs.put(key, self.generation, output)
        return output

    def stream(self, args: list[str], feed: Any, *, stop: Any) -> None:
        self.rg.stream(args, feed, stop=stop)


# by feed: what a feed's root kept goes with the feed (the last `Memory` of the root closed, the feed collected)
_kept: weakref.WeakKeyDictionary[Any, Outputs] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def caught_up(root: Path) -> tuple[Outputs, int] | None:
    """`root`'s kept outputs and their generation once the feed's changes are taken; None where no trusted
    feed of `root` runs in this process (a one-shot `fsmem grep`, a network file system): rg runs."""
    feeds = sys.modules.get("fsmem.store.feed")  # never imported here: a process without a feed keeps nothing
    if feeds is None:
        return None
    key = Path(root).resolve()
    feed = feeds.current(key)
    if feed is None or not feed.trusted:
        return None
    with _kept_lock:
        outputs = _kept.get(feed)
        if outputs is None:
            outputs = _kept[feed] = Outputs()
    changed = feed.catch_up(CONSUMER, bool)  # a whole walk (start, overflow, the periodic check) counts too
    with outputs.lock:
        if changed or not feed.trusted:
            outputs.generation += 1
            outputs.clear()
        return outputs, outputs.generation


def kept_for(root: Path) -> Outputs | None:
    """What is kept for `root` now (None: nothing, or no feed of it runs)."""
    feeds = sys.modules.get("fsmem.store.feed")
    feed = feeds.current(Path(root).resolve()) if feeds is not None else None
    with _kept_lock:
        return _kept.get(feed) if feed is not None else None


def forget(root: Path) -> None:
    """Let go of everything kept for `root` (whichever feed of it kept it)."""
    key = Path(root).resolve()
    with _kept_lock:
        for feed in [feed for feed in _kept if feed.root == key]:
            del _kept[feed]
