"""Consolidation: merge session notes into entity and topic documents, mark superseded facts.

`gather` brings the ledger in step with the notes, finds what is new, and for
every document a new item names collects *all* the records of the keys it
touches (from every note, old or new) and reads the document once; `plan` is
pure: from those inputs it computes each document's new bytes and the notes'
`consolidated:` marks. A key's history is re-derived from all its records each
time it changes (`history`), near-duplicate observations are placed as if every
note had been read in date order (`observations`), so the result does not depend
on how notes were batched, ordered or interrupted; `apply` writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.consolidate import documents as docs, subjects
from fsmem.consolidate.dates import note_date, today
from fsmem.consolidate.history import RECORD, Record, merge_key
from fsmem.consolidate.ledger import Ledger
from fsmem.consolidate.notes import NoteEntry, aligned, walk_notes
from fsmem.consolidate.observations import merge_observations

CONSOLIDATED_FIELD = fmt.CONSOLIDATED_FIELD
body_digest = fmt.body_digest
KILL_ENV = "FSMEM_CONSOLIDATE_KILL_AFTER"  # test hook: SIGKILL this process after its Nth file write

DEFAULTS: dict[str, Any] = {
    "default_subject": "topic/Inbox",
    "subject_match_threshold": 90,
    "near_duplicate_threshold": 90,
    "extractors": ["rules"],
    "archive": False,
    "archive_dir": "archive/sessions",
    "index_max_tokens": 1500,
    "progress_min_notes": 50,
    "max_attempts": 3,
}

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Settings:
    default_subject: str
    subject_match_threshold: float
    near_duplicate_threshold: float
    extractors: tuple[str, ...]
    archive: bool
    archive_dir: str
    index_max_tokens: int
    progress_min_notes: int
    max_attempts: int

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> Settings:
        from fsmem.errors import ConfigError

        data = {**DEFAULTS, **(section or {})}
        unknown = sorted(set(data) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"fsmem.yaml consolidate: unknown setting(s) {', '.join(unknown)}")
        names = data["extractors"]
        if isinstance(names, str):
            names = [names]
        try:
            return cls(
                default_subject=str(data["default_subject"]),
                subject_match_threshold=float(data["subject_match_threshold"]),
                near_duplicate_threshold=float(data["near_duplicate_threshold"]),
                extractors=tuple(str(n) for n in names),
                archive=bool(data["archive"]),
                archive_dir=str(data["archive_dir"]).strip("/"),
                index_max_tokens=int(data["index_max_tokens"]),
                progress_min_notes=int(data["progress_min_notes"]),
                max_attempts=max(1, int(data["max_attempts"])),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"fsmem.yaml consolidate: {exc}") from None


# -- inputs -----------------------------------------------------------------
@dataclass
class Inputs:
    notes: list[NoteEntry] = field(default_factory=list)  # notes with something not yet consolidated
    held_back: list[tuple[str, str]] = field(default_factory=list)  # (path, date) of notes dated after today
    documents: dict[str, Any] = field(default_factory=dict)  # path -> text, None (new) or docs.UNREADABLE
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
    synced = ledger.sync(walk_notes(root, settings.archive_dir), settings.archive_dir, extractors)
    inputs.problems.extend(synced.refused)
    inputs.dates = synced.dates
    for entry in synced.pending:
        inputs.problems.extend((entry.path, line, message) for line, message in entry.problems)
        if not entry.readable:
            continue
        if _held_back(entry, inputs.today):
            inputs.held_back.append((entry.path, max(entry.date or "", entry.max_as_of or "")))
            continue
        if entry.text is None:
            entry.text = _read_note_text(root, entry, inputs)
            if entry.text is None:
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
        shown = ledger.shown(path, _digest(text)) if isinstance(text, str) else {}
        inputs.records[path] = _records(ledger, resolver, path, keys, first_observation, inputs.today, shown)
    return inputs


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _held_back(entry: NoteEntry, day: str) -> bool:
    return bool(entry.date and entry.date > day) or bool(entry.max_as_of and entry.max_as_of > day)


def _read_note_text(root: Path, entry: NoteEntry, inputs: Inputs) -> str | None:
    from fsmem.errors import FsmemError
    from fsmem.store.paths import resolve

    try:
        entry.full = resolve(root, entry.path)
        data = entry.full.read_bytes()
    except (FsmemError, OSError) as exc:
        inputs.problems.append((entry.path, 1, f"{exc}; note skipped"))
        return None
    text, bad = fmt.decode(data)
    return None if bad else text


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
            found = subjects.kinded(text)
            if found is None:
                if self._directory is None:
                    self._directory = subjects.directory(self.root)
                entry = subjects.match(text, self._directory, self.settings.subject_match_threshold)
                found = subjects.target_of(entry) if entry else subjects.topic(text)
            real = _real_path(self.root, found.path)
            self.aliases.setdefault(real, {real}).add(found.path)
            self.cache[heading] = dataclasses.replace(found, path=real)
        return self.cache[heading]

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


# -- plan ---------------------------------------------------------------------
@dataclass
class Change:
    path: str
    old: str | None  # None: the file does not exist yet
    new: str
    kind: str  # "document" or "note"
    full: Path | None = None  # where to write it, as the path rule resolved it when it was read


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    feeds: dict[str, set[str]] = field(default_factory=dict)  # document -> notes it takes new items from
    notes: dict[str, NoteEntry] = field(default_factory=dict)  # note path -> what was read of it
    held_back: list[tuple[str, str]] = field(default_factory=list)
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    fronts: dict[str, tuple[dict, str]] = field(default_factory=dict)  # document -> (front matter, new text)
    holds: dict[str, dict[str, tuple[str, list[str]]]] = field(default_factory=dict)  # document -> note -> (its
    # hash-to-be, the new records of it the document holds)


def plan(inputs: Inputs, settings: Settings) -> Plan:
    """What consolidating `inputs` changes, as whole-file before/after texts. Pure and deterministic."""
    result = Plan(problems=list(inputs.problems), held_back=list(inputs.held_back), feeds=dict(inputs.feeds))
    result.counts["documents_read"] = sum(1 for text in inputs.documents.values() if text is not docs.UNREADABLE)
    result.counts["notes_read"] = len(inputs.notes)

    def source_date(source: str) -> str:
        return inputs.dates.get(source) or note_date(source, {}) or ""

    blocked: set[str] = set()
    digests = {entry.path: entry.digest for entry in inputs.notes}
    for path in sorted(inputs.records):
        old = inputs.documents.get(path)
        if old is docs.UNREADABLE:
            blocked |= inputs.feeds.get(path, set())
            continue
        new, problem, front = plan_document(
            path, old, inputs.targets[path], inputs.records[path], settings, result.counts, source_date, inputs.said
        )
        if problem:
            result.problems.append((path, problem[0], problem[1] + "; document skipped"))
            blocked |= inputs.feeds.get(path, set())
        elif new is not None and new != old:
            result.changes.append(Change(path, old, new, "document", inputs.paths.get(path)))
            result.fronts[path] = (front, new)
            holds: dict[str, tuple[str, list[str]]] = {}
            for record in sorted(inputs.records[path], key=lambda r: (r.note, r.order[3], r.order[4])):
                if record.new:
                    holds.setdefault(record.note, (digests.get(record.note, ""), []))[1].append(record.identity)
            result.holds[path] = holds
    for entry in inputs.notes:
        if entry.path in blocked or entry.text is None:
            continue
        marked = mark_note(entry.text, entry.body_start_line, entry.digest)
        result.changes.append(Change(entry.path, entry.text, marked, "note", entry.full))
        result.notes[entry.path] = entry
        result.counts["notes_consolidated"] += 1
    return result


def mark_note(text: str, body_start_line: int, digest: str) -> str:
    """The note with `consolidated: <digest>` in its front matter; nothing else changes."""
    if body_start_line < 3:
        return fmt.set_fields(text, {CONSOLIDATED_FIELD: digest})
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    head = docs.set_front_fields(
        lines[: body_start_line - 1], body_start_line - 2, {CONSOLIDATED_FIELD: digest}, newline
    )
    return "".join(head + lines[body_start_line - 1 :])


def plan_document(
    path: str,
    text: str | None,
    target: subjects.Target,
    records: list[Record],
    settings: Settings,
    counts: Counter,
    source_date: Callable[[str], str],
    said: Callable[[str, str, str], bool | None] = lambda document, source, text: None,
) -> tuple[str | None, tuple[int, str] | None, dict]:
    """The new text of one document after merging `records` into it (None: nothing to write)."""
    if text is None:
        dates = [r.date for r in records if r.date]
        text = docs.new_document(path, target.field, target.value, target.title, min(dates) if dates else "")
    doc = docs.EntityDocument(path, text)
    if doc.problems:
        return None, doc.problems[0], {}
    dates: list[str] = []
    facts: list[tuple[str, list[str]]] = []
    history: list[tuple[str, list[str]]] = []
    by_key: dict[str, list[Record]] = {}
    for record in records:
        if record.key is not None:
            by_key.setdefault(record.key, []).append(record)
    for key in sorted(k for k, rs in by_key.items() if any(r.new for r in rs)):
        merged = merge_key(doc, key, by_key[key])
        dates += merged.dates
        counts.update(merged.counts)
        if merged.current:
            facts.append((key, merged.current))
        if merged.history:
            history.append((key, merged.history))
    if by_key:
        doc.ensure_section(docs.FACTS)
    notes = merge_observations(
        doc,
        [r for r in records if r.key is None],
        settings.near_duplicate_threshold,
        source_date,
        lambda source, text: said(path, source, text),
    )
    dates += notes.dates
    counts.update(notes.counts)
    _place(doc, facts, history, notes.new_lines, notes.managed)
    new = doc.text()
    if new == doc.original:
        return None, None, {}
    dated = [d for d in dates if d]
    if dated and doc.has_front_matter:
        doc.bump_updated(max(dated))
        doc.lower_created(min(dated))
        new = doc.text()
    return new, None, doc.front_matter


def _place(
    doc: docs.EntityDocument,
    facts: list[tuple[str, list[str]]],
    history: list[tuple[str, list[str]]],
    observations: list[tuple[tuple, str]],
    kept_notes: list[int],
) -> None:
    """Put new lines at their sorted place among the consolidator's lines that stay in each section."""
    staying = [line for line in doc.fact_lines() if line.cited and not doc.removed(line.index)]
    current = [(line.index, line.key) for line in staying if not line.superseded and line.section == "facts"]
    for key, lines in facts:
        doc.place(docs.FACTS, lines, key, current)
    old = [(line.index, line.key) for line in staying if line.superseded]
    for key, lines in history:
        doc.place(docs.SUPERSEDED, lines, key, old)
    managed = [(index, (0,)) for index in kept_notes if not doc.removed(index)]
    for order, line in sorted(observations):
        doc.place(docs.NOTES, [line], (1, order), managed)
