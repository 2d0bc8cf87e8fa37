"""Search in a long-lived process on questions never asked before, against a bare FTS5 query of the same words.

    .venv/bin/python benchmarks/bench_search_unique.py [--root DIR] [--sizes 10000] [--queries 300]
        [--words 3] [--seed 7] [--twin] [--rows-twin] [--any-word] [--write-every N] [--profile] [--slowest 5]
        [--parts] [--one-connection] [--fsmem-only]

Each question is `--words` words of one line of the memory, one of them rare (`common.NewQuestions`), no two
questions alike and none asked before, so nothing kept from an earlier question (a kept pool of candidates)
answers it. One `Memory` asks them all (a long-lived process: an agent's server). Beside each, in the same process:
the same search with the row part as bm25() over every matching row (`fsmem.search.rowscores` switched
off: what fsmem did before it scored the best documents' files file by file, and the rows holding every
word on their own), and the bare FTS5 query of
the same terms on the same index (their OR, `bm25()`, 20 rows). The three are asked in every order in
turn, so a busy machine slows all alike and each pays for what is kept of new words (their document
frequencies and postings) as often as the others (the candidates one side keeps are let go before the next). Wall time per
search: p50, p99, the slowest, and each p50 against the bare query's; beside them the asking thread's CPU time
per search (`time.thread_time`: it leaves out the time other jobs hold the cores), p50 and p99, then all the
process's threads' (the row part's helper thread works for the asking one: `fsmem.search.halves`), and the
`--slowest` questions by that CPU, with how long counting their words took. `--one-connection` adds a side whose
row part never splits between two threads (`fsmem.search.rowscores.SPLIT_FILES`), asked in turn with the others;
`--fsmem-only` leaves out the two slow sides (bm25() over every match, bare FTS5), whose seconds a question
would otherwise load the machine between the fsmem sides' questions. Then the latest 20 questions are
asked twice more, the second time timed and reported apart, labelled: the repeated mix, which kept
candidates answer. The garbage collector's full collections that fell within the fsmem side's searches are
reported, and one made after the timed questions: what the process keeps between questions costs it.

The process starts as fsmem's long-lived ones do (`fsmem serve`, `fsmem watch`): its memory warmed and the process
settled (`fsmem.warming`), so that the collector does not walk what it holds from then on. Three searches come
first, untimed: the first walks every file and imports what a search
needs; the second starts the change feed, which walks once more (and takes its check's first walk); the
third, a question drawn like the others, loads the tokenizer's table that counts an answer's tokens. From
then on a question walks nothing but what changed. The feed's check (`fsmem.store.feed_check`: every file's
stamp, every 30 s) walks in a thread of its own beside the questions, and the figures include what it
takes from them.

`--root` is a memory whose caches are built (a copy: fsmem writes `.fsmem/`); without it the seeded
benchmark corpus of `--sizes` files is built under bench-out/ and searched once to build its index.
`--twin` adds a fourth side: the fsmem search again with the document part's C module
(`fsmem.search._native`) switched off, so its Python twin in `fsmem.search.postings` answers; then each fsmem
side keeps its own decoded terms (what a process asked the same questions would have kept: the first to
decode a question's words would spare the others that work) and its own candidates. `--rows-twin` adds a side
with the row part's score function in Python (`fsmem.search.rowscores.native` off: the Python auxiliary
function where the native module's, loaded as a SQLite extension, scores). `--any-word` adds a side
more: the fsmem search with the row part's best rows always from bm25() over every row holding any word
(`rowscores.best_holding_every_word` switched off). The questions whose words no document holds (a name in
headings alone) are reported apart as well. `--write-every N`: before every Nth question, a note is written
through the API (one file rewritten, `bench-write.md`) and that question goes to the fsmem search first, so
it pays for what a write lets go (everything kept of the state before: document frequencies, decoded postings,
files); its times are reported apart, labelled, beside the others'. `--profile` prints where the fsmem side's time goes (cProfile, the 25
costliest functions). `--parts` gives the fsmem side's CPU per question in each part of a search (`PARTS`: the
thread's CPU around the function that does it, a full collection that falls within it included), the median
of each and each part of the `--slowest` questions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


PRUNED = "fsmem search, distinct questions"
EXHAUSTIVE = "the same, bm25() over every match"
FTS5 = "bare FTS5 (OR, bm25, 20 rows)"
TWIN = "the same, the C module's Python twin"
ANY_WORD = "the same, best rows from any word's rows"
ROWS_TWIN = "the same, the row part's score in Python"
ONE_CONNECTION = "the same, the row part on one connection"
REPEATED = "fsmem search, repeated (kept candidates)"
SIDES = [PRUNED, EXHAUSTIVE, FTS5]
# --parts: (label, module, function) timed within the fsmem side's search; the row part's file by file scoring
# and its pick of the best rows are within `candidates`, as is the document part
PARTS = [
    ("document part", "fsmem.search.scoring", "document_scores"),
    ("row part, file by file and its best rows", "fsmem.search.rowscores", "best_row_scores"),
    ("files' packed rows", "fsmem.search.scoring", "_files_of"),
    ("candidates", "fsmem.search.scoring", "_candidates"),
    ("salience", "fsmem.search.scoring", "_salience"),
    ("rows read back", "fsmem.search.ranking", "fit"),
]
# Every order of the sides in turn: the first fsmem side to see a question's words pays for what is kept of
# them (their document frequencies and postings); turning the three in a circle put the first side before the
# second two times in three, which showed as the first ~10-20 % slower at 10k files.


def bare_query(index, bare, question: str) -> list:
    """The limit: a bare FTS5 query of `question`'s terms (as fsmem's analyzer makes them) on the index's own
    rows, through `bare` (a plain connection to it): their OR, `bm25()`, 20 rows."""
    from fsmem.search.documents import quoted
    from fsmem.search.scoring import query_terms

    terms, _ = query_terms(index.analyzer, question)
    match = " OR ".join(quoted(t) for t in terms)
    return bare.execute(
        "SELECT rowid, bm25(search_fts) AS s FROM search_fts WHERE search_fts MATCH ? ORDER BY s LIMIT 20", (match,)
    ).fetchall()


def no_document_holds(index, bare, question: str) -> bool:
    """Whether no document holds any of `question`'s terms (a name in headings alone): the row part is then
    bm25() over every row holding one, or the rows holding every one of them."""
    from fsmem.search.scoring import query_terms

    terms, _ = query_terms(index.analyzer, question)
    found = bare.execute(
        "SELECT 1 FROM search_postings WHERE term IN (SELECT value FROM json_each(?)) LIMIT 1", (json.dumps(terms),)
    )
    return found.fetchone() is None


def forget(index) -> None:
    """Let go of the candidates kept for the latest questions, so the next side ranks the question afresh."""
    kept = index.kept.at(index.kept._state)
    kept.pop(("recent",), None)


class OwnTerms:
    """While entered, the document index's decoded terms are this side's own: what a process asked the same
    questions would have kept (shared, one side's decoding would spare another's)."""

    def __init__(self, index, *, native: bool = True) -> None:
        self.index, self.native, self.decoded, self.terms, self.held = index, native, None, None, 0

    def __enter__(self) -> None:
        from fsmem.search import postings

        self.saved = postings._native
        if not self.native:
            postings._native = None
        self._swap()

    def __exit__(self, *_exc) -> None:
        from fsmem.search import postings

        postings._native = self.saved
        self._swap()

    def _swap(self) -> None:
        from collections import OrderedDict

        from fsmem.search import postings

        decoded = self.index.kept.at(self.index.kept._state).get(postings._DECODED)
        if decoded is None:
            return
        if decoded is not self.decoded:  # a new state of the index: this side's terms start afresh
            self.decoded, self.terms, self.held = decoded, OrderedDict(), 0
        with decoded._lock:
            decoded._terms, self.terms = self.terms, decoded._terms
            decoded._held, self.held = self.held, decoded._held


def main() -> int:
    from common import memory_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    memory_arguments(parser)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--words", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--twin", action="store_true", help="also time the search on the C module's Python twin")
    parser.add_argument("--rows-twin", action="store_true", help="also time the row part's score in Python")
    parser.add_argument("--any-word", action="store_true", help="also time the search without the every-word proof")
    parser.add_argument("--write-every", type=int, default=0, help="write a note before every Nth question")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--slowest", type=int, default=5, help="list this many slowest questions by CPU")
    parser.add_argument("--parts", action="store_true", help="the fsmem side's CPU in each part of a search")
    parser.add_argument(
        "--fsmem-only", action="store_true", help="leave out the bm25() over every match and bare FTS5 sides"
    )
    parser.add_argument(
        "--one-connection", action="store_true", help="also time the search with its row part never split"
    )
    args, _rest = parser.parse_known_args()  # `make bench` passes every script the same arguments
    from common import CollectorPauses, NewQuestions, PartTimes, memories, percentile

    from fsmem import Memory, warming
    from fsmem.search import postings, rowscores, scoring
    from fsmem.store import cache

    sides = [
        *(SIDES if not args.fsmem_only else [PRUNED]),
        *([TWIN] if args.twin else []),
        *([ROWS_TWIN] if args.rows_twin else []),
    ]
    sides += [ANY_WORD] if args.any_word else []
    sides += [ONE_CONNECTION] if args.one_connection else []
    orders = list(itertools.permutations(sides))
    if args.twin and postings._native is None:
        print("--twin: fsmem.search._native is not built here (make install builds it)")
        return 1
    counting: list[float] = [0.0]  # the time of each question's document frequencies (fts5vocab, search_common)
    count_words = scoring.document_frequencies

    def counted(*args, **kwargs):
        started = time.perf_counter()
        try:
            return count_words(*args, **kwargs)
        finally:
            counting[-1] += time.perf_counter() - started

    scoring.document_frequencies = counted
    timer = PartTimes(PARTS if args.parts else [])  # the CPU per part (`PARTS`) of the search running
    parts: list[dict[str, float]] = []  # per question of the fsmem side
    for root in memories(args.root, args.sizes):
        memory = Memory(root)
        warming.warm(memory)  # as fsmem's long-lived processes (serve, watch) start
        warming.settle()
        memory.search("warm up: the modules a first search imports")
        memory.search("warm up: the change feed takes over from the walk")  # its start walks once more
        index = memory.search_index
        bare = cache.connect(index.path)
        sampler = NewQuestions(Path(root), seed=args.seed)
        asked = [sampler.question(args.words) for _ in range(args.queries)]
        # one question more, untimed and never asked again: its hits' tokens load the tokenizer's table, once
        # per process (1.3 s at load 10), which the first timed question with hits paid before
        memory.search(sampler.question(args.words))
        rows = int(bare.execute("SELECT value FROM search_meta WHERE key = 'rows'").fetchone()[0])
        headings_only = [no_document_holds(index, bare, question) for question in asked]

        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile()
        times: dict[str, list[float]] = {side: [] for side in sides}
        cpu: dict[str, list[float]] = {side: [] for side in sides}  # the asking thread's CPU, per question
        every_thread: dict[str, list[float]] = {side: [] for side in sides}  # the process's: the row part's helper too
        words_each: list[float] = []  # per question, the wall time the fsmem side's count of its words took
        collector = CollectorPauses()
        own = {EXHAUSTIVE: OwnTerms(index), TWIN: OwnTerms(index, native=False)} if args.twin else {}
        loads = [os.getloadavg()[0]]
        after_write: list[int] = []
        words_counted: list[float] = []
        for number, question in enumerate(asked):
            order = orders[number % len(orders)]  # each side before each other half the time
            if args.write_every and number % args.write_every == args.write_every - 1:
                memory.write("bench-write.md", f"# Bench write\n\n- note {number}: {question}\n")
                order = (PRUNED, *(side for side in order if side != PRUNED))  # the first to see the new state
                after_write.append(number)
            for side in order:
                if side in (EXHAUSTIVE, TWIN, ANY_WORD, ROWS_TWIN, ONE_CONNECTION):
                    forget(index)
                split = rowscores.SPLIT_FILES
                if side == ONE_CONNECTION:
                    rowscores.SPLIT_FILES = 1 << 62
                rowscores.native = side != ROWS_TWIN
                if side == EXHAUSTIVE:
                    saved = rowscores.POSTINGS_PER_FILE
                    rowscores.POSTINGS_PER_FILE = 1 << 62  # never file by file: bm25() over every match
                if side in (EXHAUSTIVE, ANY_WORD):  # never from the rows holding every word alone
                    proof = rowscores.best_holding_every_word
                    rowscores.best_holding_every_word = lambda *_args: None
                if side in own:
                    own[side].__enter__()
                started, started_cpu, started_all = time.perf_counter(), time.thread_time(), time.process_time()
                if side == FTS5:
                    bare_query(index, bare, question)
                else:
                    if profile is not None and side == PRUNED:
                        profile.enable()
                    collector.timing = side == PRUNED
                    counting.append(0.0)
                    timer.spent = {}
                    memory.search(question)
                    if side == PRUNED and number in after_write[-1:]:
                        words_counted.append(counting[-1])
                    if side == PRUNED:
                        words_each.append(counting[-1])
                        parts.append(timer.spent)
                    collector.timing = False
                    if profile is not None:
                        profile.disable()
                cpu[side].append(time.thread_time() - started_cpu)
                every_thread[side].append(time.process_time() - started_all)
                times[side].append(time.perf_counter() - started)
                rowscores.SPLIT_FILES = split
                if side == EXHAUSTIVE:
                    rowscores.POSTINGS_PER_FILE = saved
                if side in (EXHAUSTIVE, ANY_WORD):
                    rowscores.best_holding_every_word = proof
                if side in own:
                    own[side].__exit__()
                if side in (EXHAUSTIVE, TWIN, ANY_WORD, ROWS_TWIN, ONE_CONNECTION):
                    forget(index)
        rowscores.native = True
        loads.append(os.getloadavg()[0])
        after = CollectorPauses.full_now()  # what the process keeps between questions, to the collector
        again = []
        for question in asked[-20:]:
            memory.search(question)  # kept from now on (the sides above let their candidates go)
            started = time.perf_counter()
            memory.search(question)
            again.append(time.perf_counter() - started)
        print(f"{root}: {rows:,} rows, {len(asked)} distinct questions of {args.words}")
        print(f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(
            f"{'':<40} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'p50 x FTS5':>10} {'CPU p50':>8} {'CPU p99':>8}"
            f" {'all threads CPU p50, p99':>25}"
        )
        limit = statistics.median(times[FTS5]) if FTS5 in times else math.nan
        for name, values in (*times.items(), (REPEATED, again)):
            p50, p99, top = (1000 * v for v in (statistics.median(values), percentile(values, 0.99), max(values)))
            spent = cpu.get(name)
            used = f" {1000 * statistics.median(spent):>8.1f} {1000 * percentile(spent, 0.99):>8.1f}" if spent else ""
            every = every_thread.get(name)
            if every:
                used += f" {1000 * statistics.median(every):>16.1f} {1000 * percentile(every, 0.99):>8.1f}"
            print(f"{name:<40} {p50:>8.1f} {p99:>8.1f} {top:>8.1f} {p50 / 1000 / limit:>10.2f}{used}")
        slowest = sorted(range(len(asked)), key=lambda n: -every_thread[PRUNED][n])[: args.slowest]
        if slowest:
            print(
                f"the {len(slowest)} costliest questions of {PRUNED}: CPU, wall, of which counting words (wall);"
                " all threads' CPU" + ("; on one connection: CPU, wall" if args.one_connection else "")
            )
            for n in slowest:
                spent, took, words = (1000 * v for v in (cpu[PRUNED][n], times[PRUNED][n], words_each[n]))
                beside = f" {1000 * every_thread[PRUNED][n]:>7.1f}"
                if args.one_connection:
                    beside += f" {1000 * cpu[ONE_CONNECTION][n]:>7.1f} {1000 * times[ONE_CONNECTION][n]:>7.1f}"
                print(f"  {spent:>7.1f} {took:>7.1f} {words:>7.1f}{beside} ms  #{n} {asked[n]!r}")
        if args.parts:
            print(f"{PRUNED}, CPU ms per part: the median question's, then each of the costliest")
            labels = [label for label, _module, _name in PARTS]
            print(f"  {'':>7} " + " | ".join(labels))
            median = [1000 * statistics.median(each.get(label, 0.0) for each in parts) for label in labels]
            print(f"  {'median':>7} " + " | ".join(f"{v:.1f}" for v in median))
            for n in slowest:
                print(
                    f"  {'#' + str(n):>7} " + " | ".join(f"{1000 * parts[n].get(label, 0.0):.1f}" for label in labels)
                )
        print(f"the garbage collector within the {len(asked)} searches of the first line: {collector.summary()}")
        print(f"a full collection after them: {after}")
        if after_write:
            chosen = [times[PRUNED][n] for n in after_write]
            p50, p99 = 1000 * statistics.median(chosen), 1000 * percentile(chosen, 0.99)
            print(f"{len(chosen)} questions right after a note written (--write-every {args.write_every}), {PRUNED}:")
            print(f"  p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {1000 * max(chosen):.1f} ms")
            others = [t for n, t in enumerate(times[PRUNED]) if n not in after_write]
            p50, p99 = 1000 * statistics.median(others), 1000 * percentile(others, 0.99)
            print(f"  the {len(others)} others, with no write before them: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
            p50, p99 = 1000 * statistics.median(words_counted), 1000 * percentile(words_counted, 0.99)
            print(f"  of which counting the words' rows (document_frequencies): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
        for label, wanted in (("whose words no document holds", True), ("the others", False)):
            kind = [n for n, alone in enumerate(headings_only) if alone is wanted]
            if not kind:
                continue
            print(f"{len(kind)} questions {label}: p50 / max ms")
            for name, values in times.items():
                chosen = [values[n] for n in kind]
                print(f"  {name:<38} {1000 * statistics.median(chosen):>8.1f} {1000 * max(chosen):>8.1f}")
        if profile is not None:
            import pstats

            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        bare.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
