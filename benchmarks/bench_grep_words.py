"""grep in a long-lived process with the word index (fsmem.query.grep_words) against rg over every file, same run.

python benchmarks/bench_grep_words.py [--files 10000 | --sizes 10000] [--root DIR] [--calls 40] [--rounds 3]

On a copy of the corpus (`--root`: a memory to copy, such as /work/bench-keep/server-10k), in one process on a
trusted feed: the word index's cold build against the search index's, its size against the Markdown's, a
whole walk of it (the feed's periodic check), and the CPU seconds (this process and rg) per new grep — names
as `bench_server.py --mixes unique` asks them, with and without -i, and patterns the index cannot narrow —
with the prefilter and without it, interleaved rounds, as ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from common import corpus, load, table
from corpus import _FIRST, _LAST, _ORGS, _PROJECTS, _WORDS

from fsmem import Memory
from fsmem.query import grep_cache, grep_words
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--sizes", help="run_all.py's sizes: the first is --files")
    parser.add_argument("--root", type=Path, help="a memory to copy (default: the benchmark corpus)")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same arguments
    files = int(args.sizes.split(",")[0]) if args.sizes else args.files
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
