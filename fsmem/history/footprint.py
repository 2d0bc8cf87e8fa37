"""What a change to a memory file touched, and undoing one change under later ones that touched something else.

A revert must not guess. The merge of a sync (`fsmem.history.merge`) settles a
key both sides set by taking the value recorded last, which is exactly wrong
for an undo: reverting `employer: Acme Corp -> ACME` under a later `ACME ->
Acme Inc` would leave Acme Inc current and file Acme Corp under `## Superseded`
as the loser. So an undo is applied only when the later changes touched none
of what it touched: no line (three-way, as `fsmem.history.diff3` draws
regions), no fact key (its lines under `## Facts` and `## Superseded`), no
front matter field. `updated` is bookkeeping every write moves, as is a
session note's `consolidated:` mark; they do not count, and the result keeps
the later `updated`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsmem import format as fmt
from fsmem.format import facts as F
from fsmem.history import merge_facts as MF
from fsmem.history.diff3 import regions
from fsmem.history.merge import place_key

BOOKKEEPING = frozenset(("updated", "consolidated"))


@dataclass
class _Parts:
    """A file as lines: the front matter's lines between the fences (None without front matter) and the body."""

    front: list[str] | None
    body: list[str]
    values: dict
    fences: tuple[str, str] = ("---\n", "---\n")

    @classmethod
    def of(cls, text: str) -> _Parts:
        lines = text.splitlines(keepends=True)
        doc = fmt.split(text)
        if not doc.has_front_matter:
            return cls(None, lines, {})
        head = doc.body_start_line - 1
        return cls(lines[1 : head - 1], lines[head:], dict(doc.front_matter), (lines[0], lines[head - 1]))

    def fields(self) -> dict[str, tuple[str, ...]]:
        return MF.field_blocks(self.front or [])

    def facts(self) -> dict[str, list[tuple[str, bool]]]:
        """Key -> its lines (text, superseded), in order."""
        return {key: [(line, sup) for _, line, sup in found] for key, found in MF.fact_lines(self.body).items()}


def _changed(one: dict, two: dict) -> set[str]:
    return {name for name in one.keys() | two.keys() if one.get(name) != two.get(name)}


def _same_shape(*parts: _Parts) -> bool:
    return all(part.front is not None for part in parts) or all(part.front is None for part in parts)


def overlap(before: str, after: str, later: str) -> str | None:
    """What the change `before -> after` and the later change `after -> later` both touched ("the same lines",
    "the fact 'employer'", "the field 'title'"), or None when they touched different things."""
    b, a, n = _Parts.of(before), _Parts.of(after), _Parts.of(later)
    if not _same_shape(b, a, n):
        return "the same lines"  # front matter added or removed on one side: the whole file
    keys = _changed(b.facts(), a.facts()) & _changed(a.facts(), n.facts())
    if keys:
        return f"the fact {min(keys)!r}"
    fields = (_changed(b.fields(), a.fields()) & _changed(a.fields(), n.fields())) - BOOKKEEPING
    if fields:
        return f"the field {min(fields)!r}"
    if any(region.conflict for region in regions(*(_skeleton(part) for part in (a, n, b)))):
        return "the same lines"
    return None


def undo(before: str, after: str, later: str) -> str:
    """`later` with the change `before -> after` taken out; the caller made sure `overlap` is None.

    Keyed facts are set aside, the rest (prose, headings, blank lines) is undone line by line, and the facts
    come back under their headings as `later` has them, but for the keys the change touched: those get back
    exactly the lines they had before, in place (as a sync merge places a key)."""
    b, a, n = _Parts.of(before), _Parts.of(after), _Parts.of(later)
    newline = "\r\n" if "\r\n" in later[:4096] else "\n"
    body: list[str] = []
    for region in regions(_skeleton(a), _skeleton(n), _skeleton(b)):
        assert not region.conflict, "undo() of changes that overlap"
        body.extend(region.lines)
    had = b.facts()
    mine = _changed(had, a.facts())
    body = _with_facts(body, n, mine, newline)
    for key in sorted(mine):
        lines = had.get(key, [])
        current = [_ended(line, newline) for line, sup in lines if not sup]
        history = [_ended(line, newline) for line, sup in lines if sup]
        body = place_key(body, key, current, history, newline)
    if n.front is None or a.front is None or b.front is None:
        return "".join(body)
    front = MF.merge_front(a.front, n.front, b.front, (a.values, n.values, b.values), newline)
    return "".join([n.fences[0], *front, n.fences[1], *body])


def _skeleton(parts: _Parts) -> list[str]:
    """The body without its keyed fact lines."""
    drop = {index for found in MF.fact_lines(parts.body).values() for index, _, _ in found}
    return [line for index, line in enumerate(parts.body) if index not in drop]


def _with_facts(skeleton: list[str], parts: _Parts, mine: set[str], newline: str) -> list[str]:
    """The fact lines of `parts`, in their order, back under the first heading of their section in `skeleton`
    (a section it lacks is added at the end). Lines of `mine` only hold a place for the lines that replace them,
    so they come back only into a section that is still there."""
    sections = {title: (start, end) for title, start, end in MF.sections(parts.body)}
    present = {title for title, _, _ in MF.sections(skeleton)}
    wanted: dict[str, list[str]] = {}
    for title in (MF.FACTS, MF.SUPERSEDED):
        start, end = sections.get(title, (0, 0))
        lines = []
        for line in parts.body[start + 1 : end]:
            fact = F.parse_fact(line)
            if fact is not None and (fact.key not in mine or title in present):
                lines.append(line)
        if lines:
            wanted[title] = [_ended(line, newline) for line in lines]
    out = list(skeleton)
    for title, lines in wanted.items():
        found = next((start for name, start, _ in MF.sections(out) if name == title), None)
        if found is None:
            heading = "Facts" if title == MF.FACTS else fmt.SUPERSEDED_HEADING
            if out and not out[-1].endswith("\n"):
                out[-1] += newline
            if out and out[-1].strip():
                out.append(newline)
            out += [f"## {heading}{newline}", *lines]
        else:
            out[found + 1 : found + 1] = lines
    return out


def _ended(line: str, newline: str) -> str:
    return line if line.endswith("\n") else line + newline


def facts_as_in(result: str, model: str, keys: set[str]) -> list[str]:
    """The keys among `keys` whose lines (current and superseded) in `result` are not those of `model`."""
    got, want = _Parts.of(result).facts(), _Parts.of(model).facts()
    return sorted(key for key in keys if got.get(key) != want.get(key))


def keys_changed(before: str, after: str) -> set[str]:
    return _changed(_Parts.of(before).facts(), _Parts.of(after).facts())


def bookkeeping_only(before: str, after: str) -> bool:
    """The two differ only in fields every write or consolidation moves (a note's `consolidated:` mark)."""
    b, a = _Parts.of(before), _Parts.of(after)
    if b.front is None or a.front is None or b.body != a.body:
        return False
    return _changed(b.fields(), a.fields()) <= BOOKKEEPING


def without_mark(text: str) -> str:
    """A session note without its `consolidated:` mark, to compare what it says."""
    parts = _Parts.of(text)
    if parts.front is None:
        return text
    fields = parts.fields()
    fields.pop("consolidated", None)
    return "".join(
        [parts.fences[0], *(line for block in fields.values() for line in block), parts.fences[1]]
    ) + "".join(parts.body)
