"""Ranked search over rows, under a read budget, with a threshold that can say "nothing relevant".

A row's score is its relevance times a salience boost:

- relevance: a weighted mean (`search.weights` of fsmem.yaml) of four parts,
  each divided by what the query's words could earn (the sum of their IDFs),
  so 1.0 means "every query word, once", and `min_score` means the same thing
  for every query:
  - row: BM25F of the row's text and the headings above it (FTS5 bm25() with
    column weights `text` and `headings`);
  - subject: BM25 of the query against the row's document names (title,
    entity or topic, aliases), over documents, so a fact is found by its
    subject although its line never names it;
  - neighbours: the row parts of the rows just above and below, in its section;
  - document: BM25 of the rows of its file that cite the same session note (or
    none), summed over every file citing that note.
  A query word the memory lacks may match a near-spelling (rapidfuzz) at a
  reduced weight.
- salience: `1 + importance*w + recency*w + usage*w`, from the file's front
  matter (`importance`, `updated`) and from how often the retrieval log shows
  the row returned.

The engine returns the best rows by the row part (from the best documents when
very many match) and the rows of the documents the query names; their section
neighbours join them, and the other parts re-rank this pool. The answer holds
whole rows in score order until the token budget or `max_results` is reached,
and says how many rows above `min_score` it left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from fsmem import faces, format as fmt
from fsmem.budget import CUT_BY_RESULTS, CUT_BY_TOKENS, Meter, Page, echo, long_path
from fsmem.errors import InvalidArgument
from fsmem.format.rows import Row
from fsmem.search.index import MAX_ROWS, ROW_BITS, SearchIndex
from fsmem.search.parsed import FileRows
from fsmem.search.results import (  # noqa: F401  (re-exported)
    SearchHit,
    SearchResult,
    _file_header,
    _heading_line,
    _hit_lines,
    compact_citation,
    render_lines,
)
from fsmem.search.scoring import MAX_QUERY_TERMS, Ranking, RowsDamaged, StaleAnswer, json_array, query_terms, rank
from fsmem.search.settings import DEFAULT_WEIGHTS, SearchSettings  # noqa: F401  (re-exported)
from fsmem.search.usage import usage_counts  # noqa: F401  (re-exported: the retrieval log as a usage signal)
from fsmem.tokens import TokenCounter


class HitRows:
    """The rows behind a ranking's ids, read back from their files on first use (the index stores no text).

    A file is read only when one of its rows is about to be shown, so an answer
    cut by its token budget reads the files of the rows it shows, not of all
    `max_results`. A file that changed since it was ranked raises StaleAnswer.
    """

    def __init__(self, index: SearchIndex, ranking: Ranking, ids: list[int]):
        self.index, self.ranking = index, ranking
        files = {rid >> ROW_BITS for rid in ids}
        self.stored = index.reading(
            lambda conn: {
                fid: (mtime, size, ino, ctime)
                for fid, mtime, size, ino, ctime in conn.execute(
                    "SELECT id, abs(mtime_ns), size, ino, ctime_ns FROM search_files"
                    " WHERE id IN (SELECT value FROM json_each(?))",
                    (json_array(files),),
                )
            }
        )
        self.rows: dict[int, FileRows] = {}

    def __getitem__(self, rid: int) -> Row:
        fid, path = rid >> ROW_BITS, self.ranking.paths[rid]
        rows = self.rows.get(fid)
        if rows is None:
            stored = self.stored.get(fid)
            found = self.index.rows_of(path, stored)
            if found is None or stored != found[0]:
                raise StaleAnswer(path)
            rows = self.rows[fid] = found[1]
        ordinal = rid & (MAX_ROWS - 1)
        row = rows[ordinal] if ordinal < len(rows) else None
        if row is None or row.line != self.ranking.lines[rid]:
            raise RowsDamaged(path)  # the file's stamp is the one its rows were stored with
        return row


def fit(
    index: SearchIndex,
    ranking: Ranking,
    counter: TokenCounter,
    *,
    query: str,
    k: int,
    max_tokens: int,
    min_score: float,
    offset: int = 0,
) -> SearchResult:
    """Whole rows, best first from `offset`, until `k` rows or `max_tokens` tokens; a row is cut only when it is
    the first and longer than the budget (`_cut_to_fit`), so that the next page still follows it.

    A row opens its file's header and its heading line the first time they
    appear, and pays for them then.
    """
    best = ranking.best()
    above, above_count = ranking.top(offset + k, min_score)
    rows = HitRows(index, ranking, above[offset:])
    hits: list[SearchHit] = []
    meter = Meter(counter.count, max_tokens=max_tokens, max_results=k)
    open_files: set[str] = set()
    open_headings: set[tuple[str, str | None]] = set()
    for rid in above[offset:]:
        row = rows[rid]
        text, sources = compact_citation(row.text)
        hit = SearchHit(
            path=row.path,
            line=row.line,
            end_line=row.end_line,
            text=text,
            score=float(ranking.scores[rid]),
            kind=row.kind,
            title=row.title,
            subject=row.subject,
            headings=list(row.headings),
            superseded=(row.superseded and rid not in ranking.current) or rid in ranking.stale,
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
            cut = None if hits else _cut_to_fit(hit, pieces[len(_hit_lines(hit)) :], meter, counter)
            if cut is None:
                break
            cost = cut
        hit.tokens = cost
        open_files.add(hit.path)
        open_headings.add((hit.path, heading))
        hits.append(hit)
    page = Page(offset=offset, shown=len(hits), total=above_count, cut_by=meter.cut_by or CUT_BY_RESULTS)
    note = None
    if not above_count and best is None:
        note = f"no relevant memory for {echo(query)}: no rows to search (the memory is empty or the filters exclude every file)"
    elif page.too_small:
        larger = faces.larger_budget()
        note = (
            f"{page.left_out} relevant row(s) for {echo(query)}, but not even the best one fits the budget"
            f"{larger}{', or' if larger else ';'} grep for its words"
        )
    return SearchResult(
        query=query,
        hits=hits,
        tokens=meter.tokens,
        page=page,
        min_score=min_score,
        best_score=best,
        note=note,
        unsearched=list(ranking.unsearched),
    )


def _cut_to_fit(hit: SearchHit, opened: list[str], meter: Meter, counter: TokenCounter) -> int | None:
    """Cut `hit`, the first row of a page and longer than the budget, to the head that fits, marked with the
    read that shows it whole: the tokens it then costs (spent on `meter`), or None when not even the mark fits.

    A paragraph of 20,000 words ranked first stopped every search for its words: the answer showed no row and
    named no next page, and the rows after it were out of reach at any budget below its size. `opened` is the
    file header and heading line the row opens.
    """
    if meter.cut_by != CUT_BY_TOKENS:
        return None
    whole = faces.call("read", path=hit.path, lines=f"{hit.line}:{hit.end_line}")
    marker = f" … [row cut by the token budget; {whole}]"
    room = meter.room
    if meter.cost(opened) > room // 2:  # a title or heading of thousands of words: cut too, to a share of the room
        share = max(1, room // 8)
        if hit.title and counter.count(hit.title) > share:
            hit.title = counter.truncate(hit.title[: share * 32], share) + "…"
        hit.headings = [
            h if counter.count(h) <= share else counter.truncate(h[: share * 32], share) + "…" for h in hit.headings
        ]
        heading = _heading_line(hit)
        opened = [_file_header(hit), *([heading] if heading is not None else [])][: len(opened)]
    if (
        long_path(hit.path) and meter.cost(opened) + counter.count(marker) > room
    ):  # a path of 4,096 bytes: ~4,000 tokens
        share = max(1, room // 4)
        head = counter.truncate(hit.path[: share * 32], share).rstrip("\ufffd")  # no character cut in half
        hit.path, hit.title, hit.headings = head + "…", None, []
        marker = " … [path and row cut by the token budget]"
        opened = [_file_header(hit)]
    text = hit.text[: room * 32]  # more than the room holds: a token is rarely over 32 characters
    allowance = room
    while allowance >= 0:
        pieces = [*_hit_lines(replace(hit, text=counter.truncate(text, allowance) + marker)), *opened]
        cost = meter.cost(pieces)
        if cost <= room:
            hit.text = counter.truncate(text, allowance) + marker
            meter.spend("".join(piece + "\n" for piece in pieces))
            return cost
        allowance -= max(1, cost - room)
    return None


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
    view: Callable[[Ranking], None] | None = None,
) -> tuple[SearchResult, Ranking]:
    """Rank and fit; returns the ranking too (the evaluation harness needs every candidate's score).

    Rows of files outside `within` (an agent's scope) are dropped before anything is counted or fitted;
    `view` may drop or mark candidates before they are fitted (an `as_of` answer: `fsmem.query.as_of`).
    """
    if not query or not query.strip():
        raise InvalidArgument("the search query is empty; describe what you are looking for")
    distinct = len(query_terms(index.analyzer, query)[0])
    if distinct > MAX_QUERY_TERMS:
        raise InvalidArgument(
            f"the query has {distinct:,} distinct words; a search takes at most {MAX_QUERY_TERMS}: "
            "ask with the words that name what you need"
        )
    if updated_after is not None and fmt.parse_timestamp(updated_after) is None:
        raise InvalidArgument(
            f"{faces.arg('updated_after')} takes an ISO 8601 date such as 2024-05-01, not {echo(updated_after)}"
        )
    threshold = settings.min_score if min_score is None else min_score
    for attempt in range(4):
        index.refresh()
        ranking = rank(
            index,
            query,
            settings,
            limit=offset + k,
            usage=usage,
            type=type,
            tag=tag,
            updated_after=updated_after,
            include_superseded=include_superseded,
            within=within,
        )
        if view is not None:
            view(ranking)
        try:
            result = fit(
                index, ranking, counter, query=query, k=k, max_tokens=max_tokens, min_score=threshold, offset=offset
            )
            break
        except StaleAnswer as stale:
            # a file that changed is ranked again; rows that are not their unchanged file's, after a refresh
            # read every racy file again, are damage: the index is made again, as for any other damage
            if attempt == 3 or (attempt == 2 and not isinstance(stale, RowsDamaged)):
                raise
            if attempt == 2:
                index.recover()
    if result.empty and result.note is None and not query_terms(index.analyzer, query)[0]:
        result.note = (
            f"no relevant memory for {echo(query)}: it holds only common words; describe the subject with its own words"
        )
    return result, ranking


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
