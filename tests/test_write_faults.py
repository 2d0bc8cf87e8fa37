"""A process killed, or a system call failing, in the middle of a write: nothing stored is lost, the next works.

Each case runs the installed `fsmem` under strace (tests/syscall_faults.py), killed or refused at the Nth
call of one system call, then checks what a person would find: every file holds its old or its new bytes,
and the next command of the same kind exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import syscall_faults as F
from child_env import child_env
from hypothesis import HealthCheck, given, settings, strategies as st

NOW = "2026-12-01T10:00:00+00:00"


def fsmem(root: Path, *args: str, env: dict[str, str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([F.FSMEM, *args], cwd=root, env=env, input=stdin, capture_output=True, timeout=120)


@pytest.fixture
def memory(tmp_path) -> tuple[Path, dict[str, str]]:
    env = dict(child_env(), FSMEM_NOW=NOW, FSMEM_SOCKET="off", XDG_CONFIG_HOME=str(tmp_path / "config"))
    root = tmp_path / "mem"
    subprocess.run([F.FSMEM, "init", "--git", str(root)], env=env, capture_output=True, check=True)
    _settled(root)
    return root, env


def _settled(root: Path) -> None:
    """fsmem.yaml dated an hour back: its parsed copy is kept by the first command (one within a second of an
    edit is not), so a count of a command's system calls holds for the same command on another copy."""
    os.utime(root / "fsmem.yaml", (os.stat(root / "fsmem.yaml").st_atime, os.stat(root / "fsmem.yaml").st_mtime - 3600))


@pytest.mark.parametrize("fault", ["kill", "ENOSPC"])
def test_a_host_key_write_killed_or_refused_leaves_no_empty_key_and_the_next_config_works(memory, fault):
    """Before, the key was written in place: killed between its open and its write, `host-key` stayed empty, and
    every later `config --local distill.command` and `distill` exited 2 (`holds no key (delete it…)`)."""
    root, env = memory
    fsmem(
        root, "config", "--local", "distill.timeout", "30", env=env
    )  # every state fsmem keeps made: the key's writes alone
    key = Path(env["XDG_CONFIG_HOME"], "fsmem", "host-key")
    args = ["config", "--local", "distill.command", "echo hi"]
    writes = F.calls(args, ["write"], cwd=root, env=env)["write"]
    key.unlink()
    assert writes >= 2  # the key, and stdout
    for nth in range(1, writes + 1):
        key.unlink(missing_ok=True)
        F.run_faulted(args, "write", nth, fault, cwd=root, env=env)
        assert not key.exists() or len(key.read_text().strip()) == 64, (nth, key.read_bytes())
        after = fsmem(root, *args, env=env)
        assert after.returncode == 0, (nth, after.stderr)
        assert fsmem(root, "config", "--local", "distill.command", env=env).stdout == b"distill.command=echo hi\n"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.md") if ".fsmem" not in p.parts}


def counted_on_a_copy(
    root: Path, tmp_path: Path, args: list[str], syscall: str, matching: str, *, env: dict[str, str], **run: Any
) -> tuple[int, dict[str, bytes]]:
    """Which call of `syscall` matching `matching` a clean run of ARGS makes (`F.nth_call`), counted on a copy of
    `root` at the same path, as the run to be killed will be; `root` is then put back as it was. With the files
    the clean run left."""
    template = tmp_path / "template"
    root.rename(template)
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    nth = F.nth_call(args, syscall, matching, cwd=root, env=env, **run)
    after = _files(root)
    subprocess.run(["rm", "-rf", str(root)], check=True)
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    return nth, after


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


WRITES = {  # an append, a removal and a move (write and edit replace a file as note does)
    "note": ["note", "--subject", "people/Bo Chen", "- city: Paris"],
    "rm": ["rm", "topics/billing.md"],
    "mv": ["mv", "topics/billing.md", "topics/money/billing.md"],
}


@pytest.fixture
def written(memory, tmp_path) -> tuple[Path, dict[str, str]]:
    """A memory with a note and a document, committed."""
    root, env = memory
    fsmem(root, "note", "--subject", "people/Bo Chen", "- city: Rome", env=env)
    fsmem(root, "write", "topics/billing.md", env=env, stdin=b"Refunds take 5 days.\n")
    assert _git(root, "status", "--porcelain") == ""
    return root, env


