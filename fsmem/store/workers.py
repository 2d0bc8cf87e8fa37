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

import collections
import contextlib
import gc
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from fsmem.errors import ConfigError, WorkerDied

WORKERS_ENV = "FSMEM_WORKERS"  # how many worker processes a build may use (1: parse in the process itself)
PARALLEL_FROM = 200  # files; fewer are parsed in the process (for fewer, starting workers costs more than it saves)
CHUNK_FILES = 50  # files a worker parses per task
# tasks handed out per worker beyond the one the caller waits for: enough to keep the workers busy while the caller
# writes a batch (10 tasks of 50 files), few enough that a command killed halfway has not parsed much it never wrote,
# nor holds a whole memory's parsed files (100k files: gigabytes) when the writing is the slower side
AHEAD_TASKS = 8
MAX_WORKERS = 64  # the most FSMEM_WORKERS may ask for, where the machine has fewer cores

R = TypeVar("R")


def count() -> int:
    """Worker processes a build uses: FSMEM_WORKERS when set, else the cores this process may run on.

    A value that is no whole number from 1 to `MAX_WORKERS` (or the cores, where there are more) is refused:
    read as unset it took every core where one was asked for, and 99,999 started a process per task (2,000
    at 100k files). Its digits are counted before `int` reads them: 5,000 of them were Python's ValueError."""
    cores = _cores()
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return cores
    most = max(MAX_WORKERS, cores)
    if not (raw.isascii() and raw.isdigit() and len(raw.lstrip("0")) <= len(str(most)) and 1 <= int(raw) <= most):
        from fsmem.budget import echo

        raise ConfigError(f"{WORKERS_ENV} is {echo(raw)}, not a whole number of worker processes from 1 to {most}")
    return int(raw)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def mapped(func: Callable[[Any], R], tasks: Iterable[Any], size: int) -> Iterator[R]:
    """`map(func, tasks)`, in worker processes when `size` (the files in all tasks) is worth them; in order.

    `func` is a module-level function (a spawned worker imports it by name). The tasks go to a `Pool`, all
    known at once."""
    workers = count()
    if workers <= 1 or size < PARALLEL_FROM:
        yield from map(func, tasks)
        return
    todo = list(tasks)
    with Pool(func, min(workers, len(todo))) as pool:
        for task in todo:
            pool.put(task)
        pool.close()
        yield from pool.results()


class Pool:
    """Worker processes running `func` on tasks given one at a time, as the caller finds them (`put`: a build
    hands its first files out while its walk goes on), their results taken in the order given (`results`).

    Worker k of n runs tasks k, k + n, k + 2n, ... (started with its first task) and sends each result on its
    own pipe, which the caller reads in turn, in the thread that asked: no pool thread of the caller's beside
    the one writing (multiprocessing's pool kept three, one of which woke for every task: 10k files, 0.6 s of
    the command's CPU). A worker is sent a task only while it holds fewer than `AHEAD_TASKS` whose results the
    caller has not taken; the rest wait in the caller. A worker reads its tasks in a thread of its own, so that
    the caller never waits on a worker busy parsing, nor a worker sending a result on a caller sending a task."""

    def __init__(self, func: Callable[[Any], Any], workers: int):
        self._func, self._workers = func, max(1, workers)
        self._running: list[tuple[Any, Any, Any]] = []  # (process, its results' pipe, its tasks' pipe): ours
        self._held: collections.deque[Any] = collections.deque()  # tasks given, not sent yet (AHEAD_TASKS)
        self._sent = [0] * self._workers  # tasks sent to each worker
        self._taken = [0] * self._workers  # results taken from each
        self._given = 0
        self._closed = False
        self._paused: contextlib.AbstractContextManager[None] | None = _collector_paused()
        self._paused.__enter__()

    @property
    def given(self) -> int:
        """How many tasks were given (`put`)."""
        return self._given

    def put(self, task: Any) -> None:
        """One more task, after those given before."""
        self._held.append(task)
        self._given += 1
        self._send()

    def close(self) -> None:
        """No more tasks: each worker ends once it has sent its results."""
        self._closed = True
        self._send()

    def results(self) -> Iterator[Any]:
        """The results of the tasks given, in order, as each comes; the caller first `close`s. Raises a task's
        exception, or `WorkerDied` when a worker ended without sending its task's result."""
        for at in range(self._given):
            worker = at % self._workers
            process, results, _tasks = self._running[worker]
            try:
                failed, result = results.recv()
            except (EOFError, OSError):
                process.join(1)
                raise WorkerDied(
                    f"a worker process ended (exit code {process.exitcode}) before its task was done"
                ) from None
            if failed:
                raise result
            self._taken[worker] += 1
            self._send()
            yield result

    def _send(self) -> None:
        """Send the held tasks, in order, while each one's worker holds fewer than AHEAD_TASKS; once closed and
        all sent, tell the workers there are no more."""
        while self._held:
            worker = (self._given - len(self._held)) % self._workers
            if self._sent[worker] - self._taken[worker] >= AHEAD_TASKS:
                return
            if worker == len(self._running):
                self._start()
            with contextlib.suppress(OSError):  # a worker that died: its next result says so
                self._running[worker][2].send(self._held[0])
            self._held.popleft()
            self._sent[worker] += 1
        if self._closed:
            for _process, _results, tasks in self._running:
                if not tasks.closed:
                    with contextlib.suppress(OSError):
                        tasks.send(None)
                    tasks.close()

    def _start(self) -> None:
        """Start the next worker: forked while this process has one thread, else spawned (the module's docstring)."""
        import multiprocessing

        context: Any = multiprocessing.get_context(
            "fork" if threading.active_count() == 1 and hasattr(os, "fork") else "spawn"
        )
        results, sent = context.Pipe(duplex=False)
        given, tasks = context.Pipe(duplex=False)
        process = context.Process(target=_work, args=(self._func, given, sent, os.getpid()), daemon=True)
        process.start()
        sent.close()
        given.close()
        self._running.append((process, results, tasks))

    def stop(self) -> None:
        """End the workers (those still running were not wanted: killed) and free what the pool holds."""
        running, self._running = self._running, []
        for process, results, tasks in running:
            if process.is_alive():
                process.kill()
            process.join()
            results.close()
            tasks.close()
        if self._paused is not None:
            self._paused.__exit__(None, None, None)
            self._paused = None

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _work(func: Callable[[Any], Any], given: Any, results: Any, parent: int) -> None:
    """A worker: `func` of each task given, in order, each result sent as (failed, result or the exception);
    the tasks read as they come by a thread (see `Pool`), until None."""
    _start_worker(parent)
    waiting: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        try:
            while True:
                task = given.recv()
                waiting.put(task)
                if task is None:
                    return
        except (EOFError, OSError):  # the caller ended
            waiting.put(None)

    threading.Thread(target=read, daemon=True).start()
    while (task := waiting.get()) is not None:
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
    """In a worker: no cyclic garbage collector (see the module's docstring), an end with the command that
    started it, however it ended, and no Ctrl-C of its own: a terminal's Ctrl-C reaches every process of the
    command's group, and each worker printed its KeyboardInterrupt's traceback under the command's "interrupted"
    (a forked one ran the watcher's handler instead); the command decides, and its end ends the workers."""
    import signal

    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills this worker when its parent dies
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above ran
        os._exit(0)
