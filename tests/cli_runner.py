"""An `fsmem` command line run in the test's own process, answered as `subprocess.run` answers a real one.

Most CLI tests ask what a command prints and how it exits; the process around it (a Python start and fsmem's
imports, 100-200 ms of CPU a command) is not their subject. `run` takes the command line the `fsmem` script
takes, through `fsmem.cli.main` (the script's `--version` answer and `dispatch`: the lean grep and click, one
error boundary), with the process's view of the world made the command's own for its duration: the working
folder, the whole environment (FSMEM_*, FSMEM_NOW, TZ), stdin, stdout and stderr (text over bytes, as the
interpreter opens them under a UTF-8 locale, never a terminal; COLUMNS as a pipe gives click), the root logger
without pytest's handlers (a warning goes to the command's stderr, as logging's last resort writes it in a
process), the signal handlers, the change feeds it started, and the functions it left for the exit (`atexit`:
the token-count memo's flush), run at its end as a process's exit runs them (weakref's own hook, registered by
whichever code makes the process's first finalizer, stays this process's), and file descriptors 1 and 2 (what
a child such as git writes there). A command that would end its
process at once (`os._exit`: the hook's time limit) fails the test instead, never pytest. Everything is put back
afterwards, so commands run one at a time (a lock): never from threads at once.

`real` runs the same command line as a process; each converted module keeps at least one test per command family
asserting the two give the same bytes (`same_as_a_process`). Tests whose subject is the process (a signal, a
terminal, the start-up imports, the lean grep's exec of rg, a closed stdin, the hook's time limit, which ends
the process with `os._exit`) keep a real process.
"""

from __future__ import annotations

import atexit
import gc
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

