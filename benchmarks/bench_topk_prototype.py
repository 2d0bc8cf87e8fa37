"""A prototype, not fsmem code: the row part's top k from fsmem's own row postings, against FTS5's bm25() over every match.

What it measures (issue 34, "ranking that does not touch every match"): whether fsmem could keep its own
row-level postings in `.fsmem/cache.sqlite` (updated in the transaction of the file stamps) and rank the
row part in stdlib Python, exact to the bit, faster than FTS5 scores every matching row. This module is
long because it is the whole prototype (its tables, their build and update, the ranking) beside its benchmark.

The observation it rests on: FTS5's `bm25()` of a row depends only on the row's size D (its tokens, both
columns) and each query word's hits per column (`fsmem.search.rowscores`: the arithmetic of
`fts5Bm25Function`). So each word's postings are kept in buckets, one per (D, hits in the text, hits in
the headings), each bucket a sorted list of row ids in chunks of `CHUNK` (delta-encoded `array` blobs).
A bucket is a block whose maximum is its exact contribution: at query time every bucket's contribution
is worked out with bm25()'s arithmetic (the IDF from the exact frequencies kept beside, the average size
from the kept totals), and every class of rows (a D and, per word, a bucket or its absence) is scored
in the query's order, operation for operation as FTS5 adds them. The classes are taken best first; a
class's rows are the intersection of its buckets' row ids less the rows of its absent words' buckets
of the same D (set operations, in C); the classes stop once `k` rows are found and the next class
scores less than the k-th (ties by row id, as `ORDER BY s DESC, rowid`). Safe pruning: nothing of a
class below the k-th score is read. MaxScore's split: a word whose best contribution is under a tenth
of the best word's (a word in most rows, at bm25()'s IDF floor of 1e-6) is not enumerated; the other
words' classes carry bounds (their sum, and it plus the minor words' best), are read best bound first
until the k-th lower bound passes the next upper bound, and the rows they leave in are scored exactly
from a table of each row's words (`topk_rows`, per block of 64 row ids), in the query's order. Where
the minor words alone could reach the cut, every word is read as a major one.

A file's update (one transaction): its blocks get a tombstone (their ids are skipped until a merge,
which the prototype does not do, rewrites their chunks), the frequencies and totals lose its rows
(from `topk_files`), and its new rows are added as one small chunk per bucket they fall in.

Run on a copy of a built memory's cache (the script adds its tables to the copy it is given):

    cp /path/to/memory/.fsmem/cache.sqlite /tmp/c.sqlite
    .venv/bin/python benchmarks/bench_topk_prototype.py --db /tmp/c.sqlite --root /path/to/memory --queries 60

It builds the buckets from FTS5's fts5vocab (instance mode), then for each of `--queries` distinct
questions (`common.NewQuestions`, as bench_search_unique.py draws them) checks the prototype's top `--k`
against `SELECT rowid, -bm25(search_fts, 1.0, 0.5) ... ORDER BY s DESC, rowid LIMIT k` (the same ids,
the same floats, in the same order) and times, alternating which goes first: the prototype (cold: no
bucket kept from one question to the next), the exhaustive weighted query, and the bare FTS5 query of
bench_search_unique.py (OR, bm25, 20 rows). Wall and CPU times, the load average, the tables' size
against the cache's, and the time to update one file's postings (remove its rows, add them back as a
new file, one transaction) with the exactness checked again after. Without --db it builds the seeded
corpus of --sizes (as `make bench` runs it) and works on a copy of its cache.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import zlib
from array import array
from bisect import bisect_left
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from itertools import accumulate, product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

K1, B = 1.2, 0.75  # FTS5's bm25() constants
WEIGHTS = (1.0, 0.5)  # fsmem's default text and headings weights
CHUNK = 1024  # row ids per stored chunk of a bucket (at most 2 bytes an id at 100k files: a chunk stays on its page)
MINOR = 0.1  # a word whose best contribution is under this share of the best word's is read as minor
EPS = 1e-9  # the bounds' margin: far above the few ulps by which a sum in another order can differ
HITS = 8  # hits key = text hits | headings hits << HITS

SCHEMA = """
DROP TABLE IF EXISTS topk_terms; DROP TABLE IF EXISTS topk_dir; DROP TABLE IF EXISTS topk_chunks;
DROP TABLE IF EXISTS topk_files; DROP TABLE IF EXISTS topk_meta; DROP TABLE IF EXISTS topk_removed;
-- per term its id and exact document frequency (rows holding it), moved by every file written or removed
CREATE TABLE topk_terms (term TEXT PRIMARY KEY, id INTEGER NOT NULL, df INTEGER NOT NULL) WITHOUT ROWID;
-- per term the buckets it has: (row size D, hits = text hits | headings hits << 8) and the ids ever added
CREATE TABLE topk_dir (term INTEGER, len INTEGER, hits INTEGER, n INTEGER NOT NULL,
    PRIMARY KEY (term, len, hits)) WITHOUT ROWID;
