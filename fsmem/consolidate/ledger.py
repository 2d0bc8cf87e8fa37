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
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fsmem import format as fmt
from fsmem.consolidate import extractors as ex, subjects
from fsmem.format import facts as F
from fsmem.store.files import state_dir

VERSION = 1
SESSIONS = "sessions"
FILE = "ledger.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, source TEXT, stat TEXT, date TEXT, max_as_of TEXT, pending INTEGER,
    digest TEXT, mark TEXT, problems TEXT, items TEXT, snapshot_mark TEXT, snapshot TEXT
);
CREATE TABLE IF NOT EXISTS feeds (path TEXT, target TEXT, heading TEXT, key TEXT);
CREATE INDEX IF NOT EXISTS feeds_target ON feeds (target, key);
CREATE INDEX IF NOT EXISTS feeds_heading ON feeds (heading, key);
CREATE INDEX IF NOT EXISTS feeds_path ON feeds (path);
CREATE INDEX IF NOT EXISTS notes_date ON notes (date);
"""


@dataclass(frozen=True)
class NoteItem:
    """One item of a note. `line` counts from the first body line (0-based), so front matter edits do not move it."""

    heading: str | None
    line: int
    index: int  # position among the note's items (orders items of one line)
    key: str | None
    value: str | None
    text: str | None
    as_of: str | None
    old: bool  # already consolidated: applied before, so only kept if a document still shows it

    @property
    def identity(self) -> str:
        return json.dumps([self.heading, self.key, self.value, self.text, self.as_of], ensure_ascii=False)


@dataclass
class NoteEntry:
    path: str  # where the file is now (sessions/… or the archive)
    source: str  # the name documents cite: sessions/YYYY/MM/DD/x.md
    date: str | None
    max_as_of: str | None
    digest: str
    mark: str | None
    problems: list[tuple[int, str]]
    items: list[NoteItem]
    text: str | None = None  # the text read this run, if it was read
    full: Path | None = None  # where it was read from (checked by the path rule), if it was read
    body_start_line: int = 1

    @property
    def readable(self) -> bool:
        """False for a note that is skipped (not text, broken front matter, no date); its problems say why."""
        return bool(self.digest) and self.date is not None

    @property
    def done(self) -> bool:
        """Everything in it is consolidated (its `consolidated:` hash is its body's)."""
        return self.readable and self.mark == self.digest

    @property
    def new_items(self) -> list[NoteItem]:
        return [item for item in self.items if not item.old]


@dataclass
class SyncResult:
    pending: list[NoteEntry] = field(default_factory=list)  # notes not wholly consolidated
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    dates: dict[str, str] = field(default_factory=dict)  # source -> date, for every readable note


def source_of(rel: str, archive_dir: str) -> str:
    """The session path a note is cited by, also once it has been moved to the archive."""
    prefix = archive_dir.strip("/") + "/"
    if rel.startswith(prefix):
        return SESSIONS + "/" + rel[len(prefix) :]
    return rel


class Ledger:
    """The sqlite cache; one per run, used under the consolidate lock."""

    def __init__(self, root: Path, signature: str, default_subject: str):
        self.root = root
        self.default_subject = default_subject
        self.path = state_dir(root, "consolidate") / FILE
        self.db = self._open(signature)
        self._entries: dict[str, NoteEntry] = {}

    def _open(self, signature: str) -> sqlite3.Connection:
        for attempt in (1, 2):
            try:
                db = sqlite3.connect(self.path, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")  # a cache: after a power cut it may lose its last
                db.execute("PRAGMA synchronous=NORMAL")  # transactions (those notes are read again), never its sanity
                db.executescript(_SCHEMA)
                found = dict(db.execute("SELECT name, value FROM meta").fetchall())
                if found.get("version") != str(VERSION) or found.get("signature") != signature:
                    db.executescript("BEGIN; DELETE FROM notes; DELETE FROM feeds; DELETE FROM meta; COMMIT;")
                    db.executemany(
                        "INSERT INTO meta VALUES (?, ?)", [("version", str(VERSION)), ("signature", signature)]
                    )
                return db
            except sqlite3.DatabaseError:
                if attempt == 2:
                    raise
                for suffix in ("", "-journal", "-wal", "-shm"):  # a corrupt cache is thrown away and rebuilt
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
            entry = read_note(full, rel, source_of(rel, archive_dir), extractors, self._snapshot(rel))
            self._store(entry, key)
            self._entries[rel] = entry
        gone = [path for path in known if path not in seen]
        for path in gone:
            self.db.execute("DELETE FROM notes WHERE path = ?", (path,))
            self.db.execute("DELETE FROM feeds WHERE path = ?", (path,))
        for path, source, date in self.db.execute("SELECT path, source, date FROM notes WHERE date IS NOT NULL"):
            if path in seen and date:
                result.dates.setdefault(source, date)
        pending = [p for (p,) in self.db.execute("SELECT path FROM notes WHERE pending = 1 ORDER BY path")]
        result.pending = [self.entry(path) for path in pending if path in seen]
        return result

    def _snapshot(self, rel: str) -> tuple[str | None, list[str]]:
        row = self.db.execute("SELECT snapshot_mark, snapshot FROM notes WHERE path = ?", (rel,)).fetchone()
        if not row or not row[0]:
            return None, []
        return row[0], json.loads(row[1] or "[]")

    def _store(self, entry: NoteEntry, stat_key: str, snapshot: tuple[str, list[str]] | None = None) -> None:
        if snapshot is None:
            if entry.done:
                snapshot = (entry.digest, [item.identity for item in entry.items])
            else:
                snapshot = self._snapshot(entry.path)  # type: ignore[assignment]
        items = [[i.heading, i.line, i.index, i.key, i.value, i.text, i.as_of, i.old] for i in entry.items]
        self.db.execute(
            "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                snapshot[0],
                json.dumps(snapshot[1], ensure_ascii=False),
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
            self._entries[path] = NoteEntry(row[0], row[1], row[2], row[3], row[4], row[5], problems, items)  # type: ignore[arg-type]
        return self._entries[path]

    # -- finding the notes that feed a document ------------------------------
    def unkinded_headings(self) -> list[str | None]:
        return [h for (h,) in self.db.execute("SELECT DISTINCT heading FROM feeds WHERE target IS NULL")]

    def feeding(self, target: str, headings: list[str | None], keys: list[str], since: str | None = None) -> list[str]:
        """Paths of the notes with items for `target` under any of `keys` ('' stands for observations), dated `since` on."""
        found: set[str] = set()
        dated = "" if since is None else " AND path IN (SELECT path FROM notes WHERE date >= ?)"
        extra = () if since is None else (since,)
        for chunk in _chunks(keys, 400):
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

    # -- after a note is marked ----------------------------------------------
    def marked(self, entry: NoteEntry, stat: os.stat_result | None) -> None:
        """Remember that `entry`'s items are consolidated; `stat` is None when the note grew meanwhile (read again next run)."""
        digest = entry.digest
        snapshot = (digest, [item.identity for item in entry.items])
        done = NoteEntry(
            entry.path,
            entry.source,
            entry.date,
            entry.max_as_of,
            digest,
            digest,
            [],
            [_as_old(item) for item in entry.items],
        )
        self._store(done, _stat_key(stat) if stat is not None else "", snapshot)
        self._entries[entry.path] = done


def read_note(full: Path, rel: str, source: str, extractors: list, snapshot: tuple[str | None, list[str]]) -> NoteEntry:
    """Read and extract one note; which of its items are already consolidated comes from its `consolidated:` mark."""
    entry = NoteEntry(rel, source, None, None, "", None, [], [])
    try:
        data = full.read_bytes()
    except OSError as exc:
        entry.problems.append((1, f"cannot be read ({exc.strerror}); note skipped"))
        return entry
    text, bad = fmt.decode(data)
    if bad:
        entry.problems.append((bad[0].line, bad[0].message + "; note skipped"))
        return entry
    doc = fmt.split(text)
    if doc.problems:
        entry.problems.append((doc.problems[0].line, doc.problems[0].message + "; note skipped"))
        return entry
    entry.text = text
    entry.full = full
    entry.body_start_line = doc.body_start_line
    entry.digest = "sha256-" + hashlib.sha256(doc.body.encode("utf-8")).hexdigest()[:16]  # = fmt.body_digest(text)
    mark = doc.front_matter.get(fmt.CONSOLIDATED_FIELD)
    entry.mark = str(mark) if mark else None
    entry.date = note_date(source, doc.front_matter)
    if entry.date is None:
        entry.problems.append((1, "cannot date this note: not under sessions/YYYY/MM/DD/ and no valid 'created'"))
        return entry
    extraction = ex.run(extractors, ex.SessionNote(source, entry.date, text, doc.body, doc.body_start_line))
    entry.problems.extend(extraction.problems)
    items = [
        NoteItem(i.subject, i.line - doc.body_start_line, n, i.key, i.value, i.text, i.as_of, False)
        for n, i in enumerate(extraction.items)
    ]
    entry.items = _with_old(items, entry, doc.body, snapshot)
    dates = [i.as_of for i in entry.items if i.as_of and not i.old]
    entry.max_as_of = max(dates) if dates else None
    return entry


def _with_old(
    items: list[NoteItem], entry: NoteEntry, body: str, snapshot: tuple[str | None, list[str]]
) -> list[NoteItem]:
    """Flag the items that were already consolidated: all (mark matches), those in the snapshot, or those in the marked prefix."""
    if entry.mark is None:
        return items
    if entry.mark == entry.digest:
        return [_as_old(item) for item in items]
    if snapshot[0] == entry.mark:
        old = _aligned(snapshot[1], [item.identity for item in items])
        return [_as_old(item) if index in old else item for index, item in enumerate(items)]
    lines = marked_prefix_lines(body, entry.mark)
    return [_as_old(item) if item.line < lines else item for item in items]


def _aligned(before: list[str], after: list[str]) -> set[int]:
    """Positions in `after` of the items that were in `before`: a longest common subsequence, matched as early as possible.

    A note only grows by lines inserted somewhere (appended, or under an
    existing heading), so what it held before is a subsequence of what it holds
    now; an item repeated word for word is taken to be the earlier one.
    """
    head = 0
    while head < len(before) and head < len(after) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < len(before) - head and tail < len(after) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    a, b = before[head : len(before) - tail], after[head : len(after) - tail]
    # lcs[i][j]: longest common subsequence of a[i:] and b[j:]
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    matched = set(range(head)) | set(range(len(after) - tail, len(after)))
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j] and lcs[i][j] == lcs[i + 1][j + 1] + 1:
            matched.add(head + j)
            i, j = i + 1, j + 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            i += 1
        else:
            j += 1
    return matched


def marked_prefix_lines(body: str, mark: str) -> int:
    """How many whole body lines the `consolidated:` hash covers, when the body only grew at its end (else 0)."""
    digest = hashlib.sha256()
    count = 0
    for line in body.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        probe = digest.copy()
        probe.update(content.encode("utf-8"))
        if "sha256-" + probe.hexdigest()[:16] == mark:
            return count + 1
        digest.update(line.encode("utf-8"))
        count += 1
        if "sha256-" + digest.hexdigest()[:16] == mark:
            return count
    return 0


def note_date(source: str, front: dict) -> str | None:
    """A note's date: its folder (sessions/YYYY/MM/DD/), else its `created`."""
    parts = source.split("/")
    if len(parts) == 5 and parts[0] == SESSIONS:
        date = "-".join(parts[1:4])
        if F.valid_date(date):
            return date
    created = str(front.get("created") or "")[:10]
    return created if F.valid_date(created) else None


def walk_notes(root: Path, archive_dir: str) -> Iterator[tuple[str, str, os.stat_result]]:
    from fsmem.store.catalog import walk_stats

    for folder in (SESSIONS, archive_dir.strip("/")):
        if folder and (root / folder).is_dir():
            yield from walk_stats(root, root / folder)


def signature(settings_names: Iterable[str], default_subject: str) -> str:
    from fsmem import __version__

    return json.dumps([__version__, list(settings_names), default_subject])


def _as_old(item: NoteItem) -> NoteItem:
    return NoteItem(item.heading, item.line, item.index, item.key, item.value, item.text, item.as_of, True)


def _stat_key(stat: os.stat_result) -> str:
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}:{stat.st_ctime_ns}"


def _chunks(values: list[str], size: int) -> list[list[str]]:
    return [values[i : i + size] for i in range(0, len(values), size)] or [[]]
