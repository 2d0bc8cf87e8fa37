"""Hostile sizes and kinds of file: what the memory's own files and its `.git/` may hold when they came in an
untrusted copy, or grew there.

No file in the memory, whatever its kind or size, may make a command hang or fail for the other files, and no
`.git/` entry may make a git call fsmem makes wait for ever. The commands run as real subprocesses under a
timeout, so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st
from test_hostile import FSMEM, NOW, cli

from fsmem import Memory

BILLING = "---\ntitle: Billing\ntype: semantic\n---\n# Billing\n- proration: daily\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "billing.md").write_text(BILLING)
    return memory.root


def test_a_row_count_past_the_limit_in_the_cache_is_a_rebuild(root: Path) -> None:
    """A cache.sqlite whose `search_files.rows` said 2**63 - 1 made `continued_blocks` count that many blocks
    (search ran out of time and memory); a count past MAX_ROWS is now a damaged index, rebuilt from the files."""
    assert cli(root, "search", "proration").returncode == 0  # the index is made
    with sqlite3.connect(root / ".fsmem" / "cache.sqlite") as conn:
        conn.execute("UPDATE search_files SET rows = 9223372036854775807")
    conn.close()
    done = cli(root, "search", "proration", timeout=20)
    assert done.returncode == 0, done.stderr
    assert "topics/billing.md" in done.stdout


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def history(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write("topics/billing.md", BILLING)
    return memory.root


def _commits(root: Path) -> int:
    return int(_git(root, "rev-list", "--count", "HEAD").strip())


@pytest.mark.parametrize("name", ["HEAD", "index", "refs/heads/planted", "planted-include"])
def test_a_fifo_git_would_read_is_refused_not_waited_on(history: Path, name: str) -> None:
    """A FIFO as `.git/HEAD`, as `.git/index`, as a ref or as a file `[include] path` names made every history
    command wait for ever (git opened it and waited for a writer); history now refuses the repository with a
    clear error (exit 2) before git runs, writes still land on disk, and history works again once it is gone."""
    git_dir = history / ".git"
    before = _commits(history)
    saved = {p: p.read_bytes() for p in (git_dir / "HEAD", git_dir / "index", git_dir / "config")}
    if name == "planted-include":
        with open(git_dir / "config", "a") as config:
            config.write("[include]\n\tpath = planted-include\n")
    fifo = git_dir / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    done = cli(history, "log", timeout=20)
    assert done.returncode == 2 and "FIFO" in done.stderr and "Traceback" not in done.stderr, done.stderr
    wrote = cli(history, "write", "topics/more.md", input="# More\n- kept\n", timeout=20)
    assert wrote.returncode == 0, wrote.stderr
    assert "- kept" in (history / "topics" / "more.md").read_text()
    fifo.unlink()
    for path, data in saved.items():
        path.write_bytes(data)
    assert cli(history, "write", "topics/last.md", input="# Last\n", timeout=20).returncode == 0
    assert _commits(history) > before


def test_a_git_file_naming_another_repository_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A received memory whose `.git` is a file naming another repository of this host (`gitdir: /elsewhere`)
    made fsmem commit its writes into that repository; history now refuses it (exit 2), and the other
    repository is left as it was."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    _git(victim, "-c", "user.name=v", "-c", "user.email=v@v", "commit", "-q", "--allow-empty", "-m", "theirs")
    root = Memory.init(tmp_path / "mem").root
    (root / ".git").write_text(f"gitdir: {victim / '.git'}\n")
    wrote = cli(root, "write", "topics/x.md", input="# X\n- mine\n", timeout=20)
    assert wrote.returncode == 0, wrote.stderr
    done = cli(root, "log", timeout=20)
    assert done.returncode == 2 and "another repository" in done.stderr, done.stderr
    assert _git(victim, "log", "--format=%s").split() == ["theirs"]
    assert _git(victim, "status", "--porcelain") == ""


def test_a_linked_work_tree_keeps_its_history(history: Path, tmp_path: Path) -> None:
    """A `.git` file of `git worktree add` names a git dir that names it back: history works there."""
    linked = tmp_path / "linked"
    _git(history, "worktree", "add", "-q", str(linked))
    assert cli(linked, "write", "topics/w.md", input="# W\n", timeout=20).returncode == 0
    done = cli(linked, "log", timeout=20)
    assert done.returncode == 0 and "topics/w.md" in done.stdout, done.stderr


def test_core_worktree_elsewhere_does_not_move_the_work_tree(history: Path, tmp_path: Path) -> None:
    """`core.worktree` in a received `.git/config` pointed git's work tree elsewhere: history was lost (no work
    tree) or read another folder; fsmem's git now works in the folder of the `.git`."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _git(history, "config", "core.worktree", str(elsewhere))
    assert cli(history, "write", "topics/w.md", input="# W\n", timeout=20).returncode == 0
    done = cli(history, "log", timeout=20)
    assert done.returncode == 0 and "topics/w.md" in done.stdout, done.stderr
    assert list(elsewhere.iterdir()) == []


