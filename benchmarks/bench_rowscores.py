"""The row part scored file by file, the native module's score function against its Python twin: CPU.

    .venv/bin/python benchmarks/bench_rowscores.py [--root DIR] [--sizes 10000] [--queries 60] [--seed 7]

Asks `--queries` new questions (`common.NewQuestions`: three words of one line of the memory) of one `Memory`
and keeps what each asked the row part to score file by file (`fsmem.search.rowscores.best_row_scores`: the
questions matching more than 3,000 documents, whose best 300 documents' files are scored where the cost model
finds that cheaper). Then scores each again on a connection of the search index's own, with a reader's page
cache (`fsmem.search.index.READER_CACHE_KIB`), in one read transaction a question, three ways in every order in
turn: with
the native module's FTS5 function (`fsmem_row_score`), with the Python twin's, and FTS5's seeks alone (the
same statements asking only each matching row's id: what no score function can take away). Both functions must
give the same rows and the same floats to the bit. Prints each way's CPU per question (median, slowest), the
load average beside.

`--root` is a memory whose caches are built (a copy: fsmem writes `.fsmem/`); without it the seeded benchmark
corpus of `--sizes` files is built under bench-out/ and searched once to build its index.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

NATIVE = "the native function"
TWIN = "the Python twin"
SEEKS = "FTS5's seeks alone"


def seeks_alone(conn, match: str, files: dict) -> int:
    """The row part's statements, one per file, asking only the matching rows' ids."""
    from fsmem.search.postings import BLOCK_BITS

    found = 0
    for fid in sorted(files):
        base = fid << BLOCK_BITS
        found += len(
            conn.execute(
                "SELECT rowid FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ?",
                (match, base, base + len(files[fid]) - 1),
            ).fetchall()
        )
    return found


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    from common import memories, reader, row_parts_asked

    from fsmem import Memory
    from fsmem.search import rowscores

    if not rowscores.native_built():
        print("fsmem.search._native is not built here with its score function (make install builds it)")
        return 1
    for root in memories(args.root, args.sizes):
        memory = Memory(root)
        memory.search("warm up: the first search builds the index")
        asked = [call[:6] for call in row_parts_asked(memory, Path(root), args.seed, args.queries)]
        conn = reader(memory)
        times: dict[str, list[float]] = {NATIVE: [], TWIN: [], SEEKS: []}
        orders = list(itertools.permutations(times))  # each way first, in the middle and last alike
        loads = [os.getloadavg()[0]]
        matched = []
        for number, (_conn, match, phrases, df, weights, files) in enumerate(asked):
            answers = {}
            for side in orders[number % len(orders)]:
                rowscores.native = side == NATIVE
                conn.execute("BEGIN")
                try:
                    started = time.process_time()
                    if side == SEEKS:
                        seeks_alone(conn, match, files)
                    else:
                        answers[side] = rowscores.row_scores(conn, match, phrases, df, weights, files)
                    times[side].append(time.process_time() - started)
                finally:
                    conn.execute("COMMIT")
                    rowscores.native = True
            if [(r, s.hex()) for r, s in answers[NATIVE]] != [(r, s.hex()) for r, s in answers[TWIN]]:
                raise SystemExit(f"the two functions scored {match} differently")
            matched.append(len(answers[NATIVE]))
        loads.append(os.getloadavg()[0])
        print(f"{root}: {len(asked)} of {args.queries} new questions scored file by file, the same scores both ways")
        if not asked:
            continue
        print(f"matching rows a question: median {statistics.median(matched):,.0f}, most {max(matched):,}")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"{'CPU per question':<24} {'median ms':>10} {'max ms':>8}")
        for side, values in times.items():
            print(f"{side:<24} {1000 * statistics.median(values):>10.1f} {1000 * max(values):>8.1f}")
        ratio = statistics.median(times[TWIN]) / statistics.median(times[NATIVE])
        print(f"the twin's median / the native function's: {ratio:.2f}x")
        conn.close()
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
