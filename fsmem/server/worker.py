"""One worker process of `fsmem serve` with `processes` above 1: it serves the connections its parent hands it.

The parent accepts every connection, waits for its first request's head and
passes the socket over a Unix socket pair (SCM_RIGHTS) with the seconds left
of the head's deadline; the worker reads the request itself, on uvicorn and
the same app as one process (`Pinned` in front, so that it serves only the
tokens it owns). It says `ready` on the pair once it serves, stops
gracefully on SIGTERM like one process does, and stops too when its parent
is gone (the pair is closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from typing import Any

from fsmem.server.log import RequestLog
from fsmem.server.pinning import HANDOVER, READY, Pinned
from fsmem.server.protocol import HeadDeadline
from fsmem.server.serving import (
    CLOSE_SECONDS,
    StopDeadline,
    has_uvloop,
    quick_handoffs,
    quiet_loggers,
    stop_asked,
    tame_malloc,
    uvicorn_config,
)
from fsmem.server.settings import ServerSettings


class HandedOver(HeadDeadline):
    """The head deadline of a connection the parent held for a while: its first head gets what is left."""

    head_left: float | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        left, self.head_left = self.head_left, None
        self._head_timer = self.loop.call_later(self.head_timeout if left is None else left, self._too_slow)


def run_worker(settings: ServerSettings, index: int, count: int, channel: socket.socket, log: RequestLog) -> int:
    """Serve the connections that come over `channel` until SIGTERM, SIGINT or the parent's end; 0 after."""
    tame_malloc()
    quick_handoffs()
    import anyio
    import uvicorn

    from fsmem.server.app import create_app

    log.fields = {"worker": index}
    limits = settings.limits
    app = Pinned(create_app(settings, log=log), index, count, log)
    quiet_loggers(log)
    config = uvicorn_config(app, settings, HandedOver.serving(limits.header_timeout_seconds, limits.max_connections))
    server = uvicorn.Server(config)
    deadline = StopDeadline(limits.shutdown_grace_seconds + CLOSE_SECONDS, log, last_line=False)  # the parent's
    server.handle_exit = stop_asked(server, deadline)  # type: ignore[method-assign]  # what uvicorn installs
    # before it does, and after: uvicorn re-raises the signal it stopped for once it is done; this takes it (exit 0)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, server.handle_exit)

    async def main() -> None:
        taking = asyncio.get_running_loop().create_task(_take_connections(server, config, channel))
        try:
            await server.serve(sockets=[])
        finally:
            taking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await taking

    anyio.run(main, backend_options={"use_uvloop": has_uvloop()})
    return 0


async def _take_connections(server: Any, config: Any, channel: socket.socket) -> None:
    """Receive sockets from the parent and serve each as uvicorn serves a connection it accepted."""
    while not server.started:
        if server.should_exit:
            return
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()

    def protocol(left: float) -> Any:
        made = config.http_protocol_class(
            config=config, server_state=server.server_state, app_state=server.lifespan.state, _loop=loop
        )
        made.head_left = left
        return made

    async def connect(sock: socket.socket, left: float) -> None:
        try:
            await loop.connect_accepted_socket(lambda: protocol(left), sock)
        except OSError:
            sock.close()  # the client left while the socket was on its way

    connecting: set[asyncio.Task[None]] = set()  # held, so that none is collected before it is done
    waiting = asyncio.Event()
    channel.setblocking(False)
    loop.add_reader(channel.fileno(), waiting.set)
    channel.send(READY)
    try:
        while not server.should_exit:
            await waiting.wait()
            waiting.clear()
            while True:
                try:
                    data, fds, _flags, _address = socket.recv_fds(channel, HANDOVER.size, 1)
                except BlockingIOError:
                    break
                except OSError:
                    data, fds = b"", []
                if not data and not fds:  # the parent is gone: stop as on SIGTERM, within its deadline
                    server.handle_exit(signal.SIGTERM, None)
                    return
                for fd in fds:
                    sock = socket.socket(fileno=fd)
                    if server.should_exit or len(data) != HANDOVER.size:
                        sock.close()
                        continue
                    sock.setblocking(False)
                    task = loop.create_task(connect(sock, HANDOVER.unpack(data)[0]))
                    connecting.add(task)
                    task.add_done_callback(connecting.discard)
    finally:
        loop.remove_reader(channel.fileno())
