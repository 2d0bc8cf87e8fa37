"""Where the text of one `note` call goes in a session note: each call is its own unit.

A note's lines are filed by the level-2 heading above them, and a heading
stays in force to the end of the file. So text without a subject, appended
after a note that had one, would join that earlier subject. It goes under
`## default_subject` instead (consolidation's `default_subject`, where lines
before any heading are filed too); a file with no heading open at its end
gets it appended as it is. Pure text in, text out.
"""

from __future__ import annotations

import re

from fsmem.format.facts import parse_fact
from fsmem.format.frontmatter import split
from fsmem.format.markdown import FENCED_CODE, HEADING, headings


def place(text: str, block: str, subject: str | None, default_subject: str | None) -> tuple[str, int]:
    """`text` with `block` added under `subject` (or where text without one belongs); and the block's first line."""
    if subject is None and default_subject is not None and _left_open(text) and not _opens_subject(block):
        subject = default_subject
    return append_under(text, block, subject)


_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])[ \t]+")  # as the rules extractor reads a list item


def _left_open(text: str) -> bool:
    """True when the end of the note lies under a `## subject` heading, which lines appended there would join."""
    doc = split(text)
    return any(heading.level == 2 for heading in headings(doc.body, doc.body_start_line))


def _opens_subject(block: str) -> bool:
    """True when a note's text starts with its own `## subject` heading (its lines are filed under it)."""
    first = next((line for line in block.splitlines() if line.strip()), "")
    match = HEADING.match(first)
    return match is not None and len(match.group(1)) == 2


def append_under(text: str, block: str, subject: str | None) -> tuple[str, int]:
    """Insert `block` at the end of the `## subject` section (made if missing), or at the end."""
    if not text.endswith("\n") and text:
        text += "\n"
    doc = split(text)
    if subject is None:
        sep = "" if text.endswith("\n\n") or not doc.body.strip() else "\n"
        line = text.count("\n") + 1 + (1 if sep else 0)
        return text + sep + block, line
    wanted = subject.strip()
    for heading in headings(doc.body, doc.body_start_line):
        if heading.level == 2 and heading.title == wanted:
            lines = text.splitlines(keepends=True)
            end = heading.end_line
            while end > heading.line and not lines[end - 1].strip():
                end -= 1  # insert after the last non-blank line of the section
            if end > heading.line and not _LIST_ITEM.match(block):
                block = "\n" + block  # a paragraph would run on into the one before it
            lines[end:end] = [block]
            return "".join(lines), end + 1 + block.startswith("\n")
    sep = "\n" if doc.body.strip() and not text.endswith("\n\n") else ""
    heading_line = text.count("\n") + 1 + (1 if sep else 0)
    return text + sep + f"## {wanted}\n" + block, heading_line + 1


def stamp_facts(lines: list[str], stamp: str) -> list[str]:
    """`lines` with `(as of STAMP)` after each keyed fact that carries no date or citation of its own.

    The time of the write goes into the note itself, so consolidation orders two facts of one day by when
    they were written, not by the names of their notes, and stays a function of the notes. A fact is one
    line (a line after it indented is a continuation: then it is not a fact, and is left as it is); lines in
    fenced code are never facts.
    """
    out = list(lines)
    in_code = False
    for index, line in enumerate(lines):
        if FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if following[:1] in (" ", "\t") and following.strip():
            continue
        fact = parse_fact(line)
        if fact is None or fact.as_of is not None or fact.bad_date is not None or fact.provenance is not None:
            continue
        out[index] = f"{line.rstrip()} (as of {stamp})"
    return out