@pytest.mark.parametrize("kind", sorted(WRITES))
def test_a_write_killed_after_it_landed_before_its_journal_entry_was_kept_is_committed_as_its_own(
    written, tmp_path, kind
):
    """A write stores its history entry under a name the committer passes over, writes the file, then renames
    the entry to make it pending. Killed between the last two, the file held the new bytes and nothing said so:
    `git status` showed the change until a consolidation or sync committed it as made outside fsmem, `fsmem log`
    did not have it and `revert` could not undo it. Now the next command that commits (or asks history) finds the
    entry its dead writer left, sees the files hold what it records, and commits it as the agent's write."""
    root, env = written
    args = WRITES[kind]
    nth, after = counted_on_a_copy(root, tmp_path, args, "rename", r"/history/journal/\.", env=env)
    head = _git(root, "rev-parse", "HEAD")

    killed = F.run_faulted(args, "rename", nth, "kill", cwd=root, env=env)

    assert killed.returncode == F.KILLED, killed.stderr
    assert _files(root) == after  # the write landed whole
    log = fsmem(root, "log", "--json", env=env)
    assert log.returncode == 0, log.stderr
    assert _git(root, "status", "--porcelain") == ""
    assert _git(root, "log", "-1", "--format=%an %s").startswith(f"default {kind}"), _git(root, "log", "-3")
    assert _git(root, "rev-parse", "HEAD~1").strip() == head.strip()  # one commit: the write's own
    assert not list((root / ".fsmem/history/journal").iterdir())
    undo = fsmem(root, "revert", "HEAD", env=env)
    assert undo.returncode == 0, undo.stderr
    assert _git(root, "status", "--porcelain") == ""
    assert fsmem(root, "read", "topics/billing.md", env=env).returncode == 0  # back where it was


def test_a_killed_note_is_committed_as_its_own_before_the_next_note_to_that_file(written, tmp_path):
    """The next write to the same file takes the dead writer's entry first (under the write lock, before it
    changes the file): its commit, then the new one, and no change committed as made outside fsmem."""
    root, env = written
    args = WRITES["note"]
    nth, _after = counted_on_a_copy(root, tmp_path, args, "rename", r"/history/journal/\.", env=env)

    assert F.run_faulted(args, "rename", nth, "kill", cwd=root, env=env).returncode == F.KILLED
    assert fsmem(root, "note", "--subject", "people/Bo Chen", "- team: Core", env=env).returncode == 0

    messages = _git(root, "log", "-3", "--format=%an|%s").splitlines()
    assert [m.split("|")[0] for m in messages[:2]] == ["default", "default"], messages
    assert not any("outside fsmem" in m for m in messages), messages
    assert _git(root, "status", "--porcelain") == ""
    assert "Paris" in _git(root, "show", "HEAD~1", "--format=")


