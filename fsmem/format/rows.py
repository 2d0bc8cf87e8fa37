"""Rows: the units search ranks. A keyed fact, a bullet or a paragraph, each with where it is and what it is about.

A fact line such as `- sport: pesäpallo` does not repeat its subject; the file's
title, its entity or topic and the headings above the line do. So every row
carries that context, search scores the row together with it, and the answer
shows it. Pure functions over text: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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

    Slotted, and the rows of one section share one `headings` list (never changed once made): a parse makes
    one per row of the file. A server keeps the files it answers from as tuples instead (fsmem.search.parsed)."""

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


def bullet_kind(line: str) -> str:
    """The kind of a bullet row whose first line is `line`: "fact" for a keyed fact, else "bullet"."""
    return "fact" if is_bullet(line) and ": " in line and is_fact(line) else "bullet"


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
    plain = plain_columns(doc)
    if plain is not None:
        return sections_rows(path, *plain, classify=classify)
    return _lined_rows(path, doc, classify, doc.title, _file_subject(doc.front_matter))


def _file_subject(fm: dict[str, Any]) -> str | None:
    for key in ("entity", "topic"):
        if fm.get(key) is not None:
            return str(fm[key])
    return None


def _lined_rows(path: str, doc: fmt.Document, classify: bool, title: str | None, file_subject: str | None) -> list[Row]:
    """`document_rows` of any body, line by line."""
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
        if classify and kind == "bullet":
            kind = bullet_kind(pending[0])
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


# A body without fences, comments, indented lines or line breaks other than \n (a cold build's common case) is
# cut by `plain_columns` with regexes over whole sections instead of line by line: every bullet is then one
# line, and a paragraph the run of other non-blank lines, as the general loop cuts them (tests/test_rows.py).
_ODD_BREAK = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # what splitlines cuts besides \n
_INDENTED = re.compile(r"^[^\S\n]+\S", re.M)
_LINE_SPACE = re.compile("\n[ \t\x1f]")  # in ASCII text: a line after the first that starts with a space
_HEADING_LINE = re.compile(fmt.HEADING.pattern, re.M)  # `^` where a match starts after a line break
_BULLET_START = r"(?=[-*+0-9])(?:[-*+]|\d{1,3}[.)])[ \t]+\S"  # `_BULLET`, `_BULLET_FIRST` on a line not indented
# from the line break before a row (and the blank lines before it): the next row, each match where the last ended
_PLAIN_ROW = re.compile(
    rf"\n((?:[^\S\n]*\n)*)(?:({_BULLET_START}[^\n]*)|((?!{_BULLET_START})\S[^\n]*(?:\n(?!{_BULLET_START})\S[^\n]*)*))"
)


def _plain(body: str) -> bool:
    """Whether `plain_columns` may cut `body`: no fence, comment, odd line break or indented line in it."""
    # a search for "\n " stops at every line break: a rare character looked for first, or a regex, is faster
    if ("`" in body and "```" in body) or ("~" in body and "~~~" in body) or ("<" in body and "<!--" in body):
        return False
    if body.isascii():  # the same answers as the regexes below (a whitespace-only line too)
        return not (
            _LINE_SPACE.search(body)
            or "\r" in body
            or "\x0b" in body
            or "\x0c" in body
            or "\x1c" in body
            or "\x1d" in body
            or "\x1e" in body
            or body[:1] in (" ", "\t", "\x1f")
        )
    return not (_ODD_BREAK.search(body) or _INDENTED.search(body))


# per run of rows between two headings: the headings they share, their subject, whether they are superseded, and
# per row its first line, its text and whether it is a bullet
Section = tuple[list[str], "str | None", bool, list[int], list[str], list[bool]]


# `plain_sections`, or a function that cuts ASCII text as it does (fsmem.search._native.plain_sections)
SectionCutter = Callable[[str, int, str | None, str | None], tuple[str | None, list[Section]]]


