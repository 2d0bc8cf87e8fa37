"""The ledger: what every session note says, cached in `.fsmem/consolidate/ledger.sqlite`.

Consolidation re-derives a key's whole history from every note that ever
recorded it, so it must find those notes again without re-reading the whole
`sessions/` tree each run. The ledger caches each note's extraction (its items,
its date, what of it was already consolidated) keyed on the file's stat, and an
index from subject and key to the notes that feed them.

It is machine state and holds nothing that the notes do not: deleted, it is
rebuilt on the next run by reading every note once. What a note already
contributed is recomputed from the note itself (its `consolidated:` hash), with
one exception the notes cannot give back: the items a note held when it was
last consolidated, kept here so that a note grown in the middle (`fsmem note
--subject` inserts under an existing heading) does not re-apply old lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fsmem.consolidate import subjects
from fsmem.consolidate.notes import NoteEntry, NoteItem, as_old, read_note, source_of
from fsmem.store.cache import chunks, foreign_schema
from fsmem.store.files import drop_links, state_dir
from fsmem.store.paths import STATE_DIR as STATE

VERSION = 5  # 5: `*` and `+` bullets are facts: every note is extracted again
FILE = "ledger.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, source TEXT, stat TEXT, date TEXT, max_as_of TEXT, pending INTEGER,
    digest TEXT, mark TEXT, problems TEXT, items TEXT, snapshots TEXT
);
CREATE TABLE IF NOT EXISTS feeds (path TEXT, target TEXT, heading TEXT, key TEXT);
CREATE INDEX IF NOT EXISTS feeds_target ON feeds (target, key);
CREATE INDEX IF NOT EXISTS feeds_heading ON feeds (heading, key);
CREATE INDEX IF NOT EXISTS feeds_path ON feeds (path);
CREATE INDEX IF NOT EXISTS notes_date ON notes (date);
CREATE TABLE IF NOT EXISTS written (document TEXT, digest TEXT, notes TEXT, PRIMARY KEY (document, digest));
"""


@dataclass
class SyncResult:
    pending: list[NoteEntry] = field(default_factory=list)  # notes not wholly consolidated
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    dates: dict[str, str] = field(default_factory=dict)  # source -> date, for every readable note
    paths: dict[str, list[str]] = field(default_factory=dict)  # source -> the note files cited by it


