"""Gathering what a consolidation needs: the notes with something new, and for every document a new item names,
*all* the records of the keys it touches (from every note, old or new, found through the ledger) and its text,
read once. Every note and document is read through the memory's path rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.consolidate import documents as docs, subjects
from fsmem.consolidate.dates import today
from fsmem.consolidate.history import RECORD, Record
from fsmem.consolidate.ledger import Ledger
from fsmem.consolidate.notes import NoteEntry, aligned, walk_notes
from fsmem.consolidate.settings import Progress, Settings
from fsmem.format.history_file import history_path
from fsmem.format.links import heading_link


@dataclass
class Inputs:
    notes: list[NoteEntry] = field(default_factory=list)  # notes with something not yet consolidated
    held_back: list[tuple[str, str]] = field(default_factory=list)  # (path, date) of notes dated after today
    documents: dict[str, Any] = field(default_factory=dict)  # path -> text, None (new) or docs.UNREADABLE
    histories: dict[str, Any] = field(default_factory=dict)  # document path -> its history file's, the same way
    targets: dict[str, subjects.Target] = field(default_factory=dict)  # document path -> its target
    records: dict[str, list[Record]] = field(default_factory=dict)  # document path -> the records it needs
    feeds: dict[str, set[str]] = field(default_factory=dict)  # document path -> notes with new items for it
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    dates: dict[str, str] = field(default_factory=dict)  # note source -> date
    paths: dict[str, Path] = field(default_factory=dict)  # document -> where it is (checked by the path rule)
    said: Callable[[str, str, str], bool | None] = lambda document, source, text: None  # noqa: E731
    today: str = ""


def gather(
    root: Path, settings: Settings, extractors: list, ledger: Ledger, progress: Progress | None = None
) -> Inputs:
    """Sync the ledger, find the new items, and collect every record and document they need."""
    inputs = Inputs(today=today())
    refused: list[tuple[str, int, str]] = []
    synced = ledger.sync(walk_notes(root, settings.archive_dir, refused), settings.archive_dir, extractors)
    inputs.problems.extend(refused + synced.refused)
    inputs.dates = synced.dates
    for entry in synced.pending:
        inputs.problems.extend((entry.path, line, message) for line, message in entry.problems)
        if not entry.readable:
            continue
        if _held_back(entry, inputs.today):
            inputs.held_back.append((entry.path, max(entry.date or "", entry.max_as_of or "")))
            continue
        if not _read_whole(root, entry, inputs):
            continue
        inputs.notes.append(entry)
    resolver = _Resolver(root, settings, ledger)
    # document -> (keys with new facts, date of the first new observation)
    wanted: dict[str, tuple[set[str], str | None]] = {}
    for number, entry in enumerate(inputs.notes, start=1):
        if progress:
            progress("reading notes", number, len(inputs.notes))
        for item in entry.new_items:
            target = resolver.target(item.heading)
            inputs.targets.setdefault(target.path, target)
            inputs.feeds.setdefault(target.path, set()).add(entry.path)
            keys, first = wanted.setdefault(target.path, (set(), None))
            if item.key is not None:
                keys.add(item.key)
            elif first is None or entry.date < first:  # type: ignore[operator]
                wanted[target.path] = (keys, entry.date)
    inputs.said = _Said(ledger, resolver, synced.paths, inputs.today)
    for path in sorted(wanted):
        keys, first_observation = wanted[path]
        text = inputs.documents[path] = _read_document(root, path, inputs)
        inputs.histories[path] = (
            _read_document(root, history_path(path), inputs) if text is not docs.UNREADABLE else None
        )
        shown = ledger.shown(path, _digest(text)) if isinstance(text, str) else {}
        inputs.records[path] = _records(ledger, resolver, path, keys, first_observation, inputs.today, shown)
    return inputs


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _held_back(entry: NoteEntry, day: str) -> bool:
    return bool(entry.date and entry.date > day) or bool(entry.max_as_of and entry.max_as_of > day)


BEING_SAVED = "open for writing (a save in place under way) or changed while it was read; note left for the next run"


def _read_whole(root: Path, entry: NoteEntry, inputs: Inputs) -> bool:
    """Read the note's text (again, when the ledger read it), under a read lease (`fsmem.store.leases`): a note an
    editor is saving in place holds half a save, whose cut last line would be merged into a document for good, so
    a note open for writing, or whose text is no longer what the ledger read, waits for the next run."""
    from fsmem.errors import FsmemError
    from fsmem.store import leases
    from fsmem.store.paths import read_regular, resolve

    try:
        entry.full = entry.full or resolve(root, entry.path)
        lease = leases.take(os.fspath(entry.full), None)
        if lease is None:
            inputs.problems.append((entry.path, 1, BEING_SAVED))
            return False
        try:
            data = read_regular(entry.full)
            broken = lease.broken
        finally:
            lease.release()
    except (FsmemError, OSError) as exc:
        inputs.problems.append((entry.path, 1, f"{exc}; note skipped"))
        return False
    text, bad = fmt.decode(data)
    if bad:
        return False
    if broken or (entry.text is not None and text != entry.text):
        inputs.problems.append((entry.path, 1, BEING_SAVED))
        return False
    entry.text = text
    return True


def _read_document(root: Path, path: str, inputs: Inputs) -> Any:
    """A document's text (None: it does not exist yet), or UNREADABLE (reported) when it may not or cannot be read."""
    from fsmem.errors import FsmemError
    from fsmem.store.paths import resolve

    try:
        full = resolve(root, path)
    except FsmemError as exc:
        inputs.problems.append((path, 1, f"{exc}; document skipped"))
        return docs.UNREADABLE
    inputs.paths[path] = full
    try:
        data = full.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        inputs.problems.append((path, 1, f"cannot be read ({exc.strerror}); document skipped"))
        return docs.UNREADABLE
    text, bad = fmt.decode(data)
    if bad:
        inputs.problems.append((path, bad[0].line, bad[0].message + "; document skipped"))
        return docs.UNREADABLE
    return text


