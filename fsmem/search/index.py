"""The search index: SQLite FTS5 tables in `.fsmem/cache.sqlite`, kept in step with the files one file at a time.

Files are the only copy of the text. The index holds, per file, its stamp and
the front-matter fields search filters and weighs on; per row, its line and
flags; and the FTS5 postings of every row's analysed terms in three columns
(the row's text, its headings, and its document's names: title, entity or
topic, aliases), so a fact is found by its subject. A second FTS5 table holds
one document per (file, cited session note), for the document part of the
score. Both are contentless (`contentless_delete=1`): no text is stored, and a
file's rows are deleted by row id when it changes.

Each search stats every memory file and re-reads only those whose mtime, size,
inode or ctime changed, so a write through fsmem, a consolidation or a human
edit is seen by the next search; fsmem's own writes and `fsmem watch` update
the changed files at once (`SearchIndex.update`). A file's rows are row ids
`file_id << 20 | ordinal`, one range per file. Updates are compare-and-set per
file inside `BEGIN IMMEDIATE`, so two processes updating at once both end with
the index a fresh build would give. A damaged index is dropped and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.format.facts import split_provenance
from fsmem.format.rows import Row, document_rows, subject_of
from fsmem.search.analyzer import ANALYZER_VERSION, Analyzer
from fsmem.store import cache as _cache
from fsmem.store.catalog import EXACT_COUNT_LIMIT, walk_stats
from fsmem.store.paths import STATE_DIR
from fsmem.store.supersession import is_note, was_consolidated

LEGACY_DIR = "search"  # .fsmem/search/: where the index lived before it moved into cache.sqlite
GENERATED_INDEX = "INDEX.md"  # written by consolidate; a table of contents, not memory to rank
# Bump when the tables or what goes into them change: an older index is then dropped and rebuilt.
INDEX_VERSION = 4
ROW_BITS = 20  # row id = file id << ROW_BITS | ordinal (a file's first 1,048,576 rows are indexed)
MAX_ROWS = 1 << ROW_BITS
SUPERSEDED, LINKED = 1, 2  # row flags: hidden by default; same section and source as the next row
RACY_NS = _cache.RACY_NS  # a file written this recently is read again at the next refresh
BATCH_FILES = 500  # files per write transaction of a large (re)build, so other writers are not starved
BUSY_TIMEOUT_S = 60.0
ROW_CACHE_FILES = 64  # parsed files kept per process for rendering answers

Stamp = tuple[int, int, int, int]  # mtime_ns, size, inode, ctime_ns

_TABLES = ("search_files", "search_superseded", "search_sources", "search_terms", "search_meta")
_FTS_TABLES = ("search_vocab", "search_names_vocab", "search_docs_vocab", "search_fts", "search_names", "search_docs")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS search_meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
-- one row per file: its stamp, what filters and salience need, and its rows packed:
-- `lines` holds line << 2 | flags per row, `groups` the row's cited note (1-based in `sources`, 0: none)
CREATE TABLE IF NOT EXISTS search_files (
    id INTEGER PRIMARY KEY,
    path TEXT UNIQUE NOT NULL,
    mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, ino INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
    rows INTEGER NOT NULL, docs INTEGER NOT NULL,
    type TEXT, tags TEXT, updated TEXT, importance REAL,
    lines BLOB, groups BLOB, sources TEXT,
    cited INTEGER NOT NULL  -- a session note the consolidator has read: documents may supersede its facts
);
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
CREATE VIRTUAL TABLE IF NOT EXISTS search_docs USING fts5 (
    body, content='', contentless_delete=1, detail=full, tokenize='ascii'
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_docs_vocab USING fts5vocab (search_docs, 'row');
"""


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)


def source_of(row: Row) -> str | None:
    """The session note a consolidated row cites first, so rows from one session score as one document.

    A consolidated entity file gathers many sessions, and one session feeds many
    files; scored per file, every row of a speaker would share one document
    score. Rows citing the same note form one document, across files; rows
    without a citation form their file's.
    """
    _text, provenance = split_provenance(row.text)
    return provenance.sources[0] if provenance and provenance.sources else None


def document_names(front_matter: dict[str, Any], title: str | None) -> list[str]:
    """What a document is called: its title, aliases and entity or topic name (without the kind)."""
    names = [title] if title else []
    aliases = front_matter.get("aliases")
    if isinstance(aliases, str):
        aliases = [a.strip() for a in aliases.split(",")]
    if isinstance(aliases, list):
        names.extend(str(a).strip() for a in aliases if a is not None and str(a).strip())
    for key in ("entity", "topic"):
        value = front_matter.get(key)
        if value:
            names.append(str(value).split("/", 1)[-1].strip())
    return names


