"""The parts of a row's score that come from its document: its names (the subject part) and its text.

A row is found by what it says and by what it is about: `- employer: Globex`
answers "Where does Ada work?" because its document is named Ada Quill. The
helpers here are the scale both parts share with the row part in
`fsmem.search.scoring`: FTS5's IDF, and what a query could earn.
"""

from __future__ import annotations

import json
import math
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from fsmem.search import changes, postings
from fsmem.search.tables import _CONTINUED, BLOCK_BITS, continued_blocks, rank_ids

RECENT_KEPT = 32  # candidate pools of recent queries kept per state of the index (`Kept.remember`)
_RECENT = ("recent",)
DOCUMENT_POOL = 3000  # documents scored for the document part; deeper ones add nothing a candidate row can use
# A word in this many rows or more has its count taken when a long-lived process warms up (`count_common_words`):
# fts5vocab walks every posting of a word to count it, about 1 ms per 30,000 rows at 100k files
# (docs/performance.md, "Figures behind the search code"); a rarer word's count costs a question too little to show.
COMMON_ROWS = 10_000
native_scaled = True  # the native module's scaled_documents where it is built; False: its Python twin (tests)
FEW_NAMED = 20  # below this many named documents, BM25's IDF of a name is about 0 (a name in 1 of 2): see name_scores


def fts5_idf(n: int, df: int) -> float:
    """FTS5's own IDF, so a score and what the query could earn are on one scale."""
    return max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)


def quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def json_array(values: Iterable[Any]) -> str:
    return json.dumps(list(values))


