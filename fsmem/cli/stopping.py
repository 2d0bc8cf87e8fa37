"""SIGTERM and SIGINT in a long-lived command (`fsmem watch`, the answerer `fsmem serve` starts): a stop asked
for while it still warms up ends it there.

Once such a command runs its loop, it looks at a `threading.Event` between two looks at the memory (every
0.1-0.2 s), and a signal only sets it. Before that it warms up on its main thread: the change feed's first
catch-up, INDEX.md, the caches caught up and decoded (`fsmem.warming`); 1-2 s at 10k files, many seconds at
100k. A signal that only set the event was seen after all of it, so Ctrl-C, systemd's stop or a benchmark's
SIGTERM waited the whole warm-up (or sent SIGKILL). While it warms, the handler raises `Stopped` in the main
thread instead, which ends the warm-up where it is, as Ctrl-C ends a one-shot command: an open transaction
rolls back, each cache keeps what it committed and the next command goes on from there, and the socket is not
made yet (or the `finally` that made it removes it).

The handler takes no lock: it runs in the main thread between two of its steps, which may be inside the
event's own lock (`Event.wait` holds it around its wait), so `stop.set()` there waited for ever. The event is
set by a thread of its own, woken through a pipe; the handler only writes a byte to it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any


class Stopped(BaseException):
    """A stop asked for while warming up (not an `Exception`: no handler of the warm-up's errors keeps it)."""


class StopSignals:
    """SIGTERM and SIGINT set `stop`; the first one that comes while `warming` also raises `Stopped`."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.warming = True
        self.signal: int | None = None
        self._asking, self._asked_for = os.pipe()
        os.set_blocking(self._asked_for, False)  # a flood of signals fills the pipe: one byte wakes the thread
        threading.Thread(target=self._relay, name="fsmem-stop-signals", daemon=True).start()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, self._asked)

    def _relay(self) -> None:
        os.read(self._asking, 1)
        self.stop.set()

    def warm(self) -> None:
        """The warm-up is over: from now on a signal only sets `stop`, which the command's loop looks at."""
        self.warming = False

    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else "a signal"

    def _asked(self, signum: int, frame: Any) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._asked_for, b"\0")  # the relay sets `stop`: no lock taken here
        if self.signal is None:
            self.signal = signum
        if self.warming:
            self.warming = False  # once: a second signal does not break the cleaning up of the first
            raise Stopped(signum)
