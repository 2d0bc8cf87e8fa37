"""Consolidation: merge session notes into entity and topic documents, mark superseded facts.

`gather` reads what is new (notes whose `consolidated:` hash differs from their
body) and only the documents those notes name; `plan` is pure and
deterministic (same inputs, same bytes, whatever order notes come in); `apply`
writes documents first and marks notes last, each write under the memory's
write lock and only if the file still holds the bytes that were planned from.
A run killed at any point therefore leaves files old or new, and the next run
redoes the unmarked notes, whose facts are then already present (a no-op).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.consolidate import documents as docs, extractors as ex, subjects
from fsmem.format import facts as F

SESSIONS = "sessions"
CONSOLIDATED_FIELD = fmt.CONSOLIDATED_FIELD
body_digest = fmt.body_digest
_marked_done = fmt.is_consolidated
KILL_ENV = "FSMEM_CONSOLIDATE_KILL_AFTER"  # test hook: SIGKILL this process after its Nth file write
_NOTE_PATH = re.compile(r"^sessions/(\d{4})/(\d{2})/(\d{2})/[^/]+$")

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
        from fsmem.store.paths import config_dir

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
                archive_dir=config_dir(data["archive_dir"], "consolidate.archive_dir"),
                index_max_tokens=int(data["index_max_tokens"]),
                progress_min_notes=int(data["progress_min_notes"]),
                max_attempts=max(1, int(data["max_attempts"])),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"fsmem.yaml consolidate: {exc}") from None


# -- inputs -----------------------------------------------------------------
@dataclass
class ParsedNote:
    """A session note that has something not yet consolidated."""

    path: str
    text: str
    digest: str
    date: str
    items: list[ex.Item]


@dataclass
class Inputs:
    notes: list[ParsedNote] = field(default_factory=list)
    done_notes: list[str] = field(default_factory=list)  # fully consolidated, still under sessions/
    documents: dict[str, str | None] = field(default_factory=dict)
    targets: dict[str | None, subjects.Target] = field(default_factory=dict)
    problems: list[tuple[str, int, str]] = field(default_factory=list)


def note_date(rel: str, front: dict[str, Any]) -> str | None:
    match = _NOTE_PATH.match(rel)
    if match:
        date = "-".join(match.groups())
        if F.valid_date(date):
            return date
    created = str(front.get("created") or "")[:10]
    return created if F.valid_date(created) else None


def _read(path: Path) -> tuple[str | None, str | None]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    text, problems = fmt.decode(data)
    return text, (f"{problems[0].line}: {problems[0].message}" if problems else None)


def gather(root: Path, settings: Settings, extractors: list, progress: Progress | None = None) -> Inputs:
    """Read the notes with something new, resolve their subjects, read the documents they name."""
    from fsmem.store.catalog import walk
    from fsmem.store.paths import relative

    inputs = Inputs()
    folder = root / SESSIONS
    paths = list(walk(root, folder)) if folder.is_dir() else []
    for number, path in enumerate(paths, start=1):
        if progress:
            progress("reading notes", number, len(paths))
        rel = relative(root, path)
        text, bad = _read(path)
        if text is None:
            continue
        if not bad and _marked_done(text):
            inputs.done_notes.append(rel)
            continue
        if bad:
            line, message = bad.split(": ", 1)
            inputs.problems.append((rel, int(line), message + "; note skipped"))
            continue
        doc = fmt.split(text)
        if doc.problems:
            inputs.problems.append((rel, doc.problems[0].line, doc.problems[0].message + "; note skipped"))
            continue
        digest = body_digest(text)
        if doc.front_matter.get(CONSOLIDATED_FIELD) == digest:
            inputs.done_notes.append(rel)
            continue
        date = note_date(rel, doc.front_matter)
        if date is None:
            inputs.problems.append(
                (rel, 1, "cannot date this note: not under sessions/YYYY/MM/DD/ and no valid 'created'")
            )
            continue
        note = ex.SessionNote(rel, date, text, doc.body, doc.body_start_line)
        extraction = ex.run(extractors, note)
        inputs.problems.extend((rel, line, message) for line, message in extraction.problems)
        inputs.notes.append(ParsedNote(rel, text, digest, date, extraction.items))
    _resolve(root, settings, inputs)
    for target in sorted({t.path for t in inputs.targets.values()}):
        text, bad = _read(root / target)
        if bad:
            line, message = bad.split(": ", 1)
            inputs.problems.append((target, int(line), message + "; document skipped"))
            inputs.documents[target] = docs.UNREADABLE
            continue
        inputs.documents[target] = text
    return inputs


def _resolve(root: Path, settings: Settings, inputs: Inputs) -> None:
    headings = sorted(
        {item.subject for note in inputs.notes for item in note.items}, key=lambda s: (s is None, s or "")
    )
    directory: list[subjects.DirectoryEntry] | None = None
    for heading in headings:
        text = settings.default_subject if heading is None else heading
        target = subjects.kinded(text)
        if target is None:
            if directory is None:  # only headings without a kind need the whole directory
                directory = subjects.directory(root)
            found = subjects.match(text, directory, settings.subject_match_threshold)
            target = subjects.target_of(found) if found else subjects.topic(text)
        inputs.targets[heading] = target


# -- plan ---------------------------------------------------------------------
@dataclass
class Change:
    path: str
    old: str | None  # None: the file does not exist yet
    new: str
    kind: str  # "document" or "note"


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    feeds: dict[str, set[str]] = field(default_factory=dict)  # document -> notes it takes items from
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


@dataclass
class _Run:
    value: str | None
    first: F.Stamp
    last: F.Stamp


@dataclass(frozen=True)
class _Record:
    item: ex.Item
    stamp: F.Stamp


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return F.normalize_value(a) == F.normalize_value(b)


def plan(inputs: Inputs, settings: Settings) -> Plan:
    """What consolidating `inputs` changes, as whole-file before/after texts. Pure and deterministic."""
    result = Plan(problems=list(inputs.problems))
    result.counts["documents_read"] = len(inputs.documents)
    by_doc: dict[str, list[_Record]] = {}
    targets: dict[str, subjects.Target] = {}
    notes = sorted(inputs.notes, key=lambda n: (n.date, n.path))
    for note in notes:
        result.counts["notes_read"] += 1
        for item in note.items:
            target = inputs.targets[item.subject]
            targets[target.path] = target
            by_doc.setdefault(target.path, []).append(
                _Record(item, F.Stamp(item.as_of or note.date, note.path, item.line))
            )
            result.feeds.setdefault(target.path, set()).add(note.path)
    blocked: set[str] = set()
    for path in sorted(by_doc):
        old = inputs.documents.get(path)
        if old is docs.UNREADABLE:
            blocked |= result.feeds[path]
            continue
        new, problem = plan_document(path, old, targets[path], by_doc[path], settings, result.counts)
        if problem:
            result.problems.append((path, problem[0], problem[1] + "; document skipped"))
            blocked |= result.feeds[path]
        elif new is not None and new != old:
            result.changes.append(Change(path, old, new, "document"))
    for note in notes:
        if note.path in blocked:
            continue
        marked = fmt.set_fields(note.text, {CONSOLIDATED_FIELD: note.digest})
        result.changes.append(Change(note.path, note.text, marked, "note"))
        result.counts["notes_consolidated"] += 1
    return result


def plan_document(
    path: str,
    text: str | None,
    target: subjects.Target,
    records: list[_Record],
    settings: Settings,
    counts: Counter,
) -> tuple[str | None, tuple[int, str] | None]:
    """The new text of one document after merging `records` into it (None: nothing to write)."""
    if text is None:
        dates = [r.stamp.date for r in records if r.stamp.date]
        text = docs.new_document(path, target.field, target.value, target.title, min(dates) if dates else "")
    doc = docs.EntityDocument(path, text)
    if doc.problems:
        return None, doc.problems[0]
    by_key: dict[str, list[_Record]] = {}
    for record in sorted(records, key=lambda r: r.stamp.key):
        if record.item.is_fact:
            by_key.setdefault(record.item.key or "", []).append(record)
    applied: list[str] = []
    for key in sorted(by_key, key=lambda k: (by_key[k][0].stamp.key, k)):
        applied += _apply_key(doc, key, by_key[key], counts)
    observations = sorted((r for r in records if not r.item.is_fact), key=lambda r: r.stamp.key)
    applied += _apply_observations(doc, observations, settings.near_duplicate_threshold, counts)
    if not doc.changed:
        return None, None
    dated = [d for d in applied if d]
    if dated and doc.front_matter:
        doc.bump_updated(max(dated))
        doc.lower_created(min(dated))
    return doc.text, None


def _apply_key(doc: docs.EntityDocument, key: str, records: list[_Record], counts: Counter) -> list[str]:
    """Merge the records of one key into the document's history of that key; the dates that took effect."""
    in_notes: dict[str, list[tuple[int, str | None]]] = {}
    for record in records:
        in_notes.setdefault(record.stamp.source, []).append((record.stamp.seq, record.item.value))
    blocked: set[str] = set()
    runs: list[_Run] = []
    for line in doc.fact_lines(key):
        first, last = line.first, line.last
        if first.source in in_notes:
            seq = _seq_of(in_notes[first.source], line.value, earliest=True)
            if seq is None:
                blocked.add(first.source)  # a human changed what that note said: the human wins
            else:
                first = F.with_seq(first, seq)
        if last.source in in_notes:
            seq = _seq_of(in_notes[last.source], line.value, earliest=False)
            if seq is None:
                blocked.add(last.source)
            else:
                last = F.with_seq(last, seq)
        runs.append(_Run(line.value, first, last))
    runs = _normalize(sorted(runs, key=lambda r: r.first.key))
    before = _snapshot(runs)
    history_before = len(runs) - (1 if runs and runs[-1].value is not None else 0)
    dates = []
    for record in records:
        if record.stamp.source in blocked:
            continue
        effect = _insert(runs, record.item.value, record.stamp)
        if effect == "new":
            counts["retracted" if record.item.value is None else "facts_added"] += 1
        elif effect == "confirm":
            counts["facts_confirmed"] += 1
        if effect != "none":
            dates.append(record.stamp.date)
    runs = _normalize(runs)
    if _snapshot(runs) == before:
        return []
    history = len(runs) - (1 if runs[-1].value is not None else 0)
    counts["superseded"] += max(0, history - history_before)
    _render_key(doc, key, runs)
    return dates


