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
# Where `fsmem sync` kept both versions of lines that two hosts changed alike (fsmem.history.merge writes them).
MERGE_MARK = "<!-- fsmem merge:"
_GIT_MARKERS = ("<<<<<<< ", ">>>>>>> ")
# After the `#`s: the title, the shortest text that leaves only blanks and a closing run of `#` (as
# `[ \t]+(.+?)[ \t]*#*[ \t]*$` says it, on every line alike); written so that nothing backtracks: that
# pattern took cubic time in a run of blanks inside a title (a heading of 6,400 spaces held `ls` for minutes).
HEADING_REST = r"[ \t]+([^ \t\n](?:[ \t]*+(?:#++|[^ \t#\n]))*?|[ \t](?=$))[ \t]*+#*+[ \t]*+$"
HEADING = re.compile(r"^(#{1,6})" + HEADING_REST)
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
    fenced = "```" in text or "~~~" in text  # else no line is a fence: a cold build splits every file
    number = first_line - 1
    for number, line in enumerate(text.splitlines(), start=first_line):
        if fenced and FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code or line[:1] != "#":
            continue
        match = HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2).strip(), number))
    ends = section_ends([(level, line) for level, _, line in found], number)
    return [Heading(level, title, line, end) for (level, title, line), end in zip(found, ends, strict=True)]


def section_ends(starts: list[tuple[int, int]], last_line: int) -> list[int]:
    """The last line of each heading's section, given (level, line) in file order: one pass with a stack.

    A section runs to the line before the next heading of the same or a higher
    level (a smaller number), or to the end of the file.
    """
    ends = [last_line] * len(starts)
    open_sections: list[int] = []  # indices of headings whose section is still open
    for index, (level, line) in enumerate(starts):
        while open_sections and starts[open_sections[-1]][0] >= level:
            ends[open_sections.pop()] = line - 1
        open_sections.append(index)
    return ends


def superseded_ranges(doc: Document, found: list[Heading] | None = None) -> list[tuple[int, int]]:
    """File line ranges (inclusive) that hold superseded facts.

    The rule is one a human can see: everything under a level-2 heading
    `## Superseded`, up to the next level-1 or level-2 heading. `found`: the
    document's `headings`, when the caller has them already.
    """
    return [
        (h.line, h.end_line)
        for h in (found if found is not None else headings(doc.body, doc.body_start_line))
        if h.level == 2 and h.title.strip().lower() == SUPERSEDED_HEADING.lower()
    ]


def in_ranges(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)


def merge_marks(text: str) -> list[tuple[int, str]]:
    """(line, message) for every place a merge left two versions in the text: fsmem's marked blocks, which
    `fsmem check` reports until a human or an agent keeps one version, and raw git conflict markers."""
    found: list[tuple[int, str]] = []
    if MERGE_MARK not in text and "<<<<<<< " not in text and ">>>>>>> " not in text:
        return found
    opened = None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(MERGE_MARK):
            if opened is None:
                opened = number
            elif line[len(MERGE_MARK) :].strip().startswith("end"):
                found.append(
                    (
                        opened,
                        f"merge: two versions of lines {opened}-{number} were kept by 'fsmem sync' (both sides changed "
                        "them); keep the right one and delete the 'fsmem merge' comment lines",
                    )
                )
                opened = None
        elif line.startswith(_GIT_MARKERS):
            found.append((number, "merge: a raw git conflict marker; resolve the conflict and delete the marker"))
    if opened is not None:
        found.append((opened, "merge: an 'fsmem merge' block that is never closed; keep one version"))
    return found
