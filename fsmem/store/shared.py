"""One instance per key in a process, shared by its users: made by the first, ended by the last.

A memory's change feed (`fsmem.store.feed`: an inotify instance, a thread) and a work tree's git readers
(`fsmem.history.git`: two long-lived processes) cost something to start and to hold, and a process may open
the same memory many times (the team server keeps a `Memory` per view): each user takes the one instance of
its key, and the last to give it back closes it.

A user is often an object whose finalizer gives its instance back, and a finalizer runs whenever the garbage
collector does: in this thread, in the middle of `take` (a dict lookup allocates). A give-back that comes in
while this thread is inside the registry is kept and done once it is out, never under the registry's feet:
with a plain lock it waited for itself for ever (a test process hung so).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class Counted(Protocol):
    users: int  # how many took it and have not given it back

    def close(self) -> None: ...


K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Counted)


class Shared(Generic[K, V]):
    """The instances of one kind in this process, by key."""

    def __init__(self) -> None:
        self._items: dict[K, V] = {}
        self._lock = threading.RLock()  # re-entered only by a finalizer of this thread (`_inside` says so)
        self._inside = False
        self._deferred: list[tuple[K, V]] = []

    @contextmanager
    def _holding(self) -> Iterator[None]:
        """The registry to this thread; the give-backs that came in meanwhile are done after it is let go."""
        with self._lock:
            self._inside = True
            try:
                yield
            finally:
                self._inside = False
                deferred, self._deferred = self._deferred, []
        for key, found in deferred:
            self.give_back(key, found)

    def take(self, key: K, make: Callable[[], V]) -> V:
        """The instance of `key` (made by `make` if there is none), with one more user."""
        with self._holding():
            found = self._items.get(key)
            if found is None:
                found = self._items[key] = make()
            found.users += 1
        return found

    def give_back(self, key: K, found: V) -> None:
        """One user fewer for `found`, taken as `key`'s; the last one closes it (outside the lock)."""
        with self._lock:
            if self._inside:  # a finalizer run by the collector while this thread is inside: done after
                self._deferred.append((key, found))
                return
        last = False
        with self._holding():
            found.users -= 1
            last = found.users <= 0
            if last and self._items.get(key) is found:
                del self._items[key]
        if last:
            found.close()

    def snapshot(self) -> dict[K, V]:
        """Every instance held now, by key."""
        with self._holding():
            return dict(self._items)

    def forget(self, key: K) -> V | None:
        """Take `key`'s instance out without closing it, whatever its users (a process's end that closes it)."""
        with self._holding():
            return self._items.pop(key, None)

    def get(self, key: K) -> V | None:
        """The instance of `key`, if one is held."""
        return self._items.get(key)

    def __bool__(self) -> bool:
        return bool(self._items)
