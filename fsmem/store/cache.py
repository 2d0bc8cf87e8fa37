"""The metadata cache under `.fsmem/cache.sqlite`: disposable, shared, never trusted blindly.

One row per memory file holds its `FileMeta` as JSON, keyed on path and
checked against the file's mtime_ns, size and inode, so a changed file is
re-read on the next call whether or not a watcher runs. A second table
memoises token counts of short strings (ls rows, grep rows, read lines), so a
warm `ls` never loads the tokenizer.

Why SQLite rather than one JSON file replaced atomically: a 10k-file JSON blob
costs ~80 ms to load and must be rewritten whole for a one-file change, while
SQLite (WAL mode, busy timeout) lets several processes read while one writes,
updates rows in place, and lets `grep` fetch only the columns it needs.

Every failure degrades to "no cache": a database that will not open or query
is deleted and rebuilt, a row whose checksum or shape is wrong is a miss, and a
read-only or locked store simply stores nothing.

The search index keeps its tables in the same database (fsmem.search.index).
Every connection to it goes through `connect()`, which uses apsw, a wrapper
that bundles a current SQLite: search needs FTS5 `contentless_delete` (SQLite
3.43 or later) and the stdlib module links whatever the system has (3.40 on
Debian 12, 3.37 on Ubuntu 22.04). One library for the one file: two SQLite
libraries in one process on the same database do not see each other's POSIX
locks, which is one of SQLite's documented ways to corrupt a database.

This module is long because it is the one owner of that file: opening it,
damage and recovery, both tables and their row codecs stay together, so one
set of rules governs every access.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apsw

from fsmem.format.frontmatter import CONSOLIDATED_FIELD
from fsmem.store.paths import STATE_DIR

DatabaseError = apsw.Error
Connection = apsw.Connection

CACHE_FILE = "cache.sqlite"
SCHEMA_VERSION = 7  # 5: compressed rows, hashed count memo; 6: FileMeta carries the file's version; 7: maybe_cited
# A file modified this recently may change again within the same mtime tick:
# its metadata is used but not stored (the "racy" window, as in git's index).
RACY_NS = 1_000_000_000
BUSY_TIMEOUT_S = 5.0
# Token counts of strings up to this length are memoised; the memo is dropped when it grows past MEMO_ROWS.
MEMO_MAX_CHARS = 4096
MEMO_ROWS = 200_000
_MEMO_FLUSH_EVERY = 512

Stamp = tuple[int, int, int]  # mtime_ns, size, inode

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    superseded TEXT NOT NULL,
    maybe_cited INTEGER NOT NULL,  -- 0: front matter read and without `consolidated:`, so no document cites it
    crc INTEGER NOT NULL,
    data BLOB NOT NULL  -- the FileMeta as JSON, zlib-compressed (a fifth of its size); crc is of the JSON
);
-- what grep reads for every file with matches, without the wide data column
CREATE INDEX IF NOT EXISTS files_superseded ON files (path, mtime_ns, size, ino, superseded, maybe_cited);
-- keyed by a 128-bit digest of the string: storing the strings themselves (up to 4 KB, and again in the
-- key's index) made the memo 44 MB after one `ls` of 10k files
CREATE TABLE IF NOT EXISTS counts (digest BLOB PRIMARY KEY, tokens INTEGER NOT NULL);
"""


def connect(path: str | os.PathLike[str], *, timeout: float = BUSY_TIMEOUT_S) -> apsw.Connection:
    """A WAL-mode connection to the cache database (created when missing) that waits `timeout` s for a lock."""
    conn = apsw.Connection(os.fspath(path))
    try:
        conn.setbusytimeout(int(timeout * 1000))
        # a new database gives freed pages back to the file system when asked (PRAGMA incremental_vacuum)
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute("PRAGMA journal_size_limit=4194304")
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close(True)
        raise
    return conn


def is_transient(exc: BaseException) -> bool:
    """A lock held too long or a read-only store: worth nothing now, but no sign of a damaged database."""
    return isinstance(exc, (apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError, apsw.CantOpenError))


def discard(path: Path) -> bool:
    """Delete a database (and its WAL files) that cannot be trusted; True when it is gone."""
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(path) + suffix)
        return True
    except OSError:
        return False


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def cache_path(root: Path) -> Path:
    return Path(root, STATE_DIR, CACHE_FILE)


