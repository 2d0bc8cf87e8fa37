"""The row part of the score for the rows of a few files: FTS5's `-bm25()` to the bit, without its cost per match.

When very many documents match, only the rows of the best ones' files are scored row by row
(`fsmem.search.scoring`). A `bm25()` query over them still walks every posting of every query word
in the whole table twice: once merging them (the files' filter is applied to each matching row),
once counting each word's rows for its IDF. At 100k files a common word is in millions of rows, so
the cost grew with the memory while the rows scored stayed a few thousand. Here FTS5 seeks to each
file's range of row ids instead (`rowid BETWEEN`), and an auxiliary function works out each matching
row's score as SQLite hands the row over, from each phrase's hits per column and the row's size
(keeping them for a second pass in Python cost as much again); the IDFs come from the document frequencies fsmem already keeps per state of the index
(fts5vocab's count, which is bm25()'s), and the arithmetic is bm25()'s own, operation for operation
(fts5_aux.c, `fts5Bm25Function`; a phrase's sum of weights, which depends only on its hits per
column, is made once per query for each pair of counts):

    aFreq[i] = w_text + ... + w_text + w_headings + ...   (one addition per hit, text first)
    score += idf[i] * ((aFreq[i] * (k1 + 1)) / (aFreq[i] + k1 * (1 - b + b * D / avgdl)))

with the phrases in the query's order. `cheaper` decides, from the postings the query's words hold
and the rows of the files, which of the two ways costs less.

When the rows scored are not narrowed to the best documents' files, `best_holding_every_word` first asks
bm25() for the best rows among those holding every word (a name is in the headings of every row of its
person's files, and of few others): a `MATCH` naming the same phrases in the same order scores each of its
rows as the OR does, and when its k-th score is above what any row lacking a word can score
(`lacking_one_bound`), its top k is the OR's.

This module is long because both ways to the row part's top k are held to bm25()'s arithmetic here, in one
place: the IDF and its floor, the rows' totals and the phrases' frequencies per column that the file-by-file
score, its pool and the every-word bound all use.
"""

from __future__ import annotations

import collections
import math
import struct
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from fsmem.search import changes, halves, raw_rows
from fsmem.search.documents import Kept, hit_counts, quoted
from fsmem.search.postings import BLOCK_BITS, MAX_TOKEN_BYTES, _native, best_first
from fsmem.search.tables import MAX_ROWS, ROW_BITS, SUPERSEDED

K1, B = 1.2, 0.75  # FTS5's bm25() constants
# What scoring file by file costs, in postings a bm25() query merges and counts in the same time (fitted at
# 100k files to the costs of a posting, a file's seek and a matching row's call: docs/performance.md):
# a bm25() query is cheaper at 10k files of common words, file by file at 100k. A matching row scored by the
# native module's function costs less than by the Python twin's (fitted at 10k and 100k files, 110 questions).
POSTINGS_PER_FILE = 140
POSTINGS_PER_MATCH = 65
POSTINGS_PER_NATIVE_MATCH = 10
# The share of the files' rows that match, estimated as this many times the share of all rows the query's
# postings are (the best documents' files hold more of the query's words than the memory at large).
MATCH_SHARE = 2.0
FUNCTION = "fsmem_row_hits"
# A bound computed in floats is raised by this share before a k-th score must pass it: bm25()'s rounding,
# some 1e-16 of a score, never closes it.
BOUND_MARGIN = 1e-9
native = True  # the native module's score function where it loads; False: the Python twin (tests)


