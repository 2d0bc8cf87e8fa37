"""Search gives the same answers as another revision: rows, order and scores, on a corpus and on LoCoMo.

    .venv/bin/python benchmarks/bench_search_same.py --old main [--corpus DIR | --files 10000]
        [--queries 300] [--data ../shared/data/locomo10.json] [--samples 10] [--work DIR]

A change to how the search tables are stored (issue #20: the size of `.fsmem/`)
must not change one answer. `--old` is a revision (its `fsmem` package is taken
with `git archive`) or a folder holding that package. Each revision builds its
own index of its own copy of the same Markdown, in its own process, with the
clock pinned (FSMEM_NOW), and answers the same queries: generated ones
(`bench_server.Unique`, and the corpus's fixed queries), each also within a
folder and with a type filter (the filtered paths of the ranking), and every
LoCoMo question of categories 1-4. Compared per query: the whole ranking (every
candidate's path, line, score and relevance, in order) and the answer's hits.
Scores must agree within 1e-9 relative and the order exactly. Prints the counts
and the first differences; exits 1 when any answer differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
NOW = "2027-01-15T12:00:00+00:00"  # both revisions rank at this instant (recency is part of the score)
TOLERANCE = 1e-9


def _worker(roots: list[str], queries_file: str, out_file: str) -> None:
    """Runs under the revision's PYTHONPATH: answer every (root, query, filters) and write them as JSON."""
    import fsmem
    from fsmem import Memory
    from fsmem.evaluation.harness import is_gold
    from fsmem.search.ranking import search
    from fsmem.search.scoring import rank

    asked = json.loads(Path(queries_file).read_text())
    answers = []
    memories = {root: Memory(root) for root in roots}
    started = time.process_time()
    for memory in memories.values():
        memory.search_index.refresh()  # the cold build, timed apart from the answers
    build = time.process_time() - started
    started = time.process_time()
    latencies = []
    for item in asked:
        memory = memories[roots[item["root"]]]
        began = time.perf_counter()
        folder = item.get("within")
        within = (lambda path, folder=folder: path.startswith(folder)) if folder else None
        ranking = rank(
            memory.search_index, item["query"], memory.search_settings, limit=20, type=item.get("type"), within=within
        )
        rows = [
            [ranking.paths[i], ranking.lines[i], ranking.scores[i], ranking.relevance[i]] for i in ranking.candidates
        ]
        hits, found = [], None
        if not folder and not item.get("type"):
            result, _ranking = search(
                memory.search_index,
                memory.tokens,
                memory.search_settings,
                item["query"],
                k=20,
                max_tokens=2000,
                usage={},
            )
            hits = [[h.path, h.line, h.score] for h in result.hits]
            gold = item.get("gold")
            found = any(is_gold(h.path, h.line, h.end_line, h.text, gold) for h in result.hits) if gold else None
        latencies.append(time.perf_counter() - began)
        answers.append({"rows": rows, "hits": hits, "searchable": ranking.searchable, "found": found})
    seconds = time.process_time() - started
    latencies.sort()
    Path(out_file).write_text(
        json.dumps(
            {
                "fsmem": fsmem.__file__,
                "answers": answers,
                "build_cpu_seconds": build,
                "cpu_seconds": seconds,
                "p50_ms": latencies[len(latencies) // 2] * 1000,
            }
        )
    )


def _same_number(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=0.0)


def _difference(old: dict, new: dict) -> str | None:
    """How two answers to one query differ, or None when they are the same."""
    if old["searchable"] != new["searchable"]:
        return f"searchable rows {old['searchable']} != {new['searchable']}"
    if old["found"] != new["found"]:
        return f"a gold turn among the hits: {old['found']} != {new['found']}"
    for what in ("rows", "hits"):
        a, b = old[what], new[what]
        if len(a) != len(b):
            return f"{what}: {len(a)} != {len(b)}"
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            if x[:2] != y[:2]:
                return f"{what}[{n}]: {x[:2]} != {y[:2]}"
            if not all(_same_number(p, q) for p, q in zip(x[2:], y[2:], strict=True)):
                return f"{what}[{n}] {x[:2]}: scores {x[2:]} != {y[2:]}"
    return None


def _copy_memory(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".fsmem", ".git"))


def _run(package: Path, roots: list[Path], queries_file: Path, out_file: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(package), FSMEM_NOW=NOW)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--worker", str(queries_file), str(out_file), *map(str, roots)],
        env=env,
        check=True,
        cwd=package,
    )
    found = json.loads(out_file.read_text())
    found["wall_seconds"] = time.perf_counter() - started
    if not found["fsmem"].startswith(str(package)):
        raise SystemExit(f"the worker imported {found['fsmem']}, not the package in {package}")
    return found


