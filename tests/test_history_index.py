"""restore and revert keep INDEX.md current, in their own commit (issue 19, finding 13).

INDEX.md listed what the documents said before the undo until the next
consolidate: a restored description, a document a revert removed or brought
back. After each undo here, `Memory.index()` must find nothing to change, and
git must hold the new INDEX.md in the undo's commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsmem import Memory

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def document(memory: Memory, path: str, description: str) -> None:
    title = Path(path).stem.title()
    memory.write(path, f"# {title}\n\n- owner: Ada\n", set={"title": title, "topic": title, "description": description})


@pytest.fixture
def memory(tmp_path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T12:00:00+00:00")
    memory = Memory.init(tmp_path / "mem", git=True)
    document(memory, "topics/billing.md", "How we bill: first words")
    memory.index()
    return memory


def index_lines(memory: Memory) -> list[str]:
    return [line for line in (memory.root / "INDEX.md").read_text().splitlines() if line.startswith("- [")]


def committed_in_head(memory: Memory) -> list[str]:
    return git(memory.root, "show", "--name-only", "--format=", "HEAD").split()


def test_restore_brings_index_md_back_with_the_description_in_the_same_commit(memory):
    memory.write("topics/billing.md", None, set={"description": "How we bill: second words"})
    memory.index()
    assert index_lines(memory) == ["- [Billing](topics/billing.md): How we bill: second words"]
    memory.restore("topics/billing.md", at="HEAD~2")  # before the new description and its index
    assert index_lines(memory) == ["- [Billing](topics/billing.md): How we bill: first words"]
    assert sorted(committed_in_head(memory)) == ["INDEX.md", "topics/billing.md"]
    assert git(memory.root, "status", "--porcelain") == ""
    assert memory.index().changed is False


def test_revert_of_a_new_document_takes_it_out_of_index_md(memory):
    document(memory, "topics/deploys.md", "When we ship")
    created = git(memory.root, "rev-parse", "HEAD").strip()
    memory.index()
    assert len(index_lines(memory)) == 2
    memory.revert(created)
    assert not (memory.root / "topics/deploys.md").exists()
    assert index_lines(memory) == ["- [Billing](topics/billing.md): How we bill: first words"]
    assert sorted(committed_in_head(memory)) == ["INDEX.md", "topics/deploys.md"]
    assert memory.index().changed is False


def test_revert_of_a_consolidation_leaves_index_md_as_the_documents_now_say(memory):
    memory.note("- owner: Bo", subject="topic/Deploys", session="s1")
    assert memory.consolidate().counts["notes_consolidated"] == 1
    consolidation = git(memory.root, "rev-parse", "HEAD").strip()
    assert "INDEX.md" in committed_in_head(memory)
    document(memory, "topics/support.md", "Support hours")  # after it, not in its INDEX.md
    memory.revert(consolidation)
    assert not (memory.root / "topics/deploys.md").exists()
    assert [line.split("]")[0] for line in index_lines(memory)] == ["- [Billing", "- [Support"]
    assert memory.index().changed is False


def test_restore_through_the_cli_keeps_index_md_current(memory):
    memory.write("topics/billing.md", None, set={"description": "How we bill: second words"})
    memory.index()
    env = {**os.environ, "FSMEM_NOW": "2026-11-30T12:00:00+00:00"}
    done = subprocess.run(
        [FSMEM, "--root", str(memory.root), "restore", "topics/billing.md", "--at", "HEAD~2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "restored topics/billing.md\n"), done.stderr
    assert index_lines(memory) == ["- [Billing](topics/billing.md): How we bill: first words"]


def test_no_index_md_is_created_and_a_scoped_memory_leaves_it_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T12:00:00+00:00")
    memory = Memory.init(tmp_path / "mem", git=True)
    document(memory, "topics/billing.md", "first")
    document(memory, "topics/billing.md", "second")
    memory.restore("topics/billing.md", at="HEAD~1")
    assert not (memory.root / "INDEX.md").exists()  # never consolidated: context lists the documents itself

    memory.index()
    scoped = Memory(memory.root, scope=["topics/"])
    scoped.restore("topics/billing.md", at="HEAD~1")  # HEAD~N counts the commits of its scope: "second"
    assert committed_in_head(memory) == ["topics/billing.md"]  # INDEX.md lies outside the scope
    assert memory.index().changed is True


def test_a_restore_of_index_md_itself_is_left_as_asked(memory):
    memory.write("topics/billing.md", None, set={"description": "How we bill: second words"})
    memory.index()
    memory.restore("INDEX.md", at="HEAD~2")
    assert index_lines(memory) == ["- [Billing](topics/billing.md): How we bill: first words"]
    assert committed_in_head(memory) == ["INDEX.md"]
