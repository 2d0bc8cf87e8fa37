"""An `fsmem` command line run in a child forked from the test's process: a real process, without a start.

A test that kills a command at a chosen point (a SIGKILL from inside, `fsmem.store.kill_points`) needs a real
process to be killed, not a fresh interpreter: a child forked after fsmem and what its commands load are imported
costs none of the 150-300 ms of CPU a start and fsmem's imports cost, and dies of the same signal. The child runs
the command line as the `fsmem` script does (`fsmem.cli.main()` with it in sys.argv: a read may be asked of a
running watcher, a plain grep may exec rg) with `env` as its whole environment, stdin /dev/null, and stdout and
stderr in files the parent reads; it runs the exit functions it registered and ends with `os._exit`, never
running the parent's or pytest's. The parent must have one thread (a lock another thread held would stay held in the
child); a child that has not ended within `timeout` is killed and the test fails.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence

FSMEM = os.path.join(os.path.dirname(sys.executable), "fsmem")


def forked(
    args: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([FSMEM, *args], env=env, capture_output=True, text=True)`, in a forked child: its exit
    code, or minus the signal that ended it."""
    argv = [os.fspath(arg) for arg in args]
    assert threading.active_count() == 1, f"forking with other threads running: {threading.enumerate()}"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, which never returns
            _child(argv, env, out.fileno(), err.fileno())
        status = _wait(pid, timeout)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    return subprocess.CompletedProcess([FSMEM, *argv], os.waitstatus_to_exitcode(status), stdout, stderr)


def _child(argv: list[str], env: Mapping[str, str], out: int, err: int) -> None:
    code = 70
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the child's own streams
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [FSMEM, *argv]
        atexit._clear()  # the parent's are not the child's; its own run at its end, as a process's do
        from fsmem.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - what a process prints as a traceback, exit 1
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    """The child's wait status, once it has ended (its pidfd readable); killed after `timeout` seconds."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError(f"fsmem (forked) did not end within {timeout} s")
        return os.waitpid(pid, 0)[1]
    finally:
        os.close(fd)
