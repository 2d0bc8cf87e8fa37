"""The MCP side of `fsmem serve`: the SDK's low-level `Server` whose tools are `fsmem.agents.tools`.

The handlers find the memory a request may use in the state the door left
in its ASGI scope (`Admitted`): the token's agent, read-only flag and scope,
never anything the client says. Tool calls run on the server's worker
threads: a read that runs past `tool_timeout_seconds` (a costly one: past
that much of its own share of the time, `fsmem.server.lanes.Backlog`) is
answered with an error (its thread finishes on its own), a write is always
awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from fsmem.agents import tools
from fsmem.agents.mcp_server import distill_prompt, prompt_list, read_context, server_of, tool_list, tool_result
from fsmem.agents.registry import REGISTRY
from fsmem.memory import Memory
from fsmem.server.lanes import Lanes
from fsmem.server.limits import Slot
from fsmem.server.settings import Limits
from fsmem.server.tokens import TokenRecord

STATE = "fsmem.request"  # the ASGI scope key of a request's `Admitted` state


@dataclass
class Admitted:
    """What the door knows of one request, for the MCP handlers and the log line."""

    record: TokenRecord | None = None
    memory: Memory | None = None
    rpc: str | None = None  # the JSON-RPC method
    tool: str | None = None
    tool_error: bool | None = None
    reason: str | None = None  # why it was refused or cut short
    status: int | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    slot: Slot | None = None  # the token's share this request holds
    held: dict[Any, Any] = field(default_factory=dict)  # tool arguments the SDK could not parse, by request id
    timing: Timing | None = None  # where a tool call's time went, for the log line


@dataclass
class Timing:
    """Where one tool call's time went, in milliseconds: waiting for a thread of its lane (`wait_ms`), then on
    it (`run_ms`), of which `cpu_ms` its thread's own CPU (not its rg's, which runs in processes of its own).
    A run much longer than its CPU waited for the CPU or for the GIL, which every thread of the process shares:
    the log then says whether a cheap call waited for a thread, or beside costly calls for the CPU."""

    wait_ms: float | None = None
    run_ms: float | None = None
    cpu_ms: float | None = None

    def start(self, began: float, started: float) -> None:
        """Called on the tool's thread as the call starts (`began`: when it was asked for, on the loop); the log
        line of a call given up at its time limit, written before it ends, has its wait."""
        self.wait_ms = round((started - began) * 1000, 1)

    def record(self, started: float, cpu: float) -> None:
        """Called on the tool's thread when the call ends."""
        self.run_ms = round((time.perf_counter() - started) * 1000, 1)
        self.cpu_ms = round((time.thread_time() - cpu) * 1000, 1)

    def fields(self) -> dict[str, float | None]:
        return {"wait_ms": self.wait_ms, "run_ms": self.run_ms, "cpu_ms": self.cpu_ms}


def build_server(limits: Limits, lanes: Lanes) -> Server:
    """An MCP server whose tool list and calls are those of each request's admitted memory.

    Each call runs on the thread lane of its cost (`fsmem.server.lanes`): a cheap read never
    waits behind a search for a thread, and writes that wait for the memory's write lock
    (another process consolidating, say) never keep a read from a thread.
    """

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        _state, memory = _admitted(ctx)
        return tool_list(memory)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        state, memory = _admitted(ctx)
        name = params.name
        state.tool = name if isinstance(name, str) else None
        arguments = state.held.pop(ctx.request_id, params.arguments)
        chosen = REGISTRY.get(name) if isinstance(name, str) else None
        answer: tools.ToolAnswer | None
        state.timing = timing = Timing()
        work = _timed(lambda: tools.call(memory, name, arguments), timing)
        if chosen is not None and chosen.writes:
            # a write is always awaited: once begun, it finishes, through a shutdown's grace and CLOSE_SECONDS more
            # (`fsmem.server.serving.StopDeadline` ends the process then)
            answer = await anyio.to_thread.run_sync(work, limiter=lanes.writes)
        else:
            lane = lanes.for_read(state.tool or "")
            answer = await _read(work, lane, lanes, state.slot, limits, name if chosen is not None else "")
            if answer is None:
                state.tool_error = True
                state.reason = "tool timeout"
                text = (
                    f"error: {name} took longer than {limits.tool_timeout_seconds:g} s and was given up; "
                    "ask for less (a narrower pattern, path or query)"
                )
                return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        assert answer is not None
        state.tool_error = answer.is_error
        return tool_result(answer)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        state, memory = _admitted(ctx)
        uri = params.uri
        cheap = lanes.for_read(None)
        answer = await _read(lambda: read_context(memory, uri), cheap, lanes, state.slot, limits)
        if answer is None:
            state.reason = "resource timeout"
            raise MCPError(types.INTERNAL_ERROR, f"the context took longer than {limits.tool_timeout_seconds:g} s")
        return answer

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        _admitted(ctx)
        return prompt_list()

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        state, memory = _admitted(ctx)
        name, arguments = params.name, params.arguments or {}
        work = lambda: distill_prompt(memory, name, arguments)  # noqa: E731  (reads every episode not yet distilled)
        answer = await _read(work, lanes.costly, lanes, state.slot, limits, "prompt")
        if answer is None:
            state.reason = "prompt timeout"
            raise MCPError(types.INTERNAL_ERROR, f"the prompt took longer than {limits.tool_timeout_seconds:g} s")
        return answer

    prompts = {"list_prompts": list_prompts, "get_prompt": get_prompt}
    return server_of(list_tools, call_tool, read_resource, prompts)


