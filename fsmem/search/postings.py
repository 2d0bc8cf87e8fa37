"""The document index: per term the documents holding it and how often, per document its length in terms.

The document part of the score is BM25 over documents (a file's rows citing one session note, or none).
An FTS5 table of them stored every position of every term (10k files: 6.7 million occurrences, 10.3 MB)
where BM25 needs only each term's count per document and each document's length: fsmem keeps those
(2.2 MB), in the same cache.sqlite and transactions as the other search tables, and computes from them
the very float FTS5's bm25() gave.

A term's postings are rows of `search_postings`, one per range of `1 << CHUNK_BITS` file ids: a file
written adds to the last range's row of each of its terms, never to every posting of a common term.
A document's id is the one its FTS5 row had, `(file_id << BLOCK_BITS) + n`, stored as the gap from the
one before; file ids only grow (`next` in search_meta), so a posting of a removed document is never read
as a newer one's: it is skipped while its file's row is gone, and dropped when its range is rewritten.

This module is long because it owns both sides of that format: writing it (a document's terms counted
where its file is parsed, added to the rows a batch at a time) and reading it for the score.
"""

from __future__ import annotations

import json
import math
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from functools import cached_property
from itertools import accumulate, compress, islice
from operator import add, ge
from typing import Any, cast

try:
    from fsmem.search import _native
except ImportError:  # built without a C compiler: the Python twin below answers alike (tests/test_native.py)
    _native = None  # type: ignore[assignment]

BLOCK_BITS = 6  # a file takes (rows >> BLOCK_BITS) + 1 blocks of 64 ids (fsmem.search.tables); document n: base + n
CHUNK_BITS = 8  # a term's postings are one row per 256 file ids (10k files: some 40 rows for a common term)
PURGE_DEAD = 64  # a range's rows are rewritten without dead postings once this many of its documents died
MAX_TOKEN_BYTES = 32768  # FTS5 cuts a longer token to its first 32,768 bytes (FTS5_MAX_TOKEN_SIZE)
KEPT_POSTINGS = 4_000_000  # values kept per state of the index, 8 bytes each at most (_Term.size): 32 MB
DENSE = 8  # a term in an eighth of the documents or more is kept as one value per document
K1, B = 1.2, 0.75  # FTS5's bm25() constants
SAMPLE_EVERY = 16  # `best_first` estimates its cut from every 16th value

SCHEMA = """
-- the document index (fsmem.search.postings): per term and range of file ids (`chunk`), how many documents
-- hold it (`n`), their ids as gaps (`docs`: one byte each, larger ones in 4 bytes after them) and the term's
-- count in each (`counts`, in the fewest bytes per value that hold every count of the row)
CREATE TABLE IF NOT EXISTS search_postings (
    term TEXT NOT NULL, chunk INTEGER NOT NULL, n INTEGER NOT NULL, docs BLOB NOT NULL, counts BLOB NOT NULL,
    PRIMARY KEY (term, chunk)
) WITHOUT ROWID;
-- per file with documents, their lengths in terms, 4 bytes each, by ordinal (0: no document there)
CREATE TABLE IF NOT EXISTS search_lengths (id INTEGER PRIMARY KEY, lengths BLOB NOT NULL);
-- documents removed from each range since its rows were last rewritten (their postings are skipped)
CREATE TABLE IF NOT EXISTS search_dead (chunk INTEGER PRIMARY KEY, dead INTEGER NOT NULL);
"""
TABLES = ("search_postings", "search_lengths", "search_dead")


def token_key(term: str) -> str:
    """The term as FTS5 would store it: its first MAX_TOKEN_BYTES bytes (a cut character's bytes in hex after
    U+FFFD), so two terms are one here exactly when they are one token there."""
    if len(term) * 4 <= MAX_TOKEN_BYTES:
        return term
    data = term.encode("utf-8")
    if len(data) <= MAX_TOKEN_BYTES:
        return term
    whole = MAX_TOKEN_BYTES
    while whole > 0 and data[whole] & 0xC0 == 0x80:  # the byte after the cut continues a character
        whole -= 1
    cut = data[whole:MAX_TOKEN_BYTES]
    return data[:whole].decode("utf-8") + ("\ufffd" + cut.hex() if cut else "")


