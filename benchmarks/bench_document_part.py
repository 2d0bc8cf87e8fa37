"""The document part of a search, this tree beside another revision, in the same run: CPU, in-process.

    .venv/bin/python benchmarks/bench_document_part.py --old main [--corpus DIR | --files 10000]
        [--queries 200] [--notes 12] [--rounds 2] [--work DIR]

Issue #20: the document part of the score moved from an FTS5 table (`search_docs`, its `-bm25()`) to
fsmem's own postings (`fsmem.search.postings`), which must cost no more CPU. Each revision builds its own
index of its own copy of the same Markdown (the build untimed) and, in a process of its own with the clock
pinned, times by its thread's CPU: `document_scores` (what the document part costs) and the whole ranking,
over `--queries` questions never asked before at one state of the index; then `--notes` times a note, the
first search after it (a new state: what is kept of the last one is let go) and a second question. The
revisions alternate, `--rounds` times. Prints medians and new/old ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOW = "2027-01-15T12:00:00+00:00"


def _worker(root: str, queries: int, notes: int, out: str) -> None:
    """Runs under the revision's PYTHONPATH."""
    import fsmem
    from fsmem import Memory
    from fsmem.search import scoring

    sys.path.insert(1, str(REPO / "benchmarks"))
    from bench_server import Unique

    spent = [0.0]
    inner = scoring.document_scores

    def timed(*args, **kwargs):
        started = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - started

    scoring.document_scores = timed
    memory = Memory(root)
    memory.search("the first search builds the index")
    unique = Unique([])
    asked = [unique.query() for _ in range(queries + 2 * notes + 5)]
    for query in asked[:5]:
        memory.search(query)
    standing, documents = [], []
    for query in asked[5 : 5 + queries]:
        spent[0] = 0.0
        started = time.thread_time()
        memory.search(query)
        standing.append(time.thread_time() - started)
        documents.append(spent[0])
    note, first, first_documents, second = [], [], [], []
    rest = iter(asked[5 + queries :])
    for n in range(notes):
        started = time.thread_time()
        memory.note(f"the bench wrote line {n} about deploy budget")
        note.append(time.thread_time() - started)
        spent[0] = 0.0
        started = time.thread_time()
        memory.search(next(rest))
        first.append(time.thread_time() - started)
        first_documents.append(spent[0])
        started = time.thread_time()
        memory.search(next(rest))
        second.append(time.thread_time() - started)
    found = {
        "search at one state": standing,
        "document part, at one state": documents,
        "note": note,
        "first search after a note": first,
        "document part, after a note": first_documents,
        "a second question after it": second,
    }
    Path(out).write_text(json.dumps({"fsmem": fsmem.__file__, "cpu": found}))


def _run(package: Path, root: Path, args, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(package), FSMEM_NOW=NOW)
    command = [sys.executable, __file__, "--worker", str(root), str(args.queries), str(args.notes), str(out)]
    subprocess.run(command, env=env, check=True, cwd=package)
    found = json.loads(out.read_text())
    if not found["fsmem"].startswith(str(package)):
        raise SystemExit(f"the worker imported {found['fsmem']}, not the package in {package}")
    return found["cpu"]


def _build(package: Path, root: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(package), FSMEM_NOW=NOW)
    code = "import sys; from fsmem import Memory; Memory(sys.argv[1]).search_index.refresh()"
    subprocess.run([sys.executable, "-c", code, str(root)], env=env, check=True, cwd=package)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="a revision (git archive) or a folder holding its fsmem package")
    parser.add_argument("--corpus", type=Path, help="a memory to copy (default: the generated corpus of --files)")
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--notes", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, help="a folder for the copies (default: a temporary one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="document-part-", dir=args.work))
    try:
        sys.path.insert(0, str(REPO / "benchmarks"))  # here, not at the top: the workers import the old fsmem
        from common import corpus, load, old_package

        source = args.corpus or corpus(args.files)
        packages = {"old": old_package(args.old, work / "old-package"), "new": REPO}
        before = load()
        samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
        for number in range(args.rounds):
            for side in ("old", "new") if number % 2 == 0 else ("new", "old"):
                root = work / f"{side}-{number}"
                shutil.copytree(source, root, ignore=shutil.ignore_patterns(".fsmem", ".git"))
                _build(packages[side], root)
                for what, values in _run(packages[side], root, args, work / f"{side}-{number}.json").items():
                    samples[side].setdefault(what, []).extend(values)
                shutil.rmtree(root)
        print(f"CPU per call, ms (median), old {args.old} / new {REPO}")
        print(f"{before} before, {load()} after")
        print(f"{'':32} {'old':>8} {'new':>8} {'new/old':>8}")
        for what in samples["old"]:
            old, new = (1000 * statistics.median(samples[side][what]) for side in ("old", "new"))
            print(f"{what:32} {old:8.2f} {new:8.2f} {new / old:8.3f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
