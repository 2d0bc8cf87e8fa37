"""What the change feed's check for unreported changes costs: each cache's whole walk (what a question paid
when the check was one) against the feed's own walk beside the questions, and what a cache pays after it.

    .venv/bin/python benchmarks/bench_feed_check.py [--root DIR] [--sizes 10000] [--runs 3]

A long-lived `Memory` (two listings, a search and a grep: the metadata rows, the search index and grep's
word index all caught up on the feed), its feed's check thread parked (`verify_seconds` math.inf), then per
run, CPU and wall time of: each cache taking a whole walk (`Delta.full`, what the check handed every cache
each minute before `fsmem.store.feed_check`, and what a feed without its thread still hands), the feed's
own check (`Feed.check`: one walk and the stamps compared), and each cache taking what that check found
(nothing, on an unchanged memory). `--root` is a memory whose caches are built (a copy: fsmem writes
`.fsmem/`); without it the seeded corpus of `--sizes` files is built under bench-out/.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def timed(action) -> tuple[float, float]:
    """(CPU ms of this thread, wall ms) of `action()`: the check's thread is parked, so the thread is the work."""
    cpu, wall = time.thread_time(), time.perf_counter()
    action()
    return 1000 * (time.thread_time() - cpu), 1000 * (time.perf_counter() - wall)


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--runs", type=int, default=3)
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments

    from common import memories

    from fsmem import Memory
    from fsmem.query import grep_words
    from fsmem.store.feed import Delta

    for root in memories(args.root, args.sizes):
        memory = Memory(root)
        memory.ls(max_results=1)
        memory.ls(max_results=1)  # the second call starts the change feed
        feed = memory.catalog._feed
        if feed is None or not feed.trusted:
            print(f"{root}: no trusted change feed here ({feed.reason if feed else 'none'}); nothing to measure")
            continue
        feed.verify_seconds = math.inf  # the thread is parked: the checks below are the only ones
        memory.search("warm up the search index")
        memory.grep("warm up the word index", fixed_strings=True)
        words = grep_words._indexes.get(feed)
        caches = {
            "search index": memory.search_index._take,
            "metadata rows": memory.catalog.rows.apply,
            "grep word index": words.apply if words is not None else None,
        }
        figures: dict[str, list[tuple[float, float]]] = {}
        loads = [os.getloadavg()[0]]
        for _ in range(args.runs):
            for name, take in caches.items():
                if take is not None:
                    figures.setdefault(f"{name}: a whole walk", []).append(
                        timed(lambda t=take: t(Delta(True, "verify")))
                    )
            found: list = []
            figures.setdefault("the feed's own check (one walk)", []).append(
                timed(lambda found=found, feed=feed: found.append(feed.check()))
            )
            for name, take in caches.items():
                if take is not None:
                    delta = Delta(files=set(found[0] or []))
                    figures.setdefault(f"{name}: what the check found", []).append(timed(lambda t=take, d=delta: t(d)))
        loads.append(os.getloadavg()[0])
        print(f"{root}: {len(feed.checker.stamps or {}):,} memory files; {args.runs} runs")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"{'':<44} {'CPU ms':>8} {'wall ms':>8}  (medians)")
        for name, values in figures.items():
            cpu = statistics.median(v[0] for v in values)
            wall = statistics.median(v[1] for v in values)
            print(f"{name:<44} {cpu:>8.0f} {wall:>8.0f}")
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
