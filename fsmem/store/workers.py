"""Work spread over the machine's cores: a cold build parses thousands of files, one core each at a time.

Reading a file into what a cache stores (its rows stemmed, its front matter
parsed, its tokens counted) is Python and holds the GIL, so threads would take
turns; worker processes parse side by side while the caller writes what they
return into SQLite (one writer). Results come back in the order asked, so a
build in workers stores exactly what a build in one process stores.

A worker is forked while the process has one thread (nothing else can hold a
lock the child would inherit), and spawned otherwise. It dies with its parent
(Linux's PR_SET_PDEATHSIG, or seeing its parent gone): a command killed with
SIGKILL leaves no worker behind.

Python's cyclic garbage collector is off in the workers and, while a pool runs,
in the caller: what a build makes (parsed files, rows, counts) holds no cycle
and is freed by reference counts as each task is written, so the collector's
passes over it (10k files: some 0.4 s of CPU in all) found nothing to free.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

WORKERS_ENV = "FSMEM_WORKERS"  # how many worker processes a build may use (1: parse in the process itself)
PARALLEL_FROM = 200  # files; fewer are parsed in the process (for fewer, starting workers costs more than it saves)
CHUNK_FILES = 50  # files a worker parses per task
# tasks handed out per worker beyond the one the caller waits for: enough to keep the workers busy while the caller
# writes a batch (10 tasks of 50 files), few enough that a command killed halfway has not parsed much it never wrote,
# nor holds a whole memory's parsed files (100k files: gigabytes) when the writing is the slower side
AHEAD_TASKS = 8

R = TypeVar("R")


def count() -> int:
    """Worker processes a build uses: FSMEM_WORKERS when set, else the cores this process may run on."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def mapped(func: Callable[[Any], R], tasks: Iterable[Any], size: int) -> Iterator[R]:
    """`map(func, tasks)`, in worker processes when `size` (the files in all tasks) is worth them; in order.

    `func` is a module-level function (a worker imports it by name). The workers run at most `AHEAD_TASKS` tasks
    each ahead of the results taken."""
    workers = count()
    if workers <= 1 or size < PARALLEL_FROM:
        yield from map(func, tasks)
        return
    import multiprocessing

    method = "fork" if threading.active_count() == 1 and hasattr(os, "fork") else "spawn"
    with (
        _collector_paused(),
        multiprocessing.get_context(method).Pool(workers, initializer=_start_worker, initargs=(os.getpid(),)) as pool,
    ):
        todo = iter(tasks)
        running = deque(pool.apply_async(func, (task,)) for task in itertools.islice(todo, workers * AHEAD_TASKS))
        while running:
            result = running.popleft().get()
            running.extend(pool.apply_async(func, (task,)) for task in itertools.islice(todo, 1))
            yield result


_paused = [0, False]  # pools running in this process, and whether the collector was on before the first
_pause_lock = threading.Lock()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a pool runs (see the module's docstring); back as it was when the
    last pool of the process ends."""
    with _pause_lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused[1]:
                gc.enable()


def _start_worker(parent: int) -> None:
    """In a worker: no cyclic garbage collector (see the module's docstring), and an end with the command that
    started it, however it ended."""
    gc.disable()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills this worker when its parent dies
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above ran
        os._exit(0)
