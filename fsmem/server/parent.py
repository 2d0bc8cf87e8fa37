"""The parent of `fsmem serve` with `processes` above 1: it owns the listening socket and N worker processes.

One process's GIL bounds what it serves (about 1.15 cores under 32 clients),
so a machine's other cores need other processes; and a token's limits (its
rate, its requests in flight, its event streams) hold exactly only if one
process keeps them. So the parent accepts each connection, waits for its
first request's head without reading it (`MSG_PEEK`), picks the worker of
the head's bearer token (`fsmem.server.pinning`; any worker when there is
none) and passes the socket to it (`socket.send_fds`); the worker reads the
request itself. The wait is bounded as one process bounds it: a head must
come within `header_timeout_seconds` and 16 KiB (past either, a worker gets
the connection and answers 408 or 431 as one process does), a silent client
is looked at again after 10 to 100 ms, never polled hot, and at most
`max_connections` connections wait at once: past it one connection of the
address with the most waiting is closed, the oldest that sent part of a head
and stopped, else the oldest, once a look at it found no whole head (one
accepted in the same burst may have sent its head before the parent read it:
that one is handed on). A closed one carries no token and reaches no worker,
so a flood of half-sent requests closes its own connections; the workers keep
their own connections for tokens (`fsmem.server.protocol.Strangers`).

It runs no event loop of its own, only a selector: accepting, peeking and
passing a socket cost it a few system calls per connection (clients keep
theirs open), never per request. SIGTERM or SIGINT stop it: no connection
is taken any more, every worker is told to stop gracefully (as one process
stops) and awaited, then it logs `stopped` and exits 0. A worker that dies
is logged and started again; one that dies before it serves, three times in
a row, stops the server with an error (exit 1). Workers are forked from the
parent, which has no threads, and share its log file.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import selectors
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsmem.server.log import RequestLog
from fsmem.server.pinning import HANDOVER, head_complete, head_token, worker_for
from fsmem.server.protocol import MAX_HEAD_BYTES
from fsmem.server.serving import listening_record, server_socket
from fsmem.server.settings import ServerSettings

START_FAILURES = 3  # a worker that exits before it serves this many times in a row stops the server
FIRST_LOOK, LAST_LOOK = 0.01, 0.1  # seconds between looks at a head not yet complete: doubling, capped
_PEEK = MAX_HEAD_BYTES + 5
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
# a pair of sockets that keeps each message (and its socket) apart; Linux's says so when the other end closes
_PAIR = socket.SOCK_SEQPACKET if sys.platform.startswith("linux") else socket.SOCK_DGRAM


@dataclass
class Worker:
    index: int
    pid: int
    channel: socket.socket
    ready: bool = False
    failures: int = 0


@dataclass(eq=False)
class Waiting:
    """A connection whose first request's head has not come whole yet."""

    sock: socket.socket
    deadline: float
    address: Any = None  # the client's host
    pause: float = FIRST_LOOK
    look_at: float | None = None  # when to look again (None: the selector watches it)
    done: bool = False


