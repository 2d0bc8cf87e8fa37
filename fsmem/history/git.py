"""Running git for fsmem, and writing git objects without it.

Every git process fsmem starts goes through `Git.run`: git's own command with
fsmem's settings passed as `-c` (the merge driver is configured in each
clone's `.git/config`, which is never committed, so fsmem names it on every
call rather than trust that a clone was set up), no prompts, pagers or
editors, and none of the `GIT_*` variables of a calling hook that would point
git at another repository (`git_env.clean_env`).

Objects (blobs, trees, commits) are written by Python as loose objects, the
way git writes them: zlib-deflated `type size\\0body` under
`objects/xx/yyyy…`, through a temporary file and a rename, read-only. A commit
then costs two git processes (`cat-file --batch` to read trees, `update-ref` to
move the branch) whatever the size of the memory; see README "History and sync".
"""

from __future__ import annotations

import hashlib
import os
import select
import shlex
import subprocess
import sys
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from fsmem.errors import ChangedOnDisk, HistoryError
from fsmem.history import disarm, git_marker
from fsmem.history.git_env import clean_env
from fsmem.store.shared import Shared

MERGE_DRIVER_NAME = "fsmem: Markdown memory merge (facts, notes, front matter)"
CHUNK = 1 << 20  # bytes read at a time when a large file is hashed or stored
PIPE_READ = 1 << 16  # bytes read from a pipe at a time: all that Linux holds in one
READ_WAIT = 30.0  # seconds a `cat-file --batch` reader may take to write its next bytes before it is stopped


def driver_command() -> str:
    """The merge driver command git runs for `merge=fsmem` files: this Python, fsmem's driver module.

    git runs it through a POSIX shell on every platform (Git for Windows brings its own), hence the quoting.
    fsmem's own git calls pass it with `-c` each time; the copy in `.git/config`, for a plain `git merge`,
    is recorded again by `record_driver` when this Python has moved.
    """
    return f"{shlex.quote(sys.executable)} -m fsmem.history.merge %O %A %B %L %P"


def record_driver(git: Git) -> str | None:
    """Put this Python's merge driver in the repository's config; the command it replaced, if it differed."""
    recorded = git.run("config", "--local", "--get", "merge.fsmem.driver", check=False).stdout.decode(
        "utf-8", "surrogateescape"
    )
    recorded = recorded.strip()
    wanted = driver_command()
    if recorded == wanted or _same_python_driver(recorded):
        return None
    git.run("config", "--local", "merge.fsmem.name", MERGE_DRIVER_NAME)
    git.run("config", "--local", "merge.fsmem.driver", wanted)
    return recorded


def _same_python_driver(recorded: str) -> bool:
    """Whether `recorded` is this driver run by another name of this Python: `python3` beside `python` in the
    same folder (the `fsmem` script's and `python -m fsmem`'s may differ). Another folder is another
    environment even for the same file (a virtual environment's `python` links to its base), so it is not."""
    try:
        python, *rest = shlex.split(recorded)
    except ValueError:
        return False
    if rest != shlex.split(driver_command())[1:]:
        return False
    try:
        return os.path.samefile(python, sys.executable) and os.path.samefile(
            os.path.dirname(python) or ".", os.path.dirname(sys.executable) or "."
        )
    except OSError:  # gone, or not a path
        return False


def settings() -> list[str]:
    """The `-c` settings of every fsmem git call."""
    pairs = {
        "merge.fsmem.driver": driver_command(),
        "merge.fsmem.name": MERGE_DRIVER_NAME,
        "core.quotePath": "false",
        "pull.rebase": "false",
        "core.editor": "true",
        "commit.gpgSign": "false",
        "merge.autoStash": "false",
        "gc.autoDetach": "false",
        "submodule.recurse": "false",  # a remote's .gitmodules never makes fsmem's git fetch or check out anything
        "log.mailmap": "false",  # nor does its .mailmap make `fsmem log --agent` match someone else's commits
    }
    pairs.update(disarm.SETTINGS)  # a received memory's .git/config names programs too: git runs none of them
    return [arg for key, value in pairs.items() for arg in ("-c", f"{key}={value}")]