-- a bucket's row ids in chunks (a rowid table: a chunk's blob stays on its page, where a WITHOUT ROWID
-- table spills anything over some 1,000 bytes to a 4 KB overflow page)
CREATE TABLE topk_chunks (id INTEGER PRIMARY KEY, term INTEGER, len INTEGER, hits INTEGER, last INTEGER,
    first INTEGER NOT NULL, ids BLOB NOT NULL);
CREATE UNIQUE INDEX topk_chunks_key ON topk_chunks (term, len, hits, last);
-- per file (its first block of 64 row ids): its rows, tokens and each term's rows (what its removal takes
-- from the frequencies; FTS5's table is contentless, so the file's old words are known only from here)
CREATE TABLE topk_files (block INTEGER PRIMARY KEY, rows INTEGER, tokens INTEGER, terms BLOB NOT NULL);
-- blocks of files removed: their ids are skipped until a merge rewrites the chunks that hold them
CREATE TABLE topk_removed (block INTEGER PRIMARY KEY);
CREATE TABLE topk_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""


def encode(ids: list[int]) -> tuple[int, bytes]:
    """(first id, the deltas after it) in the narrowest array that holds them."""
    deltas = [b - a for a, b in zip(ids, ids[1:], strict=False)]
    top = max(deltas, default=0)
    code = "B" if top < 256 else "H" if top < 65536 else "I"
    return ids[0], array(code, deltas).tobytes()


def ids_of(first: int, blob: bytes) -> Iterator[int]:
    """The ids of a chunk: the item size is told by the blob's length and the count kept in it."""
    count = blob[0] | blob[1] << 8 | blob[2] << 16
    body = blob[3:]
    size = len(body) // count if count else 1
    return accumulate(array({1: "B", 2: "H", 4: "I"}[size], body), initial=first)


def decode(first: int, blob: bytes) -> list[int]:
    return list(ids_of(first, blob))


def pack(first: int, ids: list[int]) -> tuple[int, bytes]:
    first, body = encode(ids)
    n = len(ids) - 1
    return first, bytes((n & 255, n >> 8 & 255, n >> 16 & 255)) + body


def freq_of(text: int, headings: int) -> float:
    """bm25()'s aFreq: one addition per hit, text first."""
    found = 0.0
    for _ in range(text):
        found += WEIGHTS[0]
    for _ in range(headings):
        found += WEIGHTS[1]
    return found


