"""The search index: SQLite FTS5 tables in `.fsmem/cache.sqlite`, kept in step with the files one file at a time.

Files are the only copy of the text. The index holds, per file, its stamp and
the front-matter fields search filters and weighs on; per row, its line and
flags; and the FTS5 postings of every row's analysed terms in three columns
(the row's text, its headings, and its document's names: title, entity or
topic, aliases), so a fact is found by its subject. fsmem's own postings
(`fsmem.search.postings`) hold one document per (file, cited session note), for
the document part of the score. The FTS5 tables are contentless
(`contentless_delete=1`): no text is stored, and a file's rows are deleted by
row id when it changes.

Each search re-reads only the files whose mtime, size, inode or ctime changed,
so a write through fsmem, a consolidation or a human edit is seen by the next
search: a process that holds the memory's change feed (`fsmem.store.feed`: a
Memory asked more than once) looks only at the paths it names, any other
stats every memory file. fsmem's own writes and `fsmem watch` update the
changed files at once (`SearchIndex.update`), inside the racy window, so the
readers after them read those files again: one read with the bytes its rows
were made from (its digest) keeps them. A file's rows are one range of
FTS5 row ids, packed after the previous file's (`fsmem.search.tables`). Updates are compare-and-set per
file inside `BEGIN IMMEDIATE`, so two processes updating at once both end with
the index a fresh build would give. A damaged index is dropped and rebuilt.

This module is long because it owns every connection to those tables: the
shared writer with its lock and recovery, each thread's reader, and the
refresh that walks the files. The rows answers are read back from are kept
parsed by `fsmem.search.parsed`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import os
import shutil
import sys
import threading
import time
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import Any

from fsmem.format.rows import Row
from fsmem.search import changes, raw_rows
from fsmem.search.analyzer import ANALYZER_VERSION, Analyzer
from fsmem.search.documents import Kept
from fsmem.search.parsed import FileRows, ParsedRows
from fsmem.search.parsing import (  # noqa: F401  (re-exported: the names other modules import from the index)
    GENERATED_INDEX,
    LINKED,
    MAX_ROWS,
    ROW_BITS,
    SUPERSEDED,
    Parsed,
    ParsedTask,
    Stamp,
    document_names,
    is_ranked,
    parse_file,
    parse_files,
    read_file,
    source_of,
    stamp_of,
)
from fsmem.search.postings import Pending
from fsmem.search.tables import (  # noqa: F401
    _FTS_TABLES,
    _SCHEMA,
    _TABLES,
    IndexDamaged,
    _drop_tables,
    _has_files,
    _inode,
    _insert,
    _insert_many,
    _remove,
    _stamps,
    _version,
    building,
    merge_segments,
    merge_step,
    unpack_rows,
)
from fsmem.store import cache as _cache, kill_points, workers
from fsmem.store.catalog import walk_stats
from fsmem.store.paths import STATE_DIR
from fsmem.store.progress import Progress

LEGACY_DIR = "search"  # .fsmem/search/: where the index lived before it moved into cache.sqlite
# Bump when the tables or what goes into them change: an older index is then dropped and rebuilt.
# 12: each file's digest (an index of 11 is given the column: `_migrated`); 11: each change recorded
# (fsmem.search.changes); 10: "*" and "+" bullets are facts; 9: documents in fsmem's own postings, not FTS5
# (postings.py); 8: row ids packed
INDEX_VERSION = 12
READER_CACHE_KIB = 1024  # SQLite's page cache of each thread's read connection
RACY_NS = _cache.RACY_NS  # a file written this recently is read again at the next refresh
BATCH_FILES = 500  # files per write transaction of a large (re)build, so other writers are not starved
TASKS_PER_BATCH = 10  # a batch's files are parsed in this many worker tasks, each written as it comes back
FIRST_TASK_FILES = 10  # but a build's first task's files in tasks of this many: the command begins writing sooner
BUSY_TIMEOUT_S = 60.0
# Merging the segments that writes add (`_merge_writes`): once this process's writes to the index have been
# quiet this long, a step at a time (fsmem.search.tables.MERGE_STEP_PAGES); and at most this share of one core
# over time, since every merge rewrites the whole index however little was written (100k files: 7-18 s of CPU
# and 0.8-1.0 GB written to disk, WAL and checkpoints: `bench_merge_cost.py`), so under writes that never stop
# there is one merge in 6-12 minutes
MERGE_QUIET_S = 2.0
MERGE_SHARE = 0.02


class SearchIndex:
    """Keeps the search tables of `.fsmem/cache.sqlite` in step with the files; answers term queries.

    One per memory root and process (`shared_index`). Thread-safe: every use of
    the shared connection (refreshes, updates, recovery) holds `lock`; ranking
    reads on each thread's own connection (`reading`).
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.lock = threading.RLock()
        self._conn: Any = None
        self._merging: threading.Thread | None = None  # a build's merge, running behind its answer
        self._merger: threading.Thread | None = None  # merges what this process's writes added (`_merge_writes`)
        self._merge_state = threading.Condition()  # guards the merger's start and end, and the two times below
        self._wrote_at = 0.0  # time.monotonic() of this process's latest write to the index
        self._merge_from = 0.0  # the merger waits until then (MERGE_SHARE)
        self._merge_stopped = False  # set as the process exits (`stop_merging`)
        self._merge_abandoned = False  # a stop (Ctrl-C) came while a build's merge was waited for: not waited again
        self._analyzer: Analyzer | None = None
        self._in_memory = False
        self._inode: int | None = None
        self.parsed = ParsedRows(self.root)  # the rows answers are read back from (fsmem.search.parsed)
        self.kept = Kept()  # document frequencies and the like, while the tables do not change
        self.rebuilt = False  # set when a damaged index was thrown away
        self._ticket = itertools.count(1)  # orders asks and refresh starts (next() is atomic under the GIL)
        self._refreshed_from = 0  # the ticket taken when the last finished refresh began
        self._readers = threading.local()  # each thread's read connection (see `reading`)
        # walks: of every file's stamp; restamped: files read again with their rows' bytes (`_same_bytes`)
        self.stats = {"indexed": 0, "removed": 0, "skipped": 0, "restamped": 0, "walks": 0}

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
        self.wait_merged()
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
            raw_rows.register(conn)  # before any FTS5 table is read on it: a build's raw rows are cut here
            self._prepare(conn)
        except BaseException:
            conn.close(True)
            raise
        return conn

    def _prepare(self, conn) -> None:
        _cache.refuse_foreign_schema(conn)
        if _version(conn) == _VERSION:
            return  # the common case, read without taking the write lock
        with _cache.transaction(conn):
            version = _version(conn)
            if version == _DIGESTLESS:
                _migrated(conn)
            elif version != _VERSION:
                _empty_tables(conn)

    def close(self) -> None:
        self.wait_merged()
        if self._conn is not None:
            _close(self._conn)
            self._conn = None

    def _recover(self) -> None:
        """Drop the search tables (or the whole database, when even that fails) after damage was seen."""
        self.wait_merged()
        self.rebuilt = True
        self.parsed.clear()
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

    def recover(self) -> None:
        """Drop the search tables after damage a search saw outside the tables' reads (`RowsDamaged`): the next
        refresh builds them again."""
        with self.lock:
            self._recover()

    def reading(self, action):
        """Run `action(conn)`, which only reads, on this thread's own connection, in one read transaction.

        Searches on many threads rank at once: SQLite lets readers run beside each other and beside the one
        writer (WAL), and apsw releases the GIL while SQLite works. Anything unusual (an index in memory, a
        connection that cannot be opened, damage) goes through `guarded`, which holds the lock and recovers.
        """
        if self._in_memory or self._conn is None:
            return self.guarded(action)
        local = self._readers.__dict__
        conn = local.get("conn")
        if conn is not None and local.get("inode") != self._inode:
            _close(conn)
            _close(local.pop("partner", None))
            conn = None
        try:
            if conn is None:
                conn = _cache.connect(self.path, timeout=BUSY_TIMEOUT_S)
                conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")  # a bound per thread: 32 threads, 32 MiB
                local["conn"], local["inode"] = conn, self._inode
            return _cache.read_transaction(conn, action)
        except (IndexDamaged, _cache.DatabaseError) as exc:
            if isinstance(exc, _cache.DatabaseError) and _cache.is_transient(exc):
                raise
            _close(local.pop("conn", None))
            _close(local.pop("partner", None))
            return self.guarded(action)

    def partner(self, conn):
        """A second read connection of this thread's own beside `conn`, its connection from `reading`, for the
        half of a question that runs on the helper thread (`fsmem.search.halves`) while this thread waits;
        None for any other connection (the shared one, an index in memory)."""
        local = self._readers.__dict__
        if local.get("conn") is not conn:
            return None
        found = local.get("partner")
        if found is None:
            found = local["partner"] = _cache.connect(self.path, timeout=BUSY_TIMEOUT_S)
            found.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
        return found

    def guarded(self, action):
        """Run `action(conn)`; when the index turns out damaged, rebuild it from the files and run it again; when
        the disk refuses its writes (full, or past RLIMIT_FSIZE), this process keeps its index in memory, as for a
        read-only `.fsmem/` (the search failed with 'IOError: disk I/O error')."""
        with self.lock:
            try:
                return self._rebuilt_when_damaged(action)
            except _cache.StorageFull:
                if self._in_memory:
                    raise
                self.close()  # the failed write's transaction rolled back: the file is as it was
                conn = _cache.Connection(":memory:")
                self._prepare(conn)
                self._conn, self._in_memory, self._inode = conn, True, None
                return self._rebuilt_when_damaged(action)

    def _rebuilt_when_damaged(self, action):
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
        """Bring the index in step with every file; returns how many files were re-indexed or removed.

        Where this process holds the memory's change feed (`fsmem.store.feed`: a Memory asked more than
        once), only the paths it names are looked at; else every file is statted. Searches on many
        threads share a walk: one that waited for the lock while a walk begun after it was asked ran takes
        that walk as its own (it saw every write finished before the ask), so N searches at once cost one
        walk, not N in a row.
        """
        from fsmem.store import feed as feeds

        feed = feeds.current(self.root)
        if feed is not None and feed.trusted:
            return feed.catch_up("search", self._take)
        return self._walk_all()

    def _walk_all(self) -> int:
        asked = next(self._ticket)
        with self.lock:
            if self._refreshed_from > asked:
                return 0
            began = next(self._ticket)
            changed = self.guarded(self._refresh)
            self._refreshed_from = began  # only a refresh that finished counts for the searches waiting
            return changed

    def _take(self, delta) -> int:
        """One delta of the change feed: a walk of everything, or of the files and folders it names."""
        if delta.full:
            return self._walk_all()
        paths = set(delta.files)
        for folder in delta.folders:
            paths.update(rel for rel, _full, _stat in walk_stats(self.root, self.root / folder))
            low, high = folder + "/", folder + "0"  # every indexed path under the folder ('0' follows '/')
            paths.update(
                self.guarded(
                    lambda conn, low=low, high=high: [
                        p
                        for (p,) in conn.execute(
                            "SELECT path FROM search_files WHERE path >= ? AND path < ?", (low, high)
                        )
                    ]
                )
            )
        paths.update(self._links_to(paths))
        return self.update(paths) if paths else 0

    def _links_to(self, paths: set[str]) -> list[str]:
        """Links whose target is one of `paths` (the metadata cache knows them): their rows change with it."""
        wanted = sorted(paths)

        def action(conn) -> list[str]:
            found: list[str] = []
            try:
                for at in range(0, len(wanted), 500):
                    chunk = wanted[at : at + 500]
                    marks = ",".join("?" * len(chunk))
                    found += [p for (p,) in conn.execute(f"SELECT path FROM files WHERE link IN ({marks})", chunk)]
            except _cache.DatabaseError:
                return []  # no metadata rows in this database (yet)
            return found

        return self.guarded(action) if wanted else []

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
        self.stats["walks"] += 1
        stored = conn.execute("SELECT value FROM search_meta WHERE key = 'walk'").fetchone()
        # An index not settled (never built, a build a killed command left, files written since) is compared with
        # the files as the walk finds them, whose first files to read are parsed while it goes on (`_ToRead`).
        known = None if stored is not None and stored[0] is not None else _stamps(conn, None)
        to_read = (
            None
            if known is None
            else _ToRead(self.root, known, early=True, racy_from=time.time_ns() - RACY_NS, raw=raw_rows.cuts(conn))
        )
        try:
            return self._walked(conn, stored, known, to_read)
        finally:
            if to_read is not None:
                to_read.stop()

    def _walked(self, conn, stored, known: dict[str, tuple[Stamp, bool]] | None, to_read: _ToRead | None) -> int:
        """The rest of `_refresh`, from its walk on."""
        found = []
        for entry in walk_stats(self.root):
            found.append(entry)
            if to_read is not None:
                to_read.saw(*entry)
        # A digest of every (path, stamp) seen: equal to the one stored by the last refresh that left every
        # file indexed (cleared by any later change), nothing changed, and 10k stamps need not be compared.
        digest = hashlib.blake2b(
            "\0".join(
                f"{rel}\1{st.st_mtime_ns}\1{st.st_size}\1{st.st_ino}\1{st.st_ctime_ns}" for rel, _full, st in found
            ).encode("utf-8", "surrogateescape"),
            digest_size=16,
        ).hexdigest()
        if stored is not None and stored[0] == digest:
            return 0
        if known is None:
            known = _stamps(conn, None)
        changed = self._apply(conn, found, known, list(known), complete=True, to_read=to_read)
        # a (re)build, or the rest of one a killed command left (`unmerged`): one segment per table
        if changed >= BATCH_FILES or _unmerged(conn):
            if self._in_memory:
                self._merge(conn, found, digest)
            else:  # while the caller answers from what is committed (`_merge_behind`)
                self._merge_behind(conn, found, digest)
            return changed
        self._settle(conn, found, digest)
        return changed

    def _merge_behind(self, conn, found, digest: str) -> None:
        """Merge the segments of a build (`_merge`) in a thread, while the search that built the index ranks and
        fits its answer on its own connection (`reading`): FTS5's merge is SQLite's work with the GIL released,
        on the core the build's workers have left idle, and the rows, totals and postings it rewrites are the
        ones already committed, so the answer is the one the merged tables give. Anything else that uses the
        connection waits for it (`connection`), and so does the process's exit (`_stop_merging`), unless a stop
        (Ctrl-C) comes while it waits: the merge is then interrupted (`wait_merged`) and the process ends at
        once (a daemon thread). A merge that fails, is interrupted, or whose process is killed during it leaves
        the index `unmerged` (one transaction, rolled back): the next refresh merges."""

        def merge() -> None:
            with contextlib.suppress(IndexDamaged, _cache.DatabaseError):
                self._merge(conn, found, digest)

        self._merging = threading.Thread(target=merge, name="fsmem-search-merge", daemon=True)
        self._merging.start()

    def _merge(self, conn, found, digest: str) -> None:
        """The build's segments merged into one per table, the pages freed given back, then the walk settled."""
        kill_points.reached("search-merge")
        merge_segments(conn)
        with _cache.transaction(conn):
            conn.execute("DELETE FROM search_meta WHERE key = 'unmerged'")
        conn.execute("PRAGMA incremental_vacuum").fetchall()
        kill_points.reached("search-merged")
        self._settle(conn, found, digest)

    def wait_merged(self) -> None:
        """Wait for a merge running behind a build (`_merge_behind`), unless this is its thread. A stop that comes
        while waiting (Ctrl-C's KeyboardInterrupt) interrupts the merge's statement (SQLite's interrupt: its
        transaction rolls back, the index stays `unmerged`) and is raised, not waited on: an FTS5 'optimize' is
        one statement, 7-18 s of CPU at 100k files, and a process asked to stop waited all of it."""
        merging = self._merging
        if merging is None or merging is threading.current_thread():
            return
        try:
            stop = _stop_in_flight()
            if stop is not None:  # the command's cleanup, as a Ctrl-C ends it: not a wait
                raise stop
            merging.join()
        except BaseException:
            self.abandon_merge()
            raise
        if self._merging is merging:
            self._merging = None

    def finish_merging(self) -> None:
        """As the process exits: wait for a build's merge, unless a stop abandoned it or comes now."""
        if not self._merge_abandoned:
            with contextlib.suppress(KeyboardInterrupt):
                self.wait_merged()

    def abandon_merge(self) -> None:
        """A stop ends the process (while `wait_merged` waits, or after the command's last wait, as it printed):
        a build's merge running behind the answer is interrupted, not waited for at exit (`finish_merging`)."""
        if self._merging is not None and self._merging is not threading.current_thread():
            self._merge_abandoned = True
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.interrupt()

    def _written(self) -> None:
        """This process wrote files' rows (not a build, which `merge_segments` ends): see that the merger runs."""
        if self._in_memory:
            return
        with self._merge_state:
            self._wrote_at = time.monotonic()
            self._merge_state.notify()
            if self._merger is None and not self._merge_stopped:
                self._merger = threading.Thread(
                    target=self._merge_writes, name="fsmem-search-merge-writes", daemon=True
                )
                self._merger.start()

    def _merge_writes(self) -> None:
        """Merge the segments this process's writes added, in a thread of its own, on a connection of its own.

        Each write of a file adds a segment to each FTS5 table, and a search's row part, which asks FTS5 for the
        rows of each of a few hundred files, seeks its terms in every segment: one segment more makes it some
        1.7 times as costly (docs/performance.md, "Segments after writes"). Once the writes have been quiet for
        MERGE_QUIET_S, `fsmem.search.tables.merge_step` merges them all into one, a step (one short transaction)
        at a time, stopping when a write comes and going on when they are quiet again; a merge and its pause
        after (MERGE_SHARE) take at most a share of one core. A step is a write: other writers wait for it as for any
        (SQLite's lock), readers read what is committed (WAL), and every answer is the same before and after.
        The thread ends once the tables are merged and nothing was written since, and as the process exits
        (`stop_merging`), after the step it is in."""
        conn = None
        try:
            while True:
                with self._merge_state:
                    while (wait := max(self._wrote_at + MERGE_QUIET_S, self._merge_from) - time.monotonic()) > 0:
                        if self._merge_stopped:
                            break
                        self._merge_state.wait(min(wait, threading.TIMEOUT_MAX))
                    if self._merge_stopped:
                        self._merger = None
                        self._merge_state.notify_all()
                        return
                    began = self._wrote_at
                if conn is None:
                    if not self.path.exists():
                        raise OSError("the index is gone")
                    conn = _cache.connect(self.path, timeout=BUSY_TIMEOUT_S)
                spent = time.thread_time()
                merged = False
                while not merged and self._wrote_at == began and not self._merge_stopped:
                    with _cache.transaction(conn):
                        merged = not merge_step(conn)
                spent = time.thread_time() - spent
                with self._merge_state:
                    self._merge_from = time.monotonic() + spent * (1 / MERGE_SHARE - 1)
                    if (merged and self._wrote_at == began) or self._merge_stopped:
                        self._merger = None
                        self._merge_state.notify_all()
                        return
        except (OSError, IndexDamaged, _cache.DatabaseError):
            with self._merge_state:  # the next write starts it again; a search finds any damage and rebuilds
                self._merger = None
                self._merge_state.notify_all()
        finally:
            _close(conn)

    def stop_merging(self) -> None:
        """Stop the merger after the step it is in, for good (the process exits: `_stop_merging`)."""
        with self._merge_state:
            self._merge_stopped = True
            self._merge_state.notify_all()
            self._merge_state.wait_for(lambda: self._merger is None or self._merger is threading.current_thread())

    def writes_merged(self, timeout: float | None = None) -> bool:
        """Wait until the merger (`_merge_writes`) has merged what this process wrote, or `timeout` s; whether
        it has."""
        with self._merge_state:
            return self._merge_state.wait_for(lambda: self._merger is None, timeout)

    @staticmethod
    def _settle(conn, found, digest: str) -> None:
        """Store the walk's digest when every file it saw is indexed as it saw it, else clear it."""
        with _cache.transaction(conn):
            racy = conn.execute("SELECT 1 FROM search_files WHERE mtime_ns < 0 LIMIT 1").fetchone()
            current = _stamps(conn, None)
            settled = not racy and len(current) == len(found)
            settled = settled and all(current.get(rel, ((),))[0] == stamp_of(st) for rel, _full, st in found)
            conn.execute("INSERT OR REPLACE INTO search_meta VALUES ('walk', ?)", (digest if settled else None,))

    def _apply(
        self,
        conn,
        found,
        known: dict[str, tuple[Stamp, bool]],
        candidates_gone: list[str],
        *,
        complete,
        to_read: _ToRead | None = None,
    ) -> int:
        """Index what changed of `found` against `known` (the files to read: `to_read`, when the walk found them)."""
        now = time.time_ns()
        present = {rel for rel, _, _ in found}
        gone = [rel for rel in candidates_gone if rel not in present]
        raw = raw_rows.cuts(conn)
        if to_read is None:
            to_read = _ToRead.of(self.root, known, found, racy_from=now - RACY_NS, raw=raw)
        todo = to_read.files
        if not todo and not gone:
            return 0
        if complete and _mostly_changed(to_read.moved + len(gone), len(known)):
            # a copy, a restore or a checkout of the whole memory: every stamp moved at once. Removing and
            # adding each file's rows costs 2.5 times a build from nothing (10k files: 28 s of CPU against
            # 11), and leaves the tables twice their size until merged: build them again instead.
            to_read.stop()  # its workers read the files that moved: every file is read now
            with _cache.transaction(conn):
                _empty_tables(conn)
            known, gone = {}, []
            to_read = _ToRead.of(self.root, known, found, racy_from=now - RACY_NS, raw=raw)
            todo = to_read.files
        changed = 0
        progress = Progress("indexing files for search", len(todo))
        # a build's workers send raw rows where this connection cuts them (`fsmem.search.raw_rows`)
        raw_tasks = raw and len(todo) >= BATCH_FILES
        batches = _parsed_batches(
            self.root, todo, self.analyzer, to_read.pool, to_read.racy_from, raw=raw_tasks, known=to_read.known
        )
        in_batches = len(todo) >= BATCH_FILES  # a build: its segments are merged when it ends, its changes unlogged
        stored: set[str] = set()  # terms this call has written into search_terms (committed, or it raised)
        for start in range(0, max(len(todo), 1), BATCH_FILES):
            batch = todo[start : start + BATCH_FILES]
            tasks = next(batches) if batch else iter(())
            first = next(tasks, ParsedTask([], None))  # written while the workers parse the rest of the batch
            kill_points.reached("search-parsed")
            read: set[str] = set()
            pending = Pending()  # the documents' postings, written once per batch (fsmem.search.postings)
            with _cache.transaction(conn):
                if start == 0:
                    if in_batches:
                        conn.execute("INSERT OR REPLACE INTO search_meta VALUES ('unmerged', 1)")
                        building(conn)
                new_terms: set[str] = set()
                for parsed, task_terms in itertools.chain([first], tasks):
                    read.update(p.path for p in parsed)
                    current_of = _current(conn, [item.path for item in parsed])
                    written: list[tuple[Parsed, bool]] = []
                    for item in parsed:
                        current = current_of.get(item.path)
                        if current is not None and current[:4] == item.stamp and current[4]:
                            self.stats["skipped"] += 1
                            continue  # another process indexed this very version meanwhile
                        try:
                            now_stamp = stamp_of(os.stat(os.path.join(self.root, item.path)))
                        except OSError:  # removed since it was read (by another process, whose refresh may be over)
                            changed += _remove(conn, item.path)
                            continue
                        if now_stamp != item.stamp:
                            continue  # changed again since it was read: the next refresh takes it
                        racy = item.stamp[0] >= now - RACY_NS
                        if current is not None and _same_bytes(current, item):
                            # read again (racy, or a new inode or ctime) with the bytes its rows were made from:
                            # they stay, and so does everything kept of them; no change, no segment, no merge
                            _restamp(conn, item, racy)
                            self.stats["restamped"] += 1
                            conn.execute("DELETE FROM search_meta WHERE key = 'walk'")
                            continue
                        if current is not None:
                            _remove(conn, item.path)
                        written.append((item, racy))
                        changed += 1
                    if task_terms is not None and len(written) == len(parsed):
                        new_terms.update(task_terms.split())  # the task's files all written: their terms
                    else:
                        new_terms.update(*(item.terms.split() for item, _racy in written))
                    if written:
                        conn.execute("DELETE FROM search_meta WHERE key = 'walk'")
                        _insert_many(conn, written, pending, logged=not in_batches, terms=new_terms)
                vanished = [rel for rel, _ in batch if rel in known and rel not in read]
                for rel in [*vanished, *(gone if start == 0 else ())]:
                    if not os.path.exists(os.path.join(self.root, rel)):
                        changed += _remove(conn, rel)
                new_terms -= stored  # a build's later batches mostly repeat the words of the first
                if new_terms:
                    conn.executemany("INSERT OR IGNORE INTO search_terms VALUES (?)", ((t,) for t in new_terms))
                    stored |= new_terms
                pending.flush(conn)
                changes.prune(conn)
                kill_points.reached("search-batch")
            kill_points.reached("search-committed")
            progress.step(len(batch))
        progress.finish()
        self.stats["indexed"] += changed
        if changed and not in_batches:
            self._written()
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

    def rows_of(self, rel: str, expected: Stamp | None = None) -> tuple[Stamp, FileRows] | None:
        """The rows of one file as it is now (parsed once per version and kept), or None when it is gone;
        `expected`: the stamp the index holds for it (`ParsedRows.rows_of`)."""
        return self.parsed.rows_of(rel, expected)


