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
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from fsmem.server.settings import Limits

# Tools whose cost is bounded by the size of their answer: a listing page from the metadata cache, one
# file's slice, one version of one file. Everything else (a search ranks rows of the whole memory, a grep
# reads every file, links and log walk) is costly, and so is a tool this list does not know.
CHEAP_TOOLS = frozenset({"ls", "read", "show"})


def costly_request(rpc: str | None, tool: str | None) -> bool:
    """Whether a request counts against its token's share of costly requests: a tool call that is not cheap
    (a tool this server does not know included) and a prompt (it reads every episode not yet distilled)."""
    return rpc == "prompts/get" or (rpc == "tools/call" and tool not in CHEAP_TOOLS)


@dataclass
class Lanes:
    """One server's thread limiters, one per cost class."""

    cheap: anyio.CapacityLimiter
    costly: anyio.CapacityLimiter
    writes: anyio.CapacityLimiter
    # the hand-off of a read to a thread, sized for both read lanes: anyio's default (40 threads in all)
    # would queue a cheap call behind costly ones when `workers` is near 40
    handoff: anyio.CapacityLimiter

    @classmethod
    def of(cls, limits: Limits) -> Lanes:
        return cls(
            cheap=anyio.CapacityLimiter(limits.cheap_workers),
            costly=anyio.CapacityLimiter(limits.workers),
            writes=anyio.CapacityLimiter(max(1, limits.workers // 2)),
            handoff=anyio.CapacityLimiter(limits.cheap_workers + limits.workers),
        )

    def for_read(self, tool: str | None) -> anyio.CapacityLimiter:
        """The lane a read tool runs on (None: the context resource, which is cheap)."""
        return self.cheap if tool is None or tool in CHEAP_TOOLS else self.costly
