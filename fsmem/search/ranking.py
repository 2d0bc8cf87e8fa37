"""Ranked search over rows, under a read budget, with a threshold that can say "nothing relevant".

A row's score is its relevance times a salience boost:

- relevance: BM25 (bm25s) of the query against the row with its context
  (title, entity or topic, headings), against the row's neighbours in its
  section, and against its whole file, mixed by the `search.weights` of
  fsmem.yaml. Each part is divided by what the query's words could earn
  (the sum of their IDFs), so 1.0 means "every query word is in the row, its neighbours and its file", and
  `min_score` means the same thing for every query. A query word the memory
  lacks may match a near-spelling (rapidfuzz) at a reduced weight.
- salience: `1 + importance*w + recency*w + usage*w`, from the file's front
  matter (`importance`, `updated`) and from how often the retrieval log shows
  the row returned.

The answer holds whole rows in score order until the token budget or `k` is
reached, and says how many rows above `min_score` it left out.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.budget import CUT_BY_RESULTS, Meter, Page, check_offset
from fsmem.config import CONFIG_FILE
from fsmem.errors import ConfigError, InvalidArgument
from fsmem.format.facts import split_provenance
from fsmem.search.index import Analyzer, SearchIndex, Snapshot
from fsmem.store import retrieval_log
from fsmem.store.catalog import matches_filters
from fsmem.tokens import TokenCounter

DEFAULT_WEIGHTS = {
    "row": 1.0,
    "neighbours": 0.5,
    "document": 0.4,
    "fuzzy": 0.6,
    "importance": 0.1,
    "recency": 0.1,
    "usage": 0.1,
}


@dataclass(frozen=True)
class SearchSettings:
    """The `search:` section of fsmem.yaml, checked."""

    min_score: float = 0.05
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    recency_half_life_days: float = 30.0
    fuzzy_cutoff: float = 85.0

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> SearchSettings:
        weights = dict(DEFAULT_WEIGHTS)
        given = section.get("weights") or {}
        if not isinstance(given, dict):
            raise ConfigError(f"{CONFIG_FILE}: search.weights must be a mapping")
        for key, value in given.items():
            if key not in DEFAULT_WEIGHTS:
                raise ConfigError(f"{CONFIG_FILE}: unknown search weight {key!r} (known: {', '.join(DEFAULT_WEIGHTS)})")
            weights[key] = _number(f"search.weights.{key}", value, minimum=0.0)
        if weights["row"] + weights["neighbours"] + weights["document"] <= 0:
            raise ConfigError(f"{CONFIG_FILE}: search.weights row, neighbours and document cannot all be 0")
        return cls(
            min_score=_number("search.min_score", section.get("min_score", cls.min_score), minimum=0.0),
            weights=weights,
            recency_half_life_days=_number(
                "search.recency_half_life_days",
                section.get("recency_half_life_days", cls.recency_half_life_days),
                minimum=0.001,
            ),
            fuzzy_cutoff=_number("search.fuzzy_cutoff", section.get("fuzzy_cutoff", cls.fuzzy_cutoff), minimum=0.0),
        )


def _number(name: str, value: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"{CONFIG_FILE}: {name} must be a number of at least {minimum:g}, not {value!r}")
    return float(value)


@dataclass
class SearchHit:
    """One row of the answer: where it is, what it says, what it is about, and its score."""

    path: str
    line: int
    end_line: int
    text: str
    score: float
    kind: str
    title: str | None = None
    subject: str | None = None
    headings: list[str] = field(default_factory=list)
    superseded: bool = False
    tokens: int = 0  # what this row added to the answer (its line, plus any header it opened)
    sources: list[str] = field(default_factory=list)  # the notes a consolidated row cites

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "end_line": self.end_line,
            "text": self.text,
            "score": round(self.score, 4),
            "kind": self.kind,
            "title": self.title,
            "subject": self.subject,
            "headings": list(self.headings),
            "superseded": self.superseded,
            "tokens": self.tokens,
            "sources": list(self.sources),
        }


@dataclass
class SearchResult:
    """Rows in score order from `page.offset`, the tokens they cost, and what the budget left out (`page`)."""

    query: str
    hits: list[SearchHit]
    tokens: int
    page: Page
    min_score: float
    best_score: float | None = None
    note: str | None = None

    @property
    def left_out(self) -> int:
        return self.page.left_out

    @property
    def truncated(self) -> bool:
        return self.page.truncated

    @property
    def cut_by(self) -> str | None:
        return self.page.cut_by if self.page.truncated else None

    @property
    def empty(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "results": [h.to_dict() for h in self.hits],
            "tokens": self.tokens,
            **self.page.to_dict(),
            "min_score": self.min_score,
            "best_score": None if self.best_score is None else round(self.best_score, 4),
        }

    def body_lines(self) -> list[str]:
        """The rows as shown, grouped by file (files in order of their best row) and by heading."""
        return render_lines(self.hits)

    def to_text(self) -> str:
        if not self.hits:
            return self.no_result_message()
        lines = self.body_lines()
        trailer = self.page.trailer(
            f"rows above min_score {self.min_score:g}", narrow=", or narrow with --type/--tag"
        ).rstrip("]")
        lines.append(f"{trailer}; {self.tokens} tokens. Read around a row with: fsmem read PATH --lines A:B]")
        return "\n".join(lines)

    def no_result_message(self) -> str:
        if self.note:
            return self.note
        if self.page.offset and self.page.total:
            return self.page.trailer(f"rows above min_score {self.min_score:g}")
        best = "" if self.best_score is None else f" (best score {self.best_score:.3f} < min_score {self.min_score:g})"
        return (
            f"no relevant memory for {self.query!r}{best}. "
            "Try other words, grep for a name you know, or lower --min-score"
        )


def compact_citation(text: str) -> tuple[str, list[str]]:
    """A consolidated row's text with its citation cut to its dates, and the sources it cited.

    `- Went hiking. (2023-05-08, sessions/2023/05/08/conv-26-s1.md)` costs about
    twenty tokens more than `- Went hiking. (2023-05-08)`; the budget buys more
    rows this way, and the agent reads the full line (or `sources`) when it
    needs the provenance.
    """
    body, provenance = split_provenance(text)
    if provenance is None:
        return text, []
    span = provenance.first
    if provenance.to:
        span = f"{span} to {provenance.to}"
    if provenance.confirmed is not None and provenance.confirmed.date:
        span = f"{span}; confirmed {provenance.confirmed.date}"
    return (f"{body} ({span})" if span else body), list(provenance.sources)


def _hit_lines(hit: SearchHit) -> list[str]:
    text_lines = hit.text.splitlines() or [""]
    mark = " [superseded]" if hit.superseded else ""
    first = f"{hit.line}: {text_lines[0]}{mark if len(text_lines) == 1 else ''}"
    rest = [f"    {t}" for t in text_lines[1:]]
    if rest and mark:
        rest[-1] += mark
    return [first, *rest]


def _file_header(hit: SearchHit) -> str:
    """The path; the title too when no heading line will say what the row is about."""
    return f"{hit.path} ({hit.title})" if hit.title and not hit.headings else hit.path


def _heading_line(hit: SearchHit) -> str | None:
    return f"[{' > '.join(hit.headings)}]" if hit.headings else None


def render_lines(hits: list[SearchHit]) -> list[str]:
    order: dict[str, list[SearchHit]] = {}
    for hit in hits:
        order.setdefault(hit.path, []).append(hit)
    out: list[str] = []
    for group in order.values():
        out.append(_file_header(group[0]))
        current = None
        for hit in sorted(group, key=lambda h: h.line):
            heading = _heading_line(hit)
            if heading is not None and heading != current:
                out.append(heading)
            current = heading
            out.extend(_hit_lines(hit))
    return out


# -- scoring ---------------------------------------------------------------


@dataclass
class Ranking:
    """Scores of every row of a snapshot for one query; rows filtered out have score -1."""

    scores: Any  # numpy array, one per snapshot row
    relevance: Any
    keep: Any  # bool per row: passes the filters

    @functools.cached_property
    def candidates(self):
        """Row indices passing the filters, best first (ties in row order): every row, for the evaluation harness."""
        import numpy as np

        return _best_first(self.scores, np.flatnonzero(self.keep))

    def best(self) -> float | None:
        """The top candidate's score, or None when no row passes the filters."""
        return float(self.scores[self.keep].max()) if self.keep.any() else None

    def top(self, limit: int, min_score: float) -> tuple[list[int], int]:
        """The first `limit` rows of `candidates` scoring at least `min_score` (and above 0), and how many do.

        Only the rows that can be returned are sorted: at 10k files a query's
        positive rows can be a few hundred thousand.
        """
        import numpy as np

        above = np.flatnonzero((self.scores >= min_score) & (self.scores > 0))
        count = len(above)
        if count > limit:
            chosen = self.scores[above]
            threshold = np.partition(chosen, count - limit)[count - limit] if limit > 0 else np.inf
            above = above[chosen >= threshold]
        order = np.argsort(-self.scores[above], kind="stable")
        return above[order[:limit]].tolist(), count