class _Scores:
    """The auxiliary function of one connection: the score of each matching row of the query running,
    worked out as SQLite hands the row over (what it saw of a row is not kept for a second pass)."""

    def __init__(self) -> None:
        self.out: list[tuple[int, float]] = []
        self.df: list[int] = []
        self.weights = (1.0, 1.0)
        self.base = 0  # the file's row 0: its first FTS5 row id and its ranking row id differ by `base`
        self.idfs: list[float] | None = None
        self.rows = 0  # the table's rows, as bm25() counts them
        self.avgdl = 1.0
        self.freqs: dict[tuple[int, int], float] = {}

    def start(self, df: list[int], weights: tuple[float, float]) -> None:
        self.out, self.df, self.weights, self.idfs, self.freqs = [], df, weights, None, {}

    def _totals(self, api: Any) -> list[float]:
        """The IDFs and average row size, from the totals the first row's call sees (every row's are one)."""
        n_rows = self.rows = api.row_count
        self.avgdl = float(api.column_total_size(-1)) / float(n_rows)
        self.idfs = [_idf(n_rows, hit) for hit in self.df]
        return self.idfs

    def _freq(self, text: int, headings: int) -> float:
        """bm25()'s aFreq of a phrase with these hits per column: one addition per hit, text first."""
        key = (text, headings)
        found = self.freqs.get(key)
        if found is None:
            w_text, w_headings = self.weights
            found = 0.0
            for _ in range(text):
                found += w_text
            for _ in range(headings):
                found += w_headings
            self.freqs[key] = found
        return found

    def __call__(self, api: Any) -> None:
        idfs = self.idfs if self.idfs is not None else self._totals(api)
        norm = K1 * (1 - B + B * float(api.column_size(-1)) / self.avgdl)
        k, freqs, locations = K1 + 1.0, self.freqs, api.phrase_locations
        score = 0.0
        for phrase, idf in enumerate(idfs):
            text, headings = locations(phrase)
            if not text and not headings:
                continue  # adds 0.0, which changes no float
            key = (len(text), len(headings))
            freq = freqs.get(key)
            if freq is None:
                freq = self._freq(*key)
            score += idf * ((freq * k) / (freq + norm))
        self.out.append((self.base + api.rowid, score))


def _idf(n_rows: int, hit: int) -> float:
    """bm25()'s IDF of a phrase `hit` of `n_rows` rows hold (at least 1e-6)."""
    idf = math.log((n_rows - hit + 0.5) / (hit + 0.5))
    return 1e-6 if idf <= 0.0 else idf


_registered: weakref.WeakKeyDictionary[Any, _Scores] = weakref.WeakKeyDictionary()


def _scores_of(conn) -> _Scores:
    found = _registered.get(conn)
    if found is None:
        found = _registered[conn] = _Scores()
        conn.register_fts5_function(FUNCTION, found)
    return found


def cheaper(postings: int, files: int, rows: int, all_rows: int) -> bool:
    """Whether scoring `rows` rows of `files` files file by file costs less than a bm25() query merging
    `postings` postings (what the query's words hold among the memory's `all_rows` rows)."""
    matching = rows * min(1.0, MATCH_SHARE * postings / max(all_rows, 1))
    per_match = POSTINGS_PER_NATIVE_MATCH if native_built() else POSTINGS_PER_MATCH
    return files * POSTINGS_PER_FILE + matching * per_match < postings


def native_built() -> bool:
    """Whether the native module's score function scores the rows (where it loads: `native_loaded`)."""
    return native and getattr(_native, "row_score_entry", None) is not None


def usable(phrases: list[str]) -> bool:
    """Whether the query's words can be scored here: a word past FTS5's token limit is counted as FTS5 cuts
    it, which fts5vocab's frequency of the whole word does not show (bm25() then scores it)."""
    return all(len(p) * 4 <= MAX_TOKEN_BYTES for p in phrases)


def native_loaded(conn) -> bool:
    """Whether the connection has the native module's score function (`fsmem_row_score`), loading the module
    as a SQLite extension at the connection's first question; False where it was built without SQLite's
    extension header, or not built (`native_built`)."""
    if not native_built():
        return False
    found = _native_loaded.get(conn)
    if found is None:
        found = _native_loaded[conn] = raw_rows.entry_loaded(conn, _native.row_score_entry)
    return found


