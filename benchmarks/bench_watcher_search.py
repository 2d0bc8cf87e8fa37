"""A one-shot search as `fsmem watch` runs it, against `Memory.search` in a long-lived process: what each part costs.

    .venv/bin/python benchmarks/bench_watcher_search.py [--root DIR] [--sizes 10000] [--queries 60] [--seed 34]

One process holds the memory as the watcher does (`fsmem.cli.answering`: its change feed held, the memory
warmed and kept, the process settled) and asks new questions (`common.NewQuestions`) in turn two ways: as a
client's `fsmem search QUESTION` is run (`_Request.run`: the command line read, the answer rendered within the
budget, its tokens counted and recorded), and as `Memory.search(QUESTION)` on the same kept memory. Each
question is asked once, each way its own; the garbage collector is off while one runs, as the watcher turns
it off. Per question the asking thread's CPU (`time.thread_time`: the load inflates it less than the wall),
and, within the request, the CPU of each part (`PARTS`, a part's time where it is called outside another
call of itself); medians. `bench_oneshot.py` gives the same of a real `fsmem watch` (its threads' CPU within
each search), and `bench_search_unique.py --parts` the parts of the long-lived search.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

# (label, module, attribute): each timed where it is called (a patched module attribute or class method)
PARTS = [
    ("the request (fsmem search, as the watcher runs it)", "fsmem.cli.answering", "_Request.run"),
    ("the answer within the budget (budget.within)", "fsmem.budget", "within"),
    ("Memory.search", "fsmem.operations.search", "search"),
    ("ranking and fitting (ranking.search)", "fsmem.search.ranking", "search"),
    ("the ranking (scoring.rank)", "fsmem.search.ranking", "rank"),
    ("the rows fitted (ranking.fit)", "fsmem.search.ranking", "fit"),
    ("the rows read back (HitRows)", "fsmem.search.ranking", "HitRows.__getitem__"),
    ("tokens counted (TokenCounter.count)", "fsmem.tokens", "TokenCounter.count"),
    ("the retrieval log written", "fsmem.store.retrieval_log", "LoggedCall.__exit__"),
    ("the usage counts", "fsmem.search.ranking", "usage_counts"),
    ("the answer rendered (to_text)", "fsmem.search.results", "SearchResult.to_text"),
]


def main() -> int:
    from common import NewQuestions, PartTimes, memories, memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=34, help="bench_oneshot.py's questions are drawn with 34")
    args, _rest = parser.parse_known_args()
    parts = PartTimes(PARTS)  # before the modules that import these names are loaded
    from fsmem.cli.answering import Answering, _Request
    from fsmem.memory import Memory

    for given in memories(args.root, args.sizes):
        root = os.path.realpath(given)
        holder = Memory(root)
        answering = Answering(holder.root, lambda message: print(message, file=sys.stderr))
        holder.catalog.hold_feed()  # as `fsmem watch` holds it: every memory opened here is fresh without a walk
        answering.kept.warm(answering.root, lambda message: print(message, file=sys.stderr))
        memory = answering.kept.open(answering.root, None)
        fresh = NewQuestions(Path(root), seed=args.seed)

        def request(question: str, answering: Answering = answering, root: str = root) -> None:
            code, printed = _Request(answering.root, root, {}, ["search", question]).run(answering.kept)
            if code not in (0, 1):
                raise SystemExit(f"fsmem search {question!r} failed: {printed}")

        sides = {"as the watcher runs it": request, "Memory.search": memory.search}
        for question in ["warm up", *(fresh.question() for _ in range(3))]:  # imports, the tokenizer's table
            for ask in sides.values():
                ask(question)
        spent: dict[str, list[float]] = {name: [] for name in sides}
        within: dict[str, list[float]] = {label: [] for label, _, _ in PARTS}
        for n in range(args.queries):
            for name in list(sides)[:: 1 if n % 2 else -1]:
                question = fresh.question()
                parts.spent.clear()
                gc.disable()
                try:
                    started = time.thread_time()
                    sides[name](question)
                    spent[name].append(time.thread_time() - started)
                finally:
                    gc.enable()
                if name == "as the watcher runs it":
                    for label in within:
                        within[label].append(parts.spent.get(label, 0.0))
        print(f"{root}: {args.queries} new questions each way, load average {os.getloadavg()[0]:.1f}")
        for name, values in spent.items():
            print(f"  {name:<60} CPU p50 {statistics.median(values) * 1000:6.2f} ms")
        print("  within the request, each part's CPU (p50):")
        for label, values in within.items():
            print(f"    {label:<58} {statistics.median(values) * 1000:6.2f} ms")
        answering.close()
        holder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