def _seq_of(said: list[tuple[int, str | None]], value: str | None, earliest: bool) -> int | None:
    seqs = [seq for seq, v in said if _same(v, value)]
    if not seqs:
        return None
    return min(seqs) if earliest else max(seqs)


def _normalize(runs: list[_Run]) -> list[_Run]:
    merged: list[_Run] = []
    for run in runs:
        if merged and _same(merged[-1].value, run.value):
            if run.last.key > merged[-1].last.key:
                merged[-1].last = run.last
            continue
        merged.append(_Run(run.value, run.first, run.last))
    return merged


def _snapshot(runs: list[_Run]) -> list[tuple]:
    return [
        (
            None if r.value is None else F.normalize_value(r.value),
            r.first.date,
            r.first.source,
            r.last.date,
            r.last.source,
        )
        for r in runs
    ]


def _insert(runs: list[_Run], value: str | None, stamp: F.Stamp) -> str:
    """Place one record in a key's history (runs of equal values, oldest first): 'new', 'confirm' or 'none'."""
    key = stamp.key
    index = -1
    for i, run in enumerate(runs):
        if run.first.key <= key:
            index = i
    if index == -1:
        if runs and _same(runs[0].value, value):
            runs[0].first = stamp
            return "confirm"
        runs.insert(0, _Run(value, stamp, stamp))
        return "new"
    run = runs[index]
    if _same(run.value, value):
        if key > run.last.key:
            run.last = stamp
            return "confirm"
        return "none"
    if key >= run.last.key:
        if index + 1 < len(runs) and _same(runs[index + 1].value, value):
            runs[index + 1].first = stamp
            return "confirm"
        runs.insert(index + 1, _Run(value, stamp, stamp))
        return "new"
    # recorded while the older value was still being confirmed: split that run around it
    runs[index : index + 1] = [
        _Run(run.value, run.first, run.first),
        _Run(value, stamp, stamp),
        _Run(run.value, run.last, run.last),
    ]
    return "new"


