"""Scoring: the candidate rows of one query and their scores, from the FTS5 tables (see fsmem.search.ranking).

The engine returns the best rows by the row part (from the best documents when
very many match) and the rows of the documents the query names; their section
neighbours join them, and the other parts of the score re-rank this pool.
What the index alone decides (`_candidates`) is kept per state of the index;
the salience (importance, recency, usage) is applied at every call.

This module is long because the candidates' four steps are one algorithm over
shared state (terms, frequencies, the pool, the files' packed rows), and
their kept result and the salience applied to it are read together.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import gt
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from fsmem import format as fmt
from fsmem.search import changes, rowscores
from fsmem.search.analyzer import Analyzer
from fsmem.search.documents import (
    FEW_NAMED,
    Kept,
    count_common_words,
    document_frequencies,
    document_ranking_ids,
    document_scores,
    fts5_idf,
    json_array,
    name_scores,
    quoted,
)
from fsmem.search.index import LINKED, MAX_ROWS, ROW_BITS, SUPERSEDED, SearchIndex, unpack_rows
from fsmem.search.postings import IndexDamaged, _native
from fsmem.search.tables import BLOCK_BITS, continued_blocks, corrected, rank_id_sql, stored_blocks
from fsmem.search.usage import Usage
from fsmem.store.catalog import FileMeta, matches_filters
from fsmem.store.meta import EXACT_COUNT_LIMIT

if TYPE_CHECKING:
    from fsmem.search.settings import SearchSettings

# A query's cost is bounded before it runs: at most this many distinct terms (a long paragraph's worth).
# Past a few hundred the time grows faster than the terms; 100 of the memory's commonest words cost what
# any query can, every row matching (docs/performance.md, "Figures behind the search code").
MAX_QUERY_TERMS = 100
POOL_MIN = 1000  # rows the engine returns best first (by the row part) before the rest of the score is added
NEIGHBOUR_SEEDS = 200  # the best rows whose section neighbours join the pool even when they match nothing
TOP_DOCUMENTS = 300  # when more documents match, only the rows of the best ones are scored row by row
NAMED_FILES = 20  # documents whose names match the query best: their rows join the pool
NAMED_ROWS = 2000  # at most this many rows of each
IN_SCOPE_KEPT = 4096  # terms whose presence in one scope is kept per state of the index
native_pool = True  # the native pool_relevance, salience_scores and best_first_rows where built; False: their Python twins (tests)


class StaleAnswer(Exception):
    """A file changed between ranking and reading its rows back: rank again."""


class RowsDamaged(StaleAnswer):
    """A file's rows read back are not those the index holds, though its stamp did not move: the index is
    damaged (a flipped byte in its packed rows), which only reading the file tells."""


@dataclass
class Ranking:
    """Scores of the candidate rows of one query; every other row scores 0.

    Candidates are the rows the engine ranks best by the row part (at least
    `POOL_MIN`), with their section neighbours: the neighbour and document
    parts and the salience re-rank them.
    """

    ids: list[int]  # candidate row ids passing the filters, best first (ties by path, then line)
    scores: dict[int, float]
    relevance: Mapping[int, float]  # read-only: these three may be shared with the kept candidates
    paths: Mapping[int, str]  # row id -> path
    lines: Mapping[int, int]  # row id -> line
    searchable: int  # rows passing the filters (0: nothing to search)
    stale: set[int] = field(default_factory=set)  # lines of session notes a document has superseded
    current: set[int] = field(default_factory=set)  # rows under `## Superseded` that held at an `as_of` date
    unsearched: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes) of files too large to index

    @property
    def candidates(self) -> list[int]:
        return self.ids

    def best(self) -> float | None:
        """The top candidate's score, or None when no row passes the filters."""
        if self.ids:
            return self.scores[self.ids[0]]
        return 0.0 if self.searchable else None

    def top(self, limit: int, min_score: float) -> tuple[list[int], int]:
        """The first `limit` candidates scoring at least `min_score` (and above 0), and how many do: the ids are
        best first, so those are a head of them, found by bisection (not a test of each of 2,000 candidates)."""
        scores = self.scores
        count = bisect_left(self.ids, True, key=lambda rid: not (scores[rid] >= min_score and scores[rid] > 0))
        return self.ids[:count][:limit], count


def query_terms(analyzer: Analyzer, query: str) -> tuple[list[str], list[str]]:
    """(stemmed terms, surface words), each once, in query order."""
    words = list(dict.fromkeys(analyzer.words(query)))
    return list(dict.fromkeys(analyzer.stem(w) for w in words)), words


