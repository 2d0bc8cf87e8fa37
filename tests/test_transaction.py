"""The one write path (`fsmem.operations.transaction`): every writer, Claude's memory tool over an fsmem memory
included, is screened, locked, journalled, committed, indexed for search, told to the change feed, and logged
alike when history cannot keep up."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from test_cli import fsmem

from fsmem import Memory
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import MemoryToolError
from fsmem.history import journal

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
WALRUS = "---\ntitle: Walrus\ndescription: Tusked marine mammals\n---\n# Walrus\n\n- diet: clams, eaten by suction\n"


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def indexed(memory: Memory, rel: str) -> bool:
    """Whether the search index holds `rel`, as it stands (no refresh: what the writer itself told it)."""
    rows = memory.search_index.guarded(
        lambda conn: conn.execute("SELECT path FROM search_files WHERE path = ?", (rel,)).fetchall()
    )
    return bool(rows)


def history_log(root: Path) -> list[dict]:
    path = root / ".fsmem" / "logs" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def memory(tmp_path) -> Memory:
    return Memory.init(tmp_path / "mem", git=True)


def test_a_memory_tool_write_on_an_fsmem_memory_takes_memorys_write_path(memory):
    """Issue 21: MemoryTool was a second write path: its own history lookup, and its writes never reached the
    search index. Now a create is committed by its agent, screened, in the index at once (before any search
    refreshes it), found by the next search, and seen by a held-open Memory's next ls."""
    root = memory.root
    held = Memory(root)
    held.ls(), held.ls()  # asked twice: it holds the memory's change feed
    assert held.search("proration").empty  # the index exists, so a write must keep it in step
    tool = MemoryTool.over(Memory(root, agent="researcher"))

    assert (
        tool.create("/memories/topics/walrus.md", WALRUS) == "File created successfully at: /memories/topics/walrus.md"
    )
    assert git(root, "log", "-1", "--format=%an|%s").strip() == "researcher|memory.create topics/walrus.md"
    assert git(root, "status", "--porcelain") == ""
    assert indexed(held, "topics/walrus.md")
    assert [hit.path for hit in held.search("walrus clams").hits][:1] == ["topics/walrus.md"]
    assert "topics/walrus.md" in [entry.path for entry in held.ls("topics").entries]

    tool.str_replace("/memories/topics/walrus.md", "clams", "clams and mussels")
    assert git(root, "log", "-1", "--format=%an|%s").strip() == "researcher|memory.str_replace topics/walrus.md"
    assert any("mussels" in hit.text for hit in held.search("mussels").hits)

    with pytest.raises(MemoryToolError, match=r"line 2: looks like a GitHub token; nothing was written"):
        tool.create("/memories/topics/keys.md", f"# Keys\n{TOKEN}\n")
    assert not (root / "topics" / "keys.md").exists()

    tool.delete("/memories/topics")
    assert not indexed(held, "topics/walrus.md") and held.search("walrus clams").empty
    assert "topics/walrus.md" not in [entry.path for entry in held.ls().entries]
    # a folder's delete is named after its first file, as before
    assert git(root, "log", "-1", "--format=%s").strip() == "memory.delete topics/walrus.md"


def test_history_that_cannot_keep_up_fails_the_write_or_is_logged_for_memory_and_the_memory_tool(memory, monkeypatch):
    """Issue 21: MemoryTool swallowed a failed journal entry or commit where Memory logged it. Issue 31 (finding
    10): a journal entry that cannot be written fails the command — Memory's writes and the memory tool's
    create, str_replace and insert journal first, so nothing is changed. A commit that cannot be made leaves
    the entry pending and is logged to .fsmem/logs/history.jsonl, the write done, for both."""
    from fsmem.errors import StorageError

    root = memory.root
    writer = Memory(root)
    tool = MemoryTool.over(Memory(root, agent="researcher"))

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal, "prepare", full_disk)
    with pytest.raises(StorageError, match=r"^topics/a.md: its history entry could not be written \(No space left"):
        writer.write("topics/a.md", "# A\n")
    assert not (root / "topics" / "a.md").exists()
    with pytest.raises(MemoryToolError, match=r"topics/b.md: its history entry could not be written .*nothing was"):
        tool.create("/memories/topics/b.md", "# B\n")
    assert not (root / "topics" / "b.md").exists()
    monkeypatch.undo()
    monkeypatch.setattr(journal, "drain", full_disk)
    writer.write("topics/c.md", "# C\n")
    tool.create("/memories/topics/d.md", "# D\n")
    assert [(line["stage"], line["agent"], line["error"]) for line in history_log(root)] == [
        ("commit", None, "[Errno 28] No space left on device"),
        ("commit", "researcher", "[Errno 28] No space left on device"),
    ]
    assert all((root / "topics" / name).is_file() for name in ("c.md", "d.md"))