def _meta_fields(front_matter: dict[str, Any]) -> tuple[Any, ...]:
    importance = front_matter.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        importance = None
    tags = fmt.normalize_tags(front_matter.get("tags"))
    return (
        str(front_matter["type"]) if front_matter.get("type") is not None else None,
        json.dumps(tags, ensure_ascii=False) if tags else None,
        str(front_matter["updated"]) if front_matter.get("updated") is not None else None,
        float(importance) if importance is not None else None,
    )


@dataclass
class Parsed:
    """One file as just read, ready to be written into the index."""

    path: str
    stamp: Stamp
    meta: tuple[Any, ...]  # type, tags (JSON), updated, importance
    names: str  # the document's names, as terms
    rows: list[tuple[int, int, int, str, str]]  # line, flags, group (1-based in `sources`, 0: none), text, context
    sources: list[str]  # the session notes its rows cite
    terms: set[str]
    docs: list[str] | None = None  # per group: the terms of its rows without their citations
    cited: bool = False


def is_ranked(rel: str, text: str) -> bool:
    """INDEX.md only points at documents, and a consolidated note's content now lives in its entity and
    topic documents: ranking them too would spend the budget on copies."""
    return not (rel == GENERATED_INDEX or (rel.startswith("sessions/") and fmt.is_consolidated(text)))


def parse_file(rel: str, text: str, stamp: Stamp, analyzer: Analyzer) -> Parsed:
    """The rows, names and terms of one file's text."""
    doc = fmt.split(text)
    meta = _meta_fields(doc.front_matter)
    if not is_ranked(rel, text):
        return Parsed(rel, stamp, meta, "", [], [], set())
    rows = document_rows(rel, doc, classify=False)[:MAX_ROWS]
    title = (
        rows[0].title if rows else doc.title or next((h.title for h in fmt.headings(doc.body) if h.level == 1), None)
    )
    names = document_names(doc.front_matter, title)
    names_text = analyzer.text(" ".join(dict.fromkeys(names)))
    known_names = {n.lower() for n in names}
    context_cache: dict[tuple[str, ...], str] = {}
    row_sources = [source_of(r) if r.text.endswith(")") else None for r in rows]
    group_of: dict[str | None, int] = {None: 0}
    bodies: list[list[str]] = [[]]
    out_rows = []
    terms: set[str] = set(names_text.split())
    for index, row in enumerate(rows):
        key = tuple(row.headings)
        context_terms = context_cache.get(key)
        if context_terms is None:
            # the level-1 heading and a session note's `## people/Adam Smith` say what the row is about;
            # the document's own names are indexed once, for the whole file
            heads = [h.split("/", 1)[-1] if subject_of(h) else h for h in row.headings]
            context_terms = context_cache[key] = analyzer.text(
                " ".join(h for h in heads if h.lower() not in known_names)
            )
        text_terms = analyzer.text(row.text)  # with its citation, as grep and read show it
        source = row_sources[index]
        group = group_of.setdefault(source, len(group_of))
        if group == len(bodies):
            bodies.append([])
        bodies[group].append(analyzer.text(split_provenance(row.text)[0]) if source else text_terms)
        flags = SUPERSEDED if row.superseded else 0
        if index + 1 < len(rows) and rows[index + 1].headings == row.headings and row_sources[index + 1] == source:
            flags |= LINKED
        out_rows.append((row.line, flags, group, text_terms, context_terms))
    terms.update(" ".join(r[3] for r in out_rows).split())
    terms.update(" ".join(context_cache.values()).split())
    sources = [s for s in group_of if s is not None]
    docs = [" ".join(filter(None, body)) for body in bodies]
    cited = is_note(rel) and was_consolidated(text)
    return Parsed(rel, stamp, meta, names_text, out_rows, sources, terms, docs, cited)


def read_file(root: Path, rel: str, full: str, analyzer: Analyzer) -> Parsed | None:
    """Parse one file, with the stamp taken before the read; None when it vanished or keeps changing."""
    for _attempt in range(5):
        try:
            before = os.stat(full)
            if before.st_size > EXACT_COUNT_LIMIT:
                return Parsed(rel, stamp_of(before), (None, None, None, None), "", [], [], set())
            with open(full, "rb") as handle:
                data = handle.read()
            after = os.stat(full)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return None
        if stamp_of(before) == stamp_of(after):
            text, _problems = fmt.decode(data)
            return parse_file(rel, text, stamp_of(before), analyzer)
    return None


