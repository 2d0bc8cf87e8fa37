"""Undo that undoes (issue #18, finding 9): `revert` of a commit whose lines, facts or fields a later commit
changed refuses, names that commit and changes nothing; an applied revert makes the reverted-to value current
again, and the next consolidation keeps it so; restore and revert check what they committed before saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import given, settings, strategies as st

from fsmem import EditConflict, HistoryError, Memory
from fsmem.history import journal

FSMEM = str(Path(sys.executable).with_name("fsmem"))
PERSON = "entities/people/adam-smith.md"
DOCUMENT = """---
title: Adam Smith
type: semantic
---
# Adam Smith

## Facts
- employer: Acme Corp
- role: cfo
"""


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = without_fsmem()
    env["FSMEM_NOW"] = os.environ["FSMEM_NOW"]
    return subprocess.run([FSMEM, "--root", str(root), *args], capture_output=True, text=True, env=env, timeout=60)


def at(monkeypatch, day: str) -> None:
    monkeypatch.setenv("FSMEM_NOW", f"{day}T09:00:00+00:00")


@pytest.fixture
def edited(tmp_path, monkeypatch) -> tuple[Memory, str, str]:
    """The finding's history: employer Acme Corp -> ACME (commit C) -> Acme Inc (commit L), by edits."""
    at(monkeypatch, "2026-11-28")
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write(PERSON, DOCUMENT.split("---\n", 2)[2], set={"title": "Adam Smith", "type": "semantic"})
    at(monkeypatch, "2026-11-29")
    memory.edit(PERSON, old="employer: Acme Corp", new="employer: ACME")
    c = git(memory.root, "rev-parse", "HEAD").strip()
    at(monkeypatch, "2026-11-30")
    memory.edit(PERSON, old="employer: ACME", new="employer: Acme Inc")
    return memory, c, git(memory.root, "rev-parse", "HEAD").strip()


def facts(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def test_revert_of_a_fact_a_later_commit_changed_refuses_names_that_commit_and_changes_nothing(edited):
    memory, c, later = edited
    before = (memory.root / PERSON).read_bytes()
    head = git(memory.root, "rev-parse", "HEAD")
    out = cli(memory.root, "revert", c[:12])
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        f"fsmem: error: cannot revert {c[:12]}: the fact 'employer' in {PERSON} changed since, by {later[:12]} "
        f'(default, 2026-11-30: "edit {PERSON}"); nothing was changed. Revert that commit first (the newest '
        f"first), or compare with fsmem diff {c[:12]} and restore by hand"
    )
    assert (memory.root / PERSON).read_bytes() == before and git(memory.root, "rev-parse", "HEAD") == head


def test_revert_of_the_latest_edit_makes_the_earlier_value_current_and_nothing_superseded(edited, monkeypatch):
    memory, c, later = edited
    out = cli(memory.root, "revert", later[:12])
    assert out.returncode == 0 and out.stdout.startswith(f"reverted {PERSON}")
    text = (memory.root / PERSON).read_text()
    assert facts(text) == ["- employer: ACME", "- role: cfo"] and "Superseded" not in text
    assert git(memory.root, "show", f"HEAD:{PERSON}") == text
    memory.revert(c)  # and now the first edit too: newest first, each applies
    assert facts((memory.root / PERSON).read_text()) == ["- employer: Acme Corp", "- role: cfo"]


def consolidated(monkeypatch, tmp_path) -> tuple[Memory, str]:
    """Acme Corp from a note, consolidated; then ACME from a later note, consolidated (commit C)."""
    at(monkeypatch, "2026-11-28")
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.note("- employer: Acme Corp", subject="people/Adam Smith")
    memory.consolidate()
    at(monkeypatch, "2026-11-29")
    memory.note("- employer: ACME", subject="people/Adam Smith")
    report = memory.consolidate()
    assert report.counts["superseded"] == 1
    return memory, git(memory.root, "rev-parse", "HEAD").strip()


def test_revert_of_a_consolidation_makes_the_old_value_current_and_the_next_consolidation_keeps_it(
    tmp_path, monkeypatch
):
    memory, c = consolidated(monkeypatch, tmp_path)
    at(monkeypatch, "2026-11-30")
    out = cli(memory.root, "revert", c)
    assert out.returncode == 0 and out.stdout.startswith("reverted 2 files")  # the document and its history file
    text = (memory.root / PERSON).read_text()
    assert facts(text) == [
        f"- employer: Acme Corp ([2026-11-28T09:00:00Z](../../sessions/2026/11/28/default-{memory.host_id}.md))"
    ]
    assert "ACME" not in text and "Superseded" not in text
    assert "consolidated: " in (memory.root / f"sessions/2026/11/29/default-{memory.host_id}.md").read_text()
    assert git(memory.root, "status", "--porcelain") == ""
    memory.consolidate()  # nothing new: the reverted note stays consolidated, so it is not applied again
    assert (memory.root / PERSON).read_text() == text
    at(monkeypatch, "2026-12-01")
    memory.note("- role: cfo", subject="people/Adam Smith")
    memory.note("- employer: Acme Corp", subject="people/Adam Smith")
    memory.consolidate()  # the key re-derived from every note: ACME, reverted, does not come back
    later = (memory.root / PERSON).read_text()
    assert [line.split(" (")[0] for line in facts(later)] == ["- employer: Acme Corp", "- role: cfo"]
    assert "ACME" not in later and "Superseded" not in later


