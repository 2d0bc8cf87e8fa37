"""Valid time: when each keyed fact of a file held, read off the file itself. Pure, no I/O.

A value is current from the time it was recorded (its citation's first stamp, its
`(as of …)`, else the document's `created` or the note's date) until the next value of
its key (a superseded line's `to`, else the next value recorded). `as_of` answers and
`timeline` are made from this, so they need nothing but the files: the same on every
host and in every face.

Stamps are `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ` (`fsmem.format.facts`); a bound is
always the second form, and a date without a time counts as the start of its day, so
all comparisons are string comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsmem.format import facts as F
from fsmem.format.frontmatter import split
from fsmem.format.markdown import FENCED_CODE, headings

SESSIONS = "sessions"
NOTES_SECTION = "notes"
SUPERSEDED_SECTION = "superseded"


@dataclass(frozen=True)
class ValidFact:
    """One keyed fact line and the time it held: from `start` until `end` (None: still current)."""

    line: int  # 1-based line of the file
    key: str
    value: str | None  # None: the key was retracted
    start: str  # a stamp, or "" when nothing dates it
    end: str | None
    source: str  # the note its citation names first, else the file itself
    superseded: bool  # under `## Superseded` (as the file stands now)


def note_date(rel: str, front: dict) -> str | None:
    """A session note's date: its folder (sessions/YYYY/MM/DD/), else its `created`."""
    parts = rel.split("/")
    if len(parts) == 5 and parts[0] == SESSIONS:
        date = "-".join(parts[1:4])
        if F.valid_date(date):
            return date
    created = str(front.get("created") or "")[:10]
    return created if F.valid_date(created) else None


def file_facts(text: str, rel: str) -> list[ValidFact]:
    """Every keyed fact of the file with its valid time, in file order.

    In a document, the facts outside `## Notes` (as the consolidator reads them); in a session note
    (under sessions/), every keyed fact of its body, dated by its `(as of …)` or the note's date.
    """
    doc = split(text)
    front = doc.front_matter if isinstance(doc.front_matter, dict) else {}
    note = rel.startswith(SESSIONS + "/")
    if note:
        fallback = note_date(rel, front) or ""
    else:
        created = str(front.get("created") or "")[:10]
        fallback = created if F.valid_date(created) else ""
    owner: dict[int, str] = {}
    for heading in headings(doc.body, doc.body_start_line):
        if heading.level == 2:
            for number in range(heading.line, heading.end_line + 1):
                owner[number] = heading.title.strip().lower()
    found: list[tuple[int, F.KeyedFact, bool]] = []
    in_code = False
    for number, line in enumerate(doc.body.splitlines(), start=doc.body_start_line):
        if FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code or not F.is_bullet(line):
            continue
        where = owner.get(number, "")
        if not note and where == NOTES_SECTION:
            continue
        fact = F.parse_fact(line)
        if fact is not None:
            found.append((number, fact, where == SUPERSEDED_SECTION and not note))
    starts: dict[str, list[str]] = {}
    dated = []
    for number, fact, superseded in found:
        prov = fact.provenance
        start = prov.first if prov is not None else (fact.as_of or fallback)
        source = prov.sources[0] if prov is not None else rel
        dated.append((number, fact, superseded, start, source))
        starts.setdefault(fact.key, []).append(start)
    out = []
    for number, fact, superseded, start, source in dated:
        end = fact.provenance.to if fact.provenance is not None else None
        if end is None and not note:
            later = [s for s in starts[fact.key] if s > start]
            end = min(later) if later else None
        out.append(ValidFact(number, fact.key, fact.value, start, end, source, superseded))
    return out


def recorded_by(fact: ValidFact, bound: str) -> bool:
    """The value had been recorded at `bound` (an undated value always had)."""
    return fact.start <= bound


def ended_by(fact: ValidFact, bound: str) -> bool:
    """A later value had replaced it at `bound`."""
    return bool(fact.end) and fact.end <= bound  # type: ignore[operator]


@dataclass(frozen=True)
class AsOf:
    """A file's lines as the memory stood at a bound: what came later, what was replaced, what held."""

    later: frozenset[int]  # recorded after the bound: never shown
    ended: frozenset[int]  # replaced (or retracted) by then: shown only with include_superseded, marked
    current: frozenset[int]  # the value that held then


def as_of(facts: list[ValidFact], bound: str) -> AsOf:
    later, ended, current = set(), set(), set()
    for fact in facts:
        if not recorded_by(fact, bound):
            later.add(fact.line)
        elif ended_by(fact, bound) or fact.value is None:
            ended.add(fact.line)
        else:
            current.add(fact.line)
    return AsOf(frozenset(later), frozenset(ended), frozenset(current))


def ranges_of(lines: set[int] | frozenset[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as inclusive (first, last) ranges."""
    out: list[tuple[int, int]] = []
    for number in sorted(lines):
        if out and out[-1][1] == number - 1:
            out[-1] = (out[-1][0], number)
        else:
            out.append((number, number))
    return out
