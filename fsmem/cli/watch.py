"""The `watch` command: keep the metadata cache current until Ctrl-C or SIGTERM (during its warm-up too:
`fsmem.cli.stopping`)."""

from __future__ import annotations

import dataclasses
import threading
import time

import click

from fsmem.cli.answering import Answering
from fsmem.cli.options import command, emit, open_memory, output_option
from fsmem.cli.printing import echo
from fsmem.cli.stopping import Stopped, StopSignals


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
    signals = StopSignals(stop)

    def log(message: str) -> None:
        echo(f"{time.strftime('%H:%M:%S')} fsmem watch: {message}", err=True)

    answering = Answering(memory.root, log, signals.warm)  # one-shot reads asked meanwhile (fsmem.cli.rendezvous)

    def wait(stop: threading.Event, seconds: float) -> bool:
        if signals.warming:
            answering.open()  # the end of the warm-up: the caches caught up, then the socket
            signals.warm()  # where no socket is made too
        return answering.wait(stop, seconds)

    try:
        stats = memory.watch(
            settle=settle,
            log=log,
            stop=stop,
            consolidate=consolidate,
            consolidate_after=consolidate_after,
            wait=wait,
        )
    except Stopped:
        from fsmem.watch import WatchStats

        log(f"stopped by {signals.name()} while warming up")
        stats = WatchStats()
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
