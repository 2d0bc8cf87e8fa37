"""Consolidation: merge session notes into entity and topic documents, mark superseded facts.

`gather` brings the ledger in step with the notes, finds what is new, and for
every document a new item names collects *all* the records of the keys it
touches (from every note, old or new) and reads the document once; `plan`
computes from those inputs each document's new bytes and the notes'
`consolidated:` marks (deterministic; it only reads the ledger to tell a
human's line from the consolidator's). A key's history is re-derived from all
its records each time it changes (`history`), near-duplicate observations are
placed as if every note had been read in date order (`observations`), so the
result does not depend on how notes were batched, ordered or interrupted;
`apply` writes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsmem import format as fmt
from fsmem.consolidate import documents as docs, subjects
from fsmem.consolidate.dates import SESSIONS, note_date
from fsmem.consolidate.gather import Inputs, gather
from fsmem.consolidate.history import Record, merge_key
from fsmem.consolidate.notes import NoteEntry, source_of
from fsmem.consolidate.observations import merge_observations
from fsmem.consolidate.settings import CONSOLIDATED_FIELD, KILL_ENV, Progress, Settings, body_digest
from fsmem.format.history_file import history_path, new_history_text

__all__ = [
    "CONSOLIDATED_FIELD",
    "KILL_ENV",
    "SESSIONS",
    "Change",
    "Inputs",
    "Plan",
    "Progress",
    "Settings",
    "body_digest",
    "gather",
    "mark_note",
    "plan",
    "plan_document",
]


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
        old_history = inputs.histories.get(path)
        if old_history is docs.UNREADABLE:
            blocked |= inputs.feeds.get(path, set())
            continue
        history = docs.EntityDocument(
            history_path(path), old_history or new_history_text(), citation_paths(settings)[1]
        )
        new, problem, front = plan_document(
            path,
            old,
            inputs.targets[path],
            inputs.records[path],
            settings,
            result.counts,
            source_date,
            inputs.said,
            history,
        )
        if problem is None and history.problems:
            problem = history.problems[0]
        if problem:
            result.problems.append((path, problem[0], problem[1] + "; document skipped"))
            blocked |= inputs.feeds.get(path, set())
            continue
        new_history = history.text()
        if new_history != (old_history or new_history_text()):
            where = history_path(path)
            result.changes.append(Change(where, old_history, new_history, "document", inputs.paths.get(where)))
            result.feeds[where] = set(inputs.feeds.get(path, set()))  # a conflict there holds the notes back too
        if new is not None and new != old:
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
    history: docs.EntityDocument | None = None,
) -> tuple[str | None, tuple[int, str] | None, dict]:
    """The new text of one document after merging `records` into it (None: nothing to write).

    `history` is the document's history file (`fsmem.format.history_file`): every superseded value of the keys
    merged is laid out there too, and the document keeps the newest `settings.superseded_in_document` of each."""
    if text is None:
        known = [r.date for r in records if r.date]
        text = docs.new_document(path, target.field, target.value, target.title, min(known)[:10] if known else "")
    located, canonical = citation_paths(settings)
    doc = docs.EntityDocument(path, text, canonical)
    if doc.problems:
        return None, doc.problems[0], {}
    dates: list[str] = []
    facts: list[tuple[str, list[str]]] = []
    shown: list[tuple[str, list[str]]] = []  # superseded lines the document shows
    archived: list[tuple[str, list[str]]] = []  # every superseded line, for the history file
    by_key: dict[str, list[Record]] = {}
    for record in records:
        if record.key is not None:
            by_key.setdefault(record.key, []).append(record)
    for key in sorted(k for k, rs in by_key.items() if any(r.new for r in rs)):
        merged = merge_key(doc, key, by_key[key], settings.superseded_in_document, history, located)
        dates += merged.dates
        counts.update(merged.counts)
        if merged.current:
            facts.append((key, merged.current))
        if merged.history:
            shown.append((key, merged.history))
        if merged.archived:
            archived.append((key, merged.archived))
    if by_key:
        doc.ensure_section(docs.FACTS)
    notes = merge_observations(
        doc,
        [r for r in records if r.key is None],
        settings.near_duplicate_threshold,
        source_date,
        lambda source, text: said(path, source, text),
        located,
    )
    dates += notes.dates
    counts.update(notes.counts)
    _place(doc, facts, shown, notes.new_lines, notes.managed)
    if history is not None and archived:
        _place_history(history, archived)
    dated = [d for d in dates if d]
    if dated and doc.has_front_matter:  # also when only the history file changed: an older fact moves `created`
        doc.bump_updated(max(dated)[:10])  # dates, as before stamps had times: the same bytes on every host
        doc.lower_created(min(dated)[:10])
    new = doc.text()
    if new == doc.original:
        return None, None, {}
    return new, None, doc.front_matter


def citation_paths(settings: Settings) -> tuple[Callable[[str], str], Callable[[str], str]]:
    """(where a source's citation links to, the source a linked path stands for). With `archive`, a note is
    linked where the archive puts it (this run moves it there), so the link resolves once it is moved."""
    folder = settings.archive_dir.strip("/")

    def located(source: str) -> str:
        if settings.archive and source.startswith(SESSIONS + "/"):
            return folder + source[len(SESSIONS) :]
        return source

    return located, lambda linked: source_of(linked, folder)


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


def _place_history(history: docs.EntityDocument, archived: list[tuple[str, list[str]]]) -> None:
    """Put each key's superseded lines at their sorted place among the history file's lines that stay."""
    staying = [line for line in history.fact_lines() if line.cited and not history.removed(line.index)]
    old = [(line.index, line.key) for line in staying]
    for key, lines in archived:
        history.place(docs.SUPERSEDED, lines, key, old)
