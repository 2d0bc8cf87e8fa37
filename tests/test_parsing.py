"""What a cold build's worker makes of one file (`fsmem.search.parsing.parse_file`), pinned row for row."""

from array import array

from fsmem.format.frontmatter import split
from fsmem.format.rows import plain_columns
from fsmem.search.analyzer import Analyzer
from fsmem.search.parsing import LINKED, SUPERSEDED, parse_file, parse_files

NOTE = """---
title: Session s1
date: 2024-05-08
---
# Session s1

## people/Ann Lee
- met: Bob at the lake
- the and of
Two lines
of text

## Facts
- sport: hockey

## Facts
- a second Facts section

## Superseded
- sport: tennis
### Older
- sport: golf
"""
# the rows as the per-row loop made them before rows came in columns: (line, flags, group, terms, context)
ROWS = [
    (8, LINKED, 0, "met bob lake may 8 2024", "ann lee"),
    (9, LINKED, 0, "may 8 2024", "ann lee"),  # stop words only: its date words alone
    (10, 0, 0, "two line text may 8 2024", "ann lee"),
    (14, LINKED, 0, "sport hockey may 8 2024", "fact"),  # the next section has the same headings
    (17, 0, 0, "second fact section may 8 2024", "fact"),
    (20, SUPERSEDED, 0, "sport tenni may 8 2024", "supersed"),
    (22, SUPERSEDED, 0, "sport golf may 8 2024", "supersed older"),
]
COUNTS = [1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 7, 7, 7]


def test_a_note_cut_by_sections_gives_the_rows_terms_and_counts_of_the_loop():
    rel = "sessions/2024/05/08/s1.md"
    assert plain_columns(split(NOTE)) is not None
    parsed = parse_file(rel, NOTE, (1, 2, 3, 4), Analyzer())
    assert parsed.rows == ROWS
    assert parsed.names == "session s1"
    assert sorted(parsed.terms.split()) == sorted(
        "2024 8 ann bob fact golf hockey lake lee line may met older s1 second section session sport supersed "
        "tenni text two".split()
    )
    (document,) = parsed.counted or []
    assert document[:3] == (0, 36, "met bob lake two line text sport hockey second fact section tenni golf may 8 2024")
    assert list(array("I", document[3])) == COUNTS


def test_a_note_cut_line_by_line_gives_the_same():
    """A comment where a blank line was leaves the rows as they were, cut by the general loop."""
    text = NOTE.replace("of text\n\n## Facts", "of text\n<!-- a comment -->\n## Facts", 1)
    assert plain_columns(split(text)) is None
    parsed = parse_file("sessions/2024/05/08/s1.md", text, (1, 2, 3, 4), Analyzer())
    assert parsed.rows == ROWS


CITED = """---
title: Adam Smith
type: person
aliases: [Adam]
---
# Adam Smith

## Work
- employer: Globex ([2026-11-20](../../sessions/2026/11/20/support-0140.md))
- role: engineer ([2026-11-20](../../sessions/2026/11/20/support-0140.md))
- team: billing ([2026-10-01](../../sessions/2026/10/01/kickoff.md))
- desk: third floor
- likes: tea ([2026-10-01](../../sessions/2026/10/01/kickoff.md))

## Home
- city: Lisbon ([2026-10-01](../../sessions/2026/10/01/kickoff.md))
- pet: a cat

## Superseded
- employer: Acme Corp ([2026-10-01](../../sessions/2026/10/01/kickoff.md) to 2026-11-20)
"""
SUPPORT, KICKOFF = "2026 11 20 session 2026 11 20 support 0140 md", "2026 10 01 session 2026 10 01 kickoff md"
# as the per-row loop made them (stop 42's code): each cited row dated by its citation, in its note's group,
# linked to the next only when both share headings and note; the uncited rows in group 0, undated (not a note)
CITED_ROWS = [
    (9, LINKED, 1, f"employ globex {SUPPORT} novemb", "work"),
    (10, 0, 1, f"role engin {SUPPORT} novemb", "work"),
    (11, 0, 2, f"team bill {KICKOFF} octob", "work"),
    (12, 0, 0, "desk third floor", "work"),
    (13, 0, 2, f"like tea {KICKOFF} octob", "work"),
    (16, 0, 2, f"citi lisbon {KICKOFF} octob", "home"),
    (17, 0, 0, "pet cat", "home"),
    (20, SUPERSEDED, 2, f"employ acm corp {KICKOFF} 2026 11 20 octob", "supersed"),
]


def test_rows_that_cite_notes_are_grouped_by_note_and_dated_by_their_citation():
    parsed = parse_file("entities/people/adam-smith.md", CITED, (1, 2, 3, 4), Analyzer())
    assert parsed.rows == CITED_ROWS
    assert parsed.sources == ["sessions/2026/11/20/support-0140.md", "sessions/2026/10/01/kickoff.md"]
    assert [
        (group, length, text, list(array("I", counts))) for group, length, text, counts in parsed.counted or []
    ] == [
        (0, 5, "desk third floor pet cat", [1] * 5),
        (1, 5, "novemb employ globex role engin", [1] * 5),
        (2, 10, "octob team bill like tea citi lisbon employ acm corp", [1] * 10),
    ]
    assert "novemb" in parsed.terms.split() and "work" in parsed.terms.split()


def test_a_task_s_terms_are_every_term_of_its_files(tmp_path):
    """A worker's task (`parse_files`) sends its files' terms once, as the command writing them all stores them;
    an unranked file (the memory's README) adds none."""
    files = {
        "sessions/2024/05/08/s1.md": NOTE,
        "entities/people/adam-smith.md": CITED,
        "README.md": "# Readme\n\nzebra\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    task = parse_files((str(tmp_path), [(rel, str(tmp_path / rel)) for rel in files]))
    assert [p.path for p in task.files] == list(files)
    assert task.terms is not None
    assert sorted(task.terms.split()) == sorted({t for p in task.files for t in p.terms.split()})
    assert "zebra" not in task.terms.split() and "golf" in task.terms.split() and "lisbon" in task.terms.split()