def test_revert_under_a_later_change_to_another_key_undoes_only_its_own(tmp_path, monkeypatch):
    memory, c = consolidated(monkeypatch, tmp_path)
    at(monkeypatch, "2026-11-30")
    memory.note("- role: cfo", subject="people/Adam Smith")
    memory.consolidate()  # a later commit adds role, on the line next to employer
    memory.revert(c)
    text = (memory.root / PERSON).read_text()
    assert [line.split(" (")[0] for line in facts(text)] == ["- employer: Acme Corp", "- role: cfo"]
    assert "ACME" not in text and "Superseded" not in text
    assert "updated: 2026-11-30" in text  # the later change's date stays
    assert git(memory.root, "show", f"HEAD:{PERSON}") == text


def test_revert_of_a_note_its_writer_appended_to_since_names_the_append(tmp_path, monkeypatch):
    at(monkeypatch, "2026-11-28")
    memory = Memory.init(tmp_path / "mem", git=True)
    note = memory.note("- employer: Acme Corp", subject="people/Adam Smith").path
    written = git(memory.root, "rev-parse", "HEAD").strip()
    memory.consolidate()  # marks the note: bookkeeping, not a change to what it says
    memory.note("- city: Oslo", subject="people/Adam Smith")
    appended = git(memory.root, "log", "-1", "--format=%H", "--", note).strip()
    with pytest.raises(EditConflict) as refused:
        memory.revert(written)
    assert str(refused.value).startswith(
        f"cannot revert {written[:12]}: {note} changed since on the same lines, "
        f'by {appended[:12]} (default, 2026-11-28: "note {note}: +1 line")'
    )


def test_restore_and_revert_say_done_only_once_head_holds_it(edited, monkeypatch):
    memory, c, later = edited
    monkeypatch.setattr(journal, "drain", lambda repo, **kw: 0)  # the commit does not happen (a stuck lock)
    with pytest.raises(HistoryError, match=f"the revert is written to {PERSON} but not committed"):
        memory.revert(later)
    assert facts(git(memory.root, "show", f"HEAD:{PERSON}")) == ["- employer: Acme Inc", "- role: cfo"]
    with pytest.raises(HistoryError, match=f"the restore is written to {PERSON} but not committed"):
        memory.restore(PERSON, at=f"{c}~1")
    monkeypatch.undo()
    Memory(memory.root).note("- anything: else")  # the next write commits what waited
    assert facts(git(memory.root, "show", f"HEAD:{PERSON}")) == ["- employer: Acme Corp", "- role: cfo"]
    subjects = git(memory.root, "log", "-4", "--format=%s").splitlines()
    assert subjects[1].startswith(f"restore {PERSON} as of ") and subjects[2].startswith(f"revert {later[:12]}")


# -- the undo of one change under another, as a property ------------------------------------------------------
KEYS = ("city", "employer", "role", "team")


def document(values: dict[str, str], old: dict[str, list[str]]) -> str:
    lines = ["---", "title: X", "updated: 2026-11-28", "---", "# X", "", "## Facts"]
    lines += [f"- {key}: {values[key]}" for key in sorted(values)]
    history = [f"- {key}: {value}" for key in sorted(old) for value in old[key]]
    if history:
        lines += ["", "## Superseded", *history]
    return "\n".join(lines) + "\n"


def changed(state: tuple[dict, dict], keys: set[str], tag: str) -> tuple[dict, dict]:
    """Each key set to a new value, the old one moved under ## Superseded, as consolidation does."""
    values, old = dict(state[0]), {key: list(found) for key, found in state[1].items()}
    for key in sorted(keys):
        old.setdefault(key, []).append(values[key])
        values[key] = f"{values[key]}-{tag}"
    return values, old


@settings(max_examples=60, deadline=None)
@given(
    mine=st.sets(st.sampled_from(KEYS), min_size=1),
    theirs=st.sets(st.sampled_from(KEYS), min_size=1),
    earlier=st.sets(st.sampled_from(KEYS)),
)
def test_an_undo_under_a_change_to_other_keys_gives_each_key_its_own_side(mine, theirs, earlier):
    from fsmem.history import footprint

    start = changed(({key: key.upper() for key in KEYS}, {}), earlier, "0")  # some history already
    after_state = changed(start, mine, "c")
    later_state = changed(after_state, theirs, "l")
    before, after, later = document(*start), document(*after_state), document(*later_state)
    found = footprint.overlap(before, after, later)
    if mine & theirs:
        assert found == f"the fact {min(mine & theirs)!r}"
        return
    assert found is None
    values = {key: (start if key in mine else later_state)[0][key] for key in KEYS}
    old = {key: (start if key in mine else later_state)[1].get(key, []) for key in KEYS}
    assert footprint.undo(before, after, later) == document(values, {key: found for key, found in old.items() if found})