def test_the_drop_in_over_a_memory_without_history_takes_memorys_lock_and_index(tmp_path):
    """`MemoryTool(memory_root=...)` over an fsmem memory (no state_dir, no history) took no lock at all, so it
    raced Memory's writers; it now writes under the memory's own write lock, and keeps its search index."""
    root = Memory.init(tmp_path / "mem").root
    memory = Memory(root)
    assert memory.search("anything").empty  # the index exists
    plain = MemoryTool(memory_root=root, create_root=False)
    plain.create("/memories/topics/walrus.md", WALRUS)
    assert (root / ".fsmem" / "locks" / "write.lock").exists()
    assert indexed(memory, "topics/walrus.md")
    assert [hit.path for hit in memory.search("walrus clams").hits][:1] == ["topics/walrus.md"]


def test_a_write_that_fails_after_it_wrote_still_commits_and_indexes_what_it_wrote(memory):
    """The transaction ends the same way when its body fails after a change it recorded: that change is
    committed and the index told, and the error still reaches the caller."""
    from fsmem.operations.transaction import transaction
    from fsmem.store import writing

    root = memory.root
    assert memory.search("anything").empty
    with pytest.raises(RuntimeError, match="after the write"):
        with transaction(memory) as tx:
            tx.wrote(writing.write(root, root / "topics" / "walrus.md", WALRUS, {}))
            raise RuntimeError("after the write")
    assert git(root, "log", "-1", "--format=%s").strip() == "write topics/walrus.md (new file)"
    assert indexed(memory, "topics/walrus.md")


def test_a_move_on_a_full_disk_fails_with_its_history_and_changes_nothing(tmp_path):
    """Finding 10 (issue 31): on a full disk `fsmem mv` renamed the file, reported success, and lost its journal
    entry; `check` said nothing, and the next consolidate committed the move under the git user. A write and its
    history now fail together: the command exits non-zero, says why, and the file stays where it was; once
    there is room again the same move is committed under its agent."""
    from mounts import fill, small_disk

    env = {"FSMEM_NOW": "2026-11-30T09:15:00+00:00"}
    with small_disk(tmp_path / "disk") as disk:
        root = Memory.init(disk / "mem", git=True).root
        Memory(root, agent="planner").write("topics/billing.md", "# Billing\n\nNet 30.\n")
        commits = git(root, "rev-list", "--count", "HEAD")
        filler = fill(disk)

        moved = fsmem(
            "--root", str(root), "--agent", "planner", "mv", "topics/billing.md", "topics/invoices.md", env_extra=env
        )
        assert moved.returncode != 0, moved.stdout
        assert "No space left on device" in moved.stderr and "nothing was changed" in moved.stderr, moved.stderr
        assert "Traceback" not in moved.stderr
        assert (root / "topics" / "billing.md").is_file() and not (root / "topics" / "invoices.md").exists()
        assert git(root, "rev-list", "--count", "HEAD") == commits

        filler.unlink()
        again = fsmem(
            "--root", str(root), "--agent", "planner", "mv", "topics/billing.md", "topics/invoices.md", env_extra=env
        )
        assert again.returncode == 0, again.stderr
        assert git(root, "log", "-1", "--format=%an|%s").strip() == "planner|mv topics/billing.md -> topics/invoices.md"
        assert git(root, "status", "--porcelain") == ""


LINKED = [  # (command, link's place, its text, the path given, the file really written)
    ("write", "topics/alias.md", "../README.md", "topics/alias.md", "README.md"),
    ("edit", "topics/alias.md", "../README.md", "topics/alias.md", "README.md"),
    ("write", "archive", "topics", "archive/walrus.md", "topics/walrus.md"),
    ("write", "archive", "topics", "archive/sub/walrus.md", "topics/sub/walrus.md"),
    ("note", "sessions/2026/11/30/s1.md", "../29/s0.md", "", "sessions/2026/11/29/s0.md"),  # a link to a note
]


