"""Cost proportional to the answer (issue #20): each call of a long-lived `Memory` beside its limit, at 1k, 10k
and 100k files, in the same run, as ratios; and how each grows with the memory.

    python benchmarks/bench_answer.py [--sizes 1000,10000,100000] [--runs 9]

One `Memory` is held open the way `fsmem serve` and `fsmem mcp` hold one (it runs on the change feed from
its second call). Each figure is a median, the call and its limit alternating run by run:

- `ls`, 5 rows, and `context` against a Python stat walk of the memory's files (`walk_stats`), and `context`
  also against reading INDEX.md and profile/ (the bytes it is made of);
- `search` against a bare SQLite FTS5 query over the same rows (`split_rows`, porter, bm25, 20 rows);
- `grep` (5 results, a word on a handful of lines) against `rg --json` of it, both from this process;
- `read` (1,000 tokens) against reading the file's bytes; `note` against an atomic write (temporary
  file, fsync, rename) of the same bytes;
- consolidating one more note into a memory of as many entity documents (`bench_consolidate.generate`),
  against reading and splitting every document once;
- the cold builds: the metadata cache (first `ls` without `.fsmem/`) against the stat walk plus reading
  every file, and the search index (first `search`) against a bare FTS5 build of the same rows, wall time;
- `.fsmem/` with both caches full against the Markdown's bytes;
- the CLI: `fsmem ls --max-results 5` against the same command on a new, empty memory.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import compiled, corpus, fsmem_bin, load, rg_bin, table
from corpus import RARE_WORD, SEARCH_QUERIES

TARGETS = {
    "ls": "<= 0.5x",
    "context": "<= 0.5x",
    "search": "<= 4x",
    "grep": "<= 1.2x",
    "cold search build": "<= 2x",
    ".fsmem/ size": "<= 1x",
    "CLI ls": "<= 2x",
}


def timed(function, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def alternate(pair: dict[str, object], runs: int) -> dict[str, float]:
    """Median seconds of each function, the two alternating run by run after one warm-up each."""
    samples: dict[str, list[float]] = {name: [] for name in pair}
    for function in pair.values():
        function()  # type: ignore[operator]
    for _ in range(runs):
        for name, function in pair.items():
            started = time.perf_counter()
            function()  # type: ignore[operator]
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def stat_walk(root: Path) -> None:
    from fsmem.store.walk import walk_stats

    for _ in walk_stats(root):
        pass


def read_index_and_profile(root: Path) -> None:
    for path in [root / "INDEX.md", *sorted((root / "profile").glob("*.md"))]:
        if path.is_file():
            path.read_bytes()


def bare_build(root: Path, db: Path) -> None:
    """The limit of the search index's cold build: the same rows in one FTS5 table, one transaction."""
    import apsw

    from fsmem.format.frontmatter import decode
    from fsmem.format.rows import split_rows
    from fsmem.store.walk import walk_stats

    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            os.unlink(f"{db}{suffix}")
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE VIRTUAL TABLE rows USING fts5(text, headings, content='', contentless_delete=1, tokenize='porter')"
    )
    conn.execute("BEGIN")
    for rel, full, _stat in walk_stats(root):
        with open(full, "rb") as handle:
            text, _ = decode(handle.read())
        rows = [(r.text, " ".join(r.headings)) for r in split_rows(rel, text)]
        conn.executemany("INSERT INTO rows (text, headings) VALUES (?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()


def bare_query(db: Path):
    import apsw

    from fsmem.search.analyzer import STOP_WORDS

    conn = apsw.Connection(str(db))
    # the words fsmem's analyzer keeps (no stop words), any of them, as fsmem ranks rows
    queries = [" OR ".join(f'"{w}"' for w in q.split() if w.lower() not in STOP_WORDS) for q in SEARCH_QUERIES]
    state = {"n": 0}

    def query() -> None:
        text = queries[state["n"] % len(queries)]
        state["n"] += 1
        conn.execute("SELECT rowid, bm25(rows) FROM rows WHERE rows MATCH ? ORDER BY rank LIMIT 20", (text,)).fetchall()

    return query


def atomic_write(path: Path, data: bytes) -> None:
    temp = path.with_name(path.name + ".bench-tmp")
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def folder_bytes(path: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path) for f in names)


