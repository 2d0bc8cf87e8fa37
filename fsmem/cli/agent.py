"""Commands for agent harnesses: tools (definitions), mcp (the stdio server) and agent add (declare one)."""

from __future__ import annotations

from collections.abc import Callable

import click

from fsmem.cli.options import F, command, emit, open_memory, output_option, scope_option
from fsmem.cli.printing import echo, json_text

FORMATS = ("openai", "anthropic", "json")


@command("tools")
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="json",
    show_default=True,
    help="openai: Chat Completions `tools=`; anthropic: Messages `tools=`; json: fsmem's own form.",
)
@click.option("--read-only", is_flag=True, help="Leave out the write tools (note, write, edit).")
@output_option
@click.pass_context
def tools_cmd(ctx, format_, read_only, as_json):
    """Print the agent tool definitions as JSON, ready for an SDK's tools parameter (the --agent's tools only)."""
    from fsmem.agents import tools as agent_tools

    memory = open_memory(ctx)
    if read_only:
        agent_tools.read_only(memory)
    echo(json_text(agent_tools.definitions(memory, format=format_)))


@command("mcp")
@click.option("--read-only", is_flag=True, help="Offer and allow no write tools, whatever the agent's settings.")
@scope_option("agent")
@click.pass_context
def mcp_cmd(ctx, read_only, paths):
    """Serve the agent tools over stdio with the Model Context Protocol (needs fsmem[mcp]), with --agent's budget."""
    from fsmem.agents import tools as agent_tools
    from fsmem.memory import Memory

    obj = ctx.find_root().obj or {}
    memory = Memory(obj.get("root"), agent=obj.get("agent"), scope=list(paths) or None)
    if read_only:
        agent_tools.read_only(memory)
    from fsmem.extras import needs_extra

    with needs_extra("mcp", "fsmem mcp"):
        from fsmem.agents import mcp_server

        mcp_server.serve(memory)


def budget_option(unit: str, help: str) -> Callable[[F], F]:
    """--max-UNIT-budget N: a standing budget of the agent, named apart from the per-call --max-UNIT."""
    return click.option(f"--max-{unit}-budget", f"max_{unit}", type=click.IntRange(min=1), metavar="N", help=help)


@click.group("agent")
def agent_group():
    """Declare the agents of this memory in its fsmem.yaml (comments and the rest of the file kept as written)."""


@command("add")
@click.argument("name")
@click.option("--read-only", is_flag=True, default=None, help="The agent may list, grep, read and search, never write.")
@budget_option(
    "tokens",
    "Tokens in one answer to this agent (its budget; default: budgets.default). A call may still ask for fewer.",
)
@budget_option("results", "Rows in one answer to this agent (its budget; default: budgets.default).")
@output_option
@click.pass_context
def agent_add_cmd(ctx, name, read_only, max_tokens, max_results, as_json):
    """Declare agent NAME under budgets.agents in fsmem.yaml; needed only where budgets.closed is true or to
    give it a budget of its own."""
    from fsmem.operations.agents import add_agent

    obj = ctx.find_root().obj or {}
    added = add_agent(obj.get("root"), name, read_only=read_only, max_tokens=max_tokens, max_results=max_results)
    emit(added, as_json)


agent_group.add_command(agent_add_cmd)
