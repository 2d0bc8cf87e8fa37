"""What a request must be to pass the door, beyond its token: where it comes from, and what its body holds;
and the door's own answers.

- `Host` and `Origin` (the MCP specification's defence against DNS rebinding:
  a web page whose name resolves to 127.0.0.1 must not drive a server on this
  machine). A request with an `Origin` is refused (403) unless that origin is
  in `allowed_origins`; none by default, so no browser page may call a
  loopback server. Its `Host` must name the server (421 otherwise): on a
  loopback address 127.0.0.1, localhost or [::1], plus `allowed_hosts`.
  Not the MCP SDK's `TransportSecuritySettings`: it runs inside the SDK's
  transport, which the direct path (`fsmem.server.direct`) passes by; it
  matches `Host` with its port and each `Origin` as written,
  and answers in plain text (docs/design.md, "Why the server checks Host and
  Origin itself").
- The body: one JSON-RPC message, decoded as `fsmem mcp` decodes a line
  (`fsmem.agents.jsonrpc`: UTF-8 JSON nested at most 32 levels, no batch, an
  object with a valid id, method and params), or a 400 with the JSON-RPC
  error it calls for, never a 500. A tool call whose arguments hold an
  escaped lone surrogate is passed on with empty arguments; its own are held
  for the dispatcher, whose check answers with the tool answer every face gives.
"""

from __future__ import annotations

import json
from typing import Any

from fsmem.agents import jsonrpc

# JSON-RPC error codes of the door (the server-defined range); JSON-RPC's own are in `fsmem.agents.jsonrpc`.
UNAUTHORIZED, FORBIDDEN, TOO_MANY, TOO_LARGE, TIMEOUT, BUSY = -32001, -32003, -32029, -32013, -32008, -32503
VOUCH = "fsmem.vouch"  # the ASGI scope key of what the door calls once a token checked out (`protocol.Strangers`)
_SHOWN = 80  # characters of a header echoed in a refusal
CORS_HEADERS = "authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id"
CORS_EXPOSED = "mcp-session-id, mcp-protocol-version, www-authenticate, retry-after"


class Refusal(Exception):
    """An answer of the door: an HTTP status and a JSON-RPC error (code, message); `reason` is for the log."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        reason: str,
        headers: dict[str, str] | None = None,
        id: Any = None,
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.reason = status, code, message, reason
        self.headers = headers or {}
        self.id = id  # the request's, when the body named a valid one


def header_values(scope: dict[str, Any], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key == name]


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def host_name(host: str) -> str:
    """A Host header's name, lowercase, without its port: `[::1]:8765` -> `[::1]`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Origins:
    """The `Host` names and `Origin`s a server takes (`ServerSettings.hosts()`, `.allowed_origins`)."""

    def __init__(self, hosts: frozenset[str] | None, origins: list[str]):
        self.hosts = hosts
        self.origins = frozenset(o.lower() for o in origins)

    def allowed_origin(self, scope: dict[str, Any]) -> str | None:
        """The request's Origin when it is one this server takes (its answers then carry CORS headers)."""
        given = header_values(scope, b"origin")
        return given[0] if len(given) == 1 and given[0].lower() in self.origins else None

    def refusal(self, scope: dict[str, Any]) -> Refusal | None:
        """Why a request from where it says it comes from is refused, or None."""
        if self.hosts is not None:
            hosts = header_values(scope, b"host")
            if len(hosts) != 1 or host_name(hosts[0]) not in self.hosts:
                named = ", ".join(sorted(self.hosts))
                given = _shown(hosts[0]) if hosts else "none"
                return Refusal(
                    421,
                    FORBIDDEN,
                    f"this server answers to the Host names {named}, not {given} "
                    "(allowed_hosts in the server's configuration adds others)",
                    "host",
                )
        for origin in header_values(scope, b"origin"):
            if origin.lower() not in self.origins:
                return Refusal(
                    403,
                    FORBIDDEN,
                    f"requests from the web page at {_shown(origin)} are refused: this server takes calls from "
                    "no browser origin but those in allowed_origins of its configuration",
                    "origin",
                )
        return None


def cors(origin: str) -> list[tuple[bytes, bytes]]:
    """The headers that let a page of an allowed origin read an answer."""
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", CORS_EXPOSED.encode()),
        (b"vary", b"origin"),
    ]


def preflight(origin: str) -> list[tuple[bytes, bytes]]:
    return cors(origin) + [
        (b"access-control-allow-methods", b"GET, POST, DELETE"),
        (b"access-control-allow-headers", CORS_HEADERS.encode()),
        (b"access-control-max-age", b"600"),
        (b"content-length", b"0"),
    ]


def checked_body(body: bytes, held: dict[Any, Any]) -> tuple[bytes, Any]:
    """The body the SDK may parse, and the message it holds; Refusal (400, its JSON-RPC error) for one it must
    not get (`fsmem.agents.jsonrpc`, the decoder `fsmem mcp` shares).

    Tool arguments the SDK could not parse (a lone surrogate) go to `held`, by request id.
    """
    try:
        decoded = jsonrpc.decode(body, held)
    except jsonrpc.Refused as refused:
        raise Refusal(400, refused.code, refused.message, refused.reason, id=refused.id) from None
    return (decoded.text.encode("utf-8") if decoded.changed else body), decoded.message


def peek(message: Any) -> tuple[str | None, str | None]:
    """The JSON-RPC method and tool name of a request, for the log (never its arguments)."""
    if not isinstance(message, dict):
        return None, None
    method = message.get("method") if isinstance(message.get("method"), str) else None
    params = message.get("params")
    tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
    return method, tool if isinstance(tool, str) and len(tool) <= 64 else None


def bearer(scope: dict[str, Any]) -> str | None:
    """The token of an `Authorization: Bearer` header, or None."""
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            text = value.decode("latin-1").strip()
            if text[:7].lower() == "bearer ":
                return text[7:].strip()
            return None
    return None


def with_headers(send, extra: list[tuple[bytes, bytes]]):
    """`send` that adds `extra` headers to the start of every answer."""

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending


async def json_answer(send, status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> int:
    """Send `data` as a JSON answer; the bytes of its body."""
    body = json.dumps(data).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
    return len(body)
