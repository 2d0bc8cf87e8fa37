"""The server's thread lanes: cheap reads, costly reads and writes each have threads of their own.

A search or grep of a large memory costs hundreds of times the CPU of an `ls`
or a `read`. On one pool the cheap calls queued behind the costly ones, and
under 32 clients waited nearly as long as a search (docs/performance.md, "The
memory server under load"). So a call runs on the lane of its cost: `cheap_workers` threads for
the tools whose work is bounded by their answer (`CHEAP_TOOLS`, and the
context resource), `workers` threads for every other read (search, grep,
links, history, and any tool a plugin registers), and half as many threads
again for writes, which may wait for the memory's write lock. Nothing costly
ever runs on a cheap thread, so a cheap call waits only for other cheap calls.

A token's share is per cost class: at most `concurrency` of its costly
requests (`costly_request`: a costly read, a write, a prompt) and, counted
apart, `concurrency` of its cheap ones (`ls`, `read`, `show`, the context
resource, and the protocol's own requests) are in flight at once. With one
count for both, a token's `ls` was refused (429) while its own four searches
ran; with `cheap_workers` and `workers` above `concurrency`, another token
still always finds a thread on each lane.

The costly lane admits a read only when it expects to answer it in time (`Backlog`): past that, the door
refuses it at once as busy (503, Retry-After), where it used to wait in an unbounded queue and then run
beside every other costly call until its time limit gave it up (the 100k-file mix's errors, 2026-12-07).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import anyio

from fsmem.agents.registry import REGISTRY
from fsmem.server.settings import Limits

# Tools whose cost is bounded by the size of their answer: a listing page from the metadata cache, one
# file's slice, one version of one file. Everything else (a search ranks rows of the whole memory, a grep
# reads every file, links and log walk) is costly, and so is a tool this list does not know.
CHEAP_TOOLS = frozenset({"ls", "read", "show"})


def costly_request(rpc: str | None, tool: str | None) -> bool:
    """Whether a request counts against its token's share of costly requests: a tool call that is not cheap
    (a tool this server does not know included) and a prompt (it reads every episode not yet distilled)."""
    return rpc == "prompts/get" or (rpc == "tools/call" and tool not in CHEAP_TOOLS)


def costly_read(rpc: str | None, tool: str | None) -> bool:
    """Whether a request runs on the costly lane: a costly request that is not a write (writes have their own)."""
    chosen = REGISTRY.get(tool) if tool is not None else None
    return costly_request(rpc, tool) and not (chosen is not None and chosen.writes)


class Mark(NamedTuple):
    """Where a costly run started: on the backlog's clock of shares (`own`) and on its wall clock (`at`); and
    its kind (a registered tool's name, "prompt", or "" for any other)."""

    own: float
    at: float
    kind: str = ""


class Backlog:
    """The costly lane's backlog: whether to take one more call, and how long each running call has had.

    A call that finds a thread free starts at once. Otherwise it waits for the calls ahead of it, which end
    at about `threads` per mean run (the runs measured as they end, slowed as they are by one another:
    Little's law), and then runs its own, as long as its kind's runs lately (at 100k files a grep's is
    thirty times a search's): `expected()`. The door takes it only when that is at most half
    its time limit (`tool_timeout_seconds`), leaving the other half for a run slower than the mean;
    otherwise it refuses it before anything runs, with the seconds until the backlog would take it. With
    no run measured yet (a server just started) every call is taken.

    A costly call's time limit counts its own share of the time it runs (`own_since`): with n costly calls
    running, each has 1/n of each second, as they share the process's Python and the cores. On the wall
    clock, a grep that takes 0.2 s alone ran past 3 s beside seven others on a busy core and was given up,
    its work thrown away; a call that is costly alone is still given up at the limit, later when others run.
    Counts of calls taken change on the event loop (`enter`, `leave`); runs start and end on their threads.
    """

    SMOOTHING = 0.2  # each run's weight in the mean: the last ten or so runs count

    def __init__(self, threads: int, timeout: float, clock: Callable[[], float] = time.perf_counter):
        self.threads = threads
        self.bound = timeout / 2
        self.calls = 0  # costly reads taken and not ended: running or waiting for a thread
        self.running = 0
        self.run: float | None = None  # the mean run, in seconds
        self.runs: dict[str, float] = {}  # the mean run of each kind (registered tools only: a bounded set)
        self.clock = clock
        self._own = 0.0  # the time one running call has had since the start, in shares: see `own_since`
        self._then = clock()
        self._lock = threading.Lock()

    def enter(self) -> None:
        self.calls += 1

    def leave(self) -> None:
        self.calls -= 1

    def started(self, kind: str = "") -> Mark:
        """A run of `kind` starts (on its thread): where its own time and its run count from."""
        with self._lock:
            self._advance()
            self.running += 1
            return Mark(self._own, self._then, kind)

    def ended(self, mark: Mark) -> None:
        """The run started at `mark` ends (on its thread)."""
        with self._lock:
            self._advance()
            self.running -= 1
            seconds = self._then - mark.at
            self.run = _mean(self.run, seconds)
            self.runs[mark.kind] = _mean(self.runs.get(mark.kind), seconds)

    def own_since(self, mark: Mark) -> float:
        """Seconds of its own that the run started at `mark` has had: each second counts 1/n with n running."""
        with self._lock:
            self._advance()
            return self._own - mark.own

    def _advance(self) -> None:
        now = self.clock()
        self._own += (now - self._then) / max(1, self.running)
        self._then = now

    def ahead(self) -> int:
        """Calls that must end before one more starts (0: a thread is free)."""
        return max(0, self.calls - self.threads + 1)

    def expected(self, kind: str = "") -> float:
        """Seconds until one more call of `kind` would be answered: its wait for a thread, then its run."""
        run = self.run or 0.0
        return run * self.ahead() / self.threads + self.runs.get(kind, run)

    def retry_after(self, kind: str = "") -> int | None:
        """None when one more call of `kind` is taken; else the whole seconds until it would be (at least 1)."""
        if not self.run or not self.ahead() or self.expected(kind) <= self.bound:  # no run measured (or none took time)
            return None
        # the calls ahead beyond those that still leave it in time end at `threads` per mean run
        room = max(0.0, (self.bound - self.runs.get(kind, self.run)) * self.threads / self.run)
        return max(1, math.ceil((self.ahead() - room) * self.run / self.threads))


def _mean(mean: float | None, seconds: float) -> float:
    """A running mean in which each new run weighs `Backlog.SMOOTHING`."""
    return seconds if mean is None else mean + Backlog.SMOOTHING * (seconds - mean)


@dataclass
class Lanes:
    """One server's thread limiters, one per cost class."""

    cheap: anyio.CapacityLimiter
    costly: anyio.CapacityLimiter
    writes: anyio.CapacityLimiter
    # the hand-off of a read to a thread, sized for both read lanes: anyio's default (40 threads in all)
    # would queue a cheap call behind costly ones when `workers` is near 40
    handoff: anyio.CapacityLimiter
    backlog: Backlog  # the costly lane's: whether it takes one more call

    @classmethod
    def of(cls, limits: Limits) -> Lanes:
        return cls(
            cheap=anyio.CapacityLimiter(limits.cheap_workers),
            costly=anyio.CapacityLimiter(limits.workers),
            writes=anyio.CapacityLimiter(max(1, limits.workers // 2)),
            handoff=anyio.CapacityLimiter(limits.cheap_workers + limits.workers),
            backlog=Backlog(limits.workers, limits.tool_timeout_seconds),
        )

    def for_read(self, tool: str | None) -> anyio.CapacityLimiter:
        """The lane a read tool runs on (None: the context resource, which is cheap)."""
        return self.cheap if tool is None or tool in CHEAP_TOOLS else self.costly
