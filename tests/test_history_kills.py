"""Crash recovery (issue #18, finding 10): a git lock, a half-done merge or a stuck commit left by a killed fsmem
is cleared when nothing alive holds it, reported by `check` until then, and a lock a live git holds is never
removed. fsmem killed at every git step of write, consolidate and sync (tests/kill_scenario.py) converges."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import kill_scenario as K
import preloaded
import pytest

from fsmem import Memory
from fsmem.history import recovery


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    """This process's writes on the day every process kill_scenario starts runs on (else each test, reading the
    real date, would run again on a moved day: tests/conftest.py)."""
    monkeypatch.setenv("FSMEM_NOW", K.NOW)


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory) -> Path:
    return K.install_wrapper(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> K.Hosts:
    return K.build(tmp_path_factory.mktemp("hosts") / "template")


@pytest.fixture(scope="module")
def steps(template, wrapper, tmp_path_factory):
    """The git commands a command runs on host a from the template's state, counted once a module."""
    counted: dict[str, list[str]] = {}

    def of(command: str) -> list[str]:
        if command not in counted:
            counted[command] = K.steps(template, tmp_path_factory.mktemp("counted") / command, command, wrapper)
        return counted[command]

    return of


def killed_copy(
    template: K.Hosts, tmp_path: Path, command: str, step: str, mode: str, wrapper: Path, calls: list[str]
) -> K.Hosts:
    """A copy of the two hosts with `command` killed on host a at its first git call of `step` (of `calls`)."""
    at = calls.index(step) + 1
    hosts = template.copy(tmp_path / "hosts")
    path = f"{wrapper}{os.pathsep}{os.environ.get('PATH', '')}"
    out = K.fsmem(
        hosts.a,
        *K.COMMANDS[command],
        check=False,
        PATH=path,
        KILLGIT_LOG=str(tmp_path / "killed.log"),
        KILLGIT_AT=str(at),
        KILLGIT_MODE=mode,
    )
    assert out.returncode == -9, out.stderr
    return hosts


def test_a_write_killed_holding_index_lock_is_reported_then_cleared_and_sync_converges(
    template, wrapper, steps, tmp_path
):
    hosts = killed_copy(template, tmp_path, "write", "update-index", "lock", wrapper, steps("write"))
    lock = hosts.a / ".git" / "index.lock"
    assert lock.exists()
    check = K.fsmem(hosts.a, "check", check=False)
    assert check.returncode == 1
    assert (
        f".git/index.lock:1: history: .git/index.lock is left by a killed git (no git runs in {hosts.a}); "
        "the next fsmem write or sync removes it"
    ) in check.stdout
    fresh = subprocess.run(  # a fork of the preloaded parent answers as a fresh fsmem process does
        [K.FSMEM, "--root", str(hosts.a), "check"], capture_output=True, text=True, env=K.env(FSMEM_HOST_ID="a")
    )
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (check.returncode, check.stdout, check.stderr)
    for number in range(3):  # writes go on, and each is committed
        hosts.note(hosts.a, "people/Bo Chen", f"- shoe size: {40 + number}")
    assert "shoe size: 42" in K.git(hosts.a, "show", "HEAD:sessions/2026/11/30/default-a.md")
    assert K.fsmem(hosts.a, "sync").stdout.startswith("origin/main: merged; pushed")
    K.fsmem(hosts.b, "sync")
    assert K.problems(hosts) == []


def test_a_sync_killed_after_git_merge_leaves_a_merge_check_reports_and_the_next_sync_aborts(
    template, wrapper, steps, tmp_path
):
    hosts = killed_copy(template, tmp_path, "sync", "merge", "after", wrapper, steps("sync"))
    assert (hosts.a / ".git" / "MERGE_HEAD").exists()
    check = K.fsmem(hosts.a, "check", check=False)
    assert check.returncode == 1 and ".git/MERGE_HEAD:1: history: .git/MERGE_HEAD: a merge of a killed" in check.stdout
    assert "the next fsmem sync or consolidate aborts it" in check.stdout
    hosts.note(hosts.a, "people/Bo Chen", "- role: between the kill and the sync")
    K.fsmem(hosts.a, "sync")
    K.fsmem(hosts.b, "sync")
    assert K.problems(hosts) == []


