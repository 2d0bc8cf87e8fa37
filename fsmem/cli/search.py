"""Commands: search, recall, evaluate and import (LoCoMo)."""

from __future__ import annotations

import click

from fsmem.cli.options import (
    command,
    emit,
    emit_within,
    filter_options,
    include_superseded_option,
    max_tokens_option,
    open_memory,
    output_option,
    page_options,
)
from fsmem.store import given


@command("search")
@click.argument("query")
@filter_options
@include_superseded_option
@click.option(
    "--min-score",
    type=float,
    metavar="S",
    help="Rows scoring below S are not relevant (default: search.min_score in fsmem.yaml).",
)
@page_options
@output_option
@click.pass_context
def search_cmd(
    ctx, query, type_, tag, updated_after, include_superseded, min_score, offset, max_results, max_tokens, as_json
):
    """Rank facts, bullets and paragraphs for QUERY; whole rows within the budget (exit 1: nothing relevant)."""
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.search(
            query,
            type=type_,
            tag=list(tag),
            updated_after=updated_after,
            include_superseded=include_superseded,
            min_score=min_score,
            offset=offset,
            max_results=max_results,
            max_tokens=room,
        ),
        as_json,
        empty=lambda result: result.empty,
    )


SEEN_LIMIT = 16 * given.MiB  # what an agent holds in its context is far smaller


def _read_seen(path: str | None, option: str) -> str | None:
    if path is None:
        return None
    return given.read_bytes(path, what=option, limit=SEEN_LIMIT, stdin=True).decode("utf-8", "replace")


@command("recall")
@click.argument("query")
@click.option(
    "--seen-file",
    metavar="FILE",
    help="What the agent already holds ('-' for stdin); recall skips when QUERY is already in it.",
)
@max_tokens_option
@output_option
@click.pass_context
def recall_cmd(ctx, query, seen_file, max_tokens, as_json):
    """Search for pre-injection, or skip cheaply (exit 1 when skipped or nothing relevant); --max-tokens 0: spent."""
    seen = _read_seen(seen_file, "--seen-file")
    memory = open_memory(ctx)
    if max_tokens == 0:  # not a budget but a signal: the turn's budget is spent, and the answer says so
        result = memory.recall(query, seen=seen, max_tokens=0)
        emit(result, as_json, empty=result.empty)
        return
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.recall(query, seen=seen, max_tokens=room),
        as_json,
        empty=lambda result: result.empty,
        reserve=False,
    )


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
        given.output_file(plot_file, what="--plot")  # fail before the run, not after it
        require_matplotlib()
    report = evaluate(open_memory(ctx), evalset, sweep=sweep, max_tokens=max_tokens)
    if plot_file:
        plot(report, plot_file)
    emit(report, as_json)


@click.group("import")
def import_group():
    """Import public data sets into a memory."""


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
