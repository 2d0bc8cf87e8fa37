"""Recall: search wrapped in a read policy, for harnesses that inject memory before each turn.

Reading memory every turn costs tokens and dilutes the context, so recall skips,
cheaply and before any ranking, when:

- `budget`: the tokens left for this turn (`max_tokens`) are below `recall.min_tokens`;
- `in_context`: the query already appears in what the agent has `seen` (rapidfuzz
  partial match at or above `recall.context_similarity`, 0-100);
- `nothing_new`: `recall.horizon_days` is set and no file was written within
  that horizon, or none of the relevant rows lies in such a file.

Otherwise it searches with the threshold and fits the budget. Every call is
logged with `skipped` and `reason`, so `fsmem stats` can report the skip share.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.errors import InvalidArgument
from fsmem.search.ranking import SearchResult
from fsmem.search.settings import RecallSettings
from fsmem.store.scope import Scope

SKIP_REASONS = ("budget", "in_context", "nothing_new")


@dataclass
class RecallResult:
    """Either a skip with its reason, or the search answer."""

    query: str
    skipped: bool
    reason: str | None
    result: SearchResult | None

    @property
    def empty(self) -> bool:
        return self.result is None or self.result.empty

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"query": self.query, "skipped": self.skipped, "reason": self.reason}
        if self.result is not None:
            data.update(self.result.to_dict())
        else:
            data.update({"results": [], "tokens": 0, "truncated": False, "left_out": 0})
        return data

    def to_text(self) -> str:
        if self.skipped:
            why = {
                "budget": "the token budget for this turn is spent",
                "in_context": "the query is already in the working context",
                "nothing_new": "nothing relevant was written within the recall horizon",
            }[self.reason or "budget"]
            return f"recall skipped: {why}"
        assert self.result is not None
        return self.result.to_text()


def _in_context(query: str, context: str, similarity: float) -> bool:
    from rapidfuzz import fuzz

    from fsmem.search.analyzer import canonical

    needle = " ".join(canonical(query).lower().split())
    # NFKC makes a character up to 18 (U+FDFA): the comparison takes no more of its end than the text as given
    haystack = " ".join(canonical(context).lower()[-len(context) :].split())
    if not needle or not haystack:
        return False
    if needle in haystack:
        return True
    return fuzz.partial_ratio(needle, haystack) >= similarity


def _written_since(root: Path, horizon: _dt.datetime, scope: Scope | None = None) -> set[str]:
    """Files (in `scope`) written, per their mtime, after `horizon` (a walk: for a caller without a catalog)."""
    from fsmem.store.catalog import walk_stats

    limit = horizon.timestamp()
    return {rel for rel, _full, stat in walk_stats(root, scope=scope) if stat.st_mtime > limit}


def recall(
    query: str,
    *,
    seen: str | None,
    tokens_left: int,
    settings: RecallSettings,
    root: Path,
    search: Callable[[int], SearchResult],
    scope: Scope | None = None,
    written_since: Callable[[_dt.datetime], set[str]] | None = None,
) -> RecallResult:
    """Skip for a reason, or `search(tokens_left)` and keep the answer (see the module docstring).

    `written_since(horizon)` names the files written after `horizon` (the catalog's SQL, in `scope`)."""
    if not query or not query.strip():
        raise InvalidArgument("the recall query is empty")
    if tokens_left < settings.min_tokens:
        return RecallResult(query, True, "budget", None)
    if seen and _in_context(query, seen, settings.context_similarity):
        return RecallResult(query, True, "in_context", None)
    fresh: set[str] | None = None
    if settings.horizon_days is not None:
        now = fmt.parse_timestamp(fmt.now_iso()) or fmt.wall_clock()
        horizon = now - _dt.timedelta(days=settings.horizon_days)
        fresh = written_since(horizon) if written_since is not None else _written_since(root, horizon, scope)
        if not fresh:
            return RecallResult(query, True, "nothing_new", None)
    result = search(tokens_left)
    if fresh is not None and result.hits and not any(h.path in fresh for h in result.hits):
        return RecallResult(query, True, "nothing_new", None)
    return RecallResult(query, False, None, result)