def query_terms(analyzer: Analyzer, query: str) -> tuple[list[str], list[str]]:
    """(stemmed terms, surface words), each once, in query order."""
    words: list[str] = []
    for word in analyzer.words(query):
        if word not in words:
            words.append(word)
    terms: list[str] = []
    for word in words:
        term = analyzer.stem(word)
        if term not in terms:
            terms.append(term)
    return terms, words


def relevance_scores(snapshot: Snapshot, analyzer: Analyzer, query: str, settings: SearchSettings):
    """Normalised relevance of every row (about 1.0 when every query word is in the row)."""
    import numpy as np

    n = len(snapshot.rows)
    terms, _words = query_terms(analyzer, query)
    total = np.zeros(n, dtype=np.float64)
    if not terms or n == 0:
        return total
    rows_model = snapshot.models["rows"]
    exact = [t for t in terms if rows_model.knows(t)]
    fuzzy: dict[str, str] = {}
    missing = [t for t in terms if not rows_model.knows(t)]
    if missing and settings.weights["fuzzy"] > 0:
        from rapidfuzz import fuzz, process

        vocabulary = [t for t in rows_model.vocabulary() if len(t) >= 3]
        for term in missing:
            if len(term) < 4:
                continue
            found = process.extractOne(term, vocabulary, scorer=fuzz.ratio, score_cutoff=settings.fuzzy_cutoff)
            if found is not None:
                fuzzy[term] = found[0]
    weights = settings.weights
    parts = (("rows", weights["row"]), ("neighbours", weights["neighbours"]), ("files", weights["document"]))
    weight_sum = sum(w for _, w in parts)
    group_index = np.asarray(snapshot.group_of_row, dtype=np.int64)
    for name, weight in parts:
        if weight <= 0:
            continue
        model = snapshot.models[name]
        denominator = sum(model.idf(fuzzy.get(t, t)) for t in terms)
        if denominator <= 0:
            continue
        score = np.asarray(model.scores(exact), dtype=np.float64)
        if fuzzy:
            score = score + weights["fuzzy"] * np.asarray(model.scores(list(set(fuzzy.values()))), dtype=np.float64)
        if name == "files":
            score = score[group_index] if len(score) else np.zeros(n)
        total += weight * score / denominator
    return total / weight_sum


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MICROSECOND = _dt.timedelta(microseconds=1)


