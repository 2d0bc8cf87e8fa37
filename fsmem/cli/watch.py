"""The `watch` command: keep the metadata cache current until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
import time

import click

from fsmem.cli.output import open_memory


@click.command("watch")
@click.option(
    "--quiet",
    type=float,
    metavar="SECONDS",
    help="Act once the memory has been still this long (default: watch.quiet_seconds, else 0.5).",
)
@click.option("--consolidate", is_flag=True, help="Also consolidate once session notes have changed and gone still.")
@click.option(
    "--consolidate-after",
    type=float,
    metavar="SECONDS",
    help="How long session notes must be still before consolidating (default: 60).",
)
@click.pass_context
def watch_cmd(ctx: click.Context, quiet: float | None, consolidate: bool, consolidate_after: float | None) -> None:
    """Keep the metadata cache and INDEX.md current while files change; logs what it does to stderr."""
    memory = open_memory(ctx)
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    def log(message: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} fsmem watch: {message}", err=True)

    memory.watch(quiet=quiet, log=log, stop=stop, consolidate=consolidate, consolidate_after=consolidate_after)
