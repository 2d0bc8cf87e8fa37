"""An `fsmem` command line run in a child forked from the test's process: a real process, without a start.

A test that kills a command at a chosen point (a SIGKILL from inside, `fsmem.store.kill_points`), stops a watcher
or asks one from another process needs a real process, not a fresh interpreter: a child forked after fsmem and what
its commands load are imported costs none of the 150-800 ms of CPU a start and fsmem's imports cost, and a signal
ends it as it ends a started one. The child runs the command line as the `fsmem` script does (`fsmem.cli.main()`
with it in sys.argv: a read may be asked of a running watcher, a plain grep may exec rg) with `env` as its whole
environment, its own folder, stdin, stdout and stderr, a process's logging (no pytest handlers: a warning reaches
stderr) and signal handlers; it ends as a process ends (its other threads waited for, then the exit functions it
registered), with `os._exit`, never running the parent's or pytest's. The parent must have one thread (a lock another thread held would stay held in the child):
a thread still running is waited for (a closed change feed's check ends at once), and a test fails on one that
does not end.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

FSMEM = os.path.join(os.path.dirname(sys.executable), "fsmem")


class Child:
    """A forked `fsmem`, answered as `subprocess.Popen` answers for a started one (pid, poll, wait, signals)."""

    def __init__(self, pid: int, args: list[str]):
        self.pid, self.args = pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (minus the signal that ended it), once its pidfd says it has ended."""
        if self.returncode is None:
            fd = os.pidfd_open(self.pid)
            try:
                if not select.select([fd], [], [], timeout)[0]:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
            finally:
                os.close(fd)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> Child:
    """`subprocess.Popen([FSMEM, *args], env=env, cwd=cwd, ...)` as a forked child; `stdin`, `stdout` and `stderr`
    are file descriptors (else /dev/null), which the child takes as its 0, 1 and 2."""
    argv = [os.fspath(arg) for arg in args]
    for thread in threading.enumerate():  # one told to stop (a closed change feed's check) ends first
        if thread is not threading.current_thread():
            thread.join(10)
    assert threading.active_count() == 1, f"forking with other threads running: {threading.enumerate()}"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, which never returns
        _child(argv, env, cwd, (stdin, stdout, stderr))
    return Child(pid, [FSMEM, *argv])


def forked(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    input: bytes = b"",
    text: bool = True,
    timeout: float = 120,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run([FSMEM, *args], env=env, cwd=cwd, input=input, capture_output=True)` as a forked child (str
    with `text`, else bytes): its exit code, or minus the signal that ended it. Killed after `timeout` seconds."""
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        given.write(input)
        given.seek(0)
        child = start(args, env=env, cwd=cwd, stdin=given.fileno(), stdout=out.fileno(), stderr=err.fileno())
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if text:
        return subprocess.CompletedProcess(child.args, code, stdout.decode("utf-8"), stderr.decode("utf-8"))
    return subprocess.CompletedProcess(child.args, code, stdout, stderr)


def _child(
    argv: list[str], env: Mapping[str, str], cwd: str | os.PathLike[str] | None, fds: tuple[int | None, ...]
) -> None:
    code = 70
    try:
        for target, fd in enumerate(fds):
            if fd is None:
                fd = os.open(os.devnull, os.O_RDONLY if target == 0 else os.O_WRONLY)
            os.dup2(fd, target)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the child's own streams
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        root = logging.getLogger()
        root.handlers, root.level = [], logging.WARNING  # a process's: pytest's capture is not there
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.argv = [FSMEM, *argv]
        atexit._clear()  # the parent's are not the child's; its own run at its end, as a process's do
        from fsmem.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                sys.stderr.write(f"{exc.code}\n")
        except BaseException:  # noqa: BLE001 - what a process prints as a traceback, exit 1
            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined]  # a process's end: its other threads are waited for,
        atexit._run_exitfuncs()  # then its exit functions run
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
