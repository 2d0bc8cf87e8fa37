"""The `fsmem` command: a thin skin over `fsmem.Memory`.

Commands are loaded lazily from their modules (`COMMANDS`), so `fsmem read`
pays neither for MCP, watchdog nor the search index at start-up, and
`fsmem --version` answers before click is imported. The click group and the
one error boundary (library errors become one line on stderr and exit code 2)
are in `fsmem.cli.app`.
"""

from __future__ import annotations

import sys

# command name -> "module:attribute" under fsmem.cli
COMMANDS: dict[str, str] = {
    "init": "core:init_cmd",
    "ls": "core:ls_cmd",
    "grep": "core:grep_cmd",
    "read": "core:read_cmd",
    "note": "core:note_cmd",
    "write": "core:write_cmd",
    "edit": "core:edit_cmd",
    "rm": "core:rm_cmd",
    "mv": "core:mv_cmd",
    "check": "core:check_cmd",
    "watch": "watch:watch_cmd",
    "tools": "agent:tools_cmd",
    "mcp": "agent:mcp_cmd",
    "stats": "agent:stats_cmd",
    "context": "agent:context_cmd",
    "consolidate": "consolidate:consolidate_cmd",
    "index": "consolidate:index_cmd",
    "search": "search:search_cmd",
    "recall": "search:recall_cmd",
    "evaluate": "search:evaluate_cmd",
    "import": "search:import_group",
    "log": "history:log_cmd",
    "show": "history:show_cmd",
    "diff": "history:diff_cmd",
    "restore": "history:restore_cmd",
    "revert": "history:revert_cmd",
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
    from fsmem.cli.app import run

    run(args)


def __getattr__(name: str) -> object:
    if name == "cli":  # the click group, for click's test runner and the command table
        from fsmem.cli.app import cli

        return cli
    raise AttributeError(f"module 'fsmem.cli' has no attribute {name!r}")
