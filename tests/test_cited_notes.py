"""A consolidated session note keeps the path its citations link: every face refuses to move it, and `check`
reports a citation whose note is gone (a dangling citation) with the command that puts it back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import InvalidArgument
from fsmem.store import writing

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-12-01T10:00:00+00:00"
NOTE = "sessions/2026/12/01/s1.md"
ANN = "entities/people/ann-lee.md"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def fsmem(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    env["FSMEM_NOW"] = NOW
    return subprocess.run([FSMEM, "--root", str(root), *args], capture_output=True, text=True, env=env, timeout=120)


def consolidated(tmp_path: Path) -> Memory:
    """A memory whose note s1 was consolidated (a fact and an observation cite it) and whose note s2 was not."""
    memory = Memory.init(tmp_path / "mem")
    memory.note("- employer: Acme", session="s1", subject="people/Ann Lee")
    memory.note("Wants PDF invoices.", session="s1", subject="topic/Billing")
    memory.consolidate()
    memory.note("- phone: 555", session="s2", subject="people/Ann Lee")
    assert f"](../../{NOTE})" in (memory.root / ANN).read_text()
    return memory


def unchanged(memory: Memory, before: dict[str, bytes]) -> None:
    assert files(memory.root) == before
    assert fsmem(memory.root, "check").returncode == 0


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".fsmem" not in p.parts
    }


def test_the_cli_refuses_to_move_a_consolidated_note_or_a_folder_holding_one(tmp_path):
    memory = consolidated(tmp_path)
    before = files(memory.root)
    for source, target in ((NOTE, "sessions/2026/12/01/s9.md"), ("sessions/2026", "old"), ("sessions", "kept")):
        moved = fsmem(memory.root, "mv", source, target)
        assert moved.returncode == 2, moved
        assert "Traceback" not in moved.stderr
        assert f"{NOTE}, which is a session note that was consolidated" in moved.stderr or (
            moved.stderr.startswith(f"fsmem: error: {NOTE} is a session note that was consolidated")
        )
        assert "nothing was moved" in moved.stderr
        unchanged(memory, before)
    # a note not consolidated yet is cited by nothing: it moves
    assert fsmem(memory.root, "mv", "sessions/2026/12/01/s2.md", "sessions/2026/12/01/s3.md").returncode == 0


def test_the_api_and_the_memory_tools_rename_refuse_it_too(tmp_path):
    memory = consolidated(tmp_path)
    before = files(memory.root)
    with pytest.raises(InvalidArgument, match="consolidated"):
        memory.mv(NOTE, "sessions/2026/12/01/s9.md")
    assert "mv" not in tools.REGISTRY  # no agent or MCP tool moves files: the memory tool's rename does
    tool = MemoryTool(memory_root=memory.root)
    with pytest.raises(Exception, match="consolidated"):
        tool.rename(f"/memories/{NOTE}", "/memories/sessions/2026/12/01/s9.md")
    unchanged(memory, before)


def test_every_face_refuses_to_remove_a_consolidated_note_as_mv_refuses_to_move_it(tmp_path):
    """`rm` removed a consolidated note that `mv` refused to move: the documents' citations of it then linked
    nothing (`check` reported them). Now rm (CLI and API) and the memory tool's delete refuse it, and a folder
    holding one, with the same reason; a note not consolidated yet is removed."""
    memory = consolidated(tmp_path)
    before = files(memory.root)
    removed = fsmem(memory.root, "rm", NOTE)
    assert removed.returncode == 2 and "Traceback" not in removed.stderr, removed
    assert removed.stderr.startswith(f"fsmem: error: {NOTE} is a session note that was consolidated")
    assert "would leave their citations linking nothing; nothing was removed" in removed.stderr
    with pytest.raises(InvalidArgument, match="nothing was removed"):
        memory.rm(NOTE)
    tool = MemoryTool(memory_root=memory.root)
    for path in (NOTE, "sessions/2026", "sessions"):
        with pytest.raises(Exception, match=f"Cannot delete /memories/{path}: .*consolidated.*nothing was removed"):
            tool.delete(f"/memories/{path}")
    unchanged(memory, before)
    assert fsmem(memory.root, "rm", "sessions/2026/12/01/s2.md").returncode == 0  # cited by nothing yet
    tool.delete("/memories/topics/billing.md")  # a document goes: it cites, it is not cited


def test_check_reports_a_citation_whose_note_is_gone_with_the_command_that_fixes_it(tmp_path):
    memory = consolidated(tmp_path)
    moved = tmp_path / "elsewhere.md"
    shutil.move(memory.root / NOTE, moved)  # moved by hand, out of the memory
    checked = fsmem(memory.root, "check")
    assert checked.returncode == 1
    lines = [line for line in checked.stdout.splitlines() if "a session note that is not there" in line]
    assert [line.split(":", 2)[:2] for line in lines] == [[ANN, "11"], ["topics/billing.md", "11"]]
    assert f"fsmem mv NEW-PATH {NOTE}" in lines[0]
    shutil.move(moved, memory.root / NOTE)
    assert fsmem(memory.root, "check").returncode == 0


def test_a_citation_of_an_archived_note_is_not_dangling(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  archive: false", "  archive: true"))
    memory = Memory(memory.root)
    memory.note("- employer: Acme", session="s1", subject="people/Ann Lee")
    memory.consolidate()
    assert f"](../../archive/{NOTE})" in (memory.root / ANN).read_text()
    assert fsmem(memory.root, "check").returncode == 0
    os.remove(memory.root / "archive" / NOTE)
    checked = fsmem(memory.root, "check")
    assert checked.returncode == 1
    assert f"its citation links archive/{NOTE}, a session note that is not there (nor at {NOTE})" in checked.stdout


def archiving(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    assert fsmem(root, "init", str(root)).returncode == 0
    config = root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  archive: false", "  archive: true"))
    return root


def at(root: Path, now: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    env["FSMEM_NOW"] = now
    return subprocess.run([FSMEM, "--root", str(root), *args], capture_output=True, text=True, env=env, timeout=120)


def test_a_session_noted_again_after_its_note_was_archived_is_archived_and_cited_where_its_lines_are(tmp_path):
    root = archiving(tmp_path)
    ann = ["note", "--session", "s1", "--subject", "people/Ann Lee"]
    assert at(root, "2026-12-01T10:00:00Z", *ann, "- employer: Acme").returncode == 0
    assert at(root, "2026-12-01T10:05:00Z", "consolidate").returncode == 0
    assert (root / "archive" / NOTE).is_file() and not (root / NOTE).exists()
    noted = at(root, "2026-12-01T11:00:00Z", *ann, "- phone: 555")
    assert noted.stdout.startswith("noted in sessions/2026/12/01/s1+2.md")  # the archive holds s1.md
    assert at(root, "2026-12-01T11:30:00Z", *ann, "- city: Oslo").stdout.startswith("noted in sessions/2026/12/01/s1+2")
    run = at(root, "2026-12-01T12:00:00Z", "consolidate")
    assert run.returncode == 0 and "not archived" not in run.stdout + run.stderr
    assert not (root / "sessions").exists() or not any((root / "sessions").rglob("*.md"))
    # every citation links the note that holds the line it cites
    text = (root / ANN).read_text()
    for key, value in (("employer", "Acme"), ("phone", "555"), ("city", "Oslo")):
        line = next(line for line in text.splitlines() if line.startswith(f"- {key}: {value} ("))
        linked = line.split("](../../", 1)[1].split(")", 1)[0]
        assert f"- {key}: {value} (as of" in (root / linked).read_text(), line
    assert at(root, "2026-12-01T12:00:00Z", "check").returncode == 0


def test_check_reports_a_note_whose_name_the_archive_holds(tmp_path):
    root = archiving(tmp_path)
    ann = ["note", "--session", "s1", "--subject", "people/Ann Lee"]
    assert at(root, "2026-12-01T10:00:00Z", *ann, "- employer: Acme").returncode == 0
    assert at(root, "2026-12-01T10:05:00Z", "consolidate").returncode == 0
    (root / NOTE).parent.mkdir(parents=True, exist_ok=True)
    (root / NOTE).write_text("---\nsession: s1\n---\n## people/Ann Lee\n- phone: 555\n")  # written by hand
    checked = at(root, "2026-12-01T11:00:00Z", "check")
    assert checked.returncode == 1
    assert (
        f"{NOTE}:1: the archive holds a note of the same name (archive/{NOTE}): both are cited by one path"
        in checked.stdout
    )
    assert f"fsmem mv {NOTE} sessions/2026/12/01/s1+2.md" in checked.stdout
    assert at(root, "2026-12-01T11:00:00Z", "mv", NOTE, "sessions/2026/12/01/s1+2.md").returncode == 0
    assert at(root, "2026-12-01T11:00:00Z", "check").returncode == 0


def test_a_session_whose_id_ends_in_a_part_number_keeps_its_own_note_beside_a_second_part(tmp_path):
    """A session noted again after its note was archived got `NAME-2.md`, which is also the note of a session
    whose id is `NAME-2`: both sessions' lines went into one file, under the first one's front matter, and
    were cited as that one's. Now a part is `NAME+2.md` ('+' is never in a session id)."""
    root = archiving(tmp_path)
    ann = ["note", "--session", "s1", "--subject", "people/Ann Lee"]
    bo = ["note", "--session", "s1-2", "--subject", "people/Bo Chen"]
    assert at(root, "2026-12-01T10:00:00Z", *ann, "- employer: Acme").returncode == 0
    assert at(root, "2026-12-01T10:05:00Z", "consolidate").returncode == 0
    assert at(root, "2026-12-01T11:00:00Z", *bo, "- city: Rome").stdout.startswith(
        "noted in sessions/2026/12/01/s1-2.md"
    )
    assert at(root, "2026-12-01T11:30:00Z", *ann, "- phone: 555").stdout.startswith(
        "noted in sessions/2026/12/01/s1+2.md"
    )
    assert "session: s1-2\n" in (root / "sessions/2026/12/01/s1-2.md").read_text()
    assert "session: s1\n" in (root / "sessions/2026/12/01/s1+2.md").read_text()
    assert "555" not in (root / "sessions/2026/12/01/s1-2.md").read_text()