class Parent:
    """Accepts connections, hands each to the worker of its token, and keeps N workers running."""

    def __init__(
        self,
        settings: ServerSettings,
        log: RequestLog,
        serve_one: Callable[..., int] | None = None,
        before_stopped: Callable[[], None] | None = None,
    ):
        """`serve_one(settings, index, count, channel, log)` is what a worker runs (`worker.run_worker`)."""
        self.settings = settings
        self.serve_one = serve_one
        self.before_stopped = before_stopped  # run before the "stopped" line, the log's last
        self.log = log
        self.count = settings.processes
        self.head_seconds = settings.limits.header_timeout_seconds
        self.most_waiting = settings.limits.max_connections
        self.workers: list[Worker | None] = [None] * self.count
        self.waiting: dict[int, Waiting] = {}  # by file descriptor, oldest first
        self.timers: list[tuple[float, int, Waiting]] = []  # (when, the push's number, whose)
        self._pushes = itertools.count()
        self.next_worker = 0  # for requests without a token
        self.selector = selectors.DefaultSelector()
        self.sock: socket.socket | None = None
        self.listening = False
        self.signal: int | None = None
        self.fatal: str | None = None
        self.stopping = False

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, ready: Any = None) -> int:
        """Serve until SIGTERM or SIGINT (0) or until a worker cannot start (1)."""
        self.sock = server_socket(self.settings)
        wake_read, wake_write = socket.socketpair()
        wake_read.setblocking(False)
        wake_write.setblocking(False)
        self.wake = (wake_read, wake_write)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)}
        old_wakeup = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
        self.selector.register(wake_read, selectors.EVENT_READ, "wake")
        try:
            for index in range(self.count):
                self._start(index)
            while self.signal is None and self.fatal is None:
                self._turn(ready)
            return self._stop()
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.selector.close()
            wake_read.close()
            wake_write.close()

    def _on_signal(self, sig: int, frame: Any) -> None:
        if sig != signal.SIGCHLD and self.signal is None:
            self.signal = sig

    def _turn(self, ready: Any) -> None:
        while self.timers and self.timers[0][2].done:  # a connection handed on: its deadline wakes nobody
            heapq.heappop(self.timers)
        timeout = max(0.0, self.timers[0][0] - time.monotonic()) if self.timers else None
        for key, _mask in self.selector.select(timeout):
            what = key.data
            if what == "listen":
                self._accept()
            elif what == "wake":
                with contextlib.suppress(OSError):
                    while key.fileobj.recv(512):  # type: ignore[union-attr]
                        pass
            elif isinstance(what, Worker):
                self._hear(what, ready)
            elif isinstance(what, Waiting) and not what.done:  # one closed by an earlier event of this turn is not
                self._look(what)
        self._reap()
        self._timers()

    # -- connections ------------------------------------------------------------------------------
    def _accept(self) -> None:
        assert self.sock is not None
        for _ in range(64):  # then the others get their turn
            try:
                conn, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, say: the kernel keeps the rest queued
                self.log.write({"event": "warning", "message": f"cannot accept a connection: {exc}"})
                return
            conn.setblocking(False)
            if len(self.waiting) >= self.most_waiting:
                self._close_one()
            waiting = Waiting(conn, time.monotonic() + self.head_seconds, address[0] if address else None)
            self.waiting[conn.fileno()] = waiting
            self.selector.register(conn, selectors.EVENT_READ, waiting)
            self._at(waiting.deadline, waiting)

    def _close_one(self) -> None:
        """Make room among the waiting connections of the address that has the most, as a worker does for its
        strangers (`fsmem.server.protocol.Strangers`): close the oldest that sent part of a head and stopped,
        else look at the oldest (a burst of connections is accepted before any is read): one whose head has
        come whole is handed on, not closed; one that has sent no whole head is closed."""
        held = Counter(w.address for w in self.waiting.values())
        most = max(held, key=lambda address: held[address])
        theirs = [w for w in self.waiting.values() if w.address == most]
        closed = next((w for w in theirs if w.look_at is not None), None)
        if closed is None:
            closed = theirs[0]
            self._look(closed)  # handed on when its head is whole, dropped when it is gone
            if closed.done:
                return
        self._drop(closed)
        closed.sock.close()

    def _look(self, waiting: Waiting) -> None:
        """Peek at a connection's first bytes: hand it on once its head is whole (or too long), else wait."""
        try:
            data = waiting.sock.recv(_PEEK, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # gone before it asked anything
            self._drop(waiting)
            waiting.sock.close()
        elif head_complete(data) or len(data) > MAX_HEAD_BYTES:
            self._hand(waiting, worker_for(head_token(data), self.count))
        else:  # part of a head: the bytes stay readable, so look again later instead of at once
            self.selector.unregister(waiting.sock)
            waiting.look_at = time.monotonic() + waiting.pause
            waiting.pause = min(LAST_LOOK, waiting.pause * 2)
            self._at(waiting.look_at, waiting)

    def _at(self, when: float, waiting: Waiting) -> None:
        heapq.heappush(self.timers, (when, next(self._pushes), waiting))

    def _timers(self) -> None:
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _when, _order, waiting = heapq.heappop(self.timers)
            if waiting.done:
                continue
            if now >= waiting.deadline:
                self._hand(waiting, None)  # its worker answers 408 (or closes a silent one) at once
            elif waiting.look_at is not None and now >= waiting.look_at:
                waiting.look_at = None
                self.selector.register(waiting.sock, selectors.EVENT_READ, waiting)

    def _drop(self, waiting: Waiting) -> None:
        waiting.done = True
        self.waiting.pop(waiting.sock.fileno(), None)
        if waiting.look_at is None:
            self.selector.unregister(waiting.sock)

    def _hand(self, waiting: Waiting, index: int | None) -> None:
        """Pass the connection to worker `index` (the next one for None) with the rest of its head's time."""
        self._drop(waiting)
        if index is None:
            index, self.next_worker = self.next_worker, (self.next_worker + 1) % self.count
        worker = self.workers[index]
        left = max(0.0, waiting.deadline - time.monotonic())
        try:
            if worker is None:
                raise ConnectionRefusedError
            socket.send_fds(worker.channel, [HANDOVER.pack(left)], [waiting.sock.fileno()])
        except OSError:  # the worker's queue is full, or it is being started again
            with contextlib.suppress(OSError):
                waiting.sock.send(_BUSY)
        waiting.sock.close()

    # -- workers ----------------------------------------------------------------------------------
    def _start(self, index: int) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, _PAIR)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                mine.close()
                self._close_in_child()
                from fsmem.server.worker import run_worker

                code = (self.serve_one or run_worker)(self.settings, index, self.count, theirs, self.log)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException as exc:
                self.log.write({"event": "error", "worker": index, "message": f"{type(exc).__name__}: {exc}"})
            finally:
                os._exit(code)
        theirs.close()
        mine.setblocking(False)
        failures = self.workers[index].failures if self.workers[index] is not None else 0  # type: ignore[union-attr]
        worker = Worker(index, pid, mine, failures=failures)
        self.workers[index] = worker
        self.selector.register(mine, selectors.EVENT_READ, worker)
        self.log.write({"event": "worker started", "worker": index, "pid": pid})

    def _close_in_child(self) -> None:
        """A worker keeps none of the parent's sockets: the listening one, waiting clients, other pairs."""
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        self.selector.close()
        for sock in (self.sock, *self.wake, *(w.channel for w in self.workers if w is not None)):
            if sock is not None:
                sock.close()
        for waiting in self.waiting.values():
            waiting.sock.close()

    def _hear(self, worker: Worker, ready: Any) -> None:
        try:
            message = worker.channel.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            message = b""
        if not message:  # it exited: _reap says how
            self.selector.unregister(worker.channel)
            return
        worker.ready, worker.failures = True, 0
        if not self.listening and all(w is not None and w.ready for w in self.workers):
            assert self.sock is not None
            self.listening = True
            host, port = self.sock.getsockname()[:2]
            self.log.write(listening_record(self.settings, host, port))
            self.selector.register(self.sock, selectors.EVENT_READ, "listen")
            if ready is not None:
                ready(host, port)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = next((w for w in self.workers if w is not None and w.pid == pid), None)
            if worker is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
            self.log.write({"event": "worker exited", "worker": worker.index, "pid": pid, "how": how})
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(worker.channel)
            worker.channel.close()
            if self.stopping:
                continue
            if not worker.ready:
                worker.failures += 1
            if worker.failures >= START_FAILURES:
                self.fatal = (
                    f"worker {worker.index} could not start: it exited ({how}) {worker.failures} times in a row "
                    "before serving; the lines above say why"
                )
                self.workers[worker.index] = None
                return
            self._start(worker.index)

    def _stop(self) -> int:
        """Stop taking connections, stop every worker gracefully and wait for them; the exit code."""
        self.stopping = True
        if self.sock is not None:
            if self.listening:
                self.selector.unregister(self.sock)
            self.sock.close()
        for waiting in list(self.waiting.values()):
            self._drop(waiting)
            waiting.sock.close()
        alive = [w for w in self.workers if w is not None]
        for worker in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)
        for worker in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(worker.pid, 0)
            with contextlib.suppress(OSError):
                worker.channel.close()
        if self.fatal is not None:
            self.log.write({"event": "error", "message": self.fatal})
            return 1
        if self.before_stopped is not None:
            self.before_stopped()
        self.log.write({"event": "stopped", "signal": signal.Signals(self.signal).name if self.signal else None})
        return 0
