"""History undo (restore, revert) as a hostile history or file tree would attack it: whatever a commit holds
(a link, `..`, `.fsmem/`, fsmem.yaml, a huge file) and whatever the tree holds now (a link, a folder where a
file was, a folder swapped for a link mid-way), an undo writes only regular memory files beneath the root,
and the bytes it replaces stay in the history."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from test_beneath import digest

from fsmem import Memory
from fsmem.errors import FsmemError, InvalidArgument, PathEscape
from fsmem.history import undo
from fsmem.store.files import Stored

NOW = "2026-11-30T09:15:00+00:00"


def git(root: Path, *args: str, data: bytes | None = None, index: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    done = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, check=True, env=env)
    return done.stdout.decode()


def hostile_commit(root: Path, entries: list[tuple[str, str, bytes]], message: str = "hostile") -> str:
    """A commit on HEAD of HEAD's tree with `entries` (path, mode, bytes) put in, made with git's plumbing as a
    remote could make it (nothing on disk changes); HEAD moves to it."""
    index = root / ".git" / "hostile-index"
    git(root, "read-tree", "HEAD", index=index)
    for path, mode, data in entries:
        oid = git(root, "hash-object", "-w", "--stdin", data=data).strip()
        git(root, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}", index=index)
    tree = git(root, "write-tree", index=index).strip()
    commit = git(root, "commit-tree", tree, "-p", "HEAD", "-m", message).strip()
    git(root, "update-ref", "HEAD", commit)
    index.unlink()
    return commit


def tree_of(folder: Path) -> dict[str, str]:
    """Every entry below `folder` but .git/ and .fsmem/, links as their text, files as their bytes."""
    return digest(folder, skip=(".git", ".fsmem"), hashed=False)


def in_history(root: Path, data: bytes) -> bool:
    """Whether a blob of exactly these bytes is in some commit HEAD reaches."""
    oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return oid in {line.split()[0] for line in git(root, "rev-list", "--objects", "HEAD").splitlines()}


@pytest.fixture
def memory(tmp_path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    return Memory.init(tmp_path / "mem", git=True)


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.md").write_text("# Secret\n")
    return folder


def test_a_version_that_was_a_link_is_never_restored_as_a_file(memory, outside):
    """A commit whose tree holds a link where a document is: its blob is the link's text (here a path out of
    the memory). Restoring it would write that text as the document; it is refused, and nothing changes."""
    root = memory.root
    memory.write("topics/a.md", "# A\n\n- v: 1\n")
    commit = hostile_commit(root, [("topics/a.md", "120000", str(outside / "secret.md").encode())])
    memory.write("topics/a.md", "# A\n\n- v: 2\n")
    before = tree_of(root)
    with pytest.raises(InvalidArgument, match=r"^topics/a.md was a symbolic link at \w+, not a file: fsmem restores"):
        memory.restore("topics/a.md", at=commit)
    assert tree_of(root) == before and tree_of(outside) == {"secret.md": "# Secret\n"}


def test_a_revert_that_would_bring_back_a_link_is_refused(memory, outside):
    """A commit that turned a link (to a path out of the memory) into a file: reverting it would write the
    link's text as the file. Refused; nothing changes."""
    root = memory.root
    hostile_commit(root, [("topics/l.md", "120000", b"../../outside/secret.md")], "a link")
    made = hostile_commit(root, [("topics/l.md", "100644", b"# Now a file\n")], "a file")
    (root / "topics").mkdir()
    (root / "topics" / "l.md").write_text("# Now a file\n")  # the tree as HEAD has it
    before = tree_of(root)
    with pytest.raises(InvalidArgument, match=r"topics/l.md was a symbolic link before it, not a file"):
        memory.revert(made)
    assert tree_of(root) == before and tree_of(outside) == {"secret.md": "# Secret\n"}


def test_paths_into_state_config_and_above_the_root_are_never_undone(memory, outside):
    """A commit that changes `.fsmem/`, fsmem.yaml (and, through a crafted tree, `../`): a revert leaves them,
    a restore of such a path is refused by the path rule before history is read."""
    root = memory.root
    memory.write("topics/a.md", "# A\n")
    config = (root / "fsmem.yaml").read_bytes()
    commit = hostile_commit(root, [(".fsmem/x.md", "100644", b"# evil\n"), ("fsmem.yaml", "100644", b"evil: 1\n")])
    with pytest.raises(FsmemError, match="nothing to revert"):
        memory.revert(commit)
    with pytest.raises(PathEscape, match="is inside .fsmem/"):
        memory.restore(".fsmem/x.md", at=commit)
    assert not (root / ".fsmem" / "x.md").exists() and (root / "fsmem.yaml").read_bytes() == config
    assert tree_of(outside) == {"secret.md": "# Secret\n"}


