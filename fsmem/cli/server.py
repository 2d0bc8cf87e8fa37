"""`fsmem serve` (the memory server for a team) and `fsmem token create|list|revoke` (who may use it).

The web stack is imported only when `fsmem serve` runs; the token commands
need nothing beyond the standard library.
"""

from __future__ import annotations

import click

from fsmem.cli.options import command, emit, output_option, scope_option
from fsmem.cli.printing import echo

TOKENS_HELP = (
    "The token store (default: $FSMEM_TOKENS, else ~/.config/fsmem/tokens.json); keep it outside every memory."
)


def tokens_option(function):
    return click.option("--tokens", "tokens_file", metavar="FILE", envvar="FSMEM_TOKENS", help=TOKENS_HELP)(function)


def _store(tokens_file):
    from fsmem.server.tokens import TokenStore

    return TokenStore(tokens_file)


@command("serve")
@click.option(
    "--memory",
    "memories",
    multiple=True,
    metavar="NAME=PATH",
    help="Serve the memory at PATH as NAME, at /mcp/NAME (repeatable). Default: the --root memory, as 'default'.",
)
@click.option("--config", "config_file", metavar="FILE", help="Server settings (YAML): memories, tokens, log, limits.")
@tokens_option
@click.option("--host", metavar="ADDRESS", help="Address to listen on (default 127.0.0.1: this machine only).")
@click.option("--port", type=int, metavar="N", help="Port to listen on (default 8765; 0 picks a free one).")
@click.option(
    "--log", "log_file", metavar="FILE", help="Append the JSON request log to FILE instead of standard error."
)
@click.option(
    "--processes",
    "process_count",
    metavar="N|auto",
    help="Server processes (default 1; auto: one per core); each token's requests are all served by one.",
)
@click.pass_context
def serve_cmd(ctx, memories, config_file, tokens_file, host, port, log_file, process_count):
    """Serve the agent tools over MCP streamable HTTP to the holders of tokens (needs fsmem[server]).

    Each request's agent, read-only flag and reach come from its token (fsmem token create); the endpoint
    is http://HOST:PORT/mcp. Stops gracefully on SIGTERM, finishing writes in flight.
    """
    from pathlib import Path

    from fsmem.errors import InvalidArgument
    from fsmem.server.settings import ServerSettings, processes

    obj = ctx.find_root().obj or {}
    if obj.get("agent"):
        raise InvalidArgument(
            "fsmem serve takes no --agent: each request acts for the agent of its token (fsmem token create --agent)"
        )
    settings = ServerSettings.load(config_file)
    for item in memories:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise InvalidArgument(f"--memory takes NAME=PATH, such as team=/srv/memory/team, not {item!r}")
        settings.add_memory(name.strip(), path.strip())
    if not settings.memories:
        from fsmem.memory import discover_root

        settings.add_memory("default", discover_root(obj.get("root")))
    if tokens_file:
        settings.tokens = Path(tokens_file).expanduser()
    if host:
        settings.host = host
    if port is not None:
        settings.port = port
    if log_file:
        settings.log = Path(log_file).expanduser()
    if process_count is not None:
        settings.processes = processes(process_count)
    settings.check()  # before the web stack loads: a wrong setting is reported at once
    from fsmem.extras import needs_extra

    with needs_extra("server", "fsmem serve"):
        from fsmem.server import run

        code = run.serve(settings)  # imports the web stack (anyio, uvicorn) itself
    ctx.exit(code)


@click.group("token")
def token_group():
    """Create, list and revoke the tokens that let agents use a memory server (fsmem serve)."""


@command("create")
@click.option("--memory", required=True, metavar="NAME", help="The memory the token reaches (its name in fsmem serve).")
@click.option("--read-only", is_flag=True, help="The token may list, grep, read and search, never write.")
@scope_option("token")
@click.option("--expires", metavar="DATE", help="ISO 8601 date (valid through that day, UTC) or date and time.")
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    help="The server's settings (as fsmem serve --config): where --memory lives, so that an agent it refuses is "
    "refused here. Without it, the --root (or $FSMEM_ROOT) memory is checked.",
)
@tokens_option
@output_option
@click.pass_context
def token_create_cmd(ctx, memory, read_only, paths, expires, config_file, tokens_file, as_json):
    """Create a token for --agent on a memory and print it once (the store keeps only a salted hash)."""
    from fsmem.errors import InvalidArgument, StorageError

    obj = ctx.find_root().obj or {}
    agent = obj.get("agent")
    if not agent:
        raise InvalidArgument("a token acts for one agent: fsmem token create --memory NAME --agent AGENT")
    root = _memory_of(memory, config_file, obj.get("root"))
    if root is not None:  # a token the server would refuse on every request is not made
        from fsmem.config import Config

        Config.load(root).budget_for(agent)
    store = _store(tokens_file)
    created = store.create(
        memory=memory, agent=agent, read_only=read_only, paths=list(paths), expires=expires, active=False
    )
    if not as_json:
        reach = ", ".join(created.record.paths) or "the whole memory"
        echo(
            f"token {created.record.id} for agent {agent} on memory {memory} ({reach}"
            f"{', read-only' if read_only else ''}), stored in {created.path}; it is shown only this once",
            err=True,
        )
    try:
        emit(created, as_json)  # the secret, on stdout: until it is written, the token stays pending
    except OSError as exc:
        _drop_stdout()  # what could not be written is never written later, at exit, either
        raise StorageError(
            f"token {created.record.id} was not shown ({exc.strerror or exc}), so it was never activated;"
            " create another"
        ) from None
    store.activate(created.record.id)


def _drop_stdout() -> None:
    """Point stdout at the null device: the secret left in its buffer goes nowhere when Python flushes at exit."""
    import os
    import sys

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


def _memory_of(name: str, config_file: str | None, root: str | None):
    """The folder of memory `name`: from the server's settings, else the memory --root or $FSMEM_ROOT names."""
    import os

    from fsmem.errors import InvalidArgument

    if config_file:
        from fsmem.server.settings import ServerSettings

        settings = ServerSettings.load(config_file)
        if name not in settings.memories:
            served = ", ".join(sorted(settings.memories)) or "none"
            raise InvalidArgument(f"{config_file} serves no memory named {name!r} (it serves: {served})")
        return settings.memories[name]
    given = root or os.environ.get("FSMEM_ROOT")
    if not given:
        return None
    from fsmem.memory import discover_root

    return discover_root(given)


@command("list")
@click.option("--memory", metavar="NAME", help="Only the tokens of this memory.")
@tokens_option
@output_option
@click.pass_context
def token_list_cmd(ctx, memory, tokens_file, as_json):
    """List the tokens (id, status, memory, agent, read-only, reach, expiry), never their secrets; with --agent, that agent's."""
    agent = (ctx.find_root().obj or {}).get("agent")
    listing = _store(tokens_file).list(memory=memory, agent=agent)
    emit(listing, as_json, empty=not listing.tokens)


@command("revoke")
@click.argument("token_id", metavar="ID_OR_TOKEN")
@tokens_option
@output_option
def token_revoke_cmd(token_id, tokens_file, as_json):
    """Revoke a token by its id (fsmem token list) or by the token itself: the server refuses it from its next request on."""
    from fsmem.server.tokens import TokenList

    record = _store(tokens_file).revoke(token_id)
    emit(TokenList([record], _store(tokens_file).path), as_json)


for _cmd in (token_create_cmd, token_list_cmd, token_revoke_cmd):
    token_group.add_command(_cmd)
