"""Issue #19, finding 9: each `note` call is its own unit.

A note without a subject, written after one that had a subject, used to land
under that earlier heading (the file's last `##`) and be consolidated into its
document. Lines without a subject go to `consolidate.default_subject`
(`topic/Inbox`), on every face, whatever the session file's last heading was;
notes already on disk consolidate as they always did.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from child_env import without_fsmem
from conftest import configure
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory, format as fmt
from fsmem.agents import tools
from fsmem.consolidate import extractors as ex

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-11-30T09:15:00+00:00"
NOTE = "sessions/2026/11/30/s1.md"


def _subjects(memory: Memory, rel: str = NOTE) -> list[tuple[str | None, str | None, str | None]]:
    """(subject, key, text) of every item the built-in extractor finds in a note: what consolidation files where."""
    text = (memory.root / rel).read_text(encoding="utf-8")
    doc = fmt.split(text)
    found = ex.rules(ex.SessionNote(rel, "2026-11-30", text, doc.body, doc.body_start_line))
    return [(item.subject, item.key, item.text) for item in found.items]


def test_a_note_without_subject_after_one_with_a_subject_goes_to_the_default_subject(empty_memory, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    empty_memory.note("- cycle: monthly", session="s1", subject="topic/Billing")
    empty_memory.note("The office moves in March.", session="s1")
    body = fmt.split((empty_memory.root / NOTE).read_text()).body
    assert (
        body
        == "## topic/Billing\n- cycle: monthly (as of 2026-11-30T09:15:00Z)\n\n## topic/Inbox\n- The office moves in March.\n"
    )
    report = empty_memory.consolidate()
    assert not report.empty
    billing = (empty_memory.root / "topics/billing.md").read_text()
    inbox = (empty_memory.root / "topics/inbox.md").read_text()
    assert "office" not in billing and "- cycle: monthly" in billing
    assert "The office moves in March." in inbox


def test_a_note_without_subject_in_a_file_without_headings_is_appended_as_before(empty_memory, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    empty_memory.note("first", session="s1")
    empty_memory.note("second", session="s1")
    assert fmt.split((empty_memory.root / NOTE).read_text()).body == "- first\n\n- second\n"


def test_later_notes_without_subject_join_the_default_section_and_text_with_its_own_heading_keeps_it(
    empty_memory, monkeypatch
):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    empty_memory.note("- role: lead", session="s1", subject="people/Adam Smith")
    empty_memory.note("one", session="s1")
    empty_memory.note("- cycle: monthly", session="s1", subject="topic/Billing")
    empty_memory.note("two", session="s1")
    empty_memory.note("## people/Eve\n- role: cto", session="s1")
    assert _subjects(empty_memory) == [
        ("people/Adam Smith", "role", None),
        ("topic/Inbox", None, "one"),
        ("topic/Inbox", None, "two"),
        ("topic/Billing", "cycle", None),
        ("people/Eve", "role", None),
    ]


def test_the_configured_default_subject_is_used(empty_memory, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    configure(empty_memory.root, {"consolidate": {"default_subject": "topic/Journal"}})
    memory = Memory(empty_memory.root)
    memory.note("- cycle: monthly", session="s1", subject="topic/Billing")
    memory.note("free text", session="s1")
    assert _subjects(memory)[-1] == ("topic/Journal", None, "free text")


def test_through_the_cli_and_the_note_tool(empty_memory):
    env = without_fsmem()
    env.update(FSMEM_NOW=NOW, FSMEM_SESSION="s1")
    root = str(empty_memory.root)
    for args in (["--subject", "topic/Billing", "- cycle: monthly"], ["from the cli"]):
        done = subprocess.run([FSMEM, "--root", root, "note", *args], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
    os.environ["FSMEM_NOW"] = NOW  # the tool runs in this process (the fixture's env isolation undoes it)
    try:
        tools.call(empty_memory, "note", {"text": "- deadline: friday", "subject": "topic/Launch"})
        answer = tools.call(empty_memory, "note", {"text": "from the tool"})
    finally:
        del os.environ["FSMEM_NOW"]
    assert not answer.is_error, answer.text
    assert ("topic/Inbox", None, "from the cli") in _subjects(empty_memory)
    tool_note = next((empty_memory.root / "sessions/2026/11/30").glob("default-*.md"))
    assert _subjects(empty_memory, tool_note.relative_to(empty_memory.root).as_posix())[-1] == (
        "topic/Inbox",
        None,
        "from the tool",
    )


def test_a_note_written_before_the_fix_consolidates_as_it_did(empty_memory, monkeypatch):
    """Consolidation is a pure function of the notes: an old file with a line after a heading keeps its filing."""
    monkeypatch.setenv("FSMEM_NOW", "2026-12-01T08:00:00+00:00")
    old = empty_memory.root / NOTE
    old.parent.mkdir(parents=True)
    old.write_text(
        "---\ntitle: Session s1 2026-11-30\ntype: episodic\ncreated: 2026-11-30T09:00:00+00:00\n---\n"
        "## topic/Billing\n- cycle: monthly\n\n- An observation written without subject by fsmem 0.2.\n"
    )
    empty_memory.consolidate()
    assert "written without subject" in (empty_memory.root / "topics/billing.md").read_text()
    assert not (empty_memory.root / "topics/inbox.md").exists()


subjects = st.sampled_from([None, None, "topic/Billing", "people/Adam Smith", "topic/Inbox", "Acme"])
texts = st.sampled_from(["- cycle: monthly", "a free line", "- role: lead", "* a star item", "two\nlines"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(subjects, texts), min_size=1, max_size=8))
def test_every_note_is_filed_under_its_own_subject_whatever_came_before(tmp_path_factory, calls):
    memory = Memory.init(tmp_path_factory.mktemp("notes") / "m")
    os.environ["FSMEM_NOW"] = NOW
    try:
        for number, (subject, text) in enumerate(calls):
            memory.note(f"{text} n{number}", session="s1", subject=subject)
        text = (memory.root / NOTE).read_text(encoding="utf-8")
    finally:
        del os.environ["FSMEM_NOW"]
    doc = fmt.split(text)
    items = ex.rules(ex.SessionNote(NOTE, "2026-11-30", text, doc.body, doc.body_start_line)).items
    filed = {
        int(re.search(r" n(\d+)$", item.value or item.text or "").group(1)): item.subject or "topic/Inbox"
        for item in items
    }
    assert filed == {number: subject or "topic/Inbox" for number, (subject, _) in enumerate(calls)}, text
