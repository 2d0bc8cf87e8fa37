"""One instance per key in a process, shared by its users: made by the first, ended by the last.

A memory's change feed (`fsmem.store.feed`: an inotify instance, a thread) and a work tree's git readers
(`fsmem.history.git`: two long-lived processes) cost something to start and to hold, and a process may open
the same memory many times (the team server keeps a `Memory` per view): each user takes the one instance of
its key, and the last to give it back closes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
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
        self._lock = threading.Lock()

    def take(self, key: K, make: Callable[[], V]) -> V:
        """The instance of `key` (made by `make` if there is none), with one more user."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                found = self._items[key] = make()
            found.users += 1
            return found

    def give_back(self, key: K, found: V) -> None:
        """One user fewer for `found`, taken as `key`'s; the last one closes it (outside the lock)."""
        with self._lock:
            found.users -= 1
            if found.users > 0:
                return
            if self._items.get(key) is found:
                del self._items[key]
        found.close()

    def snapshot(self) -> dict[K, V]:
        """Every instance held now, by key."""
        with self._lock:
            return dict(self._items)

    def forget(self, key: K) -> V | None:
        """Take `key`'s instance out without closing it, whatever its users (a process's end that closes it)."""
        with self._lock:
            return self._items.pop(key, None)

    def get(self, key: K) -> V | None:
        """The instance of `key`, if one is held."""
        return self._items.get(key)

    def __bool__(self) -> bool:
        return bool(self._items)
