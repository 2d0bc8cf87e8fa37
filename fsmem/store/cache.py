"""The metadata cache under `.fsmem/cache.sqlite`: disposable, shared, never trusted blindly.

One row per memory file holds its `FileMeta` as JSON, keyed on path and
checked against the file's mtime_ns, size, inode and ctime, so a changed file is
re-read on the next call whether or not a watcher runs. A second table
memoises token counts of short strings (ls rows, grep rows, read lines), so a
warm `ls` never loads the tokenizer.

Why SQLite rather than one JSON file replaced atomically: a JSON blob must be
loaded whole by every command and rewritten whole for a one-file change, while
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
import functools
import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw

from fsmem.store.files import drop_links
from fsmem.store.paths import STATE_DIR
from fsmem.store.walk import path_of, walk_key

DatabaseError = apsw.Error
# a write the file system refused for want of room (ENOSPC, RLIMIT_FSIZE's EFBIG), as SQLite reports it
StorageFull = (apsw.FullError, apsw.IOError)
Connection = apsw.Connection


def _without_memory_statistics() -> None:
    """SQLite counts the memory it holds under one process-wide mutex at every allocation (`MEMSTATUS`, on in
    apsw's SQLite): two threads searching at once each took 24-54% more CPU for it, at most 14% more without it
    (docs/performance.md), and fsmem reads no such count. Set before the process's first connection only."""
    if apsw.connections():
        return  # another part of the process opened connections first: SQLite is left as it is
    try:
        apsw.shutdown()
        apsw.config(apsw.SQLITE_CONFIG_MEMSTATUS, 0)
    except apsw.Error:
        pass
    finally:
        apsw.initialize()


_without_memory_statistics()

CACHE_FILE = "cache.sqlite"
# 5: compressed rows, hashed count memo; 6: FileMeta carries the file's version; 7: maybe_cited;
# 8: listings in SQL (walk-order keys, filter columns, skipped entries), a row's fields as columns;
# 9: each file's wikilinks and the names links resolve by (fsmem.format.links); 10: names by the file's id, not
# its key (the key, ~33 bytes, stood in each row and again in an index: an eighth of the caches' size);
# 11: a name and its twin with `.md` one row (MD_TWIN), the count memo without rowids (its digest stood twice);
# 12: the keys each change of the file rows touched (`changes`), which every writer records
SCHEMA_VERSION = 13
# A file modified this recently may change again within the same mtime tick: its row is stored marked
# racy, and read again by the next stamp check (the "racy" window, as in git's index).
RACY_NS = 1_000_000_000
BUSY_TIMEOUT_S = 5.0
# Past this many paths asked, a query of rows by path scans the index once rather than asking for each in turn.
SCAN_FROM = 500
_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
# The `changes` table keeps the last this many keys changed; a change of more keys (a whole walk's) keeps none.
CHANGES_KEPT = 4096
# The memo of token counts (of strings up to `fsmem.tokens.MEMO_MAX_CHARS`) is dropped when it grows past this.
MEMO_ROWS = 200_000
_MEMO_FLUSH_EVERY = 512

Stamp = tuple[int, int, int, int]  # mtime_ns, size, inode, ctime_ns (moved by a write whose mtime was put back)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,  -- what `names` refer to a file by; a new row (the file changed) has a new one
    key TEXT NOT NULL,  -- the path's walk-order key (fsmem.store.walk.walk_key): a listing is a range of it
    path TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    racy INTEGER NOT NULL,  -- stored within RACY_NS of its mtime: a stamp check reads the file again
    depth INTEGER NOT NULL,  -- folders above the file
    type TEXT,
    updated_us INTEGER,  -- `updated` in microseconds since 1970 UTC; NULL when missing or not a date
    tags TEXT NOT NULL,  -- the tags, lower-cased, as a JSON list
    link TEXT,  -- a symbolic link's real target relative to the root (a scope must hold it too)
    superseded TEXT NOT NULL,
    maybe_cited INTEGER NOT NULL,  -- 0: front matter read and without `consolidated:`, so no document cites it
    problems INTEGER NOT NULL,  -- how many problems `check` reports for it
    -- what a row shows (the rest of its FileMeta); headings and the raw front matter are not kept:
    -- `Memory.meta` reads them from the file
    title TEXT,
    description TEXT,
    shown_tags TEXT,  -- the tags as written, when that is not `tags` (their case)
    created TEXT,
    updated TEXT,
    importance REAL,
    entity TEXT,
    topic TEXT,
    tokens INTEGER NOT NULL,
    tokens_estimated INTEGER NOT NULL,
    problem_list TEXT NOT NULL,  -- JSON [[line, message], ...]
    version TEXT,
    crc INTEGER NOT NULL  -- of what the row shows (`_shown`): a damaged or tampered row is read again
);
-- every column a listing filters, counts, orders or stamp-checks on, in walk order: `ls` and the freshness
-- walk read this narrow index alone, and only the rows an answer shows are read from the table (one key, one row)
CREATE INDEX IF NOT EXISTS files_list
    ON files (key, depth, type, updated_us, tags, link, mtime_ns, size, ino, ctime_ns, racy, superseded, maybe_cited);