def first_terms(analyzer: Analyzer, query: str, limit: int = MAX_QUERY_TERMS) -> str:
    """`query` up to the word that brings its distinct terms to `limit` (recall's query is a whole turn)."""
    seen: set[str] = set()
    kept = []
    for token in query.split():
        new = {analyzer.stem(word) for word in analyzer.words(token)} - seen
        if len(seen) + len(new) > limit:
            break
        seen |= new
        kept.append(token)
    return " ".join(kept)


def _near_spellings(
    conn, missing: list[str], cutoff: float, kept: dict[Any, Any], present: Callable[[str], bool] | None = None
) -> dict[str, str]:
    """Unknown query terms mapped to the closest term the memory has (rapidfuzz ratio >= cutoff); within a
    scope, the closest term its files have (`present`)."""
    candidates = [t for t in missing if len(t) >= 4]
    if not candidates:
        return {}
    from rapidfuzz import fuzz, process

    vocabulary = kept.get("vocabulary")
    if vocabulary is None:
        vocabulary = kept["vocabulary"] = tuple(  # a tuple of strings: Python's collector stops walking it
            t for (t,) in conn.execute("SELECT term FROM search_terms WHERE length(term) >= 3")
        )
    found: dict[str, str] = {}
    for term in candidates:
        for choice, _score, _i in process.extract(term, vocabulary, scorer=fuzz.ratio, score_cutoff=cutoff, limit=5):
            if document_frequencies(conn, "search_vocab", [choice], kept).get(choice):  # the vocabulary only grows
                if present is not None and not present(choice):
                    continue
                found[term] = choice
                break
    return found


def _in_scope(conn, allowed: list[int], kept: dict[Any, Any]) -> Callable[[str], bool]:
    """Whether a term is in a row or in the names of one of the `allowed` files (a scope's); the answers kept
    per state of the tables and set of files, as a scope's agent asks about the same words again."""
    blocks, ids = json_array(stored_blocks(conn, allowed, kept)), json_array(allowed)
    known: dict[str, bool] = kept.setdefault(("terms in scope", ids), {})

    def present(term: str) -> bool:
        if term not in known:
            if len(known) >= IN_SCOPE_KEPT:
                known.clear()
            known[term] = _holds(term)
        return known[term]

    def _holds(term: str) -> bool:
        match = quoted(term)
        for sql, among in (
            (
                f"SELECT 1 FROM search_fts WHERE search_fts MATCH ? AND (rowid >> {BLOCK_BITS}) IN"
                " (SELECT value FROM json_each(?)) LIMIT 1",
                blocks,
            ),
            (
                "SELECT 1 FROM search_names WHERE search_names MATCH ? AND rowid IN (SELECT value FROM json_each(?)) LIMIT 1",
                ids,
            ),
        ):
            if conn.execute(sql, (match, among)).fetchone() is not None:
                return True
        return False

    return present


_FILTER_FIELDS = ("files' filter fields",)


def _allowed_files(conn, type, tag, updated_after, within=None, kept=None, held=None) -> tuple[list[int] | None, int]:
    """File ids passing the front-matter filters and `within` (an agent's scope), None when nothing filters,
    and how many rows they hold: what is out of scope is never scored, counted or shown.

    The files' filter fields are read and decoded once per state of the tables (`kept`), and the files a
    set of front-matter filters lets through are kept with the latest candidates (`held`): a type filter
    at 10k files decoded every file's row into a FileMeta at every search (docs/performance.md).
    """
    if type is None and not tag and updated_after is None and within is None:
        total = conn.execute("SELECT value FROM search_meta WHERE key = 'rows'").fetchone()
        return None, int(total[0]) if total else 0
    kept = {} if kept is None else kept
    wanted = None if not tag else [tag] if isinstance(tag, str) else list(tag)
    key = None
    if within is None and held is not None:
        key = ("allowed", type, tuple(wanted or ()), updated_after)
        found = held.recall(kept, key)
        if found is not None:
            return list(found[0]), found[1]
    files = kept.get(_FILTER_FIELDS)
    if files is None:
        files = kept[_FILTER_FIELDS] = [
            _filter_fields(*row) for row in conn.execute("SELECT id, path, type, tags, updated, rows FROM search_files")
        ]
    filtering = type is not None or wanted is not None or updated_after is not None
    allowed, rows = [], 0
    for fid, path, meta, count in files:
        if within is not None and not within(path):
            continue
        if filtering and not matches_filters(meta, type=type, tag=wanted, updated_after=updated_after):
            continue
        allowed.append(fid)
        rows += count
    if key is not None:
        held.remember(kept, key, (list(allowed), rows))
    return allowed, rows


