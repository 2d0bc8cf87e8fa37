"""Commands: search, recall, eval and import (LoCoMo)."""

from __future__ import annotations

from pathlib import Path

import click

from fsmem.cli.core import filter_options
from fsmem.cli.output import emit, json_option, open_memory
from fsmem.errors import InvalidArgument


@click.command("search")
@click.argument("query")
@click.option("--k", type=int, metavar="N", help="At most N rows (at most the agent's max_results).")
@click.option("--max-tokens", type=int, metavar="N", help="Token cap for this answer (at most the agent's budget).")
@click.option(
    "--min-score",
    type=float,
    metavar="S",
    help="Rows scoring below S are not relevant (default: search.min_score in fsmem.yaml).",
)
@filter_options
@click.option("--include-superseded", is_flag=True, help="Also rank facts that a newer fact superseded.")
@json_option
@click.pass_context
def search_cmd(ctx, query, k, max_tokens, min_score, type_, tag, updated_after, include_superseded, as_json):
    """Rank facts, bullets and paragraphs for QUERY; whole rows within the budget (exit 1: nothing relevant)."""
    result = open_memory(ctx).search(
        query,
        k=k,
        max_tokens=max_tokens,
        min_score=min_score,
        type=type_,
        tag=list(tag),
        updated_after=updated_after,
        include_superseded=include_superseded,
    )
    emit(result, as_json, empty=result.empty)


@click.command("recall")
@click.argument("query")
@click.option(
    "--context-file",
    type=click.Path(dir_okay=False),
    metavar="F",
    help="The agent's working context ('-' for stdin); recall skips when QUERY is already in it.",
)
@click.option("--max-tokens", type=int, metavar="N", help="Tokens left for this turn (0: spent, recall skips).")
@json_option
@click.pass_context
def recall_cmd(ctx, query, context_file, max_tokens, as_json):
    """Search for pre-injection, or skip cheaply (exit 1 when skipped or nothing relevant)."""
    context = None
    if context_file == "-":
        context = click.get_text_stream("stdin").read()
    elif context_file:
        try:
            context = Path(context_file).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise InvalidArgument(f"--context-file {context_file} does not exist") from None
    result = open_memory(ctx).recall(query, context=context, max_tokens=max_tokens)
    emit(result, as_json, empty=result.empty)


@click.command("eval")
@click.argument("evalset", type=click.Path(dir_okay=False))
@click.option(
    "--k", "ks", default="1,2,4,8,12,20,30", show_default=True, metavar="1,2,4,...", help="Row caps to sweep."
)
@click.option("--max-tokens", type=int, metavar="N", help="Token budget of every answer (at most the agent's budget).")
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False),
    metavar="FILE.png",
    help="Draw recall and p95 latency against k (needs matplotlib).",
)
@json_option
@click.pass_context
def eval_cmd(ctx, evalset, ks, max_tokens, plot_file, as_json):
    """Measure search on EVALSET (YAML or JSONL): recall, tokens and latency per k, knee, d'."""
    from fsmem.evaluation.harness import plot, require_matplotlib

    if plot_file:
        require_matplotlib()  # fail before the run, not after it
    report = open_memory(ctx).evaluate(evalset, ks=ks, max_tokens=max_tokens)
    if plot_file:
        plot(report, plot_file)
    emit(report, as_json)


@click.group("import")
def import_group():
    """Import public data sets into a memory."""


@import_group.command("locomo")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", type=click.Path(file_okay=False))
@click.option("--sample", "samples", multiple=True, metavar="ID", help="Only this sample_id (repeatable; default all).")
@click.option("--no-consolidate", is_flag=True, help="Keep the session notes as written; do not run the consolidator.")
@json_option
def import_locomo_cmd(file, target, samples, no_consolidate, as_json):
    """Turn each LoCoMo conversation into a memory TARGET/<sample_id> of dated session notes, consolidated, plus an eval set."""
    from fsmem.evaluation.locomo import import_locomo

    emit(import_locomo(file, target, samples=list(samples) or None, consolidate=not no_consolidate), as_json)
