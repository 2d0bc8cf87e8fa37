"""The merge of a history file (`fsmem.format.history_file`) that both sides changed: its values, pooled.

Every line of a history file is a superseded value, so there is no current value to
settle (the document's merge does that): a value added on either side is kept, one
removed on either side (a human forgetting it) is removed, and the values are laid
out as the consolidator lays them out, grouped by key, oldest first. The result
depends only on the three texts, as the rest of the merge.
"""

from __future__ import annotations

from fsmem.format import facts as F


def merge_history(base: str, ours: str, theirs: str) -> str:
    """The merged text: the lines around the values from the side that sorts first, the values pooled."""
    sides = sorted((ours, theirs))
    values = [_values(text) for text in (base, *sides)]
    removed = (values[0] - values[1]) | (values[0] - values[2])
    kept = (values[1] | values[2]) - removed
    frame = [line for line in _lines(sides[0]) if _value(line) is None]
    newline = "\r\n" if "\r\n" in sides[0][:4096] else "\n"
    return "".join(frame) + "".join(line + newline for line in sorted(kept, key=_order))


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def _value(line: str) -> F.KeyedFact | None:
    return F.parse_fact(line) if F.is_bullet(line) else None


def _values(text: str) -> set[str]:
    return {line.rstrip("\r\n") for line in _lines(text) if _value(line) is not None}


def _order(line: str) -> tuple[str, str, str]:
    fact = _value(line)
    assert fact is not None
    start = fact.provenance.first if fact.provenance is not None else (fact.as_of or "")
    return (fact.key, start, line)
