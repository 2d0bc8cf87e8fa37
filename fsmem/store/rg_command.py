"""rg's command line: which binary, and the options every pass of a grep shares.

Apart from `fsmem.store.rg`, which runs it, so that a plain grep from the shell can build the same command
line before the rest of fsmem is imported and start rg while Python still imports (`fsmem.cli.early`):
this module imports only the standard library's lightest parts and `fsmem.names`.
"""

from __future__ import annotations

import os
import sys
import sysconfig

from fsmem.errors import FsmemError, InvalidArgument
from fsmem.names import MAX_DEPTH, STATE_DIR

# Above this size a memory file is no one's note (a sparse 4 GB file costs no disk): history never commits it,
# grep never opens it (rg held a 4 GB line of NULs and stopped the grep of the whole memory at its timeout), read
# reads no file past it; each says so, and the file stays on disk as it is. `fsmem.store.meta` gives it to the rest.
LEFT_OUT_LIMIT = 64 * 1024 * 1024

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing before rg starts
if TYPE_CHECKING:
    from collections.abc import Iterator
    from subprocess import Popen

# A pattern's cost is bounded before rg runs: its length, and what rg may build from it. rg's memory
# grows with the square of a regex's length (a 4 KB pattern of bounded repeats took 1.2 GB, a 30 KB one
# asked for 6.5 GB; 1,000 characters stay under 100 MB), a fixed string's does
# not (200 KB: 25 MB), and an argument past 128 KiB cannot be passed to a process at all.
MAX_PATTERN_CHARS = 1000
MAX_FIXED_CHARS = 10_000
REGEX_SIZE_LIMIT = "16M"  # rg's cap on a compiled regex (its default, 100M, let 256 characters take 260 MB)
DFA_SIZE_LIMIT = "64M"  # and on its lazy DFA's cache, per thread (default 1000M)


_beside_python: list[str] = []  # where the wheel puts rg, worked out once (sysconfig's expansion costs each grep)


def find_rg() -> str:
    """The `rg` binary: the one the `ripgrep` wheel installed beside this Python, else PATH."""
    if not _beside_python:
        _beside_python[:] = [
            os.path.join(sysconfig.get_path("scripts"), "rg"),
            os.path.join(os.path.dirname(sys.executable), "rg"),
        ]
    for candidate in _beside_python:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    import shutil

    found = shutil.which("rg")
    if found:
        return found
    raise FsmemError("ripgrep (rg) is not installed; install fsmem with pip, which brings the 'ripgrep' package")


def check_pattern(pattern: str, *, fixed_strings: bool = False) -> None:
    """Refuse a pattern longer than rg may be given (InvalidArgument, with the bound)."""
    bound = MAX_FIXED_CHARS if fixed_strings else MAX_PATTERN_CHARS
    if len(pattern) > bound:
        kind = "a fixed string (-F)" if fixed_strings else "a regular expression"
        more = "" if fixed_strings else f", or search for a fixed string with -F (up to {MAX_FIXED_CHARS:,})"
        raise InvalidArgument(
            f"the pattern is {len(pattern):,} characters; {kind} may have at most {bound:,}: "
            f"look for a shorter part of it{more}"
        )


def build_args(
    pattern: str,
    *,
    ignore_case: bool = False,
    fixed_strings: bool = False,
    word: bool = False,
) -> list[str]:
    """The rg options every pass shares: which files, how to match (the pattern checked by `check_pattern`)."""
    check_pattern(pattern, fixed_strings=fixed_strings)
    args = [
        "--no-config",
        "--no-ignore",
        "--iglob",
        "*.md",
        "--iglob",
        "*.markdown",
        # a name with a control character is not memory, and a newline in it would forge output lines
        # (a negation must be an --iglob too: rg applies --iglob after --glob)
        "--iglob",
        "!*[\x01-\x1f\x7f]*",
        "--glob",
        f"!{STATE_DIR}/",
        "--text",  # memory files are text: a stray NUL byte must not make rg skip a whole file as binary
        "--max-filesize",
        str(LEFT_OUT_LIMIT),  # named by the answer instead (fsmem.operations.reads.grep)
        "--max-depth",
        str(MAX_DEPTH),  # no memory file lies deeper; a path past PATH_MAX there failed the whole grep
        "--regex-size-limit",
        REGEX_SIZE_LIMIT,
        "--dfa-size-limit",
        DFA_SIZE_LIMIT,
    ]
    if ignore_case:
        args.append("--ignore-case")
    if fixed_strings:
        args.append("--fixed-strings")
    if word:
        args.append("--word-regexp")
    args.extend(["--regexp", pattern])
    return args


