"""One key's history, re-derived from every record of it: which value is current, which are superseded, and when.

A record is one thing a note said (`- status: open`), stamped with its date (the
note's, or its `(as of …)`), the note it came from and its place in that note.
The history is the records in stamp order, cut into runs of equal values: the
last run is current, the others are superseded "from … to …". Because it is
computed from all the records each time a key gets a new one, it does not
depend on the order or the batches the notes were consolidated in.

The document takes part in two ways. A line that the records explain (its
citation names a record with that value) is regenerated from them. Any other
line of the key (written by hand, or a consolidated line a human edited) is
kept as a *seed*: a run with the dates it shows, which the records then merge
into. A record that was already consolidated counts only if some line still
shows it, so a fact a human deleted stays deleted.

The document's history file (`fsmem.format.history_file`) takes part the same way:
its lines are the key's lines too, every superseded run is laid out there, and the
document keeps only the newest few. A superseded line a human removes from the
document is still shown by the history file, so it stays in the key's history
(and comes back into the document's window the next time the key changes); one
removed from both is gone.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from fsmem.consolidate import documents as docs
from fsmem.format import facts as F

RECORD, SEED_OLD, SEED_CURRENT = 1, 0, 2  # ranks: on one date and source, history seeds < records < current seeds
ARCHIVED = 1 << 40  # a history file's line numbers, shifted past any document's in the order of seeds


@dataclass(frozen=True)
class Record:
    """One item of one note, resolved to a document, with the order it counts in."""

    key: str | None  # None for an observation
    value: str | None  # a fact's value (None: retracted)
    text: str | None  # an observation's text
    date: str
    source: str
    order: tuple  # (date, source, rank, line, index, note path): total, the same on every host
    new: bool  # not consolidated before
    shown: bool = True  # the document may show it: consolidated before, or written by a run that then stopped

    @property
    def note(self) -> str:
        return self.order[5]

    @property
    def identity(self) -> str:
        """What the record says, to recognise it in a note that grew since."""
        return json.dumps([self.key, self.value, self.text, self.date], ensure_ascii=False)


@dataclass
class _Point:
    date: str
    source: str
    order: tuple

    def stamp(self, located: Callable[[str], str] = str) -> F.Stamp:
        return F.Stamp(self.date, located(self.source))


@dataclass
class _Run:
    value: str | None
    first: _Point
    last: _Point


@dataclass
class KeyPlan:
    """What merging one key does to the document: dated records applied, lines to place, counts."""

    dates: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)  # a current line to place under `## Facts`
    history: list[str] = field(default_factory=list)  # history lines to place under `## Superseded`
    archived: list[str] = field(default_factory=list)  # every history line, to place in the history file
    counts: Counter = field(default_factory=Counter)


def merge_key(
    doc: docs.EntityDocument,
    key: str,
    records: list[Record],
    kept: int | None = None,
    archive: docs.EntityDocument | None = None,
    located: Callable[[str], str] = str,
) -> KeyPlan:
    """Re-derive `key` from `records` (all of them, old and new) and the lines of it in the document and its
    history file; the document keeps the newest `kept` superseded values (all when None), the history all.
    `located(source)` is where a source's citation links to (the archive, once notes are moved there)."""
    result = KeyPlan()
    lines = doc.fact_lines(key)
    archived = archive.fact_lines(key) if archive is not None else []
    said: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        said.setdefault((record.date, record.source), []).append(record)
    seeds = [_seed_run(line) for line in lines if not _explained(line, said)]
    seeds += [_seed_run(line, ARCHIVED) for line in archived if not _explained(line, said)]
    shown = _Shown(lines + archived)
    included = [r for r in records if r.new or shown.covers(r)]
    runs = _normalize(sorted(seeds, key=lambda r: r.first.order))
    for record in sorted(included, key=lambda r: r.order):
        effect = _insert(runs, record.value, _Point(record.date, record.source, record.order))
        if record.new and effect != "none":
            if effect == "new":
                result.counts["retracted" if record.value is None else "facts_added"] += 1
            else:
                result.counts["facts_confirmed"] += 1
        result.dates.append(record.date)
    runs = _normalize(runs)
    if not runs:
        return result
    current = runs[-1] if runs[-1].value is not None else None
    history = runs[:-1] if current else runs
    before = max(sum(1 for line in lines if line.superseded), len(archived))
    result.counts["superseded"] += max(0, len(history) - before)
    bullets = _Bullets(lines + archived)
    anchor = next((line for line in lines if line.cited and not line.superseded), None)
    wanted_current = (
        F.render_current(
            key,
            current.value,
            current.first.stamp(located),
            current.last.stamp(located),
            doc.path,
            bullets.of(current, anchor.bullet if anchor is not None else "-"),
        )
        if current and current.value is not None
        else None
    )
    wanted_history = []
    for index, run in enumerate(history):
        to = runs[index + 1].first.date if index + 1 < len(runs) else None
        first, last = run.first.stamp(located), run.last.stamp(located)
        wanted_history.append(F.render_superseded(key, run.value, first, last, to or None, doc.path, bullets.of(run)))
    result.current = _lay_out(doc, [line for line in lines if not line.superseded], wanted_current)
    window = wanted_history
    if kept is not None and archive is not None:
        window = wanted_history[max(0, len(wanted_history) - kept) :]
    result.history = _lay_out_group(doc, [line for line in lines if line.superseded], window)
    if archive is not None:
        result.archived = _lay_out_group(archive, archived, wanted_history)
    return result