def _render_key(doc: docs.EntityDocument, key: str, runs: list[_Run]) -> None:
    """Rewrite the lines of one key: the current value in place, the history under `## Superseded`."""
    current = runs[-1] if runs[-1].value is not None else None
    history = runs[:-1] if current else runs
    wanted_current = F.render_current(key, current.value, current.first, current.last) if current else None
    lines = [line for line in doc.fact_lines(key) if not line.superseded]
    keep = next((line for line in lines if wanted_current and _shows(doc, line, wanted_current, current)), None)
    for line in reversed(lines):
        if line is keep:
            continue
        if wanted_current and keep is None and line is lines[0]:
            doc.replace(line.index, wanted_current)
        else:
            doc.delete(line.index)
    wanted = []
    for index, run in enumerate(history):
        to = runs[index + 1].first.date if index + 1 < len(runs) else None
        wanted.append(F.render_superseded(key, run.value, run.first, run.last, to or None))
    old = [line for line in doc.fact_lines(key) if line.superseded]
    old_texts = [doc.lines[line.index].rstrip("\r\n") for line in old]
    contiguous = all(b.index == a.index + 1 for a, b in zip(old, old[1:], strict=False))
    if old_texts != wanted or not contiguous:
        for line in reversed(old):
            doc.delete(line.index)
        if old:
            doc.insert(old[0].index, wanted)
        elif wanted:
            doc.append_to_section(docs.SUPERSEDED, wanted)
    if wanted_current and keep is None and not lines:
        doc.append_to_section(docs.FACTS, [wanted_current], before=(docs.NOTES, docs.SUPERSEDED))