class IndexDamaged(Exception):
    """The search tables cannot be trusted; they are dropped and rebuilt."""


class SearchIndex:
    """Keeps the search tables of `.fsmem/cache.sqlite` in step with the files; answers term queries.

    One per memory root and process (`shared_index`). Thread-safe: every use of
    the connection holds `lock`.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.lock = threading.RLock()
        self._conn: Any = None
        self._analyzer: Analyzer | None = None
        self._in_memory = False
        self._inode: int | None = None
        self._parsed: OrderedDict[tuple[str, Stamp], list[Row]] = OrderedDict()
        self.rebuilt = False  # set when a damaged index was thrown away
        self.stats = {"indexed": 0, "removed": 0, "skipped": 0}

    @property
    def analyzer(self) -> Analyzer:
        if self._analyzer is None:
            self._analyzer = Analyzer()
        return self._analyzer

    @property
    def path(self) -> Path:
        return _cache.cache_path(self.root)

    # -- the connection -----------------------------------------------------
    def connection(self):
        """The open connection, with the search tables of this version (created or rebuilt as needed)."""
        if self._conn is not None:
            if self._in_memory or self._same_file():
                return self._conn
            self.close()  # deleted or replaced under us (rm -rf .fsmem, or the metadata cache threw it away)
        legacy = Path(self.root, STATE_DIR, LEGACY_DIR)
        if legacy.is_dir():  # the numpy index of fsmem before 0.2
            shutil.rmtree(legacy, ignore_errors=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                conn = self._open()
            except _cache.DatabaseError as exc:
                if _cache.is_transient(exc):
                    raise
                self.rebuilt = True  # not a database, or not one we can read: thrown away
                if not _cache.discard(self.path):
                    raise
                conn = self._open()
        except (OSError, _cache.DatabaseError):
            # a read-only or unusable .fsmem/: this process keeps its own index in memory
            conn = _cache.Connection(":memory:")
            self._prepare(conn)
            self._in_memory = True
        self._conn = conn
        self._inode = None if self._in_memory else _inode(self.path)
        return conn

    def _same_file(self) -> bool:
        return self._inode is not None and _inode(self.path) == self._inode

    def _open(self):
        conn = _cache.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close(True)
            raise
        return conn

    def _prepare(self, conn) -> None:
        version = f"{INDEX_VERSION}:{ANALYZER_VERSION}"
        if _version(conn) == version:
            return  # the common case, read without taking the write lock
        with _cache.transaction(conn):
            if _version(conn) != version:
                _drop_tables(conn)
                conn.execute(_SCHEMA)
                conn.executemany(
                    "INSERT INTO search_meta VALUES (?, ?)", [("version", version), ("rows", 0), ("docs", 0)]
                )

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(_cache.DatabaseError):
                self._conn.close(True)
            self._conn = None

    def _recover(self) -> None:
        """Drop the search tables (or the whole database, when even that fails) after damage was seen."""
        self.rebuilt = True
        self._parsed.clear()
        conn = self._conn
        if conn is not None:
            try:
                with _cache.transaction(conn):
                    _drop_tables(conn)
                self._prepare(conn)
                return
            except _cache.DatabaseError:
                self.close()
        else:
            self.close()
        if not self._in_memory:
            _cache.discard(self.path)
        self._conn = None

    def guarded(self, action):
        """Run `action(conn)`; when the index turns out damaged, rebuild it from the files and run it again."""
        with self.lock:
            for attempt in (1, 2):
                try:
                    return action(self.connection())
                except (IndexDamaged, _cache.DatabaseError) as exc:
                    if isinstance(exc, _cache.DatabaseError) and _cache.is_transient(exc):
                        raise
                    if attempt == 2:
                        raise
                    self._recover()
                    self._refresh(self.connection())
            raise AssertionError("unreachable")

    # -- keeping in step with the files ---------------------------------------
    def refresh(self) -> int:
        """Bring the index in step with every file; returns how many files were re-indexed or removed."""
        return self.guarded(self._refresh)

    def update(self, paths: Iterable[str]) -> int:
        """Re-index just these files (relative paths; deleted ones are removed), when an index exists."""
        wanted = sorted(set(paths))
        if not wanted:
            return 0

        def action(conn) -> int:
            known = _stamps(conn, wanted)
            if not known and not _has_files(conn):
                return 0  # never built: the first search builds it whole
            found = []
            for rel in wanted:
                full = os.path.join(self.root, rel)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                found.append((rel, full, st))
            return self._apply(conn, found, known, [rel for rel in wanted if rel in known], complete=False)

        return self.guarded(action)

    def _refresh(self, conn) -> int:
        found = list(walk_stats(self.root))
        # A digest of every (path, stamp) seen: equal to the one stored by the last refresh that left every
        # file indexed (cleared by any later change), nothing changed, and 10k stamps need not be compared.
        digest = hashlib.blake2b(
            "\0".join(
                f"{rel}\1{st.st_mtime_ns}\1{st.st_size}\1{st.st_ino}\1{st.st_ctime_ns}" for rel, _full, st in found
            ).encode("utf-8", "surrogateescape"),
            digest_size=16,
        ).hexdigest()
        stored = conn.execute("SELECT value FROM search_meta WHERE key = 'walk'").fetchone()
        if stored is not None and stored[0] == digest:
            return 0
        known = _stamps(conn, None)
        changed = self._apply(conn, found, known, list(known), complete=True)
        if changed >= BATCH_FILES:  # a (re)build: give the pages its merges freed back to the file system
            conn.execute("PRAGMA incremental_vacuum").fetchall()
        with _cache.transaction(conn):
            racy = conn.execute("SELECT 1 FROM search_files WHERE mtime_ns < 0 LIMIT 1").fetchone()
            current = _stamps(conn, None)
            settled = not racy and len(current) == len(found)
            settled = settled and all(current.get(rel, ((),))[0] == stamp_of(st) for rel, _full, st in found)
            conn.execute("INSERT OR REPLACE INTO search_meta VALUES ('walk', ?)", (digest if settled else None,))
        return changed

    def _apply(self, conn, found, known: dict[str, tuple[Stamp, int]], candidates_gone: list[str], *, complete) -> int:
        now = time.time_ns()
        present = {rel for rel, _, _ in found}
        gone = [rel for rel in candidates_gone if rel not in present]
        todo = []
        for rel, full, st in found:
            have = known.get(rel)
            if have is None or have[0] != stamp_of(st) or have[1]:
                todo.append((rel, full))
        if not todo and not gone:
            return 0
        changed = 0
        for start in range(0, max(len(todo), 1), BATCH_FILES):
            batch = todo[start : start + BATCH_FILES]
            parsed = [p for p in (read_file(self.root, rel, full, self.analyzer) for rel, full in batch) if p]
            read = {p.path for p in parsed}
            vanished = [rel for rel, _ in batch if rel in known and rel not in read]
            with _cache.transaction(conn):
                if start == 0:
                    vanished += gone
                for rel in vanished:
                    if not os.path.exists(os.path.join(self.root, rel)):
                        changed += _remove(conn, rel)
                new_terms: set[str] = set()
                for item in parsed:
                    current = conn.execute(
                        "SELECT mtime_ns, size, ino, ctime_ns, mtime_ns >= 0 FROM search_files WHERE path = ?",
                        (item.path,),
                    ).fetchone()
                    if current is not None and tuple(current[:4]) == item.stamp and current[4]:
                        self.stats["skipped"] += 1
                        continue  # another process indexed this very version meanwhile
                    with contextlib.suppress(OSError):
                        if stamp_of(os.stat(os.path.join(self.root, item.path))) != item.stamp:
                            continue  # changed again since it was read: the next refresh takes it
                    _remove(conn, item.path)
                    _insert(conn, item, racy=item.stamp[0] >= now - RACY_NS)
                    new_terms |= item.terms
                    changed += 1
                if new_terms:
                    conn.executemany("INSERT OR IGNORE INTO search_terms VALUES (?)", ((t,) for t in new_terms))
        self.stats["indexed"] += changed
        return changed

    # -- reading --------------------------------------------------------------
    def visible_rows(self, *, include_superseded: bool = False) -> Iterable[Row]:
        """Every row of every indexed file, read back from the files (for the evaluation harness)."""
        self.refresh()
        paths = self.guarded(lambda conn: [p for (p,) in conn.execute("SELECT path FROM search_files WHERE rows > 0")])
        for path in sorted(paths):
            found = self.rows_of(path)
            for row in found[1] if found else []:
                if include_superseded or not row.superseded:
                    yield row

    def rows_of(self, rel: str) -> tuple[Stamp, list[Row]] | None:
        """The rows of one file as it is now (parsed once per version and cached), or None when it is gone."""
        with self.lock:
            return self._rows_of(rel)

    def _rows_of(self, rel: str) -> tuple[Stamp, list[Row]] | None:
        full = os.path.join(self.root, rel)
        try:
            st = os.stat(full)
        except OSError:
            return None
        stamp = stamp_of(st)
        cached = self._parsed.get((rel, stamp))
        if cached is not None:
            self._parsed.move_to_end((rel, stamp))
            return stamp, cached
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        text, _ = fmt.decode(data)
        rows = document_rows(rel, fmt.split(text)) if is_ranked(rel, text) else []
        self._parsed[(rel, stamp)] = rows
        while len(self._parsed) > ROW_CACHE_FILES:
            self._parsed.popitem(last=False)
        return stamp, rows


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
    for name in (*_FTS_TABLES, *_TABLES):
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
    lo, hi = fid << ROW_BITS, (fid << ROW_BITS) | (MAX_ROWS - 1)
    if n_rows:
        conn.execute("DELETE FROM search_fts WHERE rowid BETWEEN ? AND ?", (lo, hi))
        conn.execute("DELETE FROM search_superseded WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute("DELETE FROM search_docs WHERE rowid BETWEEN ? AND ?", (lo, hi))
        conn.execute("DELETE FROM search_sources WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute("UPDATE search_meta SET value = value - ? WHERE key = 'docs'", (n_docs,))
    conn.execute("DELETE FROM search_names WHERE rowid = ?", (fid,))
    conn.execute("DELETE FROM search_files WHERE id = ?", (fid,))
    conn.execute("UPDATE search_meta SET value = value - ? WHERE key = 'rows'", (n_rows,))
    return 1


def _insert(conn, item: Parsed, *, racy: bool) -> None:
    mtime = -item.stamp[0] if racy and item.stamp[0] > 0 else item.stamp[0]
    lines = array("I", [min(line, 0x3FFFFFFF) << 2 | flags for line, flags, _g, _t, _c in item.rows])
    groups = array("H", [min(group, 0xFFFF) for _l, _f, group, _t, _c in item.rows]) if item.sources else None
    docs = [(n, body) for n, body in enumerate(item.docs or []) if body]
    conn.execute(
        "INSERT INTO search_files (path, mtime_ns, size, ino, ctime_ns, rows, docs, type, tags, updated, importance,"
        " lines, groups, sources, cited) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            item.path,
            mtime,
            *item.stamp[1:],
            len(item.rows),
            len(docs),
            *item.meta,
            lines.tobytes() if item.rows else None,
            groups.tobytes() if groups is not None else None,
            json.dumps(item.sources, ensure_ascii=False) if item.sources else None,
            int(item.cited),
        ),
    )
    fid = conn.last_insert_rowid()
    base = fid << ROW_BITS
    if item.rows:
        conn.executemany(
            "INSERT INTO search_fts (rowid, text, context) VALUES (?, ?, ?)",
            [(base + n, t, c) for n, (_l, _f, _g, t, c) in enumerate(item.rows)],
        )
        superseded = [(base + n,) for n, row in enumerate(item.rows) if row[1] & SUPERSEDED]
        if superseded:
            conn.executemany("INSERT INTO search_superseded VALUES (?)", superseded)
        conn.executemany("INSERT INTO search_docs (rowid, body) VALUES (?, ?)", [(base + n, b) for n, b in docs])
        conn.executemany(
            "INSERT INTO search_sources VALUES (?, ?)", [(base + n + 1, s) for n, s in enumerate(item.sources)]
        )
        conn.execute("UPDATE search_meta SET value = value + ? WHERE key = 'docs'", (len(docs),))
    if item.names:
        conn.execute("INSERT INTO search_names (rowid, names) VALUES (?, ?)", (fid, item.names))
    conn.execute("UPDATE search_meta SET value = value + ? WHERE key = 'rows'", (len(item.rows),))


def unpack_rows(lines: bytes | None, groups: bytes | None, n: int) -> tuple[array, array | None]:
    """A file's packed rows: (line << 2 | flags per row, cited-note number per row or None)."""
    packed = array("I")
    cited = None
    try:
        if lines:
            packed.frombytes(lines)
        if groups:
            cited = array("H")
            cited.frombytes(groups)
    except (TypeError, ValueError):
        raise IndexDamaged("packed rows of the wrong size") from None
    if len(packed) != n or (cited is not None and len(cited) != n):
        raise IndexDamaged("packed rows do not match the row count")
    return packed, cited


_shared: dict[Path, SearchIndex] = {}


def shared_index(root: Path) -> SearchIndex:
    """One index per memory root and process, so a long-lived server keeps its connection and parsed files."""
    key = Path(root).resolve()
    if key not in _shared:
        _shared[key] = SearchIndex(key)
    return _shared[key]
