"""git's long-lived object readers: `git cat-file --batch` (and `--batch-check`) processes, one request at a time,
shared by every `Repo` of a work tree in this process and ended when the last one gives them back.

A request waits at most READ_WAIT for git's next bytes: git stuck on a FIFO or device that the check of a
received `.git` (`fsmem.history.git_dir`) missed ends the request with a HistoryError, not the command's life.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import weakref
from pathlib import Path

from fsmem.errors import HistoryError
from fsmem.history.git import Git
from fsmem.history.git_env import clean_env
from fsmem.store.shared import Shared

PIPE_READ = 1 << 16  # bytes read from a pipe at a time: all that Linux holds in one
READ_WAIT = 30.0  # seconds a `cat-file --batch` reader may take to write its next bytes before it is stopped


class CatFile:
    """One `git cat-file --batch` process: object contents by id or by `rev:path`, many per process. With
    `sizes`, one `git cat-file --batch-check` process: only each object's size (`size`), never its bytes."""

    def __init__(self, git: Git, *, sizes: bool = False):
        self.git, self.sizes = git, sizes
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = os.getpid()  # whose process `proc` is: a forked child starts its own
        self._lock = threading.Lock()  # one request at a time (the MCP server runs tools in threads)
        self._buffer = bytearray()  # what the process wrote that no request has taken yet
        self._waiting = select.poll()  # for the process's output, READ_WAIT at most

    def get(self, spec: str) -> tuple[str, str, bytes] | None:
        """(id, type, bytes) of the object `spec` names, or None when it names none."""
        if "\n" in spec or not spec:
            return None
        with self._lock:
            return self._get(spec)

    def size(self, spec: str) -> int | None:
        """The size in bytes of the object `spec` names (a `sizes` reader), or None when it names none."""
        if "\n" in spec or not spec:
            return None
        with self._lock:
            found = self._get(spec)
        return None if found is None else int(found[2])

    def _get(self, spec: str) -> tuple[str, str, bytes] | None:
        if self.proc is not None and self.pid != os.getpid():
            _let_go(self.proc)  # the parent's: its pipes are the parent's conversation, never this process's
            self.proc = None
        if self.proc is None or self.proc.poll() is not None:
            self.pid = os.getpid()
            self.proc = subprocess.Popen(
                self.git.command("cat-file", "--batch-check" if self.sizes else "--batch"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=clean_env(),
            )
            weakref.finalize(self, _shutdown, self.proc)  # when this object goes, or at exit
            assert self.proc.stdout is not None
            self._buffer.clear()
            self._waiting = select.poll()
            self._waiting.register(self.proc.stdout, select.POLLIN)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(spec.encode("utf-8") + b"\n")
        self.proc.stdin.flush()
        while b"\n" not in self._buffer:
            self._more(spec)
        end = self._buffer.index(b"\n") + 1
        header = bytes(self._buffer[:end])
        del self._buffer[:end]
        parts = header.split()
        if len(parts) != 3 or not parts[2].isdigit():  # "<spec> missing" or "<spec> ambiguous", spaces in <spec> too
            return None
        if self.sizes:
            return parts[0].decode(), parts[1].decode(), parts[2]
        body = bytearray(int(parts[2]) + 1)  # the bytes and git's newline after them, read in place
        have = min(len(self._buffer), len(body))
        body[:have] = self._buffer[:have]
        del self._buffer[:have]
        into = memoryview(body)
        while have < len(body):
            self._wait(spec)
            got = os.readv(self.proc.stdout.fileno(), [into[have:]])
            if not got:
                raise HistoryError("git cat-file stopped answering")
            have += got
        return parts[0].decode(), parts[1].decode(), bytes(into[:-1])

    def _more(self, spec: str) -> None:
        """Read what the process has written next (a pipe's worth at most) into the buffer (`_wait`)."""
        assert self.proc is not None and self.proc.stdout is not None
        self._wait(spec)
        chunk = os.read(self.proc.stdout.fileno(), PIPE_READ)
        if not chunk:
            raise HistoryError("git cat-file stopped answering")
        self._buffer += chunk

    def _wait(self, spec: str) -> None:
        """Wait at most READ_WAIT for the process's next bytes: git stuck on a FIFO or device the check of `.git`
        missed (one put there after it) ends this request, and the process, with a HistoryError instead of
        holding the command for ever."""
        assert self.proc is not None
        if not self._waiting.poll(READ_WAIT * 1000):
            proc, self.proc = self.proc, None
            proc.kill()
            _shutdown(proc)
            raise HistoryError(
                f"git cat-file gave no answer in {READ_WAIT:.0f} s reading {spec!r} (a FIFO or device in the"
                " repository?); it was stopped"
            )

    def close(self) -> None:
        """End the process (after the request in hand, if any); a later request starts another."""
        with self._lock:
            proc, self.proc = self.proc, None
            if proc is not None:
                _shutdown(proc) if self.pid == os.getpid() else _let_go(proc)

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Readers:
    """One repository's long-lived readers, `cat-file --batch` (`reader`) and `--batch-check` (`sizes`), shared by
    every `Repo` of that work tree in this process (`readers`), and ended when the last of them gives them back.

    Each reader was a `Repo`'s own, ended only when that object was collected: a long-lived process that opens a
    memory per view (the team server keeps up to 256 views, each with a repository) held two processes for each
    view, and one that kept a `Memory` kept its readers however idle. Shared, a process holds at most two per
    repository it has open, whatever it is asked."""

    def __init__(self, key: tuple[str, str], git: Git):
        self.key = key
        self.reader = CatFile(git)  # started by its first request
        self.sizes = CatFile(git, sizes=True)
        self.users = 0

    def close(self) -> None:
        self.reader.close()
        self.sizes.close()


_readers: Shared[tuple[str, str], Readers] = Shared()


def readers(top: Path, git_dir: Path) -> Readers:
    """The readers of the work tree at `top` (whose HEAD `HEAD:path` names) in this process; one more user. Give
    them back with `give_back`."""
    key = (os.path.realpath(top), os.path.realpath(git_dir))
    return _readers.take(key, lambda: Readers(key, Git(top)))


def give_back(found: Readers) -> None:
    """One user fewer; the last one ends the readers' processes."""
    _readers.give_back(found.key, found)


def _let_go(proc: subprocess.Popen[bytes]) -> None:
    """In a forked child: close this process's copies of a parent's reader's pipes (the parent's reader then ends
    when the parent closes its own), and leave the process, which is not this one's child, alone."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            try:
                stream.close()  # nothing is left in its buffer: each request is flushed as it is written
            except OSError:
                pass


def _shutdown(proc: subprocess.Popen[bytes]) -> None:
    """End a `cat-file --batch` process: closing its input ends it."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            try:
                stream.close()
            except OSError:
                pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