class Kept:
    """What ranking reads of one state of the index and asks again at every query: document frequencies, the
    vocabulary near-spellings are looked for in, the number of named documents, and the candidates of the
    latest queries (most of a search's time is their SQL; a team's agents ask the same things).

    fts5vocab counts a term's documents by walking its postings (a part of a query's time that shows:
    docs/performance.md), and the same words come back query after query; the tables change only when a file
    is indexed or removed, which moves `changes` in search_meta. What was kept is then carried to the new
    state, patched by the changes the writers recorded (`fsmem.search.changes`): each kind by its `carrier`,
    which gives what a fresh process would read at the new state, or None to let it go (the candidates, and
    anything the changes do not say enough to patch exactly). An index made again (its database deleted, or
    damaged and rebuilt) draws a new `built`, so its counts starting again from 0 never meet what was kept of
    the one before.
    """

    # name -> carrier(key, value, old, new, changes): the value at the new state, or None; in the order they
    # were registered (a carrier may read what an earlier one put in `new`). A key is its name, or a tuple of
    # its name and what it is of (a term, a phrase).
    carriers: dict[Any, Callable[[Any, Any, dict[Any, Any], dict[Any, Any], changes.Changes], Any]] = {}

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: Any = None
        self._kept: dict[Any, Any] = {}

    @classmethod
    def carry(cls, name: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as the carrier of what is kept under `name`."""

        def register(carrier: Callable[..., Any]) -> Callable[..., Any]:
            cls.carriers[name] = carrier
            return carrier

        return register

    def at(self, state: Any, conn=None) -> dict[Any, Any]:
        """The things kept for the tables' `state` (None keeps nothing): for a later state of the same tables,
        what was kept carried across the changes (read on `conn`, in the caller's read transaction); for an
        earlier one (a read that began before a write), a dict of its own, the later state's kept in place."""
        if state is None:
            return {}
        with self._lock:
            if state != self._state:
                fresh: dict[Any, Any] = {}
                if self._state is not None and state[0] == self._state[0] and conn is not None:
                    before, after = int(self._state[1]), int(state[1])
                    if after < before:
                        return fresh
                    found = changes.since(conn, before, after)
                    if found is not None:
                        fresh = self._carried(self._kept, found)
                self._state, self._kept = state, fresh
            return self._kept

    def _carried(self, old: dict[Any, Any], found: changes.Changes) -> dict[Any, Any]:
        # a copy made at once (in C, the GIL held): reads at the earlier state may still be adding to `old`
        old = dict(old)
        by_name: dict[Any, list[Any]] = {}
        for key in old:
            by_name.setdefault(key[0] if type(key) is tuple and len(key) > 1 else key, []).append(key)
        new: dict[Any, Any] = {}
        for name, carrier in self.carriers.items():
            for key in by_name.get(name, ()):
                value = carrier(key, old[key], old, new, found)
                if value is not None:
                    new[key] = value
        return new

    def recall(self, kept: dict[Any, Any], key: Any) -> Any:
        """What `remember` kept under `key` in `kept` (a dict `at` gave), or None; the latest asked is kept longest."""
        with self._lock:
            lru = kept.get(_RECENT)
            if lru is None or key not in lru:
                return None
            lru.move_to_end(key)
            return lru[key]

    def remember(self, kept: dict[Any, Any], key: Any, value: Any) -> None:
        """Keep `value` under `key` in `kept` (a dict `at` gave), and at most `RECENT_KEPT` such values there:
        a query's candidates are some 100 KB, and a server asked many different questions must not grow."""
        with self._lock:
            lru = kept.setdefault(_RECENT, OrderedDict())
            lru[key] = value
            lru.move_to_end(key)
            while len(lru) > RECENT_KEPT:
                lru.popitem(last=False)


def document_frequencies(conn, table: str, terms: list[str], kept: dict[Any, Any] | None = None) -> dict[str, int]:
    """term -> the number of rows (documents) holding it, for the terms the table has; from `kept` when known."""
    return {term: doc for term, (doc, _hits) in _vocabulary(conn, table, terms, kept).items()}


def count_common_words(conn, kept: dict[Any, Any]) -> int:
    """Keep in `kept` the counts (rows, occurrences) of every word of the rows that at least `COMMON_ROWS` rows
    hold, from one walk of the row index's whole vocabulary, as `document_frequencies` would count each of them
    at a question's first use; how many. A long-lived process does this as it warms up: a new question's
    common word was the costliest part of its first count (at 100k files, `budget` is in 1.3 million rows),
    and what is kept is carried across writes."""
    common = 0
    for term, doc, hits in conn.execute("SELECT term, doc, cnt FROM search_vocab WHERE doc >= ?", (COMMON_ROWS,)):
        kept.setdefault(("search_vocab", term), (doc, hits))
        common += 1
    return common


def hit_counts(conn, table: str, terms: list[str], kept: dict[Any, Any] | None = None) -> dict[str, int]:
    """term -> how many times the table's rows hold it in all, for the terms the table has (fts5vocab's `cnt`,
    read in the same walk of its postings as its document frequency); from `kept` when known."""
    return {term: hits for term, (_doc, hits) in _vocabulary(conn, table, terms, kept).items()}


def _vocabulary(conn, table: str, terms: list[str], kept: dict[Any, Any] | None) -> dict[str, tuple[int, int]]:
    """term -> (rows holding it, its occurrences), for the terms the table has; from `kept` when known."""
    if not terms:
        return {}
    if kept is None:
        marks = ",".join("?" * len(terms))
        found = conn.execute(f"SELECT term, doc, cnt FROM {table} WHERE term IN ({marks})", terms)
        return {term: (doc, hits) for term, doc, hits in found}
    asked = [t for t in dict.fromkeys(terms) if (table, t) not in kept]
    if asked:
        found = _vocabulary(conn, table, asked, None)
        for term in asked:
            kept[(table, term)] = found.get(term, (0, 0))
    return {t: kept[(table, t)] for t in terms if kept[(table, t)][0]}


@Kept.carry(postings._DECODED)
def _carry_decoded(_key, decoded: postings._Decoded, _old, _new, found: changes.Changes) -> postings._Decoded:
    carried, found.ranges = decoded.carried(found.conn, found.removed, found.added)
    return carried


@Kept.carry(_CONTINUED)
def _carry_continued(_key, continued: dict[int, int], _old, _new, found: changes.Changes) -> dict[int, int]:
    """`continued_blocks` at the new state: the removed files' blocks out, the added long files' in."""
    longer = [(fid, rows) for fid, rows in found.removed.items() if rows >> BLOCK_BITS]
    longer += [(fid, found.files[fid][4]) for fid in found.added if found.files[fid][4] >> BLOCK_BITS]
    if not longer:
        return continued  # never changed once made: shared by the two states
    carried = dict(continued)
    for fid, rows in longer:
        for more in range(1, (rows >> BLOCK_BITS) + 1):
            if fid in found.removed:
                carried.pop(fid + more, None)
            else:
                carried[fid + more] = fid
    return carried


def _carry_counts(key, counts: tuple[int, int], _old, _new, found: changes.Changes) -> tuple[int, int] | None:
    """A term's (rows, occurrences) in search_vocab or search_names_vocab, moved by the changes' counts."""
    table, term = key
    deltas = found.rows if table == "search_vocab" else found.names
    if deltas is None:
        return None
    moved = deltas.get(term)
    if moved is None:
        return counts
    if table == "search_vocab":
        return counts[0] + moved[0], counts[1] + moved[2] + moved[4]
    return counts[0] + moved[0], counts[1] + moved[1]


Kept.carry("search_vocab")(_carry_counts)
Kept.carry("search_names_vocab")(_carry_counts)


def _name_idf(n: int, df: int) -> float:
    """Lucene's BM25 IDF, which stays positive: in a memory of two named documents a name in one of them must
    still count (FTS5's IDF, log((n - df + 0.5) / (df + 0.5)), is 0 there)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def name_scores(conn, terms, fuzzy, names_df, n_named: int, fuzzy_weight: float, fids: list[int]) -> dict[int, float]:
    """The subject part in a memory of few named documents: the share of what the query's words could earn
    that each document's names (title, entity or topic, aliases) hold, every word once, weighted by its IDF
    over the named documents; a near-spelling earns `fuzzy_weight` of a word. (With many named documents
    FTS5's BM25 over the names does this, with term frequency and length normalisation.)"""
    if not fids:
        return {}
    could = 0.0
    earned = dict.fromkeys(fids, 0.0)
    ids = json_array(fids)
    for term in terms:
        actual = fuzzy.get(term, term)
        idf = _name_idf(n_named, names_df.get(actual, 0))
        could += idf
        if not names_df.get(actual):
            continue
        share = idf * (fuzzy_weight if term in fuzzy else 1.0)
        for (fid,) in conn.execute(
            "SELECT rowid FROM search_names WHERE search_names MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
            (quoted(actual), ids),
        ):
            earned[fid] += share
    return {fid: value / could for fid, value in earned.items() if value > 0} if could > 0 else {}


_RANK_IDS, _SOURCES = ("documents' ranking ids",), ("documents' sources",)


def document_ranking_ids(conn, kept: dict[Any, Any] | None) -> array:
    """Ranking's id of each document of `postings.decoded(...).ids`, kept per state: its file's row n has it
    (an array, which Python's collector does not walk value by value)."""
    found = kept.get(_RANK_IDS) if kept is not None else None
    if found is None:
        found = array("q", rank_ids(postings.decoded(conn, kept).ids, continued_blocks(conn, kept)))
        if kept is not None:
            kept[_RANK_IDS] = found
    return found


@Kept.carry(_RANK_IDS)
def _carry_rank_ids(_key, ids: array, _old, new: dict[Any, Any], found: changes.Changes) -> array | None:
    """The ranking ids of the documents kept, and of the added files' (after the document index's carrier)."""
    decoded = new.get(postings._DECODED)
    if decoded is None or found.ranges is None:
        return None
    carried = array("q")
    for start, stop in found.ranges:
        carried += ids[start:stop]
    carried += array("q", rank_ids(decoded.ids[len(carried) :], continued_blocks(found.conn, new)))
    return carried


@Kept.carry(_SOURCES)
def _carry_sources(_key, known: dict[int, str | None], _old, _new, found: changes.Changes) -> dict[int, str | None]:
    """The cited notes of the documents asked before, less the removed files' (a document's id is never
    another's: ids only grow)."""
    carried = dict(known)
    for fid, rows in found.removed.items():
        for doc in range(fid << BLOCK_BITS, (fid << BLOCK_BITS) + rows + 1):
            carried.pop(doc, None)
    return carried


_CITING = ("documents citing a note: the least and greatest id",)


def _citing(conn, kept: dict[Any, Any] | None) -> tuple[int, int] | None:
    """The least and greatest id of the documents that cite a session note, or None when none does (a memory
    without session notes); read once per state, from the ends of search_sources' key."""
    found = kept.get(_CITING) if kept is not None else None
    if found is None:
        low, high = conn.execute("SELECT min(id), max(id) FROM search_sources").fetchone()
        found = (low, high) if low is not None else ()
        if kept is not None:
            kept[_CITING] = found
    return found or None


def _sources(conn, stored: list[int], kept: dict[Any, Any] | None, citing: tuple[int, int]) -> dict[int, str | None]:
    """The session note each of these documents cites (None: the file's uncited rows), those asked before in
    this state from `kept`: document n of a file is stored at the id of its cited note n (tables._insert).
    Only the ids within `citing` (`_citing`) are looked up."""
    known: dict[int, str | None] = kept.setdefault(_SOURCES, {}) if kept is not None else {}
    asked = [d for d in stored if d not in known]
    if asked:
        found = dict.fromkeys(asked)
        low, high = citing
        inside = [d for d in asked if low <= d <= high]
        if inside:
            found.update(
                conn.execute(
                    "SELECT id, source FROM search_sources WHERE id IN (SELECT value FROM json_each(?))",
                    (json_array(inside),),
                )
            )
        known.update(found)
    return known


def scaled(positions: list[int], scores: list[float], ids: array, denominator: float) -> dict[int, float]:
    """{ids[at]: score / denominator} for each position and its score, in their order: the native module's
    `scaled_documents` (a new question's 3,000 documents at 100k files: the dict in Python cost some 0.5-0.9 ms
    of CPU), or its twin in Python."""
    if postings._native is not None and native_scaled:
        return postings._native.scaled_documents(positions, scores, ids, denominator)
    return dict(zip([ids[at] for at in positions], [r / denominator for r in scores], strict=True))


def document_scores(
    conn,
    phrases,
    terms,
    fuzzy,
    w,
    n_docs,
    could_earn,
    kept: dict[Any, Any] | None = None,
    *,
    absent: set[str] | frozenset[str] = frozenset(),
) -> tuple[dict[Any, float], dict[int, float]]:
    """Normalised scores of the documents matching any of `phrases` (the query's terms, in its order): by key
    (a cited note, summed over the files citing it, so a session split across speaker files scores as one;
    else the document's id), and by document id, best first. `absent` terms count as the memory's lacking
    them (within a scope, the words only files outside it hold)."""
    if w["document"] <= 0 or not n_docs:
        return {}, {}
    df = postings.frequencies(conn, list(dict.fromkeys(terms + list(fuzzy.values()))), kept)
    if absent:
        df = {term: count for term, count in df.items() if term not in absent}
    denominator = could_earn(n_docs, df)
    best, raw = postings.bm25(conn, phrases, DOCUMENT_POOL, kept)
    stored, rank_ids = postings.decoded(conn, kept).ids, document_ranking_ids(conn, kept)
    by_doc = scaled(best, raw, rank_ids, denominator)
    citing = _citing(conn, kept)
    if citing is None:  # no document cites a note: each its own key (0.0 + its score is its score)
        return by_doc, by_doc  # both read only
    docs = [rank_ids[at] for at in best]
    sources = _sources(conn, [stored[at] for at in best], kept, citing)
    cited = [sources[stored[at]] for at in best]
    if not any(cited):
        return by_doc, by_doc
    by_key: dict[Any, float] = {}
    for doc, source in zip(docs, cited, strict=True):
        key = doc if source is None else source
        by_key[key] = by_key.get(key, 0.0) + by_doc[doc]
    return by_key, by_doc