_native_loaded: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
NATIVE_FUNCTION = "fsmem_row_score"
SIZES = "search_fts_docsize"  # FTS5's table of each row's size per column (`sz`: a varint each), by row id


def _row_ranges(files: dict[int, Any]) -> Iterator[tuple[int, int, int]]:
    """Per file in id order: what turns its FTS5 row ids into ranking's, and its first and last FTS5 row id
    (the file's row n is stored as (id << BLOCK_BITS) + n: fsmem.search.tables)."""
    for fid in sorted(files):
        base = fid << BLOCK_BITS
        yield (fid << ROW_BITS) - base, base, base + len(files[fid]) - 1


def row_scores(
    conn, match: str, phrases: list[str], df: dict[str, int], weights: tuple[float, float], files: dict[int, Any]
) -> list[tuple[int, float]]:
    """(ranking's row id, -bm25()) of every row of `files` (file id -> its packed rows; superseded rows
    left out by the caller) that matches `match`, the OR of `phrases`, in row id order. `df` holds each
    phrase's rows (fts5vocab), the count bm25() makes for its IDF."""
    counts = [df.get(phrase, 0) for phrase in phrases]
    if native_loaded(conn):
        # each row's size joined from FTS5's table of them, where xColumnSize would run a statement per row; the
        # ranking's row id made in SQL, so that each row is the one tuple the cursor gives
        sql = (
            f"SELECT search_fts.rowid + ?, {NATIVE_FUNCTION}(search_fts, sizes.sz, ?, ?{', ?' * len(counts)})"
            f" FROM search_fts LEFT JOIN {SIZES} AS sizes ON sizes.id = search_fts.rowid"
            " WHERE search_fts MATCH ? AND search_fts.rowid BETWEEN ? AND ?"
        )
        found: list[tuple[int, float]] = []
        for moved, first, last in _row_ranges(files):
            found += conn.execute(sql, (moved, *weights, *counts, match, first, last))
        return found
    scores = _scores_of(conn)
    scores.start(counts, weights)
    try:
        for moved, first, last in _row_ranges(files):
            scores.base = moved
            conn.execute(
                f"SELECT {FUNCTION}(search_fts) FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ?",
                (match, first, last),
            ).fetchall()
        return scores.out
    finally:
        scores.start([], weights)


POOL_FUNCTION = "fsmem_row_pool"
OFFER_FUNCTION = "fsmem_row_offer"
META = "SELECT key, value FROM search_meta ORDER BY key"  # what tells one state of the index from another
# A question's files split between two connections from this many on: at 32 files the split took more wall time than
# one connection, at 64 a seventh less (replayed at 100k files: docs/performance.md).
SPLIT_FILES = 64
FILES_A_STATEMENT = 1000  # 5 parameters a file, within SQLite's 32,766
SHARES = 8  # the runs of files two connections share out


