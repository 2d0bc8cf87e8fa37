"""A three-way merge of lines: what changed on one side is taken, what changed on both is a conflict region.

The classic diff3 walk: lines of the base that both sides kept are
synchronisation points; between two of them, a side that left the base alone
yields to the other, two sides that made the same change agree, changes to
different lines of a stretch of equal length are taken line by line (git's
diff3 calls two changed neighbours a conflict), and other different changes
are a conflict the caller resolves (`fsmem.history.merge`
knows facts, notes and front matter; `undo` refuses).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class Region:
    """`lines` when the merge is settled here; otherwise base, ours and theirs of a conflict."""

    lines: tuple[str, ...] = ()
    conflict: bool = False
    base: tuple[str, ...] = ()
    ours: tuple[str, ...] = ()
    theirs: tuple[str, ...] = ()


def _matches(base: list[str], other: list[str]) -> list[tuple[int, int, int]]:
    return [tuple(m) for m in SequenceMatcher(None, base, other, autojunk=False).get_matching_blocks()]  # type: ignore[misc]


def _sync_points(base: list[str], ours: list[str], theirs: list[str]) -> list[tuple[int, int, int, int, int, int]]:
    """(base start, base end, ours start, ours end, theirs start, theirs end) of runs both sides kept."""
    left, right = _matches(base, ours), _matches(base, theirs)
    points = []
    i = j = 0
    while i < len(left) and j < len(right):
        a_base, a_other, a_len = left[i]
        b_base, b_other, b_len = right[j]
        start, end = max(a_base, b_base), min(a_base + a_len, b_base + b_len)
        if start < end:
            a_at, b_at = a_other + start - a_base, b_other + start - b_base
            points.append((start, end, a_at, a_at + end - start, b_at, b_at + end - start))
        if a_base + a_len < b_base + b_len:
            i += 1
        else:
            j += 1
    points.append((len(base), len(base), len(ours), len(ours), len(theirs), len(theirs)))
    return points


def regions(base: list[str], ours: list[str], theirs: list[str]) -> list[Region]:
    """The merge as a list of settled regions and conflict regions, in order."""
    out: list[Region] = []
    zb = zo = zt = 0
    for b_start, b_end, o_start, o_end, t_start, t_end in _sync_points(base, ours, theirs):
        b_part, o_part, t_part = base[zb:b_start], ours[zo:o_start], theirs[zt:t_start]
        if o_part or t_part or b_part:
            if o_part == t_part:
                out.append(Region(tuple(o_part)))
            elif o_part == b_part:
                out.append(Region(tuple(t_part)))
            elif t_part == b_part:
                out.append(Region(tuple(o_part)))
            else:
                out.append(_line_by_line(b_part, o_part, t_part))
        if b_end > b_start:
            out.append(Region(tuple(base[b_start:b_end])))
        zb, zo, zt = b_end, o_end, t_end
    return out


def _line_by_line(base: list[str], ours: list[str], theirs: list[str]) -> Region:
    """Two changes next to each other (`- a` changed here, `- b` on the line below there) are no conflict when
    the three parts have as many lines and each line changed on one side at most."""
    if not len(base) == len(ours) == len(theirs):
        return Region(conflict=True, base=tuple(base), ours=tuple(ours), theirs=tuple(theirs))
    merged = []
    for old, mine, other in zip(base, ours, theirs, strict=True):
        if mine == other or other == old:
            merged.append(mine)
        elif mine == old:
            merged.append(other)
        else:
            return Region(conflict=True, base=tuple(base), ours=tuple(ours), theirs=tuple(theirs))
    return Region(tuple(merged))


def merge_lines(base: list[str], ours: list[str], theirs: list[str]) -> tuple[list[str], int]:
    """The merged lines (a conflict keeps ours) and how many conflict regions there were."""
    merged: list[str] = []
    conflicts = 0
    for region in regions(base, ours, theirs):
        if region.conflict:
            conflicts += 1
            merged.extend(region.ours)
        else:
            merged.extend(region.lines)
    return merged, conflicts
