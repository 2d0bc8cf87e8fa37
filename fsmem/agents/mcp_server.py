"""`fsmem mcp`: the agent tools served over stdio with the official MCP SDK (`pip install fsmem[mcp]`).

The low-level `mcp.server.lowlevel.Server` is used rather than `MCPServer`
(the former FastMCP): the tool list and JSON schemas already exist in
`fsmem.agents.tools`, so the server only forwards `tools/list` and
`tools/call` to the same registry and dispatcher the Python API uses. Errors
are tool results with `isError` set, so the model sees the message and can
correct its call; the dispatcher is MCP's one error boundary, and `fsmem serve`
(`fsmem.server`) answers with the same `tool_list` and `tool_result`.

The pre-injected context (`fsmem context`: profile/ and INDEX.md within the
agent's budget and scope) is offered as one resource, `fsmem://context`,
which clients read at the start of a session; and one prompt, `distill`
(a slash command in clients), walks the agent through the episodes not yet
distilled within its budget (`fsmem.operations.distill.pending_parts`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from fsmem import __version__, faces
from fsmem.agents import jsonrpc, tools
from fsmem.memory import Memory

SERVER_NAME = "fsmem"
LINGER_SECONDS = 60.0  # after the client closes its side, how long its requests still running are waited for
INSTRUCTIONS = (
    "fsmem is a shared memory of Markdown files. Start with ls (or grep / search when you can name or "
    "describe what you need), read only the lines you need, and save what you learn with note. Every "
    "answer is capped in tokens and says when it was cut and how to get the rest."
)


def tool_list(memory: Memory) -> Any:
    """The MCP `tools/list` answer: the tools `memory`'s agent may use, with their JSON schemas."""
    import mcp.types as types

    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools.mcp_tools(memory)])


def tool_result(answer: tools.ToolAnswer) -> Any:
    """The MCP `tools/call` answer: the dispatcher's text, with `isError` when it refused (its one boundary,
    `fsmem.agents.tools.call`, has already worded the error), and how to go on as structured content
    (`next_offset`, `next_lines`)."""
    import mcp.types as types

    return types.CallToolResult(
        content=[types.TextContent(text=answer.text)],
        structured_content=answer.structured(),
        is_error=answer.is_error,
    )


def build_server(memory: Memory, held: dict[Any, Any] | None = None):
    """An MCP `Server` whose tools are `fsmem.tools` over `memory`.

    `held` maps request ids to tool arguments the SDK could not carry (see
    `TextLines`): the dispatcher gets those, so its door refuses them by name.
    """
    held = held if held is not None else {}
    import anyio
    import mcp.types as types

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return tool_list(memory)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The dispatcher is synchronous (ripgrep runs as a subprocess); keep the event loop free.
        arguments = held.pop(ctx.request_id, params.arguments) if ctx.request_id is not None else params.arguments
        return tool_result(await anyio.to_thread.run_sync(tools.call, memory, params.name, arguments))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await anyio.to_thread.run_sync(read_context, memory, params.uri)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return prompt_list()

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await anyio.to_thread.run_sync(distill_prompt, memory, params.name, params.arguments or {})

    prompts = {"list_prompts": list_prompts, "get_prompt": get_prompt}
    return server_of(list_tools, call_tool, read_resource, prompts)


DISTILL_PROMPT = "distill"
DISTILL_DESCRIPTION = (
    "Turn the memory's episodes (saved conversations) that are not distilled yet into keyed notes, within your "
    "budget: each part of an episode, then how to write its notes with the write tool so that it counts as distilled"
)


def prompt_list() -> Any:
    """The MCP `prompts/list` answer: the one prompt, `distill` (clients show it as a slash command)."""
    import mcp.types as types

    budget = types.PromptArgument(
        name="max_tokens", description="Most tokens of episodes to take in (default: your budget)", required=False
    )
    return types.ListPromptsResult(
        prompts=[types.Prompt(name=DISTILL_PROMPT, description=DISTILL_DESCRIPTION, arguments=[budget])]
    )


