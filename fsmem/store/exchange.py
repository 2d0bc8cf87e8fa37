"""Swapping two names in one folder atomically: Linux's `renameat2(RENAME_EXCHANGE)`, through the C library.

A write that must not replace a file someone else changed since it was read (a person's editor saves
without fsmem's lock) swaps its new file in, then looks at the one it took out: nothing is unlinked
before it is known to hold what was read, and a file that does not is swapped back (`beneath.Staged`).
A plain rename would have dropped it. Where the call is missing (macOS, Windows, an old C library, a file
system that refuses it), `exchange` says so and the caller compares, then renames.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from typing import Any

RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EPERM, getattr(errno, "ENOTSUP", errno.EINVAL), errno.EOPNOTSUPP}


@functools.cache
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no C library to load, or one older than glibc 2.28
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


def exchange(first: str, second: str, dir_fd: int | None) -> bool | None:
    """Swap `first` and `second` (names in the folder `dir_fd`, or paths): True when swapped, None when one of
    them does not exist, False when this system cannot swap (the caller falls back to compare and rename)."""
    call = _renameat2()
    if call is None:
        return False
    import ctypes

    folder = _AT_FDCWD if dir_fd is None else dir_fd
    if call(folder, os.fsencode(first), folder, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error == errno.ENOENT:
        return None
    if error in _UNSUPPORTED:
        return False
    raise OSError(error, os.strerror(error), second)
