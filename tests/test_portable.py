"""fsmem without what only POSIX has: the core commands, the file lock, the host id.

CI runs on Linux only. The suite's core commands run here in a subprocess where
`fcntl`, `pwd`, `grp`, `termios` and `resource` cannot be imported and
`os.geteuid`, `getuid`, `getgid`, `chown`, `mkfifo` (and the other calls
Windows lacks) are gone, before fsmem loads (tests/hidden_modules.py). The lock
then takes the path it takes on Windows, `msvcrt.locking`, against real locks
between processes.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from hidden_modules import command, run_fsmem

from fsmem.store import host

NOW = "2026-11-30T09:00:00+00:00"


def fsmem(root, *args, input=None):
    done = run_fsmem(["--root", str(root), *args], posix=False, input=input, env={"FSMEM_NOW": NOW})
    assert done.returncode == 0, (args, done.stderr)
    assert "Traceback" not in done.stderr
    return done.stdout


def test_the_core_commands_run_without_posix_only_modules_and_calls(tmp_path):
    root = tmp_path / "mem"
    made = run_fsmem(["init", str(root)], posix=False, env={"FSMEM_NOW": NOW})
    assert made.returncode == 0, made.stderr
    noted = fsmem(root, "note", "- cycle: monthly", "--subject", "topics/Billing", "--session", "s1")
    assert noted.startswith("noted in sessions/2026/11/30/s1.md")
    assert "sessions/2026/11/30/s1.md" in fsmem(root, "ls")
    consolidated = fsmem(root, "consolidate")
    assert consolidated.startswith(f"{NOW} consolidated 1 of 1 note(s): 1 fact(s) added")
    assert "topics/billing.md:\n11:- cycle: monthly" in fsmem(root, "grep", "monthly")
    assert fsmem(root, "search", "cycle").startswith("topics/billing.md\n")
    assert "- cycle: monthly ([2026-11-30" in fsmem(root, "read", "topics/billing.md")
    assert fsmem(root, "write", "topics/plan.md", input="# Plan\n\nship it\n").startswith("wrote topics/plan.md")
    assert fsmem(root, "edit", "topics/plan.md", "--old", "ship it", "--new", "ship it on Friday").startswith(
        "edited topics/plan.md"
    )
    assert (root / "topics" / "plan.md").read_text().endswith("ship it on Friday\n")
    assert fsmem(root, "check").strip().endswith("[0 problem(s) in 6 files]")
    listed = json.loads(fsmem(root, "ls", "topics", "--json"))
    assert [item["path"] for item in listed["entries"]] == ["topics/billing.md", "topics/plan.md"]


def test_the_bootstrap_takes_away_what_windows_lacks(tmp_path):
    code = (
        "import importlib, os\n"
        "for name in ('fcntl', 'pwd', 'grp', 'termios', 'resource'):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError:\n"
        "        print(name, 'absent')\n"
        "print(sorted(c for c in ('geteuid', 'getuid', 'getgid', 'chown', 'mkfifo', 'fchmod') if hasattr(os, c)))\n"
    )
    done = run_fsmem(["-c", code], posix=False)
    assert done.stdout.splitlines() == [
        "fcntl absent",
        "pwd absent",
        "grp absent",
        "termios absent",
        "resource absent",
        "[]",
    ]


HOLD = """
import sys
from pathlib import Path
from fsmem.store.files import _lock_calls, file_lock
print(_lock_calls()[0].__name__, flush=True)
with file_lock(Path(sys.argv[1]), "write"):
    print("held", flush=True)
    sys.stdin.read()
"""

TRY = """
import sys, threading
from pathlib import Path
from fsmem.errors import LockTimeout
from fsmem.store.files import file_lock
root = Path(sys.argv[1])
try:
    with file_lock(root, "write", wait=False):
        print("taken")
except LockTimeout as exc:
    print("refused:", exc)
try:
    with file_lock(root, "write", timeout=0.3):
        print("taken after waiting")
except LockTimeout:
    print("timed out")
"""

REENTRANT = """
import sys, threading
from pathlib import Path
from fsmem.errors import LockTimeout
from fsmem.store.files import file_lock
root = Path(sys.argv[1])
with file_lock(root, "write"):
    with file_lock(root, "write", wait=False):
        print("re-entered")
        def other():
            try:
                with file_lock(root, "write", wait=False):
                    print("other thread took it")
            except LockTimeout as exc:
                print("other thread:", str(exc).split(" (")[0])
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
with file_lock(root, "write", wait=False):
    print("free again")
"""


@pytest.mark.parametrize("posix", [True, False], ids=["fcntl", "msvcrt"])
def test_the_lock_excludes_another_process_and_waits_or_not(tmp_path, posix):
    argv, env = command(["-c", HOLD, str(tmp_path)], posix=posix)
    holder = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        backend = holder.stdout.readline().strip()
        assert backend == ("lock_flock" if posix else "lock_msvcrt")
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        tried = run_fsmem(["-c", TRY, str(tmp_path)], posix=posix)
        assert tried.stdout.splitlines() == [
            f"refused: another fsmem process holds the 'write' lock ({tmp_path}/.fsmem/locks/write.lock); "
            "try again when it has finished",
            "timed out",
        ], tried.stderr
        assert time.monotonic() - started >= 0.3
    finally:
        holder.communicate("", timeout=30)
    again = run_fsmem(["-c", TRY, str(tmp_path)], posix=posix)
    assert again.stdout.splitlines() == ["taken", "taken after waiting"], again.stderr


@pytest.mark.parametrize("posix", [True, False], ids=["fcntl", "msvcrt"])
def test_the_lock_is_reentrant_in_its_thread_and_excludes_the_others(tmp_path, posix):
    done = run_fsmem(["-c", REENTRANT, str(tmp_path)], posix=posix)
    assert done.stdout.splitlines() == [
        "re-entered",
        "other thread: another thread holds the 'write' lock",
        "free again",
    ], done.stderr


def test_without_a_machine_id_the_host_id_is_kept_in_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "MACHINE_ID_FILES", (str(tmp_path / "no-machine-id"),))
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "h1")
    one, two = tmp_path / "one", tmp_path / "two"
    first = host.host_id(one)
    assert len((one / ".fsmem" / "host-id").read_text().strip()) == 32
    monkeypatch.setattr(socket, "gethostname", lambda: "renamed-by-the-network")
    assert host.host_id(one) == first  # the hostname does not enter it
    assert host.host_id(two) != first  # a second copy on the same machine
    assert host.host_id(one, "configured") == "configured"
    monkeypatch.setenv(host.HOST_ID_ENV, "from-env")
    assert host.host_id(one) == "from-env"


def test_with_a_machine_id_the_host_id_needs_no_state(tmp_path, monkeypatch):
    machine = tmp_path / "machine-id"
    machine.write_text("0123456789abcdef0123456789abcdef\n")
    monkeypatch.setattr(host, "MACHINE_ID_FILES", (str(machine),))
    root = tmp_path / "mem"
    first = host.host_id(root)
    assert first == host.host_id(root) and len(first) == 8
    assert not (root / ".fsmem").exists()


def test_the_package_claims_only_the_operating_system_it_is_tested_on():
    import tomllib

    from hidden_modules import REPO

    classifiers = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["classifiers"]
    assert [c for c in classifiers if c.startswith("Operating System")] == ["Operating System :: POSIX :: Linux"]
    guide = (REPO / "docs" / "guide.md").read_text()
    assert "declares only `Operating System :: POSIX :: Linux`" in guide
