"""The change feed: which memory paths changed since a cache last caught up, so a call refreshes only those.

A long-lived process (a `Memory` asked more than once: `fsmem serve`,
`fsmem mcp`, `fsmem watch`, a script) holds one feed per memory root, shared
by every `Memory` of that root and released when the last of them goes.
On Linux the feed reads inotify itself (`fsmem.store.inotify`), with no
thread: the kernel queues an event when a write, rename or delete happens,
before that system call returns, so draining the queue at the start of a call
sees every change finished before the call — an editor's save included,
whichever way it saves. Elsewhere (macOS, Windows) watchdog's observer is the
source, and a cookie file made at the start of a call and waited for is the
barrier that gives the same promise (`fsmem.store.observed`). Each cache
(the metadata rows, the search index) is a *consumer* with its own pending
paths; `catch_up` hands it what changed since it last asked.

Where events cannot be trusted the consumer is told to walk the whole
memory instead (`Delta.full`): when the feed starts; after the kernel's queue
overflowed; and on every call where the
feed is off: a network or FUSE file system (whose remote writers send no
events), a watcher that failed to start, died or did not report its cookie in time.
Each such fallback is said once in the log (`.fsmem/logs/feed.jsonl` and the
`fsmem.feed` logger).

An event missed for a reason no one reported (a write through a hard link
from outside the memory) is found by the feed's own check
(`fsmem.store.feed_check`): a walk in a thread of the feed, off every
question's path, that compares every file's stamp with the walk before and
hands the paths that changed to the consumers as if an event had named them,
so such a change is stale for less than `VERIFY_SECONDS`. Where that thread
does not run (a forked child has none), each consumer walks the whole memory
at least every `VERIFY_SECONDS` instead.

What a walk counts is decided by `fsmem.store.walk`; the feed only says where
to look: a file (`Delta.files`) or a folder whose whole subtree must be
walked again (`Delta.folders`, for folders created, moved or deleted).

This module is long because the feed's promise is one piece: what its two
sources report, when it stops trusting them, and what each consumer is owed
must be read together to see that no change is missed.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.errors import FsmemError
from fsmem.store import feed_check, observed
from fsmem.store.files import open_unlinked, state_dir
from fsmem.store.inotify import (
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_UNMOUNT,
    Inotify,
)
from fsmem.store.paths import MEMORY_SUFFIXES
from fsmem.store.shared import Shared
from fsmem.store.walk import folder_problem

VERIFY_SECONDS = 60.0  # a change no event reported is in the caches within this, whatever the events say
MAX_PENDING = 20_000  # more changed paths than this waiting for one consumer: it walks instead
LOG_FILE = "feed.jsonl"
# where the events come from: inotify, read on demand (Linux); watchdog's observer with a cookie barrier
SOURCE = "inotify" if sys.platform.startswith("linux") else "observer"
# network and userspace file systems: another host's (or the server's) writes send this host no events
UNTRUSTED_FILE_SYSTEMS = frozenset(
    "nfs nfs4 cifs smb smb2 smb3 smbfs ncpfs afs coda 9p ceph glusterfs lustre gpfs beegfs fuse fuseblk "
    "sshfs davfs virtiofs vboxsf vmhgfs prl_fs".split()
)

logger = logging.getLogger("fsmem.feed")


@dataclass
class Delta:
    """What one consumer must refresh: everything (`full`, and why), or these files and folders."""

    full: bool = False
    reason: str = ""
    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return self.full or bool(self.files) or bool(self.folders)


@dataclass
class _Pending:
    delta: Delta
    last_full: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    later: dict[str, float] = field(default_factory=dict)  # path -> when (monotonic) to hand it over again


class Feed:
    """One memory root's feed in this process (`acquire` gives the shared one)."""

    def __init__(self, root: Path, *, verify_seconds: float = VERIFY_SECONDS):
        self.root = Path(root)
        self._verify_seconds = verify_seconds
        self.trusted = False
        self.reason = "not started"  # why events are not trusted (when they are not)
        self.users = 0
        self.overflows = 0
        self._lock = threading.Lock()
        self._consumers: dict[str, _Pending] = {}
        self._said: set[str] = set()
        self._watches: dict[int, str] = {}  # watch descriptor -> folder, relative ("" for the root)
        self._folders: dict[str, int] = {}  # folder -> watch descriptor
        self._source: Inotify | None = None
        self._observed: observed.Observed | None = None
        self.checker = feed_check.Checker(self.root, lambda: self._verify_seconds, self._checked)

    @property
    def verify_seconds(self) -> float:
        """The period of the check (`fsmem.store.feed_check`); math.inf: only when asked (`check`)."""
        return self._verify_seconds

    @verify_seconds.setter
    def verify_seconds(self, seconds: float) -> None:
        self._verify_seconds = seconds
        self.checker.wake()

    # -- life -----------------------------------------------------------------
    def start(self) -> None:
        """Watch every folder a walk enters; on any failure the feed stays untrusted (consumers walk)."""
        reason = untrusted_file_system(self.root)
        if reason is not None:
            self._distrust(reason)
            return
        if SOURCE == "observer":
            try:
                self._observed = observed.Observed(self, self.root)
            except (OSError, ImportError, RuntimeError, FsmemError) as exc:
                self._distrust(f"the watcher did not start ({_reason(exc)})")
                return
            self._trust()
            return
        try:
            self._source = Inotify.shared()
            self._source.attach(self)
            with self._source.lock:
                self._watch_tree("")
        except (OSError, ImportError) as exc:
            self._distrust(f"the watcher did not start ({_reason(exc)})")
            return
        self._trust()

    def _trust(self) -> None:
        """Events are trusted from now on; the check's first walk is taken before any consumer's (its baseline)."""
        self.checker.first()
        self.checker.start()
        self.trusted, self.reason = True, ""

    def close(self) -> None:
        self._stop_sources()
        self.trusted = False
        self.reason = "closed"

    def _distrust(self, reason: str) -> None:
        """Events cannot be trusted from now on: every consumer walks at every call; said once."""
        self._stop_sources()
        self.trusted = False
        self.reason = reason
        self.say(f"change feed off for {self.root}: {reason}; every call walks the memory")

    def _stop_sources(self) -> None:
        self.checker.stop()
        source, self._source = self._source, None
        if source is not None:
            source.detach(self)
        watcher, self._observed = self._observed, None
        if watcher is not None:
            watcher.close()

    def say(self, message: str) -> None:
        """Log `message` once per feed (the log line a fallback promises, not one per call)."""
        if message in self._said:
            return
        self._said.add(message)
        logger.warning(message)
        try:
            folder = state_dir(self.root, "logs")
            fd = open_unlinked(folder / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            with open(fd, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"time": time.time(), "pid": os.getpid(), "message": message}) + "\n")
        except (OSError, FsmemError):
            pass

    # -- what consumers ask ------------------------------------------------------
    def catch_up(self, consumer: str, apply: Callable[[Delta], Any]) -> Any:
        """Hand `consumer` what changed since it last caught up, through `apply(delta)`, and answer what it
        answers. Calls for one consumer take turns, so none answers before the changes it waited on are in
        the cache. If `apply` fails, the whole memory is walked next time."""
        pending = self._consumer(consumer)
        with pending.lock:
            self.drain()
            now = time.monotonic()
            with self._lock:
                delta, pending.delta = pending.delta, Delta()
                due = [rel for rel, when in pending.later.items() if when <= now]
                for rel in due:
                    del pending.later[rel]
                if not delta.full:
                    delta.files.update(due)
                if not self.trusted:
                    delta = Delta(True, self.reason)
                elif not delta.full and now - pending.last_full >= self.verify_seconds and self._check_behind():
                    delta = Delta(True, "verify")
            if delta.full:
                pending.last_full = now
            try:
                return apply(delta)
            except BaseException:
                with self._lock:
                    pending.delta = Delta(True, "a refresh failed")
                raise

    def check(self) -> list[str] | None:
        """Walk now and hand every consumer the paths whose stamp changed since the last check (what the
        check's thread does every half `verify_seconds`); answers them."""
        return self.checker.check()

    def _checked(self, paths: list[str]) -> None:
        if self.trusted:
            self._touch(files=paths)

    def _check_behind(self) -> bool:
        """The check's thread is not running (a forked child has none; one died): consumers walk instead."""
        return not self.checker.alive()

    def later(self, consumer: str, paths: Iterable[str], when: float) -> None:
        """Hand `consumer` these paths again at its first catch-up from `when` (time.monotonic()) on, whatever
        the events say: a row stored while its file was too fresh to trust gets its second look."""
        pending = self._consumer(consumer)
        with self._lock:
            for rel in paths:
                pending.later[rel] = max(when, pending.later.get(rel, when))

    def forget(self, consumer: str) -> None:
        """`consumer` will not ask again (the cache it kept was made anew under another name)."""
        with self._lock:
            self._consumers.pop(consumer, None)

    def _consumer(self, name: str) -> _Pending:
        with self._lock:
            pending = self._consumers.get(name)
            if pending is None:
                pending = self._consumers[name] = _Pending(Delta(True, "started"))
            return pending

    def mark(self, paths: Iterable[str]) -> None:
        """fsmem wrote these files or folders here (a path gone may have been either): every consumer
        refreshes them at its next call, whatever the events say."""
        files, folders = [], []
        for rel in paths:
            full = os.path.join(self.root, rel)
            is_folder = os.path.isdir(full)
            if is_folder or not os.path.lexists(full):
                folders.append(rel)
            if not is_folder:
                files.append(rel)
        self._touch(files, folders)

    def drain(self) -> None:
        """Take every event the kernel has queued (for every feed sharing the watcher), or the observer has
        reported up to its cookie."""
        source: Inotify | observed.Observed | None = self._source or self._observed
        if source is None:
            return
        try:
            source.drain()
        except OSError as exc:
            self._distrust(f"the watcher failed ({_reason(exc)})")

    # -- events (called by the watcher, fsmem.store.inotify, with its lock held) ------
    def on_event(self, wd: int, mask: int, name: str) -> None:
        folder = self._watches.get(wd)
        if folder is None:
            return
        if not name:
            # about the watched folder itself: a folder moved within the memory is watched again under
            # its new name (its parent's IN_MOVED_TO), so only the root's own move matters here
            if folder == "" and mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED):
                self._distrust("the memory root was moved, deleted or unmounted")
            elif mask & (IN_DELETE_SELF | IN_IGNORED | IN_UNMOUNT):
                self._forget_watch(wd)
            return
        if name.startswith("."):
            return
        rel = f"{folder}/{name}" if folder else name
        if mask & IN_ISDIR:
            if mask & (IN_DELETE | IN_MOVED_FROM):
                self._forget_tree(rel)
            if mask & (IN_CREATE | IN_MOVED_TO) and folder_problem(name, rel.count("/") + 1) is None:
                try:
                    self._watch_tree(rel)
                except OSError as exc:
                    self._distrust(f"the watcher failed ({_reason(exc)})")
                    return
            self._touch(folders=[rel])
        elif name.lower().endswith(MEMORY_SUFFIXES):
            self._touch(files=[rel])

    def on_path(self, rel: str, folder: bool) -> None:
        """A path the observer reported changed (`fsmem.store.observed`); it watches the whole tree itself."""
        if folder:
            self._touch(folders=[rel])
        elif rel.lower().endswith(MEMORY_SUFFIXES):
            self._touch(files=[rel])

    def on_root_gone(self) -> None:
        self._distrust("the memory root was moved, deleted or unmounted")

    def on_overflow(self) -> None:
        self.overflows += 1
        self.say(f"change feed for {self.root}: the event queue overflowed; walking the whole memory")
        with self._lock:
            for pending in self._consumers.values():
                pending.delta = Delta(True, "overflow")
        if self._source is None:
            return  # the observer watches the whole tree itself
        try:
            self._watch_tree("")  # folders made while events were lost have no watch yet
        except OSError as exc:
            self._distrust(f"the watcher failed ({_reason(exc)})")

    def _touch(self, files: Iterable[str] = (), folders: Iterable[str] = ()) -> None:
        with self._lock:
            for pending in self._consumers.values():
                delta = pending.delta
                if delta.full:
                    continue
                delta.files.update(files)
                delta.folders.update(folders)
                if len(delta.files) + len(delta.folders) > MAX_PENDING:
                    pending.delta = Delta(True, "too many changes")

    # -- watches ----------------------------------------------------------------
    def _watch_tree(self, top: str) -> None:
        """Watch `top` and every folder under it that a walk enters (hidden ones, .fsmem/ and .git/ not)."""
        assert self._source is not None
        stack = [top]
        while stack:
            rel = stack.pop()
            full = os.path.join(self.root, rel) if rel else os.fspath(self.root)
            try:
                wd = self._source.add(self, full)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    continue  # gone already, or not a folder a walk could enter either
                raise
            old = self._watches.get(wd)
            if old is not None and old != rel:
                self._folders.pop(old, None)
            self._watches[wd] = rel
            self._folders[rel] = wd
            try:
                with os.scandir(full) as entries:
                    for entry in entries:
                        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                            continue
                        inner = f"{rel}/{entry.name}" if rel else entry.name
                        if folder_problem(entry.name, inner.count("/") + 1) is None:
                            stack.append(inner)
            except OSError:
                continue

    def _forget_tree(self, top: str) -> None:
        for rel in [r for r in self._folders if r == top or r.startswith(top + "/")]:
            wd = self._folders.pop(rel)
            self._watches.pop(wd, None)
            if self._source is not None:
                self._source.release(self, wd)

    def _forget_watch(self, wd: int) -> None:
        rel = self._watches.pop(wd, None)
        if rel is not None and self._folders.get(rel) == wd:
            del self._folders[rel]


