"""A file's executable bit changed by hand (`chmod +x`, `chmod -x`) is a change made outside fsmem: committed as
such, and sent by `fsmem sync` like any hand edit, so a merge of the other host's change to that file goes through
with both kept.

Two hosts set up by fsmem and their bare remote (tests/sync_scenario.py), built once per module with a document
(`topics/tool.md`) both hold; each test takes a copy and checks what each host's HEAD, disk and `git status` hold.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import sync_scenario as S
from hostile_remote import git
from test_sync_link_targets import NOW, sync  # `fsmem sync` in this process, on the pinned day

from fsmem import Memory

TOOL = "topics/tool.md"
TOOL_TEXT = "# Tool\n\n- run: with care\n\n## Later\n\n- owner: ops\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Two hosts of one bare remote, both holding TOOL (synced), once per module."""
    origin, (first, second) = S.make_hosts(tmp_path_factory.mktemp("hosts"), hosts=2, writers=1)
    (first / TOOL).write_text(TOOL_TEXT)
    for root in (first, second):
        assert sync(root).returncode == 0
    assert (second / TOOL).read_text() == TOOL_TEXT
    return origin, [first, second]


@pytest.fixture
def hosts(built, tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """A copy of the module's hosts: (origin, first, second); this process's writes on the pinned day."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    origin, (first, second) = S.copy_hosts(*built, tmp_path)
    return origin, first, second


def mode(root: Path, rev: str = "HEAD", rel: str = TOOL) -> str:
    return git(root, "ls-tree", rev, "--", rel).split(" ", 1)[0]


def chmod_x(path: Path, executable: bool) -> None:
    bits = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    now = path.stat().st_mode
    os.chmod(path, now | bits if executable else now & ~bits)


def clean(root: Path) -> bool:
    return git(root, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_hand_chmod_is_committed_as_made_outside_fsmem_and_synced_through_a_merge_of_that_file(hosts):
    origin, first, second = hosts
    chmod_x(first / TOOL, True)
    Memory(second, agent="w1").edit(TOOL, old="- run: with care", new="- run: with great care")
    assert sync(second).returncode == 0
    out = sync(first)
    assert out.returncode == 0, out.stderr
    merged = TOOL_TEXT.replace("with care", "with great care")
    assert (first / TOOL).read_text() == merged and os.access(first / TOOL, os.X_OK)
    assert mode(first) == mode(origin, "main") == "100755"
    assert clean(first)
    assert f"outside fsmem: {TOOL}" in git(first, "log", "--format=%s", "--", TOOL).splitlines()
    assert sync(second).returncode == 0
    assert (second / TOOL).read_text() == merged and os.access(second / TOOL, os.X_OK) and clean(second)


def test_a_hand_chmod_then_an_fsmem_write_of_that_file_keeps_both(hosts):
    """The write keeps the file's mode on disk; its commit holds the agent's bytes, the sync then the mode."""
    origin, first, second = hosts
    chmod_x(first / TOOL, True)
    Memory(first, agent="w1").edit(TOOL, old="- run: with care", new="- run: never")
    assert os.access(first / TOOL, os.X_OK)
    assert sync(first).returncode == 0
    assert mode(first) == mode(origin, "main") == "100755" and clean(first)
    log = [line.split(" ", 1) for line in git(first, "log", "-2", "--format=%H %s", "--", TOOL).splitlines()]
    assert [subject for _, subject in log] == [f"outside fsmem: {TOOL}", f"edit {TOOL}"]
    assert mode(first, log[1][0]) == "100644"  # the agent's commit holds its bytes, not the hand's mode
    assert sync(second).returncode == 0
    assert (second / TOOL).read_text() == TOOL_TEXT.replace("with care", "never") and os.access(second / TOOL, os.X_OK)


@pytest.mark.parametrize("chmodded", ["first", "second"])
def test_both_hosts_change_the_file_and_one_its_mode_too_and_both_are_kept(hosts, chmodded):
    """A merge of the file's bytes, both sides changed: the lines of both, the mode of the side that changed it."""
    origin, first, second = hosts
    chmod_x((first if chmodded == "first" else second) / TOOL, True)
    Memory(first, agent="w1").edit(TOOL, old="- run: with care", new="- run: by the first")
    Memory(second, agent="w1").edit(TOOL, old="- owner: ops", new="- owner: the second")
    assert sync(second).returncode == 0
    out = sync(first)
    assert out.returncode == 0, out.stderr
    assert sync(second).returncode == 0
    merged = TOOL_TEXT.replace("with care", "by the first").replace("ops", "the second")
    for root in (first, second):
        assert (root / TOOL).read_text() == merged and os.access(root / TOOL, os.X_OK)
        assert mode(root) == "100755" and clean(root)
    assert mode(origin, "main") == "100755"


def test_a_hand_chmod_minus_x_is_committed_too(hosts):
    origin, first, second = hosts
    chmod_x(first / TOOL, True)
    assert sync(first).returncode == 0 and mode(origin, "main") == "100755"
    assert sync(second).returncode == 0 and os.access(second / TOOL, os.X_OK)
    chmod_x(second / TOOL, False)
    Memory(first, agent="w1").edit(TOOL, old="- run: with care", new="- run: again")
    assert sync(first).returncode == 0
    out = sync(second)
    assert out.returncode == 0, out.stderr
    assert mode(second) == mode(origin, "main") == "100644" and clean(second)
    assert not os.access(second / TOOL, os.X_OK)
    assert (second / TOOL).read_text() == TOOL_TEXT.replace("with care", "again")


def test_a_memory_on_a_file_system_without_modes_commits_none(hosts):
    """`core.fileMode false` (git's answer on a file system that keeps no executable bit): an executable bit on
    disk is not a change, and the mode history holds stays."""
    origin, first, _ = hosts
    git(first, "config", "core.fileMode", "false")
    chmod_x(first / TOOL, True)
    Memory(first, agent="w1").edit(TOOL, old="- run: with care", new="- run: anyhow")
    (first / "topics/new.md").write_text("# New\n")
    chmod_x(first / "topics/new.md", True)
    assert sync(first).returncode == 0
    assert mode(first) == mode(origin, "main") == "100644"
    assert mode(first, rel="topics/new.md") == "100644"
