"""`fsmem search` latency, p50 and p95, on the seeded benchmark corpus (1k and 10k files), against
`fsmem grep` and bare `rg --json` of the query's words in the same run.

    python benchmarks/bench_search_corpus.py [--sizes 1000,10000] [--runs 3] [--cold-runs 2]

Cases, each over the same fixed queries:
- in-process: `Memory.search` on a warm index (a long-lived agent server);
- CLI, warm: `fsmem search QUERY --json`, a new process each time, `.fsmem/` warm;
- CLI, after one edit: a line appended to one file, then the same command;
- CLI, cold: `.fsmem/` deleted first (every file read and indexed).
Baselines per query: `fsmem grep -i --json` and `rg --json -i` of the query's words as one alternation.
Ratios are against bare rg's p50 from the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import time

from common import corpus, fsmem_bin, rg_bin, run_drained, table

QUERIES = [
    "renewal date for Acme Corp",
    "who is the finance lead",
    "rollback after the staging deploy",
    "zephyrine account proration",
    "Maria Lopez manager",
    "budget EUR 40k contract",
    "latency alert dashboard",
    "preferred channel email",
]
STOP = {"for", "the", "who", "is", "after", "what", "a", "an", "of"}


def pattern_of(query: str) -> str:
    words = [w for w in re.findall(r"\w+", query.lower()) if w not in STOP]
    return "|".join(words)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return statistics.median(ordered), p95


def measure(files: int, runs: int, cold_runs: int) -> list[list[str]]:
    from fsmem import Memory

    root = corpus(files)
    fsmem = fsmem_bin()
    samples: dict[str, list[float]] = {
        name: []
        for name in (
            "rg --json",
            "fsmem grep --json",
            "search in-process",
            "search CLI warm",
            "search CLI after 1 edit",
            "search CLI cold",
        )
    }
    shutil.rmtree(root / ".fsmem", ignore_errors=True)
    started = time.perf_counter()
    memory = Memory(root)
    memory.search(QUERIES[0])  # builds .fsmem/ (the cold in-process build, reported below)
    first_build = time.perf_counter() - started
    edited = sorted((root / "topics").glob("*.md"))[0]
    original = edited.read_bytes()
    try:
        for run in range(runs):
            for number, query in enumerate(QUERIES):
                words = pattern_of(query)
                samples["rg --json"].append(run_drained([rg_bin(), "--json", "-i", words], root)[0])
                samples["fsmem grep --json"].append(
                    run_drained([fsmem, "--root", str(root), "grep", "-i", "--json", words])[0]
                )
                began = time.perf_counter()
                memory.search(query)
                samples["search in-process"].append(time.perf_counter() - began)
                argv = [fsmem, "--root", str(root), "search", query, "--json"]
                samples["search CLI warm"].append(run_drained(argv)[0])
                with open(edited, "a", encoding="utf-8") as handle:
                    handle.write(f"- edit {run}-{number}: the renewal moved to next quarter.\n")
                samples["search CLI after 1 edit"].append(run_drained(argv)[0])
        for run in range(cold_runs):
            shutil.rmtree(root / ".fsmem", ignore_errors=True)
            samples["search CLI cold"].append(
                run_drained([fsmem, "--root", str(root), "search", QUERIES[run % len(QUERIES)], "--json"])[0]
            )
    finally:
        edited.write_bytes(original)
    base = percentiles(samples["rg --json"])[0]
    rows = []
    for name, values in samples.items():
        p50, p95 = percentiles(values)
        rows.append(
            [f"{files:,}", name, str(len(values)), f"{p50 * 1000:.0f} ms", f"{p95 * 1000:.0f} ms", f"{p50 / base:.1f}x"]
        )
    rows.append(
        [
            f"{files:,}",
            "(first Memory.search, no .fsmem/)",
            "1",
            f"{first_build * 1000:.0f} ms",
            "",
            f"{first_build / base:.1f}x",
        ]
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SEARCH_SIZES", "1000,10000"))
    parser.add_argument(
        "--runs", type=int, default=3, help=f"passes over the queries (each pass: {len(QUERIES)} queries)"
    )
    parser.add_argument("--cold-runs", type=int, default=2)
    args, _ = parser.parse_known_args()
    rows = []
    for files in [int(s) for s in args.sizes.split(",") if s]:
        rows += measure(files, args.runs, args.cold_runs)
    load = os.getloadavg()[0]
    print(
        table(
            f"search latency ({os.cpu_count()} cores, load {load:.1f}); ratio = p50 / rg --json p50",
            ["files", "case", "n", "p50", "p95", "x rg"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
