"""Which files a grep can match at all: a word index of every file grep searches, so rg reads only those.

A new grep of a memory costs CPU for rg opening and reading every file, which is
nearly all of its cost, whatever the answer. For a pattern whose matches must contain
some word (`needs`), a small index of each file's words names the few files
that can match, and rg is given those files alone. The index holds, per file
rg would search, the set of its ASCII alphanumeric words, lowercased, in a
contentless FTS5 table (`detail=none`: document ids only, a small fraction of
the Markdown: docs/performance.md, "grep") in `.fsmem/grep-words.sqlite`.

It is used only where it is as fresh as grep's answers must be: in a process
whose change feed (`fsmem.store.feed`) is trusted, caught up at every call
like the other caches (a file re-read when its stamp changed). A pattern the
index cannot reason about exactly (a regular expression with operators, any
character outside printable ASCII) gets no prefilter, nor one whose files
would be too many to gain anything (more than `MAX_CANDIDATES` and more than
a quarter of the memory's files): rg walks the memory.

What a pattern needs and what words a file holds are `fsmem.query.grep_terms`'s.
A file it gives no words (UTF-16, or holding a word longer than FTS5 keeps) is
a candidate for every pattern, and so is one larger than `MAX_FILE_BYTES`
(never read whole for its words).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fsmem.query.grep_terms import Need, needs, words_of
from fsmem.query.grep_vocabulary import KeptWords
from fsmem.store.cache import (
    RACY_NS,
    Connection,
    DatabaseError,
    connect,
    discard,
    is_transient,
    refuse_foreign_schema,
)
from fsmem.store.paths import STATE_DIR, is_memory_path, is_visible_folder
from fsmem.store.walk import FOLDER, probe, walk_entries

CONSUMER = "grep-words"  # the feed's name for this index
INDEX_FILE = "grep-words.sqlite"
# Candidates up to this many are always searched alone: one rg call's arguments (grep's batch; ~120 KB of paths,
# far below ARG_MAX). More are searched alone too while they are at most a quarter of the memory's files
# (`candidates`, `MAX_SHARE`): at 100k files rg's CPU over a list of files follows the list (a word in 4,092 files:
# 92 ms against 858 for the walk; in 24,911: 283 against 767; 41,156: 498 against 1,040; 56,772: 1,220 against
# 1,411), but past a quarter the Python of grep's batched passes (an rg started per 2,000 files, the list read
# from the index) grows to half of rg's saving (a phrase in 41k files: 100-150 ms more Python for 350 less rg)
MAX_CANDIDATES = 2000
MAX_SHARE = 4  # past MAX_CANDIDATES, candidates are searched alone while at most 1/MAX_SHARE of the files
MAX_NEEDS = 8  # words of one pattern looked up (any of them narrows soundly; the longest narrow most)
SHORTEST_PART = 3  # a shorter start, end or inner part of words narrows little and costs a long lookup
ANY = "-1"  # the stamp column's mark of a file that is a candidate for every pattern (UTF-16, too large, a long word)
FREE_PAGES_KEPT = 256  # pages (1 MB) the index file keeps free for later writes before giving them back
MAX_FILE_BYTES = 8 << 20  # a larger file is not read for its words (a 1 GB log would be read whole): always searched

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, stamp TEXT);
CREATE INDEX IF NOT EXISTS files_any ON files (stamp) WHERE stamp = '-1';
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
    text, content='', contentless_delete=1, detail=none, tokenize='ascii'
);
CREATE VIRTUAL TABLE IF NOT EXISTS vocabulary USING fts5vocab(words, 'row');
"""