def build(conn) -> dict[str, float]:
    """The buckets from FTS5's own postings (fts5vocab, instance mode): one pass, then written in one go."""
    started, cpu = time.perf_counter(), time.process_time()
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.topk_inst USING fts5vocab(main, search_fts, instance)")
    terms: dict[str, int] = {}
    postings: list[tuple[array, array]] = []  # per term id: row ids, hits
    sizes: dict[int, int] = defaultdict(int)
    term = None
    ids = hits = None
    last_doc = -1
    text = heads = 0
    for t, doc, col, _off in conn.execute("SELECT term, doc, col, offset FROM temp.topk_inst"):
        if t != term or doc != last_doc:
            if ids is not None and last_doc >= 0:
                ids.append(last_doc)
                hits.append(text | heads << HITS)
                sizes[last_doc] += text + heads
            if t != term:
                term = t
                terms[t] = len(postings)
                ids, hits = array("Q"), array("I")
                postings.append((ids, hits))
            last_doc, text, heads = doc, 0, 0
        if col == "text":
            text += 1
        else:
            heads += 1
    if ids is not None and last_doc >= 0:
        ids.append(last_doc)
        hits.append(text | heads << HITS)
        sizes[last_doc] += text + heads
    read = time.perf_counter() - started
    conn.execute(SCHEMA)
    with conn:
        chunk_rows, dir_rows = [], []
        terms_of: dict[int, array] = defaultdict(lambda: array("I"))
        for tid in terms.values():
            ids, hits = postings[tid]
            buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
            blk, count = -1, 0
            for rid, h in zip(ids, hits, strict=True):
                buckets[sizes[rid], h].append(rid)
                if rid >> 6 != blk:
                    if count:
                        terms_of[blk].extend((tid, count))
                    blk, count = rid >> 6, 0
                count += 1
            if count:
                terms_of[blk].extend((tid, count))
            for (d, h), rids in buckets.items():
                dir_rows.append((tid, d, h, len(rids)))
                for at in range(0, len(rids), CHUNK):
                    part = rids[at : at + CHUNK]
                    first, blob = pack(part[0], part)
                    chunk_rows.append((None, tid, d, h, part[-1], first, blob))
        conn.executemany(
            "INSERT INTO topk_terms VALUES (?, ?, ?)", [(t, i, len(postings[i][0])) for t, i in terms.items()]
        )
        conn.executemany("INSERT INTO topk_dir VALUES (?, ?, ?, ?)", dir_rows)
        conn.executemany("INSERT INTO topk_chunks VALUES (?, ?, ?, ?, ?, ?, ?)", chunk_rows)
        row_counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for rid, d in sizes.items():
            got = row_counts[rid >> 6]
            got[0] += 1
            got[1] += d
        conn.executemany(
            "INSERT INTO topk_files VALUES (?, ?, ?, ?)",
            [(blk, *row_counts[blk], zlib.compress(t.tobytes())) for blk, t in terms_of.items()],
        )
        conn.executemany("INSERT INTO topk_meta VALUES (?, ?)", [("rows", len(sizes)), ("tokens", sum(sizes.values()))])
    return {"read s": read, "wall s": time.perf_counter() - started, "cpu s": time.process_time() - cpu}


