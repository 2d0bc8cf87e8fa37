"""Commands: evaluate and import locomo; search, recall and import's other subcommands are built from their specs
(`fsmem.cli.generated`)."""

from __future__ import annotations

import click

from fsmem.cli.generated import OperationGroup
from fsmem.cli.options import command, emit, max_tokens_option, open_memory, output_option
from fsmem.store import outside_files


@command("evaluate")
@click.argument("evalset")
@click.option(
    "--sweep",
    metavar="1,2,4,...",
    help="Row caps (max_results, the k of the recall-vs-k curve) to measure. [default: 1,2,4,8,12,20,30]",
)
@max_tokens_option
@click.option(
    "--plot",
    "plot_file",
    metavar="FILE.png",
    help="Draw recall and p95 latency against k (needs matplotlib).",
)
@output_option
@click.pass_context
def evaluate_cmd(ctx, evalset, sweep, max_tokens, plot_file, as_json):
    """Measure search on EVALSET (YAML or JSONL): recall, tokens and latency per k, knee, d'."""
    from fsmem.evaluation.harness import evaluate, plot, require_matplotlib

    if plot_file:
        outside_files.output_file(plot_file, what="--plot")  # fail before the run, not after it
        require_matplotlib()
    report = evaluate(open_memory(ctx), evalset, sweep=sweep, max_tokens=max_tokens)
    if plot_file:
        plot(report, plot_file)
    emit(report, as_json)


@click.group("import", cls=OperationGroup)
def import_group():
    """Import history into this memory (claude-code, chatgpt, claude, markdown), or LoCoMo into new memories."""


@import_group.command("locomo")
@click.argument("file")
@click.argument("target")
@click.option("--sample", "samples", multiple=True, metavar="ID", help="Only this sample_id (repeatable; default all).")
@click.option("--no-consolidate", is_flag=True, help="Keep the session notes as written; do not run the consolidator.")
@output_option
def import_locomo_cmd(file, target, samples, no_consolidate, as_json):
    """Turn each LoCoMo conversation into a memory TARGET/<sample_id> of dated session notes, consolidated, plus an eval set."""
    from fsmem.evaluation.locomo import import_locomo

    emit(import_locomo(file, target, samples=list(samples) or None, consolidate=not no_consolidate), as_json)