def markdown_bytes(root: Path) -> int:
    from fsmem.store.walk import walk_stats

    return sum(stat.st_size for _rel, _full, stat in walk_stats(root))


def cli_ls(root: Path) -> float:
    argv = [fsmem_bin(), "--root", str(root), "ls", "--max-results", "5"]
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True)
    return time.perf_counter() - started


def one_more_note(documents: int) -> tuple[float, float]:
    """(seconds to consolidate one more note, seconds to read and split every document once)."""
    from bench_consolidate import generate, read_everything, write_note

    from fsmem import Memory

    os.environ.setdefault("FSMEM_NOW", "2026-12-01T00:00:00+00:00")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "mem"
        generate(root, 20, documents)
        memory = Memory(root)
        memory.consolidate()
        baseline = statistics.median(read_everything(root) for _ in range(3))
        samples = []
        for n in range(3):
            write_note(root, _dt.date(2026, 12, 1), f"one-more-{n}", random.Random(99 + n), documents)
            started = time.perf_counter()
            memory.consolidate()
            samples.append(time.perf_counter() - started)
        return statistics.median(samples), baseline


def measure(files: int, runs: int, rows: list[list[str]], growth: dict[str, dict[int, float]]) -> None:
    from fsmem import Memory

    root = corpus(files)
    label = f"{files:,}"

    def row(call: str, seconds: float, limit: str, limit_seconds: float, key: str | None = None) -> None:
        ratio = seconds / limit_seconds if limit_seconds else float("nan")
        rows.append(
            [label, call, _ms(seconds), limit, _ms(limit_seconds), f"{ratio:.2f}x", TARGETS.get(key or call, "")]
        )
        if key in ("ls", "context", "search", "grep"):
            growth.setdefault(key, {})[files] = seconds

    # cold builds, from no .fsmem/ at all
    shutil.rmtree(root / ".fsmem", ignore_errors=True)
    started = time.perf_counter()
    Memory(root).ls(max_results=5)
    cold_meta = time.perf_counter() - started
    started = time.perf_counter()
    stat_walk(root)
    for _rel, full, _stat in __import__("fsmem.store.walk", fromlist=["walk_stats"]).walk_stats(root):
        with open(full, "rb") as handle:
            handle.read()
    read_all = time.perf_counter() - started
    row("cold metadata build (first ls)", cold_meta, "stat walk + reading every file", read_all)
    scratch = root.parent / f".bare-{files}.sqlite"
    started = time.perf_counter()
    bare_build(root, scratch)
    bare = time.perf_counter() - started
    started = time.perf_counter()
    built = Memory(root)
    built.search(SEARCH_QUERIES[0])
    cold_search = time.perf_counter() - started
    built.search_index.wait_merged()  # the build's segments merge behind its answer: sized once they are
    built.close()
    row("cold search build (first search)", cold_search, "bare FTS5 build of the same rows", bare, "cold search build")
    import apsw

    with contextlib.closing(apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # at rest: the write-ahead log folded in
    size, markdown = folder_bytes(root / ".fsmem"), markdown_bytes(root)
    rows.append(
        [
            label,
            ".fsmem/ with both caches full",
            f"{size / 1e6:.1f} MB",
            "the Markdown",
            f"{markdown / 1e6:.1f} MB",
            f"{size / markdown:.2f}x",
            TARGETS[".fsmem/ size"],
        ]
    )

    # a long-lived Memory: the second call on runs on the change feed
    memory = Memory(root)
    memory.ls(max_results=5)
    memory.ls(max_results=5)
    feed = memory.catalog._feed
    state = (
        "on the change feed" if feed is not None and feed.trusted else f"walking ({feed.reason if feed else 'no feed'})"
    )
    got = alternate({"ls": lambda: memory.ls(max_results=5), "walk": lambda: stat_walk(root)}, runs)
    row(f"ls, 5 rows ({state})", got["ls"], "stat walk of the files", got["walk"], "ls")
    got = alternate({"context": lambda: memory.context(), "walk": lambda: stat_walk(root)}, runs)
    row("context (no INDEX.md: catalog rows)", got["context"], "stat walk of the files", got["walk"], "context")
    index_written = memory.index().changed
    got = alternate({"context": lambda: memory.context(), "walk": lambda: stat_walk(root)}, runs)
    row("context (INDEX.md and profile/)", got["context"], "stat walk of the files", got["walk"], "context")
    got = alternate({"context": lambda: memory.context(), "read": lambda: read_index_and_profile(root)}, runs)
    row("context (INDEX.md and profile/)", got["context"], "reading INDEX.md and profile/", got["read"], "-")
    if index_written:
        (root / "INDEX.md").unlink()

    queries = iter(SEARCH_QUERIES * (runs + 2) * 2)
    got = alternate({"search": lambda: memory.search(next(queries), max_results=20), "bare": bare_query(scratch)}, runs)
    row("search, 20 rows", got["search"], "bare FTS5 query, same rows", got["bare"], "search")
    rg = rg_bin()
    got = alternate(
        {
            "grep": lambda: memory.grep(RARE_WORD, max_results=5),
            "rg": lambda: subprocess.run([rg, "--json", RARE_WORD, "."], cwd=root, capture_output=True),
        },
        runs,
    )
    row("grep, 5 results", got["grep"], "rg --json", got["rg"], "grep")
    target = next(iter(sorted((root / "topics").glob("*.md"))))
    rel = f"topics/{target.name}"
    got = alternate({"read": lambda: memory.read(rel, max_tokens=1000), "bytes": lambda: target.read_bytes()}, runs)
    row("read, 1,000 tokens", got["read"], "reading the file's bytes", got["bytes"])
    scratch_note = root / "sessions" / "bench-note.md"
    note = memory.note("the bench wrote this line")
    data = (root / note.path).read_bytes()
    got = alternate(
        {"note": lambda: memory.note("the bench wrote this line"), "write": lambda: atomic_write(scratch_note, data)},
        runs,
    )
    row("note", got["note"], "atomic write of the same bytes", got["write"])
    after_note = []
    walked = []
    for _ in range(runs):  # a write moves the rows' state: the next context is made again, not kept
        memory.note("the bench wrote this line")
        after_note.append(timed(memory.context, 1))
        walked.append(timed(lambda: stat_walk(root), 1))
    row(
        "context right after a note (made again)",
        statistics.median(after_note),
        "stat walk of the files",
        statistics.median(walked),
        "context",
    )
    (root / note.path).unlink()
    scratch_note.unlink(missing_ok=True)
    memory.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{scratch}{suffix}").unlink(missing_ok=True)

    one, baseline = one_more_note(max(1000, files // 10) if files > 10000 else files)
    row("consolidate one more note", one, "read + split every document", baseline)

    empty = Path(tempfile.mkdtemp()) / "empty"
    Memory.init(empty)
    cli_ls(empty)
    cli_ls(root)
    samples: dict[str, list[float]] = {"n": [], "empty": []}
    for _ in range(max(3, runs // 2)):
        samples["n"].append(cli_ls(root))
        samples["empty"].append(cli_ls(empty))
    shutil.rmtree(empty.parent, ignore_errors=True)
    row(
        "CLI `fsmem ls --max-results 5`",
        statistics.median(samples["n"]),
        "the same, empty memory",
        statistics.median(samples["empty"]),
        "CLI ls",
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=os.environ.get("BENCH_ANSWER_SIZES", "1000,10000,100000"))
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "9")))
    args, _ = parser.parse_known_args()
    compiled()
    before = load()
    rows: list[list[str]] = []
    growth: dict[str, dict[int, float]] = {}
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for files in sizes:
        measure(files, args.runs, rows, growth)
        print(f"({files:,} files measured; {load()})", file=sys.stderr, flush=True)
    print(f"({os.cpu_count()} cores; {before} before, {load()} after)")
    print(
        table(
            "a long-lived Memory: each call beside its limit",
            ["files", "call", "fsmem", "limit", "limit time", "ratio", "target"],
            rows,
        )
    )
    steps = []
    for call, by_size in growth.items():
        known = sorted(by_size)
        for small, big in zip(known, known[1:], strict=False):
            steps.append(
                [
                    call,
                    f"{small:,} -> {big:,}",
                    f"{by_size[big] / by_size[small]:.2f}x",
                    "<= 3x" if call in ("ls", "context") else "",
                ]
            )
    print(table("growth of each call's time as the memory grows", ["call", "files", "growth", "target"], steps))


if __name__ == "__main__":
    main()