def distill_prompt(memory: Memory, name: str, arguments: dict[str, str]) -> Any:
    """The MCP `prompts/get` answer (synchronous: run it on a thread): the episodes' parts not yet distilled that
    fit the budget, and how to write their keyed notes; a bad name or argument is a JSON-RPC error."""
    import mcp.types as types
    from mcp.shared.exceptions import MCPError

    from fsmem.errors import FsmemError
    from fsmem.format.distilled import agent_prompt
    from fsmem.operations.distill import pending_parts

    if name != DISTILL_PROMPT:
        raise MCPError(types.INVALID_PARAMS, f"no prompt {name!r}; fsmem offers {DISTILL_PROMPT}")
    given = arguments.get("max_tokens")
    try:
        if given is not None and not (str(given).strip().isdigit() and int(given) >= 1):  # a prompt's are text
            raise MCPError(types.INVALID_PARAMS, f"max_tokens must be a whole number of at least 1, not {given!r}")
        budget = memory.budget.narrowed(max_tokens=int(given) if given is not None else None)
        if memory.scope is not None:
            raise MCPError(types.INVALID_PARAMS, "distill reads every episode; this agent has a scope")
        if budget.read_only:
            raise MCPError(types.INVALID_PARAMS, "this agent is read-only: it cannot write the notes distill asks for")
        text = agent_prompt(*pending_parts(memory, budget.max_tokens))
    except FsmemError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    message = types.PromptMessage(role="user", content=types.TextContent(text=text))
    return types.GetPromptResult(description=DISTILL_DESCRIPTION, messages=[message])


CONTEXT_URI = "fsmem://context"
CONTEXT_DESCRIPTION = (
    "What to know at the start of a turn: the memory's profile and INDEX.md (what it holds), within your budget"
)


def resource_list() -> Any:
    """The MCP `resources/list` answer: the pre-injected context, the one resource."""
    import mcp.types as types

    context = types.Resource(
        name="context", uri=CONTEXT_URI, description=CONTEXT_DESCRIPTION, mime_type="text/markdown"
    )
    return types.ListResourcesResult(resources=[context])


def read_context(memory: Memory, uri: str) -> Any:
    """The MCP `resources/read` answer for `uri` (synchronous: run it on a thread); an unknown resource or a
    failure of the memory is a JSON-RPC error with the message every face gives."""
    import mcp.types as types
    from mcp.shared.exceptions import MCPError

    from fsmem.errors import FsmemError

    if uri != CONTEXT_URI:
        raise MCPError(types.INVALID_PARAMS, f"no resource {uri!r}; fsmem offers {CONTEXT_URI}")
    try:
        with faces.speaking(faces.TOOLS):  # its cut note names the read tool's call, as the tools' answers do
            block = memory.context()
    except FsmemError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=CONTEXT_URI, mime_type="text/markdown", text=block.to_text())]
    )


def server_of(list_tools: Any, call_tool: Any, read_resource: Any, more: dict[str, Any] | None = None) -> Any:
    """fsmem's MCP server (its name, version and instructions) answering with these handlers (and `more`, such as
    the `distill` prompt)."""
    from mcp.server.lowlevel import Server

    async def list_resources(ctx: Any, params: Any) -> Any:
        return resource_list()

    handlers = {"list_tools": list_tools, "call_tool": call_tool, "list_resources": list_resources}
    handlers["read_resource"] = read_resource
    handlers.update(more or {})
    on = {f"on_{name}": handler for name, handler in handlers.items()}
    return Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, **on)


