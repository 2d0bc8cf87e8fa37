from hypothesis import given, strategies as st

from fsmem import format as fmt
from fsmem.format.rows import (
    _file_subject,
    _lined_rows,
    document_rows,
    is_fact,
    plain_columns,
    sections_rows,
    split_rows,
    subject_of,
)
from fsmem.search import _native

DOC = """---
title: Goaltender
topic: Goaltender
---
# Goaltender

Plays for the regional team
since 2019.

## Facts
- sport: pesäpallo
- Wow: that save was amazing!
- plays in goal,
  every Sunday
* second style bullet
1. numbered item

```
code line
```

## Superseded
- sport: hockey
"""


def test_rows_split_facts_bullets_paragraphs_with_context():
    rows = split_rows("topics/goaltender.md", DOC)
    summary = [(r.line, r.end_line, r.kind, r.text) for r in rows]
    assert summary == [
        (7, 8, "paragraph", "Plays for the regional team\nsince 2019."),
        (11, 11, "fact", "- sport: pesäpallo"),
        (12, 12, "bullet", "- Wow: that save was amazing!"),
        (13, 14, "bullet", "- plays in goal,\nevery Sunday"),
        (15, 15, "bullet", "* second style bullet"),
        (16, 16, "bullet", "1. numbered item"),
        (18, 20, "paragraph", "```\ncode line\n```"),
        (23, 23, "fact", "- sport: hockey"),
    ]
    fact = rows[1]
    assert fact.title == "Goaltender" and fact.subject == "Goaltender"
    assert fact.headings == ["Facts"]  # the H1 repeats the title, so it is left out
    assert fact.context == "Goaltender Facts"
    assert [r.superseded for r in rows] == [False] * 7 + [True]


def test_session_subject_heading_becomes_the_row_subject():
    text = "---\ntitle: Session x\n---\n## people/Adam Smith\n- employer: Acme\n## Notes\nfree text\n"
    rows = split_rows("sessions/2026/01/01/x.md", text)
    assert [(r.subject, r.headings) for r in rows] == [("people/Adam Smith", ["people/Adam Smith"]), (None, ["Notes"])]


def test_file_without_front_matter_is_still_rows():
    rows = split_rows("notes.md", "# Title here\n\nsome words\n")
    assert [(r.line, r.title, r.headings) for r in rows] == [(3, "Title here", [])]


def test_fact_and_subject_rules():
    assert is_fact("- billing cycle: monthly")
    assert not is_fact("- Billing: monthly")
    assert not is_fact("- a b c d e: too many words")
    assert not is_fact("- key:")
    assert subject_of("people/Adam Smith") == "people/Adam Smith"
    assert subject_of("Facts") is None


_LINES = [
    "# Title",
    "# Other title",
    "## Superseded",
    "## superseded ",
    "### Details #",
    "## people/Ann Lee",
    "## topic/Billing",
    "####### seven",
    "#nohash",
    "#  ",
    "# ",
    "- sport: hockey",
    "- a bullet",
    "* star: value",
    "+ plus",
    "1. numbered",
    "12) numbered",
    "1\u0661. a digit of another script",
    "\u0661. only another script",
    "- ",
    "-\tx",
    "- \u00a0x",
    "plain words here",
    "tail spaces  ",
    "met on (2024-01-01, sessions/a.md)",
    "\u00e9t\u00e9 words",
    "",
    "",
    "   ",
    "\u00a0",
]
_ODD_LINES = ["  indented", "\tindented", "\u00a0x", "\x1fx", "x\x1fy", "x\ry", "x\x0by", "\u2028", "```", "<!-- c -->"]


@given(
    st.lists(st.sampled_from(_LINES + _ODD_LINES), max_size=30),
    st.sampled_from(["", "title: T\n", "title: T\nentity: people/Ann\n", "topic: X\n"]),
    st.booleans(),
)
def test_rows_cut_by_sections_are_the_rows_cut_line_by_line(lines, front, last_break):
    """The regex cut of a plain body (`plain_columns`, a cold build's common case) gives the very rows of the
    line-by-line loop, and a body it cannot cut is left to that loop."""
    body = "\n".join(lines) + ("\n" if last_break else "")
    doc = fmt.split(f"---\n{front}---\n{body}" if front else body)
    for classify in (True, False):
        expected = _lined_rows("a.md", doc, classify, doc.title, _file_subject(doc.front_matter))
        assert document_rows("a.md", doc, classify=classify) == expected
        cut_in_c = plain_columns(doc, _native.plain_sections)  # as a cold build cuts it, where the module is built
        if cut_in_c is not None:
            assert sections_rows("a.md", *cut_in_c, classify=classify) == expected
    if not any(line in _ODD_LINES or (line and not line.strip()) for line in lines):
        assert plain_columns(doc) is not None  # nothing indented, no odd break: cut by sections


def test_plain_rows_of_a_session_note_equal_the_lines():
    """A note of bullets, paragraphs and a superseded section is cut by sections, with the same rows."""
    text = "---\ntitle: S\n---\n# S\n\n## people/Ann Lee\n- met: Bob\n- two\nlines of text\nmore\n\n## Superseded\n- x: y\n"
    doc = fmt.split(text)
    assert plain_columns(doc) is not None
    assert document_rows("s.md", doc) == _lined_rows("s.md", doc, True, doc.title, None)
    assert [(r.line, r.text, r.superseded) for r in document_rows("s.md", doc)] == [
        (7, "- met: Bob", False),
        (8, "- two", False),
        (9, "lines of text\nmore", False),
        (13, "- x: y", True),
    ]
