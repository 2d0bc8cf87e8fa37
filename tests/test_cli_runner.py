"""tests/cli_runner.py: a command line run here answers as the `fsmem` process does, and leaves this process as
it found it."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import weakref

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.store import feed as feeds

NOW = "2026-11-30T12:00:00+00:00"


def environment() -> dict[str, str]:
    return {**without_fsmem(), "FSMEM_NOW": NOW}


def test_a_run_here_gives_a_process_bytes(tmp_path):
    """Stdin, the working folder, the environment, bytes that are not UTF-8, exit codes 0, 1 and 2."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "caf\udce9.md").write_bytes(b"# Caf\xe9\n- owner: Ann\n")  # a name and text not UTF-8
    env = environment()
    wrote = cli_runner.run(["write", "topics/a.md"], input="# A\n\n- owner: Bo\r\n", cwd=memory.root, env=env)
    assert wrote.returncode == 0, wrote.stderr
    for args in (
        ["ls", "topics"],
        ["grep", "owner"],
        ["read", "topics/a.md", "--json"],
        ["grep", "zebra"],
        ["read", "../x"],
        ["lss"],
        ["--version"],
    ):
        cli_runner.same_as_a_process(args, cwd=memory.root, env=env)
    via_env = cli_runner.same_as_a_process(["ls"], cwd=tmp_path, env={**env, "FSMEM_ROOT": str(memory.root)})
    assert b"topics/a.md" in via_env.stdout


def test_text_is_decoded_as_subprocess_decodes_it(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "crlf.md").write_bytes(b"one\r\ntwo\r\n")
    args = ["--root", str(memory.root), "read", "crlf.md"]
    here = cli_runner.run(args, text=True, env=environment())
    process = subprocess.run([cli_runner.FSMEM, *args], capture_output=True, text=True, env=environment())
    assert (here.returncode, here.stdout, here.stderr) == (process.returncode, process.stdout, process.stderr)
    assert "\r" not in here.stdout
    with pytest.raises(subprocess.CalledProcessError):
        cli_runner.run([*args[:3], "read", "missing.md"], check=True, env=environment())


def process_state() -> tuple:
    """What a command run here may change of the process: environment, folder, streams, root logger, SIGTERM."""
    return (
        dict(os.environ),
        os.getcwd(),
        (sys.stdin, sys.stdout, sys.stderr),
        logging.getLogger().handlers[:],
        logging.getLogger().level,
        signal.getsignal(signal.SIGTERM),
    )


def test_what_a_command_may_change_is_given_back(tmp_path):
    """Environment, folder, streams, loggers, signal handlers and exit functions: as before the run."""
    before = process_state()
    exits: list[str] = []
    with cli_runner._Borrowed(
        tmp_path, {"FSMEM_NOW": NOW, "TZ": "Asia/Tokyo"}, sys.stdin, sys.stdout, sys.stderr
    ) as left:
        assert os.getcwd() == str(tmp_path) and os.environ["TZ"] == "Asia/Tokyo" and "PATH" not in os.environ
        assert os.environ["COLUMNS"] == "80"  # what click sees of a pipe
        assert logging.getLogger().handlers == []  # pytest's capture is not a process's
        os.environ["FSMEM_AGENT"] = "left behind"
        os.chdir("/")
        logging.getLogger().addHandler(logging.NullHandler())
        logging.getLogger("fsmem.cli_runner_probe").setLevel(logging.DEBUG)
        signal.signal(signal.SIGTERM, lambda number, frame: None)
        atexit.register(exits.append, "flushed")
    after = process_state()
    assert after == before
    assert logging.getLogger("fsmem.cli_runner_probe").level == logging.NOTSET
    assert exits == [] and left == [(exits.append, ("flushed",), {})]  # for `run` to call at the command's end


def test_a_command_that_would_end_its_process_fails_the_test(tmp_path):
    with pytest.raises(AssertionError, match=r"os\._exit\(0\)"):
        with cli_runner._Borrowed(tmp_path, None, sys.stdin, sys.stdout, sys.stderr):
            os._exit(0)
    assert os._exit.__module__ == "posix"


def test_what_a_child_writes_to_descriptors_1_and_2_is_the_commands(tmp_path):
    with cli_runner._Descriptors() as written:
        subprocess.run(["sh", "-c", "echo out; echo err >&2"], check=True)
    assert written == {1: b"out\n", 2: b"err\n"}


def test_a_command_that_makes_the_first_finalizer_leaves_every_finalizer_working(tmp_path, monkeypatch):
    """weakref registers its exit hook (which turns every finalizer off) when the process makes its first one. Made
    by a command run here, that hook was taken for the command's own and run at its end: from then on no finalizer
    of the pytest process fired, and `Memory.close` gave no feed back (3 users of one were left after
    test_rendezvous.py), nor did a dropped `Memory` its feed or its git readers (about 90 `git cat-file` processes)."""
    memory = Memory.init(tmp_path / "mem")
    memory.ls()
    memory.ls()  # holds the feed of the memory
    feed = feeds.current(memory.root.resolve())
    assert feed is not None and feed.users == 1
    monkeypatch.setattr(weakref.finalize, "_registered_with_atexit", False)  # as if no finalizer was made yet
    monkeypatch.setattr(weakref.finalize, "_shutdown", False)
    done = cli_runner.run(["--root", memory.root, "ls"], env=environment())  # takes the running feed: a finalizer
    assert done.returncode == 0, done.stderr
    assert weakref.finalize._registered_with_atexit and not weakref.finalize._shutdown  # type: ignore[attr-defined]
    assert feed.users == 1 and feed.trusted  # the command gave its share back; the hook took none of the others
    memory.close()
    assert feed.users == 0 and feeds.current(memory.root.resolve()) is None