class Ledger:
    """The sqlite cache; one per run, used under the consolidate lock."""

    def __init__(self, root: Path, signature: str, default_subject: str, *, dry_run: bool = False):
        """`dry_run`: changes are rolled back, and a ledger that does not exist yet is not created (kept in memory)."""
        self.root = root
        self.default_subject = default_subject
        existing = root / STATE / "consolidate" / FILE
        self.path = ":memory:" if dry_run and not existing.exists() else state_dir(root, "consolidate") / FILE
        self.db = self._open(signature)
        self._entries: dict[str, NoteEntry] = {}

    def _open(self, signature: str) -> sqlite3.Connection:
        for attempt in (1, 2):
            try:
                if self.path != ":memory:":
                    drop_links(self.path)  # a cache under .fsmem/: never written through a link
                db = sqlite3.connect(self.path, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")  # a cache: after a power cut it may lose its last
                db.execute("PRAGMA synchronous=NORMAL")  # transactions (those notes are read again), never its sanity
                foreign = foreign_schema(db, _SCHEMA)
                if foreign is not None:
                    raise sqlite3.DatabaseError(f"ledger holds {foreign}, which fsmem does not make")
                db.executescript(_SCHEMA)
                found = dict(db.execute("SELECT name, value FROM meta").fetchall())
                if found.get("version") != str(VERSION) or found.get("signature") != signature:
                    db.executescript(
                        "DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS feeds; DROP TABLE IF EXISTS written; "
                        "DROP TABLE IF EXISTS meta;" + _SCHEMA
                    )
                    db.executemany(
                        "INSERT INTO meta VALUES (?, ?)", [("version", str(VERSION)), ("signature", signature)]
                    )
                return db
            except sqlite3.DatabaseError:
                if attempt == 2 and self.path != ":memory:":
                    # a disk that refuses its writes (full, past RLIMIT_FSIZE: 'disk I/O error' failed the run):
                    # this run keeps the ledger in memory, as if it had been thrown away
                    self.path = ":memory:"
                    return self._open(signature)
                if attempt == 2:
                    raise
                for suffix in (
                    ("", "-journal", "-wal", "-shm") if self.path != ":memory:" else ()
                ):  # a corrupt cache is thrown away and rebuilt
                    with contextlib.suppress(OSError):
                        os.unlink(str(self.path) + suffix)
        raise AssertionError("unreachable")

    def close(self, commit: bool) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT" if commit else "ROLLBACK")
        self.db.close()

    def commit(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN")
        yield
        self.db.execute("COMMIT")

    # -- reading the notes --------------------------------------------------
    def sync(self, walked: Iterable[tuple[str, str, os.stat_result]], archive_dir: str, extractors: list) -> SyncResult:
        """Bring the cache in step with the notes on disk: re-read the notes whose stat changed, forget the gone."""
        from fsmem.errors import FsmemError
        from fsmem.store.paths import resolve

        result = SyncResult()
        known = dict(self.db.execute("SELECT path, stat FROM notes"))
        seen: set[str] = set()
        self.db.execute("BEGIN")
        for rel, _full, stat in walked:
            key = _stat_key(stat)
            if known.get(rel) == key:
                seen.add(rel)
                continue
            try:  # every note read goes through the memory's path rule
                full = resolve(self.root, rel)
            except FsmemError as exc:
                result.refused.append((rel, 1, f"{exc}; note skipped"))
                continue
            seen.add(rel)
            entry = read_note(full, rel, source_of(rel, archive_dir), extractors, self._snapshots(rel))
            self._store(entry, key)
            self._entries[rel] = entry
        gone = [path for path in known if path not in seen]
        for path in gone:
            self.db.execute("DELETE FROM notes WHERE path = ?", (path,))
            self.db.execute("DELETE FROM feeds WHERE path = ?", (path,))
        for path, source, date in self.db.execute("SELECT path, source, date FROM notes ORDER BY path"):
            if path in seen:
                result.paths.setdefault(source, []).append(path)
                if date:
                    result.dates.setdefault(source, date)
        pending = [p for (p,) in self.db.execute("SELECT path FROM notes WHERE pending = 1 ORDER BY path")]
        result.pending = [self.entry(path) for path in pending if path in seen]
        return result

    def _snapshots(self, rel: str) -> dict[str, list[str]]:
        """`consolidated:` hash -> the identities of the items the note held when it was (or is being) marked so."""
        row = self.db.execute("SELECT snapshots FROM notes WHERE path = ?", (rel,)).fetchone()
        return json.loads(row[0]) if row and row[0] else {}

    def _store(self, entry: NoteEntry, stat_key: str, snapshots: dict[str, list[str]] | None = None) -> None:
        if snapshots is None:
            if entry.done:
                snapshots = {entry.digest: [item.identity for item in entry.items]}
            else:
                snapshots = self._snapshots(entry.path)
        items = [[i.heading, i.line, i.index, i.key, i.value, i.text, i.as_of, i.old] for i in entry.items]
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.path,
                entry.source,
                stat_key,
                entry.date,
                entry.max_as_of,
                0 if entry.done else 1,
                entry.digest,
                entry.mark,
                json.dumps(entry.problems),
                json.dumps(items, ensure_ascii=False),
                json.dumps(snapshots, ensure_ascii=False),
            ),
        )
        self.db.execute("DELETE FROM feeds WHERE path = ?", (entry.path,))
        feeds = sorted({(item.heading, item.key or "") for item in entry.items}, key=lambda f: (f[0] or "", f[1]))
        self.db.executemany(
            "INSERT INTO feeds VALUES (?, ?, ?, ?)",
            [(entry.path, self.target_of(heading), heading, key) for heading, key in feeds],
        )

    def target_of(self, heading: str | None) -> str | None:
        """The document a heading names when that needs no directory (`kind/Name`); None otherwise."""
        target = subjects.kinded(self.default_subject if heading is None else heading)
        return target.path if target else None

    def entry(self, path: str) -> NoteEntry:
        if path not in self._entries:
            row = self.db.execute(
                "SELECT path, source, date, max_as_of, digest, mark, problems, items FROM notes WHERE path = ?",
                (path,),
            ).fetchone()
            items = [NoteItem(*values) for values in json.loads(row[7])]
            problems = [tuple(p) for p in json.loads(row[6])]
            self._entries[path] = NoteEntry(row[0], row[1], row[2], row[3], row[4], row[5], problems, items)
        return self._entries[path]

    # -- finding the notes that feed a document ------------------------------
    def unkinded_headings(self) -> list[str | None]:
        return [h for (h,) in self.db.execute("SELECT DISTINCT heading FROM feeds WHERE target IS NULL")]

    def feeding(self, target: str, headings: list[str | None], keys: list[str], since: str | None = None) -> list[str]:
        """Paths of the notes with items for `target` under any of `keys` ('' stands for observations), dated `since` on."""
        found: set[str] = set()
        dated = "" if since is None else " AND path IN (SELECT path FROM notes WHERE date >= ?)"
        extra = () if since is None else (since,)
        for chunk in chunks(keys, 400):
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"SELECT path FROM feeds WHERE target = ? AND key IN ({marks}){dated}", (target, *chunk, *extra)
            )
            found.update(p for (p,) in rows)
            for heading in headings:
                match = "heading IS NULL" if heading is None else "heading = ?"
                args = () if heading is None else (heading,)
                rows = self.db.execute(
                    f"SELECT path FROM feeds WHERE target IS NULL AND {match} AND key IN ({marks}){dated}",
                    (*args, *chunk, *extra),
                )
                found.update(p for (p,) in rows)
        return sorted(found)

    # -- documents written before their notes are marked ----------------------
    def wrote(self, rows: list[tuple[str, str, dict[str, tuple[str, list[str]]]]]) -> None:
        """Before a batch of documents is renamed into place: (document, hash of its new bytes, note -> (the hash
        the note is to be marked with, the identities of its new records in it)). A run that stops before it
        marks those notes leaves the next run knowing exactly which of their records each document shows."""
        with self.transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO written VALUES (?, ?, ?)",
                [(doc, digest, json.dumps(notes, ensure_ascii=False, sort_keys=True)) for doc, digest, notes in rows],
            )

    def shown(self, document: str, digest: str) -> dict[str, tuple[str, list[str]]]:
        """note -> (its hash-to-be, identities of its records) that `document` (its bytes hash to `digest`) holds."""
        row = self.db.execute(
            "SELECT notes FROM written WHERE document = ? AND digest = ?", (document, digest)
        ).fetchone()  # a row per version written: a run that stops before renaming keeps the last one's
        return {k: (v[0], v[1]) for k, v in json.loads(row[0]).items()} if row else {}

    def forget(self, documents: list[str]) -> None:
        """The notes these documents were written from are marked: nothing is pending in them any more."""
        with self.transaction():
            self.db.executemany("DELETE FROM written WHERE document = ?", [(d,) for d in documents])

    # -- after a note is marked ----------------------------------------------
    def will_mark(self, entries: list[NoteEntry]) -> None:
        """Before notes are marked: remember what each held, under the hash it is about to be marked with, so a
        run that stops between the two still knows it (the hash it was marked with before is kept too)."""
        with self.transaction():
            for entry in entries:
                snapshots = self._snapshots(entry.path)
                snapshots = {k: v for k, v in snapshots.items() if k == entry.mark}
                snapshots[entry.digest] = [item.identity for item in entry.items]
                self.db.execute(
                    "UPDATE notes SET snapshots = ? WHERE path = ?",
                    (json.dumps(snapshots, ensure_ascii=False), entry.path),
                )

    def marked(self, entry: NoteEntry, stat: os.stat_result | None) -> None:
        """Remember that `entry`'s items are consolidated; `stat` is None when the note grew meanwhile (read again next run)."""
        snapshots = {entry.digest: [item.identity for item in entry.items]}
        done = NoteEntry(
            entry.path,
            entry.source,
            entry.date,
            entry.max_as_of,
            entry.digest,
            entry.digest,
            [],
            [as_old(item) for item in entry.items],
        )
        self._store(done, _stat_key(stat) if stat is not None else "", snapshots)
        self._entries[entry.path] = done


def signature(settings_names: Iterable[str], default_subject: str) -> str:
    from fsmem import __version__

    return json.dumps([__version__, list(settings_names), default_subject])


def _stat_key(stat: os.stat_result) -> str:
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{stat.st_ctime_ns}"
