"""A question that names a month finds the row recorded in that month: a row's date is searchable in words."""

import pytest

from fsmem import Memory

# Two camping trips, told alike; the July one first in the file, so that a tie would put it first.
DOCUMENT = """---
title: Melanie
entity: people/Melanie
created: 2023-06-27
---
# Melanie

## Notes
- We went camping with the kids by the lake. [D9:1] (2023-07-17, sessions/2023/07/17/s9.md)
- Work has been busy, but the weekend was calm. [D9:2] (2023-07-17, sessions/2023/07/17/s9.md)
- We went camping with the kids by the lake. [D4:8] (2023-06-27, sessions/2023/06/27/s4.md)
- Work has been busy, but the weekend was calm. [D4:9] (2023-06-27, sessions/2023/06/27/s4.md)
"""


def note(heading: str, line: str) -> str:
    return f"---\ntitle: {heading}\ntype: episodic\n---\n## people/Ana\n- {line}\n"


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2023-11-01T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "entities/people").mkdir(parents=True)
    (root / "entities/people/melanie.md").write_text(DOCUMENT, encoding="utf-8")
    for day, heading in (("2023/07/03", "July"), ("2023/06/03", "June")):
        (root / "sessions" / day).mkdir(parents=True)
        (root / "sessions" / day / "a.md").write_text(note(heading, "Ana went to the book club."), encoding="utf-8")
    return Memory(root)


def top(memory: Memory, query: str) -> str:
    return memory.search(query, max_results=1).hits[0].text


@pytest.mark.parametrize("month, marker", [("June", "[D4:8]"), ("July", "[D9:1]")])
def test_a_month_in_the_question_finds_the_row_cited_in_that_month(memory, month, marker):
    assert top(memory, f"When did Melanie go camping in {month}?").startswith(
        f"- We went camping with the kids by the lake. {marker}"
    )


def test_a_session_note_s_rows_carry_its_date_in_words(memory):
    hits = memory.search("Where did Ana go on 3 June, 2023?", max_results=2).hits
    assert [h.path for h in hits] == ["sessions/2023/06/03/a.md", "sessions/2023/07/03/a.md"]


def test_the_date_words_are_terms_only_not_shown(memory):
    hit = memory.search("When did Melanie go camping in June?", max_results=1).hits[0]
    assert hit.text == "- We went camping with the kids by the lake. [D4:8] (2023-06-27)"
    assert "june" not in memory.search("book club June", max_results=1).to_text().lower().replace("2023-06", "")
