"""Observations under `## Notes`: near-duplicates merged as if every note had been read in date order.

The rule, stated on all the records of a document in stamp order: a record joins
the earlier line it is most like (rapidfuzz ratio ≥ `near_duplicate_threshold`,
case and final punctuation ignored) among those that say the same words
(`facts.observation_words`: a number, a negation, a name or an address that
differs is another observation), else it starts a line of its own, in its own
words. A line shows its first words, the latest date among its records and
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
    words: tuple[str, ...]
    sources: set[str]
    line: docs.NoteLine | None = None  # the existing line it is, if any
    order: tuple = ()
    changed: bool = False


def merge_observations(
    doc: docs.EntityDocument,
    records: list[Record],
    threshold: float,
    source_date: Callable[[str], str],
    said: Callable[[str, str], bool | None] = lambda source, text: None,
    located: Callable[[str], str] = str,
) -> NotesPlan:
    """Place the new observation records (and the old ones from the earliest new one on) under `## Notes`;
    `located(source)` is where a source's citation links to."""
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
    forms: dict[int, tuple[str, tuple[str, ...]]] = {}  # a line's normal form and words, taken once when needed

    def form_of(line: docs.NoteLine) -> tuple[str, tuple[str, ...]]:
        if line.index not in forms:
            forms[line.index] = (F.normalize_text(line.text), F.observation_words(line.text))
        return forms[line.index]

    # Which line shows each record: only a record the document can show (consolidated before, or written by a
    # run that stopped before marking its note) is looked for, among the lines that cite its note: those that
    # say its words (as every line merged by this rule does), else any (a line a person reworded, or merged by
    # a rule of before), so that a note of many observations is not compared with each of its lines.
    members: dict[int, list[Record]] = {}
    replay = [r for r in records if r.new and not r.shown]
    for record in sorted((r for r in records if r.shown), key=lambda r: r.order):
        norm, words = F.normalize_text(record.text or ""), F.observation_words(record.text or "")
        best, score = None, -1.0
        candidates = citing.get(record.source, [])
        for line in [line for line in candidates if form_of(line)[1] == words] or candidates:
            value = fuzz.ratio(norm, form_of(line)[0], score_cutoff=threshold)
            if value >= threshold and value > score:
                best, score = line, value
        if best is not None:
            members.setdefault(best.index, []).append(record)
        elif record.new:
            replay.append(record)  # (an old record no line shows any more was deleted by a human)
    lines: list[tuple[_Cluster, str]] = []  # existing lines that stay, with "derived", "pinned" or "unread"
    for line in doc.note_lines:
        mine = sorted(members.get(line.index, []), key=lambda r: r.order)
        known = {r.source for r in mine}
        # all of the line's records were read again (none is older than t's date): the line is the
        # consolidator's if its first record is in its words, else a human's (reworded, or took a citation)
        whole = bool(mine) and set(line.sources) <= known
        derived = line.cited and whole and mine[0].text == line.text
        released = [r for r in mine if r.order >= t]
        replay.extend(released)
        staying = {r.source for r in mine if r.order < t}
        if derived and whole and not staying:
            doc.delete(line.index)  # it started at or after t: placed again from its records
            continue
        sources = {s for s in line.sources if s in staying or s not in known}
        cluster = _Cluster(line.text, *form_of(line), sources, line, changed=bool(released))
        lines.append((cluster, "derived" if derived else "unread" if line.cited and not whole else "pinned"))
    # A consolidated line whose first records were not read again is the consolidator's unless all its notes
    # are there and none of them said it in its words (then it is a human's line that took a citation); only
    # the last consolidator's line decides where new lines go, so lines are checked from the end until one is.
    for number in range(len(lines) - 1, -1, -1):
        cluster, kind = lines[number]
        if kind == "unread" and cluster.line is not None:
            answers = [said(s, cluster.text) for s in cluster.line.sources]
            kind = "pinned" if answers and all(a is False for a in answers) else "derived"
            lines[number] = (cluster, kind)
        if kind == "derived":
            break
    pinned = [c for c, kind in lines if kind == "pinned"]
    kept = [c for c, kind in lines if kind != "pinned"]
    result.managed = [c.line.index for c in kept if c.line is not None]
    clusters = pinned + kept
    saying: dict[tuple[str, ...], list[int]] = {}  # the clusters that say each list of words, in order
    for number, cluster in enumerate(clusters):
        saying.setdefault(cluster.words, []).append(number)
    for record in sorted(replay, key=lambda r: r.order):
        norm, words = F.normalize_text(record.text or ""), F.observation_words(record.text or "")
        alike = saying.get(words, [])
        match = process.extractOne(norm, [clusters[n].norm for n in alike], scorer=fuzz.ratio, score_cutoff=threshold)
        if match is not None:
            cluster = clusters[alike[match[2]]]
            if record.source not in cluster.sources:
                cluster.sources.add(record.source)
            cluster.changed = True
            if record.new:
                result.counts["observations_merged"] += 1
        else:
            cluster = _Cluster(record.text or "", norm, words, {record.source}, order=record.order, changed=True)
            saying.setdefault(words, []).append(len(clusters))
            clusters.append(cluster)
            if record.new:
                result.counts["observations_added"] += 1
        result.dates.append(record.date)
    for cluster in clusters:
        if not cluster.changed:
            continue
        dates = {s: source_date(s) for s in cluster.sources}
        date = max((d for d in dates.values() if d), default=cluster.line.date if cluster.line else "")
        dated = min((s for s, d in dates.items() if d and d == date), default=None)  # the note of that date
        bullet = cluster.line.bullet if cluster.line is not None else "-"
        cited = [located(s) for s in F.dated_first(cluster.sources, dated)]
        rendered = F.render_observation(cluster.text, date, cited, doc.path, bullet)
        if cluster.line is not None:
            doc.replace(cluster.line.index, [rendered])
        else:
            result.new_lines.append((cluster.order, rendered))
    return result