def test_git_variables_of_the_caller_do_not_redirect_history(history: Path, tmp_path: Path) -> None:
    """GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_COUNT pairs inherited from a calling hook point at another
    repository: fsmem's git acts on the memory's own repository only."""
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    env = {**without_fsmem(), "FSMEM_NOW": NOW, "GIT_DIR": str(victim / ".git"), "GIT_WORK_TREE": str(victim)}
    env.update(GIT_INDEX_FILE=str(victim / ".git" / "index"), GIT_CONFIG_COUNT="1")
    env.update(GIT_CONFIG_KEY_0="core.hooksPath", GIT_CONFIG_VALUE_0=str(tmp_path))
    for args, data in ((("write", "topics/w.md"), "# W\n"), (("log",), None), (("config", "--local"), None)):
        done = subprocess.run(
            [FSMEM, "--root", str(history), *args], input=data, capture_output=True, text=True, env=env, timeout=20
        )
        assert done.returncode == 0, (args, done.stderr)
    assert "topics/w.md" in done.stdout or _git(history, "log", "--format=%s").count("topics/w.md")
    assert not (victim / ".git" / "index").exists()
    assert subprocess.run(["git", "-C", str(victim), "rev-parse", "HEAD"], capture_output=True).returncode != 0


def _sparse(path: Path, size: int = 4 << 30) -> None:
    """A file of `size` bytes that takes no disk (`truncate -s 4G`): zeros, one line."""
    with open(path, "wb") as handle:
        handle.truncate(size)


def test_a_huge_sparse_file_is_left_out_of_history_and_kept_on_disk(history: Path) -> None:
    """A sparse 4 GB file in the memory made `consolidate` read it whole to commit it (64 s, 4.2 GB of memory, a
    4 GB blob in history); history now leaves out a file over LEFT_OUT_LIMIT, commits the rest, and the file
    stays on disk untouched."""
    big = history / "topics" / "huge.md"
    _sparse(big)
    (history / "topics" / "small.md").write_text("# Small\n- kept in history\n")
    done = cli(history, "consolidate", timeout=20)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    tracked = _git(history, "ls-tree", "-r", "--name-only", "HEAD", "topics/")
    assert "topics/small.md" in tracked and "topics/huge.md" not in tracked
    assert big.stat().st_size == 4 << 30
    checked = cli(history, "check", timeout=20)
    assert "topics/huge.md:1: too large" in checked.stdout and "left out of grep, search and history" in checked.stdout


def test_a_huge_sparse_file_leaves_grep_and_read_to_answer(root: Path) -> None:
    """The same file made `fsmem grep` fail for the whole memory (rg held its 4 GB line, stopped at the 10 s
    limit) and `fsmem read` take 18 s (the whole line read to count its length); grep now answers for the other
    files and names it, and read reads no file past its first LEFT_OUT_LIMIT bytes."""
    _sparse(root / "topics" / "huge.md")
    assert cli(root, "ls", timeout=20).returncode == 0  # the catalog sees it (grep names what its last walk saw)
    done = cli(root, "grep", "proration", timeout=8)
    assert done.returncode == 0 and "topics/billing.md" in done.stdout, done.stderr
    assert "not searched: 1 file(s) over 67,108,864 bytes, too large: topics/huge.md" in done.stdout
    named = cli(root, "grep", "proration", "topics/huge.md", timeout=8)
    assert named.returncode == 1 and "too large: topics/huge.md" in named.stdout, named.stderr
    read = cli(root, "read", "topics/huge.md", timeout=8)
    assert read.returncode == 0 and "lines 1-1 shown" in read.stdout, read.stderr
    searched = cli(root, "search", "proration", timeout=8)
    assert searched.returncode == 0 and "topics/billing.md" in searched.stdout


