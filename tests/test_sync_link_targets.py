"""A remote cannot make a file of this host a symbolic link: `fsmem sync` keeps this host's file, byte for byte. A link
the remote alone re-points is taken, as any one-sided change, and one both sides re-pointed keeps this host's target,
so hosts that re-point a link converge on one target and one commit.

Two hosts set up by fsmem and their bare remote (tests/sync_scenario.py), built once per module with a document of
the first host's own (`topics/mine.md`), an identity document and two links; a plain git clone of the remote plays
a host that pushes what git lets it (tests/hostile_remote.py). Each test checks what the first host's sync keeps,
byte for byte, what it says, what the remote then holds, and where the first host's next write lands.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S
from hostile_remote import clone, git, push

from fsmem import Memory

NOW = "2026-12-01T08:00:00+00:00"
MINE = "topics/mine.md"
MINE_BYTES = b"---\ntitle: Mine\n---\n# Mine\n\nWritten on the first host only.\r\n- keep: these bytes\n"
IDENTITY = "profile/identity.md"
IDENTITY_TEXT = "# Identity\n\n- name: the first host's agent\n"
ALIAS = "topics/alias.md"  # -> shared.md on every host
SPARE = "topics/spare.md"  # -> shared.md on every host


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Two hosts of one bare remote, both holding MINE, IDENTITY and the two links (synced), once per module."""
    origin, (first, second) = S.make_hosts(tmp_path_factory.mktemp("hosts"), hosts=2, writers=1)
    (first / "profile").mkdir(exist_ok=True)
    (first / IDENTITY).write_text(IDENTITY_TEXT)
    (first / MINE).write_bytes(MINE_BYTES)
    os.symlink("shared.md", first / ALIAS)
    os.symlink("shared.md", first / SPARE)
    for root in (first, second):
        assert sync(root).returncode == 0
    assert os.readlink(second / ALIAS) == "shared.md" and (second / MINE).read_bytes() == MINE_BYTES
    return origin, [first, second]


