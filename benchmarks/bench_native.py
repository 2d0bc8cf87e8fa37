"""The document part of new questions, fsmem.search._native against its Python twin, in one process: CPU.

    .venv/bin/python benchmarks/bench_native.py [--root DIR] [--sizes 10000] [--queries 40] [--seed 11] [--old REV]

Each question (`common.NewQuestions`: three words of one line of the memory) is asked of the document part
alone, as a search asks it: its words' document frequencies, then the best 3,000 documents by BM25
(`fsmem.search.postings.frequencies` and `bm25`), once with the C module and once with it switched off, so
that the twin in `fsmem.search.postings` answers; in turn which goes first. Each side has a decoded index of
its own, its terms let go before each question: every word's postings are decoded, as for a question whose
words none was kept. Both answers must be the same positions and the same floats to the bit. Prints each
side's CPU per question (median, slowest) and their ratio, the load average beside. `--old REV` adds a side: the C
module as revision REV has it (its `fsmem/search/_native.c` built in a folder of its own), the sides asked in
every order in turn.

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


def built_at(revision: str):
    """fsmem.search._native as `revision` has it: its C source built in a temporary folder and loaded from there."""
    import importlib.util
    import shutil
    import subprocess
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="native-at-"))
    show = ["git", "-C", str(REPO), "show", f"{revision}:fsmem/search/_native.c"]
    (folder / "_native.c").write_bytes(subprocess.run(show, check=True, capture_output=True).stdout)
    (folder / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        'setup(name="native_at", ext_modules=[Extension("_native", ["_native.c"],'
        ' extra_compile_args=["-fno-fast-math", "-ffp-contract=off"])])\n'  # pyproject.toml's
    )
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(build, cwd=folder, check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("_native", next(folder.glob("_native*.so")))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shutil.rmtree(folder)  # the loaded library stays mapped
    return module


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--old", help="also time the C module as this revision has it")
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
    modules = {"C module": native, "Python twin": None}
    if args.old:
        modules[f"C module at {args.old}"] = built_at(args.old)
    orders = list(itertools.permutations(modules))
    for root in memories(args.root, args.sizes):
        memory = Memory(root)
        memory.search("warm up: the first search builds the index")
        conn = cache.connect(memory.search_index.path)
        sampler = NewQuestions(Path(root), seed=args.seed)
        sides = {side: postings._Decoded(conn) for side in modules}
        times: dict[str, list[float]] = {side: [] for side in sides}
        loads = [os.getloadavg()[0]]
        for number in range(args.queries):
            terms, _ = query_terms(memory.search_index.analyzer, sampler.question(3))
            answers = []
            for side in orders[number % len(orders)]:
                index = sides[side]
                index._terms.clear()
                index._held = 0
                kept = {postings._DECODED: index}
                postings._native = modules[side]
                try:
                    started = time.process_time()
                    postings.frequencies(conn, terms, kept)
                    best, scores = postings.bm25(conn, terms, DOCUMENT_POOL, kept)
                    times[side].append(time.process_time() - started)
                finally:
                    postings._native = native
                answers.append((best, [score.hex() for score in scores]))
            if any(answer != answers[0] for answer in answers):
                raise SystemExit(f"the two sides answered {terms} differently")
        loads.append(os.getloadavg()[0])
        rows = len(sides["C module"].ids)
        print(f"{root}: {rows:,} documents, {args.queries} new questions, the same answers on every side")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"{'CPU per question':<20} {'median ms':>10} {'max ms':>8}")
        for side, values in times.items():
            print(f"{side:<20} {1000 * statistics.median(values):>10.1f} {1000 * max(values):>8.1f}")
        ratio = statistics.median(times["Python twin"]) / statistics.median(times["C module"])
        print(f"the twin's median / the C module's: {ratio:.1f}x")
        if args.old:
            ratio = statistics.median(times[f"C module at {args.old}"]) / statistics.median(times["C module"])
            print(f"the C module at {args.old}'s median / this tree's: {ratio:.2f}x")
        conn.close()
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