def _filter_fields(fid: int, path: str, ftype: str | None, tags: str | None, updated, count: int):
    meta = FileMeta(path=path, size=0, mtime_ns=0, type=ftype, tags=json.loads(tags) if tags else [], updated=updated)
    return fid, path, meta, count


@Kept.carry(_FILTER_FIELDS)
def _carry_filter_fields(_key, files: list[Any], _old, _new, found: changes.Changes) -> list[Any]:
    """Every file's filter fields in id order (as SQL reads them), less the removed, with the added (whose ids
    are above every other)."""
    kept = [row for row in files if row[0] not in found.removed]
    return kept + [_filter_fields(fid, *found.files[fid][:5]) for fid in found.added]


def rank(
    index: SearchIndex,
    query: str,
    settings: SearchSettings,
    *,
    limit: int = 0,
    usage: dict[str, int] | None = None,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    now: _dt.datetime | None = None,
    within: Callable[[str], bool] | None = None,
) -> Ranking:
    """Filter by front matter, supersession and `within` (an agent's scope), then score the candidate rows."""
    now = now or fmt.parse_timestamp(fmt.now_iso())
    terms, _words = query_terms(index.analyzer, query)
    return index.reading(
        lambda conn: _rank(
            conn,
            terms,
            settings,
            max(POOL_MIN, 2 * limit),
            usage or {},
            type,
            tag,
            updated_after,
            include_superseded,
            now,
            index.root,
            within,
            index.kept,
            partner=lambda: index.partner(conn),
        )
    )


def _rank(
    conn,
    terms,
    settings,
    pool_size,
    usage,
    type,
    tag,
    after,
    superseded_too,
    now,
    root,
    within=None,
    held=None,
    partner: Callable[[], Any] | None = None,
) -> Ranking:
    meta = dict(conn.execute("SELECT key, value FROM search_meta").fetchall())
    kept = held.at(_state(meta), conn) if held is not None else {}
    key = None
    if within is None and held is not None:  # a scope's candidates are its own: never kept, never shared
        tags = (tag,) if isinstance(tag, str) or tag is None else tuple(tag)
        weights = (tuple(settings.weights.items()), settings.fuzzy_cutoff)
        key = ("candidates", tuple(terms), type, tags, after, superseded_too, pool_size, weights)
    unsearched = _too_large(conn, kept, within)
    found = held.recall(kept, key) if key is not None and held is not None else None
    if found is None:
        found = _candidates(
            conn, meta, kept, terms, settings, pool_size, type, tag, after, superseded_too, root, within, held, partner
        )
        if key is not None and held is not None:
            held.remember(kept, key, found)
    ranking = _salience(found, settings, usage, now)
    ranking.unsearched = unsearched
    return ranking


def _state(meta: dict[str, Any]) -> Any:
    """The state of the tables a `Kept` keeps things for (`built` tells a rebuilt index from the one before)."""
    return None if meta.get("changes") is None else (meta.get("built"), meta.get("changes"))


def warm(index: SearchIndex) -> int:
    """Make what every new question reads of the index's present state before the first one asks: the decoded
    documents, their ranking ids, the files too large to index (a first question made them in 300-400 ms of CPU
    at 100k files), every file's packed rows and salience (`_files_of`: a new question at 100k files decoded
    those of some 300 files it had not met, 1.5 ms of its CPU; every file's take 0.45 s and 76 MB, which a
    process reaches after a few hundred questions anyway) and the common words' counts (`count_common_words`);
    how many words were counted."""

    def made(conn) -> int:
        meta = dict(conn.execute("SELECT key, value FROM search_meta").fetchall())
        state = _state(meta)
        if state is None:
            return 0
        kept = index.kept.at(state, conn)
        if int(meta.get("docs") or 0):
            document_ranking_ids(conn, kept)  # and the decoded documents they are of
        _too_large(conn, kept, None)
        _files_of(conn, {fid for (fid,) in conn.execute("SELECT id FROM search_files")}, kept)
        return count_common_words(conn, kept)

    return index.reading(made)


_TOO_LARGE = ("files too large to index",)


def _too_large(conn, kept: dict[Any, Any], within: Callable[[str], bool] | None) -> list[tuple[str, int]]:
    """(path, bytes) of the indexed files over EXACT_COUNT_LIMIT, in `within`: they have no rows
    (`fsmem.search.parsing.read_file`), and an answer names them rather than skip them in silence.
    Read once per state of the tables; whatever the filters, since the index holds no front matter of them."""
    found = kept.get(_TOO_LARGE)
    if found is None:
        found = kept[_TOO_LARGE] = [
            (path, size)
            for path, size in conn.execute(
                "SELECT path, size FROM search_files WHERE size > ? ORDER BY path", (EXACT_COUNT_LIMIT,)
            )
        ]
    return [(path, size) for path, size in found if within is None or within(path)]


