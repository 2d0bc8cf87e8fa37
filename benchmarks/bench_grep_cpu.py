"""The answering process's own CPU for a one-shot `fsmem grep` of a new name, as `fsmem watch` answers it (issue #34).

With a watcher running, the CLI's grep is run in the watcher's process (`fsmem.cli.answering`); rg's pass is a
child of it, and what the process does beside and after it (reading rg's output, cutting it into files, the
superseded lines, the page and the count past it) is what sets the answer's time beyond rg's. Wall time moves
with the machine's load; this process's CPU much less, so this benchmark measures that: a child process per
package holds the memory as the watcher does (`Kept`, warmed), answers each grep word (`common.NewQuestions`,
the words `bench_oneshot.py` draws) once, then `--repeats` times more, and reports the CPU of the thread that
answers (min of the repeats; rg's own CPU is its process's) and of the whole process for the first answer, over
the words found in some file. With `--baseline DIR` (another checkout's package, e.g. `git archive main fsmem |
tar -x -C DIR`) the same words are answered by it too, alternating package by package, and the answers must be
the same bytes.

    python benchmarks/bench_grep_cpu.py --root COPY [--names 7] [--repeats 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, NewQuestions, load, table

CHILD = r"""
import gc, hashlib, json, os, sys, time
from fsmem.cli.answering import _Request
from fsmem.cli.kept_memories import Kept

root, words, repeats = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
kept = Kept()
kept.warm(root, lambda message: None)
for warm in ("warm up", "warmed up"):  # the word index's vocabulary, the superseded rows: read once per process
    _Request(root, root, {}, ["grep", warm]).run(kept)
rows = []
for word in words:
    times = []
    for _ in range(repeats + 1):
        gc.disable()  # as the watcher answers (fsmem.cli.answering)
        thread, process = time.thread_time(), time.process_time()
        code, printed = _Request(root, root, {}, ["grep", word]).run(kept)
        times.append((time.thread_time() - thread, time.process_time() - process))
        gc.enable()
    answer = repr((code, printed)).encode()
    found = "(no matches)" not in "".join(text for _, text in printed)
    rows.append([word, found, min(t for t, _ in times[1:]), times[0][1], hashlib.sha256(answer).hexdigest()])
print(json.dumps(rows))
"""


def measured(package: Path, root: Path, words: list[str], repeats: int) -> list[list]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}, "PYTHONPATH": str(package)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), json.dumps(words), str(repeats)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{package}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True, help="a writable copy of a corpus, its caches built")
    parser.add_argument("--names", type=int, default=7, help="grep words drawn (the bench_oneshot.py seed)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="a folder holding another fsmem package")
    args = parser.parse_args()
    root = args.root.resolve()
    fresh = NewQuestions(root, seed=34)
    words = [fresh.grep_word() for _ in range(args.names)]
    packages = {"this checkout": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    before = load()
    results = {name: measured(package, root, words, args.repeats) for name, package in packages.items()}
    if args.baseline:  # again, the other way round
        for name, package in reversed(packages.items()):
            again = measured(package, root, words, args.repeats)
            results[name] = [
                [w, f, min(t, t2), min(p, p2), d]
                for (w, f, t, p, d), (_, _, t2, p2, _) in zip(results[name], again, strict=True)
            ]
    digests = {name: [row[4] for row in rows] for name, rows in results.items()}
    if len({tuple(d) for d in digests.values()}) > 1:
        raise SystemExit("the packages answered with other bytes")
    rows = []
    for name, found in results.items():
        hits = [row for row in found if row[1]]
        if not hits:
            continue
        rows.append(
            [
                name,
                f"{len(hits)} of {len(found)}",
                f"{1000 * statistics.median(row[2] for row in hits):.0f} ms",
                f"{1000 * statistics.median(row[3] for row in hits):.0f} ms",
            ]
        )
    print(f"({before} before; {load()} after; the answers the same bytes)")
    header = ["package", "names found", "answering thread, min of repeats", "process, first answer"]
    print(table(f"a one-shot grep's CPU in the watcher's process ({root}), medians over the names found", header, rows))


if __name__ == "__main__":
    sys.exit(main())
