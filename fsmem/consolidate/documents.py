"""Entity and topic documents as the consolidator sees them: parsed back from their bytes, edited line by line.

Only the lines a change needs are rewritten; everything else (human prose,
other sections, unknown front matter) keeps its bytes. Sections the
consolidator fills: `## Facts` (current keyed facts), `## Notes` (dated
observations) and `## Superseded` (history, hidden from grep/read/search).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt
from fsmem.format import facts as _facts

FACTS = "Facts"
NOTES = "Notes"
SUPERSEDED = fmt.SUPERSEDED_HEADING
UNREADABLE: Any = object()  # stands for a document that is not valid UTF-8 (reported, never rewritten)


@dataclass(frozen=True)
class FactLine:
    index: int  # 0-based line index in the file
    key: str
    value: str | None
    first: _facts.Stamp
    last: _facts.Stamp
    superseded: bool


@dataclass(frozen=True)
class NoteLine:
    index: int
    text: str
    date: str
    sources: tuple[str, ...]


class EntityDocument:
    """One entity or topic file held as lines; `text` is always the current bytes."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.original = text
        self.lines = text.splitlines(keepends=True)
        self.newline = "\r\n" if "\r\n" in text[:4096] else "\n"
        doc = fmt.split(text)
        self.front_matter: dict[str, Any] = doc.front_matter
        self.problems = [(p.line, p.message) for p in doc.problems]
        self.body_start = doc.body_start_line - 1  # 0-based index of the first body line
        created = str(self.front_matter.get("created") or "")[:10]
        self.created = created if _facts.valid_date(created) else ""

    @property
    def text(self) -> str:
        return "".join(self.lines)

    @property
    def changed(self) -> bool:
        return self.text != self.original

    # -- reading ----------------------------------------------------------
    def sections(self) -> list[tuple[str, int, int]]:
        """Level-2 sections as (title, heading index, end index exclusive)."""
        body = "".join(self.lines[self.body_start :])
        found = []
        for h in fmt.headings(body, self.body_start):
            if h.level == 2:
                found.append((h.title.strip(), h.line, h.end_line + 1))
        return found

    def section(self, title: str) -> tuple[int, int] | None:
        for name, start, end in self.sections():
            if name.lower() == title.lower():
                return start, end
        return None

    def _code_lines(self) -> set[int]:
        inside, result = False, set()
        for index in range(self.body_start, len(self.lines)):
            if fmt.FENCED_CODE.match(self.lines[index]):
                inside = not inside
                result.add(index)
            elif inside:
                result.add(index)
        return result

    def _section_of(self) -> dict[int, str]:
        owner: dict[int, str] = {}
        for name, start, end in self.sections():
            for index in range(start + 1, end):
                owner[index] = name.lower()
        return owner

    def fact_lines(self, key: str | None = None) -> list[FactLine]:
        """Keyed facts anywhere in the body except `## Notes`; those under `## Superseded` are history."""
        owner = self._section_of()
        code = self._code_lines()
        found = []
        for index in range(self.body_start, len(self.lines)):
            line = self.lines[index]
            if not line.startswith("- ") or index in code:
                continue
            where = owner.get(index, "")
            if where == NOTES.lower():
                continue
            fact = _facts.parse_fact(line)
            if fact is None or (key is not None and fact.key != key):
                continue
            first, last = self._stamps(fact, index)
            found.append(FactLine(index, fact.key, fact.value, first, last, where == SUPERSEDED.lower()))
        return found

    def _stamps(self, fact: _facts.KeyedFact, index: int) -> tuple[_facts.Stamp, _facts.Stamp]:
        prov = fact.provenance
        if prov is None:  # written by hand: dated by `(as of ...)`, else by the document's `created`
            stamp = _facts.Stamp(fact.as_of or self.created, self.path, index)
            return stamp, stamp
        first = _facts.Stamp(prov.first, prov.sources[0])
        return first, prov.confirmed or first

    def note_lines(self) -> list[NoteLine]:
        where = self.section(NOTES)
        if where is None:
            return []
        found = []
        for index in range(where[0] + 1, where[1]):
            obs = _facts.parse_observation(self.lines[index])
            if obs is None:
                continue
            prov = obs.provenance
            if prov is None:
                found.append(NoteLine(index, obs.text, "", ()))
            else:
                date = prov.confirmed.date if prov.confirmed else prov.first
                found.append(NoteLine(index, obs.text, date, prov.sources))
        return found

    # -- editing ----------------------------------------------------------
    def replace(self, index: int, line: str) -> None:
        new = line + self._eol(index)
        if self.lines[index] != new:
            self.lines[index] = new

    def delete(self, index: int) -> None:
        del self.lines[index]

    def insert(self, index: int, lines: list[str]) -> None:
        self.lines[index:index] = [line + self.newline for line in lines]

    def _eol(self, index: int) -> str:
        old = self.lines[index]
        return old[len(old.rstrip("\r\n")) :] or self.newline

    def append_to_section(self, title: str, lines: list[str], before: tuple[str, ...] = ()) -> int:
        """Add lines at the end of `## title` (made if missing, ahead of the sections in `before`)."""
        where = self.section(title)
        if where is None:
            self._create_section(title, before)
            where = self.section(title)
            assert where is not None
        start, end = where
        at = end
        while at > start + 1 and not self.lines[at - 1].strip():
            at -= 1
        self._ensure_eol(at - 1)
        self.insert(at, lines)
        return at

    def _ensure_eol(self, index: int) -> None:
        if 0 <= index < len(self.lines) and not self.lines[index].endswith("\n"):
            self.lines[index] += self.newline

    def _create_section(self, title: str, before: tuple[str, ...]) -> None:
        targets = [self.section(name) for name in before]
        starts = [t[0] for t in targets if t is not None]
        if starts:
            at = min(starts)
            self.insert(at, [f"## {title}", ""])
            return
        if self.lines:
            self._ensure_eol(len(self.lines) - 1)
        if len(self.lines) > self.body_start and self.lines[-1].strip():
            self.lines.append(self.newline)
        self.lines.append(f"## {title}{self.newline}")

    def lower_created(self, date: str) -> None:
        """Move a bare-date `created` (as the consolidator writes it) back to an earlier fact's date."""
        value = str(self.front_matter.get("created") or "")
        if not _facts.valid_date(value) or not date or date >= value:
            return
        text = fmt.set_fields(self.text, {"created": _dt.date.fromisoformat(date)})
        self.lines = text.splitlines(keepends=True)
        self.front_matter["created"] = date

    def bump_updated(self, date: str) -> None:
        """Raise `updated` to `date` (never lower it), touching only that front matter line."""
        current = fmt.parse_timestamp(str(self.front_matter.get("updated") or ""))
        wanted = fmt.parse_timestamp(date)
        if wanted is None or (current is not None and current >= wanted):
            return
        text = fmt.set_fields(self.text, {"updated": _dt.date.fromisoformat(date)})
        self.lines = text.splitlines(keepends=True)
        self.front_matter["updated"] = date


def new_document(path: str, subject_field: str, subject_value: str, title: str, first_date: str) -> str:
    """The bytes of a document the consolidator creates: front matter and an H1, sections come later."""
    day = _dt.date.fromisoformat(first_date) if first_date else None
    front = {"title": title, "type": "semantic", subject_field: subject_value, "created": day, "updated": day}
    return fmt.render(front, f"# {title}\n")
