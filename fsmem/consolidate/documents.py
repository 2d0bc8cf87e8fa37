"""Entity and topic documents as the consolidator sees them: parsed once, edited line by line, assembled once.

Only the lines a change needs are rewritten; everything else (human prose,
other sections, unknown front matter) keeps its bytes. Sections the
consolidator fills: `## Facts` (current keyed facts), `## Notes` (dated
observations) and `## Superseded` (history, hidden from grep/read/search).

The document is parsed once per run (`fact_lines`, `note_lines` and the
sections are indexed up front); edits are recorded against the original line
numbers and applied in one pass by `text()`, so merging many keys into one
document costs one parse, not one per key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt
from fsmem.format import facts as _facts

FACTS = "Facts"
NOTES = "Notes"
SUPERSEDED = fmt.SUPERSEDED_HEADING
SESSIONS = "Sessions"  # the project digest's (fsmem.consolidate.digest): last, so new sections go before it
SECTION_ORDER = (FACTS, NOTES, SUPERSEDED, SESSIONS)  # where the consolidator creates the sections it needs
_TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][\w\-]*)[ \t]*:")
UNREADABLE: Any = object()  # stands for a document that cannot be read (reported, never rewritten)


@dataclass(frozen=True)
class FactLine:
    index: int  # 0-based line index in the file
    key: str
    value: str | None
    first: _facts.Stamp
    last: _facts.Stamp
    superseded: bool  # under `## Superseded`
    cited: bool  # carries a provenance citation (written by the consolidator)
    section: str  # lowercased title of the level-2 section it is in ("" for none)
    bullet: str = "-"  # `-`, `*` or `+`, kept when the line is rewritten


@dataclass(frozen=True)
class NoteLine:
    index: int
    text: str
    date: str
    sources: tuple[str, ...]
    cited: bool
    bullet: str = "-"


class EntityDocument:
    """One entity or topic file: its lines, what they hold, and the edits planned on them."""

    def __init__(self, path: str, text: str, canonical: Callable[[str], str] = str):
        """`canonical(path)` is the source a citation's path stands for (an archived note: its sessions/ path)."""
        self.path = path
        self.canonical = canonical
        self.original = text
        self.lines = text.splitlines(keepends=True)
        self.newline = "\r\n" if "\r\n" in text[:4096] else "\n"
        doc = fmt.split(text)
        self.front_matter: dict[str, Any] = doc.front_matter
        self.has_front_matter = doc.has_front_matter
        self.problems = [(p.line, p.message) for p in doc.problems]
        self.body_start = doc.body_start_line - 1  # 0-based index of the first body line
        created = str(self.front_matter.get("created") or "")[:10]
        self.created = created if _facts.valid_date(created) else ""
        self._replace: dict[int, list[str]] = {}
        self._before: dict[int, list[str]] = {}
        self._after: dict[int, list[str]] = {}
        self._created: dict[str, list[str]] = {}
        self._fields: dict[str, str] = {}
        self._body: tuple[str, str] | None = None  # assembled once all body edits are planned
        self._index()

    def _index(self) -> None:
        body = "".join(self.lines[self.body_start :])
        self.sections: dict[str, tuple[int, int]] = {}  # lowercased title -> (heading index, end exclusive)
        owner: list[str] = [""] * len(self.lines)
        for h in fmt.headings(body, self.body_start + 1):
            if h.level != 2:
                continue
            title = h.title.strip().lower()
            self.sections.setdefault(title, (h.line - 1, h.end_line))
            for index in range(h.line, min(h.end_line, len(self.lines))):
                owner[index] = title
        self.facts: dict[str, list[FactLine]] = {}
        self.note_lines: list[NoteLine] = []
        in_code = False
        for index in range(self.body_start, len(self.lines)):
            line = self.lines[index]
            if fmt.FENCED_CODE.match(line):
                in_code = not in_code
                continue
            if in_code or not _facts.is_bullet(line):
                continue
            where = owner[index]
            if where == NOTES.lower():
                obs = _facts.parse_observation(line)
                if obs is not None:
                    prov = obs.provenance
                    date = "" if prov is None else (prov.confirmed.date if prov.confirmed else prov.first)
                    sources = () if prov is None else tuple(self.canonical(s) for s in prov.sources)
                    self.note_lines.append(NoteLine(index, obs.text, date, sources, prov is not None, obs.bullet))
                continue
            fact = _facts.parse_fact(line)
            if fact is None:
                continue
            first, last = self._stamps(fact, index)
            cited = fact.provenance is not None
            superseded = where == SUPERSEDED.lower()
            self.facts.setdefault(fact.key, []).append(
                FactLine(index, fact.key, fact.value, first, last, superseded, cited, where, fact.bullet)
            )

    def _stamps(self, fact: _facts.KeyedFact, index: int) -> tuple[_facts.Stamp, _facts.Stamp]:
        prov = fact.provenance
        if prov is None:  # written by hand: dated by `(as of ...)`, else by the document's `created`
            stamp = _facts.Stamp(fact.as_of or self.created, self.path, index)
            return stamp, stamp
        first = _facts.Stamp(prov.first, self.canonical(prov.sources[0]), index)
        last = prov.confirmed or first
        return first, _facts.Stamp(last.date, self.canonical(last.source), index)

    def fact_lines(self, key: str | None = None) -> list[FactLine]:
        """Keyed facts anywhere in the body except `## Notes`; those under `## Superseded` are history."""
        if key is not None:
            return list(self.facts.get(key, []))
        return sorted((line for lines in self.facts.values() for line in lines), key=lambda f: f.index)

    def section(self, title: str) -> tuple[int, int] | None:
        return self.sections.get(title.lower())

    # -- planning edits (against the original line numbers) -------------------
    def replace(self, index: int, lines: list[str]) -> None:
        """Put `lines` where line `index` is (an empty list deletes it)."""
        self._body = None
        self._replace[index] = lines

    def delete(self, index: int) -> None:
        self._body = None
        self._replace[index] = []

    def removed(self, index: int) -> bool:
        return self._replace.get(index) == []

    def place(self, title: str, lines: list[str], sort_key: Any, managed: list[tuple[int, Any]]) -> None:
        """Add `lines` to section `title` at their place among the consolidator's lines there.

        `managed` lists (index, sort key) of the consolidator's lines that stay in
        that section, in document order. The new lines go before the first one that
        sorts after them, else after the last one, else right under the heading,
        so the consolidator's lines stay sorted however they arrived, and human
        lines around them stay where they are.
        """
        self._body = None
        for index, key in managed:
            if key > sort_key:
                self._before.setdefault(index, []).extend(lines)
                return
        if managed:
            self._after.setdefault(managed[-1][0], []).extend(lines)
            return
        where = self.section(title)
        if where is not None:
            self._after.setdefault(where[0], []).extend(lines)
        else:
            self._created.setdefault(title, []).extend(lines)

    def ensure_section(self, title: str) -> None:
        self._body = None
        if self.section(title) is None:
            self._created.setdefault(title, [])

    def set_date_field(self, name: str, date: str) -> None:
        self._fields[name] = date

    def bump_updated(self, date: str) -> None:
        """Raise `updated` to `date` (never lower it), touching only that front matter line."""
        current = fmt.parse_timestamp(str(self.front_matter.get("updated") or ""))
        wanted = fmt.parse_timestamp(date)
        if wanted is not None and (current is None or current < wanted):
            self._fields["updated"] = date

    def lower_created(self, date: str) -> None:
        """Move a bare-date `created` (as the consolidator writes it) back to an earlier fact's date."""
        value = str(self.front_matter.get("created") or "")
        if _facts.valid_date(value) and date and date < value:
            self._fields["created"] = date

    @property
    def edited(self) -> bool:
        return bool(self._replace or self._before or self._after or self._created or self._fields)

    # -- assembling ---------------------------------------------------------------
    def text(self) -> str:
        """The document with every planned edit applied: the body in one pass (kept), the front matter lines after."""
        head = self.lines[: self.body_start]
        if self._body is None:
            self._body = self._assemble(head[-1] if head else "")
        sentinel, body = self._body
        if head:
            head = [*head[:-1], sentinel]
        if self._fields and self.has_front_matter:
            head = set_front_fields(head, self.body_start - 1, self._fields, self.newline)
        text = "".join(head) + body
        if self._fields and not self.has_front_matter:
            text = fmt.set_fields(text, dict(self._fields))
        return text

    def _assemble(self, last_head_line: str) -> tuple[str, str]:
        nl = self.newline
        out: list[str] = [last_head_line]  # so that a line added after it can end it with a newline

        def emit(lines: list[str], eol: str = nl) -> None:
            if lines and out[-1] and not out[-1].endswith("\n"):
                out[-1] += nl
            out.extend(line + eol for line in lines)

        created = dict(self._created)
        later = {self.sections[t.lower()][0] for t in SECTION_ORDER if t.lower() in self.sections}
        for index in range(self.body_start, len(self.lines)):
            line = self.lines[index]
            if index in later:
                for title in SECTION_ORDER:
                    if title in created and self._next_section(title) == index:
                        emit([f"## {title}", *created.pop(title), ""])
            emit(self._before.get(index, []))
            if index in self._replace:
                eol = line[len(line.rstrip("\r\n")) :] or nl
                emit(self._replace[index], eol)
            else:
                out.append(line)
            emit(self._after.get(index, []))
        for title in SECTION_ORDER:
            if title in created:
                if out[-1].strip():
                    emit([""])
                emit([f"## {title}", *created.pop(title)])
        return out[0], "".join(out[1:])

    def _next_section(self, title: str) -> int | None:
        """The heading index of the first existing section that a new `title` section goes before."""
        after = SECTION_ORDER[SECTION_ORDER.index(title) + 1 :]
        found = [self.sections[t.lower()][0] for t in after if t.lower() in self.sections]
        return min(found) if found else None


def set_front_fields(head: list[str], closing: int, changes: dict[str, str], newline: str) -> list[str]:
    """Set front matter fields on the lines up to the closing fence (index `closing`), touching only their lines.

    The same line rule as `fsmem.format.set_fields`, without parsing the YAML again.
    """
    lines = list(head)
    block = lines[1:closing]
    for key, value in changes.items():
        replacement = [fmt.dump_field(key, value) + newline]
        start = next((i for i, line in enumerate(block) if _field_name(line) == key), None)
        if start is None:
            block.extend(replacement)
            continue
        end = start + 1
        while end < len(block) and (block[end][:1] in (" ", "\t") or block[end].startswith(("- ", "-\t"))):
            end += 1
        block[start:end] = replacement
    return lines[:1] + block + lines[closing:]


def _field_name(line: str) -> str | None:
    match = _TOP_LEVEL_KEY.match(line)
    return match.group(1) if match else None


def new_document(path: str, subject_field: str, subject_value: str, title: str, first_date: str) -> str:
    """The bytes of a document the consolidator creates: front matter and an H1, sections come later."""
    day = first_date or None
    front = {"title": title, "type": "semantic", subject_field: subject_value, "created": day, "updated": day}
    return fmt.render(front, f"# {title}\n")