class Git:
    """git, run in the work tree at `top` with fsmem's settings."""

    def __init__(self, top: Path):
        self.top = top
        self.disarm = disarm.Disarm()
        marker = git_marker(top)  # the work tree is the folder of the `.git`, whatever `core.worktree` says
        self.work_tree = [] if marker is None else [f"--work-tree={os.fspath(marker.parent)}"]

    def command(self, *args: str) -> list[str]:
        """git's command line: the repository's programs disarmed (disarm.py), then fsmem's settings, which win."""
        return ["git", "-C", os.fspath(self.top), *self.work_tree, *self.disarm.around(args, settings(), self.run)]

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            proc = subprocess.run(
                self.command(*args), input=input, capture_output=True, env=clean_env(env), timeout=timeout
            )
        except FileNotFoundError:
            raise HistoryError("git is not installed (history needs the git command)") from None
        except subprocess.TimeoutExpired:
            raise HistoryError(f"git {args[0]} did not finish within {timeout:.0f} s") from None
        if check and proc.returncode:
            raise HistoryError(f"git {args[0]} failed: {first_line(proc.stderr or proc.stdout)}")
        return proc

    def text(self, *args: str, check: bool = True) -> str:
        return self.run(*args, check=check).stdout.decode("utf-8", "replace")

    def blob_to(self, oid: str, fd: int) -> None:
        """Write the bytes of the blob `oid` to the open file `fd`: git writes them there itself (`cat-file
        blob`), so fsmem never holds them; git streams a loose object or a whole one in a pack, and inflates
        a delta in memory."""
        try:
            proc = subprocess.run(
                self.command("cat-file", "blob", oid), stdout=fd, stderr=subprocess.PIPE, env=clean_env()
            )
        except FileNotFoundError:
            raise HistoryError("git is not installed (history needs the git command)") from None
        if proc.returncode:
            raise HistoryError(f"git cat-file failed: {first_line(proc.stderr)}")


def nul_separated(paths: Iterable[str]) -> bytes:
    """Repository paths as git's `-z` options read and write them: each ended by a NUL, bytes as on disk."""
    return b"".join(path.encode("utf-8", "surrogateescape") + b"\0" for path in paths)


def from_nul_separated(data: bytes) -> list[str]:
    """The paths of `nul_separated` bytes (or of a git command's `-z` output)."""
    return [name.decode("utf-8", "surrogateescape") for name in data.split(b"\0") if name]


def first_line(output: bytes) -> str:
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["(no message)"])[0]


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


class ObjectStore:
    """Writes loose objects into `objects_dir` as git does; `algo` is the repository's (sha1 or sha256)."""

    def __init__(self, objects_dir: Path, algo: str = "sha1"):
        self.objects_dir = objects_dir
        self.algo = algo

    @property
    def zero(self) -> str:
        return "0" * (64 if self.algo == "sha256" else 40)

    def id_of(self, kind: str, body: bytes) -> str:
        digest = hashlib.new(self.algo, f"{kind} {len(body)}\0".encode())
        digest.update(body)
        return digest.hexdigest()

    def has_loose(self, oid: str) -> bool:
        return (self.objects_dir / oid[:2] / oid[2:]).is_file()

    def write(self, kind: str, body: bytes) -> str:
        oid = self.id_of(kind, body)
        if self.has_loose(oid):
            return oid

        def compressed(out: BinaryIO) -> str:
            packer = zlib.compressobj(1)
            out.write(packer.compress(f"{kind} {len(body)}\0".encode()))
            out.write(packer.compress(body))
            out.write(packer.flush())
            return oid

        return self._save(compressed)

    def id_of_stream(self, kind: str, source: BinaryIO, size: int, compressed: BinaryIO | None = None) -> str:
        """`id_of` the `size` bytes read from `source` a chunk at a time (the object, compressed, written to
        `compressed` when given): memory stays a chunk whatever the size. ChangedOnDisk when `source` does not
        hold exactly `size` bytes (a file changed while it was read)."""
        header = f"{kind} {size}\0".encode()
        digest = hashlib.new(self.algo, header)
        packer = zlib.compressobj(1)
        if compressed is not None:
            compressed.write(packer.compress(header))
        left = size
        while left:
            chunk = source.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            digest.update(chunk)
            if compressed is not None:
                compressed.write(packer.compress(chunk))
        if left or source.read(1):
            raise ChangedOnDisk(f"a file changed size while it was read ({size} bytes expected)")
        if compressed is not None:
            compressed.write(packer.flush())
        return digest.hexdigest()

    def write_stream(self, kind: str, source: BinaryIO, size: int) -> str:
        """`write` the `size` bytes read from `source` a chunk at a time (a large file is never held whole)."""
        return self._save(lambda out: self.id_of_stream(kind, source, size, out))

    def _save(self, fill: Callable[[BinaryIO], str]) -> str:
        """Store the loose object `fill` writes compressed (returning its id), as git does: through a temporary
        file in the objects folder, renamed to its id, read-only. An object already there is kept as it is."""
        temp = os.fspath(self.objects_dir / f"tmp_obj_{os.getpid()}_{threading.get_ident()}_{os.urandom(4).hex()}")
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            fd = os.open(temp, flags, 0o444)
            with os.fdopen(fd, "wb") as handle:
                oid = fill(handle)
            folder = self.objects_dir / oid[:2]
            target = folder / oid[2:]
            if target.exists():
                os.unlink(temp)
                return oid
            folder.mkdir(exist_ok=True)
            os.replace(temp, target)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
        return oid
