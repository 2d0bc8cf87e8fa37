"""grep in a long-lived process with the word index (fsmem.query.grep_words) against rg over every file, same run.

python benchmarks/bench_grep_words.py [--files 10000 | --sizes 10000] [--root DIR] [--calls 40] [--rounds 3]
python benchmarks/bench_grep_words.py --parts-only --root COPY [--parts 7]
python benchmarks/bench_grep_words.py --after-write-only --root COPY [--rounds 7] [--pattern "Adam Smith"]

On a copy of the corpus (`--root`: a memory to copy, such as /work/bench-keep/server-10k), in one process on a
trusted feed: the word index's cold build against the search index's, its size against the Markdown's, a
whole walk of it (the feed's periodic check), and the CPU seconds (this process and rg) per new grep — names
as `bench_server.py --mixes unique` asks them, with and without -i, and patterns the index cannot narrow —
with the prefilter and without it, interleaved rounds, as ratios.

Then greps of a part of a word (the end of one word and the start of the next, an inside part), each new to the
process, which look their words up in the index's list of words: the wall time of the grep, alternating with
`rg --json` of the same pattern over the memory, with the list kept, after this process wrote a note (its words
added to the list), and after another process wrote one (the list read again); and what reading the list
costs. `--parts-only` runs only these, on `--root` as it is (a scratch copy whose caches are built: the notes
it writes are removed at the end).

`--after-write-only`: the same grep (one with hundreds of matching files, whose superseded lines come from the
rows caught up on the feed: `fsmem.store.superseded_lines.fresh_rows`) with no write before it, right after
this process wrote a note, and right after another process wrote one, each state in turn, on `--root` as it is;
the wall time of each and of its `fresh_rows`, as ratios to the grep with no write before.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import corpus, load, ms, rg_bin, run_drained, table
from corpus import _FIRST, _LAST, _ORGS, _PROJECTS, _WORDS, RARE_WORD

from fsmem import Memory
from fsmem.query import grep_cache, grep_words
from fsmem.store.cache import RACY_NS
from fsmem.store.feed import Delta


def cpu() -> float:
    """CPU seconds of this process and of the rg processes it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def markdown_bytes(root: Path) -> int:
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(os.path.getsize(os.path.join(folder, n)) for n in names if n.endswith(".md"))
    return total


def unique_patterns(count: int, seed: int) -> list[str]:
    """`bench_server.py`'s unique greps: a name, or an organisation or project and a word, never twice."""
    rng, seen = random.Random(seed), set()
    while len(seen) < count:
        if rng.random() < 0.5:
            seen.add(f"{rng.choice(_FIRST)} {rng.choice(_LAST)}")
        else:
            seen.add(f"{rng.choice(_ORGS + _PROJECTS)} {rng.choice(_WORDS[12:])}")
    return sorted(seen)


def per_call(memory: Memory, calls: list[tuple[str, dict]], prefilter: bool) -> float:
    """CPU seconds per grep, nothing kept between calls (every grep is new to the process)."""
    narrowed = grep_words.narrowed
    if not prefilter:
        grep_words.narrowed = lambda *args, **kwargs: None
    try:
        started = cpu()
        for pattern, options in calls:
            grep_cache.forget(memory.root)
            memory.grep(pattern, max_results=5, **options)
        return (cpu() - started) / len(calls)
    finally:
        grep_words.narrowed = narrowed


# another long-lived process on the same memory: it writes a note and stores it in the word index, as the
# other of `fsmem serve`'s two processes (or a second `fsmem watch`) does
OTHER_WRITER = """
import sys
from fsmem.query.grep_words import WordIndex
from fsmem.store.cache import RACY_NS
from fsmem.store.feed import Delta
index = WordIndex(sys.argv[1])
for line in sys.stdin:
    rel = line.strip()
    with open(f"{sys.argv[1]}/{rel}", "w") as handle:
        handle.write(f"---\\ntitle: {rel}\\n---\\n- written by another process, {rel}\\n")
    index.apply(Delta(False, "", {rel}, set()))
    print("done", flush=True)
"""