class IndexDamaged(Exception):
    """The search tables cannot be trusted; they are dropped and rebuilt. (Here, where the lowest of the
    modules that find damage can raise it; fsmem.search.tables, which imports this one, names it too.)"""


def _packed(values: list[int]) -> array:
    """`values` in the narrowest of 1, 2 or 4 bytes a value that holds them all."""
    top = max(values)
    return array("B" if top < 1 << 8 else "H" if top < 1 << 16 else "I", values)


def _unpacked(data: bytes, n: int) -> array:
    code = {1: "B", 2: "H", 4: "I"}.get(len(data) // n if n else 0)
    if code is None or len(data) != n * array(code).itemsize:
        raise IndexDamaged("a posting row does not match its count")
    found = array(code)
    found.frombytes(data)
    return found


def _before(chunk: int) -> int:
    """The id before the range's first document's: the first gap of a row, like every other, is at least 1."""
    return (chunk << (CHUNK_BITS + BLOCK_BITS)) - 1


def _decode(chunk: int, n: int, docs: bytes, counts: bytes) -> tuple[list[int], array]:
    """A row's document ids and counts; IndexDamaged where they cannot be (fsmem.search._native checks the
    same)."""
    if type(chunk) is not int or type(n) is not int or type(docs) is not bytes or type(counts) is not bytes:
        raise IndexDamaged("a posting row of the wrong types")
    if chunk < 0 or n < 1:
        raise IndexDamaged("a posting row out of bounds")
    ids = list(accumulate(_gaps(docs, n), initial=_before(chunk)))[1:]
    if ids[-1] >= 1 << 63:
        raise IndexDamaged("a posting row's document ids are out of bounds")
    return ids, _unpacked(counts, n)


def _encode(chunk: int, ids: list[int], counts: list[int]) -> tuple[int, bytes, bytes]:
    # the twin chosen at each call: tests/test_postings.py runs the index with each
    encode = _native.encode_postings if _native is not None else encode_postings
    return encode(_before(chunk), ids, counts)


def encode_postings(before: int, ids: list[int], counts: list[int]) -> tuple[int, bytes, bytes]:
    """A posting row's columns (n, docs, counts): the gaps of `ids` from `before` (`_patched`) and `counts`
    packed (`_packed`). fsmem.search._native.encode_postings is its twin, in C: a cold build's command encodes
    some 9,000 rows of 650,000 postings at 10k files, 0.12 s of CPU here (tests/test_native.py)."""
    if not ids or len(counts) != len(ids):
        raise ValueError("encode_postings: no ids, or not as many counts as ids")
    gaps = [b - a for a, b in zip([before, *ids], ids, strict=False)]
    if min(gaps) < 0 or max(gaps) > 0xFFFFFFFF:  # the first such gap says which (as the twin reads them in turn)
        if next(g for g in gaps if g < 0 or g > 0xFFFFFFFF) < 0:
            raise ValueError("encode_postings: the ids do not grow")
        raise OverflowError("encode_postings: a gap past 4 bytes")
    return len(ids), _patched(gaps), _packed(counts).tobytes()


def _patched(gaps: list[int]) -> bytes:
    """Gaps (each at least 1) one byte each, a gap of 256 or more as 0 there and in 4 bytes after them all
    (10k files: 1 gap in 20; every gap in 2 bytes took 0.4 MB more)."""
    large = [g for g in gaps if g > 0xFF]
    if not large:
        return bytes(gaps)
    return bytes(g if g <= 0xFF else 0 for g in gaps) + array("I", large).tobytes()


def _gaps(data: bytes, n: int) -> list[int]:
    """The `n` gaps `_patched` wrote, each at least 1."""
    large = array("I")
    if len(data) < n or (len(data) - n) % large.itemsize:
        raise IndexDamaged("a posting row's gaps do not match its count")
    large.frombytes(data[n:])
    if data.count(0, 0, n) != len(large):
        raise IndexDamaged("a posting row's large gaps do not match its marks")
    gaps = list(data[:n])
    at = -1
    for gap in large:
        at = data.find(0, at + 1, n)
        if gap <= 0xFF:
            raise IndexDamaged("a posting row's large gaps do not match its marks")
        gaps[at] = gap
    return gaps


Counted = tuple[int, int, str, bytes]  # a document: its ordinal, length in terms, distinct terms, their counts


def counted(docs: list[tuple[int, str]]) -> list[Counted]:
    """Each document (ordinal, body) as `Pending.add` takes it: its length in terms, and its distinct terms
    (space separated, as FTS5's `ascii` tokenizer cuts them: tests/test_postings.py) with the count of each
    (4 bytes a count). Counted where a file is parsed: a cold build's worker processes count side by side,
    and the command that writes their files adds the counts up."""
    out = []
    for n, body in docs:
        terms = body.split()
        length = len(terms)
        if len(body) * 4 > MAX_TOKEN_BYTES and max(map(len, terms)) * 4 > MAX_TOKEN_BYTES:
            terms = [token_key(t) for t in terms]  # a term may be past FTS5's limit: counted as FTS5 cuts it
        found = Counter(terms)
        out.append((n, length, " ".join(found), array("I", found.values()).tobytes()))
    return out


def counted_terms(n: int, counts: dict[str, int]) -> Counted | None:
    """Document `n` as `counted` gives it, from its terms' counts (no term empty or with a space); None when a
    term may be past FTS5's limit, which `counted` cuts."""
    if max(map(len, counts), default=0) * 4 > MAX_TOKEN_BYTES:
        return None
    return (n, sum(counts.values()), " ".join(counts), array("I", counts.values()).tobytes())


def add_postings(rows: dict[str, tuple[list[int], list[int]]], doc: int, terms: str, packed: bytes) -> None:
    """One document's postings added to a batch's `rows` (term -> (ids, counts)): its distinct terms (space
    separated) with their counts (`counted`). fsmem.search._native.add_postings is its twin, in C: a cold
    build's command adds some 900,000 at 10k files (tests/test_native.py)."""
    counts = array("I")
    counts.frombytes(packed)
    split = terms.split(" ") if terms else []
    if len(split) != len(counts):
        raise ValueError("add_postings: not as many counts as terms")
    for term, count in zip(split, counts, strict=True):
        found = rows.get(term)
        if found is None:
            rows[term] = ([doc], [count])
        else:
            found[0].append(doc)
            found[1].append(count)


_add_postings = _native.add_postings if _native is not None else add_postings


class Pending:
    """The postings of the documents written in one transaction, added to their rows once, at `flush`: a
    build writes each term's row of each range once per batch of files, not once per file."""

    def __init__(self) -> None:
        self._rows: dict[int, dict[str, tuple[list[int], list[int]]]] = {}  # chunk -> term -> (ids, counts)
        self._lengths: list[tuple[int, bytes]] = []  # (file id, its documents' lengths), written at `flush`

    def add(self, conn, fid: int, docs: list[Counted]) -> None:
        """Take one file's documents (`counted`), and write their lengths. A table of its own, read whole for
        each state of the index: narrow rows read faster than search_files' wide ones (docs/performance.md);
        written at `flush`."""
        if not docs:
            return
        rows = self._rows.setdefault(fid >> CHUNK_BITS, {})
        base = fid << BLOCK_BITS
        lengths = array("I", bytes(4 * (docs[-1][0] + 1)))  # 10k files: 40 KB
        for n, length, terms, packed in docs:
            lengths[n] = length
            _add_postings(rows, base + n, terms, packed)
        self._lengths.append((fid, lengths.tobytes()))

    def flush(self, conn) -> None:
        """Append the pending postings to their rows (ids only grow, so they go last), and rewrite the ranges
        where many documents died."""
        lengths, self._lengths = self._lengths, []
        conn.executemany("INSERT INTO search_lengths VALUES (?, ?)", lengths)
        dead = {c for (c,) in conn.execute("SELECT chunk FROM search_dead WHERE dead >= ?", (PURGE_DEAD,))}
        fresh, self._rows = self._rows, {}
        for chunk in sorted(dead):
            _rewrite(conn, chunk, fresh.pop(chunk, {}))
        for chunk, terms in sorted(fresh.items()):
            # bulk: one read of the terms' rows of this range (most are new terms, or the range is new)
            have = {
                term: (n, docs, counts)
                for term, n, docs, counts in conn.execute(
                    "SELECT term, n, docs, counts FROM search_postings WHERE term IN (SELECT value FROM json_each(?))"
                    " AND chunk = ?",
                    (json.dumps(list(terms), ensure_ascii=False), chunk),
                )
            }
            out = []
            for term, (ids, counts) in terms.items():
                old = have.get(term)
                if old is not None:
                    old_ids, old_counts = _decode(chunk, *old)
                    ids, counts = old_ids + ids, [*old_counts, *counts]
                out.append((term, chunk, *_encode(chunk, ids, counts)))
            conn.executemany("INSERT OR REPLACE INTO search_postings VALUES (?, ?, ?, ?, ?)", out)


def _rewrite(conn, chunk: int, fresh: dict[str, tuple[list[int], list[int]]]) -> None:
    """Every row of one range again, with only live documents' postings (and `fresh`'s added)."""
    live = _live_documents(conn, chunk)
    rows = list(conn.execute("SELECT term, n, docs, counts FROM search_postings WHERE chunk = ?", (chunk,)))
    conn.execute("DELETE FROM search_postings WHERE chunk = ?", (chunk,))
    out = []
    for term, n, docs, counts in rows:
        ids, found = _decode(chunk, n, docs, counts)
        kept = [(d, c) for d, c in zip(ids, found, strict=True) if d in live]
        more = fresh.pop(term, ([], []))
        if kept or more[0]:
            out.append((term, chunk, *_encode(chunk, [d for d, _ in kept] + more[0], [c for _, c in kept] + more[1])))
    out += [(term, chunk, *_encode(chunk, ids, counts)) for term, (ids, counts) in fresh.items()]
    conn.executemany("INSERT INTO search_postings VALUES (?, ?, ?, ?, ?)", out)
    conn.execute("DELETE FROM search_dead WHERE chunk = ?", (chunk,))


def _live_documents(conn, chunk: int) -> set[int]:
    lo = chunk << CHUNK_BITS
    live: set[int] = set()
    for fid, lengths in conn.execute(
        "SELECT id, lengths FROM search_lengths WHERE id >= ? AND id < ?",
        (lo, lo + (1 << CHUNK_BITS)),
    ):
        live.update((fid << BLOCK_BITS) + n for n, length in enumerate(_lengths(lengths)) if length)
    return live


def _lengths(data: bytes) -> array:
    found = array("I")
    if len(data) % found.itemsize:
        raise IndexDamaged("packed document lengths of the wrong size")
    found.frombytes(data)
    return found


def pack(conn) -> None:
    """Write every posting row again in key order, after a (re)build: rows added range by range, term by
    term, leave the B-tree's pages part empty (10k files: 0.58 of 2.98 MB)."""
    rows = conn.execute("SELECT term, chunk, n, docs, counts FROM search_postings ORDER BY term, chunk").fetchall()
    conn.execute("DELETE FROM search_postings")
    conn.executemany("INSERT INTO search_postings VALUES (?, ?, ?, ?, ?)", rows)


def removed(conn, fid: int, n_docs: int) -> None:
    """A file's `n_docs` documents are gone: their postings are dead, and count towards rewriting the range."""
    if n_docs:
        conn.execute("DELETE FROM search_lengths WHERE id = ?", (fid,))
        conn.execute(
            "INSERT INTO search_dead VALUES (?, ?) ON CONFLICT (chunk) DO UPDATE SET dead = dead + excluded.dead",
            (fid >> CHUNK_BITS, n_docs),
        )


class _Decoded:
    """What one state of the index answers BM25 from: its live documents in id order (a document is its
    position there), each one's length normaliser, and the latest terms asked with their part of each
    document's score (it depends only on the term, the document and the state), at most KEPT_POSTINGS
    values of them: a server asked many different questions must not grow without end."""

    def __init__(self, conn) -> None:
        found = conn.execute("SELECT id, lengths FROM search_lengths ORDER BY id").fetchall()
        ids = [fid << BLOCK_BITS for fid, _packed in found]  # most files: one document, their first
        lengths = _lengths(b"".join(packed for _fid, packed in found))
        if len(lengths) != len(ids):  # and some of more
            ids, lengths = [], array("I")
            for fid, packed in found:
                _add_documents(ids, lengths, fid, packed)
            if any(map(ge, ids, islice(ids, 1, None))):  # a file's documents run into the next one's ids
                raise IndexDamaged("documents' ids out of order")
        if 0 in lengths:
            raise IndexDamaged("a document of no terms")
        self._set(array("q", ids), lengths, sum(lengths), Counter(lengths))

    def _set(self, ids: array, lengths: array, total: int, distinct: Counter[int]) -> None:
        """`total`: the lengths' sum; `distinct`: how many documents have each length."""
        if ids and not 0 <= ids[0] <= ids[-1] < 1 << 63:
            raise IndexDamaged("documents' ids out of bounds")
        # arrays, as fsmem.search._native reads them, and which Python's collector does not walk value by value
        self.ids, self.lengths, self.total, self.distinct = ids, lengths, total, distinct
        self.rows = rows = len(ids)
        avgdl = total / rows if rows else 1.0  # FTS5: (double)nToken / (double)nRow
        # FTS5's k1 * (1 - b + b * D / avgdl), once per distinct length
        norm_of = {length: K1 * (1 - B + B * length / avgdl) for length in distinct}
        self.norm = array("d", list(map(norm_of.__getitem__, lengths)))
        self._lock = threading.Lock()
        self._terms: OrderedDict[str, _Term] = OrderedDict()
        self._held = 0

    @cached_property
    def position(self) -> dict[int, int]:
        """document id -> its position (the Python twin's lookup; the C module searches `ids`)."""
        return dict(zip(self.ids, range(self.rows), strict=True))

    def carried(self, conn, removed: dict[int, int], added: list[int]) -> tuple[_Decoded, list[tuple[int, int]]]:
        """The document index of a later state of the same tables, as `_Decoded(conn)` reads it there, from
        this one: without the documents of the `removed` files (id -> rows), with those of the `added` ones
        (every id above this state's); and the ranges of this one's positions it keeps, in order. No term is
        carried: a term's part of a score moves with every document's length normaliser."""
        ranges = kept_ranges(self.ids, removed)
        ids, lengths = array("q"), array("I")
        for start, stop in ranges:
            ids += self.ids[start:stop]
            lengths += self.lengths[start:stop]
        total, distinct, after = self.total, Counter(self.distinct), 0
        for start, stop in [*ranges, (len(self.ids), len(self.ids))]:
            gone = self.lengths[after:start]  # the removed files' documents, before this kept range
            total -= sum(gone)
            distinct.subtract(gone)
            after = stop
        more: list[int] = []
        added_lengths = array("I")
        for fid, packed in conn.execute(
            "SELECT id, lengths FROM search_lengths WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(added),),
        ):
            _add_documents(more, added_lengths, fid, packed)
        if more and ((ids and more[0] <= ids[-1]) or any(map(ge, more, islice(more, 1, None)))):
            raise IndexDamaged("documents' ids out of order")
        ids += array("q", more)
        lengths += added_lengths
        total += sum(added_lengths)
        distinct.update(added_lengths)
        found = _Decoded.__new__(_Decoded)
        found._set(ids, lengths, total, +distinct)  # `+`: the lengths no document has any more left out
        return found, ranges

    def term(self, conn, term: str) -> _Term:
        """The live documents holding `term` and the term's part of each one's BM25."""
        with self._lock:
            found = self._terms.get(term)
            if found is not None:
                self._terms.move_to_end(term)
                return found
        rows = conn.execute(
            "SELECT chunk, n, docs, counts FROM search_postings WHERE term = ? ORDER BY chunk", (term,)
        ).fetchall()
        if _native is not None:
            found = _Term(*_native.term_parts(rows, self.ids, self.norm, CHUNK_BITS + BLOCK_BITS, K1 + 1.0, DENSE))
        else:
            found = self._term_parts(rows)
        with self._lock:
            if term not in self._terms:
                self._terms[term] = found
                self._held += found.size
                while self._held > KEPT_POSTINGS and len(self._terms) > 1:
                    self._held -= self._terms.popitem(last=False)[1].size
        return found

    def _term_parts(self, rows: list[tuple[int, int, bytes, bytes]]) -> _Term:
        """`fsmem.search._native.term_parts` in Python: the same checks, the same floats in the same order."""
        found_at: list[int | None] = []
        freqs: list[int] = []
        last = -1
        for chunk, n, docs, counts in rows:
            ids, found_counts = _decode(chunk, n, docs, counts)
            if ids[0] <= last:  # ids only grow along a term's rows
                raise IndexDamaged("a term's posting rows overlap")
            last = ids[-1]
            found_at += map(self.position.get, ids)
            freqs += found_counts
        if None in found_at:  # a dead document's postings are skipped
            live = [(at, f) for at, f in zip(found_at, freqs, strict=True) if at is not None]
            positions, freqs = [at for at, _f in live], [f for _at, f in live]
        else:
            positions = cast(list[int], found_at)
        hits = len(positions)
        idf = math.log((self.rows - hits + 0.5) / (hits + 0.5))
        if idf <= 0.0:
            idf = 1e-6  # FTS5's floor, for a term in half the documents or more
        k, norm = K1 + 1.0, self.norm
        if hits * DENSE >= self.rows:  # a common term: its parts for every document, 0.0 where it is absent
            dense = array("d", bytes(8 * self.rows))
            for at, f in zip(positions, freqs, strict=True):
                dense[at] = idf * ((f * k) / (f + norm[at]))
            return _Term(hits, array("i"), array("d"), dense)
        parts = [idf * ((f * k) / (f + norm[at])) for at, f in zip(positions, freqs, strict=True)]
        return _Term(hits, array("i", positions), array("d", parts))


def _add_documents(ids: list[int], lengths: array, fid: int, packed: bytes) -> None:
    """Append the documents of file `fid` (its packed lengths: ordinal -> length, 0 where none is)."""
    base = fid << BLOCK_BITS
    for n, length in enumerate(_lengths(packed)):
        if length:
            ids.append(base + n)
            lengths.append(length)


def kept_ranges(ids: array, removed: dict[int, int]) -> list[tuple[int, int]]:
    """The ranges [start, stop) of positions in `ids` (document ids, ascending) of the documents not of a
    `removed` file (id -> rows: its documents' ids are its first block's first id to that plus its rows)."""
    ranges, start = [], 0
    for fid in sorted(removed):
        low = bisect_left(ids, fid << BLOCK_BITS, start)
        high = bisect_right(ids, (fid << BLOCK_BITS) + removed[fid], low)
        if low > start:
            ranges.append((start, low))
        start = high
    if start < len(ids):
        ranges.append((start, len(ids)))
    return ranges


class _Term:
    """How many live documents hold one term, and its part of each one's score: by position (ascending) for a
    rare term, as one value per document (`dense`) for a common one, which a query adds at C speed. Arrays
    either way (a position in 4 bytes, a part in 8), as fsmem.search._native makes and reads them; `size` is
    what it holds, in values."""

    __slots__ = ("hits", "positions", "parts", "dense")

    def __init__(self, hits: int, positions: array, parts: array, dense: array | None = None) -> None:
        self.hits, self.positions, self.parts, self.dense = hits, positions, parts, dense

    @property
    def size(self) -> int:
        return len(self.dense) if self.dense is not None else len(self.positions) * 2


_DECODED = ("decoded document index",)


def decoded(conn, kept: dict[Any, Any] | None) -> _Decoded:
    """The document index of this state (`Kept.at`), decoded once."""
    if kept is None:
        return _Decoded(conn)
    found = kept.get(_DECODED)
    if found is None:
        found = kept.setdefault(_DECODED, _Decoded(conn))
    return found


def frequencies(conn, terms: list[str], kept: dict[Any, Any] | None = None) -> dict[str, int]:
    """term -> the number of live documents holding it, for the terms some document holds."""
    index = decoded(conn, kept)
    found = {t: index.term(conn, token_key(t)).hits for t in dict.fromkeys(terms)}
    return {t: found[t] for t in terms if found[t]}


def best_first(values: list[float], limit: int) -> list[int]:
    """The positions of the `limit` largest `values`, largest first, ties by position: what
    `sorted(range(len(values)), key=values.__getitem__, reverse=True)[:limit]` gives, without sorting them all.

    A cut is taken from every SAMPLE_EVERY-th value, low enough that some 2 * `limit` values reach it; when at
    least `limit` do, the `limit`-th largest value reaches it too, so every value of the best `limit` (ties
    with the last one included) is among those that reach it, which keep their order and alone are sorted.
    When fewer do, everything is sorted. (100k files: 3,000 of 150,000 documents in about half the sort's time.)
    """
    n = len(values)
    if limit <= 0:
        return []
    if n >= 4 * limit and n >= SAMPLE_EVERY:
        sample = sorted(values[::SAMPLE_EVERY], reverse=True)
        cut = sample[min(len(sample) - 1, 2 * limit // SAMPLE_EVERY)]
        reach = list(compress(range(n), map(cut.__le__, values)))
        if len(reach) >= limit:
            reach.sort(key=values.__getitem__, reverse=True)
            del reach[limit:]
            return reach
    ranked = sorted(range(n), key=values.__getitem__, reverse=True)
    del ranked[limit:]
    return ranked


def bm25(conn, phrases: list[str], limit: int, kept: dict[Any, Any] | None = None) -> tuple[list[int], list[float]]:
    """The `limit` best documents for the OR of `phrases`, by score descending, then id: their positions in
    `decoded(conn, kept).ids`, and their scores, FTS5's `-bm25()` to the bit: each phrase's part is added
    in the query's order as FTS5 adds them (a phrase a document lacks adds 0.0, which changes no float)."""
    index = decoded(conn, kept)
    terms = [index.term(conn, token_key(p)) for p in phrases]
    sparse = sum(t.hits for t in terms) * DENSE < index.rows  # few matches (no common term): only theirs count
    if _native is not None:
        return _native.best_documents([(t.positions, t.parts, t.dense) for t in terms], index.rows, limit, sparse)
    if sparse:
        scores: dict[int, float] = {}
        for term in terms:
            get = scores.get
            for at, part in zip(term.positions, term.parts, strict=True):
                scores[at] = get(at, 0.0) + part
        matched = sorted(scores)  # ties by id (positions are in id order)
        values = list(map(scores.__getitem__, matched))
        best = best_first(values, limit)
        return [matched[i] for i in best], [values[i] for i in best]
    dense = [0.0] * index.rows
    for term in terms:
        if term.dense is not None:
            dense = list(map(add, dense, term.dense))
        else:
            for at, part in zip(term.positions, term.parts, strict=True):
                dense[at] += part
    ranked = best_first(dense, limit)
    if ranked and not dense[ranked[-1]]:  # fewer matches than `limit`: the rest scored 0.0
        ranked = [at for at in ranked if dense[at]]
    return ranked, [dense[at] for at in ranked]
