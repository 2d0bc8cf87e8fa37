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
move the branch) whatever the size of the memory; see README "History and sync". Objects are read by
the long-lived readers of `fsmem.history.cat_file`.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from fsmem.errors import ChangedOnDisk, HistoryError
from fsmem.history import disarm, git_marker
from fsmem.history.git_env import clean_env

MERGE_DRIVER_NAME = "fsmem: Markdown memory merge (facts, notes, front matter)"
CHUNK = 1 << 20  # bytes read at a time when a large file is hashed or stored


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


# The operator's own config (~/.gitconfig, ~/.config/git/) is read for who they are, credentials and transports;
# what it says of which files git sees, what it prints and how it merges is git's default for fsmem's git, so that
# every host makes the same history and answers alike: a global ignore kept files made outside fsmem out of every
# commit (and out of every other host's copy), log.follow failed `fsmem log`, merge.ff=only every sync that merged.
AS_GIT_SHIPS = {
    "core.excludesFile": "",  # empty: neither that file nor ~/.config/git/ignore; the memory's .gitignore still counts
    "log.follow": "false",
    "merge.ff": "true",
    "merge.log": "false",
    "i18n.logOutputEncoding": "UTF-8",
    "i18n.commitEncoding": "UTF-8",
    "core.abbrev": "auto",
    "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false",
    "diff.context": "3",
}


def settings(operators: tuple[str, ...] = ()) -> list[str]:
    """The `-c` settings of every fsmem git call; `operators`: keys of AS_GIT_SHIPS left to the operator's config."""
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
    pairs.update((key, value) for key, value in AS_GIT_SHIPS.items() if key not in operators)
    return [arg for key, value in pairs.items() for arg in ("-c", f"{key}={value}")]


class Git:
    """git, run in the work tree at `top` with fsmem's settings."""

    def __init__(self, top: Path):
        self.top = top
        self.disarm = disarm.Disarm()
        marker = git_marker(top)  # the work tree is the folder of the `.git`, whatever `core.worktree` says
        self.work_tree = [] if marker is None else [f"--work-tree={os.fspath(marker.parent)}"]

    def command(self, *args: str, operators: tuple[str, ...] = ()) -> list[str]:
        """git's command line: the repository's programs disarmed (disarm.py), then fsmem's settings, which win
        (but the keys of AS_GIT_SHIPS named in `operators`, left to the operator's config)."""
        fsmems = settings(operators)
        return ["git", "-C", os.fspath(self.top), *self.work_tree, *self.disarm.around(args, fsmems, self.run)]

    def ignored(self, path: str) -> bool:
        """Whether git ignores `path` by every rule it has, the operator's own ignores too: the one question their
        global ignore still answers, whether a memory inside their project is to be kept out of its history."""
        found = self.run("check-ignore", "-q", "--", path, check=False, operators=("core.excludesFile",))
        return found.returncode == 0

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        operators: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            command = self.command(*args, operators=operators)
            proc = subprocess.run(command, input=input, capture_output=True, env=clean_env(env), timeout=timeout)
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
