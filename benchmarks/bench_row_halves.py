"""The row part's statements on one connection against split between two threads' connections: wall and CPU.

    .venv/bin/python benchmarks/bench_row_halves.py --root COPY [--queries 60] [--seed 7] [--files 4,8,16,32]

Asks `--queries` new questions (`common.NewQuestions`) of one `Memory` and keeps what each asked the row part to
score file by file (`fsmem.search.rowscores.best_row_scores`). Then runs each again, in a read transaction as a
search does, on one connection and split between it and a second connection on the helper thread
(`fsmem.search.halves`), in turn, each first in every other question: the same rows and floats to the bit both
ways. Prints per way the wall time, the asking thread's CPU and the process's CPU per question (medians, the
slowest), for all of a question's files and for only its first `--files` files (where a split starts to pay),
with the load average beside.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

ONE = "one connection"
TWO = "two threads"


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--files", default="2,4,8,16,32,64", help="also time each question's first N files")
    parser.add_argument("--rounds", type=int, default=3, help="times each way runs a question")
    args, _rest = parser.parse_known_args()
    from common import memories

    from fsmem.search import rowscores

    if not rowscores.native_built():
        print("fsmem.search._native is not built here with its score function (make install builds it)")
        return 1
    for root in memories(args.root, args.sizes):
        measure(root, args)
    return 0


def measure(root, args) -> None:
    """Replay one memory's questions' row parts both ways and print the times."""
    from common import reader, row_parts_asked

    from fsmem import Memory
    from fsmem.search import halves, rowscores

    memory = Memory(root)
    memory.search("warm up: the first search builds the index")
    asked = [call[1:8] for call in row_parts_asked(memory, Path(root), args.seed, args.queries)]
    conns = [reader(memory), reader(memory)]
    conn, partner = conns
    cuts = [None, *(int(n) for n in args.files.split(","))]
    times: dict[tuple, list[tuple[float, float, float]]] = {}
    loads = [os.getloadavg()[0]]
    rowscores.SPLIT_FILES = 1
    helped: dict[str, int] = {"asked": 0, "ran": 0}
    helper_cpu: list[float] = []
    inner_state = halves.same_state

    def same_state(conn, *rest):
        started = time.thread_time()
        found = inner_state(conn, *rest)
        helped["ran"] += found is not None
        helper_cpu.append(time.thread_time() - started)
        return found

    halves.same_state = same_state  # type: ignore[assignment]
    for number, (match, phrases, df, weights, files, superseded_too, k) in enumerate(asked):
        for cut in cuts:
            some = files if cut is None else {fid: files[fid] for fid in sorted(files)[:cut]}
            if cut is not None and len(some) < cut:
                continue
            answers = {}
            if cut is None:
                helped_before = helped["ran"]
            for turn in range(2 * args.rounds):
                side = (ONE, TWO)[(turn + number) % 2]
                conn.execute("BEGIN")
                try:
                    conn.execute("SELECT count(*) FROM search_meta").fetchall()  # the transaction starts
                    wall, mine, process = time.perf_counter(), time.thread_time(), time.process_time()
                    answers[side] = rowscores.best_row_scores(
                        conn,
                        match,
                        phrases,
                        df,
                        weights,
                        some,
                        superseded_too,
                        k,
                        (lambda: partner) if side == TWO else None,
                    )
                    took = (time.perf_counter() - wall, time.thread_time() - mine, time.process_time() - process)
                finally:
                    conn.execute("COMMIT")
                times.setdefault((cut, side), []).append(took)
                helped["asked"] += side == TWO and cut is None
            if [(r, s.hex()) for r, s in answers[ONE]] != [(r, s.hex()) for r, s in answers[TWO]]:
                raise SystemExit(f"the two ways gave {match} different rows")
            if cut is None:
                helped["all"] = helped.get("all", 0) + helped["ran"] - helped_before
    halves.same_state = inner_state  # type: ignore[assignment]
    loads.append(os.getloadavg()[0])
    print(f"{root}: {len(asked)} of {args.queries} new questions scored file by file, the same rows both ways")
    print(f"files a question: median {statistics.median(len(a[4]) for a in asked):.0f}")
    print(f"load average {min(loads):.1f}-{max(loads):.1f}; {args.rounds} rounds a way, medians of each question")
    print(f"{'files':>6} {'way':<15} {'n':>4} {'wall p50':>9} {'wall max':>9} {'thread p50':>11} {'process p50':>12}")
    for cut in cuts:
        for side in (ONE, TWO):
            values = times.get((cut, side))
            if not values:
                continue
            per = [values[i : i + args.rounds] for i in range(0, len(values), args.rounds)]
            best = [min(group) for group in per]  # the least disturbed round of each question
            walls = [w for w, _t, _p in best]
            print(
                f"{'all' if cut is None else cut:>6} {side:<15} {len(per):>4}"
                f" {1000 * statistics.median(walls):>9.2f} {1000 * max(walls):>9.2f}"
                f" {1000 * statistics.median(t for _w, t, _p in best):>11.2f}"
                f" {1000 * statistics.median(p for _w, _t, p in best):>12.2f}"
            )
    one = [
        min(values[i : i + args.rounds]) for values in [times[(None, ONE)]] for i in range(0, len(values), args.rounds)
    ]
    two = [
        min(values[i : i + args.rounds]) for values in [times[(None, TWO)]] for i in range(0, len(values), args.rounds)
    ]
    slowest = sorted(range(len(one)), key=lambda i: -one[i][0])[:5]
    print(
        "the 5 slowest on one connection, wall one / two (ms): "
        + ", ".join(f"{1000 * one[i][0]:.1f} / {1000 * two[i][0]:.1f}" for i in slowest)
    )
    print(
        f"all files split: the helper ran its half {helped.get('all', 0)} of {helped['asked']} times"
        f" (else the asking thread ran it); the helper's CPU a half, median"
        f" {1000 * statistics.median(helper_cpu or [0]):.2f} ms"
    )
    for c in conns:
        c.close()
    memory.close()


if __name__ == "__main__":
    sys.exit(main())