class WordIndex:
    """One memory root's word index, kept by the change feed's deltas; `candidates` answers a pattern."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.lock = threading.Lock()
        self.conn = _open(self.root / STATE_DIR / INDEX_FILE)
        self.words = KeptWords(
            lambda: [str(t) for (t,) in self.conn.execute("SELECT term FROM vocabulary")], self._data_version
        )
        self._paths: frozenset[str] | None = None  # the files held, while `_version` holds
        self._held: int | None = None  # how many, while `_version` holds
        self._version: tuple[int, int] | None = None
        self._changes = 0

    def close(self) -> None:
        self.conn.close()

    # -- keeping it fresh ---------------------------------------------------------------------------------
    def apply(self, delta: Any) -> None:
        """Take one delta of the feed: a whole walk (every file whose stamp changed is read again) or the
        files and folders it names."""
        with self.lock:
            seen: dict[str, os.stat_result] = {}
            gone: list[str] = []
            if delta.full:
                stored = {str(path): stamp for path, stamp in self.conn.execute("SELECT path, stamp FROM files")}
                seen = self._walk(self.root)
                gone = [path for path in stored if path not in seen]
            else:
                for rel in delta.files:
                    found = probe(self.root, rel)
                    if isinstance(found, tuple) and found[1] is None and is_memory_path(rel):
                        seen[rel] = found[0]
                    else:
                        gone.append(rel)
                for folder in delta.folders:
                    inside = self._walk(self.root / folder) if probe(self.root, folder) == FOLDER else {}
                    seen.update(inside)
                    prefix = folder.rstrip("/") + "/"
                    rows = self.conn.execute(
                        "SELECT path FROM files WHERE path >= ? AND path < ?", (prefix, prefix[:-1] + "0")
                    )
                    gone.extend(str(path) for (path,) in rows if path not in inside)
                stored = self._stamps(seen)
            # Once another process stored files since the list of words was read (data_version, asked after the
            # stamps), the files the feed names are read for words it lacks; a walk reads no unchanged file: let go
            others = self.words.others_stored()
            if others and delta.full:
                self.words.forget()
            self._store(seen, stored, [path for path in gone if path not in seen], stored_too=others)

    def _walk(self, start: Path) -> dict[str, os.stat_result]:
        """What rg's walk of `start` searches and grep keeps: memory files that are not links."""
        return {rel: stat for rel, _full, stat, link in walk_entries(self.root, start) if link is None}

    def _stamps(self, paths: Iterable[str]) -> dict[str, bytes | str | None]:
        stamps: dict[str, bytes | str | None] = {}
        for rel in paths:
            row = self.conn.execute("SELECT stamp FROM files WHERE path = ?", (rel,)).fetchone()
            if row is not None:
                stamps[rel] = row[0]
        return stamps

    def _store(
        self, seen: dict[str, os.stat_result], stored: dict[str, Any], gone: list[str], *, stored_too: bool = False
    ) -> None:
        """Store the files of `seen` whose stamps changed and drop those `gone`; with `stored_too`, the others
        are read too, for the kept list of words only."""
        if stored_too and self.words.cheaper_to_read_again(len(seen)):
            self.words.forget()  # reading the index's words again costs less than reading these files
            stored_too = False
        now = time.time_ns()
        rows: list[tuple[str, bytes | str | None, str | None]] = []
        known: list[str] = []  # the words of files stored already
        for rel, stat in seen.items():
            stamp = file_stamp(stat)
            unchanged = stored.get(rel) == stamp
            if unchanged and not stored_too:
                continue
            if stat.st_size > MAX_FILE_BYTES:
                if not unchanged:
                    rows.append((rel, ANY, None))
                continue
            try:
                with open(self.root / rel, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
            except OSError:
                gone.append(rel)  # rg cannot read it either
                continue
            text = words_of(data) if len(data) <= MAX_FILE_BYTES else None
            if unchanged:
                if text is not None:
                    known.append(text)
                continue
            racy = stat.st_mtime_ns >= now - RACY_NS  # written within the clock's tick: read again at a walk
            rows.append((rel, None if racy else stamp, text))
        if self.words.cheaper_to_read_again(len(rows) + len(known)):
            self.words.forget()
        if rows or gone:
            with self.conn:
                for rel in gone:
                    self._delete(rel)
                for rel, kept, text in rows:
                    self._delete(rel)
                    self.conn.execute(
                        "INSERT INTO files (path, stamp) VALUES (?, ?)", (rel, ANY if text is None else kept)
                    )
                    if text is not None:
                        self.conn.execute(
                            "INSERT INTO words (rowid, text) VALUES (?, ?)", (self.conn.last_insert_rowid(), text)
                        )
            self._changes += 1
            self._give_back_freed_pages()
        self.words.learn(known + [text for _rel, _kept, text in rows if text is not None])

    def _give_back_freed_pages(self) -> None:
        """Past FREE_PAGES_KEPT pages freed (FTS5's merges during a build: 1.6 MB at 100k files; files deleted),
        shrink the file (`connect` made it with auto_vacuum=INCREMENTAL); fewer are kept for later writes to reuse."""
        with contextlib.suppress(DatabaseError):  # another connection writing: given back after a later write
            free: Any = self.conn.execute("PRAGMA freelist_count").fetchall()[0][0]
            if int(free) > FREE_PAGES_KEPT:
                self.conn.execute("PRAGMA incremental_vacuum").fetchall()

    def _delete(self, rel: str) -> None:
        row = self.conn.execute("SELECT id FROM files WHERE path = ?", (rel,)).fetchone()
        if row is not None:
            self.conn.execute("DELETE FROM words WHERE rowid = ?", row)
            self.conn.execute("DELETE FROM files WHERE id = ?", row)

    # -- answering --------------------------------------------------------------------------------------------
    def candidates(self, wanted: list[Need]) -> list[str] | None:
        """The files that can hold a match (in no order), or None: no word narrows it, or too many files do
        (more than `MAX_CANDIDATES` and than a quarter of the memory's: the walk costs little more)."""
        wanted = sorted(wanted, key=lambda n: -len(n.word))[:MAX_NEEDS]  # a 10,000-character -F: the longest words
        terms = [f'"{n.word}"' for n in wanted if n.kind == "exact"]
        terms += [f'"{n.word}"*' for n in wanted if n.kind == "prefix" and len(n.word) >= SHORTEST_PART]
        with self.lock:
            for need in wanted:
                if need.kind not in ("suffix", "inner") or len(need.word) < SHORTEST_PART:
                    continue
                holding = self.words.holding(need.word, suffix=need.kind == "suffix")
                if holding is None:
                    continue  # too common a part of words to narrow anything
                if not holding:
                    return self._any()  # no file has a word holding it
                terms.append("(" + " OR ".join(f'"{t}"' for t in holding) + ")")
            if not terms:
                return None
            match, bound = " AND ".join(terms), MAX_CANDIDATES
            if self._matching(match, bound) > bound:
                bound = max(bound, self._count() // MAX_SHARE)
                if self._matching(match, bound) > bound:  # a word of most files: 16-52 ms at 100k files
                    return None
            rows = self.conn.execute(
                "SELECT files.path FROM files JOIN (SELECT rowid FROM words WHERE words MATCH ? LIMIT ?) AS hit "
                "ON files.id = hit.rowid",
                (match, bound + 1),
            ).fetchall()
            found = [str(path) for (path,) in rows] + self._any()
            return None if len(found) > bound else found

    def _matching(self, match: str, bound: int) -> int:
        """How many files hold the words of `match`, counted up to one past `bound`."""
        many = "SELECT count(*) FROM (SELECT rowid FROM words WHERE words MATCH ? LIMIT ?)"
        found: Any = self.conn.execute(many, (match, bound + 1)).fetchall()[0][0]
        return int(found)

    def _any(self) -> list[str]:
        return [str(path) for (path,) in self.conn.execute("SELECT path FROM files WHERE stamp = '-1'")]  # ANY

    def load_vocabulary(self) -> None:
        """Read the index's words now (a long-lived process's start), not at the first grep that needs them."""
        with self.lock:
            self.words.text()

    def paths(self) -> frozenset[str]:
        """Every file the index holds."""
        if self._changed() or self._paths is None:
            self._paths = frozenset(str(path) for (path,) in self.conn.execute("SELECT path FROM files"))
        return self._paths

    def _count(self) -> int:
        """How many files the index holds."""
        if self._changed() or self._held is None:
            held: Any = self.conn.execute("SELECT count(*) FROM files").fetchall()[0][0]
            self._held = int(held)
        return self._held

    def _changed(self) -> bool:
        """True (and the files read of the index let go) once this process or another changed the index."""
        version = (self._changes, self._data_version())
        if version == self._version:
            return False
        self._version, self._paths, self._held = version, None, None
        return True

    def _data_version(self) -> int:
        """A number that changes whenever another connection commits a change to the index (not this one's)."""
        changed: Any = self.conn.execute("PRAGMA data_version").fetchall()[0][0]
        return int(changed)


def _open(path: Path) -> Connection:
    """The index's database; one that is not a database is thrown away, and where `.fsmem/` cannot hold one
    (read-only) this process keeps its index in memory, as the search index does."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return _prepared(connect(path))
        except DatabaseError as exc:
            if is_transient(exc) or not discard(path):
                raise
            return _prepared(connect(path))
    except (OSError, DatabaseError):
        return _prepared(Connection(":memory:"))


def _prepared(conn: Connection) -> Connection:
    try:
        refuse_foreign_schema(conn, _SCHEMA)
        conn.execute(_SCHEMA)
    except BaseException:
        conn.close(True)
        raise
    return conn


# by feed: an index goes with its feed (the last `Memory` of the root closed, the feed collected)
_indexes: weakref.WeakKeyDictionary[Any, WordIndex] = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def caught_up(root: Path) -> WordIndex | None:
    """`root`'s word index with the feed's changes taken, or None where no trusted feed of `root` runs in
    this process (a one-shot `fsmem grep`, a network file system): rg walks the memory."""
    feeds = sys.modules.get("fsmem.store.feed")
    if feeds is None:
        return None
    feed = feeds.current(Path(root).resolve())
    if feed is None or not feed.trusted:
        return None
    with _indexes_lock:
        index = _indexes.get(feed)
        if index is None:
            index = _indexes[feed] = WordIndex(feed.root)
            weakref.finalize(feed, index.close)
    feed.catch_up(CONSUMER, index.apply)
    return index if feed.trusted else None


def narrowed(
    root: Path, pattern: str, targets: list[str] | None, *, fixed_strings: bool, word: bool
) -> list[str] | None:
    """The files rg need search for `pattern` over `targets` (None: the whole memory), or None where the
    prefilter does not apply (rg searches `targets` as given). Case is folded either way: the index's words
    are lowercased, so a case-sensitive grep gets the case-insensitive candidates, a superset."""
    wanted = needs(pattern, fixed_strings=fixed_strings, word=word)
    if not wanted:
        return None
    try:
        index = caught_up(root)
        if index is None:
            return None
        found = index.candidates(wanted)
        if found is None or targets is None:
            return found
        return _within(root, index, found, targets)
    except DatabaseError:
        return None  # a lock held past the busy timeout: rg walks (and the feed walks the index again next time)


def _within(root: Path, index: WordIndex, found: list[str], targets: list[str]) -> list[str] | None:
    """`found` narrowed to what rg would search of `targets`: each target file the index holds if it can
    match, each other file as given (rg decides), the found files under each target folder; a target rg
    would walk otherwise (a linked or hidden folder) leaves the prefilter out."""
    with index.lock:
        held = index.paths()
    known = held.intersection(targets)
    hits = set(found)
    real_root = os.path.realpath(root)
    out: list[str] = []
    for target in targets:
        if target in known:
            if target in hits:
                out.append(target)
            continue
        folder = "" if target in ("", ".", "./") else target.rstrip("/")
        full = os.path.join(root, folder) if folder else os.fspath(root)
        if not os.path.isdir(full):
            out.append(target)
            continue
        if folder and (not is_visible_folder(folder) or os.path.realpath(full) != os.path.join(real_root, folder)):
            return None
        prefix = folder + "/" if folder else ""
        out.extend(path for path in found if path.startswith(prefix))
    return out


def file_stamp(stat: os.stat_result) -> bytes:
    """What tells a file changed: 8 bytes of a digest of its mtime, size, inode and change time (the change time
    for an mtime put back). Their text took 53 bytes a file, 5 MB of `.fsmem/` at 100k files; a stored stamp of
    another form (text, before) matches none, so such a file is read again once."""
    return hashlib.blake2b(
        f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{stat.st_ctime_ns}".encode(), digest_size=8
    ).digest()
