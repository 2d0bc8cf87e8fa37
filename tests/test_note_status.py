"""Stale lines of consolidated session notes: hidden by grep, read and search unless asked for."""

import os
from pathlib import Path

import pytest
from conftest import write_file

from fsmem import Memory
from fsmem.query import grep_words
from fsmem.store.note_status import may_be_consolidated, superseded_note_lines

FIRST = "sessions/2026/10/01/kickoff.md"
LATER = "sessions/2026/11/20/support.md"


@pytest.fixture
def consolidated(tmp_path, monkeypatch):
    """Adam's employer was US Navy (first note), then Acme (a later note); both consolidated."""
    monkeypatch.setenv("FSMEM_NOW", "2026-12-01T08:00:00+00:00")
    memory = Memory.init(tmp_path / "mem")
    write_file(
        memory.root, FIRST, "---\ntitle: Kickoff\n---\n## people/Adam Smith\n- employer: US Navy\n- Likes boats.\n"
    )
    write_file(memory.root, LATER, "---\ntitle: Support\n---\n## people/Adam Smith\n- employer: Acme\n")
    memory.consolidate()
    document = (memory.root / "entities/people/adam-smith.md").read_text()
    assert f"## Superseded\n- employer: US Navy ([2026-10-01](../../{FIRST}) to 2026-11-20)" in document
    return memory


def test_grep_hides_a_note_line_whose_fact_was_superseded(consolidated):
    shown = [(m.path, m.line) for m in consolidated.grep("employer").matches]
    assert (FIRST, 6) not in shown and (LATER, 6) in shown
    assert consolidated.grep("employer").total == len(shown)
    everything = consolidated.grep("employer", include_superseded=True)
    flagged = {(m.path, m.line): m.superseded for m in everything.matches}
    assert flagged[(FIRST, 6)] is True and flagged[(LATER, 6)] is False
    boats = [(m.path, m.line) for m in consolidated.grep("boats").matches]
    assert (FIRST, 7) in boats  # an observation of the same note is no superseded fact


def test_read_hides_it_too(consolidated):
    lines = [text for _number, text in consolidated.read(FIRST).lines]
    assert "- employer: US Navy" not in lines and "- Likes boats." in lines
    assert "- employer: US Navy" in [t for _n, t in consolidated.read(FIRST, include_superseded=True).lines]


def test_search_hides_it_in_a_note_that_grew_after_consolidation(consolidated):
    path = consolidated.root / FIRST
    path.write_text(path.read_text() + "- The navy boats were grey.\n")  # ranked again: its body changed
    hits = consolidated.search("employer US Navy", max_results=20).hits
    assert (FIRST, 7) in [(h.path, h.line) for h in hits]  # the grown note is searched
    assert (FIRST, 6) not in [(h.path, h.line) for h in hits]
    wider = consolidated.search("employer US Navy", max_results=20, include_superseded=True).hits
    assert any(h.path == FIRST and h.line == 6 and h.superseded for h in wider)


def test_the_rule_itself(tmp_path):
    root = tmp_path
    note = "---\ntitle: n\nconsolidated: sha256-0\n---\n## topic/X\n- color: Blue\n- size: big\n- color: red\n"
    write_file(
        root, "topics/x.md", "# X\n## Superseded\n- color: blue ([2026-01-01](../sessions/a.md) to 2026-02-01)\n"
    )
    write_file(root, "topics/y.md", "# Y\n## Facts\n- size: big ([2026-01-01](../sessions/a.md))\n")

    def ranges(docs):
        return {"topics/x.md": [(2, 3)], "topics/y.md": []}

    assert superseded_note_lines(Path(root), {"sessions/a.md": note}, ranges) == {"sessions/a.md": [(6, 6)]}
    # a note never consolidated cannot be cited; one cited only outside ## Superseded is current
    unconsolidated = note.replace("consolidated: sha256-0\n", "")
    assert superseded_note_lines(Path(root), {"sessions/a.md": unconsolidated}, ranges) == {}
    assert superseded_note_lines(Path(root), {"sessions/b.md": note}, ranges) == {}


def test_a_note_whose_front_matter_outgrows_the_first_read_is_still_checked(consolidated):
    path = consolidated.root / FIRST
    text = path.read_text()
    assert "\nconsolidated:" in text
    path.write_text(text.replace("---\n", "---\npadding: " + "x" * 6000 + "\n", 1))  # one line longer
    shown = [(m.path, m.line) for m in consolidated.grep("employer").matches]
    assert (LATER, 6) in shown and (FIRST, 7) not in shown
    assert (FIRST, 7) in [(m.path, m.line) for m in consolidated.grep("employer", include_superseded=True).matches]


def test_only_a_front_matter_without_the_field_rules_a_note_out():
    assert may_be_consolidated("---\ntitle: n\nconsolidated: sha256-0\n---\n- a: b\n")
    assert not may_be_consolidated("---\ntitle: n\n---\n- a: b\nconsolidated: later\n")
    assert may_be_consolidated("---\ntitle: n\n" + "x" * 100)  # the front matter goes on past what was read
    assert not may_be_consolidated("# no front matter\n")


def test_a_note_the_cache_knows_as_never_consolidated_is_not_opened_for_its_stale_lines(consolidated, monkeypatch):
    import builtins

    plain = "sessions/2026/11/25/plain.md"
    write_file(consolidated.root, plain, "---\ntitle: Plain\n---\n- employer: Initech\n")
    assert consolidated.grep("employer").total >= 2  # the metadata cache now knows both notes
    os.utime(consolidated.root / plain, ns=(1, 1))  # out of the racy window, so its row is stored
    os.utime(consolidated.root / FIRST, ns=(1, 1))
    consolidated.ls("sessions", max_results=100)
    grep_words.caught_up(consolidated.root)  # the word index reads the files just touched now, not in the grep below
    opened: list[str] = []
    real_open = builtins.open

    def watching_open(file, *args, **kwargs):
        opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", watching_open)
    shown = [(m.path, m.line) for m in consolidated.grep("employer").matches]
    assert (plain, 4) in shown and (FIRST, 6) not in shown  # the consolidated note's stale line is still hidden
    assert not any(name.endswith("plain.md") for name in opened)
    assert any(name.endswith("kickoff.md") for name in opened)


def test_the_notes_a_document_cites_are_read_when_only_files_with_ranges_are_asked(consolidated):
    from fsmem.store.superseded_lines import fresh_rows, superseded_ranges

    consolidated.ls("sessions", max_results=100)
    asked = [FIRST, LATER, "entities/people/adam-smith.md"]
    for fresh in (None, fresh_rows(consolidated.catalog.cache)):
        every = superseded_ranges(consolidated.root, consolidated.catalog.cache, asked, fresh)
        some = superseded_ranges(consolidated.root, consolidated.catalog.cache, asked, fresh, every_file=False)
        assert some == {rel: ranges for rel, ranges in every.items() if ranges}
        assert some[FIRST] == [(6, 6)] and LATER not in some