-- the links to a file, refreshed with it (the few there are)
CREATE INDEX IF NOT EXISTS files_link ON files (link) WHERE link IS NOT NULL;
-- memory-named entries the last walk could not use (a link out, a FIFO, an unreadable file or folder)
CREATE TABLE IF NOT EXISTS skipped (key TEXT PRIMARY KEY, shown TEXT NOT NULL, reason TEXT NOT NULL, link TEXT)
    WITHOUT ROWID;
-- the wikilinks of each file (`fsmem.format.links`), and the names each file answers to: what `fsmem links`,
-- `check` and `read` resolve over (`fsmem.query.links`); kept with the file's row, gone with it
CREATE TABLE IF NOT EXISTS wikilinks (
    key TEXT NOT NULL,  -- the linking file's walk-order key
    line INTEGER NOT NULL,
    target TEXT NOT NULL,  -- as written, before `|` and `#`
    name TEXT NOT NULL,  -- the target folded, as `names.name`
    label TEXT
);
CREATE INDEX IF NOT EXISTS wikilinks_from ON wikilinks (key, line);
CREATE INDEX IF NOT EXISTS wikilinks_to ON wikilinks (name, key, line);
CREATE TABLE IF NOT EXISTS names (
    name TEXT NOT NULL,
    tier INTEGER NOT NULL,  -- fsmem.format.links' tier; with MD_TWIN, the name with `.md` after it too
    file INTEGER NOT NULL,  -- files.id
    PRIMARY KEY (name, tier, file)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS names_file ON names (file);
-- the key of each file row a change of them stored or dropped, by the `files_version` that change made: a process
-- that keeps what the rows said at a version catches up by these keys alone (`changed_keys`); the oldest go
-- (CHANGES_KEPT), and `changes_from` in settings says from which version on they are all here
CREATE TABLE IF NOT EXISTS changes (version INTEGER NOT NULL, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS changes_version ON changes (version);
CREATE TRIGGER IF NOT EXISTS files_gone AFTER DELETE ON files BEGIN
    DELETE FROM wikilinks WHERE key = old.key;
    DELETE FROM names WHERE file = old.id;
END;
-- keyed by a 128-bit digest of the string: storing the strings themselves (up to 4 KB, and again in the
-- key's index) made the memo nearly the size of the Markdown after one `ls`; WITHOUT ROWID, the digest is stored once,
-- not again in a key index (less than half the size: docs/performance.md, the size of `.fsmem/`)
CREATE TABLE IF NOT EXISTS counts (digest BLOB PRIMARY KEY, tokens INTEGER NOT NULL) WITHOUT ROWID;
"""


def connect(path: str | os.PathLike[str], *, timeout: float = BUSY_TIMEOUT_S) -> apsw.Connection:
    """A WAL-mode connection to the cache database (created when missing) that waits `timeout` s for a lock.

    A cache is never opened through a link: its folder is named by its real path and the file opened with
    SQLITE_OPEN_NOFOLLOW (which refuses a link anywhere in the name), and a link where the database or its
    WAL files should be is removed first, so that SQLite makes them anew."""
    name, flags = _unlinked(os.fspath(path))
    conn = apsw.Connection(name) if flags is None else apsw.Connection(name, flags=flags)
    try:
        conn.setbusytimeout(int(timeout * 1000))
        # a new database gives freed pages back to the file system when asked (PRAGMA incremental_vacuum);
        # setting it again is a write (a WAL frame, fdatasync, a checkpoint at close) that every command paid
        if _first(conn.execute("PRAGMA auto_vacuum").fetchone()) != _INCREMENTAL:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute("PRAGMA journal_size_limit=4194304")
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close(True)
        raise
    return conn


def _unlinked(path: str) -> tuple[str, int | None]:
    """(name, flags) to open the database at `path` through no link; links at its names are removed."""
    if path in ("", ":memory:") or path.startswith("file:"):
        return path, None
    real = os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))
    drop_links(real)
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | getattr(apsw, "SQLITE_OPEN_NOFOLLOW", 0)
    return real, flags


def read_transaction(conn: apsw.Connection, action: Callable[[apsw.Connection], Any]) -> Any:
    """`action(conn)` inside one read transaction, so that its queries see one state of the database."""
    conn.execute("BEGIN")
    try:
        return action(conn)
    finally:
        with contextlib.suppress(apsw.Error):
            conn.execute("COMMIT")


def is_transient(exc: BaseException) -> bool:
    """A lock held too long or a read-only store: worth nothing now, but no sign of a damaged database."""
    return isinstance(exc, (apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError, apsw.CantOpenError))


def foreign_schema(conn: Any, schema: str = _SCHEMA) -> str | None:
    """A trigger or view of the database that `schema` does not make, named, or None: a cache from an untrusted
    copy could carry one that rewrites the rows fsmem stores (a trigger setting every row's `type` made `ls --type
    semantic` list every file), and emptying its tables keeps it. The caller throws such a database away. Works
    on an apsw or sqlite3 connection."""
    found = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')").fetchall()
    own = _own_objects(schema) if found else {}
    return next((f"a {kind} named {name}" for kind, name, sql in found if own.get((kind, name)) != sql), None)


def refuse_foreign_schema(conn: apsw.Connection, schema: str = _SCHEMA) -> None:
    """apsw.CorruptError (a database thrown away and made again) when `foreign_schema` names something."""
    foreign = foreign_schema(conn, schema)
    if foreign is not None:
        raise apsw.CorruptError(f"the database holds {foreign}, which fsmem does not make")


@functools.cache
def _own_objects(schema: str) -> dict[tuple[str, str], str]:
    """The triggers and views `schema` makes, as SQLite stores them."""
    conn = apsw.Connection(":memory:")
    try:
        conn.execute(schema)
        found = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view')")
        return {(kind, name): sql for kind, name, sql in found}
    finally:
        conn.close()


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
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)


def cache_path(root: Path) -> Path:
    return Path(root, STATE_DIR, CACHE_FILE)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class MetaCache:
    """Rows of per-file metadata for one memory, valid for one tokenizer (`fingerprint`).

    The connection is opened on first use, so commands that never touch
    metadata (`read` of a line range) pay nothing. Threads that share one
    cache (a server's requests) take turns on its connection: SQLite's own
    transactions on one connection must not interleave.
    """

    def __init__(self, root: Path, fingerprint: str, *, in_memory: bool = False):
        self.root = Path(root)
        self.fingerprint = f"{SCHEMA_VERSION}:{fingerprint}"
        self.path = cache_path(self.root)
        self._conn: apsw.Connection | None = None
        # the file cannot be used (or `in_memory`): rows live in a database in memory, for this object only
        self._disabled = in_memory
        self._inode: int | None = None
        self._pending_counts: dict[str, int] = {}
        self._lock = threading.RLock()
        self._flush_registered = False  # one atexit hook per cache, however often its memo empties
        self.rebuilt = False  # set when a corrupt or foreign cache was thrown away
        self._rows_id: str | None = None  # the open database's `rows_id` (see `rows_id`)

    # -- connection ---------------------------------------------------------
    def _connect(self) -> apsw.Connection:
        if self._conn is not None:
            return self._conn
        if not self._disabled:
            for attempt in (1, 2):
                try:
                    self._conn = self._open()
                    self._inode = _inode(self.path)
                    self._rows_id = _first(
                        self._conn.execute("SELECT value FROM settings WHERE key = 'rows_id'").fetchone()
                    )
                    return self._conn
                except apsw.Error as exc:
                    self.close()
                    if is_transient(exc) or attempt == 2 or not self._discard():
                        break
                except OSError:
                    break
            self._disabled = True
        # a read-only, locked or unusable .fsmem/: this object keeps its rows in memory
        conn = apsw.Connection(":memory:")
        conn.execute(_SCHEMA)
        self._conn = conn
        self._inode = None
        self._rows_id = None
        return conn

    def open(self) -> None:
        """Connect now, making the cache's tables where there are none (a write). A first search opens it before
        it builds the search index: the build's merge then holds the database's write lock while the answer is
        counted (`fsmem.search.index`: `_merge_behind`), and the count memo's lookups only read."""
        with self._lock:
            self._connect()

    def same_file(self) -> bool:
        """False when the database this object has open was deleted or replaced (rm -rf .fsmem/, another
        process rebuilt it): its connection is closed, and the next use opens the file that is there now."""
        with self._lock:
            if self._conn is None or self._inode is None or _inode(self.path) == self._inode:
                return True
            self.close()
            return False

    @property
    def in_memory(self) -> bool:
        return self._disabled

    def rows_id(self) -> str | None:
        """What names the rows of the database this object has open (connecting first), the same for every
        process and connection: it is made anew with the database, and whenever its rows are emptied (another
        tokenizer). A change feed keeps one consumer per value, so the catalogs of one memory in a process
        share what they caught up. None when the rows live in memory, for this object alone."""
        with self._lock:
            self._connect()
            return None if self._disabled else self._rows_id

    def _open(self) -> apsw.Connection:
        self.path.parent.mkdir(exist_ok=True)  # .fsmem/ alone: a memory root gone is not made again (OSError)
        conn = connect(self.path)
        try:
            version = _first(conn.execute("PRAGMA user_version").fetchone())
            if version not in (0, SCHEMA_VERSION):
                raise apsw.SQLError(f"cache schema {version}, expected {SCHEMA_VERSION}")
            refuse_foreign_schema(conn)
            conn.execute(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO settings VALUES ('files_version', '0')")
            conn.execute("INSERT OR IGNORE INTO settings VALUES ('changes_from', '0')")
            conn.execute("INSERT OR IGNORE INTO settings VALUES ('rows_id', ?)", (_new_rows_id(),))
            row = conn.execute("SELECT value FROM settings WHERE key = 'fingerprint'").fetchone()
            if row is None or row[0] != self.fingerprint:
                with _transaction(conn):
                    conn.execute("DELETE FROM files")
                    conn.execute("DELETE FROM skipped")
                    conn.execute("DELETE FROM counts")
                    conn.execute(f"DELETE FROM settings WHERE key = '{_ADDED}'")
                    _bump(conn, None)
                    conn.execute("INSERT OR REPLACE INTO settings VALUES ('fingerprint', ?)", (self.fingerprint,))
                    conn.execute("INSERT OR REPLACE INTO settings VALUES ('rows_id', ?)", (_new_rows_id(),))
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
            try:
                return action(conn)
            except apsw.Error as exc:
                if isinstance(exc, apsw.ReadOnlyError) and not self._disabled:
                    self.close()  # a database it may read but not write: rows in memory from now on
                    self._disabled = True
                elif not is_transient(exc):
                    self._reset()
                return default

    def _reset(self) -> None:
        self.close()
        if self._disabled or not self._discard():
            self._disabled = True

    def close(self) -> None:
        """Store the counts not yet stored and let the process's exit forget this cache (its atexit hook held
        every cache a long-lived process ever opened), then close the connection."""
        with self._lock:
            if self._pending_counts:
                self.flush_counts()
            if self._flush_registered:
                import atexit

                atexit.unregister(self.flush_counts)
                self._flush_registered = False
            if self._conn is not None:
                with contextlib.suppress(apsw.Error):
                    self._conn.close(True)
                self._conn = None

    # -- file rows ------------------------------------------------------------
    def reading(self, action: Callable[[apsw.Connection], Any], default: Any = None) -> Any:
        """`action(conn)` inside one read transaction (its queries see one state of the cache), or `default`."""

        return self._guard(lambda conn: read_transaction(conn, action), default)

    def to_memory(self) -> None:
        """Keep this object's rows in memory from now on (the file could not be written)."""
        with self._lock:
            self.close()
            self._disabled = True

    def files_version(self, conn: apsw.Connection) -> int:
        """How many times the file rows changed (any process): equal values, equal rows."""
        row = conn.execute("SELECT value FROM settings WHERE key = 'files_version'").fetchone()
        return int(row[0]) if row else -1

    def changed_keys(self, conn: apsw.Connection, since: int) -> list[str] | None:
        """The keys of the file rows changed (stored or dropped) after `files_version` was `since`, each once; None
        when the cache no longer says (more changes since than it keeps, or one of every row): read them all."""
        start = _first(conn.execute("SELECT value FROM settings WHERE key = 'changes_from'").fetchone())
        if start is None or since < int(start):
            return None
        return [k for (k,) in conn.execute("SELECT DISTINCT key FROM changes WHERE version > ?", (since,))]

    def select(self, sql: str, params: Iterable[Any] = (), default: Any = None) -> Any:
        """The rows of one read query (a list), or `default` when the cache cannot answer."""
        wanted = list(params)
        return self._guard(lambda conn: conn.execute(sql, wanted).fetchall(), default)

    def stamps(self, where: str = "1", params: Iterable[Any] = ()) -> dict[str, tuple[Stamp, bool]] | None:
        """path -> (stamp, racy) of the rows `where` selects (read from the narrow index alone); None: no cache."""
        rows = self.select(
            f"SELECT key, mtime_ns, size, ino, ctime_ns, racy FROM files INDEXED BY files_list WHERE {where}", params
        )
        return None if rows is None else {path_of(k): ((m, s, i, c), bool(r)) for k, m, s, i, c, r in rows}

    def rows(self, paths: Iterable[str] | None = None) -> dict[str, tuple[Stamp, int]]:
        """path -> (stamp, crc) for the given paths (None: every row); racy rows have no stamp."""
        wanted = None if paths is None else [walk_key(p) for p in paths]
        sql = "SELECT key, mtime_ns, size, ino, ctime_ns, racy, crc FROM files"

        def action(conn: apsw.Connection):
            found: list[Any]
            if wanted is None:
                found = conn.execute(sql).fetchall()
            else:
                found = []
                for chunk in chunks(wanted, 500):
                    found += conn.execute(f"{sql} WHERE key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            return {
                path_of(str(k)): (((m, s, i, t) if not r else (-1, -1, -1, -1)), c) for k, m, s, i, t, r, c in found
            }

        if wanted is not None and not wanted:
            return {}
        return self._guard(action, {})

    def superseded(self, paths: Iterable[str] | None = None) -> dict[str, tuple[Stamp, list[tuple[int, int]], bool]]:
        """path -> (stamp, superseded ranges, maybe cited) without decoding whole rows (what grep needs).

        "Maybe cited" is False for a file whose front matter was read and has no `consolidated:` field: no
        document cites a line of it, so none of its lines can be superseded by one. A racy row is left out."""
        wanted = None if paths is None else [walk_key(p) for p in paths]
        if wanted is not None and len(wanted) > SCAN_FROM:
            wanted = None  # one scan of the index beats many IN queries
        sql = (
            "SELECT key, mtime_ns, size, ino, ctime_ns, superseded, maybe_cited FROM files INDEXED BY files_list"
            " WHERE racy = 0"
        )

        def decode(rows) -> dict[str, tuple[Stamp, list[tuple[int, int]], bool]]:
            out: dict[str, tuple[Stamp, list[tuple[int, int]], bool]] = {}
            for key, mtime, size, ino, ctime, ranges, cited in rows:
                parsed = decoded_ranges(ranges)
                if parsed is not None:  # a damaged row is a miss
                    out[path_of(key)] = ((mtime, size, ino, ctime), parsed, bool(cited))
            return out

        def action(conn: apsw.Connection):
            if wanted is None:
                return decode(conn.execute(sql))
            found: list = []
            for chunk in chunks(wanted, 500):
                found += conn.execute(f"{sql} AND key IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            return decode(found)

        if wanted is not None and not wanted:
            return {}
        return self._guard(action, {})

    def superseded_rows(self) -> tuple[set[tuple[str, int, int, int, int]], dict[str, tuple[Stamp, str, bool]]]:
        """For the superseded ranges of many files at once (a grep's matches), in one read of the cache:

        - the (path, mtime_ns, size, inode, ctime_ns) of every plain row: no superseded ranges, no document can cite
          it, not racy. A file whose stat gives one of these has no superseded line, and its row needs no
          decoding; most files are such. A file changed since its row was written gives another stamp.
        - path -> (stamp, ranges as stored, maybe cited) of the other rows that are not racy (the few with
          ranges, or that a document may cite): decoded (`decoded_ranges`) only for the files asked.

        Both empty when the cache cannot answer: every file is then looked at."""

        def action(conn: apsw.Connection):
            plain = set(
                conn.execute(
                    "SELECT path, mtime_ns, size, ino, ctime_ns FROM files"
                    " WHERE racy = 0 AND superseded = '[]' AND maybe_cited = 0"
                )
            )
            other = {
                path: ((mtime, size, ino, ctime), ranges, bool(cited))
                for path, mtime, size, ino, ctime, ranges, cited in conn.execute(
                    "SELECT path, mtime_ns, size, ino, ctime_ns, superseded, maybe_cited FROM files"
                    " WHERE racy = 0 AND (superseded != '[]' OR maybe_cited != 0)"
                )
            }
            return plain, other

        return self.reading(action, (set(), {}))

    def paths_with_superseded(self) -> list[str]:
        """Paths whose row holds superseded ranges (stamps unchecked)."""
        return self._guard(
            lambda conn: [
                path_of(k)
                for (k,) in conn.execute("SELECT key FROM files INDEXED BY files_list WHERE superseded != '[]'")
            ],
            [],
        )

    def store(
        self,
        metas: Iterable[tuple[Stamp, dict[str, Any]]],
        *,
        prune_except: set[str] | None = None,
        links: dict[str, str] | None = None,
        gone: Iterable[tuple[str, Stamp]] = (),
        skipped: tuple[str, list[Any], list[tuple[str, str, str, str | None]]] | None = None,
        still: Callable[[str, Stamp], bool] | None = None,
    ) -> bool:
        """Upsert rows (those inside the racy window marked so) in one transaction; True when it was committed.

        `prune_except` drops every other row; `gone` drops rows whose stamp is still the one given (another
        process may have stored a newer one meanwhile); `skipped` is (where, params, entries): the skipped
        entries `where` selects are replaced by `entries` (key, shown, reason, link target). `still(path,
        stamp)` is asked inside the transaction, with the write lock held: a row whose file changed since it
        was read is not stored (compare-and-set, so a slower writer never overwrites a newer row).
        """
        now = time.time_ns()
        records = []
        named: dict[str, tuple[list[tuple], list[tuple]]] = {}
        for stamp, data in metas:
            path = data["path"]
            records.append(_record(path, stamp, data, (links or {}).get(path), stamp[0] >= now - RACY_NS))
            named[path] = _link_rows(path, data)
        dropped = list(gone)
        if not records and prune_except is None and not dropped and skipped is None:
            return True

        def action(conn: apsw.Connection) -> bool:
            with _transaction(conn):
                changed: list[str] = []
                for record in records:
                    if still is not None and not still(record[1], record[2:6]):
                        continue
                    changed.append(record[0])
                    conn.execute("DELETE FROM files WHERE key = ?", (record[0],))  # its links and names too
                    conn.execute(f"INSERT INTO files VALUES (NULL, {','.join('?' * len(record))})", record)
                    file_id = conn.last_insert_rowid()
                    wikilinks, names = named[record[1]]
                    conn.executemany("INSERT INTO wikilinks VALUES (?, ?, ?, ?, ?)", wikilinks)
                    conn.executemany("INSERT INTO names VALUES (?, ?, ?)", [(n, tier, file_id) for n, tier in names])
                for path, (mtime, size, ino, ctime) in dropped:
                    changed.append(walk_key(path))
                    conn.execute(
                        "DELETE FROM files WHERE key = ? AND mtime_ns = ? AND size = ? AND ino = ? AND ctime_ns = ?",
                        (changed[-1], mtime, size, ino, ctime),
                    )
                if prune_except is not None:
                    keep = {walk_key(p) for p in prune_except}
                    stale = [
                        (k,) for (k,) in conn.execute("SELECT key FROM files INDEXED BY files_list") if k not in keep
                    ]
                    conn.executemany("DELETE FROM files WHERE key = ?", stale)
                    changed.extend(k for (k,) in stale)
                if skipped is not None:
                    where, params, entries = skipped
                    conn.execute(f"DELETE FROM skipped WHERE {where}", params)
                    conn.executemany("INSERT OR REPLACE INTO skipped VALUES (?, ?, ?, ?)", entries)
                _bump(conn, changed)
            return True

        return bool(self._guard(action, False))

    def clear(self) -> None:
        """Drop every file row and skipped entry (a cold run parses everything again)."""

        def action(conn: apsw.Connection) -> None:
            with _transaction(conn):
                conn.execute("DELETE FROM files; DELETE FROM skipped")
                _bump(conn, None)

        self._guard(action, None)

    def forget(self, paths: Iterable[str]) -> None:
        keys = [walk_key(p) for p in paths]

        def action(conn: apsw.Connection) -> None:
            with _transaction(conn):
                conn.executemany("DELETE FROM files WHERE key = ?", [(k,) for k in keys])
                _bump(conn, keys)

        if keys:
            self._guard(action, None)

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
                # rows written since the memo was last dropped (a rowid's max counted them): one row, not a count
                added = int(_first(conn.execute(f"SELECT value FROM settings WHERE key = '{_ADDED}'").fetchone()) or 0)
                if added > MEMO_ROWS:
                    conn.execute("DELETE FROM counts")
                    added = 0
                conn.executemany("INSERT OR REPLACE INTO counts VALUES (?, ?)", items)
                conn.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (_ADDED, str(added + len(items))))

        self._guard(action, None)


_ADDED = "counts_added"


def decoded_ranges(stored: str) -> list[tuple[int, int]] | None:
    """A row's superseded ranges from their stored JSON; None for a damaged value (the file is looked at)."""
    if stored == "[]":
        return []
    try:
        return [(int(a), int(b)) for a, b in json.loads(stored)]
    except (ValueError, TypeError):
        return None


def _new_rows_id() -> str:
    return os.urandom(8).hex()


def _bump(conn: apsw.Connection, keys: Iterable[str] | None) -> None:
    """Count one more change of the file rows (in the writer's transaction): counts cached against the
    last value stay good until it moves (`Catalog.listing`). `keys` are the rows' keys it stored or dropped
    (None: maybe any), kept in `changes` for `changed_keys`; the oldest beyond CHANGES_KEPT go."""
    conn.execute("UPDATE settings SET value = CAST(value AS INTEGER) + 1 WHERE key = 'files_version'")
    version = _first(conn.execute("SELECT value FROM settings WHERE key = 'files_version'").fetchone())
    if version is None:
        return  # rows in memory, for one object: nothing else reads them
    changed = None if keys is None else sorted(set(keys))
    if changed is None or len(changed) > CHANGES_KEPT:  # too many to keep: a reader behind reads every row
        conn.execute("DELETE FROM changes")
        conn.execute("INSERT OR REPLACE INTO settings VALUES ('changes_from', ?)", (str(version),))
        return
    version = int(version)
    conn.executemany("INSERT INTO changes VALUES (?, ?)", [(version, key) for key in changed])
    newest = _first(conn.execute("SELECT max(rowid) FROM changes").fetchone())
    if newest is None or newest <= CHANGES_KEPT:
        return
    last = _first(
        conn.execute(
            "SELECT version FROM changes WHERE rowid <= ? ORDER BY rowid DESC LIMIT 1", (newest - CHANGES_KEPT,)
        ).fetchone()
    )
    if last is not None:  # the versions up to `last` are no longer whole: from it on, they are
        conn.execute("DELETE FROM changes WHERE rowid <= ?", (newest - CHANGES_KEPT,))
        conn.execute("UPDATE settings SET value = max(CAST(value AS INTEGER), ?) WHERE key = 'changes_from'", (last,))


def _record(path: str, stamp: Stamp, data: dict[str, Any], link: str | None, racy: bool) -> tuple:
    """The `files` row of one FileMeta dict: the columns listings filter on, and what a row shows."""
    from fsmem.format.frontmatter import CONSOLIDATED_FIELD

    front = data.get("front_matter") or {}
    maybe_cited = int(CONSOLIDATED_FIELD in front or not front or bool(data.get("problems")))
    written = [str(t) for t in data.get("tags") or []]
    lowered = [t.lower() for t in written]
    shown = _shown(data, written if written != lowered else None)
    return (
        walk_key(path),
        path,
        *stamp,
        int(racy),
        path.count("/"),
        data.get("type"),
        timestamp_us(data.get("updated")),
        json.dumps(lowered, ensure_ascii=False),
        link,
        json.dumps(data.get("superseded") or []),
        maybe_cited,
        len(data.get("problems") or []),
        *shown,
        zlib.crc32(json.dumps([path, *shown], ensure_ascii=False).encode("utf-8", "surrogatepass")),
    )


def _link_rows(path: str, data: dict[str, Any]) -> tuple[list[tuple], list[tuple]]:
    """The `wikilinks` rows of one FileMeta dict, and its names as (name, tier) (`names` rows without the file's id)."""
    from fsmem.format.links import fold, names_of, stored_names

    key = walk_key(path)
    wikilinks = [(key, line, target, fold(target), label) for line, target, label in data.get("wikilinks") or []]
    names = names_of(
        path,
        title=data.get("title"),
        aliases=data.get("aliases") or [],
        entity=data.get("entity"),
        topic=data.get("topic"),
    )
    return wikilinks, [(name, tier) for tier, name in stored_names(names)]


# the columns `meta_of` reads, in its order
META_COLUMNS = (
    "path, mtime_ns, size, type, tags, superseded, title, description, shown_tags, created, updated, importance,"
    " entity, topic, tokens, tokens_estimated, problem_list, version, crc"
)


def _shown(data: dict[str, Any], shown_tags: list[str] | None) -> tuple:
    return (
        data.get("title"),
        data.get("description"),
        json.dumps(shown_tags, ensure_ascii=False) if shown_tags is not None else None,
        data.get("created"),
        data.get("updated"),
        data.get("importance"),
        data.get("entity"),
        data.get("topic"),
        int(data.get("tokens") or 0),
        int(bool(data.get("tokens_estimated"))),
        json.dumps(data.get("problems") or [], ensure_ascii=False),
        data.get("version"),
    )


def meta_of(row: tuple) -> dict[str, Any] | None:
    """The FileMeta dict of a row (`META_COLUMNS`), or None when it fails its checksum or does not parse."""
    path, mtime, size, kind, tags, superseded, *shown, crc = row
    try:
        if zlib.crc32(json.dumps([path, *shown], ensure_ascii=False).encode("utf-8", "surrogatepass")) != crc:
            return None
        title, description, shown_tags, created, updated, importance, entity, topic = shown[:8]
        tokens, estimated, problems, version = shown[8:]
        return {
            "path": path,
            "size": size,
            "mtime_ns": mtime,
            "title": title,
            "description": description,
            "type": kind,
            "tags": json.loads(shown_tags if shown_tags is not None else tags),
            "created": created,
            "updated": updated,
            "importance": importance,
            "entity": entity,
            "topic": topic,
            "tokens": tokens,
            "tokens_estimated": bool(estimated),
            "superseded": [tuple(r) for r in json.loads(superseded)],
            "problems": [tuple(p) for p in json.loads(problems)],
            "version": version,
        }
    except (ValueError, TypeError):
        return None


def timestamp_us(value: Any) -> int | None:
    """An ISO 8601 date or time as microseconds since 1970 UTC (exact: compares as the datetimes do), or None."""
    if not isinstance(value, str):
        return None
    import datetime as _dt  # with the parser: a plain grep needs neither

    from fsmem.format.timestamps import parse_timestamp

    parsed = parse_timestamp(value)
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return None if parsed is None else (parsed - epoch) // _dt.timedelta(microseconds=1)


def _digest(text: str) -> bytes:
    import hashlib  # only when the memo is used: a call that counts no new string never loads it

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


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


T = TypeVar("T")


def chunks(items: list[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of at most `size` (the values of one `IN (...)` each, the files of one batch)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first(row: Any) -> Any:
    """The first column of a row apsw returned (None for no row)."""
    return row[0] if row is not None else None