def test_a_merge_a_person_started_is_left_alone_and_sync_and_consolidate_say_how_to_finish_it(template, tmp_path):
    hosts = template.copy(tmp_path / "hosts")
    K.git(hosts.a, "fetch", "-q", "origin")
    started = subprocess.run(
        ["git", "-C", str(hosts.a), "merge", "--no-commit", "--no-ff", "origin/main"],
        capture_output=True,
        text=True,
        env=K.env(),
    )
    assert started.returncode == 0 and (hosts.a / ".git" / "MERGE_HEAD").exists()  # for the person to commit
    before = K.git(hosts.a, "rev-parse", "HEAD")
    for args in (["sync"], ["consolidate"]):
        out = K.fsmem(hosts.a, *args, check=False)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert ".git/MERGE_HEAD: a merge someone started is not finished" in out.stderr
        assert f"finish it (git -C {hosts.a} commit) or abort it (git -C {hosts.a} merge --abort)" in out.stderr
    assert (hosts.a / ".git" / "MERGE_HEAD").exists() and K.git(hosts.a, "rev-parse", "HEAD") == before
    K.git(hosts.a, "merge", "--abort")
    K.fsmem(hosts.a, "sync")
    K.fsmem(hosts.b, "sync")
    assert K.problems(hosts) == []


EDITOR = 'sh -c \'while [ ! -f "$GO" ]; do sleep 0.05; done; echo "a person commits" > "$1"\' --'


def test_a_lock_a_live_git_holds_is_never_removed_sync_waits_for_it(template, tmp_path):
    hosts = template.copy(tmp_path / "hosts")
    go = tmp_path / "go"
    with open(hosts.a / "profile" / "identity.md", "a") as handle:  # a person's edit, committed by hand
        handle.write("\nEdited by hand.\n")
    person = subprocess.Popen(
        ["git", "-C", str(hosts.a), "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-a", "-q"],
        env=K.env(GIT_EDITOR=EDITOR, GO=str(go)),
    )
    lock = hosts.a / ".git" / "index.lock"
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock.exists()
    repo = Memory(hosts.a).history
    [held] = recovery.clear_locks(repo)  # nothing removed: the person's git holds it
    assert held.holder == f"git commit (pid {person.pid})" and lock.exists()
    check = K.fsmem(hosts.a, "check", check=False)
    assert f".git/index.lock is held by git commit (pid {person.pid}); wait for it to finish" in check.stdout
    sync = preloaded.start(["--root", str(hosts.a), "sync"], env=K.env(), stderr=subprocess.PIPE)
    time.sleep(1.0)
    assert sync.poll() is None and lock.exists()  # the sync waits
    go.write_text("")
    assert person.wait(timeout=30) == 0  # the person's commit went through: its lock was never taken from it
    assert sync.wait(timeout=120) == 0, sync.stderr.read()
    assert "a person commits" in K.git(hosts.a, "log", "--format=%s")
    K.fsmem(hosts.b, "sync")
    assert K.problems(hosts) == []


def test_where_the_holder_cannot_be_told_nothing_is_removed_and_check_gives_the_command(
    template, tmp_path, monkeypatch
):
    hosts = template.copy(tmp_path / "hosts")
    lock = hosts.a / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    proc = recovery.PROC
    monkeypatch.setattr(recovery, "PROC", tmp_path / "no-proc")  # a system without /proc
    memory = Memory(hosts.a)
    started = time.monotonic()
    note = memory.note("- shoe size: 41", subject="people/Bo Chen").path  # done; its commit cannot be
    assert time.monotonic() - started < 5  # refused at once, not after 40 attempts
    assert lock.exists() and "shoe size" not in K.git(hosts.a, "log", "-1", "--format=%s")
    logged = json.loads((hosts.a / ".fsmem/logs/history.jsonl").read_text().splitlines()[-1])
    assert f"if no git is running in {hosts.a}, remove it: rm {lock}" in logged["error"]
    [entry] = os.listdir(hosts.a / ".fsmem/history/journal")
    old = time.time() - 120
    os.utime(hosts.a / ".fsmem/history/journal" / entry, (old, old))
    problems = {path: message for path, _, message in memory.check().problems}
    assert problems[".git/refs/heads/main.lock"] == (
        "history: .git/refs/heads/main.lock exists: a git process holds it, or one was killed holding it (fsmem "
        f"cannot tell here); if no git is running in {hosts.a}, remove it: rm {lock}"
    )
    assert problems[".fsmem/history/journal"].startswith(
        "history: 1 write(s) are not committed yet (the writes stay pending, not committed: "
    )
    monkeypatch.setattr(recovery, "PROC", proc)  # /proc again: the lock is stale, the next write clears it and
    # commits both (the clock stays pinned: an undo of every patch would let this write read today's date)
    Memory(hosts.a).note("- shoe size: 42", subject="people/Bo Chen")
    assert not lock.exists() and not os.listdir(hosts.a / ".fsmem/history/journal")
    assert "shoe size: 41" in K.git(hosts.a, "show", f"HEAD:{note}")


