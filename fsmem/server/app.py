"""The ASGI app of `fsmem serve`: the agent tools over MCP streamable HTTP, behind tokens and limits.

Every request passes one door before the MCP SDK sees it, in this order:
its `Host` and `Origin` (`fsmem.server.door`: 421 and 403, DNS rebinding), a
valid, unexpired, unrevoked bearer token (401 otherwise: nothing is read,
run or written), the token's memory (`/mcp` serves it, `/mcp/NAME` only if
it is NAME: 403 otherwise), room in the server (503), the token's share of
requests in flight, or of event streams for a GET, and its rate (429 with
Retry-After), then the body: a declared length over the cap is refused at
once (413), the rest read whole within the cap (413) and a deadline (408),
and it must be one JSON-RPC message, decoded as `fsmem mcp` decodes a line
(`fsmem.agents.jsonrpc`; a 400 with its JSON-RPC error otherwise), within
the token's share of its cost class (429: cheap and costly calls are counted
apart, `fsmem.server.lanes.costly_request`), and for a costly read, room in
the costly lane's backlog (503 with Retry-After, `fsmem.server.lanes.Backlog`). Then one
plain request or notification goes to the SDK's `ServerRunner` in its own
task (`fsmem.server.direct`), anything else to its session manager
(stateless, JSON answers). Every refusal closes the connection. The protocol
bounds heads, and connections without a valid token (`fsmem.server.protocol`).

The agent a call acts for (budget, read-only flag, retrieval log) and the
part of the memory it reaches come from the token's record, never from the
client. Tool calls run on a fixed pool of worker threads, so no request holds the event loop; a read tool
that runs past its time limit is answered with an error (its thread finishes on its own), a write is always
awaited. An answer a client does not take within `send_timeout_seconds` is dropped. One JSON line per request
goes to the log: token id, agent, memory, tool, status, duration, where a tool call's time went (waiting for a
thread, on it, its CPU); never a token, an argument or a memory's text.

This module is long because the door is one sequence of checks in the order above, each with its refusal,
and splitting it would hide that order.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from fsmem import __version__
from fsmem.agents import tools
from fsmem.config import CONFIG_FILE
from fsmem.errors import FsmemError
from fsmem.memory import Memory
from fsmem.server.direct import DirectPath, LifespanResult
from fsmem.server.door import (
    BUSY,
    FORBIDDEN,
    TIMEOUT,
    TOO_LARGE,
    TOO_MANY,
    UNAUTHORIZED,
    VOUCH,
    Origins,
    Refusal,
    bearer,
    checked_body,
    cors,
    header_values,
    json_answer,
    peek,
    preflight,
    with_headers,
)
from fsmem.server.handlers import STATE, Admitted, build_server
from fsmem.server.lanes import Lanes, costly_read, costly_request
from fsmem.server.limits import InFlight, RateLimiter, Slot, too_many
from fsmem.server.log import RequestLog
from fsmem.server.settings import ServerSettings
from fsmem.server.tokens import TokenRecord, TokenStore
from fsmem.server.warmup import Warmup

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"
SEND_CHUNK = 64 << 10  # an answer goes out in pieces of at most this many bytes
MEMORIES_KEPT = 256  # views of memories (agent, read-only, scope) kept open; the oldest is closed past this


class _SendTimeout(Exception):
    """The client did not take the answer in time."""

    def __init__(self) -> None:
        super().__init__("the client stopped reading; its answer was dropped")


class MemoryServer:
    """The ASGI application: the door, the MCP SDK behind it (directly or by its session manager), `/health`."""

    def __init__(
        self,
        settings: ServerSettings,
        *,
        store: TokenStore | None = None,
        log: RequestLog | None = None,
        direct: bool = True,
    ):
        """`direct=False` sends every request through the SDK's session manager (the direct path's reference)."""
        self.settings = settings
        self.limits = settings.limits
        self.store = store or TokenStore(settings.tokens)
        self.log = log or RequestLog(settings.log)
        self.rate = RateLimiter(self.limits.rate_per_second, self.limits.burst)
        # a token's cheap and costly shares: both at the door, each its own once the body says which (`_share`)
        self.in_flight = InFlight(2 * self.limits.concurrency, self.limits.max_in_flight)
        self.shares = {costly: InFlight(self.limits.concurrency, self.limits.max_in_flight) for costly in (True, False)}
        self.streams = InFlight(self.limits.streams, self.limits.max_streams)
        self.origins = Origins(settings.hosts(), settings.allowed_origins)
        self.lanes = Lanes.of(self.limits)
        self._memories: dict[tuple, Memory] = {}
        self.warmup = Warmup(settings.memories, self.log)  # started with the server, in the background
        self.mcp = build_server(self.limits, self.lanes)
        self.lifespan_result = LifespanResult.around(self.mcp)
        self.manager = StreamableHTTPSessionManager(
            self.mcp,
            stateless=True,
            json_response=True,
            max_request_body_size=self.limits.max_request_bytes,
        )
        self._direct_wanted = direct
        self.direct: DirectPath | None = None  # from the manager's start, which enters the server's lifespan

    # -- ASGI ------------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        stack = contextlib.AsyncExitStack()
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await stack.enter_async_context(self.manager.run())
                except Exception as exc:  # pragma: no cover - the manager starts or the server cannot
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                if self._direct_wanted:
                    self.direct = DirectPath(self.mcp, self.lifespan_result.result)
                self.warmup.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.direct = None
                await stack.aclose()
                while self._memories:
                    _close(self._memories.popitem()[1])
                self.warmup.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: dict[str, Any], receive, send) -> None:
        path = scope["path"].rstrip("/") or "/"
        started = time.perf_counter()
        state = Admitted()
        mcp = path == MCP_PATH or path.startswith(MCP_PATH + "/")
        foreign = self.origins.refusal(scope)
        if foreign is not None:
            state.reason = foreign.reason
            await self._refuse(send, state, foreign)
            if mcp:
                self._log(scope, state, started)
            return
        origin = self.origins.allowed_origin(scope)
        if origin is not None:
            if scope["method"] == "OPTIONS":  # a browser's preflight for a page this server takes calls from
                await send({"type": "http.response.start", "status": 204, "headers": preflight(origin)})
                await send({"type": "http.response.body", "body": b""})
                return
            send = with_headers(send, cors(origin))
        if path == HEALTH_PATH:
            await json_answer(send, 200, {"status": "ok", "version": __version__})
            return
        if not mcp:
            await json_answer(send, 404, {"error": "not found; the MCP endpoint is /mcp (or /mcp/NAME)"})
            return
        scope[STATE] = state
        try:
            await self._admit(scope, state, path)
            body = await self._read_body(scope, receive, state)
            if scope["method"] == "POST":
                body, message = checked_body(body, state.held)
                state.rpc, state.tool = peek(message)
                self._share(state)
            await self._serve(scope, body, receive, send, state)
        except Refusal as refusal:
            state.reason = refusal.reason
            await self._refuse(send, state, refusal)
        except _SendTimeout:
            state.reason = "send timeout"
        finally:
            if state.slot is not None:
                state.slot.drop()
            self._log(scope, state, started)

    # -- the door --------------------------------------------------------------------------------
    async def _admit(self, scope: dict[str, Any], state: Admitted, path: str) -> None:
        record, why = self.store.verify(bearer(scope))
        state.record = record if why in ("ok", "expired", "revoked") else None
        if why != "ok":
            message = {
                "missing": "this server needs a token: send 'Authorization: Bearer <token>' (fsmem token create)",
                "expired": "this token has expired; ask for a new one (fsmem token create)",
                "revoked": "this token was revoked; ask for a new one (fsmem token create)",
            }.get(why, "this token is not valid here")
            raise Refusal(401, UNAUTHORIZED, message, f"token {why}", {"WWW-Authenticate": 'Bearer realm="fsmem"'})
        assert record is not None
        if (vouch := scope.get(VOUCH)) is not None:
            vouch()  # its connection is no stranger now (`fsmem.server.protocol.Strangers`)
        wanted = path[len(MCP_PATH) + 1 :] or record.memory
        if wanted != record.memory:
            raise Refusal(403, FORBIDDEN, f"this token is for another memory, not {wanted!r}", "other memory")
        root = self.settings.memories.get(record.memory)
        if root is None:
            raise Refusal(403, FORBIDDEN, f"memory {record.memory!r} is not served here", "memory not served")
        stream = scope["method"] == "GET"  # an event stream: long-lived, counted apart from requests
        pool = self.streams if stream else self.in_flight
        refused = pool.acquire(record.id)
        if refused == "total":
            raise Refusal(503, BUSY, "the server is busy; retry after 1 s", "busy", {"Retry-After": "1"})
        if refused == "key" and stream:
            n = self.limits.streams
            raise Refusal(
                429,
                TOO_MANY,
                f"this token already has {n} event stream(s) open (GET /mcp, at most {n}); close one first",
                "streams",
                {"Retry-After": "1"},
            )
        if refused == "key":
            raise Refusal(429, TOO_MANY, too_many(self.limits.concurrency), "concurrency", {"Retry-After": "1"})
        state.slot = Slot(lambda: pool.release(record.id))
        try:
            wait = self.rate.take(record.id)
            if wait > 0:
                raise Refusal(
                    429,
                    TOO_MANY,
                    f"rate limit: at most {self.limits.rate_per_second:g} requests a second for this token "
                    f"(bursts of {self.limits.burst}); retry after {wait:.2f} s",
                    "rate",
                    {"Retry-After": str(max(1, math.ceil(wait)))},
                )
            state.memory = await self._memory(record, root)
        except BaseException:
            state.slot.drop()
            state.slot = None
            raise

    def _share(self, state: Admitted) -> None:
        """Hold the request to its token's share of its cost class (`fsmem.server.lanes.costly_request`)."""
        assert state.record is not None and state.slot is not None
        costly, key = costly_request(state.rpc, state.tool), state.record.id
        share = self.shares[costly]
        if share.acquire(key) is not None:
            raise Refusal(429, TOO_MANY, too_many(self.limits.concurrency, costly), "concurrency", {"Retry-After": "1"})
        state.slot.also(lambda: share.release(key))
        if costly_read(state.rpc, state.tool):
            self._take(state)

    def _take(self, state: Admitted) -> None:
        """Put a costly read in the costly lane's backlog, or refuse it as busy when it would not be answered in
        time (`fsmem.server.lanes.Backlog`): the client is told when to ask again, and nothing has run."""
        assert state.slot is not None
        backlog = self.lanes.backlog
        kind = (state.tool or "") if state.rpc == "tools/call" else "prompt"
        wait = backlog.retry_after(kind)
        if wait is not None:
            raise Refusal(
                503,
                BUSY,
                f"the server is busy: {backlog.calls} searches, greps and other costly calls are in hand, which "
                f"would answer this one in about {backlog.expected(kind):.0f} s; nothing was run: retry after {wait} s",
                "backlog",
                {"Retry-After": str(wait)},
            )
        backlog.enter()
        state.slot.also(backlog.leave)

    async def _memory(self, record: TokenRecord, root) -> Memory:
        """The token's view of its memory: its agent, read-only flag and scope, the server's answer cap.

        Tokens that grant the same view share one `Memory` (and its cache connection); a change
        of the memory's fsmem.yaml (budgets, agents) makes a new one. It is opened on a cheap thread
        (under a millisecond): on a costly one, a new token's first call, and every token's after an
        edit of fsmem.yaml, waited for the searches that held them all, an `ls` too.
        """
        try:
            stamp = os.stat(root / CONFIG_FILE).st_mtime_ns
        except OSError:
            stamp = 0
        view = (str(root), record.agent, record.read_only, tuple(record.paths))
        memory = self._memories.get((*view, stamp))
        if memory is None:
            try:
                memory = await anyio.to_thread.run_sync(self._open_memory, record, root, limiter=self.lanes.cheap)
            except FsmemError as exc:
                why = tools.hide_host_paths(str(exc), root)
                raise Refusal(403, FORBIDDEN, f"this token's agent cannot use the memory: {why}", "agent") from None
            stale = [key for key in self._memories if key[:4] == view]
            while len(self._memories) - len(stale) >= MEMORIES_KEPT:
                stale.append(next(key for key in self._memories if key not in stale))
            for key in stale:
                _close(self._memories.pop(key))
            self._memories[(*view, stamp)] = memory
        return memory

    def _open_memory(self, record: TokenRecord, root) -> Memory:
        memory = Memory(root, agent=record.agent, scope=record.paths or None)
        memory.budget = memory.budget.narrowed(self.limits.max_answer_tokens)
        if record.read_only:
            tools.read_only(memory)
        return memory

    async def _read_body(self, scope: dict[str, Any], receive, state: Admitted) -> bytes:
        cap = self.limits.max_request_bytes
        declared = header_values(scope, b"content-length")
        if declared and declared[0].strip().isdigit() and int(declared[0]) > cap:
            state.bytes_in = int(declared[0])
            raise Refusal(413, TOO_LARGE, f"the request is larger than {cap} bytes", "too large")
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.limits.read_timeout_seconds) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise Refusal(499, TIMEOUT, "the client went away", "client gone")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > cap:
                    raise Refusal(413, TOO_LARGE, f"the request is larger than {cap} bytes", "too large")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            raise Refusal(
                408,
                TIMEOUT,
                f"the request body did not arrive within {self.limits.read_timeout_seconds:g} s",
                "read timeout",
            )
        state.bytes_in = size
        return b"".join(chunks)

    # -- behind the door -------------------------------------------------------------------------
    async def _serve(self, scope, body: bytes, receive, send, state: Admitted) -> None:
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        timeout = self.limits.send_timeout_seconds
        dead = False

        async def timed_send(message):
            nonlocal dead
            if dead:
                raise _SendTimeout()
            if message["type"] == "http.response.start":
                state.status = message["status"]
            pieces = [message]
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            if len(body) > SEND_CHUNK:
                # in pieces, so that a client that stops reading makes a send wait (and time out) instead
                # of the whole answer piling up in the connection's buffer
                more = message.get("more_body", False)
                pieces = [
                    {"type": "http.response.body", "body": body[i : i + SEND_CHUNK], "more_body": True}
                    for i in range(0, len(body), SEND_CHUNK)
                ]
                pieces[-1]["more_body"] = more
            for piece in pieces:
                try:
                    with anyio.fail_after(timeout):
                        await send(piece)
                except TimeoutError:
                    dead = True
                    raise _SendTimeout() from None
                state.bytes_out += len(piece.get("body", b""))

        try:
            direct = self.direct
            if direct is None or not await direct.answer(scope, body, replay, timed_send):
                await self.manager.handle_request(scope, replay, timed_send)
        except _SendTimeout:
            raise
        except Exception as exc:
            if dead:
                raise _SendTimeout() from None
            raise Refusal(500, -32603, f"internal error: {type(exc).__name__}", "internal error") from exc
        if dead:  # the SDK may catch the failed send itself
            raise _SendTimeout()

    async def _refuse(self, send, state: Admitted, refusal: Refusal) -> None:
        state.status = refusal.status
        if refusal.status == 499:
            return  # nobody to answer
        error: dict[str, Any] = {"code": refusal.code, "message": refusal.message}
        if "Retry-After" in refusal.headers:  # for a client that reads the JSON-RPC error and not the header
            error["data"] = {"retry_after": int(refusal.headers["Retry-After"])}
        body = {"jsonrpc": "2.0", "id": refusal.id, "error": error}
        headers = {**refusal.headers, "Connection": "close"}  # whatever else the client sends is not read
        with contextlib.suppress(Exception), anyio.fail_after(self.limits.send_timeout_seconds):
            state.bytes_out = await json_answer(send, refusal.status, body, headers)

    def _log(self, scope, state: Admitted, started: float) -> None:
        record = state.record
        self.log.write(
            {
                "event": "request",
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": state.status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "token": record.id if record is not None else None,
                "agent": record.agent if record is not None else None,
                "memory": record.memory if record is not None else None,
                "rpc": state.rpc,
                "tool": state.tool,
                "tool_error": state.tool_error,
                "reason": state.reason,
                "bytes_in": state.bytes_in,
                "bytes_out": state.bytes_out,
                **(state.timing.fields() if state.timing is not None else {}),
            }
        )


def create_app(settings: ServerSettings, **kwargs: Any) -> MemoryServer:
    """The ASGI app serving `settings.memories` behind the tokens of `settings.tokens` (run it with any ASGI server)."""
    settings.check()
    return MemoryServer(settings, **kwargs)


def _close(memory: Memory) -> None:
    """Close a view: its cache connection, its share of the change feed and of the repository's git readers (a
    request still using it opens them again)."""
    memory.close()