def _lay_out(doc: docs.EntityDocument, lines: list[docs.FactLine], wanted: str | None) -> list[str]:
    """Put the current line where the key's consolidated line is (else return it, to be placed); drop the rest."""
    anchor = next((line for line in lines if line.cited), None)
    for line in lines:
        if line is not anchor:
            doc.delete(line.index)
    if anchor is not None:
        doc.replace(anchor.index, [wanted] if wanted else [])
        return []
    return [wanted] if wanted else []


def _lay_out_group(doc: docs.EntityDocument, lines: list[docs.FactLine], wanted: list[str]) -> list[str]:
    anchor = next((line for line in lines if line.cited), None)
    for line in lines:
        if line is not anchor:
            doc.delete(line.index)
    if anchor is not None:
        doc.replace(anchor.index, wanted)
        return []
    return wanted


def _explained(line: docs.FactLine, said: dict[tuple[str, str], list[Record]]) -> bool:
    """True when the records account for this consolidated line: its first and last citations name them."""
    if not line.cited:
        return False
    firsts = said.get((line.first.date, line.first.source), [])
    if not any(r.value == line.value for r in firsts):
        return False
    lasts = said.get((line.last.date, line.last.source), [])
    return any(_same(r.value, line.value) for r in lasts)


class _Bullets:
    """The bullet each value was written with (`-`, `*`, `+`), so that a line keeps its own when it is rewritten
    or superseded: a run takes the bullet of the line that shows the same value from the same first record."""

    def __init__(self, lines: list[docs.FactLine]):
        self.found: dict[tuple, str] = {}
        for line in lines:
            self.found.setdefault(self._ident(line.value, line.first.date, line.first.source), line.bullet)

    @staticmethod
    def _ident(value: str | None, date: str, source: str) -> tuple:
        return (None if value is None else F.normalize_value(value), date, source)

    def of(self, run: _Run, default: str = "-") -> str:
        return self.found.get(self._ident(run.value, run.first.date, run.first.source), default)


class _Shown:
    """Which (date, source) spans each value has in the document, to test whether a record is still shown."""

    def __init__(self, lines: list[docs.FactLine]):
        self.spans: dict[str | None, list[tuple[tuple[str, str], tuple[str, str]]]] = {}
        for line in lines:
            value = None if line.value is None else F.normalize_value(line.value)
            first = (line.first.date, line.first.source)
            last = (line.last.date, line.last.source)
            self.spans.setdefault(value, []).append((first, max(first, last)))
        self.starts = {value: sorted(spans) for value, spans in self.spans.items()}
        self.ends = {value: [s[0] for s in spans] for value, spans in self.starts.items()}

    def covers(self, record: Record) -> bool:
        value = None if record.value is None else F.normalize_value(record.value)
        spans = self.starts.get(value)
        if not spans:
            return False
        point = (record.date, record.source)
        upto = bisect.bisect_right(self.ends[value], point)
        return any(last >= point for _first, last in spans[:upto])


def _seed_run(line: docs.FactLine, offset: int = 0) -> _Run:
    """A run for a line the records do not explain; `offset` sets a history file's lines after the document's."""
    rank = SEED_OLD if line.superseded or offset else SEED_CURRENT
    at = line.index + offset
    first = _Point(line.first.date, line.first.source, (line.first.date, line.first.source, rank, at, 0, ""))
    last = _Point(line.last.date, line.last.source, (line.last.date, line.last.source, rank, at, 0, ""))
    if last.order < first.order:
        last = first
    return _Run(line.value, first, last)


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return F.normalize_value(a) == F.normalize_value(b)


def _normalize(runs: list[_Run]) -> list[_Run]:
    merged: list[_Run] = []
    for run in runs:
        if merged and _same(merged[-1].value, run.value):
            if run.last.order > merged[-1].last.order:
                merged[-1].last = run.last
            continue
        merged.append(_Run(run.value, run.first, run.last))
    return merged


def _insert(runs: list[_Run], value: str | None, point: _Point) -> str:
    """Place one record in a key's history (runs of equal values, oldest first): 'new', 'confirm' or 'none'."""
    key = point.order
    index = -1
    for i in range(len(runs) - 1, -1, -1):
        if runs[i].first.order <= key:
            index = i
            break
    if index == -1:
        if runs and _same(runs[0].value, value):
            runs[0].first = point
            return "confirm"
        runs.insert(0, _Run(value, point, point))
        return "new"
    run = runs[index]
    if _same(run.value, value):
        if key > run.last.order:
            run.last = point
            return "confirm"
        return "none"
    if key >= run.last.order:
        if index + 1 < len(runs) and _same(runs[index + 1].value, value):
            runs[index + 1].first = point
            return "confirm"
        runs.insert(index + 1, _Run(value, point, point))
        return "new"
    # recorded while the older value was still being confirmed: split that run around it
    runs[index : index + 1] = [
        _Run(run.value, run.first, run.first),
        _Run(value, point, point),
        _Run(run.value, run.last, run.last),
    ]
    return "new"