@Kept.carry(_TOO_LARGE)
def _carry_too_large(_key, files: list[tuple[str, int]], _old, _new, found: changes.Changes) -> list[tuple[str, int]]:
    kept = [(path, size) for path, size in files if path not in found.paths_removed]
    more = [(info[0], info[5]) for info in found.files.values() if info[5] > EXACT_COUNT_LIMIT]
    return sorted(kept + more) if more else kept  # by path, as SQL orders them (UTF-8's byte order)


@Kept.carry("named")
def _carry_named(_key, named: int, _old, _new, found: changes.Changes) -> int | None:
    return None if found.named is None else named + found.named


@dataclass
class _Candidates:
    """What a query's ranking owes to the index alone (not to the clock or the retrieval log): the pool of
    candidate rows, best first by the row part, each row's relevance, and the files' salience inputs."""

    pool: list[int]
    relevance: dict[int, float]
    paths: dict[int, str]
    lines: dict[int, int]
    salience: dict[int, tuple[float, _dt.datetime | None, int]]  # file id -> (importance, updated, mtime_ns)
    searchable: int
    stale: set[int]


def _candidates(
    conn,
    meta,
    kept,
    terms,
    settings,
    pool_size,
    type,
    tag,
    after,
    superseded_too,
    root,
    within,
    held=None,
    partner=None,
) -> _Candidates:
    """Steps 1 to 3 of the ranking and the relevance of each candidate (what `Kept` may keep per state)."""
    w = settings.weights
    allowed, searchable = _allowed_files(conn, type, tag, after, within, kept, held)
    empty = _Candidates([], {}, {}, {}, {}, searchable, set())
    if not terms or not searchable:
        return empty
    n_rows = int(meta.get("rows") or 0)
    df = document_frequencies(conn, "search_vocab", terms, kept)
    names_df = document_frequencies(conn, "search_names_vocab", terms, kept)
    # within a scope, a word only files outside it hold is a word the memory lacks: no part of the score,
    # not even what the query could earn, tells that it exists elsewhere
    present = _in_scope(conn, allowed or [], kept) if within is not None else None
    absent = {t for t in terms if (df.get(t) or names_df.get(t)) and not present(t)} if present else set()
    for term in absent:
        df.pop(term, None)
        names_df.pop(term, None)
    missing = [t for t in terms if not df.get(t) and not names_df.get(t)]
    fuzzy = _near_spellings(conn, missing, settings.fuzzy_cutoff, kept, present) if missing and w["fuzzy"] > 0 else {}
    substitutes = list(dict.fromkeys(fuzzy.values()))
    df.update(document_frequencies(conn, "search_vocab", substitutes, kept))
    names_df.update(document_frequencies(conn, "search_names_vocab", substitutes, kept))
    used = [t for t in dict.fromkeys(terms + substitutes) if df.get(t) or names_df.get(t)]
    if not used:
        return empty

    # What the query could earn: every word once, at average length. A near-spelling earns `fuzzy` of a word.
    def could_earn(n: int, frequencies: dict[str, int]) -> float:
        total = 0.0
        for term in terms:
            if term in fuzzy:
                total += fts5_idf(n, frequencies.get(fuzzy[term], 0)) / w["fuzzy"]
            else:
                total += fts5_idf(n, frequencies.get(term, 0))
        return total

    match = " OR ".join(quoted(t) for t in used)
    allowed_set = None if allowed is None else set(allowed)

    # 1. Documents (a file's rows citing one session note, or none): their part of the score, and which
    #    files are worth scoring row by row when very many match.
    group_total, documents = document_scores(
        conn, used, terms, fuzzy, w, int(meta.get("docs") or 0), could_earn, kept, absent=absent
    )
    scored_files = allowed
    if len(documents) > TOP_DOCUMENTS:
        top = {d >> ROW_BITS for d in best_documents(documents, TOP_DOCUMENTS)}
        scored_files = sorted(top if allowed_set is None else top & allowed_set)

    # 2. The rows whose text or headings match, best first (BM25F: the columns weigh a term's frequency).
    row_raw: dict[int, float] = {}
    by_file = _by_file(conn, kept, scored_files, used, df, n_rows)
    if by_file is not None:
        weights = (w["text"], w["headings"])
        row_raw = dict(
            rowscores.best_row_scores(conn, match, used, df, weights, by_file, superseded_too, pool_size, partner)
        )
    elif any(df.get(t) for t in used):
        where = ["search_fts MATCH ?"]
        args: list[Any] = [match]
        if scored_files is not None:
            where.append(f"(rowid >> {BLOCK_BITS}) IN (SELECT value FROM json_each(?))")
            args.append(json_array(stored_blocks(conn, scored_files, kept)))
        if not superseded_too:  # after the files' filter: it looks rows up one by one
            where.append("rowid NOT IN (SELECT id FROM search_superseded)")
        sql = (
            f"SELECT {rank_id_sql('rowid')}, -bm25(search_fts, {w['text']}, {w['headings']}) AS s FROM search_fts"
            f" WHERE {' AND '.join(where)} ORDER BY s DESC, rowid LIMIT ?"
        )
        weights = (w["text"], w["headings"])
        proved = None
        if len(documents) <= TOP_DOCUMENTS:  # every row holding a word is scored, not the best documents' files'
            proved = rowscores.best_holding_every_word(conn, sql, used, df, tuple(args[1:]), pool_size, weights, kept)
        found = proved if proved is not None else conn.execute(sql, (*args, pool_size)).fetchall()
        continued = continued_blocks(conn, kept)
        if continued:
            found = [(corrected(r, continued), s) if r >> ROW_BITS in continued else (r, s) for r, s in found]
        row_raw = dict(found)
    # 3. The documents whose names (title, entity or topic, aliases) match: their rows are about the query's subject.
    named: dict[int, float] = {}
    if w["subject"] > 0 and any(names_df.get(t) for t in used):
        n_named = kept.get("named")
        if n_named is None:
            n_named = kept["named"] = int(conn.execute("SELECT count(*) FROM search_names").fetchone()[0])
        best_named = [
            (fid, raw)
            for fid, raw in conn.execute(
                "SELECT rowid, -bm25(search_names) AS s FROM search_names WHERE search_names MATCH ?"
                " ORDER BY s DESC LIMIT ?",
                (match, NAMED_FILES),
            )
            if allowed_set is None or fid in allowed_set
        ]
        if n_named < FEW_NAMED:
            named = name_scores(conn, terms, fuzzy, names_df, n_named, w["fuzzy"], [fid for fid, _ in best_named])
        else:
            names_den = could_earn(n_named, names_df)
            named = {fid: raw / names_den for fid, raw in best_named}
    if not row_raw and not named:
        return empty
    seeds = list(row_raw)[:NEIGHBOUR_SEEDS]
    files = _files_of(conn, {rid >> ROW_BITS for rid in row_raw} | set(named), kept)
    stale = _stale_note_rows(root, files, [fid for fid, found in files.items() if found.consolidated])

    packed_of = {fid: found.rows for fid, found in files.items()}
    mask = MAX_ROWS - 1

    def packed(rid: int) -> int | None:
        """The row's line << 2 | flags, or None when there is no such row."""
        rows = packed_of.get(rid >> ROW_BITS)
        ordinal = rid & mask
        return rows[ordinal] if rows is not None and ordinal < len(rows) else None

    def visible(rid: int) -> bool:
        value = packed(rid)
        if value is None or (not superseded_too and (value & SUPERSEDED or rid in stale)):
            return False
        return allowed_set is None or (rid >> ROW_BITS) in allowed_set

    def linked(upper: int) -> bool:
        """Row `upper` and the next are in the same section and cite the same note."""
        value = packed(upper)
        return value is not None and bool(value & LINKED) and packed(upper + 1) is not None

    pool = [rid for rid in row_raw if rid >> ROW_BITS in files and (superseded_too or rid not in stale)]
    seen = set(pool)
    for rid in seeds:
        fid, ordinal = rid >> ROW_BITS, rid & mask
        rows = packed_of.get(fid)
        if rows is None or not 0 < ordinal < mask:  # no file, or a neighbour id in another file's range
            for other, upper in ((rid - 1, rid - 1), (rid + 1, rid)):
                if other not in seen and visible(other) and linked(upper):
                    seen.add(other)
                    pool.append(other)
            continue
        if allowed_set is not None and fid not in allowed_set:
            continue
        # `visible` and `linked` of both neighbours, inline: they are rows of this file (2 x 200 seeds a question)
        n = len(rows)
        below = rid - 1
        if ordinal < n and below not in seen:
            value = rows[ordinal - 1]
            if value & LINKED and (superseded_too or not (value & SUPERSEDED or below in stale)):
                seen.add(below)
                pool.append(below)
        above = rid + 1
        if ordinal + 1 < n and above not in seen and rows[ordinal] & LINKED:
            value = rows[ordinal + 1]
            if superseded_too or not (value & SUPERSEDED or above in stale):
                seen.add(above)
                pool.append(above)
    for fid in named:
        if allowed_set is not None and fid not in allowed_set:
            continue
        base, rows = fid << ROW_BITS, packed_of[fid]
        ordinals = range(min(len(rows), NAMED_ROWS))  # `visible`, for each row of one file (its ids are distinct)
        if superseded_too:
            fresh = [base + o for o in ordinals if base + o not in seen]
        else:
            fresh = [
                base + o
                for o in ordinals
                if not rows[o] & SUPERSEDED and base + o not in seen and base + o not in stale
            ]
        seen.update(fresh)
        pool += fresh

    # 4. Neighbours, documents (a row's cited session note, across files) and subject; salience comes after.
    row_den = could_earn(n_rows, df)
    w_row, w_neighbours, w_document, w_subject = w["row"], w["neighbours"], w["document"], w["subject"]
    parts = w_row + w_neighbours + w_document + w_subject
    # per file, what each of its rows looks up: (path, rows, cited, sources, subject part)
    of_file = {
        fid: (found.path, found.rows, found.cited, found.sources, w_subject * named.get(fid, 0.0))
        for fid, found in files.items()
    }
    relevance, paths, lines_of = pool_relevance(
        pool, of_file, row_raw, group_total, w_row, w_neighbours, w_document, row_den, parts
    )
    salience = {fid: found.salience for fid, found in files.items()}
    return _Candidates(pool, relevance, paths, lines_of, salience, searchable, stale)