SESSION_IDS = st.one_of(  # mostly a few letters, often with a part number after them: ids that look like parts
    st.builds(str.__add__, st.sampled_from(["s", "s1", "a-b"]), st.sampled_from(["", "-2", "-3", "_2", ".2"])),
    st.from_regex(writing.SESSION_ID, fullmatch=True),
)


@given(SESSION_IDS, st.integers(1, 12))
def test_a_session_notes_file_name_names_one_session_and_part(session, part):
    """A note's file name gives back its session id and part: no two (session id, part) pairs share a name (ids
    drawn mostly from a few, often with a part number after them, as `s1-2`)."""
    assert writing.SESSION_ID.match(session)
    stem = writing.part_name(session, part).removesuffix(".md")
    named, mark, number = stem.rpartition(writing.PART_MARK)
    assert ((named, int(number)) if mark else (stem, 1)) == (session, part)


def test_a_merged_observation_dates_its_citation_by_the_note_it_links(tmp_path, monkeypatch):
    """A near-duplicate observation from a later note joins the earlier line, which shows the later date: it
    showed it linked to the earlier note (`[2026-11-02](…/kickoff.md)`, kickoff.md a 2026-10-01 note), a
    citation whose date was not its note's. The dated link now goes to the note of that date, the others by name."""
    monkeypatch.setenv("FSMEM_NOW", "2026-10-01T10:00:00+00:00")
    memory = Memory.init(tmp_path / "mem")
    memory.note("Wants PDF invoices every month.", session="kickoff", subject="topic/Billing")
    memory.consolidate()
    monkeypatch.setenv("FSMEM_NOW", "2026-11-02T10:00:00+00:00")
    memory = Memory(memory.root)
    memory.note("Wants PDF invoices every month!", session="review", subject="topic/Billing")
    report = memory.consolidate()
    assert report.counts["observations_merged"] == 1
    line = next(line for line in (memory.root / "topics/billing.md").read_text().splitlines() if "PDF" in line)
    assert line == (
        "- Wants PDF invoices every month. ([2026-11-02](../sessions/2026/11/02/review.md); "
        "[kickoff](../sessions/2026/10/01/kickoff.md))"
    )
    assert fsmem(memory.root, "check").returncode == 0
