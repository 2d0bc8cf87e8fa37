"""The `watch` command: keep the metadata cache current until Ctrl-C or SIGTERM."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time

import click

from fsmem.cli.answering import Answering
from fsmem.cli.options import command, emit, open_memory, output_option
from fsmem.cli.printing import echo


@command("watch")
@click.option(
    "--settle",
    type=float,
    metavar="SECONDS",
    help="Act once the memory has been still this long (default: watch.settle_seconds, else 0.5).",
)
@click.option("--consolidate", is_flag=True, help="Also consolidate once session notes have changed and gone still.")
@click.option(
    "--consolidate-after",
    type=float,
    metavar="SECONDS",
    help="How long session notes must be still before consolidating (default: watch.consolidate_after_seconds, else 60).",
)
@output_option
@click.pass_context
def watch_cmd(ctx, settle, consolidate, consolidate_after, as_json) -> None:
    """Keep the metadata cache and INDEX.md current while files change; logs to stderr, a summary at exit."""
    memory = open_memory(ctx)
    stop = threading.Event()

    def request_stop(signum, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    def log(message: str) -> None:
        echo(f"{time.strftime('%H:%M:%S')} fsmem watch: {message}", err=True)

    answering = Answering(memory.root, log)  # one-shot reads asked meanwhile (fsmem.cli.rendezvous)
    try:
        stats = memory.watch(
            settle=settle,
            log=log,
            stop=stop,
            consolidate=consolidate,
            consolidate_after=consolidate_after,
            wait=answering.wait,
        )
    finally:
        answering.close()
    if as_json:
        emit(_Summary(stats), True)


@dataclasses.dataclass
class _Summary:
    stats: object

    def to_dict(self) -> dict:
        return dataclasses.asdict(self.stats)  # type: ignore[call-overload]

    def to_text(self) -> str:
        return str(self.stats)
