"""Observations under `## Notes`: near-duplicates merged as if every note had been read in date order.

The rule, stated on all the records of a document in stamp order: a record joins
the earlier line it is most like (rapidfuzz ratio ≥ `near_duplicate_threshold`,
case and final punctuation ignored), else it starts a line of its own, in its
own words. A line shows its first words, the latest date among its records and
every note they came from.

A run does not recompute that from scratch. Let `t` be the earliest new record:
every record before `t` is placed as it would be whatever comes later, so the
lines that started before `t` stay, and only the records from `t` on (the new
ones and the old ones the document shows from `t` on, read again from the
ledger) are placed again. New notes are usually the latest, so this is usually
just the new records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from fsmem.consolidate import documents as docs
from fsmem.consolidate.history import Record
from fsmem.format import facts as F


@dataclass
class NotesPlan:
    dates: list[str] = field(default_factory=list)
    new_lines: list[tuple[tuple, str]] = field(default_factory=list)  # (first record's order, line) to place
    managed: list[int] = field(default_factory=list)  # indexes of the consolidator's lines that stay
    counts: Counter = field(default_factory=Counter)


@dataclass
class _Cluster:
    text: str
    norm: str
    sources: set[str]
    line: docs.NoteLine | None = None  # the existing line it is, if any
    order: tuple = ()
    changed: bool = False


def merge_observations(
    doc: docs.EntityDocument, records: list[Record], threshold: float, source_date: Callable[[str], str]
) -> NotesPlan:
    """Place the new observation records (and the old ones from the earliest new one on) under `## Notes`."""
    from rapidfuzz import fuzz, process

    result = NotesPlan()
    new = [r for r in records if r.new]
    if not new:
        return result
    t = min(r.order for r in new)
    citing: dict[str, list[docs.NoteLine]] = {}
    for line in doc.note_lines:
        for source in line.sources:
            citing.setdefault(source, []).append(line)
    members: dict[int, list[Record]] = {}
    unplaced: list[Record] = []
    explained: set[tuple[int, str]] = set()  # (line, source) that an old record accounts for
    # Old records first: a new record can only be what a line shows for its note when no old one is (the
    # note was never marked: a run wrote the document, then stopped before marking it).
    for record in sorted(records, key=lambda r: (r.new, r.order)):
        norm = F.normalize_text(record.text or "")
        best, score = None, -1.0
        for line in citing.get(record.source, []):
            if record.new and (line.index, record.source) in explained:
                continue
            value = fuzz.ratio(norm, F.normalize_text(line.text))
            if value >= threshold and value > score:
                best, score = line, value
        if best is not None and not record.new:
            explained.add((best.index, record.source))
        if best is None:
            unplaced.append(record)
        else:
            members.setdefault(best.index, []).append(record)
    pinned: list[_Cluster] = []
    kept: list[_Cluster] = []
    replay = [r for r in unplaced if r.new]  # an old record no line shows any more was deleted by a human
    for line in doc.note_lines:
        mine = sorted(members.get(line.index, []), key=lambda r: r.order)
        known = {r.source for r in mine}
        # all of the line's records were read again (none is older than t's date): the first one in its words
        # started it; new ones before that one were never applied (they only share a note with it)
        whole = bool(mine) and set(line.sources) <= known
        derived = line.cited and not whole
        if line.cited and whole:
            starter = next((r for r in mine if r.text == line.text), None)
            before = [r for r in mine if starter is None or r.order < starter.order]
            derived = starter is not None and all(r.new for r in before)
            if derived:
                replay.extend(before)
                mine = [r for r in mine if r not in before]
        released = [r for r in mine if r.order >= t]
        replay.extend(released)
        staying = {r.source for r in mine if r.order < t}
        if derived and whole and not staying:
            doc.delete(line.index)  # it started at or after t: placed again from its records
            continue
        sources = {s for s in line.sources if s in staying or s not in known}
        cluster = _Cluster(line.text, F.normalize_text(line.text), sources, line, changed=bool(released))
        (kept if derived else pinned).append(cluster)  # pinned: a human's line (uncited, or reworded)
        if derived:
            result.managed.append(line.index)
    clusters = pinned + kept
    norms = [c.norm for c in clusters]
    for record in sorted(replay, key=lambda r: r.order):
        norm = F.normalize_text(record.text or "")
        best = process.extractOne(norm, norms, scorer=fuzz.ratio, score_cutoff=threshold) if norms else None
        if best is not None:
            cluster = clusters[best[2]]
            if record.source not in cluster.sources:
                cluster.sources.add(record.source)
            cluster.changed = True
            if record.new:
                result.counts["observations_merged"] += 1
        else:
            cluster = _Cluster(record.text or "", norm, {record.source}, order=record.order, changed=True)
            clusters.append(cluster)
            norms.append(norm)
            if record.new:
                result.counts["observations_added"] += 1
        result.dates.append(record.date)
    for cluster in clusters:
        if not cluster.changed:
            continue
        dates = [source_date(s) for s in cluster.sources]
        date = max((d for d in dates if d), default=cluster.line.date if cluster.line else "")
        rendered = F.render_observation(cluster.text, date, sorted(cluster.sources))
        if cluster.line is not None:
            doc.replace(cluster.line.index, [rendered])
        else:
            result.new_lines.append((cluster.order, rendered))
    return result
