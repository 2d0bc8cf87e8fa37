"""The served memories warmed in the background when a server (or each of its workers) starts.

A token's first call would otherwise pay each cache's first catch-up, a walk of every file (3-8 s at 100k
files: `fsmem.warming`). One `Memory` per served memory, of no agent, catches them up in a thread of its own
while the server already answers, and stays open for the server's life: it holds the memory's change feed, so
every token's view opened later takes the running feed at its first call instead of walking. Then the process
is settled (`fsmem.warming.settle`). A memory that
cannot be warmed is said in the log; its first call then says why.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from fsmem.errors import FsmemError
from fsmem.server.log import RequestLog


class Warmup:
    """Warms `memories` (name -> root) in one background thread; `done` is set when every one is done."""

    def __init__(self, memories: dict[str, Path], log: RequestLog):
        self.memories = dict(memories)
        self.log = log
        self.done = threading.Event()
        self._held: list[Any] = []  # the warm memories, holding their feeds
        self._lock = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fsmem-warmup", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from fsmem.memory import Memory
        from fsmem.warming import settle, warm

        try:
            for name, root in sorted(self.memories.items()):
                started = time.monotonic()
                try:
                    memory = Memory(root)
                    with self._lock:
                        if self._stopping:
                            memory.close()
                            return
                        self._held.append(memory)
                    memory.catalog.hold_feed()
                    warm(memory)
                except (OSError, FsmemError) as exc:
                    if not self._said({"event": "warning", "memory": name, "message": f"not warmed: {exc}"}):
                        return
                    continue
                if not self._said({"event": "warmed", "memory": name, "seconds": round(time.monotonic() - started, 3)}):
                    return
            settle()  # what the server holds from now on is not walked by every full collection
        finally:
            self.done.set()

    def _said(self, record: dict[str, Any]) -> bool:
        """Log `record` unless the server is stopping (False then): once `close` returned, nothing more is
        logged, so the server's `stopped` stays its last line."""
        with self._lock:
            if self._stopping:
                return False
            self.log.write(record)
            return True

    def close(self) -> None:
        """Let the warm memories go; one still warming is left to the process's end (a walk of 100k files is not
        waited for at a shutdown)."""
        with self._lock:
            self._stopping = True
            if not self.done.is_set():
                return
            held, self._held = self._held, []
        for memory in held:
            with contextlib.suppress(Exception):
                memory.close()
