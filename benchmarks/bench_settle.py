"""What Python's garbage collector walks in a long-lived process after new questions, settled or not.

    .venv/bin/python benchmarks/bench_settle.py [--root DIR] [--sizes 10000] [--queries 60] [--runs 3]

`fsmem serve` and `fsmem watch` settle once their memories are warm (`fsmem.warming.settle`): what they hold
then is moved out of the collector's walks. Each run is a fresh process that opens the memory, warms it as
those processes do, settles it or not (the two kinds alternate, `--runs` of each), searches twice to start
the change feed, asks the same `--queries` new questions (`common.NewQuestions`, seed 5), and then collects
in full three times: the least CPU time of the three, the objects the collector tracks and the references
it follows from them (each list, tuple or set item, each dict key and value). Also the full collections
that fell within the searches (`common.CollectorPauses`). Medians of the runs, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SIDES = ("settled", "not settled")


def child(root: Path, side: str, queries: int) -> dict:
    import gc

    from common import CollectorPauses, NewQuestions

    from fsmem import Memory, warming

    sampler = NewQuestions(root, seed=5)
    asked = [sampler.question(3) for _ in range(queries)]
    del sampler
    memory = Memory(root)
    warming.warm(memory)
    if side == "settled":
        warming.settle()
    memory.search("warm up: the modules a first search imports")
    memory.search("warm up: the change feed takes over from the walk")
    pauses = CollectorPauses()
    pauses.timing = True
    for question in asked:
        memory.search(question)
    pauses.timing = False
    within = [seconds for generation, seconds in pauses.pauses if generation == 2]
    cpu = []
    for _ in range(3):
        started = time.process_time()
        gc.collect()
        cpu.append(time.process_time() - started)
    tracked = gc.get_objects()
    followed = sum(_references(thing) for thing in tracked)
    return {"cpu": min(cpu), "tracked": len(tracked), "followed": followed, "within": within}


def _references(thing) -> int:
    kind = type(thing)
    if kind is dict:
        return 2 * len(thing)
    if kind in (list, tuple, set, frozenset):
        return len(thing)
    return 1


def main() -> int:
    from common import memories, memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    if args.child:
        print(json.dumps(child(args.root, args.child, args.queries)))
        return 0
    for root in memories(args.root, args.sizes):
        found: dict[str, list[dict]] = {side: [] for side in SIDES}
        loads = [os.getloadavg()[0]]
        for _run in range(args.runs):
            for side in SIDES:
                done = subprocess.run(
                    [sys.executable, __file__, "--root", str(root), "--queries", str(args.queries), "--child", side],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                found[side].append(json.loads(done.stdout.splitlines()[-1]))
        loads.append(os.getloadavg()[0])
        print(f"{root}: {args.queries} new questions, {args.runs} processes each way, alternating")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(
            f"{'':<14} {'full collection ms CPU':>22} {'objects tracked':>16} {'references':>11} {'within searches':>16}"
        )
        for side in SIDES:
            runs = found[side]
            within = [seconds for run in runs for seconds in run["within"]]
            print(
                f"{side:<14} {1000 * statistics.median(r['cpu'] for r in runs):>22.1f}"
                f" {statistics.median(r['tracked'] for r in runs):>16,.0f}"
                f" {statistics.median(r['followed'] for r in runs):>11,.0f}"
                f" {len(within):>3} ({1000 * statistics.median(within) if within else 0:.1f} ms p50)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
