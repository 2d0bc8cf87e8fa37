"""What fsmem knows about each memory file without reading its body again: the catalog, answered in SQL.

Every memory file has one row in the metadata cache (`fsmem.store.cache`):
its `FileMeta` (`fsmem.store.meta`) and the columns listings filter, count,
order and page on. A call first brings the rows it will read in step with
the files, then asks SQLite, and decodes only the rows it returns:

- a process asked once (the CLI, a short script) walks the folders it lists
  (scandir and stat; a file whose stamp is unchanged is not opened);
- a catalog asked more than once takes the memory's change feed
  (`fsmem.store.feed`) from its second call on, and refreshes only the
  paths that changed — with a whole walk where events cannot be trusted.

`ls`, `check`, `context`, grep's front-matter filters and a scope's view of
the memory all go through `listing` and `paths` (`fsmem.store.selection`
says what they select).

This module is long because every query of the catalog is here, and each
imports what it decodes (`Selection`, `FileMeta`) itself: a plain grep, which
asks only for superseded ranges, loads neither (docs/performance.md, "Start-up
and one-shot commands").
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem.errors import InvalidArgument
from fsmem.store.cache import META_COLUMNS, MetaCache, meta_of, stamp_of
from fsmem.store.paths import relative
from fsmem.store.scope import Scope
from fsmem.store.superseded_lines import Fresh, fresh_rows, superseded_of, superseded_ranges  # noqa: F401
from fsmem.store.walk import (  # noqa: F401  (the catalog's walk; imported from here by callers)
    FOLDER,
    Skipped,
    folder_range,
    link_target,
    probe,
    skipped_key,
    walk,
    walk_entries,
    walk_key,
    walk_stats,
)
from fsmem.tokens import TokenCounter

if TYPE_CHECKING:
    from datetime import datetime

    from fsmem.store.freshness import Freshness
    from fsmem.store.meta import (  # the catalog's vocabulary, imported from here by callers
        EXACT_COUNT_LIMIT as EXACT_COUNT_LIMIT,
        HEAD_BYTES as HEAD_BYTES,
        NOTE_HEAD_BYTES as NOTE_HEAD_BYTES,
        FileMeta as FileMeta,
        is_memory_file as is_memory_file,
        matches_filters as matches_filters,
        read_meta as read_meta,
    )
    from fsmem.store.selection import Selection
COUNTS_KEPT = 64
FRESH_FROM = 64  # a grep's superseded ranges of more files than this come from rows caught up on the feed
PAGE_ROWS = 200  # rows fetched with the total, in the same read transaction; a longer answer fetches more


class Found:
    """A listing's rows: how many match, the matching files from the offset on (decoded as they are taken),
    and the entries under the same folder and scope that could not be used (path shown, reason).

    A plain record, not a dataclass: making one execs its methods at import, which every command
    paid, listing or not."""

    __slots__ = ("total", "metas", "skipped", "created", "links")  # created, links: for check

    def __init__(
        self,
        total: int,
        metas: Iterator[FileMeta],
        skipped: list | None = None,
        created: list | None = None,
        links: list | None = None,
    ):
        self.total, self.metas = total, metas
        self.skipped: list[tuple[str, str]] = [] if skipped is None else skipped
        self.created: list[tuple[str, str | None]] = [] if created is None else created
        self.links: list[tuple[str, str]] = [] if links is None else links  # (path, real target) of each link


class Catalog:
    """The memory files and their metadata, kept in the metadata cache and answered in SQL.

    With `use_cache=False` the rows live in memory and every file is parsed
    at every call (what the benchmarks call a cold run). With a `scope`, only
    the files in it exist for this catalog. `feed=False` keeps it walking at
    every call, however often it is asked.
    """

    def __init__(
        self,
        root: Path,
        counter: TokenCounter,
        *,
        use_cache: bool = True,
        scope: Scope | None = None,
        feed: bool = True,
    ):
        self.root = Path(root)
        self.counter = counter
        self.scope = scope
        self.cold = not use_cache
        self.cache = MetaCache(self.root, counter.encoding_name, in_memory=self.cold)
        if counter.memo is None:
            counter.memo = self.cache
        self._lock = threading.RLock()
        self._calls = 0
        self._wants_feed = feed and use_cache
        self._feed: Any = None
        self._consumer: str | None = None  # the feed's consumer these rows catch up as (`_sync`)
        self._release: weakref.finalize | None = None
        self._rows: Freshness | None = None
        self._counts: dict[tuple[str, tuple], tuple[int, int]] = {}  # clause -> (files_version, total)

    # -- keeping the rows in step with the files -----------------------------------
    @property
    def rows(self) -> Freshness:
        """What keeps the rows fresh (fsmem.store.freshness), loaded by the first call that lists."""
        if self._rows is None:
            from fsmem.store.freshness import Freshness

            self._rows = Freshness(self.root, self.counter, self.cache)
        return self._rows

    def sync(self, start: str | None = None, start_is_file: bool = False) -> None:
        """Bring the rows under `start` (a memory path; None: all) in step with the files, before a query."""
        with self._lock:
            self._calls += 1
            self.cache.same_file()
            if self.cold:
                self.cache.clear()
            self._storing(lambda: self._sync(start, start_is_file))

    def _storing(self, action: Callable[[], None]) -> None:
        """Run `action`; where the cache cannot store rows, again with them in memory (answers stay whole)."""
        from fsmem.store.freshness import Unstored

        try:
            action()
        except Unstored:
            self.cache.to_memory()  # this catalog's rows live in memory from now on
            action()

    def _sync(self, start: str | None, start_is_file: bool) -> None:
        feed = self._feed_for_call()
        rows_id = self.cache.rows_id() if feed is not None and feed.trusted else None
        if rows_id is None:  # no feed, one that cannot be trusted, or rows in memory: the walk
            self.rows.walk(start, start_is_file, self.scope)
            return
        # one consumer per database of rows, shared by every catalog of the memory in this process: what one
        # of them caught up is caught up for all (32 views of a server walk once, not 32 times)
        consumer = f"catalog:{rows_id}"
        if self._consumer != consumer:
            if self._consumer is not None:
                feed.forget(self._consumer)
            self._consumer = consumer
            self.rows.remind = lambda rels, when: feed.later(consumer, rels, when)
        feed.catch_up(consumer, self.rows.apply)

    def count_call(self) -> None:
        """A call that does not list (search) still counts: from the second on, this catalog holds the
        memory's change feed, which the search index then catches up through (`SearchIndex.refresh`)."""
        with self._lock:
            self._calls += 1
            self._feed_for_call()

    def hold_feed(self) -> Any:
        """Take the memory's change feed now, as `fsmem watch` does; None where this catalog walks every call."""
        with self._lock:
            self._calls = max(self._calls, 2)
            return self._feed_for_call()

    def _feed_for_call(self) -> Any:
        """The change feed, from the second call on (a catalog asked once never starts one), or from the first
        when one already runs for this memory in this process (another `Memory` of it holds it)."""
        if self._feed is None and self._wants_feed and (self._calls >= 2 or _feed_running(self.root)):
            from fsmem.store import feed as feeds

            self._feed = feeds.acquire(self.root)
            self._release = weakref.finalize(self, feeds.release, self._feed)
        return self._feed

    # -- answers -------------------------------------------------------------------
    def listing(self, selection: Selection, *, offset: int = 0, limit: int | None = None) -> Found:
        """The files `selection` keeps (in this catalog's scope), in walk order from `offset`: the total and
        the first rows in one read of the cache, further rows as they are taken (at most `limit`)."""
        from fsmem.store.selection import skipped_where, where

        self.sync(selection.start, selection.start_is_file)
        sql, params = where(selection, self.scope)
        first = PAGE_ROWS if limit is None else max(0, min(limit, PAGE_ROWS))
        gaps_sql, gaps_params = skipped_where(selection.start, selection.start_is_file, self.scope)

        def read(conn) -> tuple[int, list, list]:
            total = self._count(conn, sql, params)
            rows = conn.execute(_PAGE.format(where=sql), [*params, first, offset]).fetchall() if first else []
            gaps = conn.execute(f"SELECT shown, reason FROM skipped WHERE {gaps_sql} ORDER BY key", gaps_params)
            return total, rows, [tuple(g) for g in gaps]

        total, rows, gaps = self.cache.reading(read, (0, [], []))

        def metas() -> Iterator[FileMeta]:
            taken, at = rows, offset
            while taken:
                for row in taken:
                    meta = self._decode(row)
                    if meta is not None:
                        yield meta
                at += len(taken)
                left = PAGE_ROWS if limit is None else min(PAGE_ROWS, limit - (at - offset))
                if left <= 0 or len(taken) < PAGE_ROWS:
                    return
                taken = self.cache.select(_PAGE.format(where=sql), [*params, left, at], [])

        return Found(total, metas(), gaps)

    def _count(self, conn, sql: str, params: list) -> int:
        """How many rows the clause selects; kept while the rows have not changed (`files_version`), so an
        `ls` of 100k files does not count them again at every call."""
        version = self.cache.files_version(conn)
        key = (sql, tuple(params))
        kept = self._counts.get(key)
        if kept is not None and kept[0] == version and version >= 0:
            return kept[1]
        total = conn.execute(f"SELECT count(*) FROM files INDEXED BY files_list WHERE {sql}", params).fetchone()[0]
        if len(self._counts) >= COUNTS_KEPT:
            self._counts.pop(next(iter(self._counts)))
        self._counts[key] = (version, total)
        return total

    def problems(self, selection: Selection) -> Found:
        """For `check`: the files `selection` keeps that have problems (decoded), the total, the skipped
        entries, (path, created) of each session note among them (a note dated later is held back), and (path,
        real target) of each symbolic link among them."""
        from fsmem.store.selection import skipped_where, where

        self.sync(selection.start, selection.start_is_file)
        sql, params = where(selection, self.scope)
        gaps_sql, gaps_params = skipped_where(selection.start, selection.start_is_file, self.scope)

        def read(conn) -> tuple[int, list, list, list, list]:
            total = conn.execute(f"SELECT count(*) FROM files INDEXED BY files_list WHERE {sql}", params).fetchone()
            rows = conn.execute(f"SELECT {META_COLUMNS} FROM files WHERE {sql} AND problems > 0 ORDER BY key", params)
            low, high = folder_range("sessions")
            notes = conn.execute(
                f"SELECT path, created FROM files WHERE {sql} AND key >= ? AND key < ? ORDER BY key",
                [*params, low, high],
            )
            gaps = conn.execute(f"SELECT shown, reason FROM skipped WHERE {gaps_sql} ORDER BY key", gaps_params)
            links = conn.execute(f"SELECT path, link FROM files WHERE {sql} AND link IS NOT NULL ORDER BY key", params)
            return total[0], rows.fetchall(), [tuple(n) for n in notes], [tuple(g) for g in gaps], links.fetchall()

        total, rows, notes, gaps, links = self.cache.reading(read, (0, [], [], [], []))
        metas = [meta for meta in (self._decode(row) for row in rows) if meta is not None]
        return Found(total, iter(metas), gaps, notes, [tuple(link) for link in links])

    def too_large(self, selection: Selection, limit: int | None = None, *, fresh: bool = True) -> list[tuple[str, int]]:
        """(path, size) of the files `selection` keeps that are over `limit` (EXACT_COUNT_LIMIT: the search index
        holds no rows of them, `fsmem.search.parsing.read_file`), which check and grep report rather than pass
        in silence; unless `fresh`, as the catalog last saw them (a grep walks nothing of its own)."""
        from fsmem.store.selection import where

        if limit is None:
            from fsmem.store.meta import EXACT_COUNT_LIMIT as limit
        if fresh:
            self.sync(selection.start, selection.start_is_file)
        sql, params = where(selection, self.scope)
        rows = self.cache.select(
            f"SELECT path, size FROM files INDEXED BY files_list WHERE {sql} AND size > ? ORDER BY key",
            [*params, limit],
            [],
        )
        return [(path, size) for path, size in rows]

    def paths(self, selection: Selection) -> list[str]:
        """The paths `selection` keeps, in walk order, without decoding a row."""
        from fsmem.store.selection import where

        self.sync(selection.start, selection.start_is_file)
        sql, params = where(selection, self.scope)
        rows = self.cache.select(f"SELECT path FROM files INDEXED BY files_list WHERE {sql} ORDER BY key", params, [])
        return [row[0] for row in rows]

    def written_since(self, horizon: datetime) -> set[str]:
        """The paths (in scope) of files whose mtime is after `horizon` (what recall calls new)."""
        from fsmem.store.selection import Selection, where

        self.sync()
        sql, params = where(Selection(), self.scope)
        limit_ns = int(horizon.timestamp() * 1_000_000_000)
        rows = self.cache.select(
            f"SELECT path FROM files INDEXED BY files_list WHERE {sql} AND mtime_ns > ?", [*params, limit_ns], []
        )
        return {row[0] for row in rows}

    def version(self) -> int:
        """The rows' state after catching up with the files: equal values, equal rows (-1: unknown)."""
        self.sync()
        return int(self.cache.reading(self.cache.files_version, -1))

    def rescan(self) -> bool:
        """Walk the whole memory into the rows whatever the feed says; True when that changed them (`fsmem
        watch`'s check after an overflow and every period: a change no event reported)."""
        with self._lock:
            self.cache.same_file()
            before = self.cache.reading(self.cache.files_version, -1)
            self._storing(lambda: self.rows.walk(None, False, self.scope))
            after = self.cache.reading(self.cache.files_version, -1)
        return after != before or after < 0

    def visible_test(self) -> Callable[[str], bool]:
        """`visible().__contains__`, the set made on first use (an answer kept from before needs none)."""
        made: list[set[str]] = []

        def test(rel: str) -> bool:
            if not made:
                made.append(self.visible())
            return rel in made[0]

        return test

    def visible(self) -> set[str]:
        """The paths this catalog's scope sees (every memory file, for a catalog without one)."""
        from fsmem.store.selection import Selection

        return set(self.paths(Selection()))

    def entries(self, start: Path | None = None, skipped: list[tuple[str, str]] | None = None) -> list[FileMeta]:
        """Every memory file under `start` (default: all), decoded; files that cannot be read go to `skipped`."""
        from fsmem.store.selection import Selection

        rel = relative(self.root, Path(start)) if start is not None else None
        is_file = rel not in (None, ".") and not os.path.isdir(self.root / str(rel))
        found = self.listing(Selection.of(rel, start_is_file=is_file))
        if skipped is not None:
            skipped.extend(found.skipped)
        return list(found.metas)

    def get(self, path: Path, *, full: bool = False) -> FileMeta:
        """One file's metadata, from its row when that is fresh (its stamp checked), else parsed and stored.

        A row keeps what listings show; `full` reads the file for the rest too (its headings and front matter)."""
        rel = relative(self.root, path)
        stat = path.stat()
        stamp = stamp_of(stat)
        with self._lock:
            if not full:
                rows = self.cache.select(
                    f"SELECT {META_COLUMNS}, ino, ctime_ns, racy FROM files WHERE key = ?", [walk_key(rel)], []
                )
                if rows and (rows[0][1], rows[0][2], *rows[0][-3:-1]) == stamp and not rows[0][-1]:
                    meta = _decoded(rows[0][:-3])
                    if meta is not None:
                        return meta
            from fsmem.store.meta import read_meta

            meta = read_meta(self.root, path, self.counter, stat)
            link = link_target(self.root, rel)
            self.cache.store([(stamp, meta.to_dict())], links={rel: link} if link else None, still=self.rows.still)
            return meta

    def _decode(self, row: tuple) -> FileMeta | None:
        """A row's FileMeta; a row that fails its checksum is read again from the file (and stored)."""
        meta = _decoded(row)
        if meta is not None:
            return meta
        self.cache.forget([row[0]])
        try:
            return self.get(self.root / row[0])
        except (OSError, InvalidArgument):
            return None

    def changed(self, rels: list[str]) -> None:
        """fsmem wrote these paths: the next call refreshes them, whatever the events say."""
        feed = self._feed
        if feed is not None:
            feed.mark(rels)

    def close(self) -> None:
        """Give the change feed back (when this was its last user) and close the cache's connection."""
        with self._lock:
            release, self._release, self._feed = self._release, None, None
            self._consumer = None
            if self._rows is not None:
                self._rows.remind = None
            found = release.detach() if release is not None else None
            if found is not None:  # given back here, not by calling the finalizer, which is a no-op once weakref's
                found[1](*found[2])  # exit hook has run (at exit, or in a process whose test harness ran it)
            self.cache.flush_counts()
            self.cache.close()

    # -- superseded ranges (grep and read): fsmem.store.superseded_lines -------------------
    def superseded(self, rels: list[str], *, every_file: bool = True) -> dict[str, list[tuple[int, int]]]:
        """Superseded line ranges of the given files (missing files are left out; with `every_file` False, so
        are those that have none)."""
        fresh = self._fresh_rows() if len(rels) > FRESH_FROM else None
        return superseded_ranges(self.root, self.cache, rels, fresh, every_file=every_file)

    def superseded_hint(self) -> list[str]:
        """Files the cache last saw with superseded ranges: a quick guess that `superseded` verifies."""
        fresh = self._fresh_rows()
        if fresh is not None:
            return fresh.with_ranges()
        return self.cache.paths_with_superseded()

    def _fresh_rows(self) -> Fresh | None:
        """On a trusted change feed, the rows caught up now, as `fsmem.store.superseded_lines.Fresh`; else None.

        A grep counts as a call when it starts (`count_call`), so a `Memory` that greps again holds the feed
        (a one-shot `fsmem grep` never starts one)."""
        feed = self._feed
        if feed is None or not feed.trusted or self.cold:
            return None
        self.sync()
        return fresh_rows(self.cache)