class TextLines:
    """The client's lines, each decoded by `fsmem.agents.jsonrpc` before the SDK sees it.

    A line the SDK can parse is passed on (tool arguments that hold a lone
    surrogate held for the dispatcher, by request id, in `held`); one it must
    not get is answered here with its JSON-RPC error, written to the SDK's
    own stream of answers, so that every message gets one answer and none
    stops the server. Blank lines are skipped.
    """

    def __init__(self, lines: Any, held: dict[Any, Any]):
        self.lines = lines
        self.held = held
        self._answers: Any = None
        self._ready: Any = None
        self._pending: set[Any] = set()  # ids of the requests passed on and not answered yet
        self._all_answered: Any = None  # set once none is pending, while the end of the input waits for it

    def answer_on(self, write_stream: Any) -> None:
        """Where refusals go: the stream the server writes its answers to."""
        self._answers = write_stream
        if self._ready is not None:
            self._ready.set()

    def __aiter__(self):
        return self._each()

    async def _each(self):
        import anyio

        self._ready = anyio.Event()
        if self._answers is not None:
            self._ready.set()
        async for line in self.lines:
            if not line.strip(" \t\r\n"):  # JSON's whitespace alone: no message
                continue
            try:
                decoded = jsonrpc.decode(line, self.held)
            except jsonrpc.Refused as refused:
                await self._ready.wait()
                await self._refuse(refused)
                continue
            self._asked(decoded.message)
            yield decoded.text
        # The client closed its side. The SDK cancels what is still running once its input ends, so a client
        # that wrote its requests and closed (`fsmem mcp < requests`) got no answer to them, though a write
        # among them was done: the input ends once every request passed on is answered (a minute at most).
        if self._pending:
            self._all_answered = anyio.Event()
            with anyio.move_on_after(LINGER_SECONDS):
                await self._all_answered.wait()

    def _asked(self, message: dict[str, Any]) -> None:
        """Note a request passed on (it will be answered), or a cancelled one (it need not be)."""
        if "method" not in message:
            return
        if "id" in message:
            self._pending.add(message["id"])
        elif message["method"] == "notifications/cancelled" and isinstance(message.get("params"), dict):
            self.answered(message["params"].get("requestId"))

    def answered(self, id_: Any) -> None:
        """The request `id_` was answered (`Answers`)."""
        self._pending.discard(id_)
        if not self._pending and self._all_answered is not None:
            self._all_answered.set()

    async def _refuse(self, refused: jsonrpc.Refused) -> None:
        import anyio
        import mcp.types as types
        from mcp.shared.message import SessionMessage

        error = types.ErrorData(code=refused.code, message=refused.message)
        answer = types.JSONRPCError(jsonrpc="2.0", id=refused.id, error=error)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._answers.send(SessionMessage(answer))


class Answers:
    """The SDK's stream of answers (the `WriteStream` protocol), telling `lines` which requests are answered."""

    def __init__(self, stream: Any, lines: TextLines):
        self.stream, self.lines = stream, lines

    async def send(self, item: Any, /) -> None:
        import mcp.types as types

        await self.stream.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.lines.answered(message.id)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> Answers:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.stream.__aexit__(*exc)


def serve(memory: Memory) -> None:
    """Serve `memory`'s tools on stdin/stdout until the client closes the connection, or until SIGTERM or
    Ctrl-C, which end the process at once (`_interrupt_ends_it`)."""
    import io

    import anyio

    _interrupt_ends_it()
    from mcp.server.stdio import stdio_server

    held: dict[Any, Any] = {}
    server = build_server(memory, held)
    # Our own reader of the client's lines (`TextLines`); fd 0 then points at the null device,
    # as the SDK does, so that nothing run by a handler reads the protocol stream.
    wire = os.fdopen(os.dup(0), "rb", closefd=True)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    lines = TextLines(anyio.wrap_file(io.TextIOWrapper(wire, encoding="utf-8", errors="replace")), held)

    async def run() -> None:
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.answer_on(write_stream)
            await server.run(read_stream, Answers(write_stream, lines), server.create_initialization_options())

    anyio.run(run)


def _interrupt_ends_it() -> None:
    """Ctrl-C (SIGINT) ends the process at once, as SIGTERM does (the default action of both).

    Python's own handler only cancels the event loop, whose cancellation then waits for the threads it runs:
    the read of the client's next line, which a terminal or an open pipe never ends, and a tool call (a first
    search's build at 100k files: minutes). Ctrl-C did nothing until stdin ended. A tool call cut short ends as
    a killed one does: every write is atomic and a build goes on from what it committed. Where SIGINT is
    ignored (a process started in the background), it stays ignored.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
