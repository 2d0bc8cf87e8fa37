"""Answers as the memory stood at a date (`as_of`): which lines read, grep, search and context leave out.

A keyed fact recorded after the bound is left out; one replaced by then is superseded
(left out, or shown marked with `include_superseded`); the value that held then is shown
as current, even from under `## Superseded`. Only keyed facts have a valid time
(`fsmem.format.valid_time`): other text is shown as it is now. This is valid time, what
was true then; history's `at` is the file as it was stored then.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fsmem import format as fmt
from fsmem.budget import echo
from fsmem.errors import FsmemError, InvalidArgument
from fsmem.format import facts as F, valid_time as V
from fsmem.store import paths
from fsmem.store.meta import EXACT_COUNT_LIMIT

if TYPE_CHECKING:
    from fsmem.search.scoring import Ranking
    from fsmem.store.scope import Scope

Ranges = list[tuple[int, int]]


def bound(as_of: str) -> str:
    """The stamp an `as_of` argument stands for: a date means its end (23:59:59 UTC), a time itself, in UTC."""
    text = str(as_of).strip()
    if F.valid_date(text):
        return f"{text}T23:59:59Z"
    parsed = fmt.parse_timestamp(text) if len(text) > 10 and F.valid_date(text[:10]) else None
    if parsed is None:
        from fsmem import faces

        raise InvalidArgument(
            f"{faces.arg('as_of')} takes a date such as 2026-11-01 or a time such as 2026-11-01T14:00:00Z, "
            f"not {echo(text)}"
        )
    return F.utc_stamp(parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.UTC))


@dataclass(frozen=True)
class Lines:
    """One file at the bound: the lines an answer leaves out, and those it shows marked superseded."""

    hidden: Ranges
    superseded: Ranges


def lines_as_of(root: Path, rels: list[str], stamp: str, *, include_superseded: bool) -> dict[str, Lines]:
    """Per file (missing or unreadable ones are left out), its lines at `stamp`."""
    texts: dict[str, str] = {}
    for rel in rels:
        text = read_text(root, rel)
        if text is not None:
            texts[rel] = text
    notes = {rel: text for rel, text in texts.items() if rel.startswith(V.SESSIONS + "/")}
    ended_in_notes = _ended_note_lines(root, notes, stamp) if notes else {}
    out: dict[str, Lines] = {}
    for rel, text in texts.items():
        view = V.as_of(V.file_facts(text, rel), stamp)
        if rel in notes:
            ended = {n for a, b in ended_in_notes.get(rel, []) for n in range(a, b + 1)}
            ended -= view.later
        else:
            ended = set(view.ended)
            for first, last in fmt.superseded_ranges(fmt.split(text)):
                section = set(range(first, last + 1))
                if section & view.current:
                    section.discard(first)  # the heading stays over a value that held then
                ended |= section - view.current - view.later
        hidden = set(view.later) if include_superseded else set(view.later) | ended
        out[rel] = Lines(V.ranges_of(hidden), V.ranges_of(ended) if include_superseded else [])
    return out


def kept_in_history(root: Path, rel: str, stamp: str, scope: Scope | None = None) -> list[str]:
    """The keys of document `rel` whose value at `stamp` is kept only in its history file now (bounded out of
    the document by `consolidate.superseded_in_document`): a read of the document says where they are. None
    of them when the history file lies outside `scope` (one naming the document alone): there it does not exist."""
    from fsmem.format.history_file import history_path, is_history_path

    if is_history_path(rel) or rel.startswith(V.SESSIONS + "/"):
        return []
    history = history_path(rel)
    if scope is not None and not scope.contains(history):
        return []
    older = read_text(root, history)  # first: most documents have none, and then the document is not read again
    text = read_text(root, rel) if older is not None else None
    if text is None or older is None:
        return []
    answered = {fact.key for fact in V.file_facts(text, rel) if V.recorded_by(fact, stamp)}
    keys: list[str] = []
    for fact in V.file_facts(older, history):  # every value in it is older than the document's own
        held = fact.value is not None and V.recorded_by(fact, stamp) and not V.ended_by(fact, stamp)
        if held and fact.key not in answered and fact.key not in keys:
            keys.append(fact.key)
    return keys


def read_text(root: Path, rel: str) -> str | None:
    """A memory file's text through the path rule; None when it is missing, too large or unreadable."""
    try:
        path = paths.resolve(root, rel, want="file")
        if os.stat(path).st_size > EXACT_COUNT_LIMIT:
            return None
        return fmt.decode(paths.read_regular(path))[0]
    except (OSError, FsmemError):
        return None


def _ended_note_lines(root: Path, notes: dict[str, str], stamp: str) -> dict[str, Ranges]:
    """The keyed facts of consolidated notes whose value a document says was replaced by `stamp`."""
    from fsmem.store.note_status import superseded_note_lines
    from fsmem.store.superseded_lines import superseded_of

    def document_ranges(docs: list[str]) -> dict[str, Ranges]:
        return {d: superseded_of(Path(root, d)) for d in docs if os.path.isfile(Path(root, d))}

    return superseded_note_lines(root, notes, document_ranges, ended_by=stamp)


def ranking_view(root: Path, stamp: str, *, include_superseded: bool) -> Callable[[Ranking], None]:
    """What a search at `stamp` does to its ranked candidates (ranked with superseded rows too): drop the rows
    recorded later (and those replaced by then, unless `include_superseded`), mark the rest."""

    def view(ranking: Ranking) -> None:
        rels = sorted({ranking.paths[rid] for rid in ranking.ids})
        files = lines_as_of(root, rels, stamp, include_superseded=include_superseded)
        kept = []
        for rid in ranking.ids:
            at, line = files.get(ranking.paths[rid]), ranking.lines[rid]
            if at is not None and in_ranges(line, at.hidden):
                continue
            kept.append(rid)
            if at is not None and in_ranges(line, at.superseded):
                ranking.stale.add(rid)
            else:
                ranking.stale.discard(rid)
                ranking.current.add(rid)
        ranking.ids = kept

    return view


def in_ranges(line: int, ranges: Ranges) -> bool:
    return any(first <= line <= last for first, last in ranges)
