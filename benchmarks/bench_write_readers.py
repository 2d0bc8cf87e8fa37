"""What one write through the API costs the caches, counted: index writes, merges, CPU, per write.

    .venv/bin/python benchmarks/bench_write_readers.py --root COPY [--writes 20] [--seed 7]

A write through `Memory` updates the search index at once (`fsmem.store.writing` -> `after_change`), and the
file it wrote is newer than the racy window (`fsmem.store.cache.RACY_NS`) when it is read. Each write here is
followed by what a server meets after it: the next question in the same process (its change feed names the
file), a listing and a grep (the metadata cache and grep's word index catch up), then, once the window has
passed, a listing (the feed hands the metadata cache its racy rows again), and the whole walk that the feed's
check takes every 60 s and that every call takes where the feed is not trusted (`SearchIndex._walk_all`,
`Freshness.walk`), and a one-shot `fsmem search` and `fsmem ls` in another
process. Between the two the merger (`SearchIndex._merge_writes`) is let merge what was written, with its pause
after a merge (`MERGE_SHARE`) set to nothing, so every merge the writes start is seen and counted.

Counted per write: the search index's changes (its `changes` counter, whoever wrote: a file added or removed, so a
rewrite is 2), the metadata
cache's rows stored (keys in its `changes` table), grep's word index's files read (this process), the
merges that found work and their CPU; the writing thread's CPU for the write itself. `--root` is a memory
whose caches are built (a copy: the benchmark writes into it).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="a memory whose caches are built (a scratch copy)")
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--search-only", action="store_true", help="no listing, no grep: the search index alone")
    args, _rest = parser.parse_known_args()
    from bench_writes import writer
    from common import NewQuestions, load, table

    from fsmem import Memory
    from fsmem.query import grep_words
    from fsmem.search import index as search_index
    from fsmem.store import cache
    from fsmem.store.cache import RACY_NS

    search_index.MERGE_SHARE = 1.0  # no pause after a merge: each merge a write starts is run and counted
    merges = {"runs": 0, "cpu": 0.0}
    step = search_index.merge_step
    running = [False]

    def counted_step(conn) -> bool:
        began = time.thread_time()
        worked = step(conn)
        merges["cpu"] += time.thread_time() - began
        if worked and not running[0]:
            merges["runs"] += 1
        running[0] = worked
        return worked

    search_index.merge_step = counted_step
    words_read = [0]
    words_of = grep_words.words_of

    def counted_words(data):
        words_read[0] += 1
        return words_of(data)

    grep_words.words_of = counted_words

    root = args.root
    db = cache.cache_path(root)

    def counters() -> tuple[int, int]:
        conn = cache.connect(db)
        try:
            indexed = int(conn.execute("SELECT value FROM search_meta WHERE key = 'changes'").fetchone()[0])
            try:
                rows = conn.execute("SELECT coalesce(max(rowid), 0) FROM changes").fetchone()[0]
            except cache.DatabaseError:
                rows = 0  # no metadata rows (--search-only)
            return indexed, rows
        finally:
            conn.close()

    memory = Memory(root)
    memory.search("warm up: the index is built")
    memory.search("warm up: the change feed takes over from the walk")
    lists = not args.search_only
    if lists:
        memory.ls("topics", max_results=1)
        memory.grep("budget", max_results=1)
    index = memory.search_index
    index.writes_merged()
    sampler = NewQuestions(Path(root), seed=args.seed)
    write = writer(memory, Path(root), random.Random(args.seed), sampler.lines)
    stages = (
        "the write",
        "the next question",
        "ls and grep",
        "the merge of the write",
        "walks after the window",
        "the merge after them",
        "one-shot search and ls",
    )
    totals = {stage: [0, 0, 0, 0] for stage in stages}  # index writes, metadata rows, word files read, merges
    write_cpu: list[float] = []
    print(f"{root}: {args.writes} writes; {load()}", flush=True)
    command, env = [sys.executable, "-m", "fsmem"], {**os.environ, "PYTHONPATH": str(REPO)}  # this tree's fsmem

    def stage(name: str, action) -> None:
        indexed, rows = counters()
        words, runs = words_read[0], merges["runs"]
        action()
        now_indexed, now_rows = counters()
        got = totals[name]
        got[0] += now_indexed - indexed
        got[1] += now_rows - rows
        got[2] += words_read[0] - words
        got[3] += merges["runs"] - runs

    for _n in range(args.writes):
        began = time.thread_time()
        stage("the write", write)
        write_cpu.append(time.thread_time() - began)
        written = time.time_ns()
        stage("the next question", lambda: memory.search(sampler.question(), max_results=5))
        if lists:
            stage("ls and grep", lambda: (memory.ls("topics", max_results=1), memory.grep("budget", max_results=1)))
        stage("the merge of the write", index.writes_merged)
        time.sleep(max(0.0, (written + RACY_NS) / 1e9 - time.time() + 0.05))  # the racy window passes
        stage(
            "walks after the window",
            lambda: (
                memory.ls("topics", max_results=1) if lists else None,
                index._walk_all(),
                memory.catalog.rows.walk(None, False, None) if lists else None,
            ),
        )
        stage("the merge after them", index.writes_merged)

        def one_shot() -> None:
            for argv in [["search", "budget review", "--max-results", "1"], *([["ls", "--max-results", "1"]] * lists)]:
                subprocess.run([*command, "--root", str(root), *argv], env=env, check=True, capture_output=True)

        stage("one-shot search and ls", one_shot)
    n = args.writes
    header = [
        "after each write",
        "search index: changes (a rewrite: 2)",
        "metadata: rows stored",
        "grep words: files read",
        "merges",
    ]
    rows = [[name, *(f"{value / n:.2f}" for value in totals[name][:4])] for name in stages]
    print(table(f"per write, {n} writes", header, rows))
    print(
        f"a write's CPU (writing thread): p50 {statistics.median(write_cpu) * 1e3:.1f} ms; merges: {merges['runs']}"
        f" runs, {merges['cpu']:.2f} s CPU ({merges['cpu'] / n * 1e3:.0f} ms per write); {load()}"
    )
    memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