@pytest.fixture
def hosts(built, tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """A copy of the module's hosts: (origin, first, second); this process's writes on the pinned day."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    origin, (first, second) = S.copy_hosts(*built, tmp_path)
    return origin, first, second


def sync(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`fsmem sync ARGS` through the CLI's entry point and its one error boundary, in this process."""
    code, out, err = cli_runner.fsmem_here(root, "sync", *args, now=NOW)
    return subprocess.CompletedProcess(["fsmem", "sync", *args], code, out, err)


def relink(root: Path, rel: str, target: str) -> None:
    (root / rel).unlink()
    os.symlink(target, root / rel)


def entry(root: Path, rel: str, rev: str = "HEAD") -> tuple[str, bytes]:
    """(mode, bytes) of `rel` in `rev`: a file's bytes, a link's target."""
    mode = git(root, "ls-tree", rev, "--", rel).split(" ", 1)[0]
    shown = subprocess.run(["git", "cat-file", "blob", f"{rev}:{rel}"], cwd=root, capture_output=True, check=True)
    return mode, shown.stdout


def plain_clone(origin: Path, where: Path) -> Path:
    """A host that pushes with plain git (no fsmem, no rules of its own)."""
    return clone(origin, where, user="other")


def pushed(origin: Path, tmp_path: Path, *links: tuple[str, str]) -> Path:
    """A plain git clone of the remote that made each (path, target) a link of that target and pushed it."""
    other = plain_clone(origin, tmp_path / "plain")
    for rel, target in links:
        relink(other, rel, target)
    push(other)
    return other


def kept_file_line(label: str = "origin/main") -> str:
    return f"kept {MINE} as a file: {label} made it a link to {IDENTITY}"


def kept_as_file(first: Path, origin: Path, mode: str = "100644") -> None:
    """MINE is the first host's file, byte for byte, on its disk, in its HEAD and in the remote's branch."""
    assert entry(first, MINE) == entry(origin, MINE, "main") == (mode, MINE_BYTES)
    assert (first / MINE).read_bytes() == MINE_BYTES and not (first / MINE).is_symlink()


# -- a regular file the remote makes a link -------------------------------------------------------------------
def test_a_file_the_remote_makes_a_link_stays_this_hosts_file_and_the_next_write_lands_on_it(hosts):
    origin, first, second = hosts
    relink(second, MINE, "../profile/identity.md")
    assert sync(second).returncode == 0  # the link committed (made outside fsmem) and pushed
    assert entry(origin, MINE, "main")[0] == "120000"
    out = sync(first, "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert done["merged"] == "fast-forward"
    assert done["boundary"] == [kept_file_line()]
    kept_as_file(first, origin)  # the commit the sync made records the file, and its push sends it
    assert git(first, "status", "--porcelain") == ""
    Memory(first, agent="w1").write(MINE, "# Mine\n\n- rewritten: on the first host\n")
    assert not (first / MINE).is_symlink() and "- rewritten: on the first host" in (first / MINE).read_text()
    assert (first / IDENTITY).read_text() == IDENTITY_TEXT
    assert entry(first, IDENTITY) == ("100644", IDENTITY_TEXT.encode())
    assert sync(first).returncode == 0
    back = sync(second)  # the host that made the link gets the file back: a remote may turn a link into a file
    assert back.returncode == 0, back.stderr
    assert not (second / MINE).is_symlink() and (second / MINE).read_text() == (first / MINE).read_text()
    assert (second / IDENTITY).read_text() == IDENTITY_TEXT
    assert "kept" not in back.stdout
    again = sync(first, "--json")
    assert json.loads(again.stdout)["merged"] == "up to date"


def test_the_text_report_names_the_file_kept_in_one_line(hosts):
    origin, first, second = hosts
    relink(second, MINE, "../profile/identity.md")
    assert sync(second).returncode == 0
    out = sync(first)
    assert out.returncode == 0, out.stderr
    assert [line for line in out.stdout.splitlines() if MINE in line] == [kept_file_line()]


@pytest.mark.parametrize("change", ["another file", "the file itself", "the file and another"])
def test_a_file_the_remote_makes_a_link_while_this_host_writes_is_kept_through_a_merge(hosts, change):
    """A merge rather than a fast-forward: this host committed something too (the file itself or another)."""
    origin, first, second = hosts
    relink(second, MINE, "../profile/identity.md")
    assert sync(second).returncode == 0
    memory = Memory(first, agent="w1")
    if "another" in change:
        memory.write("topics/elsewhere.md", "# Elsewhere\n")
    if "itself" in change:
        memory.write(MINE, "# Mine\n\n- changed: on the first host before the sync\n")
    expected = (first / MINE).read_bytes()
    out = sync(first, "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert done["merged"] == "merged" and done["boundary"] == [kept_file_line()]
    assert done["kept_file"] == [] and done["kept_ours"] == []  # settled before the merge, said once
    assert (first / MINE).read_bytes() == expected and not (first / MINE).is_symlink()
    assert entry(first, MINE) == entry(origin, MINE, "main") == ("100644", expected)
    assert (first / IDENTITY).read_text() == IDENTITY_TEXT
    assert not any("~" in path.name for path in (first / "topics").iterdir())
    assert git(first, "status", "--porcelain", "--untracked-files=all") == ""
    assert sync(second).returncode == 0
    assert (second / MINE).read_bytes() == expected and not (second / MINE).is_symlink()


def test_a_file_the_remote_makes_a_link_to_a_folder_stays_a_file(hosts, tmp_path):
    origin, first, _ = hosts
    pushed(origin, tmp_path, (MINE, "../profile"))
    out = sync(first)
    assert out.returncode == 0, out.stderr
    assert f"kept {MINE} as a file: origin/main made it a link to profile" in out.stdout.splitlines()
    kept_as_file(first, origin)


def test_an_executable_file_keeps_its_mode(hosts, tmp_path):
    origin, first, _ = hosts
    other = plain_clone(origin, tmp_path / "plain")
    git(other, "update-index", "--chmod=+x", "--", MINE)
    git(other, "commit", "-q", "-m", "executable")
    git(other, "push", "-q", "origin", "HEAD:main")
    assert sync(first).returncode == 0 and entry(first, MINE)[0] == "100755"
    relink(other, MINE, "../profile/identity.md")
    push(other)
    out = sync(first)
    assert out.returncode == 0, out.stderr
    assert kept_file_line() in out.stdout.splitlines()
    kept_as_file(first, origin, "100755")
    assert os.access(first / MINE, os.X_OK)


def test_the_repair_of_a_refused_push_keeps_the_file_too(hosts, tmp_path):
    """A push the boundary refuses for another link: `--repair` merges it, and the file stays a file."""
    origin, first, _ = hosts
    other = plain_clone(origin, tmp_path / "plain")
    relink(other, MINE, "../profile/identity.md")
    os.symlink("../../outside/secret.txt", other / "topics/out.md")
    push(other)
    refused = sync(first)
    assert refused.returncode == 2 and "topics/out.md" in refused.stderr and "--repair" in refused.stderr
    repaired = sync(first, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert kept_file_line() in repaired.stdout.splitlines()
    kept_as_file(first, origin)
    assert not (first / "topics/out.md").is_symlink()


def test_a_link_the_boundary_refuses_at_this_hosts_file_is_still_refused(hosts, tmp_path):
    """What the safety rules refuse stays refused (named, exit 2), and the repair keeps this host's document."""
    origin, first, _ = hosts
    pushed(origin, tmp_path, (MINE, "../fsmem.yaml"))
    refused = sync(first)
    assert refused.returncode == 2, refused.stdout
    assert MINE in refused.stderr and "fsmem's or git's own" in refused.stderr
    repaired = sync(first, "--repair")
    assert repaired.returncode == 0, repaired.stderr
    kept_as_file(first, origin)


# -- a link re-pointed ------------------------------------------------------------------------------------------
def no_kept_line(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, out.stderr
    assert not [line for line in out.stdout.splitlines() if line.startswith("kept ")], out.stdout


def test_a_link_the_remote_alone_repoints_is_taken(hosts, tmp_path):
    origin, first, _ = hosts
    pushed(origin, tmp_path, (ALIAS, "../profile/identity.md"))
    out = sync(first, "--json")
    no_kept_line(out)
    done = json.loads(out.stdout)
    assert done["boundary"] == [] and done["merged"] == "fast-forward"
    assert os.readlink(first / ALIAS) == "../profile/identity.md"
    assert entry(first, ALIAS) == entry(origin, ALIAS, "main") == ("120000", b"../profile/identity.md")
    assert git(first, "rev-parse", "HEAD") == git(origin, "rev-parse", "main")  # nothing on top


def test_a_link_repointed_by_hand_on_one_host_reaches_the_other_and_two_rounds_of_syncs_converge(hosts):
    """A person re-points a link on the first host: the second host takes that target (one side changed it), and a
    second round of syncs on both hosts makes no new commit and says nothing kept."""
    origin, first, second = hosts
    relink(first, ALIAS, "../profile/identity.md")
    for root in (first, second):
        no_kept_line(sync(root))
    heads = [git(root, "rev-parse", "HEAD") for root in (first, second, origin)]  # the bare remote's HEAD is main
    assert len(set(heads)) == 1, heads
    for root in (first, second):
        again = sync(root, "--json")
        no_kept_line(again)
        assert json.loads(again.stdout)["merged"] == "up to date"
    assert [git(root, "rev-parse", "HEAD") for root in (first, second, origin)] == heads
    for root in (first, second):
        assert os.readlink(root / ALIAS) == "../profile/identity.md"
        assert entry(root, ALIAS) == ("120000", b"../profile/identity.md")
        assert git(root, "status", "--porcelain") == ""


def test_a_link_both_sides_repointed_keeps_this_hosts_target_and_the_other_host_takes_it(hosts, tmp_path):
    origin, first, _ = hosts
    other = pushed(origin, tmp_path, (ALIAS, "../profile/identity.md"))
    relink(first, ALIAS, "mine.md")
    out = sync(first, "--json")
    no_kept_line(out)
    done = json.loads(out.stdout)
    assert done["boundary"] == [] and done["kept_ours"] == [ALIAS]
    assert os.readlink(first / ALIAS) == "mine.md"
    assert entry(first, ALIAS) == entry(origin, ALIAS, "main") == ("120000", b"mine.md")
    git(other, "pull", "-q", "--no-rebase", "origin", "main")  # the other host takes this host's target
    assert os.readlink(other / ALIAS) == "mine.md"
    assert json.loads(sync(first, "--json").stdout)["merged"] == "up to date"


# -- what a remote may still do -----------------------------------------------------------------------------------
def test_a_remote_may_add_a_link_remove_one_make_one_a_file_and_change_a_file(hosts, tmp_path):
    origin, first, _ = hosts
    other = plain_clone(origin, tmp_path / "plain")
    os.symlink("../profile/identity.md", other / "topics/new.md")  # a path the first host does not have
    (other / SPARE).unlink()  # a link removed
    (other / ALIAS).unlink()
    (other / ALIAS).write_text("# Alias\n\nA file where a link was.\n")  # a link made a file again
    (other / MINE).write_text("# Mine\n\nChanged on the other host.\n")  # a file's text changed
    push(other)
    out = sync(first, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["boundary"] == []
    assert os.readlink(first / "topics/new.md") == "../profile/identity.md"
    assert not os.path.lexists(first / SPARE)
    assert not (first / ALIAS).is_symlink() and (first / ALIAS).read_text() == "# Alias\n\nA file where a link was.\n"
    assert (first / MINE).read_text() == "# Mine\n\nChanged on the other host.\n"
    assert git(first, "rev-parse", "HEAD") == git(origin, "rev-parse", "main")  # a fast-forward: nothing on top