FSMEM = str(Path(sys.executable).with_name("fsmem"))
_one_at_a_time = threading.Lock()
_COLUMNS = {"COLUMNS": "80", "LINES": "24"}  # what shutil.get_terminal_size gives a process whose stdout is a pipe
_FINALIZERS_EXIT = weakref.finalize._exitfunc.__func__  # type: ignore[attr-defined]


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    stdin: int | IO[Any] | None = None,
    text: bool = False,
    check: bool = False,
    capture_output: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run([FSMEM, *args], capture_output=True, ...)`, run here: the same code, stdout and stderr
    (str with `text`, translated newlines included; else bytes). `env` is the command's whole environment, as
    for a process; stdin is `input`, else the bytes of the file `stdin` names (a file object or descriptor),
    else empty (a process's stdin under pytest is /dev/null). `timeout` is accepted and not enforced."""
    del capture_output, timeout  # always captured; a command run here cannot be stopped from outside
    argv = [os.fspath(arg) for arg in args]
    given = _stdin_bytes(input, stdin)
    with _one_at_a_time:
        code, out, err = _run_here(argv, given, cwd, env)
    stdout: str | bytes = decoded(out) if text else out
    stderr: str | bytes = decoded(err) if text else err
    done = subprocess.CompletedProcess([FSMEM, *argv], code, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def real(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    stdin: int | IO[Any] | None = None,
    text: bool = False,
    check: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[Any]:
    """The same command line as a real `fsmem` process, stdin /dev/null unless given."""
    if input is None and stdin is None:
        stdin = subprocess.DEVNULL
    if isinstance(input, str) and not text:
        input = input.encode("utf-8")
    return subprocess.run(
        [FSMEM, *[os.fspath(arg) for arg in args]],
        cwd=cwd,
        env=None if env is None else dict(env),
        input=input,
        stdin=stdin,
        text=text,
        check=check,
        capture_output=True,
        timeout=timeout,
    )


def same_as_a_process(
    args: Sequence[str | os.PathLike[str]], *, text: bool = False, **how: Any
) -> subprocess.CompletedProcess[Any]:
    """Run `args` here and as a process; assert the code, stdout and stderr are the same bytes; the answer
    (decoded as `run` decodes it, with `text`)."""
    here, process = run(args, **how), real(args, **how)
    assert (here.returncode, here.stdout, here.stderr) == (process.returncode, process.stdout, process.stderr), (
        f"{args}: here {here.returncode} {here.stdout[:400]!r} {here.stderr[:400]!r}; "
        f"as a process {process.returncode} {process.stdout[:400]!r} {process.stderr[:400]!r}"
    )
    if text:
        here.stdout, here.stderr = decoded(here.stdout), decoded(here.stderr)
    return here


def fsmem_here(root: str | os.PathLike[str], *args: str, now: str, **variables: str) -> tuple[int, str, str]:
    """`fsmem --root ROOT ARGS` run here on the clock `now` (FSMEM_NOW), with `variables` added to this process's
    environment for the run: exit code, stdout, stderr (text). For the runs of a test whose subject is what a
    command does to the memory (a consolidate again after a real one was SIGKILLed, a sync's merge), not its
    process."""
    done = run(["--root", root, *args], env={**os.environ, "FSMEM_NOW": now, **variables}, text=True)
    return done.returncode, done.stdout, done.stderr


def _stdin_bytes(input: str | bytes | None, stdin: int | IO[Any] | None) -> bytes:
    if input is not None:
        return input.encode("utf-8") if isinstance(input, str) else input
    if stdin is None or stdin in (subprocess.DEVNULL, subprocess.PIPE):
        return b""
    if isinstance(stdin, int):
        with os.fdopen(os.dup(stdin), "rb") as handle:
            return handle.read()
    data = stdin.read()
    return data.encode("utf-8") if isinstance(data, str) else data


def decoded(data: bytes, errors: str = "strict") -> str:
    """As `subprocess.run(text=True)` decodes: the locale's UTF-8, universal newlines."""
    return data.decode("utf-8", errors).replace("\r\n", "\n").replace("\r", "\n")


def _run_here(
    argv: list[str], given: bytes, cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None
) -> tuple[int, bytes, bytes]:
    from fsmem.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(given), encoding="utf-8", errors="surrogateescape")
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    with _Descriptors() as written, _Borrowed(cwd, env, stdin, stdout, stderr) as exits:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc, stderr)
        except BaseException:  # noqa: BLE001 - what a process prints as a traceback, exit 1
            stderr.write(traceback.format_exc())
            code = 1
        for function, args, kwargs in reversed(exits):  # the process's exit
            function(*args, **kwargs)
    stdout.flush()
    stderr.flush()
    return code, out.getvalue() + written[1], err.getvalue() + written[2]


class _Descriptors:
    """File descriptors 1 and 2 pointed at files of their own while the command runs: what a child it starts
    (git, rg) or C code writes there is the command's output too, as it is a process's (after what it printed
    through sys.stdout and sys.stderr, whose order with it is not kept)."""

    def __enter__(self) -> dict[int, bytes]:
        import tempfile

        self.written: dict[int, bytes] = {1: b"", 2: b""}
        self.files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
        self.saved = {fd: os.dup(fd) for fd in (1, 2)}
        for fd, file in self.files.items():
            os.dup2(file.fileno(), fd)
        return self.written

    def __exit__(self, *exc: object) -> None:
        for fd, file in self.files.items():
            os.dup2(self.saved[fd], fd)
            os.close(self.saved[fd])
            file.seek(0)
            self.written[fd] = file.read()
            file.close()


def _exit_code(exc: SystemExit, stderr: IO[str]) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    stderr.write(f"{exc.code}\n")  # the interpreter prints a message it exits with
    return 1


class _Borrowed:
    """The process's folder, environment, streams, logging, signal handlers, change feeds and exit functions,
    the command's while it runs, and given back as they were."""

    def __init__(self, cwd: Any, env: Mapping[str, str] | None, stdin: IO[str], stdout: IO[str], stderr: IO[str]):
        self.cwd, self.env, self.streams = cwd, env, (stdin, stdout, stderr)
        self.exits: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []

    def __enter__(self) -> list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
        from fsmem.store import feed

        self.saved_env = dict(os.environ)
        self.saved_cwd = os.getcwd()
        self.saved_streams = sys.stdin, sys.stdout, sys.stderr
        root = logging.getLogger()
        self.saved_logging = root.handlers[:], root.level, logging.lastResort
        self.saved_loggers = {
            name: (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
            for name, logger in logging.Logger.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)
        }
        self.saved_signals = {number: signal.getsignal(number) for number in _catchable()}
        self.saved_feeds = feed._feeds.snapshot()
        self.saved_register = atexit.register
        self.saved_exit = os._exit
        self.ended: list[int] = []
        environment = dict(os.environ if self.env is None else self.env)
        for name, value in _COLUMNS.items():
            environment.setdefault(name, value)
        _set_environment(environment)
        if self.cwd is not None:
            os.chdir(self.cwd)
        sys.stdin, sys.stdout, sys.stderr = self.streams
        root.handlers, root.level = [], logging.WARNING  # a process's: pytest's capture is not there
        exits = self.exits

        def register(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
            if getattr(function, "__func__", None) is _FINALIZERS_EXIT:
                # weakref's own hook, registered by the process's first finalizer, whichever code made it: run at a
                # command's end, it would turn every finalizer of this process off for good (none would fire again:
                # a feed or a cat-file reader given back by one would stay)
                return self.saved_register(function, *args, **kwargs)
            exits.append((function, args, kwargs))
            return function

        atexit.register = register  # type: ignore[assignment]
        os._exit = self.ended.append  # type: ignore[assignment]  # never this process's end: the test fails
        return exits

    def __exit__(self, *exc: object) -> None:
        from fsmem.store import feed

        atexit.register = self.saved_register  # type: ignore[assignment]
        os._exit = self.saved_exit
        if feed._feeds.snapshot() != self.saved_feeds:
            gc.collect()  # a memory the command dropped gives its feed back (`Memory.close`)
        for key, started in feed._feeds.snapshot().items():  # a process's feeds end with it
            if self.saved_feeds.get(key) is not started:
                feed._feeds.forget(key)
                started.close()
        for number, handler in self.saved_signals.items():
            if signal.getsignal(number) is not handler and handler is not None:
                signal.signal(number, handler)
        for name, logger in logging.Logger.manager.loggerDict.items():
            if not isinstance(logger, logging.Logger):
                continue
            handlers, level, propagate, disabled = self.saved_loggers.get(name, ([], logging.NOTSET, True, False))
            logger.handlers, logger.propagate, logger.disabled = handlers, propagate, disabled
            logger.setLevel(level)
        root = logging.getLogger()
        root.handlers, logging.lastResort = self.saved_logging[0], self.saved_logging[2]
        root.setLevel(self.saved_logging[1])
        sys.stdin, sys.stdout, sys.stderr = self.saved_streams
        os.chdir(self.saved_cwd)
        _set_environment(self.saved_env)
        if self.ended:  # what came after it here, a process would not have run: its subject is the process
            raise AssertionError(f"the command ended its process (os._exit({self.ended[0]})): run it with `real`")


def _set_environment(environment: Mapping[str, str]) -> None:
    tz = os.environ.get("TZ")
    for name in [name for name in os.environ if name not in environment]:
        del os.environ[name]
    for name, value in environment.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    if os.environ.get("TZ") != tz:
        time.tzset()


def _catchable() -> list[signal.Signals]:
    return [number for number in signal.Signals if number not in (signal.SIGKILL, signal.SIGSTOP)]
