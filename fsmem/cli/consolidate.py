"""`fsmem consolidate` and `fsmem index`: thin adapters over Memory.consolidate and Memory.index."""

from __future__ import annotations

import sys

import click

from fsmem.cli.options import command, emit, open_memory, output_option


class _Bar:
    """A progress bar on stderr, only on a terminal and only when there is much to do (quiet under cron)."""

    def __init__(self, min_items: int):
        self.min_items = min_items
        self.bar: click.progressbar | None = None  # type: ignore[valid-type]
        self.stage: str | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if total < self.min_items or not sys.stderr.isatty():
            return
        if stage != self.stage:
            self.close()
            self.stage = stage
            self.bar = click.progressbar(length=total, label=stage, file=sys.stderr)
            self.bar.__enter__()
        assert self.bar is not None
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@command("consolidate")
@click.option("--dry-run", is_flag=True, help="Print a unified diff of what would change; write nothing.")
@output_option
@click.pass_context
def consolidate_cmd(ctx, dry_run, as_json):
    """Merge new session notes into entity and topic documents, mark superseded facts, rebuild INDEX.md.

    Exit 0 when notes were consolidated (or would be), 1 when there was nothing new, 2 on error
    (also when another consolidation is running).
    """
    memory = open_memory(ctx)
    bar = _Bar(memory.config.consolidate.progress_min_notes)
    try:
        report = memory.consolidate(dry_run=dry_run, progress=bar)
    finally:
        bar.close()
    emit(report, as_json, empty=report.empty)


@command("index")
@output_option
@click.pass_context
def index_cmd(ctx, as_json):
    """Regenerate INDEX.md, the table of contents of entities and topics (also done by every consolidate run)."""
    emit(open_memory(ctx).index(), as_json)