MUST_SEE = {
    "write": {"update-ref", "update-index"},
    "consolidate": {"status", "update-ref", "update-index"},
    "sync": {"fetch", "status", "merge", "add", "commit", "update-ref", "update-index", "push"},
}
AFTER = {"merge", "commit"}  # steps that leave a state of their own (a merge under way, one concluded)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["write", "consolidate", "sync"])
def test_a_kill_at_every_git_step_converges_on_both_hosts(command, template, wrapper, steps, tmp_path):
    """Every git step in `lock` mode (killed holding its locks, or just before a step that takes none), and in
    `after` mode for the merge, its commit and the last step (benchmarks/hostile_kills.py: both modes at every
    step). A kill in `after` mode is otherwise a kill before the next step, which `lock` mode covers."""
    calls = steps(command)
    assert MUST_SEE[command] <= set(calls), calls
    failures = []
    seen: dict[str, int] = {}
    recovered = 0
    for number, call in enumerate(calls, 1):
        modes = ["lock"] + (["after"] if call in AFTER or number == len(calls) else [])
        for mode in modes:
            outcome = K.converge(template, tmp_path / f"{number}-{mode}", command, number, mode, wrapper, seen)
            recovered += outcome.same_as is None
            if not outcome.converged:
                failures.append((number, call, mode, outcome.problems))
    assert failures == []
    assert recovered >= len(MUST_SEE[command])  # most kills leave a state of their own


def test_a_write_that_cannot_point_the_index_leaves_it_to_the_next_commit_and_the_killed_merge_still_aborts(
    template, wrapper, steps, tmp_path
):
    """A sync killed in its merge leaves index.lock; the next write commits while a git still runs in the
    repository (the killed git's process not yet gone, a person's `git add`), so the lock cannot be taken from it
    and the index cannot be pointed at the write. The write is committed all the same; `check` says the index is
    behind; the next sync points it first, then aborts the killed merge (git refuses to abort a merge over a
    committed file the index does not hold) and converges."""
    hosts = killed_copy(template, tmp_path, "sync", "add", "lock", wrapper, steps("sync"))
    assert (hosts.a / ".git" / "MERGE_HEAD").exists() and (hosts.a / ".git" / "index.lock").exists()
    holder = subprocess.Popen(  # a live git in the repository: it waits for its input
        ["git", "-C", str(hosts.a), "hash-object", "--stdin"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    text = "- role: written while a git ran"
    try:
        with K.pinned_clock():
            note = Memory(hosts.a).note(text, subject="people/Bo Chen").path
        hosts.acknowledged.append(text)
    finally:
        holder.communicate(b"", timeout=30)
    assert "written while a git ran" in K.git(hosts.a, "show", f"HEAD:{note}")
    assert K.git(hosts.a, "ls-files", "--", note) == ""  # committed, and the index does not hold it
    check = K.fsmem(hosts.a, "check", check=False)
    assert "history: git's index is behind HEAD at 1 path(s) fsmem committed while a git held it" in check.stdout
    K.fsmem(hosts.a, "sync")
    K.fsmem(hosts.b, "sync")
    assert K.problems(hosts) == []


def test_an_index_left_behind_is_pointed_by_the_next_write_and_git_status_is_clean_again(template, tmp_path):
    hosts = template.copy(tmp_path / "hosts")
    (hosts.a / ".git" / "index.lock").write_text("")  # left by a killed git
    holder = subprocess.Popen(  # while a git runs in the repository, fsmem cannot tell the lock is stale
        ["git", "-C", str(hosts.a), "hash-object", "--stdin"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        with K.pinned_clock():
            first = Memory(hosts.a).note("- city: Bern", subject="people/Dee Park").path
    finally:
        holder.communicate(b"", timeout=30)
    assert "city: Bern" in K.git(hosts.a, "show", f"HEAD:{first}")
    assert recovery.index_behind(Memory(hosts.a).history) == [first]
    assert K.git(hosts.a, "status", "--porcelain", "--", first) != ""  # what git says while the index is behind
    with K.pinned_clock():
        second = Memory(hosts.a).note("- city: Oslo", subject="topics/travel", session="review").path
    assert second != first  # another file: the first is pointed because it was left behind
    assert recovery.index_behind(Memory(hosts.a).history) == []
    assert not (hosts.a / ".git" / "index.lock").exists()
    assert K.git(hosts.a, "status", "--porcelain") == ""