def _file_stamps(snapshot: Snapshot):
    """Per file: (importance 0..1, its `updated` stamp or mtime in whole microseconds since 1970), parsed once per snapshot."""
    import numpy as np

    cached = getattr(snapshot, "_salience_inputs", None)
    if cached is None:
        importance, micros = [], []
        for entry in snapshot.files:
            value = entry.meta.get("importance")
            importance.append(0.5 if value is None else min(max(float(value), 0.0), 1.0))
            stamp = fmt.parse_timestamp(entry.meta["updated"]) if entry.meta.get("updated") else None
            if stamp is None:
                stamp = _dt.datetime.fromtimestamp(entry.mtime_ns / 1e9, tz=_dt.UTC)
            micros.append((stamp - _EPOCH) // _MICROSECOND)
        cached = (np.asarray(importance, dtype=np.float64), np.asarray(micros, dtype=np.int64))
        snapshot._salience_inputs = cached
    return cached


def salience(snapshot: Snapshot, settings: SearchSettings, usage: dict[str, int], now: _dt.datetime):
    """The boost factor of every row: 1 + weighted importance, recency and usage (each 0..1)."""
    import numpy as np

    w = settings.weights
    importance, micros = _file_stamps(snapshot)
    if len(importance):
        # (now - stamp) in exact microseconds, then seconds and days as timedelta.total_seconds() computes them
        age_days = np.maximum(((now - _EPOCH) // _MICROSECOND - micros) / 1e6 / 86400.0, 0.0)
        # Python's ** per file: numpy's vectorised power can differ in the last bit, and ties must not move
        recency = np.array([0.5**x for x in (age_days / settings.recency_half_life_days).tolist()], dtype=np.float64)
        per_file = w["importance"] * importance + w["recency"] * recency
        boost = per_file[np.asarray(snapshot.file_of_row, dtype=np.int64)]
    else:
        boost = np.zeros(0)
    if usage and w["usage"] > 0 and len(boost):
        top = max(usage.values())
        used = snapshot.usage_per_row(usage)
        boost = boost + w["usage"] * np.log1p(used) / math.log1p(top)
    return 1.0 + boost


def _best_first(scores, candidates):
    """`candidates` by descending score, ties in row order: a stable sort of the positive scores only,
    since the rest (the zeros, most rows) are already in row order."""
    import numpy as np

    chosen = scores[candidates]
    positive = chosen > 0
    if np.any(chosen[~positive] != 0):  # not expected (scores are >= 0); keep the plain stable sort
        return candidates[np.argsort(-chosen, kind="stable")]
    top = candidates[positive]
    top = top[np.argsort(-scores[top], kind="stable")]
    return np.concatenate([top, candidates[~positive]])


def rank(
    snapshot: Snapshot,
    analyzer: Analyzer,
    query: str,
    settings: SearchSettings,
    *,
    usage: dict[str, int] | None = None,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    now: _dt.datetime | None = None,
    within: Callable[[str], bool] | None = None,
) -> Ranking:
    """Filter by front matter, supersession and `within` (an agent's scope), then score every remaining row."""
    import numpy as np

    now = now or fmt.parse_timestamp(fmt.now_iso())
    if type is None and not tag and updated_after is None:
        keep_file = np.ones(len(snapshot.files), dtype=bool)
    else:
        keep_file = np.array(
            [matches_filters(e.file_meta(), type=type, tag=tag, updated_after=updated_after) for e in snapshot.files],
            dtype=bool,
        )
    if within is not None:
        keep_file &= np.array([within(e.path) for e in snapshot.files], dtype=bool)
    n = len(snapshot.rows)
    keep = keep_file[np.asarray(snapshot.file_of_row, dtype=np.int64)] if n else np.zeros(0, dtype=bool)
    if not include_superseded and n:
        keep &= ~np.asarray(snapshot.superseded, dtype=bool)
    relevance = relevance_scores(snapshot, analyzer, query, settings)
    scores = relevance * salience(snapshot, settings, usage or {}, now) if n else relevance
    scores = np.where(keep, scores, -1.0)
    return Ranking(scores=scores, relevance=relevance, keep=keep)


def fit(
    snapshot: Snapshot,
    ranking: Ranking,
    counter: TokenCounter,
    *,
    query: str,
    k: int,
    max_tokens: int,
    min_score: float,
    offset: int = 0,
) -> SearchResult:
    """Whole rows, best first from `offset`, until `k` rows or `max_tokens` tokens; never a row cut in the middle.

    A row opens its file's header and its heading line the first time they
    appear, and pays for them then.
    """
    best = ranking.best()
    above, above_count = ranking.top(offset + k, min_score)
    hits: list[SearchHit] = []
    meter = Meter(counter.count, max_tokens=max_tokens, max_results=k)
    open_files: set[str] = set()
    open_headings: set[tuple[str, str | None]] = set()
    for index in above[offset:]:
        row = snapshot.rows[index]
        text, sources = compact_citation(row.text)
        hit = SearchHit(
            path=row.path,
            line=row.line,
            end_line=row.end_line,
            text=text,
            score=float(ranking.scores[index]),
            kind=row.kind,
            title=row.title,
            subject=row.subject,
            headings=list(row.headings),
            superseded=row.superseded,
            sources=sources,
        )
        pieces = list(_hit_lines(hit))
        heading = _heading_line(hit)
        if hit.path not in open_files:
            pieces.append(_file_header(hit))
        if heading is not None and (hit.path, heading) not in open_headings:
            pieces.append(heading)
        cost = meter.cost(pieces)
        if not meter.take(cost):
            break
        hit.tokens = cost
        open_files.add(hit.path)
        open_headings.add((hit.path, heading))
        hits.append(hit)
    page = Page(offset=offset, shown=len(hits), total=above_count, cut_by=meter.cut_by or CUT_BY_RESULTS)
    note = None
    if not above_count and best is None:
        note = f"no relevant memory for {query!r}: no rows to search (the memory is empty or the filters exclude every file)"
    elif page.too_small:
        note = (
            f"{page.left_out} relevant row(s) for {query!r}, but not even the best one fits the budget of "
            f"{max_tokens} tokens; ask with a larger max_tokens, or grep for its words"
        )
    return SearchResult(
        query=query, hits=hits, tokens=meter.tokens, page=page, min_score=min_score, best_score=best, note=note
    )


# -- the retrieval log as a usage signal -------------------------------------

_usage_cache: dict[str, tuple[tuple, dict[str, int]]] = {}


def usage_counts(root: Path) -> dict[str, int]:
    """How often each `path:line` was returned by search or recall, from the retrieval log."""
    folder = Path(root, ".fsmem", "logs")
    stamp = []
    for name in (retrieval_log.LOG_NAME + ".1", retrieval_log.LOG_NAME):
        try:
            st = os.stat(folder / name)
            stamp.append((name, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            pass
    key = str(root)
    cached = _usage_cache.get(key)
    if cached is not None and cached[0] == tuple(stamp):
        return cached[1]
    counts: dict[str, int] = {}
    if stamp:
        for record in retrieval_log.records(root):
            if record.get("tool") not in ("search", "recall"):
                continue
            for location in record.get("paths") or []:
                if isinstance(location, str):
                    counts[location] = counts.get(location, 0) + 1
    _usage_cache[key] = (tuple(stamp), counts)
    return counts


def search(
    index: SearchIndex,
    counter: TokenCounter,
    settings: SearchSettings,
    query: str,
    *,
    k: int,
    max_tokens: int,
    min_score: float | None = None,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    usage: dict[str, int] | None = None,
    offset: int = 0,
    within: Callable[[str], bool] | None = None,
) -> tuple[SearchResult, Snapshot, Ranking]:
    """Rank and fit; returns the snapshot and full ranking too (the evaluation harness needs every score).

    Rows of files outside `within` (an agent's scope) are dropped before anything is counted or fitted.
    """
    if not query or not query.strip():
        raise InvalidArgument("the search query is empty; describe what you are looking for")
    if min_score is not None and (min_score < 0 or not math.isfinite(min_score)):
        raise InvalidArgument("--min-score must be 0 or more")
    if updated_after is not None and fmt.parse_timestamp(updated_after) is None:
        raise InvalidArgument(f"--updated-after takes an ISO 8601 date such as 2024-05-01, not {updated_after!r}")
    snapshot = index.snapshot()
    ranking = rank(
        snapshot,
        index.analyzer,
        query,
        settings,
        usage=usage,
        type=type,
        tag=tag,
        updated_after=updated_after,
        include_superseded=include_superseded,
        within=within,
    )
    threshold = settings.min_score if min_score is None else min_score
    result = fit(
        snapshot,
        ranking,
        counter,
        query=query,
        k=k,
        max_tokens=max_tokens,
        min_score=threshold,
        offset=check_offset(offset),
    )
    if result.empty and result.note is None and not query_terms(index.analyzer, query)[0]:
        result.note = (
            f"no relevant memory for {query!r}: it holds only common words; describe the subject with its own words"
        )
    return result, snapshot, ranking


def log_fields(result: SearchResult | None) -> dict[str, Any]:
    """What the retrieval log records of a search answer (None: a skipped recall)."""
    hits = result.hits if result is not None else []
    return {
        "paths": [h.location for h in hits],
        "rows": len(hits),
        "tokens": result.tokens if result is not None else 0,
        "truncated": result.truncated if result is not None else False,
        "empty": not hits,
    }