def test_a_memory_tool_delete_of_a_folder_stopped_half_way_commits_what_it_removed(memory):
    """A folder's delete removes file after file; one the system will not remove (immutable, `chattr +i`; EIO)
    stopped it with some gone and nothing journalled: the removals sat in git status, outside history, until a
    consolidation committed them as made outside fsmem. Now the files it removed are committed as its delete."""
    from fsmem import Memory
    from fsmem.agents.memory_tool import MemoryTool
    from fsmem.errors import MemoryToolError

    root, env = memory
    for name in ("a", "b", "c"):
        fsmem(root, "write", f"topics/sub/{name}.md", env=env, stdin=f"Note {name}.\n".encode())
    stuck = root / "topics/sub" / os.listdir(root / "topics/sub")[-1]  # the last one the removal meets
    if subprocess.run(["chattr", "+i", str(stuck)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            tool = MemoryTool.over(Memory(root))
            with pytest.raises(MemoryToolError, match="operation not permitted"):
                tool.execute({"command": "delete", "path": "/memories/topics/sub"})
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
    assert os.listdir(root / "topics/sub") == [stuck.name]
    assert _git(root, "status", "--porcelain") == ""
    assert _git(root, "log", "-1", "--format=%an %s").startswith("default memory.delete topics/sub/")
    removed = sorted(f"topics/sub/{name}.md" for name in "abc" if f"{name}.md" != stuck.name)
    assert _git(root, "show", "--format=", "--name-status", "HEAD").split() == [
        word for path in removed for word in ("D", path)
    ]


def test_a_log_record_cut_short_costs_only_itself(memory):
    """A record of `.fsmem/logs/retrieval.jsonl` cut short (its process killed, or the disk full, mid-write)
    left the log without its final newline, and the next call's record was glued to it: two records lost, one
    call missing from `fsmem stats`. Now the next record starts a line of its own."""
    import json

    root, env = memory
    fsmem(root, "write", "topics/billing.md", env=env, stdin=b"Refunds take 5 days.\n")
    assert fsmem(root, "search", "refunds", env=env).returncode == 0
    log = root / ".fsmem/logs/retrieval.jsonl"
    with log.open("ab") as handle:
        handle.write(b'{"time":"2026-12-01T10:00:00+00:00","tool":"search","argum')  # a record cut short
    assert fsmem(root, "search", "refunds", env=env).returncode == 0
    last = json.loads(log.read_bytes().splitlines()[-1])
    assert last["tool"] == "search" and last["arguments"]["query"] == "refunds"
    stats = json.loads(fsmem(root, "stats", "--json", env=env).stdout)
    assert [row["calls"] for row in stats["tools"] if row["tool"] == "search"] == [2], stats


def test_an_import_killed_between_a_file_and_its_journal_entry_leaves_nothing_outside_history(memory, tmp_path):
    """An import wrote each file, then journalled it: killed between the two (at the journal entry's own
    rename), the file stayed in the memory with no entry, in git status until a consolidation committed it as
    made outside fsmem. Now its entry is journalled before the file is written, as every other write's is."""
    root, env = memory
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("---\ntitle: Vault A\n---\nThe first note.\n")
    (vault / "b.md").write_text("A second note.\n")
    args = ["import", "markdown", str(vault)]
    nth, _after = counted_on_a_copy(root, tmp_path, args, "renameat", r'"\.fsmem-tmp-\w+", \d+, "\.\d{20}-', env=env)

    assert F.run_faulted(args, "renameat", nth, "kill", cwd=root, env=env).returncode == F.KILLED
    assert fsmem(root, "log", env=env).returncode == 0
    assert _git(root, "status", "--porcelain") == ""
    again = fsmem(root, *args, env=env)
    assert again.returncode == 0, again.stderr
    assert _git(root, "status", "--porcelain") == ""
    assert sorted(p.name for p in (root / "topics/vault").iterdir()) == ["a.md", "b.md"]


MEMORY_TOOL_CALL = """
import sys
from fsmem import Memory
from fsmem.agents.memory_tool import MemoryTool
print(getattr(MemoryTool.over(Memory(sys.argv[1])), sys.argv[2])(*sys.argv[3:]))
"""
PREPARED = r'"\.fsmem-tmp-\w+", \d+, "\.\d{20}-'  # a journal entry's prepared file given its name


@pytest.mark.parametrize(
    "call",
    [
        ["str_replace", "/memories/topics/billing.md", "5 days", "7 days"],
        ["create", "/memories/topics/new.md", "A new file.\n"],
        ["delete", "/memories/topics/billing.md"],
        ["rename", "/memories/topics/billing.md", "/memories/topics/money/billing.md"],
        ["rename", "/memories/topics", "/memories/subjects"],
        ["clear_all_memory"],
    ],
    ids=["str_replace", "create", "delete", "rename", "rename-folder", "clear_all_memory"],
)
def test_a_memory_tool_command_killed_at_its_journal_entry_leaves_nothing_outside_history(written, tmp_path, call):
    """The memory tool changed files, then journalled them: killed between the two (at the entry's own rename),
    the change sat in git status, outside history (`fsmem log` did not show it, `revert` could not undo it), until
    a consolidation committed it as made outside fsmem. Now the entry is journalled before the files change (a
    dead command's is taken by the next command): create, str_replace, insert and delete of a file first, then
    rename, a folder's delete and clear_all_memory."""
    root, env = written
    args = ["-c", MEMORY_TOOL_CALL, str(root), *call]
    nth, _after = counted_on_a_copy(root, tmp_path, args, "renameat", PREPARED, env=env, program=sys.executable)

    killed = F.run_faulted(args, "renameat", nth, "kill", cwd=root, env=env, program=sys.executable)
    assert killed.returncode == F.KILLED, killed.stderr
    assert fsmem(root, "log", env=env).returncode == 0
    assert _git(root, "status", "--porcelain") == ""
    done = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "rror" not in done.stdout, done
    assert _git(root, "status", "--porcelain") == ""
    assert _git(root, "log", "-1", "--format=%an %s").startswith(f"default memory.{call[0]}")


def test_a_memory_tool_delete_of_a_folder_killed_part_way_is_committed_as_what_it_removed(memory, tmp_path):
    """A folder's delete removes file after file. Killed between two removals, the files gone sat in git status,
    outside history, until a consolidation committed them as made outside fsmem. Now its entry, journalled
    before, is taken by the next command for the files it did remove (the others kept theirs, still there)."""
    root, env = memory
    for name in ("a", "b", "c"):
        fsmem(root, "write", f"topics/sub/{name}.md", env=env, stdin=f"Note {name}.\n".encode())
    args = ["-c", MEMORY_TOOL_CALL, str(root), "delete", "/memories/topics/sub"]
    nth, _after = counted_on_a_copy(
        root, tmp_path, args, "unlinkat", r'"[abc]\.md", 0\)', env=env, program=sys.executable
    )

    killed = F.run_faulted(args, "unlinkat", nth + 1, "kill", cwd=root, env=env, program=sys.executable)
    assert killed.returncode == F.KILLED, killed.stderr
    left = sorted(os.listdir(root / "topics/sub"))
    assert len(left) == 2, left
    assert fsmem(root, "log", env=env).returncode == 0
    assert _git(root, "status", "--porcelain") == ""
    assert _git(root, "log", "-1", "--format=%an %s").startswith("default memory.delete topics/sub/")
    gone = [f"topics/sub/{name}" for name in ("a.md", "b.md", "c.md") if name not in left]
    assert _git(root, "show", "--format=", "--name-status", "HEAD").split() == ["D", *gone]


@pytest.mark.parametrize("command", ["revert", "restore"])
def test_an_undo_killed_at_its_journal_entry_leaves_nothing_outside_history(written, tmp_path, command):
    """revert and restore wrote their files, then journalled them: killed between the two, the undone file sat
    in git status, outside history, until a consolidation committed it as made outside fsmem. Now the entry
    is journalled before the files change (INDEX.md, regenerated after, joins it before it is kept)."""
    root, env = written
    fsmem(root, "edit", "topics/billing.md", "--old", "5 days", "--new", "7 days", env=env)
    args = ["revert", "HEAD"] if command == "revert" else ["restore", "topics/billing.md", "--at", "HEAD~1"]
    nth, after = counted_on_a_copy(root, tmp_path, args, "renameat", PREPARED, env=env)

    killed = F.run_faulted(args, "renameat", nth, "kill", cwd=root, env=env)
    assert killed.returncode == F.KILLED, killed.stderr
    assert fsmem(root, "log", env=env).returncode == 0
    assert _git(root, "status", "--porcelain") == ""
    done = fsmem(root, *args, env=env)
    assert done.returncode == 0, done.stderr
    assert _git(root, "status", "--porcelain") == ""
    assert _files(root) == after
    assert b"5 days" in (root / "topics/billing.md").read_bytes()


def test_a_revert_killed_after_its_files_and_index_is_committed_whole_as_its_own(written, tmp_path):
    """A revert that changes a document's description regenerates INDEX.md after its files: killed before its
    entry was kept, the next command commits the entry, INDEX.md's change in it, as the revert's (before, that
    change was left outside history)."""
    root, env = written
    fsmem(root, "write", "topics/billing.md", "--set", "description=Invoices and refunds", env=env)
    fsmem(root, "index", env=env)
    assert "Invoices and refunds" in (root / "INDEX.md").read_text()
    args = ["revert", _git(root, "rev-parse", "HEAD~1").strip()]
    nth, after = counted_on_a_copy(root, tmp_path, args, "rename", r"/history/journal/\.", env=env)

    assert F.run_faulted(args, "rename", nth, "kill", cwd=root, env=env).returncode == F.KILLED
    assert _files(root) == after and "Invoices" not in after["INDEX.md"].decode()
    assert fsmem(root, "log", env=env).returncode == 0
    assert _git(root, "status", "--porcelain") == ""
    assert _git(root, "log", "-1", "--format=%an %s").startswith("default revert")
    assert _git(root, "show", "--format=", "--name-only", "HEAD").split() == ["INDEX.md", "topics/billing.md"]


@pytest.mark.parametrize("folder", ["profile", "projects/apollo/notes", ""])
def test_a_write_killed_in_any_folder_leaves_a_temporary_file_that_the_next_consolidation_removes(
    written, tmp_path, folder
):
    """A write killed before its temporary file took the file's name leaves that file (`.fsmem-tmp-*`, hidden)
    beside its target. Consolidation removed those of the root, entities/, topics/, sessions/ and the archive
    only: one in profile/ or any folder of the person's stayed for good, a copy of what was being written. It
    is never read as memory, and the next consolidation removes it wherever it is."""
    root, env = written
    target = f"{folder}/me.md".lstrip("/")
    args = ["write", target]
    stdin = b"Works on the billing service.\n"
    nth, _after = counted_on_a_copy(
        root, tmp_path, args, "linkat", r'"\.fsmem-tmp-\w+", \d+, "me\.md"', env=env, stdin=stdin
    )

    assert F.run_faulted(args, "linkat", nth, "kill", cwd=root, env=env, stdin=stdin).returncode == F.KILLED
    left = [p for p in root.rglob(".fsmem-tmp-*") if ".fsmem" not in p.relative_to(root).parts[:1]]
    assert [p.parent for p in left] == [(root / folder).resolve()], left
    assert b"billing service" not in fsmem(root, "grep", "-i", "billing service", env=env).stdout
    done = fsmem(root, "consolidate", env=env)
    assert done.returncode in (0, 1), done.stderr
    assert b"removed 1 temporary file(s)" in done.stdout, done.stdout
    assert not [p for p in root.rglob(".fsmem-tmp-*") if ".fsmem" not in p.relative_to(root).parts[:1]]


def test_an_rm_whose_removal_fails_leaves_the_file_at_its_name(written, tmp_path):
    """`rm` takes the file aside, reads it, then removes it. When that last removal failed (an I/O error), the
    command said so (exit 2) but the file stayed aside under a hidden temporary name, gone from the memory and
    from history's view (its removal withdrawn). Now it is given its name back."""
    root, env = written
    before = (root / "topics/billing.md").read_bytes()
    args = ["rm", "topics/billing.md"]
    nth, _after = counted_on_a_copy(root, tmp_path, args, "unlinkat", r'"\.fsmem-tmp-\w+", 0\)', env=env)

    failed = F.run_faulted(args, "unlinkat", nth, "EIO", cwd=root, env=env)

    assert failed.returncode == 2 and b"Traceback" not in failed.stderr, failed.stderr
    assert (root / "topics/billing.md").read_bytes() == before
    assert _git(root, "status", "--porcelain") == ""
    assert not list(root.rglob(".fsmem-tmp-*"))
    assert fsmem(root, *args, env=env).returncode == 0


# -- the property: any write command, killed or refused at any call of a writing system call ----------------

SYSCALLS = ["write", "fsync", "rename", "renameat", "renameat2", "linkat", "unlinkat", "mkdir", "pwrite64"]
COMMANDS = {
    "note": ["note", "--subject", "people/Bo Chen", "- city: Paris"],
    "write": ["write", "topics/billing.md", "--set", "description=Invoices"],
    "edit": ["edit", "topics/billing.md", "--old", "5 days", "--new", "7 days"],
    "rm": ["rm", "topics/billing.md"],
    "mv": ["mv", "topics/billing.md", "topics/money/billing.md"],
    "consolidate": ["consolidate"],
    "index": ["index"],
    "import": ["import", "markdown", "VAULT"],
}
ONE_FILE = {"note", "write", "edit", "rm", "mv"}  # journalled before they write (consolidate and import: after)
# one example in `make test` (some 10 s: a dozen fsmem processes); `make fuzz` (FSMEM_FUZZ_SCALE) multiplies it
FAULT_EXAMPLES = int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    """A memory with notes, documents and a consolidation committed; what each command does to a copy of it
    (its bytes after, its system calls) is learned once, on a copy at the path every example uses."""
    base = tmp_path_factory.mktemp("faults")
    env = dict(child_env(), FSMEM_NOW=NOW, FSMEM_SOCKET="off", XDG_CONFIG_HOME=str(base / "config"))
    vault = base / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "a.md").write_text("---\ntitle: Vault A\n---\nThe vault's first note.\n")
    (vault / "sub" / "b.md").write_text("A plain note about Rome.\n")
    template = base / "template"
    subprocess.run([F.FSMEM, "init", "--git", str(template)], env=env, capture_output=True, check=True)
    _settled(template)
    fsmem(template, "note", "--subject", "people/Bo Chen", "- city: Rome\n- role: engineer", env=env)
    fsmem(template, "write", "topics/billing.md", env=env, stdin=b"Refunds take 5 days.\n")
    fsmem(template, "consolidate", env=env)
    fsmem(template, "note", "--subject", "people/Ann Lee", "- lang: Python", env=env)
    assert _git(template, "status", "--porcelain") == ""
    learned: dict[str, tuple[dict[str, int], dict[str, bytes]]] = {}

    def learn(command: str) -> tuple[list[str], dict[str, int], dict[str, bytes]]:
        args = [str(vault) if arg == "VAULT" else arg for arg in COMMANDS[command]]
        if command not in learned:
            root = fresh()
            counts = F.calls(args, SYSCALLS, cwd=root, env=env)
            learned[command] = (counts, _files(root))
        return (args, *learned[command])

    def fresh() -> Path:
        root = base / "mem"
        subprocess.run(["rm", "-rf", str(root)], check=True)
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        return root

    return env, _files(template), learn, fresh


def _answers(root: Path, env: dict[str, str]) -> list[bytes]:
    """What reads answer: each exits 0 or 1, without a traceback, and names no temporary file."""
    found = []
    for args in (["ls"], ["grep", "-i", "rome"], ["search", "billing"], ["search", "city"]):
        done = fsmem(root, *args, env=env)
        assert done.returncode in (0, 1) and b"Traceback" not in done.stderr, (args, done.stderr)
        assert b"fsmem-tmp" not in done.stdout, (args, done.stdout)
        found.append(done.stdout)
    return found


@settings(
    max_examples=FAULT_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    syscall=st.sampled_from(SYSCALLS),
    fault=st.sampled_from(["kill", "ENOSPC", "EIO"]),
    pick=st.integers(0, 10**6),
)
def test_a_write_killed_or_failed_at_any_call_leaves_old_or_new_files_and_the_next_commands_work(
    faulted, command, syscall, fault, pick
):
    """Whatever call of a write is killed or fails: every memory file holds its old or its new bytes (never
    empty, never half), no read shows a temporary file, the caches answer as a walk of a copy without `.fsmem/`
    would, the lock is free (the next note exits 0), and after the next consolidation history is whole (`git
    fsck`) and holds every file (`git status` clean)."""
    env, before, learn, fresh = faulted
    args, counts, after = learn(command)
    if not counts[syscall]:
        return
    root = fresh()
    nth = 1 + pick % counts[syscall]

    done = F.run_faulted(args, syscall, nth, fault, cwd=root, env=env)

    assert done.returncode in (0, 1, 2, F.KILLED) and b"Traceback" not in done.stderr, done.stderr
    now = _files(root)
    for path in set(before) | set(after) | set(now):
        assert now.get(path) in (before.get(path), after.get(path)), (path, now.get(path))
    answers = _answers(root, env)
    walked = root.with_name("walked")
    subprocess.run(["rm", "-rf", str(walked)], check=True)
    subprocess.run(["cp", "-a", str(root), str(walked)], check=True)
    subprocess.run(["rm", "-rf", str(walked / ".fsmem")], check=True)
    assert answers == _answers(walked, env)
    assert fsmem(root, "note", "- after: the fault", env=env).returncode == 0
    if command in ONE_FILE:  # its write, if made, is committed as its own by the next
        assert _git(root, "status", "--porcelain") == ""
        assert "outside fsmem" not in _git(root, "log", "--format=%s", "-4")
    assert fsmem(root, "consolidate", env=env).returncode in (0, 1)
    assert _git(root, "status", "--porcelain") == ""
    assert subprocess.run(["git", "fsck", "--no-progress"], cwd=root, capture_output=True).returncode == 0