def pool_relevance(
    pool: list[int],
    files: dict[int, tuple[str, Any, Any, tuple[str, ...], float]],
    raw: dict[int, float],
    groups: dict[Any, float],
    w_row: float,
    w_neighbours: float,
    w_document: float,
    row_den: float,
    parts: float,
) -> tuple[dict[int, float], dict[int, str], dict[int, int]]:
    """Each candidate row's relevance, path and line, by row id in `pool`'s order: its row part (`raw`), its
    section neighbours' (rows `LINKED` to it), its document's (`groups`: by the note its row cites, else by its
    file's own document) and its file's subject part (`files`: file id -> (path, packed rows, cited-note
    numbers or None, the notes cited, subject part)). The native module's `pool_relevance` (a new question's
    2,000 rows at 100k files: 0.7 ms of CPU, 1.6 ms here), or its twin in Python."""
    if _native is not None and native_pool:
        return _native.pool_relevance(
            pool, files, raw, groups, w_row, w_neighbours, w_document, row_den, parts, ROW_BITS, LINKED
        )
    mask = MAX_ROWS - 1
    relevance, paths, lines_of = {}, {}, {}
    document_of, row_part = groups.get, raw.get
    for rid in pool:
        path, rows, cited, sources, subject = files[rid >> ROW_BITS]
        ordinal = rid & mask
        value = rows[ordinal]
        neighbours = 0.0
        if ordinal and rows[ordinal - 1] & LINKED:
            neighbours += row_part(rid - 1, 0.0)
        if value & LINKED and ordinal + 1 < len(rows):
            neighbours += row_part(rid + 1, 0.0)
        score = (w_row * row_part(rid, 0.0) + w_neighbours * neighbours) / row_den
        if w_document:
            # the row's document: the session note it cites (a session's rows score as one), else its file's uncited rows
            number = cited[ordinal] if cited is not None else 0
            score += w_document * document_of(sources[number - 1] if number else (rid >> ROW_BITS) << ROW_BITS, 0.0)
        score += subject
        relevance[rid] = score / parts
        paths[rid] = path
        lines_of[rid] = value >> 2
    return relevance, paths, lines_of


