from fsmem.format.rows import is_fact, split_rows, subject_of

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