def line_args(max_line_chars: int, context: int, *, heading: bool = False) -> list[str]:
    """How a grep's line pass prints: `PATH\\0NUMBER:TEXT` lines, a long line cut to a preview; with `heading`
    (a first pass over many files), each file's `PATH\\0` once, then its `NUMBER:TEXT` lines, and an empty line
    between two files, so that its lines are counted a file at a time.

    Lines come as rg prints them (not --json, whose lines and submatch lists are never shortened: a 10 MB
    line matching `.` would be hundreds of MB of JSON); --max-columns cuts a long line to a preview.
    """
    args = [
        "--null", "--with-filename", "--line-number", "--heading" if heading else "--no-heading",
        "--no-context-separator", "--max-columns", str(max(16, max_line_chars)), "--max-columns-preview",
    ]  # fmt: skip
    if context:
        args += ["--context", str(context)]
    return args


# rg prints each file's lines with one write, and a reader that waits on the pipe wakes for each: a name in 60,000
# files of a 100k-file memory was 70,000 reads of 75 bytes, 330 ms of the reader's CPU and 300 ms more of rg's
# (docs/performance.md, "grep"). Once an output is past NAP_FROM, a read that found the pipe far from full is
# followed by a nap of NAP_SECONDS, ended early by rg's exit, while rg fills a pipe widened to PIPE_BYTES (Linux):
# some 300 reads. A smaller output (a grep with few matches) is read as it comes, as before.
NAP_FROM = 64 << 10
NAP_SECONDS = 0.005
PIPE_BYTES = 1 << 20


def chunks_of(process: Popen[bytes], size: int) -> Iterator[bytes]:
    """`process`'s standard output until its end, read `size` bytes at most at a time, as large as they come."""
    import subprocess

    assert process.stdout is not None
    fd = process.stdout.fileno()
    taken = 0
    widened = False
    while chunk := os.read(fd, size):
        yield chunk
        taken += len(chunk)
        if taken < NAP_FROM or len(chunk) >= NAP_FROM:
            continue
        if not widened:
            widened = True
            _widen(fd)
        try:
            process.wait(NAP_SECONDS)
        except subprocess.TimeoutExpired:
            pass


def _widen(fd: int) -> None:
    """Let the pipe at `fd` hold `PIPE_BYTES` where the system allows (Linux's F_SETPIPE_SZ; else as it is)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


# An rg process started before the command that needs it was built (`fsmem.cli.early`): (argv, folder, process,
# what was read of its output meanwhile).
_started: list[tuple[list[str], str, Popen[bytes], Drained]] = []
DRAINED_BYTES = 32 << 20  # read ahead at most this much (a first pass is given up at 24 MB: fsmem.query.grep)


class Drained:
    """The output of an rg started early, read into memory by a thread of its own as it comes.

    A name in most of a memory's files prints more than a pipe holds (64 KB): unread, rg waited on the full
    pipe from then until Python had imported the rest of fsmem and started reading, and so its pass ran after
    the imports instead of beside them. The thread reads up to `DRAINED_BYTES` (then the pass reads the rest
    itself, `rest`); iterating gives the chunks in order, as they come, until the end of the output or
    that bound."""

    def __init__(self, process: Popen[bytes]):
        import threading

        self.process = process
        self.chunks: list[bytes] = []
        self.ended = False  # the thread read to the end of the output, or could read no more
        self.rest = False  # it stopped at DRAINED_BYTES: the rest is still in the pipe
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True, name="fsmem-rg-early")
        self.thread.start()

    def _read(self) -> None:
        size = 0
        try:
            for chunk in chunks_of(self.process, 1 << 20):
                with self.ready:
                    self.chunks.append(chunk)
                    self.ready.notify()
                size += len(chunk)
                if size > DRAINED_BYTES:
                    self.rest = True
                    break
        except OSError:
            self.rest = True  # the pass reads the pipe itself, and says what is wrong
        finally:
            with self.ready:
                self.ended = True
                self.ready.notify()

    def __iter__(self):
        while True:
            with self.ready:
                while not self.chunks and not self.ended:
                    self.ready.wait()
                taken, self.chunks = self.chunks, []
                ended = self.ended
            yield from taken
            if ended and not taken:
                return

    def finish(self) -> None:
        """Wait for the thread (its process ended or killed: its read ends), before the pipe is closed."""
        self.thread.join()


def start_early(argv: list[str], cwd: str, process: Popen[bytes]) -> None:
    """Hold `process`, started as `argv` in `cwd`, for the first pass that asks for exactly that (`claim`); its
    output is read as it comes meanwhile (`Drained`)."""
    discard()
    _started.append((argv, cwd, process, Drained(process)))


def claim(argv: list[str], cwd: str) -> tuple[Popen[bytes], Drained] | None:
    """The process started early as exactly `argv` in `cwd`, with what was read of its output, or None (and one
    started for another is stopped)."""
    if not _started:
        return None
    if _started[0][0] == argv and _started[0][1] == cwd:
        _argv, _cwd, process, drained = _started.pop()
        return process, drained
    discard()
    return None


def discard() -> None:
    """Stop and reap an early process that no pass claimed (its command line was not the one needed)."""
    while _started:
        _argv, _cwd, process, drained = _started.pop()
        process.kill()
        drained.finish()
        process.communicate()