class Prototype:
    """The top k rows of an OR of terms, exact, from the buckets."""

    def __init__(self, conn, keep: int = 0) -> None:
        self.conn = conn
        # decoded buckets kept from one question to the next, up to `keep` ids in all (0: none; what fsmem
        # keeps per state of the index, as it keeps the document postings it decoded)
        self.keep = keep
        self.kept: OrderedDict[tuple[int, int, int], set[int]] = OrderedDict()
        self.kept_ids = 0

    def top(self, terms: list[str], k: int, split: bool = True) -> list[tuple[int, float]]:
        conn = self.conn
        meta = dict(conn.execute("SELECT key, value FROM topk_meta"))
        n_rows, tokens = meta["rows"], meta["tokens"]
        avgdl = float(tokens) / float(n_rows)
        found = []
        for t in terms:
            row = conn.execute("SELECT id, df FROM topk_terms WHERE term = ?", (t,)).fetchone()
            if row and row[1]:
                found.append(row)
        if not found:
            return []
        idfs = []
        for _tid, df in found:
            idf = math.log((n_rows - df + 0.5) / (df + 0.5))
            idfs.append(1e-6 if idf <= 0.0 else idf)
        # per term, per D: its buckets' hits keys
        by_len: dict[int, list[list[int]]] = defaultdict(lambda: [[] for _ in found])
        for i, (tid, _df) in enumerate(found):
            for d, h in conn.execute("SELECT len, hits FROM topk_dir WHERE term = ? AND n > 0", (tid,)):
                by_len[d][i].append(h)
        k1 = K1 + 1.0
        freqs: dict[int, float] = {}
        options_at: dict[int, list[list[tuple[int, int, float]]]] = {}
        best = [0.0] * len(found)
        for d, keys in by_len.items():
            norm = K1 * (1 - B + B * float(d) / avgdl)
            options = []
            for i, hs in enumerate(keys):
                opts = [(-1, 0, 0.0)]
                for h in hs:
                    f = freqs.get(h)
                    if f is None:
                        f = freqs[h] = freq_of(h & 255, h >> HITS)
                    part = idfs[i] * ((f * k1) / (f + norm))
                    opts.append((h, (h & 255) + (h >> HITS), part))
                    best[i] = max(best[i], part)
                options.append(opts)
            options_at[d] = options
        # MaxScore's split: words that add at most a tenth of the best word (a word in most rows: its IDF is
        # bm25()'s floor, 1e-6) only tell apart rows the others rank; the others' buckets pick the rows
        minor = {i for i in range(len(found)) if best[i] < MINOR * max(best)} if split else set()
        major = [i for i in range(len(found)) if i not in minor]
        classes = []  # (upper bound, lower bound, D, hits key per major word or -1)
        for d, options in options_at.items():
            extra = sum(max(p for _h, _n, p in options[i]) for i in minor)
            for combo in product(*(options[i] for i in major)):
                score, used, present = 0.0, 0, False
                for h, n_hits, part in combo:
                    if h >= 0:
                        score += part
                        used += n_hits
                        present = True
                if present and used <= d:
                    keys = tuple(h for h, _n, _p in combo)
                    if minor:  # the exact score adds the minor words in the query's order: bounds, not the float
                        classes.append(((score + extra) * (1 + EPS), score * (1 - EPS), d, keys))
                    else:
                        classes.append((score, score, d, keys))
        classes.sort(key=lambda c: -c[0])
        sets: dict[tuple[int, int, int], set[int]] = {}
        kept = self.kept

        def bucket(i: int, d: int, h: int) -> set[int]:
            key = (i, d, h)
            got = sets.get(key)
            if got is None:
                whole = (found[i][0], d, h)
                got = kept.get(whole)
                if got is None:
                    got = set()
                    for first, blob in conn.execute(
                        "SELECT first, ids FROM topk_chunks WHERE term = ? AND len = ? AND hits = ?", whole
                    ):
                        got.update(ids_of(first, blob))
                    if self.keep:
                        kept[whole] = got
                        self.kept_ids += len(got)
                        while self.kept_ids > self.keep:
                            self.kept_ids -= len(kept.popitem(last=False)[1])
                else:
                    kept.move_to_end(whole)
                sets[key] = got
            return got

        removed = {b for (b,) in conn.execute("SELECT block FROM topk_removed")}
        taken: list[tuple[float, float, set[int]]] = []  # (upper, lower, rows) of each class read
        cut = None  # the k-th best lower bound of the rows read
        for upper, lower, d, hs in classes:
            if cut is not None and upper < cut:
                break
            parts = sorted((bucket(major[j], d, h) for j, h in enumerate(hs) if h >= 0), key=len)
            rows = parts[0].intersection(*parts[1:]) if len(parts) > 1 else set(parts[0])
            if rows:
                for j, h in enumerate(hs):
                    if h < 0:
                        for other in by_len[d][major[j]]:
                            rows -= bucket(major[j], d, other)
                            if not rows:
                                break
                    if not rows:
                        break
            if rows and removed:
                rows = {r for r in rows if r >> 6 not in removed}
            if rows:
                taken.append((upper, lower, rows))
                if sum(len(r) for _u, _l, r in taken) >= k:
                    count = 0
                    for _u, low, r in sorted(taken, key=lambda t: -t[1]):
                        count += len(r)
                        if count >= k:
                            cut = low
                            break
        if not minor:
            out = [(rid, upper) for upper, _l, rows in taken for rid in rows]
            out.sort(key=lambda r: (-r[1], r[0]))
            return out[:k]
        # a row of minor words only scores at most their sum: below the cut, or every word is read as major
        if cut is None or sum(best[i] for i in minor) * (1 + EPS) >= cut:
            return self.top(terms, k, split=False)
        wanted = sorted(rid for upper, _l, rows in taken if upper >= cut for rid in rows)
        tids = [tid for tid, _df in found]
        out = []
        block, data = -1, array("Q")
        for rid in wanted:  # the exact score of each candidate, from its row's words (the rows' own table)
            if rid >> 6 != block:
                block = rid >> 6
                data = array(
                    "Q",
                    zlib.decompress(conn.execute("SELECT data FROM topk_rows WHERE block = ?", (block,)).fetchone()[0]),
                )
            row = row_words(data, rid)
            d = 0
            for h in row.values():
                d += (h & 255) + (h >> HITS)
            norm = K1 * (1 - B + B * float(d) / avgdl)
            score = 0.0
            for i, tid in enumerate(tids):
                h = row.get(tid)
                if h:
                    f = freqs.get(h)
                    if f is None:
                        f = freqs[h] = freq_of(h & 255, h >> HITS)
                    score += idfs[i] * ((f * k1) / (f + norm))
            out.append((rid, score))
        out.sort(key=lambda r: (-r[1], r[0]))
        return out[:k]


