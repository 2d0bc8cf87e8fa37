"""The parts of a memory file that merge by meaning rather than by line: front matter fields and keyed facts.

Front matter merges field by field: a field one side changed takes that side;
changed on both, `updated` takes the later time, `created` the earlier, a list
(tags, sources, aliases) the union, and any other field the side whose
`updated` is later (ties: the value that sorts last, so every host agrees).

A key whose lines under `## Facts` and `## Superseded` came out of the line
merge as neither side had them (both sides set it) is re-derived from all its
lines on both sides: each line is a value with the dates it was recorded
(its citation, its `(as of …)`, else the `updated` of the side that wrote
it); the value recorded last is current, every other goes under
`## Superseded` with its dates, rendered as the consolidator renders them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt
from fsmem.format import facts as F

FACTS = "facts"
SUPERSEDED = fmt.SUPERSEDED_HEADING.lower()
_FIELD = re.compile(r"^([A-Za-z_][\w\-]*)[ \t]*:")
_H2 = re.compile(r"^##" + fmt.HEADING_REST)


# -- front matter ----------------------------------------------------------------------------------
def field_blocks(lines: list[str]) -> dict[str, tuple[str, ...]]:
    """Front matter lines (between the fences) grouped by top-level field, in order; '' holds leading comments."""
    blocks: dict[str, list[str]] = {"": []}
    current = ""
    for line in lines:
        match = _FIELD.match(line)
        if match and match.group(1) not in blocks:
            current = match.group(1)
            blocks[current] = []
        blocks[current].append(line)
    return {name: tuple(block) for name, block in blocks.items() if block or name}


def _stamp(value: Any) -> str:
    parsed = fmt.parse_timestamp(str(value)) if value is not None else None
    return parsed.isoformat() if parsed is not None else ""


def merge_front(
    base: list[str], ours: list[str], theirs: list[str], values: tuple[dict, dict, dict], newline: str
) -> list[str]:
    """The merged lines between the fences."""
    b, o, t = field_blocks(base), field_blocks(ours), field_blocks(theirs)
    base_values, ours_values, theirs_values = values
    newer = _stamp(ours_values.get("updated")), _stamp(theirs_values.get("updated"))
    order = [name for name in b if name in o or name in t]
    order += _added(b, o, t)
    out: list[str] = []
    for name in order:
        bo, oo, to = b.get(name), o.get(name), t.get(name)
        if oo == to or to == bo:
            chosen = oo
        elif oo == bo:
            chosen = to
        elif oo is None or to is None:  # removed on one side, changed on the other: the change stays
            chosen = oo if oo is not None else to
        else:
            sides = (base_values.get(name), ours_values.get(name), theirs_values.get(name))
            chosen = _both_changed(name, oo, to, sides, newer, newline)
        out.extend(chosen or ())
    return out


def _added(
    base: dict[str, tuple[str, ...]], ours: dict[str, tuple[str, ...]], theirs: dict[str, tuple[str, ...]]
) -> list[str]:
    """The fields base lacks, in the order of the side whose order sorts first, then the other side's own, sorted:
    two hosts that each made a document write its fields in the consolidator's order, which the merge keeps, so
    the document is the bytes one host consolidating both notes writes. Leading comments ('') stay first."""
    one, two = sorted([[name for name in side if name not in base] for side in (ours, theirs)])
    order = one + sorted(name for name in two if name not in one)
    return sorted(order, key=lambda name: name != "")


def _both_changed(
    name: str,
    ours: tuple[str, ...],
    theirs: tuple[str, ...],
    values: tuple[Any, Any, Any],
    newer: tuple[str, str],
    newline: str,
) -> tuple[str, ...]:
    bv, ov, tv = values
    if name in ("updated", "created"):
        pair = sorted([(_stamp(ov), ours), (_stamp(tv), theirs)])
        return pair[-1][1] if name == "updated" else pair[0][1]
    if isinstance(ov, list) and isinstance(tv, list):  # the union, less what one side removed
        old = bv if isinstance(bv, list) else []
        stay = [item for item in old if item in ov and item in tv]
        added = [item for item in ov + tv if item not in old]
        union = stay + sorted(dict.fromkeys(map(str, added)), key=str)
        return (fmt.dump_field(name, union) + newline,)
    if newer[0] != newer[1]:
        return ours if newer[0] > newer[1] else theirs
    return max(ours, theirs)


# -- keyed facts ------------------------------------------------------------------------------------
def sections(lines: list[str]) -> list[tuple[str, int, int]]:
    """(lowercased title, heading index, end index exclusive) of each level-2 section of body lines."""
    found: list[tuple[str, int]] = []
    in_code = False
    for index, line in enumerate(lines):
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        match = _H2.match(line.rstrip("\r\n"))
        if match:
            found.append((match.group(1).strip().lower(), index))
        elif line.startswith("# "):
            found.append(("", index))
    out = []
    for number, (title, start) in enumerate(found):
        end = found[number + 1][1] if number + 1 < len(found) else len(lines)
        if title:
            out.append((title, start, end))
    return out


def fact_lines(lines: list[str]) -> dict[str, list[tuple[int, str, bool]]]:
    """Key -> (index, line, superseded) of every keyed fact under `## Facts` and `## Superseded`."""
    found: dict[str, list[tuple[int, str, bool]]] = {}
    for title, start, end in sections(lines):
        if title not in (FACTS, SUPERSEDED):
            continue
        for index in range(start + 1, end):
            fact = F.parse_fact(lines[index])
            if fact is not None:
                found.setdefault(fact.key, []).append((index, lines[index], title == SUPERSEDED))
    return found


@dataclass
class _Run:
    value: str | None
    first: F.Stamp
    last: F.Stamp
    line: str | None  # a hand-written current line, kept as written when it stays current
    superseded: bool = False  # a side already has it under ## Superseded: it does not come back
    bullet: str = "-"  # `-`, `*` or `+`: a line keeps the bullet it was written with


def _run_of(text: str, when: str, path: str, superseded: bool) -> _Run | None:
    """A fact line as a run of one value: its dates from its citation, its `(as of …)`, or `when`."""
    fact = F.parse_fact(text)
    if fact is None:
        return None
    prov = fact.provenance
    if prov is None:
        stamp = F.Stamp(fact.as_of or when, path)
        line = None if superseded else text.rstrip("\r\n")
        return _Run(fact.value, stamp, stamp, line, superseded, fact.bullet)
    first = F.Stamp(prov.first, prov.sources[0])
    return _Run(fact.value, first, prov.confirmed or first, None, superseded, fact.bullet)


def _runs_of_equal_values(ordered: list[_Run]) -> list[_Run]:
    """Values in time order, each one next to the same value made one run (the first of them, confirmed by the
    last), as the consolidator cuts a key's records: two hosts that each noted one value are one value
    recorded twice, never a value superseded by itself."""
    out: list[_Run] = []
    for run in ordered:
        before = out[-1] if out else None
        same = before is not None and (before.value is None) == (run.value is None)
        if before is not None and same and F.normalize_value(before.value or "") == F.normalize_value(run.value or ""):
            if (run.last.date, run.last.source) > (before.last.date, before.last.source):
                before.last = run.last
            before.superseded = before.superseded or run.superseded
            before.line = None  # its dates are both runs': written as the consolidator writes them
            continue
        out.append(run)
    return out


def rebuild(key: str, lines: list[tuple[str, str, bool]], path: str) -> tuple[list[str], list[str]]:
    """(current lines, superseded lines) of `key` from all its lines on both sides: (line, fallback date,
    under ## Superseded)."""
    merged: dict[tuple, _Run] = {}
    for text, when, superseded in lines:
        run = _run_of(text, when, path, superseded)
        if run is None:
            continue
        ident = (F.normalize_value(run.value) if run.value is not None else None, run.first.date, run.first.source)
        known = merged.get(ident)
        if known is None:
            merged[ident] = run
            continue
        if (run.last.date, run.last.source) > (known.last.date, known.last.source):
            known.last = run.last
        known.superseded = known.superseded or run.superseded
        known.line = known.line or run.line
    if not merged:
        return [], []
    ordered = _runs_of_equal_values(
        sorted(merged.values(), key=lambda r: (r.first.date, r.first.source, r.value or ""))
    )
    # the value recorded last; on a tie, not one a side already put under ## Superseded (it knew more)
    current = max(ordered, key=lambda r: (r.last.date, r.last.source, not r.superseded, r.first.date, r.value or ""))
    history = []
    for index, run in enumerate(ordered):
        if run is current:
            continue
        # the next value's time, even the same second (as the consolidator ends a value: a superseded line
        # without its end reads as a value that never ended)
        later = [r.first.date for r in ordered[index + 1 :]]
        to = min(later) if later else (current.first.date or None)
        history.append(F.render_superseded(key, run.value, run.first, run.last, to, path, run.bullet))
    if current.value is None:
        history.append(F.render_superseded(key, None, current.first, current.last, None, path, current.bullet))
        return [], history
    if current.line is not None:
        return [current.line], history
    return [F.render_current(key, current.value, current.first, current.last, path, current.bullet)], history
