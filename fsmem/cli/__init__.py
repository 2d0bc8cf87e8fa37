"""The `fsmem` command: a thin skin over `fsmem.Memory`.

Commands are loaded lazily from their modules (`COMMANDS`), so `fsmem read`
pays neither for MCP, watchdog nor the search index at start-up, and
`fsmem --version` answers before click is imported, and so does a plain
`fsmem grep` (`fsmem.cli.lean`). The click group and the
one error boundary (library errors become one line on stderr and exit code 2)
are in `fsmem.cli.app`.
"""

from __future__ import annotations

import sys

# command name -> "module:attribute" under fsmem.cli; a declared operation's command is built from its spec
COMMANDS: dict[str, str] = {
    "init": "core:init_cmd",
    "ls": "generated:ls",
    "grep": "generated:grep",
    "read": "generated:read",
    "links": "generated:links",
    "note": "generated:note",
    "write": "generated:write",
    "edit": "generated:edit",
    "rm": "generated:rm",
    "mv": "generated:mv",
    "check": "generated:check",
    "watch": "watch:watch_cmd",
    "connect": "connect:connect_cmd",
    "tools": "agent:tools_cmd",
    "mcp": "agent:mcp_cmd",
    "agent": "agent:agent_group",
    "stats": "generated:stats",
    "context": "generated:context",
    "consolidate": "generated:consolidate",
    "distill": "generated:distill",
    "config": "settings:config_cmd",
    "index": "generated:index",
    "search": "generated:search",
    "recall": "generated:recall",
    "timeline": "generated:timeline",
    "evaluate": "search:evaluate_cmd",
    "import": "search:import_group",
    "hook": "hook:hook_group",
    "log": "generated:log",
    "show": "generated:show",
    "diff": "generated:diff",
    "restore": "generated:restore",
    "revert": "generated:revert",
    "sync": "history:sync_cmd",
    "serve": "server:serve_cmd",
    "token": "server:token_group",
}


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `fsmem` command."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from fsmem import __version__

        print(f"fsmem, version {__version__}")
        sys.exit(0)
    if argv is None:  # a read from the shell: a running `fsmem watch` of the memory may answer it (rendezvous)
        from fsmem.cli.rendezvous import ask

        ask(args)
    dispatch(args, whole_process=argv is None)


def dispatch(args: list[str], *, whole_process: bool = False) -> None:
    """Run the command line `args` here, and exit with its code (`whole_process`: it is all the process does)."""
    if "grep" in args:  # a plain grep runs without click (`fsmem.cli.lean`); any other goes to click
        from fsmem.cli.lean import parse, run as run_lean

        grep = parse(args)
        if grep is not None:
            run_lean(grep, whole_process=whole_process)
    from fsmem.cli.app import run

    run(args)


def __getattr__(name: str) -> object:
    if name == "cli":  # the click group, for click's test runner and the command table
        from fsmem.cli.app import cli

        return cli
    raise AttributeError(f"module 'fsmem.cli' has no attribute {name!r}")
