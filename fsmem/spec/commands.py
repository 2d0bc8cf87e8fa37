"""The commands written by hand, each with why it is not generated: none is an operation of an open memory.

Every other command of `fsmem` is a declared operation's (`fsmem.spec.operations`), built from its spec
(`fsmem.cli.generated`). The table of commands (`fsmem.cli.COMMANDS`) and the CLI's positional arguments
(`fsmem.faces`) are made from the declarations and this list; nothing else names a command.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HandWritten:
    """A command not generated from a declaration: where click finds it, why, and its arguments in order."""

    target: str  # "module:attribute" under fsmem.cli
    reason: str
    positional: tuple[str, ...] = ()


HAND_WRITTEN: dict[str, HandWritten] = {
    "init": HandWritten("core:init_cmd", "creates a memory: there is none to open yet", ("directory",)),
    "sync": HandWritten(
        "history:sync_cmd",
        "--setup runs before there is a memory to open; it pulls and pushes a remote, not the memory's files",
        ("remote",),
    ),
    "watch": HandWritten("watch:watch_cmd", "runs until stopped, with callbacks no other face has"),
    "connect": HandWritten(
        "connect:connect_cmd", "writes an agent client's own configuration, outside the memory", ("client",)
    ),
    "tools": HandWritten("agent:tools_cmd", "prints the tool definitions themselves: a face, not an operation"),
    "mcp": HandWritten("agent:mcp_cmd", "serves the tools over MCP stdio: a face, not an operation"),
    "serve": HandWritten("server:serve_cmd", "serves memories over HTTP: a face, not an operation"),
    "token": HandWritten("server:token_group", "manages the server's access tokens, kept outside the memory"),
    "config": HandWritten(
        "settings:config_cmd",
        "this host's own settings (distill's command), kept in .git/config or .fsmem/, never in the memory's files: "
        "the operator's, never an agent's",
        ("name", "value"),
    ),
    "agent": HandWritten("agent:agent_group", "sets an agent's budget in fsmem.yaml: the operator's settings"),
    "hook": HandWritten(
        "hook:hook_group", "Claude Code's hooks: read the client's JSON on stdin, answer in its format"
    ),
    "evaluate": HandWritten(
        "search:evaluate_cmd", "measures search against an evaluation set: a benchmark, not a question", ("evalset",)
    ),
    "import": HandWritten(
        "search:import_group",
        "a group: its subcommands are the operation import_from's (`Cli.group`), and `import locomo` (a benchmark)",
    ),
}
