"""Reading a file fsmem keeps for itself under `.fsmem/` (a cache, a log, a record), in a module that imports only os.

What is there may come from a crash or an untrusted copy: a FIFO at a cache's name blocked every command
(`config.json` is read by each) until it was killed, a link could lead anywhere. `read_state` opens the name
itself, without waiting and never through a link, and reads only a regular file; anything else is an
OSError, which each reader already takes as "no cache".
"""

import errno
import os
import stat

# The errors of a name that holds no state fsmem wrote (`open_state`, `read_state`): one a crash never leaves, so
# its content is lost to no one; any other OSError (EMFILE, EIO) is the reader's own.
NOT_A_FILE = (errno.EINVAL, errno.ELOOP, errno.EFBIG)
# The most `read_state` reads: fsmem's largest such file, check's facts.json, is about 2 MB at 100k files; a sparse
# 3 GB config.json (no room on disk) held every command 33 s and 6.3 GB.
MAX_STATE_BYTES = 64 << 20
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_state(path: "str | os.PathLike[str]") -> int:
    """A descriptor of the regular file at `path` (not through a link), opened for reading; the caller closes it.
    OSError for a FIFO, socket, device, folder or link there."""
    fd = os.open(path, _FLAGS | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_state(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of the regular file at `path` (`open_state`); OSError (EFBIG) past MAX_STATE_BYTES."""
    with open(open_state(path), "rb") as handle:
        # the size first: read(MAX_STATE_BYTES + 1) would take that much memory for a file of a few bytes
        if os.fstat(handle.fileno()).st_size > MAX_STATE_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_STATE_BYTES} bytes", os.fspath(path))
        return handle.read()