def part_patterns(count: int, seed: int) -> list[str]:
    """Greps of parts of words: a first name's end and a last name's start, or the inside of the rare word."""
    rng, seen = random.Random(seed), set()
    while len(seen) < count:
        if rng.random() < 0.8:
            first, last = rng.choice(_FIRST), rng.choice(_LAST)
            seen.add(f"{first[rng.randrange(1, 3) :]} {last[: len(last) - rng.randrange(1, 3)]}")
        else:
            start = rng.randrange(1, 4)
            seen.add(RARE_WORD[start : start + rng.randrange(4, 6)])
    return sorted(seen)


def parts(memory: Memory, count: int) -> tuple[list[list[str]], list[str]]:
    """The rows of the part-of-a-word table, and the vocabulary's cost rows."""
    root = memory.root
    index = grep_words.caught_up(root)
    assert index is not None, "no trusted change feed here: the prefilter does not run"
    reads = []
    for _ in range(3):
        fresh = grep_words.WordIndex(root)  # a new process's index: nothing read yet
        started, wall = cpu(), time.perf_counter()
        fresh.load_vocabulary()
        reads.append((cpu() - started, time.perf_counter() - wall))
        terms = fresh.words.text().count("\n") - 1
        fresh.close()
    index.load_vocabulary()
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_WRITER, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    patterns = part_patterns(count, seed=7)
    memory.grep(patterns[0], max_results=5)  # the process's first grep loads what every grep needs (the tokenizer)
    states = ["the list kept", "after this process wrote a note", "after another process wrote one"]
    greps: dict[str, list[float]] = {state: [] for state in states}
    prefilter: dict[str, list[float]] = {state: [] for state in states}
    narrowed, spent = grep_words.narrowed, []

    def timed_narrowed(*args, **kwargs):
        wall = time.perf_counter()
        try:
            return narrowed(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - wall)

    grep_words.narrowed = timed_narrowed
    rgs: dict[str, list[float]] = {state: [] for state in states}
    totals: list[int] = []
    written = []
    try:
        for k, pattern in enumerate(patterns):
            for n in range(len(states)):
                state = states[(n + k) % len(states)]  # each state first, second and third in turn
                rel = f"topics/bench-parts-{k}-{n}.md"
                if write_for(memory, other, states.index(state), rel):
                    written.append(root / rel)
                else:  # what a write before makes every grep read again (the superseded lines' rows) read here
                    memory.grep(RARE_WORD, max_results=1)
                grep_cache.forget(root)
                spent.clear()
                wall = time.perf_counter()
                totals.append(memory.grep(pattern, max_results=5).total)
                greps[state].append(time.perf_counter() - wall)
                prefilter[state].append(sum(spent))
                rgs[state].append(run_drained([rg_bin(), "--json", pattern], root)[0])
    finally:
        grep_words.narrowed = narrowed
        other.stdin.close()
        other.wait()
        for path in written:
            path.unlink(missing_ok=True)
    rows = []
    for state in states:
        grep, rg = statistics.median(greps[state]), statistics.median(rgs[state])
        word_index = statistics.median(prefilter[state])
        rows.append([state, ms(grep), f"{word_index * 1000:.1f} ms", ms(rg), f"{grep / rg:.2f}x"])
    rows[0].insert(1, f"{min(totals):,}-{max(totals):,}")
    for row in rows[1:]:
        row.insert(1, "")
    cost = [
        f"{terms:,}",
        f"{statistics.median(c for c, _ in reads) * 1000:.0f} ms",
        f"{statistics.median(w for _, w in reads) * 1000:.0f} ms",
    ]
    return rows, cost


# another process writing one note at a time through fsmem, as a second agent or `fsmem write` does
OTHER_NOTE = """
import sys
from fsmem import Memory
memory = Memory(sys.argv[1])
for line in sys.stdin:
    rel = line.strip()
    memory.write(rel, f"- written by another process, {rel}\\n", set={"title": rel})
    print("done", flush=True)
memory.close()
"""


