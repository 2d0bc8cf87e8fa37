"""A subject's timeline: every value each key of its document has had, in time order, paged like every list.

Each value is read off the document's lines (`fsmem.format.valid_time`): when it was
recorded, until when it held, the note its citation names and who wrote that note (the
note's `agent`, else its `session`). A value whose cited note gives the key another value
(`fsmem.query.fact_check`) was edited by a person: it is shown as such, with who changed
the line and when where history says so, not as what that note said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsmem.budget import Count, Meter, Metered, Page, Paged
from fsmem.format import facts as F
from fsmem.format.valid_time import ValidFact


@dataclass
class TimelineEntry:
    """One value of one key: from `date` until `until` (None: it still holds)."""

    key: str
    value: str | None  # None: retracted
    date: str
    until: str | None
    source: str
    writer: str | None
    line: int  # where `path` shows it
    path: str  # the document, or its history file when only that holds the value
    edited: bool = False  # changed by hand after its note was consolidated: `source` is then `path`
    edited_on: str | None = None  # the date of that change, where history has it

    @property
    def current(self) -> bool:
        return self.until is None and self.value is not None

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "current": self.current}


def entry_row(entry: TimelineEntry) -> str:
    value = F.RETRACTED + " (retracted)" if entry.value is None else entry.value
    span = f"{entry.date or F.UNDATED} to {entry.until}" if entry.until else f"{entry.date or F.UNDATED}, current"
    if entry.value is None and not entry.until:
        span = entry.date or F.UNDATED
    writer = f" by {entry.writer}" if entry.writer else ""
    if entry.edited:
        by = f" by {entry.writer}" if entry.writer else " by hand"
        writer = f" edited{by}" + (f" on {entry.edited_on}" if entry.edited_on else "")
    return f"{entry.key}: {value}  ({span})  {entry.source}{writer}"


@dataclass
class TimelineResult(Paged, Metered):
    """A page of a subject's values, key by key, oldest first, and where it stands among all (`page`)."""

    subject: str
    path: str
    entries: list[TimelineEntry]
    page: Page
    meter: Meter | None = field(default=None, repr=False, compare=False)

    @property
    def cited(self) -> list[str]:
        return [f"{entry.path}:{entry.line}" for entry in self.entries]

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "path": self.path,
            "values": [e.to_dict() for e in self.entries],
            **self.page.to_dict(),
            "tokens": self.tokens,
        }

    def to_text(self) -> str:
        lines = [f"{self.path}:"] + [entry_row(e) for e in self.entries]
        if not self.entries and not self.total:
            lines.append("(no keyed facts)")
        lines.append(self.page.trailer("values", narrow=", or name one KEY"))
        return "\n".join(lines)


def entries_of(
    facts: list[tuple[str, ValidFact]],
    key: str | None,
    writer: Callable[[str], str | None],
    shown: Callable[[str], bool],
    edits: dict[tuple[str, int], tuple[str | None, str | None]] | None = None,
) -> list[TimelineEntry]:
    """Every value of `key` (all keys when None), keys in order, each key's values oldest first; a value whose
    source `shown` refuses (outside the caller's scope) is left out. `facts` are (file, fact), the document's
    first: a value both a document and its history file show is listed once, where the document shows it.
    `edits` names the lines (file, line) a person changed after their note, with who and when (None: unknown)."""
    edits = edits or {}
    seen: set[tuple] = set()
    chosen: list[tuple[str, ValidFact]] = []
    for path, f in facts:
        same = (f.key, None if f.value is None else F.normalize_value(f.value), f.start, f.end, f.source)
        if (key is None or f.key == key) and shown(f.source) and same not in seen:
            seen.add(same)
            chosen.append((path, f))
    order = {path: rank for rank, path in enumerate(dict.fromkeys(path for path, _ in facts))}
    chosen.sort(key=lambda pf: (pf[1].key, pf[1].start, pf[1].end is None, order[pf[0]], pf[1].line))
    out = []
    for path, f in chosen:
        if (path, f.line) in edits:
            who, when = edits[(path, f.line)]
            out.append(TimelineEntry(f.key, f.value, f.start, f.end, path, who, f.line, path, True, when))
        else:
            out.append(TimelineEntry(f.key, f.value, f.start, f.end, f.source, writer(f.source), f.line, path))
    return out


def page_of(
    subject: str,
    path: str,
    entries: list[TimelineEntry],
    count: Count,
    *,
    offset: int,
    max_results: int,
    max_tokens: int,
) -> TimelineResult:
    meter = Meter(count, max_tokens=max_tokens, max_results=max_results)
    meter.spend(f"{path}:\n")
    shown: list[TimelineEntry] = []
    for entry in entries[offset:]:
        if not meter.take_text(entry_row(entry)):
            break
        shown.append(entry)
    page = Page(offset=offset, shown=len(shown), total=len(entries), cut_by=meter.cut_by)
    return TimelineResult(subject, path, shown, page, meter)