def _parsed_batches(
    root: Path,
    todo: list[tuple[str, str]],
    analyzer: Analyzer,
    pool: workers.Pool | None = None,
    racy_from: int | None = None,
    *,
    raw: bool = False,
    known: Container[str] = (),
) -> Iterator[Iterator[ParsedTask]]:
    """The files of `todo` read and parsed, BATCH_FILES at a time, in order: per batch, its files a list at a
    time (`ParsedTask`). In worker processes when there are enough files (`fsmem.store.workers`): a list per task
    (`_task_ends`), as the workers finish them, so that the caller writes a task's files while they parse the next
    tasks. `pool`: the workers the walk handed the first tasks to (`_ToRead`); they are given the rest.
    `racy_from`: which files' digests the index may want (`fsmem.search.parsing.digest_wanted`), but for the
    tasks that hold a file `known` to the index (`_racy_from_of`). `raw`: the
    workers' tasks ask for raw rows (`fsmem.search.raw_rows`; never those parsed here, nor what `pool` was
    given already, which its walk decided)."""
    if pool is None and (len(todo) < workers.PARALLEL_FROM or workers.count() <= 1):
        for start in range(0, len(todo), BATCH_FILES):
            batch = todo[start : start + BATCH_FILES]
            yield iter(
                [
                    ParsedTask(
                        [
                            p
                            for p in (
                                read_file(
                                    root, rel, full, analyzer, racy_from=_racy_from_of([(rel, full)], known, racy_from)
                                )
                                for rel, full in batch
                            )
                            if p
                        ],
                        None,
                    )
                ]
            )
        return
    cuts = [0, *itertools.takewhile(lambda end: end < len(todo), _task_ends()), len(todo)]
    tasks = [
        (str(root), todo[start:end], _racy_from_of(todo[start:end], known, racy_from), raw)
        for start, end in itertools.pairwise(cuts)
    ]
    per_batch = [0] * -(-len(todo) // BATCH_FILES)
    for start in cuts[:-1]:
        per_batch[start // BATCH_FILES] += 1
    if pool is None:
        parsed = workers.mapped(parse_files, tasks, len(todo))
    else:
        parsed = _rest_of(pool, tasks)
    for count in per_batch:
        yield itertools.islice(parsed, count)


def _racy_from_of(files: list[tuple[str, str]], known: Container[str], racy_from: int | None) -> int | None:
    """The `racy_from` of a task of `files`: None (every file digested) where the index holds one of them, whose
    digest `_same_bytes` compares; else `racy_from`. The rest of a killed build reads none it holds: its 5,000
    files at 10k (22 MB) are not digested, some 40 ms of the workers' CPU."""
    return None if any(rel in known for rel, _full in files) else racy_from


def _rest_of(pool: workers.Pool, tasks: list[tuple]) -> Iterator[ParsedTask]:
    """The results of `tasks` from `pool`, which was given the first of them already (`pool.given`)."""
    with pool:
        for task in tasks[pool.given :]:
            pool.put(task)
        pool.close()
        yield from pool.results()


def _task_ends() -> Iterator[int]:
    """Where a build's tasks end, in its files (`todo`, whatever its length): each batch of BATCH_FILES in
    TASKS_PER_BATCH tasks, and the first batch's first task's files in tasks of FIRST_TASK_FILES, so that the
    command waits for a few files, not 50, before it writes."""
    task_files = BATCH_FILES // TASKS_PER_BATCH
    yield from range(FIRST_TASK_FILES, task_files, FIRST_TASK_FILES)
    yield from itertools.count(task_files, task_files)


class _ToRead:
    """The files a refresh reads again (those `known` holds with another stamp, racy, or not at all), gathered
    as its walk finds them (`saw`, in walk order).

    `early`: once they are enough for worker processes (`workers.PARALLEL_FROM`), each task's files
    (`_task_ends`) are handed to the workers as soon as the walk has found them (`pool`), so that they parse
    while the walk goes on, and the command that builds has its first files parsed when its walk ends, where
    it waited for its workers to start and parse them after: its start, which a command that continues a
    killed build pays once more than the build it continues (docs/performance.md).

    `racy_from`: an mtime no later than the one from which the refresh judges a file racy: only the files modified
    since are digested (`fsmem.search.parsing.digest_wanted`), but in a task with a file `known` holds, where
    every file is (a file read again with the bytes of its row keeps it: `_same_bytes`; `_racy_from_of`)."""

    def __init__(
        self, root: Path, known: dict[str, tuple[Stamp, bool]], *, early: bool, racy_from: int, raw: bool = False
    ):
        self.root, self.known = str(root), known
        self.raw = raw
        self.racy_from = racy_from
        self.files: list[tuple[str, str]] = []
        self.moved = 0  # indexed files whose stamp is not their row's
        self.pool: workers.Pool | None = None
        self._early = early and workers.count() > 1
        self._ends = _task_ends()
        self._cut, self._end = 0, next(self._ends)

    @classmethod
    def of(
        cls,
        root: Path,
        known: dict[str, tuple[Stamp, bool]],
        found: Iterable[tuple[str, str, os.stat_result]],
        *,
        racy_from: int,
        raw: bool = False,
    ):
        """The files of a walk done already (`found`) to read again, none handed out early."""
        to_read = cls(root, known, early=False, racy_from=racy_from, raw=raw)
        for entry in found:
            to_read.saw(*entry)
        return to_read

    def saw(self, rel: str, full: str, st: os.stat_result) -> None:
        have, stamp = self.known.get(rel), stamp_of(st)
        if have is None or have[0] != stamp or have[1]:
            self.files.append((rel, full))
            self.moved += have is not None and have[0] != stamp
            if self._early and len(self.files) >= self._end and len(self.files) >= workers.PARALLEL_FROM:
                self._hand_out()

    def _hand_out(self) -> None:
        if self.pool is None:
            self.pool = workers.Pool(parse_files, workers.count())
        while self._end <= len(self.files):
            # raw rows once the files are a build's (BATCH_FILES: its batches are written unlogged)
            raw = self.raw and len(self.files) >= BATCH_FILES
            files = self.files[self._cut : self._end]
            self.pool.put((self.root, files, _racy_from_of(files, self.known, self.racy_from), raw))
            self._cut, self._end = self._end, next(self._ends)

    def stop(self) -> None:
        """End the workers, if any (what they parsed is not wanted, or was taken)."""
        if self.pool is not None:
            self.pool.stop()
            self.pool = None


_VERSION = f"{INDEX_VERSION}:{ANALYZER_VERSION}"
_DIGESTLESS = f"11:{ANALYZER_VERSION}"  # the same tables without `search_files.digest`


def _migrated(conn) -> None:
    """An index of version 11 given `search_files.digest` (NULL: its files' rows are made again the next time
    they are read, as before), in the caller's transaction: the same rows, not a rebuild (100k files: minutes)."""
    conn.execute("ALTER TABLE search_files ADD COLUMN digest BLOB")
    conn.execute("UPDATE search_meta SET value = ? WHERE key = 'version'", (_VERSION,))


def _empty_tables(conn) -> None:
    """Drop the search tables and make them again, empty, under a new `built` (in the caller's transaction, so
    another process sees either the tables before or the empty ones, never none)."""
    _drop_tables(conn)
    conn.execute(_SCHEMA)
    conn.executemany(
        "INSERT INTO search_meta VALUES (?, ?)",
        [("version", _VERSION), ("rows", 0), ("docs", 0), ("next", 1), ("changes", 0), ("built", os.urandom(8).hex())],
    )


def _mostly_changed(changed: int, indexed: int) -> bool:
    """Whether `changed` of the `indexed` files (changed or gone since they were indexed) are at least half of
    them, and a batch's worth."""
    return indexed >= BATCH_FILES and changed >= max(BATCH_FILES, indexed // 2)


def _current(conn, paths: list[str]) -> dict[str, tuple[int, int, int, int, bool, bytes | None]]:
    """path -> (stamp as stored, not racy, digest) of those of `paths` the index holds: one query for a batch."""
    found: dict[str, tuple[int, int, int, int, bool, bytes | None]] = {}
    for start in range(0, len(paths), 500):
        chunk = paths[start : start + 500]
        for path, *stamp, settled, digest in conn.execute(
            "SELECT path, mtime_ns, size, ino, ctime_ns, mtime_ns >= 0, digest FROM search_files"
            f" WHERE path IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            found[path] = (*stamp, bool(settled), digest)
    return found


def _same_bytes(current: tuple[int, int, int, int, bool, bytes | None], item: Parsed) -> bool:
    """Whether the file was read with the bytes and mtime its row was made from: its rows, and everything ranking
    keeps of it (the mtime is its recency where it has no `updated`), are the same."""
    digest = current[5]
    return digest is not None and digest == item.digest and abs(current[0]) == item.stamp[0]


def _restamp(conn, item: Parsed, racy: bool) -> None:
    """Store a file's new stamp (its inode and ctime may have moved; racy or no more) beside rows that stay; its
    digest stays while the row is racy, and goes once the stamp proves the bytes."""
    mtime = -item.stamp[0] if racy and item.stamp[0] > 0 else item.stamp[0]
    conn.execute(
        "UPDATE search_files SET mtime_ns = ?, size = ?, ino = ?, ctime_ns = ?, digest = ? WHERE path = ?",
        (mtime, *item.stamp[1:], item.digest if racy else None, item.path),
    )


def _unmerged(conn) -> bool:
    return conn.execute("SELECT 1 FROM search_meta WHERE key = 'unmerged'").fetchone() is not None


def _close(conn) -> None:
    """Close a connection (if any) whatever state it is in (a damaged database may refuse even that)."""
    if conn is not None:
        with contextlib.suppress(_cache.DatabaseError):
            conn.close(True)


_shared: dict[Path, SearchIndex] = {}


def _stop_in_flight() -> BaseException | None:
    """The stop (KeyboardInterrupt, a stop signal's `Stopped`) being handled where this is called (a `finally`
    of the command it ends), else None; an error or `SystemExit` is not one: the process ends as asked."""
    exc = sys.exc_info()[1]
    return exc if exc is not None and not isinstance(exc, (Exception, SystemExit, GeneratorExit)) else None


def abandon_merges() -> None:
    """The process ends for a stop (the CLI's boundary caught a Ctrl-C): no build's merge is waited for."""
    for index in list(_shared.values()):
        index.abandon_merge()


@atexit.register
def _stop_merging() -> None:
    """Let each merger end its step, and each build's merge end (`finish_merging`), before the interpreter stops
    their threads (daemons) in the middle of one."""
    for index in list(_shared.values()):
        index.stop_merging()
        index.finish_merging()


def shared_index(root: Path) -> SearchIndex:
    """One index per memory root and process, so a long-lived server keeps its connection and parsed files."""
    key = Path(root).resolve()
    if key not in _shared:
        _shared[key] = SearchIndex(key)
    return _shared[key]