def _by_file(conn, kept, scored_files, used, df, all_rows) -> dict[int, Any] | None:
    """The files whose rows the row part scores file by file (`fsmem.search.rowscores`), each with its packed
    rows, when that costs less than a bm25() query over every posting of the query's words; else None."""
    if scored_files is None or len(scored_files) > TOP_DOCUMENTS or not rowscores.usable(used):
        return None
    postings = sum(df.get(t, 0) for t in used)
    if not postings:
        return None
    files = _files_of(conn, set(scored_files), kept)
    if not rowscores.cheaper(postings, len(files), sum(len(found.rows) for found in files.values()), all_rows):
        return None
    return {fid: found.rows for fid, found in files.items() if len(found.rows)}


_FILES = ("files' packed rows",)


class _File(NamedTuple):
    """What ranking reads of one indexed file."""

    path: str
    rows: Any  # line << 2 | flags per row (`unpack_rows`)
    cited: Any  # each row's cited-note number (1-based in `sources`, 0: none), or None when no row cites one
    sources: tuple[str, ...]  # a tuple, which Python's collector stops walking, as it does the salience
    consolidated: bool  # a session note the consolidator has read: documents may supersede its facts
    # importance (0..1, 0.5 when absent), updated, mtime_ns (positive, where a racy row stores it negated)
    salience: tuple[float, _dt.datetime | None, int]


