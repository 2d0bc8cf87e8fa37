"""Search latency: a cold search (index built from the files), a warm one, and one after a single edit,
as ratios against `fsmem grep` on the same memory in the same run.

    .venv/bin/python benchmarks/bench_search_latency.py [--data ../shared/data/locomo10.json]
    .venv/bin/python benchmarks/bench_search_latency.py --compare OLD_TREE [--root DIR ...] [--queries 300]

The memory is all ten LoCoMo conversations imported and consolidated side by side (about 5,900 rows).

`--compare` checks that a change of the ranking changes no answer: the code of OLD_TREE (a checkout of the
commit before, for example `git worktree add /tmp/old main`) and this tree rank the same questions on the
same memories, each in its own process, and every candidate's row, place and score (and every row of the
answer fitted to the default budget) must be equal, the floats to the last bit. The memories are each
`--root` (a scratch copy of a benchmark corpus, asked bench_server's `Unique` questions, no two alike)
and the ten LoCoMo conversations, asked their own questions. The old code ranks first, on the index as
its refresh leaves it; this tree then merges the index's segments as its builds do
(`fsmem.search.tables.merge_segments`), and ranks; with `--rounds N` the two alternate N times, each from
the index the old side's first refresh left. Each process reports its CPU per search: first-time searches,
since no question comes twice.
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
if "--dump" not in sys.argv:  # a dump ranks with the fsmem of its PYTHONPATH (the old tree, or this one)
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
QUERIES = ["support group", "adoption agencies", "pottery class", "camping trip with the kids", "marathon training"]


def timed(function, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def dump_rankings(root: Path, questions: list[str], out: Path, merge: bool) -> None:
    """Rank `questions` on `root` with the fsmem on sys.path; write every candidate and answer row, and the CPU."""
    from fsmem import Memory
    from fsmem.search.ranking import search

    memory = Memory(root)
    index = memory.search_index
    index.refresh()
    if merge:
        from fsmem.search.tables import merge_segments

        index.guarded(merge_segments)
    budget = memory.budget
    memory.search("warm up: the modules a first search imports")  # not timed, not compared
    answers, cpu = [], []
    for question in questions:
        started = time.process_time()
        result, ranking = search(
            index, memory.tokens, memory.search_settings, question, k=budget.max_results, max_tokens=budget.max_tokens
        )
        cpu.append(time.process_time() - started)
        pool = [
            [ranking.paths[r], ranking.lines[r], ranking.scores[r].hex(), ranking.relevance[r].hex()]
            for r in ranking.ids
        ]
        hits = [[h.path, h.line, h.score.hex(), h.tokens] for h in result.hits]
        answers.append({"query": question, "pool": pool, "hits": hits, "total": result.page.total})
    out.write_text(json.dumps({"answers": answers, "cpu": cpu}))


def locomo_memories(data: Path, folder: Path) -> list[tuple[Path, list[str]]]:
    """The ten LoCoMo conversations, one memory each, with their own questions."""
    from fsmem.evaluation.locomo import import_locomo

    imported = import_locomo(data, folder)
    found = []
    for memory, evalset in zip(imported.memories, imported.evalsets, strict=True):
        lines = Path(evalset).read_text(encoding="utf-8").splitlines()
        found.append((Path(memory), [json.loads(line)["question"] for line in lines if line.strip()]))
    return found


def _cache_files(root: Path) -> list[Path]:
    base = root / ".fsmem" / "cache.sqlite"
    return [base, base.with_name("cache.sqlite-wal"), base.with_name("cache.sqlite-shm")]


def _snapshot(root: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for path in _cache_files(root):
        if path.exists():
            shutil.copy2(path, folder / path.name)


def _restore(root: Path, folder: Path) -> None:
    """The cache database as the old side's first refresh left it (the files are untouched: no rebuild)."""
    for path in _cache_files(root):
        path.unlink(missing_ok=True)
        if (folder / path.name).exists():
            shutil.copy2(folder / path.name, path)


