import os
import re

import pytest
from conftest import write_file

from fsmem import Memory
from fsmem.errors import InvalidArgument, NotFound, PathEscape, RootNotFound


def test_ls_lists_every_memory_file_with_its_metadata(demo_memory):
    listing = demo_memory.ls()
    paths = [e.path for e in listing.entries]
    assert "entities/people/adam-smith.md" in paths and "topics/billing.md" in paths
    assert "fsmem.yaml" not in paths
    assert listing.total == len(paths) == 12 and listing.left_out == 0
    adam = next(e for e in listing.entries if e.path == "entities/people/adam-smith.md")
    assert adam.title == "Adam Smith"
    assert adam.type == "semantic"
    assert adam.updated == "2026-10-28T16:20:00+00:00"
    assert adam.description.startswith("Customer-side finance lead")
    assert adam.tokens == demo_memory.tokens.count((demo_memory.root / adam.path).read_text())


def test_ls_ignores_state_and_hidden_folders(demo_memory):
    write_file(demo_memory.root, ".fsmem/cache/x.md", "state")
    write_file(demo_memory.root, ".git/notes.md", "vcs")
    write_file(demo_memory.root, "topics/.draft.md.swp", "swap")
    assert all(not e.path.startswith(".") for e in demo_memory.ls().entries)


def test_ls_filters_by_path_depth_type_tag_and_date(demo_memory):
    assert [e.path for e in demo_memory.ls("entities/people").entries] == [
        "entities/people/adam-smith.md",
        "entities/people/maria-lopez.md",
    ]
    assert demo_memory.ls("entities", depth=1).total == 0
    assert demo_memory.ls("entities", depth=2).total == 4
    assert {e.path for e in demo_memory.ls(type="procedural").entries} == {
        "README.md",
        "profile/identity.md",
        "profile/team.md",
        "topics/deployments.md",
    }
    assert [e.path for e in demo_memory.ls(tag=["billing", "migration"]).entries] == ["entities/projects/atlas.md"]
    recent = [e.path for e in demo_memory.ls(updated_after="2026-11-01T10:00:00+00:00").entries]
    assert recent == [
        "entities/projects/atlas.md",
        "sessions/2026/11/02/support-0102.md",
        "sessions/2026/11/20/support-0140.md",
        "topics/billing.md",
    ]


def test_ls_caps_rows_and_says_how_many_were_left_out(demo_memory):
    listing = demo_memory.ls(max_results=3)
    assert len(listing.entries) == 3 and listing.left_out == 9 and listing.truncated
    assert "files 1-3 of 12; 9 left out by the result limit. Continue with offset=3" in listing.to_text()


def test_ls_caps_tokens(demo_memory):
    listing = demo_memory.ls(max_tokens=60)
    assert 0 < len(listing.entries) < 12
    assert listing.tokens <= 60
    assert listing.left_out == 12 - len(listing.entries)


def test_ls_cannot_exceed_the_agent_budget(demo_memory):
    reviewer = Memory(demo_memory.root, agent="reviewer")  # max_results: 20 in the template
    assert reviewer.budget.max_results == 20
    assert len(reviewer.ls(max_results=500).entries) == 12
    assert reviewer.budget.narrowed(max_results=500).max_results == 20


def test_ls_bad_arguments(demo_memory):
    with pytest.raises(InvalidArgument):
        demo_memory.ls(depth=0)
    with pytest.raises(InvalidArgument):
        demo_memory.ls(updated_after="last week")
    with pytest.raises(NotFound):
        demo_memory.ls("nowhere")
    with pytest.raises(PathEscape):
        demo_memory.ls("../")


def test_broken_files_are_still_listed(empty_memory):
    write_file(empty_memory.root, "topics/broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    write_file(empty_memory.root, "topics/plain.md", "no front matter at all\n")
    (empty_memory.root / "topics" / "latin1.md").write_bytes(b"caf\xe9\r\n")
    paths = {e.path for e in empty_memory.ls("topics").entries}
    assert paths == {"topics/broken.md", "topics/plain.md", "topics/latin1.md"}


def test_root_discovery(tmp_path, monkeypatch):
    memory = Memory.init(tmp_path / "m")
    (memory.root / "topics").mkdir()
    monkeypatch.chdir(memory.root / "topics")
    assert Memory().root == memory.root.resolve()
    monkeypatch.setenv("FSMEM_ROOT", str(memory.root))
    monkeypatch.chdir(tmp_path)
    assert Memory().root == memory.root.resolve()
    monkeypatch.delenv("FSMEM_ROOT")
    with pytest.raises(RootNotFound, match=re.escape('Create one with Memory.init(directory="DIR"), or point')):
        Memory()


def test_init_refuses_an_existing_memory_and_adds_to_a_folder_in_use(tmp_path):
    memory = Memory.init(tmp_path / "m")
    before = (memory.root / "fsmem.yaml").read_bytes()
    with pytest.raises(Exception, match="already holds a memory"):
        Memory.init(memory.root)
    assert (memory.root / "fsmem.yaml").read_bytes() == before
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x.txt").write_text("x")
    Memory.init(tmp_path / "busy")  # a folder in use gets what it lacks (tests/test_not_a_memory.py)
    assert (tmp_path / "busy" / "x.txt").read_text() == "x" and (tmp_path / "busy" / "fsmem.yaml").is_file()


def test_symlinked_file_leading_outside_is_not_listed(empty_memory, tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("---\ntitle: SECRET TITLE\n---\n")
    (empty_memory.root / "topics").mkdir()
    os.symlink(secret, empty_memory.root / "topics" / "leak.md")
    os.symlink(empty_memory.root / "README.md", empty_memory.root / "topics" / "alias.md")
    paths = {e.path for e in empty_memory.ls("topics").entries}
    assert paths == {"topics/alias.md"}
    assert empty_memory.grep("SECRET").total == 0