def _feed_running(root: Path) -> bool:
    """A feed of `root` runs in this process (never true in a process that has not imported the feed)."""
    feeds = sys.modules.get("fsmem.store.feed")
    return feeds is not None and feeds.running(root)


_PAGE = (
    f"SELECT {META_COLUMNS} FROM files WHERE rowid IN (SELECT rowid FROM files INDEXED BY files_list"
    " WHERE {where} ORDER BY key LIMIT ? OFFSET ?) ORDER BY key"
)


def _decoded(row: tuple) -> FileMeta | None:
    """The FileMeta of a row (`META_COLUMNS`) when it matches its checksum; else None (the file is read again)."""
    from fsmem.store.meta import FileMeta

    data = meta_of(row)
    return FileMeta.from_dict(data) if data is not None else None


_META = ("EXACT_COUNT_LIMIT", "HEAD_BYTES", "NOTE_HEAD_BYTES", "FileMeta", "is_memory_file", "matches_filters")


def __getattr__(name: str) -> Any:
    """fsmem.store.meta's names, the catalog's vocabulary, loaded on first use: a plain grep makes no FileMeta."""
    if name in _META or name == "read_meta":
        from fsmem.store import meta

        return getattr(meta, name)
    raise AttributeError(f"module 'fsmem.store.catalog' has no attribute {name!r}")
