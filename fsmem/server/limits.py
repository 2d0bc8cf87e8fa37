"""Per-token rate and concurrency limits: a token bucket and a counter, keyed by token id.

Only requests with a valid token reach them, so their tables grow with the
number of tokens, never with what strangers send. Both are used from the
server's one event loop thread and need no lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    """A token bucket per key: `rate` requests a second on average, `burst` at once after a quiet spell."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens left, when counted)

    def take(self, key: str) -> float:
        """0.0 when the request may go ahead (and is counted); else the seconds until it would."""
        now = self.clock()
        left, then = self._buckets.get(key, (float(self.burst), now))
        left = min(float(self.burst), left + (now - then) * self.rate)
        if left >= 1.0:
            self._buckets[key] = (left - 1.0, now)
            return 0.0
        self._buckets[key] = (left, now)
        return (1.0 - left) / self.rate


class InFlight:
    """How many requests each key has in flight, with a cap per key and one in all."""

    def __init__(self, per_key: int, total: int):
        self.per_key = per_key
        self.total = total
        self._counts: dict[str, int] = {}
        self.count = 0

    def acquire(self, key: str) -> str | None:
        """None when admitted (release it later); else "key" or "total", the cap that refused it."""
        if self.count >= self.total:
            return "total"
        held = self._counts.get(key, 0)
        if held >= self.per_key:
            return "key"
        self._counts[key] = held + 1
        self.count += 1
        return None

    def release(self, key: str) -> None:
        held = self._counts.get(key, 0) - 1
        if held > 0:
            self._counts[key] = held
        else:
            self._counts.pop(key, None)
        self.count -= 1


class Slot:
    """One request's hold on its token's share (a request in flight, or an event stream).

    It is released once the request and whatever work it left running are both
    done: a read whose answer was given up at its time limit keeps its token's
    slot (and its worker thread) until its thread ends, so a token cannot pile
    up abandoned work beyond its share. Used from the event loop thread only.
    """

    def __init__(self, release: Callable[[], None]):
        self._releases = [release]
        self.holders = 1

    def also(self, release: Callable[[], None]) -> None:
        """Release this too when the slot goes (the share of the request's cost class, taken once it is known)."""
        self._releases.append(release)

    def hold(self) -> None:
        self.holders += 1

    def drop(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            for release in self._releases:
                release()


def too_many(n: int, costly: bool | None = None) -> str:
    """The 429's message when a token's share is full: of its cost class, or (None) both at the door."""
    kind = {
        True: f"at most {n} costly calls at once: search, grep, links, history, writes, prompts",
        False: f"at most {n} cheap calls at once: ls, read, show, the context, the protocol's own",
        None: f"at most {n} cheap and {n} costly",
    }[costly]
    return f"this token already has {n if costly is not None else 2 * n} request(s) in flight ({kind}); retry after 1 s"
