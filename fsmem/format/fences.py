"""Where a file's front matter opens and closes: its fences, found without reading the YAML between them.

`fsmem.format.frontmatter.split` reads what they enclose. Most files' fences
are found by one pattern (`plain_fences`); any other file is cut into lines
(`line_fences`), as `str.splitlines` cuts them.
"""

from __future__ import annotations

import re

BOM = "\ufeff"
FENCE = "---"
_CLOSING_FENCES = ("---", "...")


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


Fences = tuple[str, int, str]  # the front matter's text, its closing fence's line (0-based), the body


def fences(text: str) -> Fences | None | str:
    """Where front matter opens and closes: None where the first line (after an optional BOM) is no fence,
    "unclosed" where no later line is one; the closing fence is the first line `rstrip` makes `---` or `...`."""
    fenced = plain_fences(text)
    return fenced if fenced is not None else line_fences(text)


def line_fences(text: str) -> Fences | None | str:
    """`fences`, the file cut into lines (`str.splitlines`: any line break, CRLF too)."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return None
    first = _strip_eol(lines[0])
    if first.startswith(BOM):
        first = first[len(BOM) :]
    if first.rstrip() != FENCE:
        return None
    for index in range(1, len(lines)):
        if _strip_eol(lines[index]).rstrip() in _CLOSING_FENCES:
            return "".join(lines[1:index]), index, "".join(lines[index + 1 :])
    return "unclosed"


def plain_fences(text: str) -> Fences | None:
    """`fences` of front matter whose lines, fences included, are ASCII and end in "\n" alone (most files), found
    without cutting the whole file into lines (a cold build's 10k files: 0.07 s of CPU less); None otherwise
    (`fences` then cuts it). No other line break `str.splitlines` cuts at (`_ODD_BREAKS`), so a line that
    `rstrip` makes a fence is a fence and the ASCII whitespace left after it (space, tab, \x1f).
    tests/test_format.py holds the two equal."""
    fenced = _PLAIN_FENCES.match(text) if len(text) <= _PLAIN_MOST else None
    if fenced is None or not fenced.group(0).isascii() or _ODD_BREAKS.search(fenced.group(0)):
        return None
    return fenced.group(1), fenced.group(1).count("\n") + 1, text[fenced.end() :]


_PLAIN_FENCES = re.compile(r"---\n((?:[^\n]*\n)*?)(?:---|\.\.\.)[ \t\x1f]*(?:\n|\Z)")
_ODD_BREAKS = re.compile(r"[\r\x0b\x0c\x1c\x1d\x1e]")
_PLAIN_MOST = 1 << 20  # a larger file is cut into lines: the pattern's steps, one a line, are kept till it ends
