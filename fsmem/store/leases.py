"""Whether a file is open for writing elsewhere: a person's editor in the middle of a save made in place.

Editors that save in place (nano, vim with `backupcopy=yes`, Obsidian, `echo >`, `cp` over a file, many IDEs)
truncate the file and write it through a descriptor they hold, often in several chunks: between two chunks the
file holds half a save. A write that renamed a new file over it then, its bytes compared with what it read (half
a save), left the editor's later chunks in a file that no longer had a name: the save was lost, and the file
kept half of it. Linux tells: a read lease (`F_SETLEASE`) is refused (EAGAIN) while any descriptor holds the file
open for writing, and once taken an open for writing waits for it and marks it broken (`F_GETLEASE`). Where
leases are not given (another system, a file system without them, a file another user owns) nothing is known
and the write goes on as before: its bytes compared.
"""

from __future__ import annotations

import errno
import os
import signal

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_LEASES = fcntl is not None and hasattr(fcntl, "F_SETLEASE") and hasattr(fcntl, "F_SETSIG")
# a broken lease signals its holder (SIGIO by default, which ends a process): SIGURG is ignored unless handled
_BREAK_SIGNAL = getattr(signal, "SIGURG", 0)
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Lease:
    """A read lease held on a file, or none (`fd` None) where the system gives none."""

    def __init__(self, fd: int | None):
        self.fd = fd

    @property
    def broken(self) -> bool:
        """Whether the file was opened for writing (or truncated) since the lease was taken: a save began."""
        if self.fd is None:
            return False
        try:
            return fcntl.fcntl(self.fd, fcntl.F_GETLEASE) != fcntl.F_RDLCK
        except OSError:
            return False

    def is_of(self, info: os.stat_result) -> bool:
        """Whether `info` is the file the lease is on (True where there is no lease: nothing known)."""
        if self.fd is None:
            return True
        held = os.fstat(self.fd)
        return (held.st_dev, held.st_ino) == (info.st_dev, info.st_ino)

    def release(self) -> None:
        """Give the lease up: an open for writing waiting for it goes on."""
        if self.fd is None:
            return
        try:
            fcntl.fcntl(self.fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        except OSError:
            pass
        finally:
            os.close(self.fd)
            self.fd = None


def take(where: str, dir_fd: int | None) -> Lease | None:
    """A read lease on the regular file `where` (a name in the folder `dir_fd`, or a path); None when the file is
    open for writing now (a save under way). A file that is missing, a link, or one the system gives no lease on
    gets an empty lease: nothing known."""
    if not _LEASES:
        return Lease(None)
    try:
        fd = os.open(where, _FLAGS, dir_fd=dir_fd)
    except OSError:
        return Lease(None)
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, _BREAK_SIGNAL)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        os.close(fd)
        return None if exc.errno == errno.EAGAIN else Lease(None)
    return Lease(fd)