def _files_of(conn, wanted: set[int], kept: dict[Any, Any]) -> dict[int, _File]:
    """file id -> what ranking reads of it, in file id order (as SQL gives them), for the `wanted` files the
    index holds.

    Each file is read from search_files and decoded once per state of the tables (`kept`): a first
    question's pool spans some 300 files, most of which earlier questions read (docs/performance.md).
    """
    known = kept.setdefault(_FILES, {})
    missing = [fid for fid in wanted if fid not in known]
    if missing:
        for fid, path, n, lines, groups, sources, importance, updated, mtime, consolidated in conn.execute(
            "SELECT id, path, rows, lines, groups, sources, importance, updated, abs(mtime_ns), cited FROM search_files"
            " WHERE id IN (SELECT value FROM json_each(?))",
            (json_array(missing),),
        ):
            packed_rows, cited = unpack_rows(lines, groups, n)
            cited_notes = tuple(json.loads(sources)) if sources else ()
            if cited is not None and max(cited) > len(cited_notes):
                raise IndexDamaged("a row's cited note out of range")
            stamp = fmt.parse_timestamp(updated) if updated else None
            weight = 0.5 if importance is None else min(max(float(importance), 0.0), 1.0)
            known[fid] = _File(
                path,
                packed_rows,
                cited,
                cited_notes,
                bool(consolidated),
                (weight, stamp, mtime),
            )
    return {fid: known[fid] for fid in sorted(wanted) if fid in known}


@Kept.carry(_FILES)
def _carry_files(_key, known: dict[int, _File], _old, _new, found: changes.Changes) -> dict[int, _File]:
    """The files read before, less the removed (a file's row never changes: a new version is a new id)."""
    carried = dict(known)  # at once: a read at the earlier state may still be adding to `known`
    for fid in found.removed:
        carried.pop(fid, None)
    return carried


def best_documents(documents: dict[int, float], count: int) -> set[int]:
    """The `count` documents first by (score descending, id), as a set, without sorting them all.

    `documents` comes from SQL best first by raw score, and a score is the raw one over one positive number,
    so the order holds except where two raw scores round to one score: the documents scoring above the
    `count`-th are the ones before it, and those tied with it are taken by id. Any other order is sorted.
    """
    ranked = list(documents)
    if len(ranked) <= count:
        return set(ranked)
    scores = [documents[d] for d in ranked]
    if any(map(gt, scores[1:], scores)):  # a later score above the one before it
        return set(sorted(ranked, key=lambda d: (-documents[d], d))[:count])
    cut = scores[count - 1]
    above = 0
    while scores[above] > cut:
        above += 1
    tied = above
    while tied < len(ranked) and scores[tied] == cut:
        tied += 1
    return set(ranked[:above]) | set(sorted(ranked[above:tied])[: count - above])


def _salience(found: _Candidates, settings: SearchSettings, usage, now: _dt.datetime) -> Ranking:
    """The ranking of `found` at `now` with the retrieval log's `usage`: each relevance times its salience
    (importance, recency, usage). `found` may be kept and shared: the answer owns its scores, ids and row
    sets, and sees the relevance, paths and lines of `found` through read-only views."""
    w = settings.weights
    base = {fid: 1.0 + boost for fid, boost in _file_boosts(found.salience, settings, now).items()}
    top_use = usage.top if isinstance(usage, Usage) else max(usage.values(), default=0)
    w_usage = w["usage"]
    relevance, paths, lines_of = found.relevance, found.paths, found.lines
    if top_use and w_usage > 0 and not isinstance(usage, Usage):  # usage by "path:line" (a caller's own)
        most = math.log1p(top_use)
        scores = {}
        for rid in found.pool:
            factor = base[rid >> ROW_BITS]
            used = usage.get(f"{paths[rid]}:{lines_of[rid]}", 0)
            if used:
                factor += w_usage * math.log1p(used) / most
            scores[rid] = relevance[rid] * factor
    elif top_use and w_usage > 0:
        scores = salience_scores(
            found.pool, base, relevance, paths, lines_of, usage.by_path, w_usage, math.log1p(top_use)
        )
    else:
        scores = salience_scores(found.pool, base, relevance, paths, lines_of, None, 0.0, 1.0)
    ids = _best_first(found.pool, scores, paths, lines_of)
    return Ranking(
        ids,
        scores,
        MappingProxyType(relevance),  # read-only views, not copies: `found` is never changed once made
        MappingProxyType(paths),
        MappingProxyType(lines_of),
        found.searchable,
        set(found.stale),
    )


