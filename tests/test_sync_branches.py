"""One memory however the remote was made (issue #18, finding 8): a plain `git init --bare` remote names `master`
in its HEAD whatever the first host pushed; clones of it take the branch there is, a history unrelated to the
remote's is refused naming both, and nothing ever pushes a second branch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S

from fsmem import Memory

NOW = "2026-12-01T08:00:00+00:00"


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    """This process's writes on the day its syncs run on (a note dated after the sync's day waits for a later
    consolidation), and no test reads today's date (tests/conftest.py)."""
    monkeypatch.setenv("FSMEM_NOW", NOW)


def git(root: Path, *args: str) -> str:
    return S.git(*args, cwd=root)


def fsmem(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` through the CLI's entry point and its one error boundary, in this process
    (tests/cli_runner.py), on a pinned clock: what is tested is which branch sync takes, not the process."""
    code, out, err = cli_runner.fsmem_here(root, *args, now=NOW)
    if check and code:
        raise AssertionError(f"fsmem {' '.join(args)}: exit {code}: {err}")
    return subprocess.CompletedProcess(["fsmem", "--root", str(root), *args], code, out, err)


def branches(origin: Path) -> list[str]:
    return git(origin, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split()


def bare(path: Path, default: str | None) -> Path:
    """A bare remote as `git init --bare` makes it: `-b main`, or git's default (`master` here)."""
    args = ["-c", "init.defaultBranch=master", "init", "-q", "--bare"] + (["-b", default] if default else [])
    S.git(*args, str(path))
    return path


def first_host(base: Path, origin: Path) -> Path:
    root = base / "first"
    fsmem(root, "init", "--git", str(root))
    git(root, "remote", "add", "origin", str(origin))
    fsmem(root, "sync")
    return root


def readme_clone(origin: Path, root: Path) -> tuple[str, str]:
    """The README's clone line: git clone, fsmem sync --setup, fsmem sync (each must succeed)."""
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(origin), str(root))
    setup = fsmem(root, "sync", "--setup").stdout
    return setup, fsmem(root, "sync").stdout


@pytest.mark.parametrize("default", ["main", None], ids=["init-bare-b-main", "init-bare-default-master"])
def test_a_second_host_joins_the_first_one_whatever_the_bare_remote_names(tmp_path, default):
    origin = bare(tmp_path / "origin.git", default)
    first = first_host(tmp_path, origin)
    second = tmp_path / "second"
    setup, synced = readme_clone(origin, second)
    if default is None:  # the clone was empty: it says what it found and takes main
        assert setup.splitlines()[0] == (
            "this clone had no commit: took origin/main as its branch "
            "(origin's HEAD names none of its branches; main is the one branch it holds)"
        )
    assert git(second, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert synced.splitlines()[0].startswith("origin/main: ")
    Memory(first, agent="researcher").note("- city: Oslo", subject="people/Ann Lee")
    Memory(second).note("- role: cfo", subject="people/Ann Lee")
    for root in (first, second, first):
        assert "origin/main: " in fsmem(root, "sync").stdout
    assert branches(origin) == ["main"]
    heads = {git(root, "rev-parse", "HEAD") for root in (first, second)}
    assert heads == {git(origin, "rev-parse", "main")}
    for root in (first, second):
        document = (root / "entities/people/ann-lee.md").read_text()
        assert "- city: Oslo (" in document and "- role: cfo (" in document
        assert git(root, "status", "--porcelain") == ""
    assert git(second, "config", "branch.main.merge").strip() == "refs/heads/main"
    assert git(second, "config", "--get-regexp", "^branch\\.").count("branch.") == 2  # no leftover master


def test_a_history_unrelated_to_the_remotes_is_refused_naming_both_and_nothing_is_pushed(tmp_path):
    origin = bare(tmp_path / "origin.git", None)
    first_host(tmp_path, origin)
    before = git(origin, "rev-parse", "main")
    other = tmp_path / "other"
    fsmem(other, "init", "--git", str(other))  # a memory of its own, then pointed at the team's remote
    git(other, "branch", "-m", "master")
    git(other, "remote", "add", "origin", str(origin))
    out = fsmem(other, "sync", check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    message = out.stderr.strip()
    assert message.startswith("fsmem: error: master here (1 commit(s), the last ")
    assert "and origin/main (2 commit(s), the last " in message and "share no history" in message
    assert "nothing was merged or pushed" in message
    assert f"git -C {other} branch master-unrelated && git -C {other} checkout -B main origin/main" in message
    assert branches(origin) == ["main"] and git(origin, "rev-parse", "main") == before
    # the remedy it names works: this clone then syncs with origin/main, its own commits kept on master-unrelated
    git(other, "branch", "master-unrelated")
    git(other, "checkout", "-q", "-B", "main", "origin/main")
    assert fsmem(other, "sync").stdout.startswith("origin/main: ")
    assert branches(origin) == ["main"]


def test_a_remote_whose_history_was_replaced_is_refused_the_same_way(tmp_path):
    origin = bare(tmp_path / "origin.git", "main")
    first = first_host(tmp_path, origin)
    replaced = tmp_path / "replaced"
    fsmem(replaced, "init", "--git", str(replaced))
    git(replaced, "push", "-q", "--force", str(origin), "main:main")  # someone re-created the remote's branch
    out = fsmem(first, "sync", check=False)
    assert out.returncode == 2 and "main here (" in out.stderr and "and origin/main (" in out.stderr
    assert "share no history; nothing was merged or pushed" in out.stderr
    assert git(origin, "rev-parse", "main") == git(replaced, "rev-parse", "main")


def test_setup_on_an_empty_clone_of_a_remote_with_several_branches_and_no_head_says_which_to_choose(tmp_path):
    origin = bare(tmp_path / "origin.git", None)
    first = first_host(tmp_path, origin)
    git(first, "push", "-q", "origin", "main:draft")
    clone = tmp_path / "clone"
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(origin), str(clone))
    out = fsmem(clone, "sync", "--setup", check=False)
    assert out.returncode == 2
    assert "origin holds several branches (draft, main), none named master" in out.stderr
    assert f"git -C {clone} fetch origin BRANCH && git -C {clone} branch --set-upstream-to=origin/BRANCH" in out.stderr
    assert sorted(p.name for p in clone.iterdir()) == [".git"]  # nothing was written
    assert branches(origin) == ["draft", "main"]


def test_setup_on_an_empty_clone_of_an_empty_remote_says_the_first_sync_pushes(tmp_path):
    origin = bare(tmp_path / "origin.git", None)
    clone = tmp_path / "clone"
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(origin), str(clone))
    fsmem(clone, "init", "--git", str(clone))  # an fsmem memory in the empty clone (init commits it)
    assert fsmem(clone, "sync").stdout.startswith("origin/master: ")
    assert branches(origin) == ["master"]
    empty = tmp_path / "empty"
    S.git("-c", "init.defaultBranch=master", "init", "-q", "--bare", str(tmp_path / "none.git"))
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(tmp_path / "none.git"), str(empty))
    (empty / "fsmem.yaml").write_text("budgets:\n  default:\n    max_tokens: 2000\n")
    out = fsmem(empty, "sync", "--setup").stdout
    assert out.splitlines()[0] == "origin holds no branch yet: the first fsmem sync pushes master"


def _hostile_main(tmp_path: Path, origin: Path) -> Path:
    """The first host's main, then a hostile clone that pushes a link out of the memory and a `.fsmem` link."""
    first_host(tmp_path, origin)
    hostile = tmp_path / "hostile"
    S.git("clone", "-q", "-b", "main", str(origin), str(hostile))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("PRIVATE-KEY-MATERIAL\n")
    (hostile / "topics").mkdir(exist_ok=True)
    (hostile / "topics" / "leak.md").symlink_to(outside / "secret.txt")
    (hostile / ".fsmem").symlink_to(outside)
    git(hostile, "add", "-A", "-f")
    S.git("-c", "user.name=mallory", "-c", "user.email=m@example.com", "commit", "-q", "-m", "innocent", cwd=hostile)
    git(hostile, "push", "-q", "origin", "HEAD:main")
    return outside


def test_an_empty_clone_adopts_the_remotes_branch_only_through_the_trust_boundary(tmp_path):
    """A clone with no commit takes the remote's branch by checking it out: what that brings is judged first."""
    origin = bare(tmp_path / "origin.git", None)
    outside = _hostile_main(tmp_path, origin)
    empty = tmp_path / "empty"
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(origin), str(empty))
    shutil.copy(tmp_path / "first" / "fsmem.yaml", empty / "fsmem.yaml")  # a memory, but no commit yet
    refused = fsmem(empty, "sync", check=False)
    assert refused.returncode == 2 and "is refused" in refused.stderr and "fsmem sync --repair" in refused.stderr
    assert not (empty / "topics" / "leak.md").exists() and not (empty / ".fsmem").is_symlink()
    head = subprocess.run(["git", "rev-parse", "-q", "--verify", "HEAD"], cwd=empty, capture_output=True, env=S.env())
    assert head.returncode != 0  # nothing checked out
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_setup_of_an_empty_clone_repairs_what_the_remotes_branch_brings_and_says_so(tmp_path):
    origin = bare(tmp_path / "origin.git", None)
    outside = _hostile_main(tmp_path, origin)
    fresh = tmp_path / "fresh"
    S.git("-c", "init.defaultBranch=master", "clone", "-q", str(origin), str(fresh))
    setup = fsmem(fresh, "sync", "--setup").stdout
    assert setup.splitlines()[0].startswith("this clone had no commit: took origin/main as its branch")
    assert "topics/leak.md" in setup and ".fsmem" in setup
    assert not (fresh / "topics" / "leak.md").is_symlink() and not (fresh / ".fsmem").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    fsmem(fresh, "ls")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]  # no state written through a link