def test_a_restore_over_a_link_replaces_the_link_and_leaves_its_target(memory):
    """`topics/a.md` made by hand a link to `topics/b.md`: restoring a.md writes a.md itself (as history names
    it), never b.md through the link, and the history holds the files as they are."""
    root = memory.root
    memory.write("topics/a.md", "# A\n\n- v: 1\n")
    memory.write("topics/a.md", "# A\n\n- v: 2\n")
    memory.write("topics/b.md", "# B\n")
    b = (root / "topics" / "b.md").read_bytes()
    (root / "topics" / "a.md").unlink()
    (root / "topics" / "a.md").symlink_to("b.md")
    memory.restore("topics/a.md", at="HEAD~2")
    assert not (root / "topics" / "a.md").is_symlink()
    assert "- v: 1" in (root / "topics" / "a.md").read_text()
    assert (root / "topics" / "b.md").read_bytes() == b
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "log", "-1", "--format=%s").startswith("restore topics/a.md as of ")
    assert git(root, "show", "HEAD:topics/b.md").encode() == b


def test_a_restore_streams_a_large_file_from_git_and_never_holds_it_whole(memory, monkeypatch):
    """A version several chunks long, the file now edited by hand since its last commit: restored byte for
    byte, committed as a restore is (the hand edit first, as made outside fsmem), and no blob of it ever read
    whole into fsmem: git writes the old version into the staged file, the file now is hashed and stored a
    chunk at a time."""
    from fsmem.history.cat_file import CatFile
    from fsmem.history.git import CHUNK

    root = memory.root
    first = b"".join(b"- line %d: %s\n" % (n, b"x" * 60) for n in range(3 * CHUNK // 64))
    (root / "big.md").write_bytes(first)
    git(root, "add", "big.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    (root / "big.md").write_bytes(first.replace(b"x", b"y"))
    git(root, "commit", "-q", "-a", "-m", "second", "--author", "t <t@t>")
    edited = first.replace(b"x", b"z")
    (root / "big.md").write_bytes(edited)  # by hand, not committed
    get = CatFile.get

    def never_a_large_blob(self: CatFile, spec: str):
        found = get(self, spec)
        assert found is None or self.sizes or found[1] != "blob" or len(found[2]) <= CHUNK, spec
        return found

    monkeypatch.setattr(CatFile, "get", never_a_large_blob)
    result = memory.restore("big.md", at="HEAD~1")
    assert result.to_text() == "restored big.md"
    assert (root / "big.md").read_bytes() == first
    assert git(root, "log", "-3", "--format=%s") == (
        f"restore big.md as of {git(root, 'rev-parse', 'HEAD~3').strip()[:12]} (HEAD~1)\n"
        "outside fsmem: big.md\nsecond\n"
    )
    assert git(root, "rev-parse", "HEAD:big.md") == git(root, "rev-parse", "HEAD~3:big.md")
    assert in_history(root, edited)
    assert git(root, "status", "--porcelain") == ""
    assert not [name for name in os.listdir(root / ".fsmem" / "history" / "journal") if not name.startswith(".")]
    assert not [name for name in os.listdir(root / ".git" / "objects") if name.startswith("tmp_obj_")]


def test_a_folder_swapped_for_a_link_between_the_plan_and_the_write_is_refused(memory, outside, monkeypatch):
    root = memory.root
    memory.write("topics/a.md", "# A\n\n- v: 1\n")
    memory.write("topics/a.md", "# A\n\n- v: 2\n")
    (outside / "a.md").write_bytes((root / "topics" / "a.md").read_bytes())
    planned = undo.plan_restore

    def then_swap(*args, **kwargs):
        found = planned(*args, **kwargs)
        (root / "topics").rename(root / "topics-moved")
        (root / "topics").symlink_to(outside)
        return found

    monkeypatch.setattr(undo, "plan_restore", then_swap)
    with pytest.raises(PathEscape, match="a symbolic link"):
        memory.restore("topics/a.md", at="HEAD~1")
    assert "- v: 2" in (outside / "a.md").read_text()
    assert sorted(tree_of(outside)) == ["a.md", "secret.md"]


def test_a_revert_refused_for_one_file_leaves_every_file_as_it_was(memory, outside, monkeypatch):
    """A revert of two files whose second folder is swapped for a link out after the plan: refused before any
    file is replaced (each is placed and staged first), so the first keeps its bytes too."""
    root = memory.root
    memory.write("notes/c.md", "# C\n\n- v: 1\n")
    memory.write("topics/a.md", "# A\n\n- v: 1\n")
    both = hostile_commit(root, [("notes/c.md", "100644", b"# C\n\n- v: 2\n"), ("topics/a.md", "100644", b"# A 2\n")])
    (root / "notes" / "c.md").write_bytes(b"# C\n\n- v: 2\n")
    (root / "topics" / "a.md").write_bytes(b"# A 2\n")
    (outside / "a.md").write_bytes(b"# A 2\n")
    planned = undo.plan_revert

    def then_swap(*args, **kwargs):
        found = planned(*args, **kwargs)
        assert [change.path for change in found[0]] == ["notes/c.md", "topics/a.md"]
        (root / "topics").rename(root / "topics-moved")
        (root / "topics").symlink_to(outside)
        return found

    monkeypatch.setattr(undo, "plan_revert", then_swap)
    with pytest.raises(PathEscape, match="a symbolic link"):
        memory.revert(both)
    assert (root / "notes" / "c.md").read_bytes() == b"# C\n\n- v: 2\n"
    assert (outside / "a.md").read_bytes() == b"# A 2\n"
    assert sorted(tree_of(outside)) == ["a.md", "secret.md"]


# -- the invariant, over drawn histories and trees ---------------------------------------------------------
PATHS = ["topics/a.md", "topics/b.md", "notes/c.md"]
STEPS = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), st.integers(0, 3)),
    st.tuples(st.just("hand edit"), st.sampled_from(PATHS), st.integers(0, 3)),
    st.tuples(st.just("link"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
    st.tuples(st.just("folder"), st.sampled_from(PATHS), st.just(0)),
    st.tuples(st.just("link out"), st.sampled_from(["topics", "notes"]), st.just(0)),
)
UNDO = st.one_of(
    st.tuples(st.just("restore"), st.sampled_from(PATHS), st.integers(0, 4)),
    st.tuples(st.just("revert"), st.just(""), st.integers(0, 4)),
)


def step(memory: Memory, outside: Path, what: str, path: str, arg: object) -> None:
    root = memory.root
    full = root / path
    if what == "write":
        try:
            memory.write(path, f"# {path}\n\n- version: {arg}\n")
        except FsmemError:
            pass
        return
    if not full.parent.is_dir() or full.parent.is_symlink():
        return
    if full.is_dir() and not full.is_symlink():
        return
    if what == "hand edit":
        full.unlink(missing_ok=True)
        full.write_text(f"# {path}\n\n- edited by hand: {arg}\n")
    elif what == "link" and path != arg:
        full.unlink(missing_ok=True)
        full.symlink_to(os.path.relpath(root / str(arg), full.parent))
    elif what == "folder":
        full.unlink(missing_ok=True)
        full.mkdir()
        (full / "inner.md").write_text("# Inner\n")
    elif what == "link out" and not (root / path).is_symlink():
        (root / path).rename(root / f"{path}-moved")
        (root / path).symlink_to(outside)


@settings(
    max_examples=12 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEPS, min_size=1, max_size=6), undos=st.lists(UNDO, min_size=1, max_size=2))
def test_after_any_undo_its_files_are_regular_files_beneath_the_root_and_nothing_is_lost(
    tmp_path_factory, steps, undos
):
    """Whatever the history and the tree hold, after a restore or revert (done or refused): every file it
    wrote is a regular file beneath the root, nothing outside changed, and every memory file's bytes from
    before the undo are where they were or in the history HEAD reaches."""
    base = tmp_path_factory.mktemp("undo")
    outside = base / "outside"
    outside.mkdir()
    (outside / "a.md").write_text("# Outside\n")
    old = os.environ.get("FSMEM_NOW")
    os.environ["FSMEM_NOW"] = NOW
    try:
        memory = Memory.init(base / "mem", git=True)
        root = memory.root
        for path in PATHS:
            memory.write(path, f"# {path}\n\n- version: start\n")
        for what, path, arg in steps:
            step(memory, outside, what, path, arg)
        for action, path, back in undos:
            before = {rel: text for rel, text in tree_of(root).items() if not text.startswith("link ")}
            try:
                commits = int(git(root, "rev-list", "--count", "HEAD"))
                rev = f"HEAD~{min(back, commits - 1)}"
                if action == "restore":
                    result = memory.restore(path, at=rev)
                else:
                    result = memory.revert(rev)
            except FsmemError:
                result = None
            assert tree_of(outside) == {"a.md": "# Outside\n"}
            for change in result.changes if result is not None else []:
                full = root / change.path
                if change.after is not None:
                    assert full.is_file() and not full.is_symlink(), change.path
                    assert os.path.realpath(full).startswith(os.path.realpath(root) + os.sep)
                    if isinstance(change.after, Stored):  # a restore names its version by blob id
                        assert git(root, "hash-object", "--no-filters", str(full)).strip() == change.after.oid
                    else:
                        assert full.read_bytes() == change.after
            after = tree_of(root)
            for rel, text in before.items():  # still there, or kept by the history
                if rel.endswith(".md") and rel != "INDEX.md" and after.get(rel) != text:
                    assert in_history(root, text.encode()), rel
    finally:
        if old is None:
            os.environ.pop("FSMEM_NOW", None)
        else:
            os.environ["FSMEM_NOW"] = old
