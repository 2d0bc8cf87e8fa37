"""Search and recall: rows ranked for a query within the budget, and the cheap pre-injection decision.

Both are logged to the retrieval log themselves (usage counts feed the
ranking); a face that logs its own call (the tool dispatcher) makes these
records nested, and only its own is written (`fsmem.store.retrieval_log`).
The index and its engine are imported by the first search.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fsmem.operations.core import Core
from fsmem.store import retrieval_log

if TYPE_CHECKING:
    from fsmem.search.ranking import SearchResult
    from fsmem.search.recall import RecallResult


def search(
    memory: Core,
    query: str,
    *,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    as_of: str | None = None,
    min_score: float | None = None,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> SearchResult:
    """Rows ranked for `query` (facts, bullets, paragraphs with their context), fitted to the budget.

    `min_score` is the threshold below which a row is not relevant (an
    empty answer says "no relevant memory"). With `as_of`, the keyed facts
    are those that held on that date (`fsmem.query.as_of`).
    """
    from fsmem.search.ranking import log_fields, search as ranked, usage_counts

    budget = memory.budget.narrowed(max_tokens, max_results)
    view = None
    if as_of is not None:
        from fsmem.query import as_of as _as_of

        view = _as_of.ranking_view(memory.root, _as_of.bound(as_of), include_superseded=include_superseded)
    arguments = {
        "query": query,
        "type": type,
        "tag": tag,
        "updated_after": updated_after,
        "include_superseded": include_superseded or None,
        "as_of": as_of,
        "min_score": min_score,
        "offset": offset or None,
        "max_results": max_results,
        "max_tokens": max_tokens,
    }
    given = {key: value for key, value in arguments.items() if value is not None}
    memory.catalog.count_call()  # a memory asked again holds the change feed: the index refreshes from it
    memory.catalog.cache.open()  # the token counts' memo, made before a build can hold the write lock
    with retrieval_log.LoggedCall(memory.root, agent=memory.agent, tool="search", arguments=given) as logged:
        result, _ranking = ranked(
            memory.search_index,
            memory.tokens,
            memory.search_settings,
            query,
            k=budget.max_results,
            max_tokens=budget.max_tokens,
            min_score=min_score,
            type=type,
            tag=tag,
            updated_after=updated_after,
            include_superseded=include_superseded or as_of is not None,
            usage=usage_counts(memory.root),
            offset=offset,
            within=memory.visible(),
            view=view,
        )
        logged.done(**log_fields(result))
    return result


def recall(
    memory: Core,
    query: str,
    *,
    seen: str | None = None,
    max_tokens: int | None = None,
) -> RecallResult:
    """Search for pre-injection, or skip cheaply (budget spent, already `seen` in the agent's context, nothing new)."""
    from fsmem.search import recall as _recall
    from fsmem.search.ranking import log_fields
    from fsmem.search.scoring import first_terms

    left = memory.budget.max_tokens if max_tokens is None else min(max_tokens, memory.budget.max_tokens)
    arguments = {"query": query, "max_tokens": max_tokens, "seen_chars": len(seen or "")}
    with retrieval_log.LoggedCall(memory.root, agent=memory.agent, tool="recall", arguments=arguments) as logged:
        outcome = _recall.recall(
            query,
            seen=seen,
            tokens_left=left,
            settings=memory.config.search.recall,
            root=memory.root,
            search=lambda budget_tokens: search(
                memory, first_terms(memory.search_index.analyzer, query), max_tokens=budget_tokens
            ),
            scope=memory.scope,
            written_since=memory.catalog.written_since,
        )
        logged.done(**log_fields(outcome.result), skipped=outcome.skipped, reason=outcome.reason)
    return outcome