def salience_scores(
    pool: list[int],
    base: dict[int, float],
    relevance: dict[int, float],
    paths: dict[int, str],
    lines: dict[int, int],
    by_path: dict[str, dict[int, int]] | None,
    w_usage: float,
    most: float,
) -> dict[int, float]:
    """Each candidate's score in `pool`'s order: its relevance times its file's `base` (1 + importance and
    recency), plus `w_usage * log1p(used) / most` where the retrieval log returned the row `used` times
    (`by_path`: path -> line -> times; None: no usage). The native module's `salience_scores` (a new question's
    2,000-3,000 rows at 100k files: 1.0 ms of CPU here), or its twin in Python."""
    if _native is not None and native_pool:
        found = _native.salience_scores(pool, base, relevance, paths, lines, by_path, w_usage, most, ROW_BITS)
        if found is not None:  # None: a value of another type, for the twin to score or to raise
            return found
    scores = {}
    if by_path is None:
        for rid in pool:
            scores[rid] = relevance[rid] * base[rid >> ROW_BITS]
        return scores
    for rid in pool:
        factor = base[rid >> ROW_BITS]
        counts = by_path.get(paths[rid])
        used = counts.get(lines[rid], 0) if counts else 0
        if used:  # a row never returned adds w_usage * log1p(0) / most: 0.0
            factor += w_usage * math.log1p(used) / most
        scores[rid] = relevance[rid] * factor
    return scores


def _best_first(pool: list[int], scores: dict[int, float], paths: dict[int, str], lines: dict[int, int]) -> list[int]:
    """`pool` by (score descending, path, line), as a key of those three would sort it: the native module's
    `best_first_rows` (one sort in C), or its twin: three stable sorts, the last key first, each by a dict's own
    lookup (no key tuple per row; docs/performance.md)."""
    if _native is not None and native_pool:
        found = _native.best_first_rows(pool, scores, paths, lines)
        if found is not None:  # None: a score that is NaN, or a value of another type
            return found
    ids = sorted(pool, key=lines.__getitem__)
    ids.sort(key=paths.__getitem__)
    ids.sort(key=scores.__getitem__, reverse=True)  # reverse keeps equal scores in their order
    return ids


def _stale_note_rows(root, files: dict[int, _File], notes: list[int]) -> set[int]:
    """Row ids of keyed facts in consolidated session notes that a document has since superseded."""
    if not notes:
        return set()
    from fsmem.store.catalog import superseded_of
    from fsmem.store.note_status import superseded_note_lines

    texts = {}
    for fid in notes:
        try:
            with open(os.path.join(root, files[fid].path), "rb") as handle:
                texts[files[fid].path] = fmt.decode(handle.read())[0]
        except OSError:
            continue
    hidden = superseded_note_lines(
        root, texts, lambda docs: {d: superseded_of(Path(root, d)) for d in docs if os.path.isfile(Path(root, d))}
    )
    stale = set()
    for fid in notes:
        spans = hidden.get(files[fid].path)
        if spans:
            for ordinal, value in enumerate(files[fid].rows):
                if fmt.in_ranges(value >> 2, spans):
                    stale.add(fid << ROW_BITS | ordinal)
    return stale


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _file_boosts(
    files: dict[int, tuple[float, _dt.datetime | None, int]], settings: SearchSettings, now: _dt.datetime
) -> dict[int, float]:
    """Per file: weighted importance (0..1, 0.5 when absent) and recency of `updated` (else the mtime)."""
    w = settings.weights
    # each weight read once, not per file (a settings lookup each: 0.07 ms of 0.18 at a question's 280 files)
    importance, recency, half_life = w["importance"], w["recency"], settings.recency_half_life_days
    out = {}
    for fid, (value, stamp, mtime) in files.items():
        if stamp is None:
            stamp = _dt.datetime.fromtimestamp(mtime / 1e9, tz=_dt.UTC)
        age_days = max((now - stamp).total_seconds() / 86400.0, 0.0)
        out[fid] = importance * value + recency * 0.5 ** (age_days / half_life)
    return out
