"""What one merge of the search index's segments costs after a single write: CPU, wall time, bytes to disk.

    .venv/bin/python benchmarks/bench_merge_cost.py --root COPY   # a copy of a memory whose caches are built

One `Memory` searches once (its index caught up, any merge pending done), writes one session note, searches
again (the note indexed: a segment added), and waits until its merger has merged every segment into one
(`SearchIndex.writes_merged`). Printed: the wall time from the write to the merged index, the process's CPU
over it, and what the process wrote to disk (`/proc/self/io`'s `write_bytes`, the WAL and its checkpoints
included), the note and its indexing apart from the merge: the former is what the calling thread wrote
(`/proc/thread-self/io`), the latter the rest. The merger starts MERGE_QUIET_S after the write, while the
search that follows it may still run (at 100k files its walk takes longer): what it wrote by the search's end
is printed too. Linux only; it writes into the memory it is given.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def written_bytes(who: str = "self") -> int:
    """Bytes this process (`who` "self") or the calling thread ("thread-self") caused to be written to disk."""
    with open(f"/proc/{who}/io") as counters:
        fields = dict(line.split(": ") for line in counters.read().splitlines())
    return int(fields["write_bytes"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a copy of a memory whose caches are built")
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    if args.root is None or not os.path.exists("/proc/self/io"):
        print("bench_merge_cost: needs --root (a copy whose caches are built) and Linux's /proc/self/io; skipped")
        return 0
    from fsmem import Memory

    memory = Memory(args.root)
    memory.search("warm up: the index caught up")
    index = memory.search_index
    index.writes_merged(3600)
    load = os.getloadavg()[0]
    before, cpu, started = written_bytes(), time.process_time(), time.perf_counter()
    thread_before = written_bytes("thread-self")
    memory.note("a line written to see what merging the segment it adds costs", session="bench-merge-cost")
    memory.search("merging the segment it adds")
    indexed, by_thread = written_bytes(), written_bytes("thread-self") - thread_before
    merged = index.writes_merged(3600)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"{args.root}: load average {load:.1f}-{os.getloadavg()[0]:.1f}")
    print(f"merged into one segment: {merged}; from the write: {wall:.1f} s wall, {cpu:.1f} s of CPU")
    merge, early = written_bytes() - before - by_thread, indexed - before - by_thread
    print(
        f"written to disk: the note and its indexing {by_thread / 1e6:.2f} MB, the merge {merge / 1e6:.1f} MB"
        f" ({early / 1e6:.1f} MB of it while the search after the note ran)"
    )
    memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
