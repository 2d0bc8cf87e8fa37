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
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from fsmem.errors import WorkerDied

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

    `func` is a module-level function (a spawned worker imports it by name). Worker k of n runs tasks k, k + n,
    k + 2n, ... and sends each result on its own pipe, which the caller reads in turn, in the thread that asked:
    no pool, no thread of the caller's beside the one writing (multiprocessing's pool kept three, one of which
    woke for every task: 10k files, 0.6 s of the command's CPU). A worker starts a task at most `AHEAD_TASKS`
    ahead of the results the caller took from it: the caller hands it one credit per result taken."""
    workers = count()
    if workers <= 1 or size < PARALLEL_FROM:
        yield from map(func, tasks)
        return
    import multiprocessing

    todo = list(tasks)
    workers = min(workers, len(todo))
    context: Any = multiprocessing.get_context(
        "fork" if threading.active_count() == 1 and hasattr(os, "fork") else "spawn"
    )
    running: list[tuple[Any, Any, Any]] = []  # (process, its results' pipe, its credits' pipe): the caller's ends
    with _collector_paused():
        try:
            for worker in range(workers):
                results, sent = context.Pipe(duplex=False)
                taken, credits = context.Pipe(duplex=False)
                process = context.Process(
                    target=_work, args=(func, todo[worker::workers], sent, taken, os.getpid()), daemon=True
                )
                process.start()
                sent.close()
                taken.close()
                running.append((process, results, credits))
            for at in range(len(todo)):
                process, results, credits = running[at % workers]
                try:
                    failed, result = results.recv()
                except (EOFError, OSError):
                    process.join(1)
                    raise WorkerDied(
                        f"a worker process ended (exit code {process.exitcode}) before its task was done"
                    ) from None
                if failed:
                    raise result
                if at + workers * AHEAD_TASKS < len(todo):
                    with contextlib.suppress(OSError):  # a worker that died: its next result says so
                        credits.send_bytes(b"")  # the worker may start one more task
                yield result
        finally:
            for process, results, credits in running:
                if process.is_alive():
                    process.kill()  # the caller stopped early: the rest of its tasks are not wanted
                process.join()
                results.close()
                credits.close()


def _work(func: Callable[[Any], Any], tasks: list[Any], results: Any, credits: Any, parent: int) -> None:
    """A worker: `func` of each task, in order, each result sent as (failed, result or the exception), a task
    started only once the caller took the result `AHEAD_TASKS` before it (one credit each)."""
    _start_worker(parent)
    for at, task in enumerate(tasks):
        if at >= AHEAD_TASKS:
            credits.recv_bytes()
        try:
            reply = (False, func(task))
        except Exception as exc:  # the caller raises it, as map() would
            reply = (True, exc)
        results.send(reply)
    results.close()


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
