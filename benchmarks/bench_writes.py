"""Search after a stream of single-file writes, against the same memory as a build leaves it: CPU.

    .venv/bin/python benchmarks/bench_writes.py [--root DIR] [--sizes 10000] [--writes 50,200,1000]
        [--queries 60] [--seed 7] [--no-merge] [--fts5-query]

A team server writes one file at a time all day: agents' notes, the watcher re-indexing edited files. One
`Memory` writes, up to each of `--writes` (counted from the start), alternately a note (`Memory.note`, to one
of eight sessions) and a line added to an existing topic or entity file (`Memory.write`), each line drawn
from the memory's own text, one after the other. A write's CPU is the writing thread's (the write, the search
index's update, FTS5's automerge there), p50, p99 and the most of the writes so far; and the process's per
write. Once the writes are done and quiet, the merger (`fsmem.search.index.SearchIndex._merge_writes`) merges
their segments: its CPU and the wall time to one segment are printed. `--no-merge` leaves them unmerged, as a
stream of writes that never pauses does.

At each count of writes: each FTS5 table's segments (`fsmem.search.tables.segments`) and the document
index's dead postings (`search_dead`); then a copy of the index (SQLite's backup) is put as a build leaves it
(`as_built`: each FTS5 table merged into one segment, every range of postings rewritten without its dead
documents, the rows packed). `--queries` new questions (`common.NewQuestions`) are asked of the `Memory`
(each search's CPU, for the record), keeping what its row part scored file by file; each is then scored
again on the written index and on the built copy, in turn (each first half the time), in one read
transaction a question: the row part (`fsmem.search.rowscores.row_scores`, the native function), the
document part (`fsmem.search.postings.bm25`, the question's terms decoded afresh) and, with `--fts5-query`, a
bare FTS5 query of its words (bm25() over every row holding one: seconds a question at 100k files). Both copies must give the same rows and scores to the bit.
Prints the CPU per question (median, p99) on each, their ratio, and the load average beside.

`--root` is a memory whose caches are built (a copy: the benchmark writes into it); without it the seeded
benchmark corpus of `--sizes` files is copied from bench-out/ to a scratch folder.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

WRITTEN, BUILT = "after the writes", "as a build leaves it"
PARTS = ("row part", "document part", "FTS5 query")
# a bare FTS5 query of the question's words: bm25() over every row holding one, as the row part asks when it
# does not score file by file
FTS5_QUERY = "SELECT rowid, bm25(search_fts) AS s FROM search_fts WHERE search_fts MATCH ? ORDER BY s LIMIT 20"
SESSIONS = 8


def as_built(conn) -> None:
    """The index as a build would leave it with the same files: each FTS5 table one segment, every range of
    postings without its dead documents, the posting rows packed."""
    from fsmem.search import postings, tables
    from fsmem.store import cache

    with cache.transaction(conn):
        for (chunk,) in conn.execute("SELECT chunk FROM search_dead").fetchall():
            postings._rewrite(conn, chunk, {})
    tables.merge_segments(conn)


def writer(memory, root: Path, rng: random.Random, lines: list[tuple[str, ...]]):
    """Each call writes one file through `memory`: a note, or a line added to a topic or entity document."""
    from fsmem.format.frontmatter import split

    documents = sorted(
        str(path.relative_to(root)) for folder in ("topics", "entities") for path in (root / folder).rglob("*.md")
    )
    count = 0

    def write() -> None:
        nonlocal count
        count += 1
        line = " ".join(rng.choice(lines))
        if count % 2:
            memory.note(f"{line} ({count})", session=f"writer-{count % SESSIONS}")
            return
        rel = rng.choice(documents)
        body = split((root / rel).read_text(encoding="utf-8")).body
        memory.write(rel, body.rstrip("\n") + f"\n\n- {line} ({count})\n")

    return write


def state(conn) -> str:
    from fsmem.search import tables

    segments = ", ".join(f"{t} {tables.segments(conn, t)}" for t in ("search_fts", "search_names"))
    dead, chunks = conn.execute("SELECT coalesce(sum(dead), 0), count(*) FROM search_dead").fetchone()
    return f"segments: {segments}; dead documents {dead:,} in {chunks} ranges of postings"


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--writes", default="50,200,1000", help="counts of writes after which to measure")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fts5-query", action="store_true", help="also time a bare FTS5 query of the words")
    parser.add_argument(
        "--no-merge", action="store_true", help="merge nothing after the writes (`fsmem.search.index.MERGE_QUIET_S`)"
    )
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    from common import NewQuestions, memories, percentile

    from fsmem import Memory
    from fsmem.search import index as search_index, postings, rowscores
    from fsmem.search.index import READER_CACHE_KIB
    from fsmem.store import cache
    from fsmem.store.cache import RACY_NS

    if not rowscores.native_built():
        print("fsmem.search._native is not built here with its score function (make install builds it)")
        return 1
    counts = [int(n) for n in args.writes.split(",") if n]
    if args.no_merge:
        search_index.MERGE_QUIET_S = 1e9  # what a stream of writes that never pauses leaves
    for given in memories(args.root, args.sizes):
        scratch = None
        root = given
        if args.root is None:  # the seeded corpus is shared: written into, it would be another
            scratch = Path(tempfile.mkdtemp(prefix="bench-writes-"))
            root = scratch / "memory"
            shutil.copytree(given, root, symlinks=True)
        rng = random.Random(args.seed)
        memory = Memory(root)
        memory.search("warm up: the first search builds the index")
        memory.search("warm up: the change feed takes over from the walk")
        index = memory.search_index
        sampler = NewQuestions(Path(root), seed=args.seed)
        write = writer(memory, Path(root), rng, sampler.lines)
        copy_path = Path(tempfile.mkdtemp(prefix="bench-writes-built-")) / "cache.sqlite"
        done = 0
        thread_cpu: list[float] = []
        process_cpu: list[float] = []
        print(f"{root}: {load_line()}")
        for target in counts:
            started_process = time.process_time()
            for _ in range(target - done):
                started = time.thread_time()
                write()
                thread_cpu.append(time.thread_time() - started)
            time.sleep(RACY_NS / 1e9)  # the files written last are no longer racy: the next refresh settles them
            index.refresh()
            index.wait_merged()
            writing = time.process_time() - started_process
            quiet = time.perf_counter()
            if not args.no_merge:
                index.writes_merged()
            quiet = time.perf_counter() - quiet
            merging = time.process_time() - started_process - writing
            process_cpu.append(writing / max(target - done, 1))
            done = target
            live = cache.connect(index.path)
            live.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            print(f"\nafter {done} writes: {state(live)}")
            copy_path.unlink(missing_ok=True)
            built = cache.connect(copy_path)
            with built.backup("main", live, "main") as backup:
                backup.step()
            as_built(built)
            built.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            print(f"the copy as built: {state(built)}")

            asked: list[tuple] = []
            inner = rowscores.row_scores
            rowscores.row_scores = lambda *call, asked=asked, inner=inner: asked.append(call) or inner(*call)  # type: ignore[assignment,misc]
            searches = []
            loads = [os.getloadavg()[0]]
            try:
                for _ in range(args.queries):
                    question = sampler.question(3)
                    started = time.process_time()
                    memory.search(question)
                    searches.append(time.process_time() - started)
            finally:
                rowscores.row_scores = inner
            times: dict[tuple[str, str], list[float]] = {
                (part, side): [] for part in PARTS for side in (WRITTEN, BUILT)
            }
            kept: dict = {WRITTEN: {}, BUILT: {}}
            connections = {WRITTEN: live, BUILT: built}
            for conn in connections.values():
                rowscores.native_loaded(conn)
            for number, (_conn, match, phrases, df, weights, files) in enumerate(asked):
                answers = {}
                order = (WRITTEN, BUILT) if number % 2 else (BUILT, WRITTEN)
                for side in order:
                    conn = connections[side]
                    decoded = postings.decoded(conn, kept[side])
                    decoded._terms.clear()
                    decoded._held = 0
                    conn.execute("BEGIN")
                    try:
                        started = time.process_time()
                        rows = rowscores.row_scores(conn, match, phrases, df, weights, files)
                        middle = time.process_time()
                        documents = postings.bm25(conn, phrases, 300, kept[side])
                        ended = time.process_time()
                        bare = conn.execute(FTS5_QUERY, (match,)).fetchall() if args.fts5_query else []
                        times[("FTS5 query", side)].append(time.process_time() - ended)
                    finally:
                        conn.execute("COMMIT")
                    times[("row part", side)].append(middle - started)
                    times[("document part", side)].append(ended - middle)
                    answers[side] = (
                        [(r, s.hex()) for r, s in rows],
                        list(documents[0]),
                        [s.hex() for s in documents[1]],
                        [(r, s.hex()) for r, s in bare],
                    )
                if answers[WRITTEN] != answers[BUILT]:
                    raise SystemExit(f"{match}: the written index and its built copy answered differently")
            loads.append(os.getloadavg()[0])
            print(
                f"load average {min(loads):.1f}-{max(loads):.1f}; {len(asked)} of {args.queries} new questions"
                " scored file by file, the same rows and scores on both"
            )
            print(
                f"write CPU, the writer's thread: p50 {ms(statistics.median(thread_cpu))}, p99"
                f" {ms(percentile(thread_cpu, 0.99))}, most {ms(max(thread_cpu))}; the process's: {ms(process_cpu[-1])}"
                " a write"
            )
            if not args.no_merge:
                print(
                    f"the merge of the writes' segments, once quiet: {merging:.2f} s of the process's CPU,"
                    f" {quiet:.1f} s from the last write's refresh to one segment"
                )
            print(
                f"search CPU, the whole search: p50 {ms(statistics.median(searches))},"
                f" p99 {ms(percentile(searches, 0.99))}"
            )
            if asked:
                print(f"{'CPU per question':<34} {'p50 ms':>8} {'p99 ms':>8} {'p50 x built':>12}")
                for part in PARTS[: 3 if args.fts5_query else 2]:
                    limit = statistics.median(times[(part, BUILT)])
                    for side in (WRITTEN, BUILT):
                        values = times[(part, side)]
                        p50 = statistics.median(values)
                        print(
                            f"{part + ', ' + side:<34} {ms(p50):>8} {ms(percentile(values, 0.99)):>8}"
                            f" {p50 / limit if limit else 0:>12.2f}"
                        )
            live.close()
            built.close()
        copy_path.unlink(missing_ok=True)
        copy_path.parent.rmdir()
        memory.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def load_line() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


if __name__ == "__main__":
    sys.exit(main())