def after_write(memory: Memory, pattern: str, rounds: int) -> list[list[str]]:
    """The rows of the grep-after-a-write table: wall medians of the grep and of its `fresh_rows`."""
    from fsmem.store import catalog

    root = memory.root
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_NOTE, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    states = ["no write before", "after this process wrote a note", "after another process wrote one"]
    greps: dict[str, list[float]] = {state: [] for state in states}
    rows: dict[str, list[float]] = {state: [] for state in states}
    calls = dict.fromkeys(states, 0)
    fresh_rows, spent = catalog.fresh_rows, []

    def timed(cache):
        wall = time.perf_counter()
        try:
            return fresh_rows(cache)
        finally:
            spent.append(time.perf_counter() - wall)

    catalog.fresh_rows = timed
    written = []
    try:
        memory.grep(pattern, max_results=5)
        for k in range(rounds):
            for n in range(len(states)):
                state = states[(n + k) % len(states)]  # each state first, second and third in turn
                time.sleep(RACY_NS / 1e9 + 0.1)  # a note written before is no longer racy: its row stored again
                memory.catalog.superseded_hint()  # ... here, not in the grep measured
                rel = f"topics/bench-after-write-{k}-{n}.md"
                if write_for(memory, other, states.index(state), rel):
                    written.append(root / rel)
                grep_cache.forget(root)
                spent.clear()
                wall = time.perf_counter()
                memory.grep(pattern, max_results=5)
                greps[state].append(time.perf_counter() - wall)
                rows[state].append(sum(spent))
                calls[state] += len(spent)
    finally:
        catalog.fresh_rows = fresh_rows
        other.stdin.close()
        other.wait()
        for path in written:
            path.unlink(missing_ok=True)
    alone = statistics.median(greps[states[0]])
    out = []
    for state in states:
        grep, fresh = statistics.median(greps[state]), statistics.median(rows[state])
        out.append([state, ms(grep), f"{fresh * 1000:.1f} ms ({calls[state]} calls)", f"{grep / alone:.2f}x"])
    return out


def print_parts(memory: Memory, count: int) -> None:
    before = load()
    rows, cost = parts(memory, count)
    print(f"({before} before, {load()} after)")
    print(
        table(
            f"a grep of a part of a word in a long-lived process, {count} patterns, each in every state (median wall)",
            ["the index's list of words", "matches", "fsmem grep", "of which the word index", "rg --json", "ratio"],
            rows,
        )
    )
    print(table("reading the list of words (a new process's)", ["words", "CPU", "wall"], [cost]))


def write_for(memory: Memory, other: subprocess.Popen, state: int, rel: str) -> bool:
    """The write a state asks for before its grep: none (0), one by this process (1), one by `other`, another
    process writing on request (2). Whether one was made."""
    if state == 1:
        memory.write(rel, f"---\ntitle: {rel}\n---\n- written by this process, {rel}\n")
    elif state == 2:
        other.stdin.write(rel + "\n")
        other.stdin.flush()
        assert other.stdout.readline() == "done\n"
    return state != 0