def _nest(base: Path, levels: int) -> int:
    """Folders `d/d/d/…` under `base`, as many as the path limit allows up to `levels`; how many were made."""
    made, current = 0, os.fspath(base)
    for _ in range(levels):
        current = os.path.join(current, "d")
        try:
            os.mkdir(current)
        except OSError:  # past PATH_MAX
            break
        made += 1
    return made


def _unnest(base: Path) -> None:
    """Remove `_nest`'s folders a level at a time, by short paths (pytest's rmtree recurses once a folder)."""
    top, lifted = base / "d", base / "lifted"
    while top.exists():
        if (top / "d").exists():
            os.rename(top / "d", lifted)
        os.rmdir(top)
        if lifted.exists():
            os.rename(lifted, top)


def test_folders_nested_past_the_path_limit_leave_grep_and_consolidate_to_answer(history: Path) -> None:
    """2,000 nested folders (a path past PATH_MAX below them) made `fsmem grep` fail for the whole memory (rg:
    'File name too long') and `fsmem consolidate` end in a RecursionError (os.walk recurses once a folder):
    exit 2 for both. rg now goes no deeper than MAX_DEPTH, passes over a name too long, and consolidate's walks
    stop at MAX_DEPTH."""
    assert _nest(history / "topics", 4000) > 1000
    try:
        done = cli(history, "grep", "proration", timeout=20)
        assert done.returncode == 0 and "topics/billing.md" in done.stdout, done.stderr
        done = cli(history, "consolidate", timeout=30)
        assert done.returncode in (0, 1) and "nested too deeply" not in done.stderr, done.stderr
        for args in (("ls",), ("check",), ("search", "proration")):
            assert cli(history, *args, timeout=20).returncode in (0, 1)
    finally:
        _unnest(history / "topics")


def test_a_folder_nested_past_the_path_limit_is_refused_by_rm_mv_and_the_memory_tool(root: Path) -> None:
    """`fsmem rm`/`mv` of a folder of 2,000 nested folders said only 'nested too deeply', and the memory tool's
    delete, rename and clear raised a bare RecursionError (os.walk); each is now a clear refusal (clear leaves
    the folder, which holds no memory file), and the memory files are kept."""
    from fsmem.agents.memory_tool import MemoryTool, MemoryToolError

    deep = root / "topics" / "deep"
    deep.mkdir()
    assert _nest(deep, 4000) > 1000
    try:
        for args in (("rm", "topics/deep"), ("mv", "topics/deep", "topics/moved")):
            done = cli(root, *args, timeout=20)
            assert done.returncode == 2 and "more than 64 deep" in done.stderr, done.stderr
        tool = MemoryTool(memory_root=root)
        for call in (
            lambda: tool.delete("/memories/topics/deep"),
            lambda: tool.rename("/memories/topics/deep", "/memories/x"),
        ):
            with pytest.raises(MemoryToolError, match="more than 64 deep"):
                call()
        assert (root / "topics" / "billing.md").read_text() == BILLING
        assert tool.clear_all_memory() == "All memory cleared"
        assert (deep / "d").is_dir()
    finally:
        _unnest(deep)


KINDS = (
    "fifo",
    "socket",
    "dangling link",
    "link loop",
    "link to /dev/zero",
    "folder",
    "sparse past the limit",
    "NUL bytes",
    "nested 100 deep",
)
PLACES = ("topics/x.md", "sessions/2026-11-30-x.md", "entities/person/x.md", "x.md", "topics/" + "n" * 252 + ".md")
EXAMPLES = 3 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