def best_row_scores(
    conn,
    match: str,
    phrases: list[str],
    df: dict[str, int],
    weights: tuple[float, float],
    files: dict[int, Any],
    superseded_too: bool,
    k: int,
    partner: Callable[[], Any] | None = None,
) -> list[tuple[int, float]]:
    """`best_rows(row_scores(...), files, k)`, the superseded rows of `files` left out unless `superseded_too`.

    Where the native module's functions are loaded, no row is handed to Python: `fsmem_row_offer` scores each
    matching row as `fsmem_row_score` does and keeps it in the connection's pool of the best `k` so far across
    the question's statements (by best_rows' order), dropping a row that ranks after the pool's worst, which no
    later row can bring back; `fsmem_row_pool` hands over the pool, best first. A date question's 25,000
    matching rows at 100k files cost some 15 ms more handed to Python than scored alone.

    `partner()` gives a second connection of this thread's own (or None): with `SPLIT_FILES` files or more,
    it takes runs of the files in turn with `conn`, in a helper thread (`fsmem.search.halves`), each connection
    keeping a pool of its own, and the two pools' best `k` are the one pool's. It takes runs only where its read
    transaction sees the very state `conn` sees (the same `search_meta`, whose count of changes every write
    moves); elsewhere `conn` takes them all."""
    if not native_loaded(conn):
        return best_rows(row_scores(conn, match, phrases, df, weights, files), None if superseded_too else files, k)
    ranges = list(_row_ranges(files))
    question = (match, phrases, df, weights, files, superseded_too, k)
    helper = partner() if partner is not None and len(ranges) >= SPLIT_FILES else None
    if helper is None or not native_loaded(helper):
        return _taken(conn, _runs(ranges, FILES_A_STATEMENT), *question)
    state = conn.execute(META).fetchall()
    # the files in id order, in SHARES runs (neighbours share FTS5's leaf pages): each connection takes the next
    # run left until none is, so that a helper slow to get a core leaves this thread waiting for one run at most
    left = _runs(ranges, min(-(-len(ranges) // SHARES), FILES_A_STATEMENT))

    def theirs() -> list[tuple[int, float]] | None:
        return halves.same_state(helper, META, state, lambda: _taken(helper, left, *question))

    mine, other = halves.in_two(lambda: _taken(conn, left, *question), theirs)
    return merged(mine, other or [], k)  # None: the helper took no run (busy, or it saw another state)


def merged(one: list[tuple[int, float]], other: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
    """The best `k` of two pools (each best first, of rows no other holds), in the one pool's order: a higher
    score first, then a lower row id."""
    return sorted(one + other, key=lambda row: (-row[1], row[0]))[:k]


def _runs(ranges: list[tuple[int, int, int]], size: int) -> collections.deque[list[tuple[int, int, int]]]:
    """The files' ranges (`_row_ranges`) in runs of `size`, each run one statement of `_taken`."""
    return collections.deque(ranges[at : at + size] for at in range(0, len(ranges), size))


def _taken(
    conn,
    left: collections.deque[list[tuple[int, int, int]]],
    match: str,
    phrases: list[str],
    df: dict[str, int],
    weights: tuple[float, float],
    files: dict[int, Any],
    superseded_too: bool,
    k: int,
) -> list[tuple[int, float]]:
    """The best `k` matching rows of the runs of files this connection takes from `left` (each at most
    `FILES_A_STATEMENT`) until none is left (another thread's connection may take some), best first, by the pool
    of `conn`.

    Each run is one statement that seeks every file in turn: the files' ranges and packed rows are the outer
    loop's rows (CROSS JOIN keeps them outside), so FTS5 seeks each file's range as a statement of its own did,
    and SQLite runs them all with the GIL released, where a statement per file took it back between files
    (2.3 µs of Python a file, and a hand-over of the GIL each time when two threads split)."""
    counts = [df.get(phrase, 0) for phrase in phrases]
    conn.execute(f"SELECT {POOL_FUNCTION}(?)", (k,)).fetchall()  # an empty pool of k
    while True:
        try:
            some = left.popleft()  # atomic: two threads never take one run
        except IndexError:
            break
        values: list[Any] = []
        for moved, first, last in some:
            rows = None if superseded_too else files[(first + moved) >> ROW_BITS]
            values += (None, 0) if rows is None else (rows.tobytes(), rows.itemsize)
            values += (moved, first, last)
        sql = (
            f"WITH f(packed, itemsize, moved, first, last) AS (VALUES {','.join(['(?,?,?,?,?)'] * len(some))})"
            f" SELECT 1 FROM f CROSS JOIN search_fts LEFT JOIN {SIZES} AS sizes ON sizes.id = search_fts.rowid"
            f" WHERE {OFFER_FUNCTION}(search_fts, f.packed, f.itemsize, ?, f.moved, f.first, sizes.sz, ?, ?"
            f"{', ?' * len(counts)}) AND search_fts MATCH ? AND search_fts.rowid BETWEEN f.first AND f.last"
        )
        conn.execute(sql, (*values, SUPERSEDED, *weights, *counts, match)).fetchall()
    (pool,) = conn.execute(f"SELECT {POOL_FUNCTION}(0)").fetchone()
    return list(struct.iter_unpack("=qd", pool))


def best_rows(found: list[tuple[int, float]], packed: dict[int, Any] | None, k: int) -> list[tuple[int, float]]:
    """The `k` best of `found` (`row_scores`' rows, in row id order), by score descending then row id, less the
    superseded rows of `packed` (file id -> its packed rows; None keeps every row): the native module's
    `best_rows` (a date question's 25,000 matching rows at 100k files took 14 ms in Python), or its twin here."""
    if _native is not None:
        return _native.best_rows(found, packed, SUPERSEDED, ROW_BITS, k)
    if packed is not None:
        found = [(r, s) for r, s in found if not packed[r >> ROW_BITS][r & (MAX_ROWS - 1)] & SUPERSEDED]
    found = sorted(found)  # ties by row id, as row_scores gives the rows
    return [found[at] for at in best_first([score for _rid, score in found], k)]


_TOTALS_KEPT = ("rows and their average size",)


def _row_totals(conn, phrase: str, kept: dict[Any, Any]) -> tuple[int, float] | None:
    """(rows, their average size in tokens) as bm25() sees them, from the scoring function's call on one row
    holding `phrase`; kept per state."""
    found = kept.get(_TOTALS_KEPT)
    if found is None:
        scores = _scores_of(conn)
        scores.start([], (1.0, 1.0))
        try:
            conn.execute(
                f"SELECT {FUNCTION}(search_fts) FROM search_fts WHERE search_fts MATCH ? LIMIT 1", (quoted(phrase),)
            ).fetchall()
            if scores.out:
                found = kept[_TOTALS_KEPT] = (scores.rows, scores.avgdl)
        finally:
            scores.start([], (1.0, 1.0))
    return found


def every_word(phrases: list[str], df: dict[str, int]) -> str | None:
    """A MATCH of the rows holding every one of `phrases` that some row holds, naming each phrase once and in
    the order of their OR (each phrase no row holds ORed beside a word that some row holds), so that bm25()
    scores each of its rows as the OR's query does; None for fewer than two such words."""
    units: list[list[str]] = []
    waiting: list[str] = []
    for phrase in phrases:
        if df.get(phrase):
            units.append([*waiting, phrase])
            waiting = []
        else:
            waiting.append(phrase)
    if len(units) < 2:
        return None
    units[-1] += waiting
    return " AND ".join(
        " OR ".join(map(quoted, unit)).join("()") if len(unit) > 1 else quoted(unit[0]) for unit in units
    )


def lacking_one_bound(
    phrases: list[str], df: dict[str, int], freqs: dict[str, float], totals: tuple[int, float]
) -> float:
    """More than bm25() gives any row that lacks one of the words some row holds: each word at its best (its
    weighted hits at most `freqs`' in a row of 1 token), all but the least of them summed. `totals`: the
    table's rows and their average size (`_row_totals`)."""
    n_rows, avgdl = totals
    norm = K1 * (1 - B + B * 1.0 / avgdl)
    best = []
    for phrase in phrases:
        hit = df.get(phrase, 0)
        if hit:
            freq = freqs[phrase]
            best.append(_idf(n_rows, hit) * (freq * (K1 + 1.0)) / (freq + norm))
    return (sum(best) - min(best)) * (1.0 + BOUND_MARGIN)


_COLUMNS = "search_vocab_columns"


def _column_hits(conn, phrases: list[str], kept: dict[Any, Any]) -> dict[str, dict[str, tuple[int, int]]]:
    """phrase -> column -> (rows holding it there, its occurrences there), kept per state; fts5vocab's
    per-column counts, from a table of this connection's own (nothing is added to the database)."""
    asked = [p for p in dict.fromkeys(phrases) if (_COLUMNS, p) not in kept]
    if asked:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_COLUMNS} USING fts5vocab(main, search_fts, 'col')")
        found: dict[str, dict[str, tuple[int, int]]] = {p: {} for p in asked}
        marks = ",".join("?" * len(asked))
        for term, column, doc, hits in conn.execute(
            f"SELECT term, col, doc, cnt FROM temp.{_COLUMNS} WHERE term IN ({marks})", asked
        ):
            found[term][column] = (doc, hits)
        for phrase in asked:
            kept[(_COLUMNS, phrase)] = found[phrase]
    return {p: kept[(_COLUMNS, p)] for p in phrases}


@Kept.carry(_COLUMNS)
def _carry_column_hits(key, columns, _old, _new, found: changes.Changes) -> dict[str, tuple[int, int]] | None:
    """A phrase's (rows, occurrences) per column, moved by the changes' counts."""
    if found.rows is None:
        return None
    moved = found.rows.get(key[1])
    if moved is None:
        return columns
    carried = dict(columns)
    for column, at in (("text", 1), ("context", 3)):
        doc, hits = carried.get(column, (0, 0))
        doc, hits = doc + moved[at], hits + moved[at + 1]
        if doc:
            carried[column] = (doc, hits)
        else:
            carried.pop(column, None)
    return carried


def _best_freqs(conn, phrases, df, weights, kept, by_column: bool) -> dict[str, float]:
    """Per word some row holds, at least bm25()'s weighted hits of it in any row: a row holds at most all its
    occurrences but one per other row holding it, in the heavier column, or (`by_column`) so per column."""
    if not by_column:
        occurrences = hit_counts(conn, "search_vocab", phrases, kept)
        return {p: max(weights) * (occurrences[p] - df[p] + 1) for p in phrases if df.get(p)}
    freqs = {}
    for phrase, columns in _column_hits(conn, [p for p in phrases if df.get(p)], kept).items():
        freqs[phrase] = 0.0
        for weight, column in zip(weights, ("text", "context"), strict=True):
            doc, hits = columns.get(column, (0, 0))
            if doc:
                freqs[phrase] += weight * (hits - doc + 1)
        if not freqs[phrase]:  # counts that do not agree with the row's: the word's own counts bound it
            freqs[phrase] = _best_freqs(conn, [phrase], df, weights, kept, False)[phrase]
    return freqs


def best_holding_every_word(
    conn, sql: str, phrases: list[str], df: dict[str, int], args: tuple, k: int, weights, kept: dict[Any, Any]
) -> list[tuple[int, float]] | None:
    """The k best rows of `sql` (a bm25() query ordered by score and row id, its MATCH and LIMIT the first and
    last of its arguments, `args` between them) for the OR of `phrases`, from the rows holding every word,
    when what they score proves that no other row is among them; else None (the OR's query answers).

    The bound is first taken from each word's counts, which fsmem reads anyway; a k-th score under it is
    tried again against the counts per column (another walk of the words' postings), where a name in
    headings alone is held to the headings' weight, unless even the least such counts could not prove it."""
    match = every_word(phrases, df)
    if match is None or min(weights) < 0:
        return None
    found = conn.execute(sql, (match, *args, k)).fetchall()
    if len(found) < k:
        return None
    totals = _row_totals(conn, next(p for p in phrases if df.get(p)), kept)
    if totals is None or not totals[0]:
        return None
    kth = found[-1][1]
    if kth > lacking_one_bound(phrases, df, _best_freqs(conn, phrases, df, weights, kept, False), totals):
        return found
    least = {p: min(weights) for p in phrases if df.get(p)}  # what the counts per column give at the least
    if kth <= lacking_one_bound(phrases, df, least, totals):
        return None  # no count per column can prove it: spare their walk
    if kth > lacking_one_bound(phrases, df, _best_freqs(conn, phrases, df, weights, kept, True), totals):
        return found
    return None
