"""`fsmem serve` answers one-shot CLI reads of its memories on this host, as `fsmem watch` does.

A one-shot `fsmem ls` or `search` from a shell on the server's host walks the memory's files for its freshness
unless a running fsmem answers it over the memory's owner-only socket (`fsmem.cli.rendezvous`). For each memory
it serves, the server starts one answering process (`python -m fsmem.cli.answerer ROOT`): the same socket, the
same checks, the same request (agent, session, host, clock, budget) and the same bytes as a watcher's answer,
only reads, and nothing written. A process of its own, because a request runs the CLI with the client's
working folder, variables and streams, which are the whole process's: in the server they would be every
thread's. It ends with the server: on its stop, and when the server dies (the end of its stdin). Where another
`fsmem watch` already answers for a memory, that one goes on answering. FSMEM_SOCKET=off in the server's
environment starts none.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from fsmem.server.log import RequestLog

MODE_ENV = "FSMEM_SOCKET"  # fsmem.cli.rendezvous.MODE_ENV: "off" starts no answering process
STOP_SECONDS = 2.0


class OneShotReads:
    """The answering processes of one server, one per memory it serves."""

    def __init__(self, memories: dict[str, Path], log: RequestLog):
        self.memories = memories
        self.log = log
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.relays: list[threading.Thread] = []

    def start(self) -> None:
        if os.environ.get(MODE_ENV) == "off":
            return
        for name, root in sorted(self.memories.items()):
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "fsmem.cli.answerer", str(root)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                )
            except OSError as exc:
                self._say(name, f"one-shot commands will walk: {exc.strerror or exc}")
                continue
            self.processes[name] = process
            relay = threading.Thread(target=self._relay, args=(name, process), daemon=True)
            relay.start()
            self.relays.append(relay)

    def _relay(self, name: str, process: subprocess.Popen[bytes]) -> None:
        """What an answering process says, into the server's log."""
        assert process.stdout is not None
        for line in process.stdout:
            self._say(name, line.decode("utf-8", "replace").rstrip("\n"))

    def _say(self, name: str, message: str) -> None:
        self.log.write({"event": "one-shot reads", "memory": name, "message": message})

    def stop(self) -> None:
        """Stop every answering process; those still removing their socket after `STOP_SECONDS` finish on their
        own (they have their SIGTERM and the end of their stdin), so the server's own stop is not held up. What
        the stopped ones said is in the log when this returns: the server's "stopped" comes after it, last."""
        for process in self.processes.values():
            if process.stdin is not None:
                process.stdin.close()
            process.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.processes.values():
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for relay in self.relays:  # a relay ends when its process's stdout does
            relay.join(max(0.0, deadline - time.monotonic()))
        self.processes.clear()
        self.relays.clear()