def _corpus_queries(root: Path, count: int) -> list[dict]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_server import Unique
    from corpus import SEARCH_QUERIES

    unique = Unique([])
    texts = list(SEARCH_QUERIES) + [unique.query() for _ in range(count)]
    texts += ["budget", "ledger", "zephyrin", "proraton invoce", "Acme", "deploy rollback staging latency"]
    folders = sorted(p.name + "/" for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    asked = [{"root": 0, "query": q} for q in texts]
    for n, query in enumerate(texts[: max(count // 3, 10)]):
        asked.append({"root": 0, "query": query, "within": folders[n % len(folders)]})
        asked.append({"root": 0, "query": query, "type": ("semantic", "episodic", "procedural")[n % 3]})
    return asked


def _locomo(data: Path, work: Path, samples: int) -> tuple[list[Path], list[dict]]:
    sys.path.insert(0, str(REPO))
    from fsmem.evaluation.harness import load_evalset
    from fsmem.evaluation.locomo import import_locomo, load

    names = [str(s.get("sample_id")) for s in load(data)][:samples]
    imported = import_locomo(data, work / "locomo", samples=names)
    roots, asked = [], []
    for n, (root, evalset) in enumerate(zip(imported.memories, imported.evalsets, strict=True)):
        roots.append(Path(root))
        asked += [{"root": n, "query": q.question, "gold": q.gold} for q in load_evalset(evalset)]
    return roots, asked


def _recall(answers: list[dict]) -> str:
    """Questions with gold whose answer (20 hits, 2,000 tokens) shows a gold turn: found / asked."""
    graded = [a["found"] for a in answers if a["found"] is not None]
    return f"{sum(graded)}/{len(graded)} ({sum(graded) / max(len(graded), 1):.4f})"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[4:], sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="a revision (git archive) or a folder holding its fsmem package")
    parser.add_argument("--corpus", type=Path, help="a memory to copy (default: the generated corpus of --files)")
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--samples", type=int, default=10, help="LoCoMo conversations (0: none)")
    parser.add_argument("--work", type=Path, help="a folder for the copies (default: a temporary one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="search-same-", dir=args.work))
    try:
        sys.path.insert(0, str(REPO / "benchmarks"))  # here, not at the top: the workers import the old fsmem
        from common import corpus, old_package as unpacked

        if args.corpus is None:
            args.corpus = corpus(args.files)
        old_package = unpacked(args.old, work / "old-package")
        asked = _corpus_queries(args.corpus, args.queries)
        bases = [args.corpus]
        locomo = bool(args.samples and args.data.exists())
        if args.samples and not locomo:
            print(f"LoCoMo skipped: {args.data} not found (see ../shared/data/README.md)")
        if locomo:
            roots, locomo_asked = _locomo(args.data, work, args.samples)
            asked += [dict(item, root=item["root"] + 1) for item in locomo_asked]
            bases += roots
        queries_file = work / "queries.json"
        queries_file.write_text(json.dumps(asked))
        results = {}
        for name, package in (("old", old_package), ("new", REPO)):
            roots = []
            for n, base in enumerate(bases):
                roots.append(work / name / str(n))
                _copy_memory(base, roots[-1])
            results[name] = _run(package, roots, queries_file, work / f"{name}.json")
        old, new = results["old"]["answers"], results["new"]["answers"]
        differences = [(item, d) for item, a, b in zip(asked, old, new, strict=True) if (d := _difference(a, b))]
        corpus_n = sum(1 for item in asked if item["root"] == 0)
        rows = sum(len(a["rows"]) for a in new)
        exact = sum(
            x[2:] == y[2:]
            for a, b in zip(old, new, strict=True)
            if len(a["rows"]) == len(b["rows"])
            for x, y in zip(a["rows"], b["rows"], strict=True)
        )
        print(f"queries: {len(asked)} ({corpus_n} on {args.corpus}, {len(asked) - corpus_n} LoCoMo questions)")
        print(f"candidate rows compared: {rows}; hits compared: {sum(len(a['hits']) for a in new)}")
        print(f"candidate rows whose score and relevance are the very same floats: {exact}")
        for name in ("old", "new"):
            r = results[name]
            print(
                f"{name}: {r['fsmem']}: {r['wall_seconds']:.1f} s wall; cold builds {r['build_cpu_seconds']:.1f} s CPU,"
                f" the answers (ranking and search per query) {r['cpu_seconds']:.1f} s CPU, p50 {r['p50_ms']:.1f} ms"
            )
        print(
            "new / old CPU: builds"
            f" {results['new']['build_cpu_seconds'] / results['old']['build_cpu_seconds']:.3f}x,"
            f" answers {results['new']['cpu_seconds'] / results['old']['cpu_seconds']:.3f}x"
        )
        if locomo:
            print(f"LoCoMo recall (a gold turn among the hits): old {_recall(old)}, new {_recall(new)}")
        print(f"answers that differ: {len(differences)}")
        for item, why in differences[:10]:
            where = ", ".join(f"{k}={item[k]!r}" for k in ("root", "within", "type") if item.get(k) is not None)
            print(f"  {item['query']!r} ({where}): {why}")
        return 1 if differences else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
