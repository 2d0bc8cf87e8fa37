"""The change feed's source where there is no inotify (macOS, Windows, BSD): watchdog's observer, with a barrier.

watchdog's public `Observer` (FSEvents, ReadDirectoryChangesW, kqueue) reports
changes on a thread of its own, some time after they happen: alone it could
only say "probably nothing changed". Exact freshness needs a barrier, and this
is Watchman's: at the start of a call, `drain` creates a cookie file under
`.fsmem/cookies/` and waits until the observer reports it. The observer
reports one root's events in the order they happened, so once the cookie is
seen every change finished before the call has been seen too, and is handed to
the feed (`fsmem.store.feed.Feed.on_path`). A cookie not reported within
`COOKIE_SECONDS`, or events lost (`EventsLostEvent`), raise `OSError`: the
feed then walks, as it does where it cannot trust its source.

The cost is a file created and deleted per call, and the observer's latency
(FSEvents' is its `latency` setting, tens of milliseconds; ReadDirectoryChangesW
reports at once) — against a walk of every file.
"""

from __future__ import annotations

import errno
import itertools
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from fsmem.store.files import state_dir

COOKIE_SECONDS = 2.0  # a cookie not reported in this long: the observer cannot be trusted, the feed walks
COOKIES = "cookies"
_IGNORED = ("opened", "closed_no_write")  # reads, not changes


class Feed(Protocol):
    """What the observer hands changes to (`fsmem.store.feed.Feed`)."""

    def on_path(self, rel: str, folder: bool) -> None: ...

    def on_overflow(self) -> None: ...

    def on_root_gone(self) -> None: ...


class Observed:
    """One root watched by watchdog's observer, its events handed to `feed` at each `drain`, after a cookie."""

    def __init__(self, feed: Feed, root: Path):
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.feed = feed
        self.root = os.path.realpath(root)
        self.pid = os.getpid()
        self.lock = threading.Lock()  # one drain at a time
        self._events: deque[Any] = deque()
        self._arrived = threading.Condition()
        self._numbers = itertools.count()
        self._cookies = state_dir(Path(self.root), COOKIES)
        self._cookie_prefix = os.path.join(os.path.realpath(self._cookies), f"{os.getpid()}-")
        events, arrived = self._events, self._arrived

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                with arrived:
                    events.append(event)
                    arrived.notify_all()

        self._observer: Any = Observer()
        self._observer.daemon = True
        self._observer.schedule(Handler(), self.root, recursive=True)
        self._observer.start()

    def close(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None and os.getpid() == self.pid:
            observer.stop()
            observer.join(timeout=COOKIE_SECONDS)

    def drain(self) -> None:
        """Hand the feed every change finished before this call; OSError when that cannot be known."""
        with self.lock:
            if self._observer is None:
                raise OSError(errno.EBADF, "the watcher is closed")
            if os.getpid() != self.pid:
                raise OSError(errno.ECHILD, "the watcher belongs to the parent process")
            if not self._observer.is_alive():
                raise OSError(errno.EPIPE, "the observer stopped")
            cookie = self._cookie_prefix + str(next(self._numbers))
            with open(cookie, "x", encoding="utf-8"):
                pass
            try:
                self._hand_over_until(cookie)
            finally:
                try:
                    os.unlink(cookie)
                except OSError:
                    pass

    def _hand_over_until(self, cookie: str) -> None:
        deadline = time.monotonic() + COOKIE_SECONDS
        while True:
            with self._arrived:
                while not self._events:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise OSError(errno.ETIMEDOUT, "the observer did not report a change in time")
                    self._arrived.wait(left)
                event = self._events.popleft()
            if event.event_type == "created" and os.fsdecode(event.src_path) == cookie:
                return
            self._hand_over(event)

    def _hand_over(self, event: Any) -> None:
        kind = event.event_type
        if kind == "events_lost":
            self.feed.on_overflow()
            return
        if kind in _IGNORED or (event.is_directory and kind not in ("created", "deleted", "moved")):
            return  # a read; or a folder's own time changed, which each file's event covers
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            full = os.fsdecode(raw)
            if full == self.root:
                if kind in ("deleted", "moved"):
                    self.feed.on_root_gone()
                continue
            if not full.startswith(self.root + os.sep):
                continue  # moved out of the memory: its source path is the change
            rel = full[len(self.root) + 1 :].replace(os.sep, "/")
            if any(part.startswith(".") for part in rel.split("/")):
                continue  # .fsmem/, .git/ and other hidden paths hold no memory file
            self.feed.on_path(rel, bool(event.is_directory))
