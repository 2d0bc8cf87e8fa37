"""Commands for agent harnesses: tools (definitions), mcp (the stdio server), stats (the retrieval log), context."""

from __future__ import annotations

import json

import click

from fsmem.agents import tools as agent_tools
from fsmem.cli.output import emit, json_option, open_memory


def _memory_for(ctx: click.Context, agent: str | None):
    """The memory, with the command's --agent taking precedence over the global one."""
    if agent is not None:
        ctx.find_root().obj["agent"] = agent
    return open_memory(ctx)


@click.command("tools")
@click.option(
    "--format",
    "format_",
    type=click.Choice(agent_tools.FORMATS),
    default="json",
    show_default=True,
    help="openai: Chat Completions `tools=`; anthropic: Messages `tools=`; json: fsmem's own form.",
)
@click.option(
    "--agent", metavar="NAME", help="Only the tools this agent may use (no write tools when it is read-only)."
)
@click.option("--read-only", is_flag=True, help="Leave out the write tools (note, write, edit).")
@click.pass_context
def tools_cmd(ctx, format_, agent, read_only):
    """Print the agent tool definitions as JSON, ready for an SDK's tools parameter."""
    memory = _memory_for(ctx, agent)
    if read_only:
        agent_tools.read_only(memory)
    click.echo(json.dumps(agent_tools.definitions(memory, format=format_), ensure_ascii=False, indent=2))


@click.command("mcp")
@click.option("--agent", metavar="NAME", help="Serve with this agent's budget and read-only flag from fsmem.yaml.")
@click.option("--read-only", is_flag=True, help="Offer and allow no write tools, whatever the agent's settings.")
@click.pass_context
def mcp_cmd(ctx, agent, read_only):
    """Serve the agent tools over stdio with the Model Context Protocol (needs fsmem[mcp])."""
    memory = _memory_for(ctx, agent)
    if read_only:
        agent_tools.read_only(memory)
    try:
        from fsmem.agents import mcp_server

        mcp_server.serve(memory)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mcp", "mcp_types", "anyio"):
            raise click.ClickException("the MCP server needs the mcp package: pip install 'fsmem[mcp]'") from None
        raise


@click.command("stats")
@click.option("--since", metavar="DATE", help="Only calls at or after this ISO 8601 date or time.")
@click.option("--agent", metavar="NAME", help="Only calls made by this agent.")
@json_option
@click.pass_context
def stats_cmd(ctx, since, agent, as_json):
    """Per tool, from the retrieval log: calls, p50/p95 latency, mean tokens, empty, cut, error and skip shares."""
    result = open_memory(ctx).stats(since=since, agent=agent)
    emit(result, as_json, empty=result.calls == 0)


@click.command("context")
@click.option("--agent", metavar="NAME", help="Use this agent's token budget.")
@click.option("--max-tokens", type=int, metavar="N", help="Token cap for the block (at most the agent's budget).")
@json_option
@click.pass_context
def context_cmd(ctx, agent, max_tokens, as_json):
    """Print the block to pre-inject at the start of a turn: profile/ first, then INDEX.md, within the budget."""
    emit(_memory_for(ctx, agent).context(max_tokens=max_tokens), as_json)