def build_rows(conn) -> float:
    """The rows' own table: per block of 64 row ids, each posting of its rows as one sorted 64-bit value,
    row id << 32 | term id << 16 | hits (term ids under 65,536 in the prototype), compressed; read back from
    the buckets. A candidate's exact score is read from it, and a file's removal takes its words'
    frequencies from it."""
    started = time.perf_counter()
    conn.execute("DROP TABLE IF EXISTS topk_rows")
    conn.execute("CREATE TABLE topk_rows (block INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    values = array("Q")
    for tid, _d, h, first, blob in conn.execute("SELECT term, len, hits, first, ids FROM topk_chunks"):
        key = tid << 16 | h
        values.extend([rid << 32 | key for rid in ids_of(first, blob)])
    ordered = sorted(values)
    del values
    with conn:
        at = 0
        while at < len(ordered):
            block = ordered[at] >> 38
            end = bisect_left(ordered, (block + 1) << 38, at)
            conn.execute(
                "INSERT INTO topk_rows VALUES (?, ?)", (block, zlib.compress(array("Q", ordered[at:end]).tobytes(), 1))
            )
            at = end
    return time.perf_counter() - started


def row_words(data: array, rid: int) -> dict[int, int]:
    """term id -> hits of row `rid`, from its block's values."""
    lo = bisect_left(data, rid << 32)
    hi = bisect_left(data, (rid + 1) << 32, lo)
    return {v >> 16 & 0xFFFF: v & 0xFFFF for v in data[lo:hi]}


def reference(conn, match: str, k: int) -> list[tuple[int, float]]:
    return conn.execute(
        f"SELECT rowid, -bm25(search_fts, {WEIGHTS[0]}, {WEIGHTS[1]}) AS s FROM search_fts WHERE search_fts MATCH ?"
        " ORDER BY s DESC, rowid LIMIT ?",
        (match, k),
    ).fetchall()


def bare(conn, match: str) -> list:
    return conn.execute(
        "SELECT rowid, bm25(search_fts) AS s FROM search_fts WHERE search_fts MATCH ? ORDER BY s LIMIT 20", (match,)
    ).fetchall()


def rows_of_block(conn, block: int) -> dict[int, list[tuple[int, int]]]:
    """ordinal -> [(term id, hits)] of the rows of one block, read back from the buckets: what parsing the
    edited file gives fsmem (not timed; the prototype re-adds the rows it removes)."""
    lo, hi = block << 6, (block << 6) + 63
    rows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for tid, d, h in conn.execute("SELECT term, len, hits FROM topk_dir").fetchall():
        for first, blob in conn.execute(
            "SELECT first, ids FROM topk_chunks WHERE term = ? AND len = ? AND hits = ? AND last >= ?"
            " ORDER BY last LIMIT 2",
            (tid, d, h, lo),
        ).fetchall():
            if first > hi:
                break
            for r in decode(first, blob):
                if lo <= r <= hi:
                    rows[r - lo].append((tid, h))
    return rows


def update_one(conn, block: int, rows_of: dict[int, list[tuple[int, int]]]) -> tuple[float, float, int]:
    """An edit of the file whose rows are block `block`'s: it is removed (a tombstone, the frequencies and
    totals less its rows) and its rows `rows_of` added as a new file (the next free block: one new chunk per
    bucket they fall in, the frequencies and totals plus), in one transaction, as fsmem writes a file's stamp
    and FTS5 rows. FTS5 gets the same rows in the same transaction (not timed: fsmem pays that today; its
    table is contentless, and a row made of its words as many times as their hits is all bm25() sees).
    Returns (wall s, cpu s, rows) of the buckets' part."""
    names = dict(conn.execute("SELECT id, term FROM topk_terms"))
    lo, hi = block << 6, (block << 6) + 63
    started, cpu = time.perf_counter(), time.process_time()
    with conn:
        new_block = conn.execute("SELECT max(block) FROM topk_files").fetchone()[0] + 1
        n_rows, n_tokens, blob = conn.execute(
            "SELECT rows, tokens, terms FROM topk_files WHERE block = ?", (block,)
        ).fetchone()
        old = array("I", zlib.decompress(blob))
        conn.execute("INSERT INTO topk_removed VALUES (?)", (block,))
        conn.execute("DELETE FROM topk_files WHERE block = ?", (block,))
        conn.executemany("UPDATE topk_terms SET df = df - ? WHERE id = ?", zip(old[1::2], old[::2], strict=True))
        # the new rows, as parsing the edited file gives them
        buckets: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        counts: dict[int, int] = defaultdict(int)
        tokens = 0
        for ordinal, words in sorted(rows_of.items()):
            d = sum((h & 255) + (h >> HITS) for _t, h in words)
            tokens += d
            for tid, h in words:
                buckets[tid, d, h].append((new_block << 6) + ordinal)
                counts[tid] += 1
        chunks = []
        for (tid, d, h), ids in buckets.items():
            first, packed = pack(ids[0], ids)
            chunks.append((tid, d, h, ids[-1], first, packed))
        conn.executemany(
            "INSERT INTO topk_chunks (term, len, hits, last, first, ids) VALUES (?, ?, ?, ?, ?, ?)", chunks
        )
        conn.executemany(
            "INSERT INTO topk_dir VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET n = n + excluded.n",
            [(*key, len(ids)) for key, ids in buckets.items()],
        )
        conn.executemany("UPDATE topk_terms SET df = df + ? WHERE id = ?", [(n, t) for t, n in counts.items()])
        conn.execute("DELETE FROM topk_rows WHERE block = ?", (block,))
        conn.execute(
            "INSERT INTO topk_rows VALUES (?, ?)",
            (
                new_block,
                zlib.compress(
                    array(
                        "Q",
                        sorted(((new_block << 6) + o) << 32 | t << 16 | h for o, ws in rows_of.items() for t, h in ws),
                    ).tobytes(),
                    1,
                ),
            ),
        )
        terms = array("I", [x for t in sorted(counts) for x in (t, counts[t])])
        conn.execute(
            "INSERT INTO topk_files VALUES (?, ?, ?, ?)",
            (new_block, len(rows_of), tokens, zlib.compress(terms.tobytes())),
        )
        conn.executemany(
            "UPDATE topk_meta SET value = value + ? WHERE key = ?",
            [(len(rows_of) - n_rows, "rows"), (tokens - n_tokens, "tokens")],
        )
        spent = time.perf_counter() - started, time.process_time() - cpu
        conn.execute("DELETE FROM search_fts WHERE rowid BETWEEN ? AND ?", (lo, hi))
        for ordinal, words in sorted(rows_of.items()):
            text = " ".join(names[t] for t, h in words for _ in range(h & 255))
            heads = " ".join(names[t] for t, h in words for _ in range(h >> HITS))
            conn.execute(
                "INSERT INTO search_fts (rowid, text, context) VALUES (?, ?, ?)",
                ((new_block << 6) + ordinal, text, heads),
            )
    return spent[0], spent[1], len(rows_of)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a copy of --root's built .fsmem/cache.sqlite (gets the tables)")
    parser.add_argument("--root", type=Path, help="the memory: questions are drawn from its files")
    parser.add_argument("--sizes", default="10000", help="corpus sizes when no --root is given")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--k", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-build", action="store_true", help="the buckets are in --db already")
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--rows", action="store_true", help="make the rows' own table again")
    parser.add_argument("--no-split", action="store_true", help="every word's buckets read (no MaxScore split)")
    parser.add_argument("--keep", type=int, default=0, help="decoded ids kept from one question to the next")
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    from common import memories

    if args.db:
        if not args.root:
            parser.error("--db needs --root, the memory it was built from")
        return run(args.db, args.root, args)
    import shutil
    import tempfile

    from fsmem import Memory

    for root in memories(args.root, args.sizes):
        Memory(root).search("build the search tables")
        with tempfile.TemporaryDirectory() as scratch:
            db = Path(scratch, "cache.sqlite")
            shutil.copyfile(Path(root, ".fsmem", "cache.sqlite"), db)
            run(db, Path(root), args)
    return 0


