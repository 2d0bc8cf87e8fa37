"""The document part of new questions, fsmem.search._native against its Python twin, in one process: CPU.

    .venv/bin/python benchmarks/bench_native.py [--root DIR] [--sizes 10000] [--queries 40] [--seed 11]

Each question (`common.NewQuestions`: three words of one line of the memory) is asked of the document part
alone, as a search asks it: its words' document frequencies, then the best 3,000 documents by BM25
(`fsmem.search.postings.frequencies` and `bm25`), once with the C module and once with it switched off, so
that the twin in `fsmem.search.postings` answers; in turn which goes first. Each side has a decoded index of
its own, its terms let go before each question: every word's postings are decoded, as for a question whose
words none was kept. Both answers must be the same positions and the same floats to the bit. Prints each
side's CPU per question (median, slowest) and their ratio, the load average beside.

`--root` is a memory whose caches are built (a copy: fsmem writes `.fsmem/`); without it the seeded benchmark
corpus of `--sizes` files is built under bench-out/ and searched once to build its index.
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


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--seed", type=int, default=11)
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    from common import NewQuestions, memories

    from fsmem import Memory
    from fsmem.search import postings
    from fsmem.search.documents import DOCUMENT_POOL
    from fsmem.search.scoring import query_terms
    from fsmem.store import cache

    native = postings._native
    if native is None:
        print("fsmem.search._native is not built here (make install builds it)")
        return 1
    for root in memories(args.root, args.sizes):
        memory = Memory(root)
        memory.search("warm up: the first search builds the index")
        conn = cache.connect(memory.search_index.path)
        sampler = NewQuestions(Path(root), seed=args.seed)
        sides = {"C module": postings._Decoded(conn), "Python twin": postings._Decoded(conn)}
        times: dict[str, list[float]] = {side: [] for side in sides}
        loads = [os.getloadavg()[0]]
        for number in range(args.queries):
            terms, _ = query_terms(memory.search_index.analyzer, sampler.question(3))
            answers = []
            for side in list(sides) if number % 2 == 0 else reversed(sides):
                index = sides[side]
                index._terms.clear()
                index._held = 0
                kept = {postings._DECODED: index}
                postings._native = native if side == "C module" else None
                try:
                    started = time.process_time()
                    postings.frequencies(conn, terms, kept)
                    best, scores = postings.bm25(conn, terms, DOCUMENT_POOL, kept)
                    times[side].append(time.process_time() - started)
                finally:
                    postings._native = native
                answers.append((best, [score.hex() for score in scores]))
            if answers[0] != answers[1]:
                raise SystemExit(f"the two sides answered {terms} differently")
        loads.append(os.getloadavg()[0])
        rows = len(sides["C module"].ids)
        print(f"{root}: {rows:,} documents, {args.queries} new questions, the same answers on both sides")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"{'CPU per question':<20} {'median ms':>10} {'max ms':>8}")
        for side, values in times.items():
            print(f"{side:<20} {1000 * statistics.median(values):>10.1f} {1000 * max(values):>8.1f}")
        ratio = statistics.median(times["Python twin"]) / statistics.median(times["C module"])
        print(f"the twin's median / the C module's: {ratio:.1f}x")
        conn.close()
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
