"""Where a one-shot `fsmem grep` of a new name spends its CPU, stage by stage (docs/performance.md, "grep").

For new names found in some file (`common.NewQuestions`), the token-count memo emptied before each, `fsmem grep
NAME` runs from a regular install (bench_startup's) as a process whose probe notes the CPU time of the process
(`time.process_time`, every thread) where grep's stages begin and end: its first pass asked for
(`fsmem.query.grep.run`), the superseded ranges (`Catalog.superseded`), the tokenizer's load
(`fsmem.tokens.get_encoding`), its answer made, the process's end. Each function is wrapped as its module is
imported, so the command imports what it imports in its own order (its rg still starts before the rest).
Medians over the names; the process tree's CPU (rg's included) beside.

    python benchmarks/bench_grep_stages.py [--root COPY | --sizes 10000] [--names 9]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
from pathlib import Path

from bench_oneshot import _forget_counts, copy_of
from bench_startup import installed_fsmem
from common import NewQuestions, corpus, load, ms, run_drained, sizes_from, table

PROBE = r"""
import atexit, importlib.abc, json, os, sys, time

marks = {}
atexit.register(lambda: os.write(2, b"\nSTAGES " + json.dumps({**marks, "end": time.process_time()}).encode()))
WRAPPED = {"fsmem.query.grep": [(None, "run")], "fsmem.store.catalog": [("Catalog", "superseded")],
           "fsmem.tokens": [(None, "get_encoding")]}


def wrapped(function, label):
    def call(*args, **kwargs):
        marks.setdefault(label + " in", time.process_time())
        try:
            return function(*args, **kwargs)
        finally:
            marks.setdefault(label + " out", time.process_time())
    return call


class Wrapping(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WRAPPED:
            return None
        for finder in sys.meta_path:
            found = finder.find_spec(name, path, target) if finder is not self and hasattr(finder, "find_spec") else None
            if found is not None:
                break
        else:
            return None
        execute = found.loader.exec_module

        def exec_module(module):
            execute(module)
            for owner, attribute in WRAPPED[name]:
                holder = getattr(module, owner) if owner else module
                setattr(holder, attribute, wrapped(getattr(holder, attribute), name.rsplit(".", 1)[-1] + "." + attribute))

        found.loader.exec_module = exec_module
        return found


sys.meta_path.insert(0, Wrapping())
sys.argv = ["fsmem", *sys.argv[1:]]
from fsmem.cli import main

main()
"""

STAGES = {
    "Python's start, the imports, the memory opened": lambda m: m["grep.run in"],
    "the first pass taken and cut into files, put in path order": lambda m: (
        m["catalog.superseded in"] - m["grep.run in"]
    ),
    "the superseded ranges of the matched files": lambda m: m["catalog.superseded out"] - m["catalog.superseded in"],
    "the tokenizer's load": lambda m: m["tokens.get_encoding out"] - m["tokens.get_encoding in"],
    "the page and the other files counted": lambda m: (
        m["grep.run out"] - m["catalog.superseded out"] - (m["tokens.get_encoding out"] - m["tokens.get_encoding in"])
    ),
    "the answer printed, the exit": lambda m: m["end"] - m["grep.run out"],
}


def stages_of(python: str, root: Path, name: str) -> dict[str, float] | None:
    """Seconds of CPU of each stage of `fsmem grep NAME` (None: the name is in no file, or nothing was counted)."""
    _forget_counts(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([python, "-c", PROBE, "grep", name], cwd=root, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1) or b"Traceback" in done.stderr:
        raise SystemExit(f"fsmem grep {name} failed ({done.returncode}): {done.stderr.decode()[:500]}")
    marks = json.loads(done.stderr.rsplit(b"STAGES ", 1)[-1])
    if done.returncode == 1 or "tokens.get_encoding in" not in marks or "catalog.superseded in" not in marks:
        return None
    tree = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {stage: measure(marks) for stage, measure in STAGES.items()} | {"the process tree (rg's CPU included)": tree}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a warm copy of a corpus, used as it is")
    parser.add_argument("--names", type=int, default=9, help="new names found in some file to measure")
    args, rest = parser.parse_known_args()  # run_all.py passes every script the same arguments
    python = str(installed_fsmem() / "python")
    roots = [args.root.resolve()] if args.root else [copy_of(corpus(files)) for files in sizes_from(rest, "10000")]
    for root in roots:
        run_drained([python, "-m", "fsmem", "ls", "--max-results", "1"], cwd=root)  # a warm metadata cache
        fresh = NewQuestions(root, seed=43)
        before = load()
        measured: list[dict[str, float]] = []
        for _ in range(args.names * 20):
            if len(measured) == args.names:
                break
            stages = stages_of(python, root, fresh.grep_word())
            if stages is not None:
                measured.append(stages)
        if not measured:
            raise SystemExit(f"no new name found in {root} had its page counted")
        rows = [[stage, ms(statistics.median(m[stage] for m in measured))] for stage in measured[0]]
        print(f"({before} before; {load()} after; {len(measured)} names found, medians of CPU)")
        print(table(f"fsmem grep NAME, a new name, stage by stage ({root})", ["stage", "CPU"], rows))


if __name__ == "__main__":
    main()