def _timed(work: Callable[[], Any], timing: Timing) -> Callable[[], Any]:
    """`work` that records in `timing` how long it waited for its thread, ran, and spent CPU on it."""
    began = time.perf_counter()

    def timed() -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        timing.start(began, started)
        try:
            return work()
        finally:
            timing.record(started, cpu)

    return timed


async def _read(
    work: Any, readers: anyio.CapacityLimiter, lanes: Lanes, slot: Slot | None, limits: Limits, kind: str = ""
) -> Any:
    """`work()` on a thread of the lane `readers`, its answer awaited for `tool_timeout_seconds` (None past that;
    on the costly lane, of its own share of the time: `_within`, and its run measured as one of `kind`).

    The thread holds its reader and its token's slot until it ends, even when its answer is given up:
    abandoned work never runs beyond the server's threads or the token's share of them. The event loop
    releases them when the answer comes back; only a thread whose answer was given up hands its release
    to the loop itself, without waiting for it (a thread that waited for the loop on every call cost the
    loop a second wake-up per call).
    """
    borrower = object()
    await readers.acquire_on_behalf_of(borrower)
    if slot is not None:
        slot.hold()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()
    phase: dict[str, Any] = {"started": False, "skipped": False, "finished": False, "abandoned": False}
    costly = readers is lanes.costly

    def release() -> None:
        readers.release_on_behalf_of(borrower)
        if slot is not None:
            slot.drop()

    def run() -> Any:
        with lock:
            if phase["skipped"]:
                return None
            phase["started"] = True
        if costly:
            phase["mark"] = lanes.backlog.started(kind)
        try:
            return work()
        finally:
            if costly:  # how long a costly run takes now, for the costly lane's backlog
                lanes.backlog.ended(phase["mark"])
            with lock:
                phase["finished"] = True
                abandoned = phase["abandoned"]
            if abandoned:
                with contextlib.suppress(RuntimeError):  # the loop is gone at exit: nothing left to release
                    loop.call_soon_threadsafe(release)

    answer = None
    try:
        answered = await _within(
            lambda: anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=lanes.handoff),
            limits.tool_timeout_seconds,
            (lambda: lanes.backlog.own_since(phase["mark"]) if "mark" in phase else 0.0) if costly else None,
        )
        answer = answered[0] if answered else None
    finally:
        with lock:
            if not phase["started"]:  # cancelled before a thread took it: it never runs
                phase["skipped"] = True
                release()
            elif phase["finished"]:
                release()
            else:  # given up while it runs: the thread releases when it ends
                phase["abandoned"] = True
    return answer


async def _within(call: Callable[[], Any], limit: float, own: Callable[[], float] | None) -> list[Any]:
    """`[call()'s answer]`, or `[]` once it has run `limit` seconds: on the wall clock, or with `own` (a costly
    run's own share of its time so far, `fsmem.server.lanes.Backlog.own_since`) of its own."""
    if own is None:
        with anyio.move_on_after(limit):
            return [await call()]
        return []
    answered: list[Any] = []
    failed: list[BaseException] = []
    async with anyio.create_task_group() as group:

        async def answer() -> None:
            try:
                answered.append(await call())
            except Exception as exc:  # raised as it is below, not inside the task group's ExceptionGroup
                failed.append(exc)
            group.cancel_scope.cancel()

        group.start_soon(answer)
        while (had := own()) < limit:
            await anyio.sleep(limit - had)  # its own time passes no faster than the wall clock's
        group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return answered


def _admitted(ctx: Any) -> tuple[Admitted, Memory]:
    request = getattr(ctx, "request", None)
    state = request.scope.get(STATE) if request is not None else None
    if not isinstance(state, Admitted) or state.memory is None:
        raise RuntimeError("a request reached the tools without passing the door")  # never: the door comes first
    return state, state.memory
