"""Running the server: the listening socket, uvicorn, and a graceful stop on SIGTERM (one process, or N).

On SIGTERM (or Ctrl-C) the server stops accepting connections, lets the
requests in flight finish (`shutdown_grace_seconds` for reads; a write has
`CLOSE_SECONDS` more), closes the MCP session manager and exits 0; whatever
still runs `shutdown_grace_seconds + CLOSE_SECONDS` after the signal ends with
the process (`fsmem.server.serving.StopDeadline`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from fsmem.server.log import RequestLog
from fsmem.server.oneshot import OneShotReads
from fsmem.server.serving import (
    CLOSE_SECONDS,
    StopDeadline,
    has_uvloop,
    listening_record,
    quick_handoffs,
    quiet_loggers,
    server_socket,
    stop_asked,
    tame_malloc,
    uvicorn_config,
)
from fsmem.server.settings import ServerSettings


def token_warnings(settings: ServerSettings) -> list[str]:
    """Active tokens of served memories whose agent the memory's fsmem.yaml does not know (refused 403)."""
    from fsmem.config import Config
    from fsmem.errors import FsmemError
    from fsmem.server.tokens import TokenStore

    warnings = []
    try:
        records = TokenStore(settings.tokens).load()
    except FsmemError as exc:
        return [str(exc)]
    for record in records:
        root = settings.memories.get(record.memory)
        if root is None or record.status() != "active":
            continue
        try:
            Config.load(root).budget_for(record.agent)
        except FsmemError as exc:
            warnings.append(f"token {record.id} is refused until this is fixed: {exc}")
    return warnings


def serve(settings: ServerSettings, *, log: RequestLog | None = None, ready: Any = None) -> int:
    """Serve until SIGTERM or SIGINT; return the exit code (0 after a graceful stop).

    With `settings.processes` above 1 a parent process hands connections to that many workers
    (`fsmem.server.parent`); with 1 this process serves them itself.
    """
    tame_malloc()
    quick_handoffs()
    import anyio  # noqa: F401  (the web stack, before anything is written: without fsmem[server] the one line says so)
    import uvicorn  # noqa: F401

    from fsmem.server.app import create_app  # noqa: F401  (mcp and starlette too, before anything is written)

    log = log or RequestLog(settings.log)
    for warning in settings.check() + token_warnings(settings):
        log.write({"event": "warning", "message": warning})
    one_shot = OneShotReads(settings.memories, log)  # a CLI read on this host asks the server (fsmem.server.oneshot)
    one_shot.start()
    try:
        return _serve(settings, log, ready, one_shot.stop)
    finally:
        one_shot.stop()  # again, when the server stopped on an error: stopping twice is stopping once


def _serve(settings: ServerSettings, log: RequestLog, ready: Any, before_stopped: Callable[[], None]) -> int:
    """Serve in this process, or through a parent and its workers; `before_stopped` runs before the "stopped"
    line, the log's last (the answering processes' last words come before it)."""
    import anyio
    import uvicorn

    from fsmem.server.app import create_app

    if settings.processes > 1:  # forked after these imports, every worker shares their pages
        from fsmem.server.parent import Parent

        return Parent(settings, log, before_stopped=before_stopped).run(ready)
    app = create_app(settings, log=log)
    sock = server_socket(settings)
    host, port = sock.getsockname()[:2]
    quiet_loggers(log)
    server = uvicorn.Server(uvicorn_config(app, settings))
    deadline = StopDeadline(settings.limits.shutdown_grace_seconds + CLOSE_SECONDS, log)
    server.handle_exit = stop_asked(server, deadline)  # type: ignore[method-assign]  # what uvicorn installs
    # before it does, and after: uvicorn re-raises the signal it stopped for once it is done; this takes it (exit 0)
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGTERM, signal.SIGINT)}

    async def main() -> None:
        log.write(listening_record(settings, host, port))
        if ready is not None:
            ready(host, port)
        await server.serve(sockets=[sock])

    try:
        anyio.run(main, backend_options={"use_uvloop": has_uvloop()})
    finally:
        for sig, handler_ in previous.items():
            signal.signal(sig, handler_)
        sock.close()
    before_stopped()
    deadline.stopped()
    return 0
