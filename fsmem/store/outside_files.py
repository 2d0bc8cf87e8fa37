"""Files a command is given by name, outside the memory: opened one way, never blocking, never read without a cap.

Memory files pass the path rule (`fsmem.store.paths`). The other files a
command names — an eval set, a LoCoMo dump, `--seen-file`, the server's
configuration and token store, a plot or a log to write — pass here. A FIFO,
a device, a socket or a folder is refused at once: the file is opened without
blocking and checked with `fstat` before a byte is read. A regular file is
read in chunks up to a cap, so `/dev/zero` or a file of 100 GB is a one-line
error, never a hang or a MemoryError. `-` is standard input, only where the
command says so, read with the same cap.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from fsmem.errors import FsmemError, InvalidArgument, NotFound
from fsmem.store.paths import quoted

MiB = 1 << 20
CHUNK = MiB
STDIN = "-"


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words a user knows."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "an unusual file"


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit >= MiB and limit % MiB == 0 else f"{limit} bytes"


def _name(path: str | os.PathLike[str]) -> str:
    return quoted(os.fsdecode(path))


def read_bytes(
    path: str | os.PathLike[str],
    *,
    what: str,
    limit: int,
    stdin: bool = False,
    error: type[FsmemError] = InvalidArgument,
) -> bytes:
    """The bytes of the regular file `path` (or of standard input for `-`, when `stdin`), at most `limit` of them.

    Refused with `error` (InvalidArgument by default), naming `what`: a path
    that is not a regular file, and a file larger than `limit`. A path that does
    not exist is NotFound.
    """
    if stdin and os.fspath(path) == STDIN:
        return _capped(sys.stdin.buffer, f"{what} (standard input)", limit, error)
    fd, info = open_regular(path, what=what, error=error)
    try:
        if info.st_size > limit:
            raise error(f"{what} {_name(path)} is larger than {_size(limit)}; give a smaller file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return _capped(handle, f"{what} {_name(path)}", limit, error)
    finally:
        os.close(fd)


def open_regular(
    path: str | os.PathLike[str], *, what: str, error: type[FsmemError] = InvalidArgument
) -> tuple[int, os.stat_result]:
    """A blocking descriptor of the regular file `path`, and its stat; the caller closes it.

    Opened without blocking (a FIFO never hangs the open) and without taking a terminal; a path that is not a
    regular file is refused with `error` naming `what`, one that does not exist is NotFound.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if "\0" in os.fsdecode(path):
        raise error(f"{what} {_name(path)} holds a NUL character, which no file name can")
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NotFound(f"{what} {_name(path)} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {_name(path)} is a folder; give a file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {_name(path)}: {(exc.strerror or str(exc)).lower()}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {_name(path)} is {kind_of(info.st_mode)}, not a regular file; give a file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _capped(handle: BinaryIO, what: str, limit: int, error: type[FsmemError]) -> bytes:
    """Read in chunks until the end, refusing as soon as more than `limit` bytes came (a file that grows, stdin)."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = handle.read(min(CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise error(f"{what} is larger than {_size(limit)}; give a smaller file")


def read_text(
    path: str | os.PathLike[str],
    *,
    what: str,
    limit: int,
    stdin: bool = False,
    error: type[FsmemError] = InvalidArgument,
) -> str:
    """`read_bytes`, decoded as UTF-8 (a byte-order mark is dropped); text that is not UTF-8 is refused with `error`."""
    data = read_bytes(path, what=what, limit=limit, stdin=stdin, error=error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = "standard input" if stdin and os.fspath(path) == STDIN else _name(path)
        raise error(f"{what} {where} is not UTF-8 text (byte {exc.start})") from None


def read_stdin(*, what: str, limit: int) -> str:
    """Standard input as text, at most `limit` bytes of it."""
    return read_text(STDIN, what=what, limit=limit, stdin=True)


def output_file(path: str | os.PathLike[str], *, what: str, error: type[FsmemError] = InvalidArgument) -> Path:
    """A path a command will write a file to: free, or a regular file; its folder must exist."""
    target = Path(path).expanduser()
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise error(f"cannot write {what} {_name(target)}: {(exc.strerror or str(exc)).lower()}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise error(f"{what} {_name(target)} is {kind_of(mode)}, not a regular file; give a file name")
    if mode is None and not target.parent.is_dir():
        raise error(f"{what} {_name(target)}: the folder {_name(target.parent)} does not exist")
    return target


def folder(path: str | os.PathLike[str], *, what: str, error: type[FsmemError] = InvalidArgument) -> Path:
    """A path a command will make or fill a folder at: free, or a folder (a link to one counts)."""
    target = Path(path).expanduser()
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise error(f"cannot use {what} {_name(target)}: {(exc.strerror or str(exc)).lower()}") from None
    if not stat.S_ISDIR(mode):
        raise error(f"{what} {_name(target)} is {kind_of(mode)}, not a folder; give a folder")
    return target
