"""The search tables in `.fsmem/cache.sqlite`: their schema, and the statements that read and write one file's rows.

`fsmem.search.index` decides when a file is (re)indexed; this module knows
how: a file's row is its stamp and packed rows, its FTS5 postings are row ids
`(file_id << BLOCK_BITS) + ordinal`, deleted as one range when it changes.

A file's id is the first of the blocks of `1 << BLOCK_BITS` FTS5 row ids its
rows take, and a file indexed takes the blocks after the last file's: FTS5
stores each posting's row id as the varint of its distance from the previous
one, so packed ids keep the distances small (10k files: 4.3 MB less than ids
`file_id << 20 | ordinal`, for the same postings). Ranking works in row ids
`file_id << ROW_BITS | ordinal` (`fsmem.search.parsing`); `rank_id_sql` and
`corrected` turn a stored id into one.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from fsmem.search import changes, postings, raw_rows
from fsmem.search.packed_rows import unpack_rows  # noqa: F401  (read back where the tables are)
from fsmem.search.parsing import LINKED, MAX_ROWS, ROW_BITS, SUPERSEDED, Parsed, Stamp  # noqa: F401
from fsmem.search.postings import BLOCK_BITS, IndexDamaged  # noqa: F401  (defined there: postings is below)
from fsmem.store import cache as _cache

_TABLES = (
    "search_files",
    "search_superseded",
    "search_sources",
    "search_terms",
    "search_meta",
    *postings.TABLES,
    *changes.TABLES,
)
_FTS_TABLES = ("search_vocab", "search_names_vocab", "search_fts", "search_names")
# an older index's tables, dropped with it: search_docs held the documents before fsmem.search.postings
_OLD_TABLES = ("search_docs_vocab", "search_docs")
_SCHEMA = """
-- version, rows, docs, next (the next file's id: ids only grow, see fsmem.search.postings), changes (counts
-- every file indexed or removed: what is kept from one state of the tables, such as document frequencies, is
-- kept while it does not move), built (drawn when the tables are made: a state is its `built` and `changes`,
-- since a rebuilt index counts its changes again from 0), walk (see SearchIndex._refresh)
CREATE TABLE IF NOT EXISTS search_meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
-- one row per file: its stamp, what filters and salience need, and its rows packed:
-- `lines` holds line << 2 | flags per row, `groups` the row's cited note (1-based in `sources`, 0: none),
-- each in 2 or 4 bytes a row (1 or 2 for `groups`), the fewest that hold every value of the file
CREATE TABLE IF NOT EXISTS search_files (
    id INTEGER PRIMARY KEY,
    path TEXT UNIQUE NOT NULL,
    mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, ino INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    rows INTEGER NOT NULL, docs INTEGER NOT NULL,
    type TEXT, tags TEXT, updated TEXT, importance REAL,
    lines BLOB, groups BLOB, sources TEXT,
    cited INTEGER NOT NULL,  -- a session note the consolidator has read: documents may supersede its facts
    -- of the bytes the rows were made from (`fsmem.search.parsing.content_digest`), kept while the row is racy
    -- (NULL once its stamp proves them, or too large to read): a file read again with the same bytes and mtime
    -- keeps its rows, its stamp refreshed (SearchIndex._apply); 16 bytes a file would grow a built index by 0.4%
    digest BLOB
);
-- the files that take more than one block (`continued_blocks`); most take one
CREATE INDEX IF NOT EXISTS search_files_long ON search_files (rows) WHERE rows >= 64;
CREATE TABLE IF NOT EXISTS search_superseded (id INTEGER PRIMARY KEY);
-- documents: the rows of one file citing one session note (its `groups` number), or citing none (0)
CREATE TABLE IF NOT EXISTS search_sources (id INTEGER PRIMARY KEY, source TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS search_terms (term TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5 (
    text, context, content='', contentless_delete=1, detail=full, tokenize='ascii'
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_vocab USING fts5vocab (search_fts, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS search_names USING fts5 (
    names, content='', contentless_delete=1, detail=full, tokenize='ascii'
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_names_vocab USING fts5vocab (search_names, 'row');
"""
_SCHEMA += postings.SCHEMA + changes.SCHEMA


def _version(conn) -> str | None:
    try:
        row = conn.execute("SELECT value FROM search_meta WHERE key = 'version'").fetchone()
    except _cache.DatabaseError as exc:
        if _cache.is_transient(exc):
            raise
        return None  # no search tables yet (or not readable: they are rebuilt)
    return row[0] if row else None


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _drop_tables(conn) -> None:
    for name in (*_OLD_TABLES, *_FTS_TABLES, *_TABLES):
        conn.execute(f"DROP TABLE IF EXISTS {name}")


def _has_files(conn) -> bool:
    return conn.execute("SELECT 1 FROM search_files LIMIT 1").fetchone() is not None


def _stamps(conn, paths: list[str] | None) -> dict[str, tuple[Stamp, bool]]:
    """path -> (stamp, racy) as stored; racy files are read again at the next refresh."""
    sql = "SELECT path, mtime_ns, size, ino, ctime_ns FROM search_files"
    if paths is None:
        rows = conn.execute(sql)
    else:
        rows = []
        for start in range(0, len(paths), 500):
            chunk = paths[start : start + 500]
            rows += conn.execute(f"{sql} WHERE path IN ({','.join('?' * len(chunk))})", chunk).fetchall()
    return {p: ((abs(m), s, i, c), m < 0) for p, m, s, i, c in rows}


def _remove(conn, rel: str) -> int:
    conn.execute("DELETE FROM search_meta WHERE key = 'walk'")
    found = conn.execute("SELECT id, rows, docs FROM search_files WHERE path = ?", (rel,)).fetchone()
    if found is None:
        return 0
    fid, n_rows, n_docs = found
    (change,) = conn.execute(
        "UPDATE search_meta SET value = value + 1 WHERE key = 'changes' RETURNING value"
    ).fetchone()
    changes.removed(conn, int(change), fid, rel, n_rows)
    lo, hi = fid << BLOCK_BITS, (fid << BLOCK_BITS) + n_rows  # rows, documents and sources: see _insert
    if n_rows:
        conn.execute("DELETE FROM search_fts WHERE rowid BETWEEN ? AND ?", (lo, hi))
        conn.execute("DELETE FROM search_superseded WHERE id BETWEEN ? AND ?", (lo, hi))
        postings.removed(conn, fid, n_docs)
        conn.execute("DELETE FROM search_sources WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute("UPDATE search_meta SET value = value - ? WHERE key = 'docs'", (n_docs,))
    conn.execute("DELETE FROM search_names WHERE rowid = ?", (fid,))
    conn.execute("DELETE FROM search_files WHERE id = ?", (fid,))
    conn.execute("UPDATE search_meta SET value = value - ? WHERE key = 'rows'", (n_rows,))
    return 1


def _insert(conn, item: Parsed, pending: postings.Pending, *, racy: bool) -> None:
    _insert_many(conn, [(item, racy)], pending, logged=True)


def _insert_many(
    conn, items: list[tuple[Parsed, bool]], pending: postings.Pending, *, logged: bool, terms: set[str] | None = None
) -> None:
    """Write these files (each with whether it is racy) after the last file's: one statement per table for
    them all, and the totals of `search_meta` moved once (a cold build writes 500 files a transaction).
    `logged`: each file's change is recorded with its terms' counts (`fsmem.search.changes`), as for files
    written a few at a time; a build's batches are not (a process behind them starts again from nothing).
    A file whose rows are raw (`Parsed.raw`) has them written on their own, in row id order with the others,
    and cut by `conn` (`fsmem.search.raw_rows`), which counts its document; their terms are added to `terms`."""
    if not items:
        return
    cut_terms: set[str] = terms if terms is not None else set()
    if any(item.raw for item, _racy in items):
        if logged or terms is None or not raw_rows.cuts(conn):
            raise ValueError("raw rows are written by a build's connection that cuts them, with their terms kept")
        raw_rows.take(conn)  # what a statement that failed before may have left
    # The file takes the blocks after the last file's: row n is stored as base + n, document n (at most one
    # per cited note, and the uncited rows) as base + n, cited note n (from 1) as base + n: base to base + rows.
    # Ids only grow (`next`): when the last file is removed its id is not taken again, so nothing stale of
    # it (a posting of fsmem.search.postings) can be read as another's.
    fid = int(conn.execute("SELECT value FROM search_meta WHERE key = 'next'").fetchone()[0])
    files, superseded, sources, names, log = [], [], [], [], []
    rows: list[Iterable[tuple[int, str, str]]] = []
    n_rows = n_docs = 0
    for item, racy in items:
        if logged:
            log.append((fid, item.path, len(item.texts), changes.row_counts(item.texts, item.contexts, item.names)))
        mtime = -item.stamp[0] if racy and item.stamp[0] > 0 else item.stamp[0]
        n = len(item.texts)
        if item.raw:
            _insert_raw(conn, fid << BLOCK_BITS, item, rows, cut_terms)
            rows = []
        docs = item.counted_documents()
        files.append(
            (
                fid,
                item.path,
                mtime,
                *item.stamp[1:],
                n,
                len(docs),
                *item.meta,
                item.lines if n else None,
                item.groups if item.sources else None,
                json.dumps(item.sources, ensure_ascii=False) if item.sources else None,
                int(item.cited),
                item.digest if racy else None,  # kept while its stamp cannot prove the bytes (`digest` above)
            )
        )
        pending.add(conn, fid, docs)
        base = fid << BLOCK_BITS
        if n:
            if not item.raw:  # the tuples made as they are bound
                rows.append(zip(itertools.count(base), item.texts, item.contexts))
            superseded += [(base + at,) for at in item.superseded]
            sources += [(base + at + 1, s) for at, s in enumerate(item.sources)]
            n_docs += len(docs)
        if item.names:
            names.append((fid, item.names))
        n_rows += n
        fid += (n >> BLOCK_BITS) + 1
    conn.execute("UPDATE search_meta SET value = ? WHERE key = 'next'", (fid,))
    conn.executemany(
        "INSERT INTO search_files (id, path, mtime_ns, size, ino, ctime_ns, rows, docs, type, tags, updated,"
        " importance, lines, groups, sources, cited, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        files,
    )
    if rows:
        conn.executemany(
            "INSERT INTO search_fts (rowid, text, context) VALUES (?, ?, ?)", itertools.chain.from_iterable(rows)
        )
    if superseded:
        conn.executemany("INSERT INTO search_superseded VALUES (?)", superseded)
    if sources:
        conn.executemany("INSERT INTO search_sources VALUES (?, ?)", sources)
    if names:
        conn.executemany("INSERT INTO search_names (rowid, names) VALUES (?, ?)", names)
    conn.execute("UPDATE search_meta SET value = value + ? WHERE key = 'docs'", (n_docs,))
    conn.execute("UPDATE search_meta SET value = value + ? WHERE key = 'rows'", (n_rows,))
    (change,) = conn.execute(
        "UPDATE search_meta SET value = value + ? WHERE key = 'changes' RETURNING value", (len(items),)
    ).fetchone()
    for at, (file_id, path, n, counts) in enumerate(log, start=int(change) - len(items) + 1):
        changes.inserted(conn, at, file_id, path, n, counts)


def _insert_raw(conn, base: int, item: Parsed, before: list[Iterable[tuple[int, str, str]]], terms: set[str]) -> None:
    """Write a file's raw rows (the rows of the files `before` it first: FTS5 takes a transaction's row ids in
    order), cut by `conn`, and set its document from what the cut counted; its terms go into `terms`."""
    if before:
        conn.executemany(
            "INSERT INTO search_fts (rowid, text, context) VALUES (?, ?, ?)", itertools.chain.from_iterable(before)
        )
    conn.executemany(
        "INSERT INTO search_fts (rowid, text, context) VALUES (?, ?, ?)",
        zip(itertools.count(base), item.texts, item.contexts),
    )
    values, document, found = raw_rows.take(conn)
    if values != len(item.texts):  # the table was opened with FTS5's own `ascii` (`raw_rows.register`)
        raise RuntimeError(f"search: {item.path}'s raw rows were not cut ({values} of {len(item.texts)})")
    item.counted = [document] if document is not None else []
    terms.update(found.split())


# FTS5's merging of its segments while a build writes in batches: none but when 64 wait on one level
# (`crisismerge`), since `merge_segments` merges them all into one when the build ends (10k files: the command's
# side 0.9 s of CPU less than with FTS5's defaults, which merge every 4 segments as they come); and those
# defaults, which `merge_segments` puts back for the writes of one file at a time after the build
_BUILDING = {"automerge": 0, "crisismerge": 64}
_WRITING = {"automerge": 4, "crisismerge": 16}
# The WAL's pages after which a commit copies them into the database (a checkpoint, with a sync of each file):
# SQLite's 1,000 (4 MB) for writes of a file at a time, 16,384 (64 MB) while a build commits 500 files a
# transaction, each some 1.5 MB of new pages: a checkpoint every 40 batches rather than one or two per batch,
# the pages that every batch changes (the postings', the files') copied once, and the disk still bounded
_CHECKPOINT_PAGES = {"building": 16384, "writing": 1000}
# SQLite's page cache of the connection that writes, in KiB: SQLite's 2,000 for writes of a file at a time, 64 MiB
# while a build writes and merges. With 2 MiB, each batch's commit re-read the pages of the B-trees it grows (the
# files', the postings') and spilt dirty pages to the WAL before it committed, and the merge read every segment's
# pages through it (10k files: 56,290 page reads and 71,068 page writes, against 13,368 and 55,331)
_CACHE_KIB = {"building": 65536, "writing": 2000}


def _merging(conn, settings: dict[str, int]) -> None:
    for table in ("search_fts", "search_names"):
        for key, value in settings.items():
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES (?, ?)", (key, value))


def building(conn) -> None:
    """Set FTS5's merging for a build in batches (`_BUILDING`), in its first transaction, and this connection's
    checkpoints (`_CHECKPOINT_PAGES`) and page cache (`_CACHE_KIB`); `merge_segments` ends it, in the command
    that builds or, when that one is killed, the next."""
    _merging(conn, _BUILDING)
    conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES['building']}")
    conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB['building']}")


def merge_segments(conn) -> None:
    """Merge each FTS5 table's segments into one (FTS5's 'optimize'), after a (re)build: a query looks every
    term up, and merges its postings, in each segment (docs/performance.md, "Figures behind the search code").
    The postings, row sizes and totals bm25() reads are the same, so every score is. The documents' postings
    are written again in order (`postings.pack`), their pages full. FTS5 merges again as it writes (`building`),
    and the connection checkpoints, and keeps its page cache, as SQLite does (`_CACHE_KIB`: a build's, while it
    merges)."""
    conn.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES['writing']}")
    conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB['building']}")
    with _cache.transaction(conn):
        for table in ("search_fts", "search_names"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        _merging(conn, _WRITING)
        postings.pack(conn)
    conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB['writing']}")


# Pages of FTS5's merging a step of `merge_step` does at most, in one transaction of its own: 10k files, some
# 15 ms of CPU holding the write lock (a whole index of 10k files is 5,800 pages, merged in 0.6 s of CPU)
MERGE_STEP_PAGES = 128


def merge_step(conn) -> bool:
    """One step of merging every FTS5 table's segments into one, each table's at most MERGE_STEP_PAGES pages:
    an incremental merge already begun is continued (FTS5's 'merge' with a positive count), else one of every
    segment is begun (a negative count: 'optimize' a step at a time, the deleted rows' tombstones dropped too).
    False when neither had work left in any table: one segment each, as a build leaves them. A file written
    after a build adds a segment, and a search's statements, one per file it scores, then seek each term in
    both (docs/performance.md, "Segments after writes"). Merging changes no row, length or total bm25()
    reads, so no score (tests/test_search_merging.py)."""
    worked = False
    for table in ("search_fts", "search_names"):
        for pages in (MERGE_STEP_PAGES, -MERGE_STEP_PAGES):
            before = conn.total_changes()
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (pages,))
            if conn.total_changes() - before >= 2:  # FTS5's sign that the command merged something
                worked = True
                break
    return worked


def segments(conn, table: str) -> int:
    """How many segments the FTS5 table's index has (the segments its `_idx` table lists pages of)."""
    return conn.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0]


_CONTINUED, _EXTRA = ("continued blocks",), ("blocks continuing each file",)


def continued_blocks(conn, kept: dict | None = None) -> dict[int, int]:
    """block -> its file's id, for every block after a file's first (any other block is its file's id), kept
    in `kept` (what `Kept.at` gives for the tables' state): the files of 64 rows or more, by their index."""
    found = kept.get(_CONTINUED) if kept is not None else None
    if found is None:
        long = conn.execute(f"SELECT id, rows FROM search_files WHERE rows >= {1 << BLOCK_BITS}").fetchall()
        if any(not isinstance(rows, int) or rows > MAX_ROWS for _, rows in long):
            raise IndexDamaged("a file's row count past MAX_ROWS")  # a corrupt cache: a rebuild, not 2**63 blocks
        found = {fid + more: fid for fid, rows in long for more in range(1, (rows >> BLOCK_BITS) + 1)}
        if kept is not None:
            kept[_CONTINUED] = found
    return found


def rank_id_sql(rowid: str) -> str:
    """SQL for ranking's row id of the FTS5 row id `rowid` when its block is its file's first (most are):
    `corrected` puts right those that `continued_blocks` names."""
    return f"((({rowid}) >> {BLOCK_BITS}) << {ROW_BITS} | (({rowid}) & {(1 << BLOCK_BITS) - 1}))"


def rank_ids(stored: Sequence[int], continued: dict[int, int]) -> list[int]:
    """Ranking's row ids of these FTS5 row ids (or document ids, which are laid out alike), in Python: what
    `rank_id_sql` and then `corrected` give, for a list at once."""
    mask = (1 << BLOCK_BITS) - 1
    found = [(d >> BLOCK_BITS) << ROW_BITS | (d & mask) for d in stored]
    if continued:
        found = [corrected(r, continued) if r >> ROW_BITS in continued else r for r in found]
    return found


def corrected(rid: int, continued: dict[int, int]) -> int:
    """Ranking's row id, from what `rank_id_sql` gave for a row in a block that continues a file."""
    block = rid >> ROW_BITS
    fid = continued[block]
    return fid << ROW_BITS | (((block - fid) << BLOCK_BITS) + (rid & (MAX_ROWS - 1)))


def stored_blocks(conn, fids: Iterable[int], kept: dict | None = None) -> list[int]:
    """The blocks of FTS5 row ids these files take: a row is in one of the files when its id `>> BLOCK_BITS`
    is in the list (each file's id, and the blocks that continue it, from `continued_blocks`)."""
    more = kept.get(_EXTRA) if kept is not None else None
    if more is None:
        more = {}
        for block, fid in continued_blocks(conn, kept).items():
            more.setdefault(fid, []).append(block)
        if kept is not None:
            kept[_EXTRA] = more
    blocks = list(fids)
    for fid in blocks[:]:
        blocks += more.get(fid, ())
    return blocks
