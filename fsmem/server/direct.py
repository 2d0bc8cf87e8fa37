"""One JSON-RPC message of a stateless POST answered without the SDK's per-request session.

In stateless mode the SDK's `StreamableHTTPSessionManager` gives every POST a
new transport, a pair of memory streams, a dispatcher and a task group that
carry one message to `ServerRunner` and its answer back: about a third of the
event loop's time per call, for nothing that outlives the request. Here a POST
of the plain kind (the handshake-era wire: no protocol version header or one
of `HANDSHAKE_PROTOCOL_VERSIONS`; JSON in and accepted out; one request or
notification that the SDK's own `jsonrpc_message_adapter` validates) goes
straight to the SDK's single-exchange driver `serve_one`, that is to the same
`ServerRunner` (method and params validation, middleware, handlers, result
serialisation) the session would have run, and its answer or error is written
as the SDK's transport writes it. Anything else (GET, DELETE, a posted
response, a wrong `Accept` or content type, the 2026 wire) is left to the
session manager, which answers it as before; batches and invalid envelopes
never come this far (the door's decoder, `fsmem.agents.jsonrpc`, answers them).
`tests/test_server_direct.py` posts the same requests to both paths.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner, aclose_shielded, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

logger = logging.getLogger("mcp.server.direct")

_JSON = "application/json"
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
_READ = (b"mcp-protocol-version", b"content-type")
Plain = types.JSONRPCRequest | types.JSONRPCNotification


@dataclass
class _Exchange:
    """The dispatch context of one POST's message: the answer is the POST's JSON body, so there is no
    back-channel, and whatever a handler sends beside it is dropped, as the SDK drops it in JSON mode."""

    request_id: types.RequestId | None
    message_metadata: ServerMessageMetadata
    progress_token: types.ProgressToken | None = None
    transport: TransportContext = _TRANSPORT
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        logger.debug("dropped %s: a JSON answer carries only the response", method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


def _headers(scope: Mapping[str, Any]) -> dict[bytes, str]:
    """The first value of each header the choice reads (as the SDK reads them: the first one counts)."""
    found: dict[bytes, str] = {}
    for key, value in scope["headers"]:
        if key in _READ and key not in found:
            found[key] = value.decode("latin-1")
    return found


def plain_message(request: Request, body: bytes) -> tuple[Plain, str | None] | None:
    """The message of a POST this module answers and its protocol version header, or None for one the
    session manager must answer."""
    scope = request.scope
    if scope["method"] != "POST":
        return None
    headers = _headers(scope)
    version = headers.get(b"mcp-protocol-version")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None  # the 2026 wire (or a version the SDK must refuse): the manager's own entry
    content_type = headers.get(b"content-type")
    # the transport's two checks: its security middleware's prefix, then an exact media type
    if content_type is None or not content_type.lower().startswith(_JSON):
        return None
    if not any(part.strip() == _JSON for part in content_type.split(";")[0].split(",")):
        return None
    has_json, _has_sse = check_accept_headers(request)
    if not has_json:
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except (ValueError, ValidationError):
        return None
    if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification):
        return message, version
    return None


class LifespanResult:
    """What the server's lifespan yields, kept for the direct path: the session manager enters it once at its
    start and keeps the result to itself, so the lifespan (`Server(lifespan=…)`, public) is wrapped to keep it."""

    def __init__(self) -> None:
        self.result: Any = None

    @classmethod
    def around(cls, server: Any) -> LifespanResult:
        kept, lifespan = cls(), server.lifespan

        @contextlib.asynccontextmanager
        async def recorded(app: Any) -> Any:
            async with lifespan(app) as result:
                kept.result = result
                try:
                    yield result
                finally:
                    kept.result = None

        server.lifespan = recorded
        return kept


class DirectPath:
    """Answers the plain POSTs of a stateless, JSON-answering session manager's server in the request's task."""

    def __init__(self, server: Any, lifespan_state: Any):
        self.server = server
        self.lifespan_state = lifespan_state

    async def answer(self, scope: dict[str, Any], body: bytes, receive, send) -> bool:
        """Answer the POST if it is plain (True); False, with nothing sent, if the SDK must."""
        request = Request(scope, receive)
        plain = plain_message(request, body)
        if plain is None:
            return False
        message, version = plain
        metadata = ServerMessageMetadata(request_context=request, can_send_request=False)
        connection = Connection.from_envelope(version or types.DEFAULT_NEGOTIATED_VERSION, None, None)
        if isinstance(message, types.JSONRPCNotification):
            await Response(None, status_code=202, headers={"Content-Type": _JSON})(scope, receive, send)
            runner = ServerRunner(self.server, connection, self.lifespan_state)
            try:
                await runner.on_notify(_Exchange(None, metadata), message.method, message.params)
            except Exception:  # as the SDK's dispatcher contains it: a notification has no answer to carry it
                logger.exception("notification handler for %r raised", message.method)
            finally:
                await aclose_shielded(connection)
            return True
        exchange = _Exchange(message.id, metadata, progress_token_from_params(message.params))
        reply: types.JSONRPCResponse | types.JSONRPCError
        try:
            result = await serve_one(
                self.server,
                exchange,
                message.method,
                message.params,
                connection=connection,
                lifespan_state=self.lifespan_state,
            )
        except Exception as exc:  # the SDK dispatcher's one exception-to-wire boundary, as it words it
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for %r raised", message.method)
                error = types.ErrorData(code=0, message=str(exc))
            reply = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        else:
            reply = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
        content = reply.model_dump_json(by_alias=True, exclude_unset=True)
        await Response(content, status_code=200, headers={"Content-Type": _JSON})(scope, receive, send)
        return True
