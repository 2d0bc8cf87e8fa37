"""A memory server for a team: the agent tools over MCP streamable HTTP, behind tokens, scopes and limits.

`fsmem serve` runs it; in Python:

    from fsmem.server import ServerSettings, serve
    settings = ServerSettings()
    settings.add_memory("team", "/srv/memory/team")
    serve(settings)                       # or create_app(settings): an ASGI app for any ASGI server

Tokens live in a store outside every memory (`fsmem.server.tokens.TokenStore`,
`fsmem token create|list|revoke`). Nothing of the web stack (the MCP SDK,
starlette, uvicorn) is imported until the server is built.
"""

from __future__ import annotations

from typing import Any

from fsmem.server.settings import Limits, ServerSettings
from fsmem.server.tokens import TokenStore


def serve(settings: ServerSettings, **kwargs: Any) -> int:
    """Serve until SIGTERM or SIGINT (see `fsmem.server.run.serve`); 0 after a graceful stop."""
    from fsmem.server.run import serve as _serve

    return _serve(settings, **kwargs)


def create_app(settings: ServerSettings, **kwargs: Any):
    """The ASGI app (`fsmem.server.app.MemoryServer`), to run under any ASGI server."""
    from fsmem.server.app import create_app as _create_app

    return _create_app(settings, **kwargs)


__all__ = ["Limits", "ServerSettings", "TokenStore", "create_app", "serve"]
