"""The change feed's periodic check: a walk of the whole memory in a thread of its own, compared with the last one.

Events can be missed for a reason no one reports (a write through a hard link
from outside the memory, a kernel that drops one): the feed checks anyway. The
check used to be a whole walk handed to every consumer (`Delta.full`), paid by
the question that fell on it — at 100k files some 3 s for each cache, and the
grep outputs kept let go. Here the feed itself walks, off every question's
path, and compares each memory file's stamp (mtime, size, inode, ctime) with
the one the walk before saw. Only the paths whose stamp changed, that appeared
or that went are handed to the consumers, as if an event had named them: an
unchanged memory costs a cache nothing at all (no walk, no file re-read, no
kept output let go).

Comparing walk with walk finds every change made after the earlier walk
looked at that file. The feed takes its first walk when it starts, before any
consumer's own first walk (`Delta.full`, "started") begins, so whatever a
consumer's first walk missed, the next check finds. A walk is paced over
about a quarter of the period (`PACE_SHARE`, in slices of `SLICE` files with a
pause between), so the thread takes the GIL in short turns and a question
beside it waits no more than a slice; one starts every half period
(`INTERVAL_SHARE`). A change that no event reported is thus in the caches at
the first call after at most three quarters of `verify_seconds`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fsmem.store.walk import walk_stats

SLICE = 256  # files a paced walk stats before it pauses
PACE_SHARE = 0.25  # a walk spreads itself over this share of the period (faster when the walk itself is slow)
INTERVAL_SHARE = 0.5  # a walk starts this share of the period after the previous one started

Stamps = dict[str, int]  # memory file -> a hash of its stamp (mtime_ns, size, ino, ctime_ns): 100k files ~13 MB


def take(root: Path, pause: Callable[[], bool] | None = None) -> Stamps | None:
    """Every memory file's stamp, by path; None when `pause` (called after every `SLICE` files) says stop."""
    stamps: Stamps = {}
    for count, (rel, _full, st) in enumerate(walk_stats(root), 1):
        stamps[rel] = hash((st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns))
        if pause is not None and count % SLICE == 0 and pause():
            return None
    return stamps


def changed(before: Stamps, after: Stamps) -> list[str]:
    """The paths whose stamp is not the same in both walks (new and gone ones included), sorted."""
    return sorted(rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel))


class Checker:
    """One feed's checks: `check()` walks and compares now; `start()` runs them in a daemon thread until
    `stop()`. `report(paths)` gets what changed after each check (never called with the feed's lock held)."""

    def __init__(self, root: Path, period: Callable[[], float], report: Callable[[list[str]], None]):
        self.root = root
        self.period = period  # read at every turn: a test (or a caller) may shorten it while the thread runs
        self.report = report
        self.stamps: Stamps | None = None
        self.checks = 0  # checks finished (for tests and benchmarks)
        self._lock = threading.Lock()  # one check at a time (the thread's, a test's)
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def first(self) -> None:
        """The walk every later check is compared with, taken before any consumer walks (`Feed.start`)."""
        with self._lock:
            self.stamps = take(self.root)

    def check(self, pace: float = 0.0) -> list[str] | None:
        """Walk (over about `pace` seconds), hand the paths whose stamp changed to `report` and answer them;
        None when stopped meanwhile."""
        with self._lock:
            pause = self._pacer(pace) if pace > 0 else None
            found = take(self.root, pause)
            if found is None:
                return None
            paths = changed(self.stamps or {}, found)
            self.stamps = found
            self.checks += 1
        if paths:
            self.report(paths)
        return paths

    def _pacer(self, pace: float) -> Callable[[], bool]:
        slices = max(1, len(self.stamps or {}) // SLICE)
        each = pace / slices
        last = [time.monotonic()]

        def pause() -> bool:
            left = each - (time.monotonic() - last[0])
            if left > 0:
                self._wake.wait(min(left, 1.0))
            last[0] = time.monotonic()
            return self._stopped

        return pause

    # -- the thread ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"fsmem-feed-check {self.root}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def wake(self) -> None:
        """The period changed: take it at once."""
        self._wake.set()

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopped

    def _run(self) -> None:
        began = time.monotonic()  # the first walk was just taken (`first`)
        while not self._stopped:
            period = self.period()
            left = began + period * INTERVAL_SHARE - time.monotonic() if math.isfinite(period) else None
            if left is None or left > 0:  # math.inf: checks only when asked (`check()`, as tests do)
                self._wake.wait(left)
                self._wake.clear()
                continue  # the time came, the period changed, or the feed stopped: look again
            began = time.monotonic()
            try:
                if self.check(pace=period * PACE_SHARE) is None:
                    return
            except OSError:  # the root gone midway: the feed distrusts itself on its event; else next turn
                pass