class _Resolver:
    """Headings to documents: `kind/Name` directly, other headings against the existing documents' names."""

    def __init__(self, root: Path, settings: Settings, ledger: Ledger):
        self.root, self.settings, self.ledger = root, settings, ledger
        self.cache: dict[str | None, subjects.Target] = {}
        self.aliases: dict[str, set[str]] = {}  # document -> the paths that lead to it (itself, symbolic links)
        self._directory: list[subjects.DirectoryEntry] | None = None
        self._unkinded: dict[str, list[str | None]] | None = None

    def target(self, heading: str | None) -> subjects.Target:
        if heading not in self.cache:
            text = self.settings.default_subject if heading is None else heading
            found = None
            link = heading_link(text)
            if link is not None:  # `## [[Rosa Diaz]]`: the document the link leads to, else the name as a heading
                entry = subjects.linked(link, self.directory())
                found = subjects.target_of(entry) if entry else None
                text = link
            found = found or subjects.kinded(text)
            if found is None:
                entry = subjects.match(text, self.directory(), self.settings.subject_match_threshold)
                found = subjects.target_of(entry) if entry else subjects.topic(text)
            real = _real_path(self.root, found.path)
            self.aliases.setdefault(real, {real}).add(found.path)
            self.cache[heading] = dataclasses.replace(found, path=real)
        return self.cache[heading]

    def directory(self) -> list[subjects.DirectoryEntry]:
        if self._directory is None:
            self._directory = subjects.directory(self.root)
        return self._directory

    def unkinded_headings(self, path: str) -> list[str | None]:
        """The headings without a kind, in any note, that lead to `path`."""
        if self._unkinded is None:
            self._unkinded = {}
            for heading in self.ledger.unkinded_headings():
                self._unkinded.setdefault(self.target(heading).path, []).append(heading)
        return self._unkinded.get(path, [])


class _Said:
    """Whether a note said an observation, word for word, about a document (read from the ledger when asked)."""

    def __init__(self, ledger: Ledger, resolver: _Resolver, paths: dict[str, list[str]], day: str):
        self.ledger, self.resolver, self.paths, self.day = ledger, resolver, paths, day

    def __call__(self, document: str, source: str, text: str) -> bool | None:
        """True or False; None when `source` is no note there is (deleted, or never was): nobody can tell."""
        if source not in self.paths:
            return None
        for path in self.paths[source]:
            entry = self.ledger.entry(path)
            if entry.readable and not _held_back(entry, self.day):
                for item in entry.items:
                    if item.key is None and item.text == text and self.resolver.target(item.heading).path == document:
                        return True
        return False


def _real_path(root: Path, rel: str) -> str:
    """The memory path of the file `rel` leads to (itself unless a symbolic link inside the memory is on the way)."""
    from fsmem.errors import FsmemError
    from fsmem.store.paths import relative, resolve

    if not os.path.islink(root / rel):  # the common case, one lstat; folders that are links are written through
        return rel
    try:
        full = resolve(root, rel)
    except FsmemError:
        return rel  # refused: reported when the document is read
    return relative(root, Path(os.path.realpath(full)))


def _records(
    ledger: Ledger,
    resolver: _Resolver,
    path: str,
    keys: set[str],
    first_observation: str | None,
    day: str,
    shown: dict[str, tuple[str, list[str]]],
) -> list[Record]:
    """Every record `path` needs: all records of the keys with new facts, and the observations from the first new one's date.

    `shown` (note -> (the hash it was to be marked with, identities)) lists the records of notes not marked
    yet that the document was written with (by a run that stopped before it marked them)."""
    headings = resolver.unkinded_headings(path)
    notes: set[str] = set()
    for alias in sorted(resolver.aliases.get(path, {path})):
        if keys:
            notes.update(ledger.feeding(alias, headings, sorted(keys)))
        if first_observation is not None:
            notes.update(ledger.feeding(alias, headings, [""], since=first_observation))
    records = []
    for note_path in sorted(notes):
        entry = ledger.entry(note_path)
        if not entry.readable or _held_back(entry, day):
            continue
        for item in entry.items:
            if item.key is None and (first_observation is None or entry.date < first_observation):  # type: ignore[operator]
                continue
            if item.key is not None and item.key not in keys:
                continue
            if resolver.target(item.heading).path != path:
                continue
            date = (item.as_of or entry.date) if item.key is not None else entry.date
            order = (date, entry.source, RECORD, item.line, item.index, entry.path)
            records.append(Record(item.key, item.value, item.text, date or "", entry.source, order, not item.old))
    flagged = [r for r in records if not r.new]
    by_note: dict[str, list[Record]] = {}
    for record in records:
        if record.new:
            by_note.setdefault(record.note, []).append(record)
    for note_path, mine in sorted(by_note.items()):
        digest, identities = shown.get(note_path, ("", []))
        if identities and ledger.entry(note_path).mark == digest:  # marked since: what it held is old now
            identities = []
        applied = aligned(identities, [r.identity for r in mine]) if identities else set()
        flagged += [dataclasses.replace(r, shown=i in applied) for i, r in enumerate(mine)]
    return flagged