@pytest.mark.parametrize(("command", "place", "text", "given", "real"), LINKED)
def test_a_write_through_an_in_memory_link_is_committed_as_the_file_it_wrote(
    tmp_path, command, place, text, given, real
):
    """Finding F11: a write through an in-memory link wrote the target but journalled the link's name: an
    "outside fsmem" commit made the link a regular file in HEAD, README.md's change was never committed, and
    later syncs stopped on the difference. History now records the file really written; the link stays a
    link, in HEAD and on disk, and the work tree is clean."""
    env = {"FSMEM_NOW": "2026-11-30T09:15:00+00:00", "FSMEM_SESSION": "s1"}
    root = tmp_path / "mem"
    assert fsmem("init", "--git", str(root), env_extra=env).returncode == 0
    (root / "topics").mkdir(exist_ok=True)
    (root / "topics" / "log.md").write_text("---\ntitle: Log\n---\n# Log\n")
    (root / "sessions/2026/11/29").mkdir(parents=True)
    (root / "sessions/2026/11/29/s0.md").write_text("---\ntitle: Session s0\n---\n- Likes tea.\n")
    link = root / place
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "a link")
    head = git(root, "rev-parse", "HEAD").strip()

    if command == "write":
        done = fsmem("--root", str(root), "write", given, input="# New body\n", env_extra=env)
    elif command == "edit":
        old = (root / real).read_text().splitlines()[-1]
        done = fsmem("--root", str(root), "edit", given, "--old", old, "--new", "Edited.", env_extra=env)
    else:
        done = fsmem("--root", str(root), "note", "- employer: Acme", env_extra=env)
    assert done.returncode == 0, done.stderr

    assert git(root, "rev-list", f"{head}..HEAD").count("\n") == 1  # one commit: no "outside fsmem" one
    assert git(root, "show", "--format=", "--name-only", "HEAD").split() == [real]  # the file written, only
    assert git(root, "log", "-1", "--format=%s").startswith(f"{command} {real}")
    assert git(root, "ls-tree", "HEAD", place).split()[0] == "120000"  # still a link in HEAD
    assert link.is_symlink() and os.readlink(link) == text
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("command", "place", "text", "args", "gone", "made"),
    [  # rm and mv act on the link itself, as they do in a shell; through a folder link, on the file it holds
        ("rm", "topics/alias.md", "../README.md", ["topics/alias.md"], "topics/alias.md", None),
        (
            "mv",
            "topics/alias.md",
            "../README.md",
            ["topics/alias.md", "topics/other.md"],
            "topics/alias.md",
            "topics/other.md",
        ),
        ("mv", "archive", "topics", ["archive", "old"], "archive", "old"),
        ("rm", "archive", "topics", ["archive/log.md"], "topics/log.md", None),
        ("mv", "archive", "topics", ["archive/log.md", "archive/journal.md"], "topics/log.md", "topics/journal.md"),
    ],
)
def test_a_removal_or_a_move_of_a_link_is_committed_as_the_link(tmp_path, command, place, text, args, gone, made):
    """F11's rm and mv: a link removed or moved was journalled as nothing (the commit missed it, and the work
    tree stayed dirty). Now the commit removes or moves the link itself (a link in HEAD where it went), or,
    through a folder link, the file really removed or moved; the target stays and the work tree is clean."""
    env = {"FSMEM_NOW": "2026-11-30T09:15:00+00:00"}
    root = tmp_path / "mem"
    assert fsmem("init", "--git", str(root), env_extra=env).returncode == 0
    (root / "topics").mkdir(exist_ok=True)
    (root / "topics" / "log.md").write_text("---\ntitle: Log\n---\n# Log\n")
    (root / place).symlink_to(text)
    git(root, "add", "-A")
    git(root, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "a link")
    head = git(root, "rev-parse", "HEAD").strip()
    kept = {path: git(root, "ls-tree", "HEAD", path) for path in ("README.md", "topics/log.md")}

    done = fsmem("--root", str(root), command, *args, env_extra=env)
    assert done.returncode == 0, done.stderr

    assert git(root, "rev-list", f"{head}..HEAD").count("\n") == 1  # one commit: no "outside fsmem" one
    assert git(root, "log", "-1", "--format=%s").startswith(command)
    assert git(root, "ls-tree", "HEAD", gone) == ""
    if made is not None:
        assert git(root, "ls-tree", "HEAD", made) == kept.get(gone, git(root, "ls-tree", head, gone)).replace(
            gone, made
        )
    for path, entry in kept.items():
        if path not in (gone, made):
            assert git(root, "ls-tree", "HEAD", path) == entry
    assert git(root, "status", "--porcelain") == ""
