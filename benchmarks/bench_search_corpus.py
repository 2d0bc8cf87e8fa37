"""`fsmem search` on the seeded benchmark corpus, each figure against the limit it is judged by, in the same run.

    python benchmarks/bench_search_corpus.py [--sizes 10000] [--runs 5]

- cold build: `fsmem search` with no `.fsmem/` (every file read, split, stemmed and indexed), against a bare
  SQLite FTS5 build of the same rows (the same files read and split by `fsmem.format.rows.split_rows`, row text
  and headings inserted into one FTS5 table with SQLite's own `porter` tokenizer, in one transaction);
- size: the whole `.fsmem/` after the build, against the bytes of the memory's Markdown;
- warm CLI: `fsmem search QUERY --json`, a new process each time, against `fsmem --version` (the CLI's start-up);
- after one edit: a line appended to one file, then the same command, against the warm CLI search;
- in-process: `Memory.search` on a warm index (an agent server), and peak RSS of the cold build.
Each process is timed by wall clock and by its own CPU time (user + sys, from wait4): the machine is shared,
so CPU time is the steadier figure. Medians; the two sides of a ratio alternate run by run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

from common import corpus, fsmem_bin, load, table
from corpus import SEARCH_QUERIES

QUERIES = SEARCH_QUERIES

BARE_BUILD = """
import os, sys, time
import apsw
from pathlib import Path
from fsmem.format.frontmatter import decode
from fsmem.format.rows import split_rows
from fsmem.store.catalog import walk_stats
root, db = Path(sys.argv[1]), sys.argv[2]
conn = apsw.Connection(db)
conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
conn.execute("CREATE VIRTUAL TABLE rows USING fts5(text, headings, content='', contentless_delete=1, tokenize='porter')")
conn.execute("BEGIN")
for rel, full, _stat in walk_stats(root):
    with open(full, "rb") as handle:
        text, _ = decode(handle.read())
    conn.executemany(
        "INSERT INTO rows (text, headings) VALUES (?, ?)", [(r.text, " ".join(r.headings)) for r in split_rows(rel, text)]
    )
conn.execute("COMMIT")
"""


def run(argv: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS MB) of one process, reaped with wait4 so its own rusage is known."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    err = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1) or "Traceback" in err:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {err[:500]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def markdown_bytes(root) -> int:
    total = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files if f.endswith(".md"))
    return total


def folder_bytes(path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(files: int, runs: int, cold_runs: int) -> list[list[str]]:
    from fsmem import Memory

    root = corpus(files)
    fsmem = fsmem_bin()
    env = {**os.environ, "PYTHONPATH": str(root.parent.parent)}
    python = sys.executable
    rows: list[list[str]] = []
    label = f"{files:,}"

    # cold build against a bare FTS5 build of the same rows, alternating
    cold, bare, rss = [], [], []
    for attempt in range(cold_runs):
        scratch = root.parent / f".bare-{files}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            with_suffix = f"{scratch}{suffix}"
            if os.path.exists(with_suffix):
                os.unlink(with_suffix)
        bare.append(run([python, "-c", BARE_BUILD, str(root), str(scratch)], env))
        os.unlink(scratch)
        shutil.rmtree(root / ".fsmem", ignore_errors=True)
        measured = run([fsmem, "--root", str(root), "search", QUERIES[attempt % len(QUERIES)], "--json"])
        cold.append(measured)
        rss.append(measured[2])
    cold_wall, cold_cpu = median([c[0] for c in cold]), median([c[1] for c in cold])
    bare_wall, bare_cpu = median([b[0] for b in bare]), median([b[1] for b in bare])
    rows.append(
        [
            label,
            "cold build (no .fsmem/)",
            f"{cold_wall:.1f} s",
            f"{cold_cpu:.1f} s",
            "bare FTS5 build of the same rows",
            f"{bare_wall:.1f} s",
            f"{bare_cpu:.1f} s",
            f"{cold_cpu / bare_cpu:.2f}x",
            "<= 2x",
        ]
    )
    rows.append([label, "peak RSS of the cold build", f"{max(rss)} MB", "", "", "", "", "", "< 300 MB"])
    size, markdown = folder_bytes(root / ".fsmem"), markdown_bytes(root)
    rows.append(
        [
            label,
            "whole .fsmem/",
            f"{size / 1e6:.1f} MB",
            "",
            "Markdown of the memory",
            f"{markdown / 1e6:.1f} MB",
            "",
            f"{size / markdown:.2f}x",
            "<= 1x",
        ]
    )

    # warm CLI against `fsmem --version`, and after one edit against warm, alternating
    edited = sorted((root / "topics").glob("*.md"))[0]
    original = edited.read_bytes()
    version, warm, after = [], [], []
    try:
        run([fsmem, "--root", str(root), "search", QUERIES[0], "--json"])
        for number in range(runs):
            for position, query in enumerate(QUERIES):
                argv = [fsmem, "--root", str(root), "search", query, "--json"]
                version.append(run([fsmem, "--version"]))
                warm.append(run(argv))
                with open(edited, "a", encoding="utf-8") as handle:
                    handle.write(f"- edit {number}-{position}: the renewal moved to next quarter.\n")
                after.append(run(argv))
        memory = Memory(root)
        memory.search(QUERIES[0])
        in_process = []
        for _ in range(runs):
            for query in QUERIES:
                started = time.perf_counter()
                memory.search(query)
                in_process.append(time.perf_counter() - started)
    finally:
        edited.write_bytes(original)
    v_wall, v_cpu = median([v[0] for v in version]), median([v[1] for v in version])
    w_wall, w_cpu = median([w[0] for w in warm]), median([w[1] for w in warm])
    a_wall, a_cpu = median([a[0] for a in after]), median([a[1] for a in after])
    rows.append(
        [
            label,
            "warm `fsmem search` CLI",
            f"{w_wall * 1000:.0f} ms",
            f"{w_cpu * 1000:.0f} ms",
            "`fsmem --version`",
            f"{v_wall * 1000:.0f} ms",
            f"{v_cpu * 1000:.0f} ms",
            f"{w_cpu / v_cpu:.2f}x",
            "<= 1.5x",
        ]
    )
    rows.append(
        [
            label,
            "search right after one file changed",
            f"{a_wall * 1000:.0f} ms",
            f"{a_cpu * 1000:.0f} ms",
            "warm `fsmem search` CLI",
            f"{w_wall * 1000:.0f} ms",
            f"{w_cpu * 1000:.0f} ms",
            f"{a_cpu / w_cpu:.2f}x",
            "<= 1.5x",
        ]
    )
    p50 = median(in_process)
    p95 = sorted(in_process)[max(0, round(0.95 * len(in_process)) - 1)]
    rows.append(
        [
            label,
            "in-process `Memory.search`, warm",
            f"p50 {p50 * 1000:.0f} ms",
            f"p95 {p95 * 1000:.0f} ms",
            "",
            "",
            "",
            "",
            "",
        ]
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SEARCH_SIZES", "10000"))
    parser.add_argument(
        "--runs", type=int, default=3, help=f"passes over the queries (each pass: {len(QUERIES)} queries)"
    )
    parser.add_argument("--cold-runs", type=int, default=2)
    args, _ = parser.parse_known_args()
    before = load()
    rows = []
    for files in [int(s) for s in args.sizes.split(",") if s]:
        rows += measure(files, args.runs, args.cold_runs)
    print(
        table(
            f"search on the seeded corpus ({os.cpu_count()} cores; {before} before, {load()} after); ratio = CPU / CPU",
            ["files", "fsmem", "wall", "CPU", "limit", "wall", "CPU", "ratio", "target"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
