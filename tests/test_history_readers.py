"""The long-lived `git cat-file` readers behind history (`fsmem.history.git.Readers`): a process holds at most one
`--batch` and one `--batch-check` per repository, whatever it is asked and however many `Memory` objects it opens,
and none once the memories of that repository are closed. They were each `Repo`'s own, ended only when that object
was collected: about 90 were seen under one pytest process, and a server keeps a memory per token's view."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from git_readers import cat_file_readers

from fsmem import Memory, NotFound

NOW = "2026-11-30T09:15:00+00:00"


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)


def readers_of(root: Path) -> list[str]:
    """The `git cat-file` processes this process started for the repository at `root`."""
    return cat_file_readers(os.getpid(), root)


@pytest.fixture
def root(tmp_path) -> Path:
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write("people/Adam Smith.md", "# Adam Smith\n\n- employer: Globex\n")
    memory.close()
    return memory.root


def test_many_memories_of_one_repository_share_two_readers_and_close_gives_them_back(root):
    memories = []
    for n in range(12):  # each kept open, as a server keeps a memory for each token's view
        memory = Memory(root, agent=f"agent{n}")
        memory.write("people/Adam Smith.md", f"# Adam Smith\n\n- fact: {n}\n")  # a commit reads trees: cat-file
        assert memory.log(max_results=1).rows == 1
        assert memory.show("people/Adam Smith.md", at="HEAD~1").rows
        memories.append(memory)
        assert len(readers_of(root)) <= 2, readers_of(root)
    assert "batch" in readers_of(root)
    for memory in memories[:-1]:
        memory.close()
    assert "batch" in readers_of(root)  # the last memory still reads through them
    assert memories[-1].log(max_results=1).rows == 1
    memories[-1].close()
    assert readers_of(root) == []


def test_a_closed_memory_reads_again_through_readers_of_its_own_that_its_next_close_ends(root):
    memory = Memory(root)
    assert memory.log(max_results=1).rows == 1
    memory.write("people/Adam Smith.md", "# Adam Smith\n\n- role: cfo\n")
    memory.close()
    assert readers_of(root) == []
    assert memory.show("people/Adam Smith.md", at="HEAD").rows  # a later call opens them again
    assert readers_of(root) == ["batch"]
    memory.close()
    assert readers_of(root) == []


def test_a_memory_dropped_without_close_gives_its_readers_back(root):
    memory = Memory(root)
    memory.write("people/Adam Smith.md", "# Adam Smith\n\n- role: cfo\n")
    assert readers_of(root) == ["batch"]
    del memory
    assert readers_of(root) == []


def test_a_forked_child_starts_readers_of_its_own_and_leaves_its_parents_alone(root):
    parent = Memory(root)
    parent.write("people/Adam Smith.md", "# Adam Smith\n\n- role: cfo\n")  # the parent's reader is running
    pid = os.fork()
    if pid == 0:
        try:
            child = Memory(root)
            child.write("people/Adam Smith.md", "# Adam Smith\n\n- office: Springfield\n")
            ok = child.log(max_results=1).rows == 1 and readers_of(root) == ["batch"]  # its own child process
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent.show("people/Adam Smith.md", at="HEAD").rows  # its reader still answers it, in step
    assert "Springfield" in parent.read("people/Adam Smith.md").to_text()
    assert readers_of(root) == ["batch"]
    parent.close()
    assert readers_of(root) == []


def test_a_missing_path_with_a_space_is_not_found_not_a_crash(root):
    """cat-file answers "<spec> missing", and a spec with a space in its path split into three words, as a found
    object's header is: its size was read from the word 'missing' (ValueError)."""
    with Memory(root) as memory, pytest.raises(NotFound, match="did not exist at HEAD"):
        memory.show("people/No Such.md", at="HEAD")