def run(db: Path, root: Path, args: argparse.Namespace) -> int:
    from common import NewQuestions, percentile

    from fsmem.search.analyzer import Analyzer
    from fsmem.search.documents import quoted
    from fsmem.search.scoring import query_terms
    from fsmem.store import cache

    print(f"{root}: {db}")
    conn = cache.connect(db)
    if not args.skip_build:
        print("build:", {k: round(v, 1) for k, v in build(conn).items()}, f"load {os.getloadavg()[0]:.1f}", flush=True)
    if args.rows or not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'topk_rows'").fetchone():
        print(f"the rows' own table: {build_rows(conn):.1f} s", flush=True)
    sizes = dict(
        conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'topk%' OR name LIKE 'sqlite_autoindex_topk%'"
            " GROUP BY name"
        )
    )
    total = os.path.getsize(db)
    ours = sum(sizes.values())
    print(f"buckets on disk: {ours / 1e6:.1f} MB ({sizes}); cache.sqlite {total / 1e6:.1f} MB with them")
    analyzer = Analyzer()
    sampler = NewQuestions(root, seed=args.seed)
    asked = [sampler.question(3) for _ in range(args.queries)]
    proto = Prototype(conn, args.keep)
    sides = ("prototype", "bm25() over every match, top k", "bare FTS5 (OR, bm25, 20 rows)")
    wall: dict[str, list[float]] = {s: [] for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    loads = [os.getloadavg()[0]]
    wrong = 0

    def ask(side: str, terms: list[str], match: str):
        if side == sides[0]:
            return proto.top(terms, args.k, split=not args.no_split)
        if side == sides[1]:
            return reference(conn, match, args.k)
        return bare(conn, match)

    def check(terms, match) -> bool:
        got, want = proto.top(terms, args.k), reference(conn, match, args.k)
        return [(r, s) for r, s in got] == [(r, s) for r, s in want]

    for number, question in enumerate(asked):
        terms, _ = query_terms(analyzer, question)
        match = " OR ".join(quoted(t) for t in terms)
        order = sides if number % 2 == 0 else sides[::-1]
        answers = {}
        for side in order:
            w, c = time.perf_counter(), time.process_time()
            answers[side] = ask(side, terms, match)
            wall[side].append(time.perf_counter() - w)
            cpu[side].append(time.process_time() - c)
        if answers[sides[0]] != [tuple(r) for r in answers[sides[1]]]:
            wrong += 1
            print("DIFFERENT:", question, terms, answers[sides[0]][:3], answers[sides[1]][:3])
    loads.append(os.getloadavg()[0])
    print(f"{len(asked)} distinct questions of 3 words, top {args.k}; answers different from bm25(): {wrong}")
    print(f"load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'':<36} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'cpu p50':>8} {'cpu p99':>8} {'p50/bare':>8}")
    limit = statistics.median(wall[sides[2]])
    for side in sides:
        v, c = wall[side], cpu[side]
        print(
            f"{side:<36} {1000 * statistics.median(v):>8.1f} {1000 * percentile(v, 0.99):>8.1f} {1000 * max(v):>8.1f}"
            f" {1000 * statistics.median(c):>8.1f} {1000 * percentile(c, 0.99):>8.1f} {statistics.median(v) / limit:>8.2f}"
        )
    if args.updates:
        blocks = [b for (b,) in conn.execute("SELECT block FROM topk_files ORDER BY block LIMIT ?", (args.updates,))]
        spent = [update_one(conn, b, rows_of_block(conn, b)) for b in blocks]
        print(
            f"update one file's buckets (remove, add as a new file, one transaction), {len(spent)} files of"
            f" {statistics.median(s[2] for s in spent)} rows: wall p50 {1000 * statistics.median(s[0] for s in spent):.1f}"
            f" ms, max {1000 * max(s[0] for s in spent):.1f} ms; cpu p50 {1000 * statistics.median(s[1] for s in spent):.1f} ms"
        )
        after = [sampler.question(3) for _ in range(min(20, args.queries))]
        bad = 0
        for question in after:
            terms, _ = query_terms(analyzer, question)
            bad += not check(terms, " OR ".join(quoted(t) for t in terms))
        print(f"after the updates: {len(after)} new questions, answers different from bm25(): {bad}")
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
