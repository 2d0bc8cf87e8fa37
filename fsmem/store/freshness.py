"""Keeping the metadata cache's rows in step with the files: the freshness walk, and the feed's refresh.

A row is read again only when its file's stamp (mtime, size, inode) is not
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument
from fsmem.store.cache import RACY_NS, MetaCache, Stamp, stamp_of
from fsmem.store.meta import FileMeta, read_meta
from fsmem.store.scope import Scope
from fsmem.store.selection import region
from fsmem.store.walk import FOLDER, Skipped, probe, skipped_key, walk_entries, walk_key
from fsmem.tokens import TokenCounter

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
        entries of `gaps_area`, in one transaction (nothing is written when nothing changed)."""
        fresh: list[tuple[Stamp, dict[str, Any]]] = []
        links: dict[str, str] = {}
        present: set[str] = set()
        for rel, full, stat, link in found:
            stamp = stamp_of(stat)
            have = known.get(rel)
            if have is not None and have[0] == stamp and not have[1]:
                present.add(rel)
                continue
            meta = self._read(full, stat, rel, skipped)
            if meta is None:
                continue
            present.add(rel)
            fresh.append((stamp, meta.to_dict()))
            if link is not None:
                links[rel] = link
        gone = [(rel, have[0]) for rel, have in known.items() if rel not in present]
        entries = sorted(
            (skipped_key(rel, reason), shown, reason, targets.get(rel))
            for rel, (shown, reason) in zip(skipped.rels, skipped, strict=True)
        )
        before = self.cache.select(
            f"SELECT key, shown, reason, link FROM skipped WHERE {gaps_area[0]} ORDER BY key", gaps_area[1], []
        )
        same_gaps = [tuple(row) for row in before] == entries
        if not fresh and not gone and same_gaps:
            return
        gaps = None if same_gaps else (gaps_area[0], gaps_area[1], entries)
        if not self.cache.store(fresh, links=links, gone=gone, skipped=gaps, still=self.still):
            raise Unstored()
        if self.remind is not None:
            threshold = time.time_ns() - RACY_NS
            racy = {data["path"] for stamp, data in fresh if stamp[0] >= threshold}
            if racy:
                self.remind(racy, time.monotonic() + RACY_NS / 1e9)

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


def _among(keys: list[str]) -> str:
    return f"key IN ({','.join('?' * len(keys))})"
