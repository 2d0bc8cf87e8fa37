"""Markdown structure: headings and their sections, fenced code, and the `## Superseded` rule. Pure, no I/O.

Front matter is another concern (`fsmem.format.frontmatter`); this module only
knows what a human sees in the body: ATX headings outside fenced code, and the
line ranges their sections span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsmem.format.frontmatter import Document

SUPERSEDED_HEADING = "Superseded"
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
FENCED_CODE = re.compile(r"^[ \t]{0,3}(```|~~~)")


@dataclass(frozen=True)
class Heading:
    """A Markdown heading with the 1-based line range of its section."""

    level: int
    title: str
    line: int
    end_line: int  # last line of the section (before the next heading of the same or higher level)


def headings(text: str, first_line: int = 1) -> list[Heading]:
    """ATX headings outside fenced code, each with the line range its section spans."""
    found: list[tuple[int, str, int]] = []
    in_code = False
    number = first_line - 1
    for number, line in enumerate(text.splitlines(), start=first_line):
        if FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        match = HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2).strip(), number))
    # A section ends before the next heading of the same or a higher level: one pass with a stack of
    # the sections still open (linear, so a file of 100,000 headings costs what its size does).
    ends = [number] * len(found)
    still_open: list[int] = []
    for index, (level, _title, line) in enumerate(found):
        while still_open and found[still_open[-1]][0] >= level:
            ends[still_open.pop()] = line - 1
        still_open.append(index)
    return [Heading(level, title, line, end) for (level, title, line), end in zip(found, ends, strict=True)]


def superseded_ranges(doc: Document) -> list[tuple[int, int]]:
    """File line ranges (inclusive) that hold superseded facts.

    The rule is one a human can see: everything under a level-2 heading
    `## Superseded`, up to the next level-1 or level-2 heading.
    """
    return [
        (h.line, h.end_line)
        for h in headings(doc.body, doc.body_start_line)
        if h.level == 2 and h.title.strip().lower() == SUPERSEDED_HEADING.lower()
    ]


def in_ranges(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)