def compare(old_tree: Path, roots: list[Path], data: Path, queries: int, rounds: int) -> int:
    """Old and new rankings of the same questions on the same memories: equal, or the first difference.

    Each round runs the old side, then the new, each from the index the old side's first refresh left (a
    snapshot of the cache database put back before every run), so a busy machine slows both sides alike
    and the new side always merges the index itself. CPU per search is the median over the rounds' medians.
    """
    from bench_server import Unique

    env = dict(os.environ, FSMEM_NOW=os.environ.get("FSMEM_NOW", "2026-12-01T12:00:00Z"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for root in roots:
            unique = Unique([], seed=11)
            cases.append((root, [unique.query() for _ in range(queries)]))
        if data.exists():
            cases += locomo_memories(data, Path(tmp) / "locomo")
        else:
            print(f"LoCoMo skipped: {data} not found (see ../shared/data/README.md)")
        failures = 0
        for number, (root, questions) in enumerate(cases):
            asked = Path(tmp) / f"questions-{number}.json"
            asked.write_text(json.dumps(questions))
            snapshot = Path(tmp) / f"index-{number}"
            cpu: dict[str, list[float]] = {"old": [], "new": []}
            differ = []
            for round_ in range(rounds):
                dumps = {}
                for side, tree in (("old", old_tree), ("new", REPO)):
                    if round_ or side == "new":
                        _restore(root, snapshot)
                    dumps[side] = Path(tmp) / f"{side}-{number}.json"
                    command = [sys.executable, __file__, "--dump", str(dumps[side]), "--root", str(root)]
                    command += ["--questions", str(asked)] + (["--merge-segments"] if side == "new" else [])
                    subprocess.run(command, env=dict(env, PYTHONPATH=str(tree)), check=True)
                    if not round_ and side == "old":
                        _snapshot(root, snapshot)
                old, new = (json.loads(dumps[side].read_text()) for side in ("old", "new"))
                for side, found in (("old", old), ("new", new)):
                    cpu[side].append(statistics.median(found["cpu"]))
                differ += [(a, b) for a, b in zip(old["answers"], new["answers"], strict=True) if a != b]
            rows = sum(len(a["pool"]) for a in old["answers"])
            print(f"{root.name}: {len(questions)} questions, {rows:,} candidate rows, {rounds} round(s): ", end="")
            print(f"{len(differ)} answers differ")
            if differ:
                a, b = differ[0]
                print(f"  first: {a['query']!r}: old {a['pool'][:3]} ... new {b['pool'][:3]} ...")
            failures += len(differ)
            old_ms, new_ms = (1000 * statistics.median(cpu[side]) for side in ("old", "new"))
            print(f"  CPU per first-time search: old {old_ms:.1f} ms, new {new_ms:.1f} ms ({new_ms / old_ms:.2f}x)")
    print("the same answers" if not failures else f"{failures} answers differ")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--compare", type=Path, metavar="OLD_TREE", help="compare this tree's rankings with OLD_TREE's")
    parser.add_argument(
        "--root", type=Path, action="append", default=[], help="a memory to compare on (a scratch copy)"
    )
    parser.add_argument("--queries", type=int, default=300, help="Unique questions per --root")
    parser.add_argument("--rounds", type=int, default=1, help="old and new runs, alternating, per memory")
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--merge-segments", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump is not None:
        dump_rankings(args.root[0], json.loads(args.questions.read_text()), args.dump, args.merge_segments)
        return 0
    if args.compare is not None:
        return compare(args.compare.resolve(), [r.resolve() for r in args.root], args.data, args.queries, args.rounds)
    if not args.data.exists():
        print(f"skipped: {args.data} not found (see ../shared/data/README.md)")
        return 0
    from fsmem import Memory
    from fsmem.evaluation.locomo import import_locomo

    with tempfile.TemporaryDirectory() as tmp:
        imported = import_locomo(args.data, Path(tmp) / "parts")
        root = Path(tmp) / "all"
        Memory.init(root)
        for part in imported.memories:  # the consolidated speaker files (one folder per conversation) and the notes
            shutil.copytree(Path(part) / "sessions", root / "sessions", dirs_exist_ok=True)
            shutil.copytree(Path(part) / "entities" / "people", root / "entities" / Path(part).name)
        memory = Memory(root)

        def cold():
            shutil.rmtree(root / ".fsmem", ignore_errors=True)
            Memory(root).search(QUERIES[0], max_results=20)

        cold_ms = timed(cold, repeat=3)
        memory.search(QUERIES[0])
        warm_ms = statistics.median(timed(lambda q=q: memory.search(q, max_results=20)) for q in QUERIES)
        process_ms = timed(
            lambda: Memory(root).search(QUERIES[1], max_results=20)
        )  # a new process's Memory, cache on disk
        note = next(root.rglob("*.md"))

        def after_edit():
            note.write_text(note.read_text() + "\n- walrus sighting\n")
            memory.search("walrus", max_results=20)

        edit_ms = timed(after_edit)
        grep_ms = statistics.median(
            timed(lambda q=q: memory.grep(q, ignore_case=True, max_results=20)) for q in QUERIES
        )
        rows = memory.search_index.guarded(
            lambda conn: conn.execute("SELECT value FROM search_meta WHERE key = 'rows'").fetchone()[0]
        )
        files = len(list(root.rglob("*.md")))
    print(f"memory: {rows} rows in {files} files")
    print(f"{'case':<34} {'ms':>8} {'x grep':>8}")
    for name, value in (
        ("grep (baseline)", grep_ms),
        ("search, warm (same Memory)", warm_ms),
        ("search, new Memory, cache on disk", process_ms),
        ("search after one edit", edit_ms),
        ("search, cold (.fsmem deleted)", cold_ms),
    ):
        print(f"{name:<34} {value:>8.1f} {value / grep_ms:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