def kept_memory(root: Path | None, option: str) -> Memory:
    """The memory at `root` (a scratch copy whose caches are built) as a long-lived process holds it."""
    if not root:
        raise SystemExit(f"{option} needs --root: a scratch copy whose caches are built")
    memory = Memory(root)
    memory.ls()
    memory.ls()  # a second call: the feed runs
    return memory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--sizes", help="run_all.py's sizes: the first is --files")
    parser.add_argument("--root", type=Path, help="a memory to copy (default: the benchmark corpus)")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", type=int, default=7, help="patterns per state of the part-of-a-word greps")
    parser.add_argument("--parts-only", action="store_true", help="only those, on --root as it is (a scratch copy)")
    parser.add_argument("--after-write-only", action="store_true", help="a grep after a write, on --root as it is")
    parser.add_argument("--pattern", default="Adam Smith", help="--after-write-only's grep")
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same arguments
    files = int(args.sizes.split(",")[0]) if args.sizes else args.files
    if args.after_write_only:
        memory = kept_memory(args.root, "--after-write-only")
        try:
            before = load()
            rows = after_write(memory, args.pattern, args.rounds)
        finally:
            memory.close()
        print(f"({before} before, {load()} after)")
        title = f"grep {args.pattern!r} in a long-lived process, {args.rounds} rounds of each state (median wall)"
        print(table(title, ["state", "fsmem grep", "of which fresh_rows", "ratio"], rows))
        return
    if args.parts_only:
        memory = kept_memory(args.root, "--parts-only")
        try:
            print_parts(memory, args.parts)
        finally:
            memory.close()
        return
    source = args.root or corpus(files)
    before = load()
    with tempfile.TemporaryDirectory(prefix="bench-grep-words-") as scratch:
        root = Path(scratch, "memory")
        shutil.copytree(source, root, symlinks=True, ignore=shutil.ignore_patterns(".fsmem", ".git"))
        memory = Memory(root)
        memory.ls()
        memory.ls()  # a second call: the feed runs, the metadata cache is warm
        started, wall = cpu(), time.perf_counter()
        memory.search("billing invoice", max_results=1)
        search_cold = (cpu() - started, time.perf_counter() - wall)
        started, wall = cpu(), time.perf_counter()
        index = grep_words.caught_up(memory.root)
        words_cold = (cpu() - started, time.perf_counter() - wall)
        assert index is not None, "no trusted change feed here: the prefilter does not run"
        started = cpu()
        index.apply(Delta(True, "verify"))
        walk = cpu() - started
        index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(root / ".fsmem" / grep_words.INDEX_FILE)
        markdown = markdown_bytes(root)

        names = unique_patterns(args.calls * args.rounds * 2, seed=11)
        plain_words = ["the", "customer", "invoice seats", "a b", "Adam"]
        regexes = ["Ada.*Smith", "rollback|release", "[A-Z]cme"]
        kinds = {
            "unique names, -F": [(p, {"fixed_strings": True}) for p in names[::2]],
            "unique names, -F -i": [(p, {"fixed_strings": True, "ignore_case": True}) for p in names[1::2]],
            "common words (too many files)": [(p, {"fixed_strings": True}) for p in plain_words],
            "regular expressions (no prefilter)": [(p, {}) for p in regexes],
        }
        rows = []
        for label, calls in kinds.items():
            with_index, without = [], []
            for round_ in range(args.rounds):
                chunk = calls[round_ * args.calls : (round_ + 1) * args.calls] or calls
                without.append(per_call(memory, chunk, prefilter=False))
                with_index.append(per_call(memory, chunk, prefilter=True))
            a, b = min(without), min(with_index)
            rows.append([label, f"{a * 1000:.1f} ms", f"{b * 1000:.1f} ms", f"{b / a:.2f}x"])
        print_parts(memory, args.parts)
        memory.close()
    print(f"({before} before, {load()} after)")
    print(
        table(
            f"grep in one process, CPU per call (rg included; best of {args.rounds} rounds)",
            ["patterns", "rg over every file", "with the word index", "ratio"],
            rows,
        )
    )
    print(
        table(
            "the word index",
            ["Markdown", "index", "share", "cold build (CPU / wall)", "search index cold build", "whole walk (CPU)"],
            [
                [
                    f"{markdown / 1e6:.1f} MB",
                    f"{size / 1e6:.2f} MB",
                    f"{size / markdown:.3f}x",
                    f"{words_cold[0]:.2f} s / {words_cold[1]:.2f} s",
                    f"{search_cold[0]:.2f} s / {search_cold[1]:.2f} s",
                    f"{walk * 1000:.0f} ms",
                ]
            ],
        )
    )


if __name__ == "__main__":
    main()
