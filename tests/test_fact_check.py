"""Hand edits of keyed facts (issue 32, finding 4): `check` names a fact line it cannot read and a citation
that no longer supports its value, and `timeline` shows a hand-edited value as edited by a person (who and
when from git history where there is history), not as what its note said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest

from fsmem import Memory
from fsmem.query import fact_check

FSMEM = str(Path(sys.executable).with_name("fsmem"))
ANN = "entities/people/ann-lee.md"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", "2026-11-20T10:00:00+00:00")


def cli(root: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    env["FSMEM_NOW"] = os.environ["FSMEM_NOW"]
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, env=env)


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def consolidated(memory: Memory) -> str:
    """Ann works at Globex, as a note says and consolidation writes it; the note's path."""
    memory.note("- employer: Globex\n- phone: 555 0100", subject="people/Ann Lee")
    memory.consolidate()
    text = (memory.root / ANN).read_text()
    assert "- employer: Globex ([2026-11-20T10:00:00Z](../../sessions/2026/11/20/" in text
    return next(str(p.relative_to(memory.root)) for p in (memory.root / "sessions").rglob("*.md"))


def edit_by_hand(memory: Memory, old: str, new: str) -> None:
    path = memory.root / ANN
    path.write_text(path.read_text().replace(old, new))


def test_check_reports_a_citation_that_no_longer_supports_its_value(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    source = consolidated(memory)
    assert cli(memory.root, "check").returncode == 0
    edit_by_hand(memory, "employer: Globex", "employer: Initech")
    done = cli(memory.root, "check", "--json", process=True)
    assert done.returncode == 1, done.stderr
    problems = json.loads(done.stdout)["problems"]
    assert problems == [
        {
            "path": ANN,
            "line": 11,
            "message": f"'employer: Initech' cites {source}, which says employer: Globex instead: the citation no "
            "longer supports the value; if a person changed it, replace the citation with (as of YYYY-MM-DD), "
            "else restore the value the note gives",
        }
    ]
    edit_by_hand(memory, "employer: Initech", "employer:  globex")  # case and spacing are no change of value
    assert cli(memory.root, "check").returncode == 0


def test_check_reports_fact_lines_it_cannot_read(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    consolidated(memory)
    edit_by_hand(
        memory,
        "## Facts\n",
        "## Facts\n* Phone: 111\n+ home phone of ann lee: 1\n- role: cto (as of 2024-13-01)\n"
        "- city: Oslo ([2026-13-40](../../sessions/x.md))\n- see https://example.com/ann\n- Prefers email\n",
    )
    found = [(line, message.split(" ")[0]) for _, line, message in fact_check.problems(memory.root, [ANN], "archive")]
    assert found == [(11, "'*"), (12, "'+"), (13, "'-"), (14, "'-"), (14, "its")]  # and sessions/x.md is no note
    text = cli(memory.root, "check").stdout
    assert (
        f"{ANN}:11: '* Phone: 111' under ## Facts is not a keyed fact, so consolidation, timeline and as_of pass "
        "it by: a key is one to four lowercase words (letters, digits, _ or -) followed by ': ' and a value, "
        "such as '- phone: 555 0100'" in text
    )
    assert f"{ANN}:13: '- role: cto (as of 2024-13-01)': '(as of 2024-13-01)' is not a date" in text
    assert f"{ANN}:14: '- city: Oslo ([2026-13-40](../../sessions/x.md))': its citation cannot be read" in text


def test_a_note_that_does_not_state_the_key_is_no_contradiction():
    doc = "---\ntitle: A\n---\n## Facts\n- employer: Initech ([2026-11-20](../../sessions/2026/11/20/a.md))\n"
    said = {"sessions/2026/11/20/a.md": {"phone": {"555": "555"}}}
    assert fact_check.contradictions(doc, said.get) == []
    said = {"sessions/2026/11/20/a.md": {"employer": {"globex": "Globex", "initech": "Initech"}}}
    assert fact_check.contradictions(doc, said.get) == []  # the note said both (it changed within the note)


def test_timeline_shows_a_hand_edit_without_history_as_edited_by_hand(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    source = consolidated(memory)
    before = {e.key: e for e in memory.timeline("people/Ann Lee").entries}
    assert (before["employer"].source, before["employer"].edited) == (source, False)
    edit_by_hand(memory, "employer: Globex", "employer: Initech")
    entries = {e.key: e for e in memory.timeline("people/Ann Lee").entries}
    employer = entries["employer"]
    assert (employer.value, employer.source, employer.writer, employer.edited, employer.edited_on) == (
        "Initech",
        ANN,
        None,
        True,
        None,
    )
    assert entries["phone"].source == source and not entries["phone"].edited
    row = next(line for line in cli(memory.root, "timeline", "people/Ann Lee").stdout.splitlines() if "Initech" in line)
    assert row == f"employer: Initech  (2026-11-20T10:00:00Z, current)  {ANN} edited by hand"


def test_timeline_names_who_edited_it_and_when_from_history(tmp_path, monkeypatch):
    memory = Memory.init(tmp_path / "mem", git=True)
    git(memory.root, "config", "user.name", "Ann Example")
    git(memory.root, "config", "user.email", "ann@example.com")
    consolidated(memory)
    edit_by_hand(memory, "employer: Globex", "employer: Initech")
    assert "edited by hand" in memory.timeline("people/Ann Lee").to_text()  # not committed yet: no author
    monkeypatch.setenv("FSMEM_NOW", "2026-11-26T10:00:00+00:00")
    memory.consolidate()  # commits the change made outside fsmem first, as the clone's git user
    assert "Ann Example" in git(memory.root, "log", "-1", "--format=%an", "--", ANN)
    employer = next(e for e in memory.timeline("people/Ann Lee").entries if e.key == "employer")
    assert (employer.source, employer.writer, employer.edited_on) == (ANN, "Ann Example", "2026-11-26")
    row = next(line for line in cli(memory.root, "timeline", "people/Ann Lee").stdout.splitlines() if "Initech" in line)
    assert row.endswith(f"{ANN} edited by Ann Example on 2026-11-26")


def test_a_scoped_check_reads_no_note_outside_its_scope_and_the_cache_follows_edits(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    source = consolidated(memory)
    edit_by_hand(memory, "employer: Globex", "employer: Initech")
    scoped = Memory(memory.root, scope=["entities"])
    assert [m for _, _, m in scoped.check().problems if "cites" in m] == []  # the note would say its value
    for path in [memory.root / ANN, memory.root / source]:  # written a while ago: not racy, so cached
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 3_600_000_000_000))
    assert [p[1] for p in memory.check().problems] == [11]
    assert (memory.root / ".fsmem/cache/facts.json").is_file()
    assert [p[1] for p in memory.check().problems] == [11]  # from the cache
    edit_by_hand(memory, "employer: Initech", "employer: Globex")
    assert memory.check().problems == []  # the edited document is read again, not taken from the cache


def test_a_document_rewritten_with_its_size_and_mtime_put_back_is_checked_again(tmp_path):
    """The scans kept in `.fsmem/cache/facts.json` are keyed on the file's change time too: an edit of the same
    size whose mtime was put back (`cp -p`, `rsync -t`) is checked as a fresh scan would check it."""
    memory = Memory.init(tmp_path / "mem")
    source = consolidated(memory)
    for path in [memory.root / ANN, memory.root / source]:  # written a while ago: not racy, so cached
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 3_600_000_000_000))
    assert memory.check().problems == []
    assert (memory.root / ".fsmem/cache/facts.json").is_file()
    path = memory.root / ANN
    before = path.stat()
    edit_by_hand(memory, "employer: Globex", "employer: Globez")  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert [p[1] for p in Memory(memory.root).check().problems] == [11]
