"""Guarded writes: read, ls and grep give each file's version; a write or edit with a stale version changes
nothing and names the current one, also when two processes race on one file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_env import without_fsmem

from fsmem import ChangedOnDisk, Memory
from fsmem.agents import tools
from fsmem.store.files import VERSION_HASH_LIMIT, file_version

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def test_read_ls_and_grep_give_the_version_git_would_give(tmp_path):
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    blob = subprocess.run(
        ["git", "-C", str(memory.root), "rev-parse", "HEAD:topics/billing.md"], capture_output=True, text=True
    ).stdout
    version = file_version(memory.root / "topics/billing.md")
    assert blob.startswith(version) and len(version) == 12
    read = memory.read("topics/billing.md")
    assert read.version == version and read.to_dict()["version"] == version
    assert read.to_text().splitlines()[-1].endswith(f"; version {version}]")
    assert {e.path: e.version for e in memory.ls("topics").entries} == {"topics/billing.md": version}
    assert memory.grep("cycle").to_dict()["versions"] == {"topics/billing.md": version}


def test_versions_exist_without_git_and_change_with_every_write(empty_memory):
    first = empty_memory.write("topics/a.md", "# A\n").version
    assert first == empty_memory.read("topics/a.md").version
    second = empty_memory.edit("topics/a.md", old="# A", new="# B", expected_version=first).version
    assert second != first and second == file_version(empty_memory.root / "topics/a.md")


def test_a_stale_version_changes_nothing_and_names_the_current_one(empty_memory):
    root = empty_memory.root
    stale = empty_memory.write("topics/a.md", "# A\n\n- owner: ann\n").version
    current = empty_memory.edit("topics/a.md", old="ann", new="bo").version
    before = (root / "topics/a.md").read_bytes()
    for attempt in (
        lambda: empty_memory.edit("topics/a.md", old="bo", new="cy", expected_version=stale),
        lambda: empty_memory.write("topics/a.md", "# gone\n", expected_version=stale),
        lambda: empty_memory.write("topics/a.md", None, set={"tags": ["x"]}, expected_version=stale),
    ):
        with pytest.raises(ChangedOnDisk, match=f"changed since version {stale}: its current version is {current}"):
            attempt()
        assert (root / "topics/a.md").read_bytes() == before
    assert empty_memory.edit("topics/a.md", old="bo", new="cy", expected_version=current).changed
    with pytest.raises(ChangedOnDisk, match="no longer exists"):
        empty_memory.write("topics/none.md", "# x\n", expected_version=current)
    env = without_fsmem()
    cli = subprocess.run(
        [FSMEM, "--root", str(root), "edit", "topics/a.md", "--old", "cy", "--new", "dee", "--if-version", stale],
        capture_output=True,
        text=True,
        env=env,
    )
    assert (
        cli.returncode == 2
        and "its current version is" in cli.stderr
        and b"dee" not in (root / "topics/a.md").read_bytes()
    )
    answer = tools.call(
        empty_memory, "edit", {"path": "topics/a.md", "old": "cy", "new": "dee", "expected_version": stale}
    )
    assert answer.is_error and "Read it again, then retry with version" in answer.text
    fresh = json.loads(
        subprocess.run(
            [FSMEM, "--root", str(root), "read", "topics/a.md", "--json"], capture_output=True, text=True, env=env
        ).stdout
    )["version"]
    ok = tools.call(empty_memory, "edit", {"path": "topics/a.md", "old": "cy", "new": "dee", "expected_version": fresh})
    assert not ok.is_error and ok.text.endswith(f"; version {file_version(root / 'topics/a.md')}")


def test_a_very_large_file_has_a_version_from_its_stat(empty_memory):
    big = empty_memory.root / "topics/big.md"
    big.parent.mkdir(parents=True, exist_ok=True)
    big.write_bytes(b"- line\n" * (VERSION_HASH_LIMIT // 7 + 10))
    version = empty_memory.read("topics/big.md", max_tokens=50).version
    assert version.startswith("s") and version == file_version(big)
    os.utime(big, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert file_version(big) != version
    # an edit of the same size whose mtime is put back (cp -p, rsync -t) moves the change time alone: a guarded
    # write holding the version from before is refused, not let through to overwrite it
    version, before = file_version(big), big.stat()
    with big.open("r+b") as handle:
        handle.write(b"- LINE\n")
    os.utime(big, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_version(big) != version
    with pytest.raises(ChangedOnDisk):
        empty_memory.edit("topics/big.md", old="- LINE", new="- mine", expected_version=version)


RACER = """
import sys
from fsmem import ChangedOnDisk, Memory
root, name = sys.argv[1], sys.argv[2]
memory = Memory(root)
page = memory.read("topics/race.md")
print("ready", flush=True)
sys.stdin.readline()  # both racers hold the same version before either edits
try:
    done = memory.edit("topics/race.md", old="- owner: start", new=f"- owner: {name}", expected_version=page.version)
    print("won", done.version)
except ChangedOnDisk as exc:
    print("lost", exc)
"""


@pytest.mark.slow
@pytest.mark.parametrize("with_git", [False, True])
def test_two_processes_racing_on_one_file_one_wins_the_other_changes_nothing(tmp_path, with_git):
    memory = Memory.init(tmp_path / "mem", git=with_git)
    for round_ in range(4):
        memory.write("topics/race.md", "# Race\n\n- owner: start\n")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(memory.root), f"p{n}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(2)
        ]
        for proc in procs:  # each has read the file: its version is the one it edits against
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:  # go, both at once
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outcomes = [p.communicate(timeout=120)[0].strip() for p in procs]
        won = [o for o in outcomes if o.startswith("won")]
        lost = [o for o in outcomes if o.startswith("lost")]
        assert len(won) == 1 and len(lost) == 1, outcomes
        winner_version = won[0].split()[1]
        assert f"its current version is {winner_version}" in lost[0], (round_, outcomes)
        text = (memory.root / "topics/race.md").read_text()
        assert text.count("- owner: p") == 1 and "- owner: start" not in text


def test_a_version_is_gits_blob_id_whichever_sha1_makes_it(monkeypatch):
    """A one-shot command hashes its first 256 KB with Python's own SHA-1, not OpenSSL's (importing hashlib
    cost a grep 2.5 ms); past that, and whenever hashlib is already loaded, with hashlib. Same digits."""
    import hashlib

    from fsmem.store import files

    def git(data: bytes) -> str:
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:12]

    monkeypatch.delitem(sys.modules, "hashlib")
    monkeypatch.setattr(files, "_builtin_hashed", [0])
    small, large = b"- owner: Ann\n" * 10, os.urandom(200 << 10)
    assert files.content_version(small) == git(small) and "hashlib" not in sys.modules
    assert files.content_version(large) == git(large) and "hashlib" not in sys.modules
    assert files._builtin_hashed[0] == len(b"blob 130\0") + len(small) + len(b"blob 204800\0") + len(large)
    assert files.content_version(large) == git(large) and "hashlib" in sys.modules  # past the 256 KB
    assert files._builtin_hashed[0] < 256 << 10
    assert files.content_version(small) == git(small)
