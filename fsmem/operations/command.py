"""Running the operator's command on one text: an argument list (never a shell), a timeout, an output cap.

The command gets the text on stdin and answers on stdout. It runs in a process group of its own, so that
on timeout the whole group is killed (an LLM CLI that started helpers leaves none behind); reading stops
once stdout passes the cap, and that is an error too. stderr is kept only to name why a command failed.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from fsmem.errors import InvalidArgument

DEFAULT_TIMEOUT = 120.0  # seconds per run
MAX_TIMEOUT = 3600.0  # fsmem.history.host_settings.MAX_TIMEOUT: the most distill.timeout may be set to
OUTPUT_CAP = 64 * 1024  # bytes of stdout taken from one run
STDERR_KEPT = 400  # characters of stderr that a failure names


class CommandFailed(Exception):
    """The command timed out, failed, or said too much: the message says which."""


def argv_of(command: str | Sequence[str]) -> list[str]:
    """The command as an argument list: a string is split as a POSIX shell would split it, but never run by one."""
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError as exc:
            raise InvalidArgument(f"the command cannot be split into arguments: {exc}") from None
    else:
        words = list(command)
    if not words or not all(isinstance(w, str) and w and "\x00" not in w for w in words):
        raise InvalidArgument("give the command to run, such as --command 'llm -m gpt-4o-mini'")
    return words


def run(argv: Sequence[str], text: str, *, timeout: float, cap: int = OUTPUT_CAP, cwd: str | None = None) -> str:
    """The command's stdout, given `text` on stdin; CommandFailed when it does not exit 0 within `timeout` seconds
    with at most `cap` bytes of valid UTF-8."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,  # its own process group, killed whole on timeout
        )
    except OSError as exc:
        raise CommandFailed(f"could not start {argv[0]!r}: {exc.strerror or exc}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    writer = threading.Thread(target=_feed, args=(proc.stdin, text.encode("utf-8", "surrogateescape")), daemon=True)
    writer.start()
    err: list[bytes] = []
    reader = threading.Thread(target=_keep, args=(proc.stderr, err), daemon=True)
    reader.start()
    out = bytearray()
    failure: str | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                failure = f"it did not finish within {timeout:g} s (killed; give more with --timeout)"
                break
            if not selector.select(min(left, 0.5)):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
            if len(out) > cap:
                failure = f"it wrote more than {cap} bytes (stopped reading; ask it for less)"
                break
    if failure is not None:
        _kill(proc)
    try:
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # stdout closed, the process lingers
        _kill(proc)
        failure = f"it did not finish within {timeout:g} s (killed; give more with --timeout)"
        code = proc.wait()
    reader.join(timeout=1)
    writer.join(timeout=1)
    for stream in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    if failure is not None:
        raise CommandFailed(failure)
    if code != 0:
        said = b"".join(err).decode("utf-8", "replace").strip().splitlines()
        tail = f": {said[-1][:STDERR_KEPT]}" if said else ""
        raise CommandFailed(f"it exited with code {code}{tail}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandFailed("its output is not UTF-8 text") from None


def _feed(stream, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.write(data)
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def _keep(stream, kept: list[bytes]) -> None:
    size = 0
    with contextlib.suppress(OSError, ValueError):
        for chunk in iter(lambda: stream.read1(4096), b""):
            if size < 4 * STDERR_KEPT:
                kept.append(chunk)
                size += len(chunk)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group (the command alone where there are no groups)."""
    if hasattr(os, "killpg"):
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