def plain_columns(
    doc: fmt.Document, ascii_sections: SectionCutter | None = None
) -> tuple[str | None, list[Section]] | None:
    """The title and the rows (`Section`s) that `document_rows` gives, in columns, so that a cold build makes no
    Row per row; None where the body is not one `_plain` accepts. `ascii_sections` cuts an ASCII body
    (`plain_sections` by default)."""
    if not _plain(doc.body):
        return None
    text = "\n" + doc.body  # every row follows a line break
    cut = ascii_sections if ascii_sections is not None and text.isascii() else plain_sections
    return cut(text, doc.body_start_line - 1, doc.title, _file_subject(doc.front_matter))


def plain_rows(text: str, begin: int, stop: int, number: int) -> tuple[list[int], list[str], list[bool]]:
    """The rows `_PLAIN_ROW` finds in text[begin:stop], each from a line break (blank lines before it taken with
    it): per row its first line's number (`number` is the line ending at `begin`), its text stripped and
    whether it is a bullet. fsmem.search._native.plain_rows cuts ASCII text alike (tests/test_native.py)."""
    cut = _PLAIN_ROW.findall(text, begin, stop)
    lines = []
    for blanks, bullet, more in cut:
        number += 1 + blanks.count("\n")
        lines.append(number)
        number += (bullet or more).count("\n")
    return lines, [(bullet or more).strip() for _b, bullet, more in cut], [bool(bullet) for _b, bullet, _m in cut]


def plain_sections(
    text: str, number: int, title: str | None, file_subject: str | None
) -> tuple[str | None, list[Section]]:
    """The title (`title`, else the first level-1 heading's) and the sections of a plain body, `text` being a
    line break and the body, whose first line is line `number` + 1. fsmem.search._native.plain_sections cuts
    ASCII text alike, in one pass (tests/test_native.py)."""
    found = []  # (end, line, level, title) of each heading line
    seek = counted = 0  # where to look for the next heading; where lines are counted up to
    start_line = number  # the line number at offset `counted`, below
    while (start := text.find("\n#", seek)) >= 0:
        end = text.find("\n", start + 1)
        end = len(text) if end < 0 else end
        heading = _HEADING_LINE.match(text, start + 1, end)
        if heading:
            number += text.count("\n", counted, start + 1)
            counted = start + 1
            found.append((end, number, len(heading.group(1)), heading.group(2).strip()))
        seek = end
    if title is None:
        title = next((name for _e, _n, level, name in found if level == 1), None)
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []  # (level, title) of the open headings
    heads: list[str] = []
    subject = file_subject
    superseded = False
    begin, number = 0, start_line  # the section's start (a line break) and its line
    for n in range(len(found) + 1):
        if n:  # after a heading: the stack and what its rows share, as the general loop keeps them
            begin, number, level, name = found[n - 1]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
            heads = [t for lv, t in stack if not (lv == 1 and t == title)]
            subject = file_subject
            for _lv, t in stack:
                subject = subject_of(t) or subject
            superseded = any(lv == 2 and t.lower() == _SUPERSEDED for lv, t in stack)
        stop = text.rfind("\n", begin, found[n][0]) if n < len(found) else len(text)  # before the next heading
        # less the blank lines that end the section: `_PLAIN_ROW` takes a run of blank lines with the row after
        # it, and tried again from each line of a run with no row after it (a section's last, 17,000 blank
        # lines: 25 s), so its cost grew with the square of the run
        while stop > begin and text[stop - 1].isspace():  # a line or two, mostly: no copy of the section
            stop -= 1
        lines, texts, bullets = plain_rows(text, begin, stop, number)
        if lines:
            sections.append((heads, subject, superseded, lines, texts, bullets))
    return title, sections


def sections_rows(path: str, title: str | None, sections: list[Section], *, classify: bool = True) -> list[Row]:
    """The Rows of `plain_columns`' sections."""
    rows: list[Row] = []
    for heads, subject, superseded, lines, texts, bullets in sections:
        for line, text, bullet in zip(lines, texts, bullets, strict=True):
            kind = "paragraph"
            if bullet:
                kind = bullet_kind(text) if classify else "bullet"  # a bullet of a plain body is one line
            rows.append(Row(path, line, line + text.count("\n"), text, kind, title, subject, heads, superseded))
    return rows


_SUPERSEDED = fmt.SUPERSEDED_HEADING.lower()
