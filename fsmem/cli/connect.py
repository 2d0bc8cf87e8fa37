"""`fsmem connect CLIENT`: the configuration an MCP client needs to start this fsmem, printed or written.

Not an operation on a memory's contents, so a hand-written command over
`fsmem.connect`; it imports neither mcp nor the server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fsmem import connect
from fsmem.cli.options import command, did_you_mean
from fsmem.cli.printing import echo
from fsmem.errors import InvalidArgument


@command("connect")
@click.argument("client", metavar="CLIENT")
@click.option(
    "--scope",
    metavar="SCOPE",
    help="Where the client keeps it: user (every project; the default), project (this folder's config "
    "file), or local (Claude Code only: you, in this project).",
)
@click.option("--server", "url", metavar="URL", help="Connect to `fsmem serve` at URL (the token from $FSMEM_TOKEN).")
@click.option("--write", is_flag=True, help="Add the entry to the client's config file (the change is shown first).")
@click.option("--force", is_flag=True, help="With --write: replace an fsmem entry that is already there.")
@click.option(
    "--file", "file_", metavar="FILE", help="With --write: the config file to change (default: the client's)."
)
@click.option(
    "--hooks",
    is_flag=True,
    help="claude-code: the hooks block for its settings.json instead (fsmem hook claude-code on SessionStart, "
    "UserPromptSubmit, Stop, PreCompact and SessionEnd).",
)
@click.option(
    "--ask-to-save/--no-ask-to-save",
    default=True,
    help="With --hooks: include the Stop hook, which asks the agent once per session to save what it learned as "
    "keyed notes (default); --no-ask-to-save leaves it out, and with --write removes fsmem's Stop hook.",
)
@click.pass_context
def connect_cmd(ctx, client, scope, url, write, force, file_, hooks, ask_to_save):
    """Print the configuration that connects CLIENT (claude-code, claude-desktop, codex, cursor) to this memory.

    The entry names this installation's fsmem and the memory by absolute paths,
    since a desktop app starts it without your PATH. With --server it names
    the URL instead, and the token by $FSMEM_TOKEN, never its value.
    """
    if client not in connect.CLIENTS:
        raise click.UsageError(
            f"No such client {client!r}.{did_you_mean(client, list(connect.CLIENTS))} "
            f"The clients are: {', '.join(connect.CLIENTS)}."
        )
    scopes = connect.SCOPES[client]
    scope = scope or scopes[0]
    if scope not in scopes:
        raise click.UsageError(f"{client} has no scope {scope!r}; its scopes are: {', '.join(scopes)}.")
    obj = ctx.find_root().obj or {}
    agent = obj.get("agent")
    if hooks:
        _hooks(ctx, client, scope, url, write, force, file_, ask_to_save)
        return
    if not ask_to_save:
        raise click.UsageError("--no-ask-to-save goes with --hooks: it leaves out the Stop hook.")
    if url is not None:
        if agent:
            raise click.UsageError("--agent goes with a local memory: with --server, the token names the agent.")
        entry = connect.http_entry(client, connect.check_url(url))
        root = None
    else:
        from fsmem.store.root import discover_root

        root = discover_root(obj.get("root"))
        entry = connect.stdio_entry(root, agent)

    home, cwd = Path.home(), Path.cwd()
    target = (
        Path(file_).expanduser().absolute()
        if file_
        else connect.config_path(client, scope, home, cwd, dict(os.environ))
    )
    if write and target is None:
        raise InvalidArgument(_no_file(client))
    change = connect.plan(client, target, entry, force=force) if write and target is not None else None
    if client == "claude-code" and scope != "project":
        echo(connect.claude_code_line(scope, root=root, agent=agent, url=url))
    elif client == "codex":
        echo(connect.toml_table(entry), nl=False)
    else:
        echo(connect.json_block(entry), nl=False)
    if not write or target is None:
        _say_where(client, scope, target)
        return
    _apply(change, target, "already has this entry")


def _hooks(ctx, client, scope, url, write, force, file_, ask_to_save):
    """--hooks: Claude Code's hooks block, printed, or added to its settings file after showing the change."""
    if client != "claude-code":
        raise click.UsageError(f"--hooks is for claude-code; {client} runs no fsmem hook.")
    if url is not None:
        raise click.UsageError("--hooks runs fsmem on this machine: it takes no --server.")
    import json

    from fsmem.cli.hook import DEFAULT_TIMEOUT, hooks_config
    from fsmem.store.root import discover_root

    root = discover_root((ctx.find_root().obj or {}).get("root"))
    block = hooks_config(root, DEFAULT_TIMEOUT, ask_to_save=ask_to_save)
    target = (
        Path(file_).expanduser().absolute() if file_ else connect.hooks_settings_path(scope, Path.home(), Path.cwd())
    )
    left_out = () if ask_to_save else ("Stop",)
    change = connect.plan_hooks(target, block, force=force, left_out=left_out) if write else None
    echo(json.dumps(block, indent=2))
    if not write:
        echo(f"# merge into {target} (scope {scope}); --write adds it there, keeping other hooks", err=True)
        return
    _apply(change, target, "already runs these hooks")


def _no_file(client: str) -> str:
    if client == "claude-code":
        return (
            "Claude Code keeps user and local servers in ~/.claude.json, which it writes itself: run the "
            "`claude mcp add` line (fsmem connect claude-code), or use --scope project to write this folder's .mcp.json"
        )
    return (
        "Claude Desktop has no official app for Linux, so there is no config file to write here; "
        "name one with --file, or copy the block that fsmem connect claude-desktop prints"
    )


def _say_where(client: str, scope: str, target: Path | None) -> None:
    """Where the printed entry goes, on stderr (stdout holds only the configuration itself)."""
    if client == "claude-code" and scope != "project":
        echo("# run this line in a shell; Claude Code stores the server itself", err=True)
        return
    if client == "claude-desktop":
        paths = connect.desktop_config_paths(Path("~"), "%APPDATA%")
        echo(f"# add to mcpServers in {paths['macOS']} (macOS)", err=True)
        echo(f"# or {str(paths['Windows']).replace('/', chr(92))} (Windows);", err=True)
        echo("# Claude Desktop has no official Linux app. Restart it afterwards.", err=True)
        if sys.platform not in ("darwin", "win32"):
            return
    echo(f"# goes in {target}; --write adds it there", err=True)


def _apply(change: connect.Plan | None, target: Path, already: str) -> None:
    """Write a planned change after showing it (on stderr, so stdout stays the block), or say there is none."""
    if change is None:
        echo(f"{target} {already}; nothing was changed", err=True)
        return
    echo(connect.diff(change), err=True, nl=False)
    connect.apply(change)
    echo(f"wrote {target}", err=True)