# -- the registry: one feed per root per process ------------------------------------------------------
_feeds: Shared[Path, Feed] = Shared()


def acquire(root: Path, *, verify_seconds: float = VERIFY_SECONDS) -> Feed:
    """The feed of `root` in this process, started on first use; give it back with `release`."""
    key = Path(root).resolve()

    def started() -> Feed:
        feed = Feed(key, verify_seconds=verify_seconds)
        feed.start()
        return feed

    return _feeds.take(key, started)


def release(feed: Feed) -> None:
    """One user fewer; the last one stops the feed (its watches go back to the kernel)."""
    _feeds.give_back(feed.root, feed)


def current(root: Path) -> Feed | None:
    """The feed of `root` (a resolved path) if one runs in this process: a cache that does not hold it (the
    search index) may catch up through it while someone else does."""
    return _feeds.get(Path(root))


def running(root: Path) -> bool:
    """True when a feed of `root` (any spelling of it) runs in this process: another `Memory` of that root may
    take it from its first call, since the feed, not the number of calls, is what keeps it fresh."""
    return bool(_feeds) and _feeds.get(Path(root).resolve()) is not None


def untrusted_file_system(root: Path, mountinfo: str | None = None) -> str | None:
    """Why events under `root` cannot be trusted (a network or FUSE file system), or None.

    Reads /proc/self/mountinfo (or `mountinfo`): the mount holding the root is the longest mount point
    above it, and its type names the file system. Where there is no such file, None."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
                mountinfo = handle.read()
        except OSError:
            return None
    real = os.path.realpath(root)
    best, kind = "", ""
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        after = line.split(" - ", 1)[1].split()
        if not after:
            continue
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, after[0]
    base = kind.split(".", 1)[0]
    if kind in UNTRUSTED_FILE_SYSTEMS or base in UNTRUSTED_FILE_SYSTEMS:
        return f"the memory is on a {kind} file system, which does not report every change"
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__