def _shows(doc: docs.EntityDocument, line: docs.FactLine, wanted: str, run: _Run) -> bool:
    """True when an existing line already says what `run` says (its bytes are then kept)."""
    if doc.lines[line.index].rstrip("\r\n") == wanted:
        return True
    if not _same(line.value, run.value):
        return False
    return (line.first.date, line.first.source, line.last.date, line.last.source) == (
        run.first.date,
        run.first.source,
        run.last.date,
        run.last.source,
    )


def _apply_observations(
    doc: docs.EntityDocument, records: list[_Record], threshold: float, counts: Counter
) -> list[str]:
    """Add observations under `## Notes`, merging near-duplicates into the line they repeat."""
    if not records:
        return []
    from rapidfuzz import fuzz, process

    dates = []
    existing = doc.note_lines()
    norms = [F.normalize_text(line.text) for line in existing]
    for record in records:
        text, stamp = record.item.text or "", record.stamp
        best = (
            process.extractOne(F.normalize_text(text), norms, scorer=fuzz.ratio, score_cutoff=threshold)
            if norms
            else None
        )
        if best is not None:
            line = existing[best[2]]
            if stamp.source in line.sources:
                continue  # already consolidated from this note
            sources = tuple(sorted(set(line.sources) | {stamp.source}))
            date = max(line.date, stamp.date)
            doc.replace(line.index, F.render_observation(line.text, date, list(sources)))
            existing[best[2]] = docs.NoteLine(line.index, line.text, date, sources)
            counts["observations_merged"] += 1
        else:
            rendered = F.render_observation(text, stamp.date, [stamp.source])
            later = [
                line for line in existing if line.date and (line.date, line.sources) > (stamp.date, (stamp.source,))
            ]
            if later:  # keep the section in date order, whatever order notes arrive in
                doc.insert(later[0].index, [rendered])
            else:
                doc.append_to_section(docs.NOTES, [rendered], before=(docs.SUPERSEDED,))
            existing = doc.note_lines()
            norms = [F.normalize_text(line.text) for line in existing]
            counts["observations_added"] += 1
        dates.append(stamp.date)
    return dates
