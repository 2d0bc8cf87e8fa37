"""The `watch` command: keep the metadata cache current until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
import time

import click

from .output import open_memory


@click.command("watch")
@click.option("--quiet", type=float, metavar="SECONDS",
              help="Act once the memory has been still this long (default: watch.quiet_seconds, else 0.5).")
@click.pass_context
def watch_cmd(ctx: click.Context, quiet: float | None) -> None:
    """Keep the metadata cache current while files change; logs what it does to stderr."""
    memory = open_memory(ctx)
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    def log(message: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} fsmem watch: {message}", err=True)

    memory.watch(quiet=quiet, log=log, stop=stop)
