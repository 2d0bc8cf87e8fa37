"""What every serving process sets up: the listening socket, uvicorn's configuration, its loggers, malloc.

`fsmem.server.run` serves in one process with these; with `processes` above
1 the parent (`fsmem.server.parent`) makes the socket and each worker
(`fsmem.server.worker`) the rest.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import signal
import socket
import sys
import threading
from typing import Any

from fsmem.server.log import JsonLines, RequestLog
from fsmem.server.settings import ServerSettings

CLOSE_SECONDS = 10.0  # after the grace of the requests in flight: the session manager's close, the answerers' stop
# On Linux an accepted socket inherits this from the listening one: data a client leaves unacknowledged
# (a client that stops reading) for this long closes the connection, so its buffers are freed.
_TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", None)


def listening_socket(host: str, port: int, user_timeout_ms: int | None = None) -> socket.socket:
    """A bound, listening TCP socket on `host`:`port` (0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto given, so asyncio recognises accepted sockets as TCP and turns Nagle off on them (with proto 0
    # it does not, and every answer's body waited for the client's delayed ACK, on every request)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if user_timeout_ms and _TCP_USER_TIMEOUT is not None:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, user_timeout_ms)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


GIL_SWITCH_SECONDS = 0.0005  # Python's default is 0.005


def quick_handoffs() -> None:
    """Hand the interpreter to a waiting thread after 0.5 ms instead of Python's 5 ms.

    A cheap call (`ls`, `read`) never waits for a thread behind a search (`fsmem.server.lanes`), but its
    thread and the event loop wait for the interpreter, which the costly calls' threads hold in turn: each
    such wait lasts up to the switch interval. Under 32 clients of new questions on 10k files, three runs
    alternating with the default (2026-12-08, load 12-15) gave `ls` and `read` 36-50 ms of wait for their
    thread at the median against 52-243 ms, and no more CPU per call (docs/performance.md).
    """
    sys.setswitchinterval(GIL_SWITCH_SECONDS)


def tame_malloc() -> bool:
    """Keep a long-lived, many-threaded process from holding on to memory it has freed (glibc only).

    glibc gives each thread that allocates its own arena and raises its mmap
    threshold after large frees, so the numpy arrays of searches (megabytes
    each, on many worker threads) end up in arenas that never shrink: under
    load the server held about twice the memory. Two arenas and a fixed 1 MiB
    threshold (large arrays are mapped and returned when freed) keep it
    flat; `MALLOC_ARENA_MAX` / `MALLOC_MMAP_THRESHOLD_` in the environment win.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_mmap_threshold, m_arena_max = -3, -8  # from <malloc.h>
    if "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(m_arena_max, 2)
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        libc.mallopt(m_mmap_threshold, 1 << 20)
    return True


def has_uvloop() -> bool:
    """Whether uvloop (libuv's event loop, in C) is installed: the server runs on it when it is.

    The event loop's thread frames every request; on uvloop its own scheduling, sockets and timers
    cost the server measurably less CPU a call (`benchmarks/bench_server_call.py`). It has no
    Windows build, where asyncio's loop serves.
    """
    return importlib.util.find_spec("uvloop") is not None


def quiet_loggers(log: RequestLog) -> None:
    """uvicorn's and the SDK's warnings go to the request log as JSON lines; their chatter goes nowhere."""
    handler = JsonLines(log)
    for name in ("uvicorn", "uvicorn.error", "mcp"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def uvicorn_config(app: Any, settings: ServerSettings, protocol: Any = None) -> Any:
    """uvicorn's configuration for `app` under `settings.limits` (`protocol`: the HTTP protocol class)."""
    import uvicorn

    from fsmem.server.protocol import HeadDeadline

    limits = settings.limits
    return uvicorn.Config(
        app,
        http=protocol or HeadDeadline.serving(limits.header_timeout_seconds, limits.max_connections),
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_keep_alive=int(max(1, limits.keep_alive_seconds)),
        timeout_graceful_shutdown=int(max(1, limits.shutdown_grace_seconds)),
        limit_concurrency=limits.max_connections,
        server_header=False,
        proxy_headers=False,  # nothing here reads a client's address or scheme: no X-Forwarded-* rewriting per request
    )


def server_socket(settings: ServerSettings) -> socket.socket:
    """The listening socket `settings` asks for, with the kernel's send deadline of its limits."""
    return listening_socket(settings.host, settings.port, int((settings.limits.send_timeout_seconds + 20) * 1000))


def listening_record(settings: ServerSettings, host: str, port: int) -> dict[str, Any]:
    return {
        "event": "listening",
        "url": f"http://{_url_host(host)}:{port}/mcp",
        "memories": sorted(settings.memories),
        "tokens": str(settings.tokens),
        **({"processes": settings.processes} if settings.processes > 1 else {}),
    }


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class StopDeadline:
    """The end of a stop: once a SIGTERM or SIGINT has come, the process ends within `seconds`, however far its
    stop has got.

    uvicorn gives the requests in flight their grace, then cancels them, but a tool's thread is not cancelled:
    it runs on, and the interpreter's exit waits for it (anyio's worker threads are not daemons), as uvicorn's
    close of the app (the MCP session manager's) waits for whatever ignores the cancellation. A write whose git
    never returned (a hook waiting for input, say) kept a stopped server alive, its "stopped" line written, until
    a second SIGTERM, which met the default handler again. This thread, started before serving and a daemon
    (it runs through the interpreter's exit too), ends the process with `os._exit(0)` when the time is up,
    after saying so in the log, and writing the "stopped" line if the stop had not got that far.
    """

    def __init__(self, seconds: float, log: Any, *, last_line: bool = True) -> None:
        """`last_line`: this process writes the log's "stopped" line (one process; not a worker of several)."""
        self.seconds = seconds
        self.log = log
        self.last_line = last_line
        self.signal: int | None = None
        self.said_stopped = False
        self._said = threading.Lock()  # "stopped" once, whichever thread gets there first
        self._asked = threading.Event()
        threading.Thread(target=self._watch, name="fsmem-stop-deadline", daemon=True).start()

    def asked(self, sig: int) -> None:
        """A stop was asked for (called from a signal handler: it only sets an event, never starts a thread)."""
        if self.signal is None:
            self.signal = sig
        self._asked.set()

    def stopped(self) -> None:
        """Write the log's last line, "stopped"."""
        with self._said:
            self._stopped()

    def _stopped(self) -> None:
        if not self.said_stopped:
            self.said_stopped = True
            self.log.write({"event": "stopped", "signal": signal.Signals(self.signal).name if self.signal else None})

    def _watch(self) -> None:
        self._asked.wait()
        threading.Event().wait(self.seconds)  # the time is what this waits for
        with self._said:  # held to the end: a "stopped" of the stop itself cannot follow these lines
            if not self.said_stopped:  # once it is written, nothing more is: it is the log's last line
                message = f"the stop did not end within {self.seconds:g} s of the signal: the process ends now"
                self.log.write(
                    {"event": "warning", "message": message + ", with what still ran, as a killed one would"}
                )
                if self.last_line:
                    self._stopped()
            os._exit(0)


def stop_asked(server: Any, deadline: StopDeadline) -> Any:
    """uvicorn's signal handler for `server`, which also starts `deadline`; before uvicorn serves (and installs
    it itself), the same handler makes it stop as soon as it has started rather than be lost."""
    handle_exit = server.handle_exit

    def asked(sig: int, frame: Any) -> None:
        deadline.asked(sig)
        handle_exit(sig, frame)

    return asked
