"""Rows: the units search ranks. A keyed fact, a bullet or a paragraph, each with where it is and what it is about.

A fact line such as `- sport: pesäpallo` does not repeat its subject; the file's
title, its entity or topic and the headings above the line do. So every row
carries that context, search scores the row together with it, and the answer
shows it. Pure functions over text: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fsmem import format as fmt
from fsmem.budget import named
from fsmem.format.facts import is_bullet, parse_fact

ROW_KINDS = ("fact", "bullet", "paragraph")

_BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,3}[.)])[ \t]+(\S.*)$")
_BULLET_FIRST = frozenset("-*+0123456789")  # what a line `_BULLET` matches starts with, after its indent
_COMMENT_ONLY = re.compile(r"^\s*<!--.*-->\s*$")


@dataclass(slots=True)
class Row:
    """One rankable unit of a memory file (lines `line`..`end_line`, 1-based).

    Slotted, and the rows of one section share one `headings` list (never changed once made): a server
    keeps the rows of the files it answers from parsed, and they were 4.7 times their text's size."""

    path: str
    line: int
    end_line: int
    text: str
    kind: str
    title: str | None = None
    subject: str | None = None
    headings: list[str] = field(default_factory=list)
    superseded: bool = False

    @property
    def context(self) -> str:
        """The words that say what the row is about, scored along with it."""
        parts = [self.title or "", self.subject or "", *self.headings]
        seen: list[str] = []
        for part in parts:
            if part and part not in seen:
                seen.append(part)
        return " ".join(seen)

    @property
    def heading_path(self) -> str:
        return " > ".join(self.headings)

    def to_dict(self) -> dict[str, Any]:
        return {**named(self), "headings": list(self.headings)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        return cls(**{**data, "headings": list(data.get("headings") or [])})


def is_fact(line: str) -> bool:
    """A keyed fact `- key: value` (or `*`, `+`), by the one rule the consolidator uses too (fsmem.format.facts)."""
    return parse_fact(line.strip()) is not None


def subject_of(heading: str) -> str | None:
    """`people/Adam Smith` or `topic/Billing` as a session-note subject, else None."""
    kind, sep, name = heading.partition("/")
    if sep and kind.strip() and name.strip() and " " not in kind.strip():
        return heading.strip()
    return None


def split_rows(path: str, text: str) -> list[Row]:
    """Every row of one file, in file order; front matter and headings are context, not rows."""
    return document_rows(path, fmt.split(text))


def document_rows(path: str, doc: fmt.Document, *, classify: bool = True) -> list[Row]:
    """`split_rows` of a document already split from its front matter (search parses it once for both).

    With `classify=False` a keyed fact is left as kind "bullet": the search index, which
    never shows a row, skips parsing every bullet as a fact.
    """
    fm = doc.front_matter
    title = doc.title
    file_subject = None
    for key in ("entity", "topic"):
        if fm.get(key) is not None:
            file_subject = str(fm[key])
            break
    heading_list = fmt.headings(doc.body, doc.body_start_line)
    superseded = [
        (h.line, h.end_line)
        for h in heading_list
        if h.level == 2 and h.title.strip().lower() == fmt.SUPERSEDED_HEADING.lower()
    ]
    heading_at = {h.line: h for h in heading_list}
    if title is None:
        title = next((h.title for h in heading_list if h.level == 1), None)

    rows: list[Row] = []
    stack: list[fmt.Heading] = []
    pending: list[str] = []  # lines of the row being collected
    pending_start = 0
    pending_kind = ""
    pending_indent = 0
    # what every row under the current heading stack shares; recomputed when the stack changes
    heads: list[str] = []
    subject = file_subject

    def flush() -> None:
        nonlocal pending, pending_kind
        if not pending:
            return
        body = pending[0].strip() if len(pending) == 1 else "\n".join(pending).strip()
        kind = pending_kind
        if classify and kind == "bullet" and is_bullet(pending[0]) and ": " in pending[0] and is_fact(pending[0]):
            kind = "fact"
        rows.append(
            Row(
                path,
                pending_start,
                pending_start + len(pending) - 1,
                body,
                kind,
                title,
                subject,
                heads,
                bool(superseded) and fmt.in_ranges(pending_start, superseded),
            )
        )
        pending = []
        pending_kind = ""

    in_code = False
    fenced = "```" in doc.body or "~~~" in doc.body  # else no line is a fence: a cold build splits every file
    lines = doc.body.splitlines()  # no line ends in \r or \n
    for number, line in enumerate(lines, start=doc.body_start_line):
        if fenced and fmt.FENCED_CODE.match(line):
            if not in_code:
                flush()
                pending, pending_start, pending_kind = [line], number, "paragraph"
                in_code = True
            else:
                pending.append(line)
                in_code = False
                flush()
            continue
        if in_code:
            pending.append(line)
            continue
        if heading_at:
            heading = heading_at.get(number)
            if heading is not None:
                flush()
                while stack and stack[-1].level >= heading.level:
                    stack.pop()
                stack.append(heading)
                # The level-1 heading usually repeats the title; keep it only when it says something else.
                heads = [h.title for h in stack if not (h.level == 1 and h.title == title)]  # a new list: rows share it
                subject = file_subject
                for entry in stack:
                    found = subject_of(entry.title)
                    if found:
                        subject = found
                continue
        stripped = line.strip()
        if not stripped or ("<!--" in line and _COMMENT_ONLY.match(line)):
            flush()
            continue
        bullet = _BULLET.match(line) if stripped[0] in _BULLET_FIRST else None
        if bullet:
            flush()
            pending, pending_start, pending_kind = [stripped], number, "bullet"
            pending_indent = len(bullet.group(1).expandtabs(4))
            continue
        if pending_kind == "bullet":
            indent = len(line) - len(line.lstrip())
            if indent > pending_indent:  # a continuation line of the bullet above
                pending.append(stripped)
                continue
            flush()
        if not pending:
            pending, pending_start, pending_kind = [line], number, "paragraph"
        else:
            pending.append(line)
    flush()
    return rows