def _put(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(os.fspath(path.parent / "s"))  # left behind when closed: a socket file no one listens on
        os.rename(path.parent / "s", path)  # bound by a short name: a long path is past AF_UNIX's 108 bytes
    elif kind == "dangling link":
        os.symlink("nowhere.md", path)
    elif kind == "link loop":
        os.symlink(path.name, path)
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "sparse past the limit":
        _sparse(path, (64 << 20) + 1)
    elif kind == "NUL bytes":
        path.write_bytes(b"# x\n\0\0other\0\n" * 100)
    else:
        path.mkdir()
        _nest(path, 100)
        (path / ("d/" * 99) / "x.md").write_text("# deep\n- proration: hidden\n")


def _kind_of(path: Path) -> int:
    return os.lstat(path).st_mode & 0o170000


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(planted=st.dictionaries(st.sampled_from(PLACES), st.sampled_from(KINDS), min_size=1, max_size=3))
def test_no_file_of_any_kind_or_size_stops_the_answers_for_the_others(tmp_path_factory, monkeypatch, planted) -> None:
    """Whatever the memory holds beside its notes (a FIFO, a socket, links that go nowhere, loop or lead to a
    device, a folder named like a note, a sparse file past LEFT_OUT_LIMIT, NUL bytes, folders nested deep), every
    read command answers for the other files within its time limit, consolidation commits, and each planted
    entry is still there, of the same kind."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = Memory.init(tmp_path_factory.mktemp("kinds") / "mem", git=True).root
    Memory(root).write("topics/billing.md", BILLING)
    for place, kind in planted.items():
        _put(root / place, kind)
    kinds = {place: _kind_of(root / place) for place in planted}
    for args, shown in (
        (("ls",), "topics/billing.md"),
        (("grep", "proration"), "topics/billing.md"),
        (("search", "proration"), "topics/billing.md"),
        (("read", "topics/billing.md"), "proration: daily"),
        (("check",), ""),
        (("consolidate",), ""),
        (("log",), ""),
    ):
        done = cli(root, *args, timeout=20)
        fine = (0, 1, 3) if args == ("consolidate",) else (0, 1)  # 3: a note skipped (named), the rest consolidated
        assert done.returncode in fine and shown in done.stdout, (args, planted, done.stderr)
        assert "Traceback" not in done.stderr
    assert {place: _kind_of(root / place) for place in planted} == kinds


def test_a_fifo_as_a_loose_object_is_refused_not_waited_on(history: Path) -> None:
    """A FIFO in place of HEAD's loose commit object made `git cat-file` wait for ever (`fsmem log` hung);
    history now refuses the repository (exit 2) naming the object, and works again once it is put back."""
    head = _git(history, "rev-parse", "HEAD").strip()
    loose = history / ".git" / "objects" / head[:2] / head[2:]
    saved = loose.read_bytes()
    loose.unlink()
    os.mkfifo(loose)
    done = cli(history, "log", timeout=20)
    assert done.returncode == 2 and head[2:] in done.stderr and "FIFO" in done.stderr, done.stderr
    loose.unlink()
    loose.write_bytes(saved)
    assert cli(history, "log", timeout=20).returncode == 0


def test_a_git_link_to_another_repository_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A received memory whose `.git` is a link to another repository of this host made fsmem commit its writes
    there (the other repository's branch moved to a tree of the memory's files); history now refuses it."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    _git(victim, "-c", "user.name=v", "-c", "user.email=v@v", "commit", "-q", "--allow-empty", "-m", "theirs")
    root = Memory.init(tmp_path / "mem").root
    (root / ".git").symlink_to(victim / ".git")
    assert cli(root, "write", "topics/x.md", input="# X\n", timeout=20).returncode == 0
    done = cli(root, "log", timeout=20)
    assert done.returncode == 2 and "another folder's repository" in done.stderr, done.stderr
    assert _git(victim, "log", "--format=%s").split() == ["theirs"]


def test_a_commondir_naming_another_repository_is_refused(history: Path, tmp_path: Path) -> None:
    """A `.git/commondir` naming another repository of this host made git keep refs and objects there: fsmem
    created a branch of the memory's commits in it. history now refuses it (a linked work tree's still works,
    test_a_linked_work_tree_keeps_its_history)."""
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", "--initial-branch=theirs", str(victim)], check=True)
    (history / ".git" / "commondir").write_text(f"{victim / '.git'}\n")
    assert cli(history, "write", "topics/x.md", input="# X\n", timeout=20).returncode == 0
    done = cli(history, "log", timeout=20)
    assert done.returncode == 2 and "commondir" in done.stderr, done.stderr
    assert _git(victim, "for-each-ref", "--format=%(refname)") == ""


def test_a_sparse_git_file_is_refused_not_read_whole(history: Path) -> None:
    """A sparse 4 GB `.git/packed-refs` made git read 4 GB of zeros on each call: `fsmem log` took 2.8 s of CPU
    to say `[0 commits]` of a memory with commits; history now refuses the repository (exit 2) before git runs."""
    _sparse(history / ".git" / "packed-refs")
    _sparse(history / ".git" / "index")
    done = cli(history, "log", timeout=20)
    assert done.returncode == 2 and "sparse" in done.stderr, done.stderr


@pytest.mark.parametrize("planted", ["object", "alternates of the alternate"])
def test_a_fifo_in_an_alternate_object_folder_is_refused_not_waited_on(history: Path, tmp_path: Path, planted) -> None:
    """`.git/objects/info/alternates` naming a folder outside the memory whose object for HEAD's commit is a FIFO
    (or whose own `info/alternates` is one) made `git cat-file` wait for ever: `fsmem log` hung. history now
    checks the alternate folders as it checks `objects/` (exit 2, naming the FIFO), and works once it is gone."""
    head = _git(history, "rev-parse", "HEAD").strip()
    loose = history / ".git" / "objects" / head[:2] / head[2:]
    saved = loose.read_bytes()
    alternate = tmp_path / "elsewhere" / "objects"
    (alternate / head[:2]).mkdir(parents=True)
    (alternate / "info").mkdir()
    fifo = alternate / head[:2] / head[2:] if planted == "object" else alternate / "info" / "alternates"
    if planted == "object":
        loose.unlink()  # git finds the commit only in the alternate
    else:
        (alternate / head[:2] / head[2:]).write_bytes(saved)
    os.mkfifo(fifo)
    (history / ".git" / "objects" / "info" / "alternates").write_text(f"# shared\n{alternate}\n")
    done = cli(history, "log", timeout=20)
    assert done.returncode == 2 and os.fspath(fifo) in done.stderr and "FIFO" in done.stderr, done.stderr
    fifo.unlink()
    if not loose.exists():
        loose.write_bytes(saved)
    assert cli(history, "log", timeout=20).returncode == 0


def test_a_file_that_grows_past_the_limit_after_it_was_measured_is_left_out(history: Path, monkeypatch) -> None:
    """A memory file that grew past LEFT_OUT_LIMIT between `too_large`'s look and `on_disk`'s read (a person's
    editor, another process) was read whole and committed (a 256 MiB blob in history); `on_disk` now reads at
    most LEFT_OUT_LIMIT + 1 bytes and leaves the file out as the size check would have, the rest committed."""
    from fsmem.history import repo as repo_module, worktree
    from fsmem.store.meta import LEFT_OUT_LIMIT

    grows = history / "topics" / "grows.md"
    grows.write_text("# Grows\n")
    (history / "topics" / "small.md").write_text("# Small\n")
    measured = worktree.too_large

    def then_grow(repo, path: str) -> bool:
        answer = measured(repo, path)
        if path.endswith("grows.md"):
            _sparse(grows, 4 * LEFT_OUT_LIMIT)  # after the look, before the read
        return answer

    monkeypatch.setattr(worktree, "too_large", then_grow)
    repo = repo_module.discover(history, "test-host")
    assert repo is not None
    worktree.commit_files(repo, ["topics/grows.md", "topics/small.md"], ("t", "t@t"), "outside fsmem")
    tracked = _git(history, "ls-tree", "-r", "--name-only", "HEAD", "topics/")
    assert "topics/small.md" in tracked and "topics/grows.md" not in tracked
    assert "left out (over 67,108,864 bytes" in _git(history, "log", "-1", "--format=%B")
    assert grows.stat().st_size == 4 * LEFT_OUT_LIMIT


def test_a_seen_file_of_expanding_ligatures_leaves_recall_bounded(root: Path, tmp_path: Path) -> None:
    """recall puts what the agent has seen in NFKC, where U+FDFA is 18 characters: 16 MB of it (the --seen-file
    limit) became 99 million characters split into 22 million words, 3.1 GB of memory and 17 s of CPU (an ASCII
    file of the same size: 0.6 GB, 1.3 s). The comparison is now made on one string, no longer than the seen
    text as given, so the command answers within the test's memory limit."""
    seen = tmp_path / "seen.txt"
    seen.write_text("\ufdfa" * (16 * 1024 * 1024 // 3 - 16))
    done = cli(root, "recall", "proration schedule", "--seen-file", str(seen), timeout=60)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    assert "topics/billing.md" in done.stdout
