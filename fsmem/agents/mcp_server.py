"""`fsmem mcp`: the agent tools served over stdio with the official MCP SDK (`pip install fsmem[mcp]`).

The low-level `mcp.server.lowlevel.Server` is used rather than `MCPServer`
(the former FastMCP): the tool list and JSON schemas already exist in
`fsmem.tools`, so the server only forwards `tools/list` and `tools/call` to
the same registry and dispatcher the Python API uses. Errors are tool results
with `isError` set, so the model sees the message and can correct its call.
This is the only module that imports `mcp`.
"""

from __future__ import annotations

from typing import Any

from fsmem import __version__
from fsmem.agents import tools
from fsmem.memory import Memory

SERVER_NAME = "fsmem"
INSTRUCTIONS = (
    "fsmem is a shared memory of Markdown files. Start with list (or grep / search when you can name or "
    "describe what you need), read only the lines you need, and save what you learn with note. Every "
    "answer is capped in tokens and says when it was cut and how to get the rest."
)


def build_server(memory: Memory):
    """An MCP `Server` whose tools are `fsmem.tools` over `memory`."""
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=d["name"], description=d["description"], input_schema=d["parameters"])
                for d in tools.definitions(memory, format="json")
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # The dispatcher is synchronous (ripgrep runs as a subprocess); keep the event loop free.
        answer = await anyio.to_thread.run_sync(tools.call, memory, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=answer.text)],
            is_error=answer.is_error,
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(memory: Memory) -> None:
    """Serve `memory`'s tools on stdin/stdout until the client closes the connection."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server(memory)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
