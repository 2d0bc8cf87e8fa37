"""Keeping the metadata cache's rows in step with the files: the freshness walk, and the feed's refresh.

A row is read again only when its file's stamp (mtime, size, inode, ctime) is not
the stored one, or when the row was stored marked racy. `walk` is the
freshness floor of a process asked once: scandir and stat of the folders a
listing covers, nothing opened for an unchanged file. `apply` takes one
delta of the change feed (`fsmem.store.feed`): a whole walk, or only the
files and folders it names. Every write is one transaction, compare-and-set
per file (`MetaCache.store`), so two processes refreshing at once both leave
the rows a fresh walk would give.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument
from fsmem.store import kill_points, workers
from fsmem.store.cache import RACY_NS, MetaCache, Stamp, chunks, stamp_of
from fsmem.store.meta import FileMeta, read_meta
from fsmem.store.progress import Progress
from fsmem.store.scope import Scope
from fsmem.store.selection import region
from fsmem.store.walk import FOLDER, Skipped, probe, skipped_key, walk_entries, walk_key
from fsmem.tokens import TokenCounter

BATCH_FILES = 500  # rows per transaction of a large build: what a killed command leaves for the next
PROBE_LIMIT = 4000  # more changed files than this at once: the whole memory is walked instead


class Unstored(Exception):
    """The rows could not be written (a lock held past the busy timeout, a read-only file)."""


class Freshness:
    """Brings one catalog's rows in step with the files of its root."""

    def __init__(self, root: Path, counter: TokenCounter, cache: MetaCache):
        self.root = root
        self.counter = counter
        self.cache = cache
        self.walks = 0  # freshness walks taken (a folder's or the whole memory's), for tests and benchmarks
        # with a change feed: rows stored racy are handed over again once a second look can store them settled
        self.remind: Callable[[set[str], float], None] | None = None

    def apply(self, delta: Any) -> None:
        """Take one delta of the feed into the rows: a whole walk, or the files and folders it names."""
        if delta.full:
            self.walk(None, False, None)
            return
        for folder in sorted(delta.folders):
            self.walk(folder, False, None)
        files = set(delta.files)
        if len(files) > PROBE_LIMIT:
            self.walk(None, False, None)  # as cheap as that many stats, and one transaction
        elif files:
            self.probe(files | self._links_to(files))

    def walk(self, start: str | None, start_is_file: bool, scope: Scope | None) -> None:
        """The freshness walk: scandir and stat under `start`; parse only files whose stamp is not the row's."""
        self.walks += 1
        skipped = Skipped()
        targets: dict[str, str] = {}
        top = self.root / start if start else None
        found = list(walk_entries(self.root, top, skipped, scope=scope, names_only=True, targets=targets))
        area = region(start, start_is_file, scope)
        self._store(found, self.cache.stamps(*area) or {}, skipped, targets, area, area)

    def probe(self, rels: set[str]) -> None:
        """Look at these paths again, one by one, as the walk would (the feed's refresh)."""
        skipped = Skipped()
        targets: dict[str, str] = {}
        found: list[tuple[str, str, os.stat_result, str | None]] = []
        for rel in sorted(rels):
            result = probe(self.root, rel, skipped, targets)
            if result == FOLDER:
                self.walk(rel, False, None)
            elif isinstance(result, tuple):
                found.append((rel, os.path.join(self.root, rel), result[0], result[1]))
        keys = sorted(walk_key(rel) for rel in rels)
        gaps = sorted({skipped_key(rel, kind) for rel in rels for kind in ("", "folder skipped")})
        area = (f"key IN ({','.join('?' * len(keys))})", keys)
        self._store(found, self.cache.stamps(*area) or {}, skipped, targets, area, (_among(gaps), gaps))

    def _store(
        self,
        found: list[tuple[str, str, os.stat_result, str | None]],
        known: dict[str, tuple[Stamp, bool]],
        skipped: Skipped,
        targets: dict[str, str],
        area: tuple[str, list],
        gaps_area: tuple[str, list],
    ) -> None:
        """Parse what is new or changed, and store it, the rows of `area` whose files are gone and the skipped
        entries of `gaps_area` (nothing is written when nothing changed). A build of many files is stored
        BATCH_FILES rows at a time, each batch its own transaction, so a command killed halfway leaves the rows
        it read for the next one, which reads only the rest; the last transaction drops the rows of files gone."""
        todo: list[tuple[str, str, os.stat_result, str | None]] = []
        present: set[str] = set()
        for rel, full, stat, link in found:
            have = known.get(rel)
            if have is not None and have[0] == stamp_of(stat) and not have[1]:
                present.add(rel)
            else:
                todo.append((rel, full, stat, link))
        fresh: list[tuple[Stamp, dict[str, Any]]] = []
        links: dict[str, str] = {}
        all_fresh: list[tuple[Stamp, dict[str, Any]]] = []  # for `remind`, racy rows only
        progress = Progress("reading files' metadata", len(todo))
        for (rel, _full, stat, link), (data, reason) in zip(todo, self._read_all(todo), strict=True):
            progress.step()
            if reason is not None:
                skipped.add(rel, reason)
            if data is None:
                continue
            present.add(rel)
            fresh.append((stamp_of(stat), data))
            if link is not None:
                links[rel] = link
            if len(fresh) >= BATCH_FILES and len(todo) > BATCH_FILES:
                self._commit(fresh, links=links)
                all_fresh += self._racy(fresh)
                fresh, links = [], {}
        progress.finish()
        gone = [(rel, have[0]) for rel, have in known.items() if rel not in present]
        entries = sorted(
            (skipped_key(rel, reason), shown, reason, targets.get(rel))
            for rel, (shown, reason) in zip(skipped.rels, skipped, strict=True)
        )
        before = self.cache.select(
            f"SELECT key, shown, reason, link FROM skipped WHERE {gaps_area[0]} ORDER BY key", gaps_area[1], []
        )
        same_gaps = [tuple(row) for row in before] == entries
        if fresh or gone or not same_gaps:
            gaps = None if same_gaps else (gaps_area[0], gaps_area[1], entries)
            self._commit(fresh, links=links, gone=gone, skipped=gaps)
        self._remind(all_fresh + self._racy(fresh))

    def _commit(self, fresh: list[tuple[Stamp, dict[str, Any]]], **rest: Any) -> None:
        if not self.cache.store(fresh, still=self.still, **rest):
            raise Unstored()
        kill_points.reached("meta-committed")

    @staticmethod
    def _racy(fresh: list[tuple[Stamp, dict[str, Any]]]) -> list[tuple[Stamp, dict[str, Any]]]:
        threshold = time.time_ns() - RACY_NS
        return [(stamp, {"path": data["path"]}) for stamp, data in fresh if stamp[0] >= threshold]

    def _remind(self, racy_rows: list[tuple[Stamp, dict[str, Any]]]) -> None:
        if self.remind is not None:
            threshold = time.time_ns() - RACY_NS
            racy = {data["path"] for stamp, data in racy_rows if stamp[0] >= threshold}
            if racy:
                self.remind(racy, time.monotonic() + RACY_NS / 1e9)

    def _read_all(
        self, todo: list[tuple[str, str, os.stat_result, str | None]]
    ) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
        """(FileMeta dict or None, reason it was skipped or None) of each file of `todo`, in order: in worker
        processes when there are many (`fsmem.store.workers`), else here, counting through the memo."""
        if len(todo) < workers.PARALLEL_FROM or workers.count() <= 1:
            for rel, full, stat, _link in todo:
                yield self._read_one(full, stat, rel)
            return
        tasks = [
            (str(self.root), self.counter.encoding_name, [(rel, full, stat) for rel, full, stat, _link in chunk])
            for chunk in chunks(todo, workers.CHUNK_FILES)
        ]
        for results in workers.mapped(read_metas, tasks, len(todo)):
            yield from results

    def _read_one(self, full: str, stat: os.stat_result, rel: str) -> tuple[dict[str, Any] | None, str | None]:
        skipped = Skipped()
        meta = self._read(full, stat, rel, skipped)
        return (meta.to_dict() if meta is not None else None), (skipped[0][1] if skipped else None)

    def still(self, rel: str, stamp: Stamp) -> bool:
        try:
            return stamp_of(os.stat(os.path.join(self.root, rel))) == stamp
        except OSError:
            return False

    def _links_to(self, rels: set[str]) -> set[str]:
        """The links whose target is one of these files (their rows carry the target's stamp)."""
        wanted = sorted(rels)
        found: set[str] = set()
        for at in range(0, len(wanted), 500):
            chunk = wanted[at : at + 500]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self.cache.select(f"SELECT path FROM files WHERE link IN ({marks})", chunk, []))
            # a link reported for what it led to has a memory path for a name: shown as it is
            found.update(
                r[0] for r in self.cache.select(f"SELECT shown FROM skipped WHERE link IN ({marks})", chunk, [])
            )
        return found

    def _read(self, full: str, stat: os.stat_result, rel: str, skipped: Skipped | None) -> FileMeta | None:
        """One file's metadata from disk; a file that cannot be read (vanished, denied, not regular) is None."""
        try:
            return read_meta(self.root, Path(full), self.counter, stat)
        except FileNotFoundError:
            return None
        except (OSError, InvalidArgument) as exc:
            if skipped is None:
                raise
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            skipped.add(rel, f"skipped: {reason.lower()}")
            return None


def read_metas(task: tuple[str, str, list[tuple[str, str, os.stat_result]]]) -> list:
    """In a worker process: (FileMeta dict or None, reason skipped or None) of each (rel, full path, stat)."""
    root, encoding, files = task
    if not _worker_counter or _worker_counter[0].encoding_name != encoding:
        _worker_counter[:] = [TokenCounter(encoding)]
    reader = Freshness(Path(root), _worker_counter[0], None)  # type: ignore[arg-type]  # reads, never stores
    return [reader._read_one(full, stat, rel) for rel, full, stat in files]


_worker_counter: list[TokenCounter] = []


def _among(keys: list[str]) -> str:
    return f"key IN ({','.join('?' * len(keys))})"
