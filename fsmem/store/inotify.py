"""inotify read without a thread: one instance per process, drained on demand by the change feed.

The C library's three calls (inotify_init1, inotify_add_watch,
inotify_rm_watch, through ctypes) open and arm it; the events are read here
from a non-blocking descriptor, so `drain` returns as soon as the kernel's
queue is empty, and answers exactly what was queued before it was called.
watchdog's public observers deliver events on a thread of their own, with no
way to ask "is everything before now delivered?", which exact freshness
needs; they serve the platforms without inotify (`fsmem.store.observed`). Each event goes to the feeds (`fsmem.store.feed.Feed`) that own
its watch descriptor, as `feed.on_event(wd, mask, name)`; a queue overflow goes
to every feed as `feed.on_overflow()`.
"""

from __future__ import annotations

import errno
import os
import struct
import threading
from typing import Any, Protocol


class Feed(Protocol):
    """What the watcher hands events to (`fsmem.store.feed.Feed`)."""

    def on_event(self, wd: int, mask: int, name: str) -> None: ...

    def on_overflow(self) -> None: ...


IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
_IN_ONLYDIR, _IN_DONT_FOLLOW, _IN_EXCL_UNLINK, IN_ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000
MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
    | _IN_EXCL_UNLINK
)
READ_BYTES = 64 * 1024
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, 0o2000000  # inotify_init1's flags are open(2)'s


def _libc() -> Any:
    """The C library's inotify calls, typed (Linux: glibc and musl both have them)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols, libc's among them (no ldconfig run)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_init1.restype = ctypes.c_int
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_add_watch.restype = ctypes.c_int
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.inotify_rm_watch.restype = ctypes.c_int
    return libc


class Inotify:
    """One inotify instance for the whole process, shared by every feed (the kernel allows a user 128).

    A folder watched for two roots (one memory inside another) has one watch descriptor; each feed maps it
    to its own relative path."""

    _instance: Inotify | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        import ctypes

        libc = _libc()
        self._add_watch: Any = libc.inotify_add_watch
        self._rm_watch: Any = libc.inotify_rm_watch
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)  # close-on-exec: rg and git, run by fsmem, do not get it
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, "inotify instance limit reached" if code == errno.EMFILE else os.strerror(code))
        self.fd = fd
        self.pid = os.getpid()  # a forked child shares the queue: reading it would steal the parent's events
        self.lock = threading.RLock()
        self._feeds: dict[int, list[Feed]] = {}  # watch descriptor -> the feeds it serves
        self._attached: list[Feed] = []

    @classmethod
    def shared(cls) -> Inotify:
        with cls._instance_lock:
            if cls._instance is None or cls._instance.fd < 0:
                cls._instance = cls()
            return cls._instance

    def attach(self, feed: Feed) -> None:
        with self.lock:
            if feed not in self._attached:
                self._attached.append(feed)

    def detach(self, feed: Feed) -> None:
        with self.lock:
            for wd in [wd for wd, owners in self._feeds.items() if feed in owners]:
                self.release(feed, wd)
            if feed in self._attached:
                self._attached.remove(feed)
            if self._attached or self.fd < 0:
                return
            with Inotify._instance_lock:
                if Inotify._instance is self:
                    Inotify._instance = None
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def add(self, feed: Feed, path: str) -> int:
        import ctypes

        with self.lock:
            wd = self._add_watch(self.fd, os.fsencode(path), MASK)
            if wd < 0:
                code = ctypes.get_errno()
                if code in (errno.EBADF, errno.EINVAL):  # the descriptor is no longer this watcher's
                    self._retire()
                text = "inotify watch limit reached" if code == errno.ENOSPC else os.strerror(code)
                raise OSError(code, text, path)
            owners = self._feeds.setdefault(wd, [])
            if feed not in owners:
                owners.append(feed)
            return wd

    def _retire(self) -> None:
        """The descriptor failed (closed under the watcher, or its number now another file's): no feed may use it
        again, and the next feed to start gets a watcher of its own. It is not closed: it is not ours any more.
        Every feed still attached finds it gone at its next drain and walks."""
        self.fd = -1
        with Inotify._instance_lock:
            if Inotify._instance is self:
                Inotify._instance = None

    def release(self, feed: Feed, wd: int) -> None:
        with self.lock:
            owners = self._feeds.get(wd)
            if owners is None or feed not in owners:
                return
            owners.remove(feed)
            if not owners:
                del self._feeds[wd]
                if self.fd >= 0 and os.getpid() == self.pid:  # a forked child must not disarm its parent's
                    self._rm_watch(self.fd, wd)

    def drain(self) -> None:
        """Read until the queue is empty and hand each event to its feeds; EBADF and the like raise OSError."""
        with self.lock:
            if self.fd < 0:
                raise OSError(errno.EBADF, "the watcher is closed")
            if os.getpid() != self.pid:
                raise OSError(errno.ECHILD, "the watcher belongs to the parent process")
            while self.fd >= 0:  # a feed that stops while its events are handed out may close it
                try:
                    data = os.read(self.fd, READ_BYTES)
                except BlockingIOError:
                    return
                except InterruptedError:
                    continue
                except OSError:
                    self._retire()
                    raise
                if not data:
                    return
                self._dispatch(data)

    def _dispatch(self, data: bytes) -> None:
        at = 0
        while at + 16 <= len(data):
            wd, mask, _cookie, length = struct.unpack_from("iIII", data, at)
            name = os.fsdecode(data[at + 16 : at + 16 + length].rstrip(b"\0"))
            at += 16 + length
            if mask & IN_Q_OVERFLOW:
                for feed in list(self._attached):
                    feed.on_overflow()
                continue
            for feed in list(self._feeds.get(wd, ())):
                feed.on_event(wd, mask, name)
            if mask & IN_IGNORED:
                self._feeds.pop(wd, None)