class MetaCache:
    """Rows of per-file metadata for one memory, valid for one tokenizer (`fingerprint`).

    The connection is opened on first use, so commands that never touch
    metadata (`read` of a line range) pay nothing. Threads that share one
    cache (a server's requests) take turns on its connection: SQLite's own
    transactions on one connection must not interleave.
    """

    def __init__(self, root: Path, fingerprint: str):
        self.root = Path(root)
        self.fingerprint = f"{SCHEMA_VERSION}:{fingerprint}"
        self.path = cache_path(self.root)
        self._conn: apsw.Connection | None = None
        self._disabled = False
        self._pending_counts: dict[str, int] = {}
        self._lock = threading.RLock()
        self._flush_registered = False  # one atexit hook per cache, however often its memo empties
        self.rebuilt = False  # set when a corrupt or foreign cache was thrown away

    # -- connection ---------------------------------------------------------
    def _connect(self) -> apsw.Connection | None:
        if self._conn is not None or self._disabled:
            return self._conn
        for attempt in (1, 2):
            try:
                self._conn = self._open()
                return self._conn
            except apsw.Error as exc:
                self.close()
                if is_transient(exc) or attempt == 2 or not self._discard():
                    break
            except OSError:
                break
        self._disabled = True
        return None

    def _open(self) -> apsw.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path)
        try:
            version = _first(conn.execute("PRAGMA user_version").fetchone())
            if version not in (0, SCHEMA_VERSION):
                raise apsw.SQLError(f"cache schema {version}, expected {SCHEMA_VERSION}")
            conn.execute(_SCHEMA)
            row = conn.execute("SELECT value FROM settings WHERE key = 'fingerprint'").fetchone()
            if row is None or row[0] != self.fingerprint:
                with _transaction(conn):
                    conn.execute("DELETE FROM files")
                    conn.execute("DELETE FROM counts")
                    conn.execute("INSERT OR REPLACE INTO settings VALUES ('fingerprint', ?)", (self.fingerprint,))
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.close(True)
            raise
        return conn

    def _discard(self) -> bool:
        """Delete a cache that cannot be trusted; True when it is gone."""
        self.rebuilt = True
        return discard(self.path)

    def _guard(self, action, default):
        """Run `action(conn)`; on corruption throw the cache away (once) and answer `default`."""
        with self._lock:
            conn = self._connect()
            if conn is None:
                return default
            try:
                return action(conn)
            except apsw.Error as exc:
                if not is_transient(exc):
                    self._reset()
                return default

    def _reset(self) -> None:
        self.close()
        if not self._discard():
            self._disabled = True

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(apsw.Error):
                    self._conn.close(True)
                self._conn = None

    # -- file rows ------------------------------------------------------------
    def rows(self, paths: Iterable[str] | None = None) -> dict[str, tuple[Stamp, int, str]]:
        """path -> (stamp, crc, data JSON) for the given paths (None: every row)."""
        wanted = None if paths is None else list(paths)

        def action(conn: apsw.Connection):
            if wanted is None:
                cursor = conn.execute("SELECT path, mtime_ns, size, ino, crc, data FROM files")
                return {r[0]: ((r[1], r[2], r[3]), r[4], r[5]) for r in cursor}
            found = {}
            for chunk in _chunks(wanted, 500):
                marks = ",".join("?" * len(chunk))
                cursor = conn.execute(
                    f"SELECT path, mtime_ns, size, ino, crc, data FROM files WHERE path IN ({marks})", chunk
                )
                found.update({r[0]: ((r[1], r[2], r[3]), r[4], r[5]) for r in cursor})
            return found

        if wanted is not None and not wanted:
            return {}
        return self._guard(action, {})

    def superseded(self, paths: Iterable[str] | None = None) -> dict[str, tuple[Stamp, list[tuple[int, int]], bool]]:
        """path -> (stamp, superseded ranges, maybe cited) without decoding whole rows (what grep needs).

        "Maybe cited" is False for a file whose front matter was read and has no `consolidated:` field: no
        document cites a line of it, so none of its lines can be superseded by one."""
        wanted = None if paths is None else list(paths)
        if wanted is not None and len(wanted) > 500:
            wanted = None  # one scan of the table beats many IN queries

        def decode(cursor) -> dict[str, tuple[Stamp, list[tuple[int, int]], bool]]:
            out: dict[str, tuple[Stamp, list[tuple[int, int]], bool]] = {}
            for path, mtime, size, ino, ranges, cited in cursor:
                if ranges == "[]":
                    out[path] = ((mtime, size, ino), [], bool(cited))
                    continue
                try:
                    parsed = [(int(a), int(b)) for a, b in json.loads(ranges)]
                except (ValueError, TypeError):
                    continue  # a damaged row is a miss
                out[path] = ((mtime, size, ino), parsed, bool(cited))
            return out

        def action(conn: apsw.Connection):
            if wanted is None:
                return decode(conn.execute("SELECT path, mtime_ns, size, ino, superseded, maybe_cited FROM files"))
            found = {}
            for chunk in _chunks(wanted, 500):
                marks = ",".join("?" * len(chunk))
                found.update(
                    decode(
                        conn.execute(
                            f"SELECT path, mtime_ns, size, ino, superseded, maybe_cited FROM files WHERE path IN ({marks})",
                            chunk,
                        )
                    )
                )
            return found

        if wanted is not None and not wanted:
            return {}
        return self._guard(action, {})

    def paths_with_superseded(self) -> list[str]:
        """Paths whose row holds superseded ranges (stamps unchecked)."""
        return self._guard(
            lambda conn: [r[0] for r in conn.execute("SELECT path FROM files WHERE superseded != '[]'")], []
        )

    def store(self, metas: Iterable[tuple[Stamp, dict[str, Any]]], *, prune_except: set[str] | None = None) -> None:
        """Upsert rows (skipping files inside the racy window); with `prune_except`, drop every other row."""
        now = time.time_ns()
        records = []
        for stamp, data in metas:
            if stamp[0] >= now - RACY_NS:
                continue
            raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
            ranges = json.dumps(data.get("superseded") or [])
            front = data.get("front_matter") or {}
            maybe_cited = int(CONSOLIDATED_FIELD in front or not front or bool(data.get("problems")))
            records.append((data["path"], *stamp, ranges, maybe_cited, zlib.crc32(raw), zlib.compress(raw, 1)))
        if not records and prune_except is None:
            return

        def action(conn: apsw.Connection) -> None:
            with _transaction(conn):
                conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)", records)
                if prune_except is not None:
                    stale = [(p,) for (p,) in conn.execute("SELECT path FROM files") if p not in prune_except]
                    conn.executemany("DELETE FROM files WHERE path = ?", stale)

        self._guard(action, None)

    def forget(self, paths: Iterable[str]) -> None:
        items = [(p,) for p in paths]
        if items:
            self._guard(lambda conn: _run_many(conn, "DELETE FROM files WHERE path = ?", items), None)

    # -- token-count memo -----------------------------------------------------
    def count_of(self, text: str) -> int | None:
        pending = self._pending_counts.get(text)
        if pending is not None:
            return pending

        def action(conn: apsw.Connection):
            row = conn.execute("SELECT tokens FROM counts WHERE digest = ?", (_digest(text),)).fetchone()
            return row[0] if row else None

        return self._guard(action, None)

    def add_count(self, text: str, tokens: int) -> None:
        with self._lock:
            if not self._pending_counts and not self._flush_registered:
                import atexit

                atexit.register(self.flush_counts)
                self._flush_registered = True
            self._pending_counts[text] = tokens
            if len(self._pending_counts) >= _MEMO_FLUSH_EVERY:
                self.flush_counts()

    def flush_counts(self) -> None:
        with self._lock:
            if not self._pending_counts:
                return
            items = [(_digest(text), tokens) for text, tokens in self._pending_counts.items()]
            self._pending_counts.clear()

        def action(conn: apsw.Connection) -> None:
            with _transaction(conn):
                top = _first(conn.execute("SELECT max(rowid) FROM counts").fetchone()) or 0
                if top > MEMO_ROWS:
                    conn.execute("DELETE FROM counts")
                conn.executemany("INSERT OR REPLACE INTO counts VALUES (?, ?)", items)

        self._guard(action, None)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def decode_data(value: Any) -> bytes | None:
    """A row's stored JSON (bytes), or None when it does not decompress."""
    if not isinstance(value, bytes):
        return None
    try:
        return zlib.decompress(value)
    except zlib.error:
        return None


def decode_row(path: str, stamp: Stamp, row: tuple[Stamp, int, Any] | None) -> dict[str, Any] | None:
    """The stored dict when `row` is fresh for `stamp` and intact; None means re-read the file."""
    if row is None or row[0] != stamp:
        return None
    _, crc, value = row
    raw = decode_data(value)
    if raw is None or zlib.crc32(raw) != crc:
        return None
    try:
        data = json.loads(raw.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("path") != path:
        return None
    return data


@contextlib.contextmanager
def transaction(conn: apsw.Connection):
    """A write transaction that takes the write lock first: a deferred one that reads and then writes
    gets SQLITE_BUSY at once when another connection writes, whatever the busy timeout."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(apsw.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_transaction = transaction


def _run_many(conn: apsw.Connection, sql: str, items: list[tuple]) -> None:
    with _transaction(conn):
        conn.executemany(sql, items)


def _chunks(items: list[str], size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first(row: Any) -> Any:
    """The first column of a row apsw returned (None for no row)."""
    return row[0] if row is not None else None
