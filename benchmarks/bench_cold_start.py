"""The first `fsmem search` on a fresh copy, measured from outside, against a bare SQLite FTS5 build of the same lines.

    python benchmarks/bench_cold_start.py [--sizes 10000] [--runs 1] [--root DIR]
    python benchmarks/bench_cold_start.py --sizes 100000 --root /work/wt/corpus-100k   # minutes
    python benchmarks/bench_cold_start.py --root DIR --first-only   # the first search and the bare build alone
    python benchmarks/bench_cold_start.py --old main   # and an earlier revision's first search, in the same run
    python benchmarks/bench_cold_start.py --root DIR --parse-only --old main   # the workers' part, both revisions
    python benchmarks/bench_cold_start.py --root DIR --write-only --old main   # the command's writing, both revisions
    python benchmarks/bench_cold_start.py --root DIR --timeline   # where the first search's wall goes
    python benchmarks/bench_cold_start.py --root DIR --same-index --old main   # both revisions build the same tables
    python benchmarks/bench_cold_start.py --root DIR --interrupted --runs 3 [--old main]   # a whole build, one killed, the next

A user who clones a memory and asks it something waits for `fsmem --root COPY search QUERY`: every file read,
split into rows, stemmed and written into the search index. What they could run instead is a bare FTS5 build
(apsw, `tokenize='porter unicode61'`, SQLite's tokenizer in C) of the same files' non-empty lines, one
transaction. Both run on a fresh copy (`cp -a`, `chmod -R u+w`), alternating, in the same run; wall and CPU
(user + sys of the process and the workers it waited for, from wait4). Then:

- interrupted at half: `fsmem search` killed (SIGKILL, FSMEM_BUILD_KILL_AT) after half the files were
  committed, and the next `fsmem search` timed: it must take at most what the whole build took minus the
  killed run's time;
- disk: `.fsmem/` after the search, after `fsmem ls` (the metadata cache) and with a long-lived process's grep
  word index beside them (`fsmem.query.grep_words`), against the bytes of the Markdown.
Target (issue #34): the first search at most 2x the bare build, the `.fsmem/` of all three at most 1x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, compiled, corpus, fsmem_bin, load, old_package, table

QUERY = "renewal date for Acme Corp"
BATCH_FILES = 500  # fsmem.search.index.BATCH_FILES: the kill lands on a committed batch

BARE_BUILD = """
import os, sys
import apsw
root, db = sys.argv[1], sys.argv[2]
conn = apsw.Connection(db)
conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
conn.execute("CREATE VIRTUAL TABLE lines USING fts5(text, content='', tokenize='porter unicode61')")
conn.execute("BEGIN")
for folder, dirs, files in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in sorted(files):
        if name.endswith(".md"):
            with open(os.path.join(folder, name), "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
            conn.executemany("INSERT INTO lines (text) VALUES (?)", [(l,) for l in text.splitlines() if l.strip()])
conn.execute("COMMIT")
"""

PARSE = """
import os, sys, time
from fsmem.search.parsing import parse_files
root = sys.argv[1]
files = []
for folder, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    files += [(os.path.relpath(os.path.join(folder, n), root), os.path.join(folder, n)) for n in sorted(names) if n.endswith(".md")]
parse_files((root, files))
"""

WRITE = """
import os, sys, time
from pathlib import Path
from fsmem.search import index
from fsmem.search.parsing import parse_files
root = Path(sys.argv[1])
files = []
for folder, dirs, names in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    files += [(os.path.relpath(os.path.join(folder, n), root), os.path.join(folder, n)) for n in sorted(names) if n.endswith(".md")]
parsed = parse_files((str(root), files))
parsed = {p.path: p for p in getattr(parsed, "files", parsed)}  # a ParsedTask's files (an older revision: a list)
index.read_file = lambda _root, rel, _full, _analyzer, **_given: parsed.get(rel)  # the build's files, parsed already
started = time.process_time()
index.SearchIndex(root).refresh()
print(time.process_time() - started)
"""

TIMELINE = """
import os, sys, time
started = time.perf_counter()
marks = []
def mark(what):
    marks.append((time.perf_counter() - started, time.process_time(), what))
from fsmem.search import index
from fsmem import cli
mark("imported")
batches, merge, refresh = index._parsed_batches, index.merge_segments, index.SearchIndex.refresh
waited = []  # per batch: how long the command waited for its parsed files (each task's, or the whole batch's)
def tasks(batch):
    while True:
        at = time.perf_counter()
        try:
            parsed = next(batch)
        except StopIteration:
            return
        waited[-1] += time.perf_counter() - at
        yield parsed
def timed_batches(*args, **kwargs):  # when the command has each batch's files and how long it waited for them
    found = batches(*args, **kwargs)
    while True:
        at = time.perf_counter()
        try:
            batch = next(found)
        except StopIteration:
            return
        waited.append(time.perf_counter() - at)
        mark(f"writes batch {len(waited)}")
        if isinstance(batch, list):  # a batch in one list (the code before 'tasks as they come')
            yield batch
        else:
            yield tasks(batch)
        mark(f"wrote batch {len(waited)}, after waiting {waited[-1]:.2f} s for its files")
def timed_merge(conn):
    mark("merges")
    merge(conn)
    mark("merged")
def timed_refresh(self):
    mark("refreshes")
    try:
        return refresh(self)
    finally:
        mark("refreshed")
index._parsed_batches, index.merge_segments, index.SearchIndex.refresh = timed_batches, timed_merge, timed_refresh
wait_merged = getattr(index.SearchIndex, "wait_merged", None)
if wait_merged is not None:  # the merge runs behind the answer: when the answer was done and waited for it
    def timed_wait(self):
        merging = getattr(self, "_merging", None)
        if merging is None or not merging.is_alive():
            return wait_merged(self)
        mark("answer done, waits for the merge")
        wait_merged(self)
        mark("the merge done")
    index.SearchIndex.wait_merged = timed_wait
sys.argv = ["fsmem", "--root", sys.argv[1], "search", "renewal date for Acme Corp"]
try:
    cli.main()
except SystemExit:
    pass
mark("answered")
for wall, cpu, what in marks:
    print(f"{wall:7.2f} {cpu:7.2f} {what}", file=sys.stderr)
"""

GREP_WORDS = """
import sys
from fsmem import Memory
from fsmem.query import grep_words
memory = Memory(sys.argv[1])
memory.ls(max_results=1)
memory.ls(max_results=1)  # a second call: the change feed runs, as in `fsmem watch` or `fsmem serve`
index = grep_words.caught_up(memory.root)
assert index is not None, "no trusted change feed: no word index"
index.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
memory.close()
"""


def run(argv: list[str], env: dict[str, str] | None = None, killed: bool = False) -> tuple[float, float]:
    """(wall s, CPU s) of one process and the children it waited for."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if (code != -9) if killed else (code not in (0, 1) or "Traceback" in err):
        raise SystemExit(f"{' '.join(argv)} exited {code}: {err[:500]}")
    return wall, usage.ru_utime + usage.ru_stime


def fresh_copy(source: Path, name: str) -> Path:
    target = OUT / "cold-start" / f"{source.name}-{name}"
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    subprocess.run(["chmod", "-R", "u+w", str(target)], check=True)
    shutil.rmtree(target / ".fsmem", ignore_errors=True)
    return target


def markdown(root: Path) -> tuple[int, int]:
    """(files, bytes) of the Markdown under `root`."""
    files = size = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.endswith(".md"):
                files += 1
                size += os.path.getsize(os.path.join(folder, name))
    return files, size


def state_bytes(root: Path) -> int:
    state = root / ".fsmem"
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(state) for f in names)


def checkpointed(root: Path) -> None:
    """Fold the WAL into the database, as the next command's close does, so sizes count pages once."""
    import apsw

    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "10000"))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--root", type=Path, help="a ready corpus to copy (default: the benchmark corpus)")
    parser.add_argument("--old", help="a revision (or a folder holding an fsmem package) to time beside")
    parser.add_argument("--first-only", action="store_true", help="the first search and the bare build alone")
    parser.add_argument(
        "--parse-only",
        action="store_true",
        help="what the build's workers do (read and parse every file), in one process",
    )
    parser.add_argument(
        "--write-only",
        action="store_true",
        help="what the command does with the parsed files (writing the index), in one process",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="when the first search's command waits for its workers, writes, merges and answers",
    )
    parser.add_argument(
        "--interrupted",
        action="store_true",
        help="per run, one after the other: a whole build, a build killed at half, the next search (one load each)",
    )
    parser.add_argument(
        "--same-index",
        action="store_true",
        help="build the index with this tree and with --old and compare a dump of every search table",
    )
    args, _ = parser.parse_known_args()
    # this tree's bytecode written first, as an installed package has it and as `--old` is (`old_package`): with
    # PYTHONDONTWRITEBYTECODE set, each command of this tree compiled some 50 modules (10k files: 0.08-0.09 s of
    # CPU before its walk)
    compiled()
    fsmem = fsmem_bin()
    old_env = None
    if args.old:
        # PYTHONSAFEPATH: `python -m fsmem` run from this checkout put it first on sys.path, ahead of
        # PYTHONPATH, and the "earlier revision" was this tree's fsmem
        old_env = {"PYTHONPATH": str(old_package(args.old, OUT / "cold-start-old")), "PYTHONSAFEPATH": "1"}
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for size in sizes[:1] if args.root else sizes:
        source = args.root or corpus(size)
        files, md_bytes = markdown(source)
        before = load()
        if args.parse_only:
            parse_times(source, files, args.runs, old_env, args.old, before)
            continue
        if args.write_only:
            write_times(source, files, args.runs, old_env, args.old, before)
            continue
        if args.same_index:
            if old_env is None:
                raise SystemExit("--same-index compares with --old REV")
            same_index(source, fsmem, old_env)
            continue
        if args.timeline:
            timeline(source, files, before)
            continue
        if args.interrupted:
            interrupted(source, files, fsmem, args.runs, before, old_env, args.old)
            continue
        ours, bare, old = [], [], []
        for _ in range(args.runs):  # alternating, each on a fresh copy
            copy = fresh_copy(source, "fsmem")
            ours.append(run([fsmem, "--root", str(copy), "search", QUERY]))
            shutil.rmtree(copy)
            if old_env is not None:
                copy = fresh_copy(source, "old")
                old.append(run([sys.executable, "-m", "fsmem", "--root", str(copy), "search", QUERY], old_env))
                shutil.rmtree(copy)
            copy = fresh_copy(source, "bare")
            bare.append(run([sys.executable, "-c", BARE_BUILD, str(copy), str(copy / "bare.sqlite")]))
            shutil.rmtree(copy)
        wall, cpu = min(w for w, _ in ours), min(c for _, c in ours)
        bare_wall, bare_cpu = min(w for w, _ in bare), min(c for _, c in bare)
        print(f"({files:,} files, {md_bytes / 1e6:.0f} MB of Markdown; {before} before, {load()} after)")
        for label, times in (("fsmem", ours), (f"--old {args.old}", old), ("bare build", bare)):
            if times:  # each run's, for medians where the load moves
                cpus = sorted(c for _, c in times)
                print(f"{label}: CPU median {cpus[len(cpus) // 2]:.2f} s of {', '.join(f'{c:.2f}' for c in cpus)}")
        print(
            table(
                f"first `fsmem search` on a fresh copy, {files:,} files (best of {args.runs})",
                ["", "fsmem", "bare FTS5 build (porter unicode61)", "ratio", "target"],
                [
                    ["wall", f"{wall:.1f} s", f"{bare_wall:.1f} s", f"{wall / bare_wall:.2f}x", "<= 2x"],
                    ["CPU (with workers)", f"{cpu:.1f} s", f"{bare_cpu:.1f} s", f"{cpu / bare_cpu:.2f}x", ""],
                ]
                + [
                    [f"{label}, {args.old}", f"{value:.1f} s", f"{base:.1f} s", f"{value / base:.2f}x", ""]
                    for label, value, base in (
                        (("wall", min(w for w, _ in old), bare_wall), ("CPU", min(c for _, c in old), bare_cpu))
                        if old
                        else ()
                    )
                ],
            )
        )
        if args.first_only:
            continue
        whole = wall
        half = fresh_copy(source, "half")
        killed, rest = killed_then_next([fsmem], half, files)
        checkpointed(half)
        after_search = state_bytes(half)
        run([fsmem, "--root", str(half), "ls", "--max-results", "1"])
        checkpointed(half)
        after_ls = state_bytes(half)
        run([sys.executable, "-c", GREP_WORDS, str(half)])
        checkpointed(half)
        after_words = state_bytes(half)
        shutil.rmtree(half)
        print(
            table(
                "interrupted at half (SIGKILL after half the files committed), then the next `fsmem search`",
                ["killed run", "next run", "whole build minus killed run", "ratio", "target"],
                [
                    [
                        f"{killed[0]:.1f} s",
                        f"{rest[0]:.1f} s",
                        f"{whole - killed[0]:.1f} s",
                        f"{rest[0] / max(whole - killed[0], 1e-9):.2f}x",
                        "<= 1x",
                    ]
                ],
            )
        )
        print(
            table(
                f"`.fsmem/` against the Markdown ({md_bytes / 1e6:.0f} MB)",
                ["after", "size", "ratio", "target"],
                [
                    ["search", f"{after_search / 1e6:.0f} MB", f"{after_search / md_bytes:.2f}x", ""],
                    ["search, ls", f"{after_ls / 1e6:.0f} MB", f"{after_ls / md_bytes:.2f}x", ""],
                    [
                        "search, ls, grep word index",
                        f"{after_words / 1e6:.0f} MB",
                        f"{after_words / md_bytes:.2f}x",
                        "<= 1x",
                    ],
                ],
            )
        )


def parse_times(
    source: Path, files: int, runs: int, old_env: dict[str, str] | None, old: str | None, before: str
) -> None:
    """The CPU of reading and parsing every file as the build's workers do (`parse_files`), in one process,
    this tree's and `old`'s alternating: the part of the first search that is Python, without the writing."""
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(run([sys.executable, "-c", PARSE, str(source)])[1])
        if old_env is not None:
            theirs.append(run([sys.executable, "-c", PARSE, str(source)], old_env)[1])
    print(f"({files:,} files; {before} before, {load()} after)")
    rows = [["this tree", f"{min(ours):.1f} s", ""]]
    if theirs:
        rows.append([str(old), f"{min(theirs):.1f} s", f"{min(ours) / min(theirs):.2f}x"])
    print(table(f"reading and parsing every file in one process (CPU, best of {runs})", ["", "CPU", "ratio"], rows))


def write_times(
    source: Path, files: int, runs: int, old_env: dict[str, str] | None, old: str | None, before: str
) -> None:
    """The CPU of writing every file's parsed rows into a new search index (the command's side of a build, its
    segments merged), in one process that parsed them first, untimed; this tree's and `old`'s alternating."""

    def timed(env: dict[str, str] | None) -> float:
        copy = fresh_copy(source, "write")
        done = subprocess.run(
            [sys.executable, "-c", WRITE, str(copy)],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {}), "FSMEM_WORKERS": "1"},  # the files parsed already, in this process
        )
        shutil.rmtree(copy)
        if done.returncode:
            raise SystemExit(f"the write-only run exited {done.returncode}: {done.stderr[-500:]}")
        return float(done.stdout.split()[-1])

    ours, theirs = [], []
    for _ in range(runs):
        ours.append(timed(None))
        if old_env is not None:
            theirs.append(timed(old_env))
    print(f"({files:,} files; {before} before, {load()} after)")
    rows = [["this tree", f"{min(ours):.1f} s", ""]]
    if theirs:
        rows.append([str(old), f"{min(theirs):.1f} s", f"{min(ours) / min(theirs):.2f}x"])
    print(
        table(
            f"writing every parsed file into a new index in one process (CPU, best of {runs})",
            ["", "CPU", "ratio"],
            rows,
        )
    )


def killed_then_next(
    argv: list[str], copy: Path, files: int, env: dict[str, str] | None = None
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(wall, CPU) of a first search on `copy` killed (SIGKILL) once half its batches were committed, and of
    the next search, on what it left; `argv` runs fsmem (with `env`)."""
    kill_at = f"search-committed:{max(1, files // BATCH_FILES // 2)}"
    search = [*argv, "--root", str(copy), "search", QUERY]
    killed = run(search, {**(env or {}), "FSMEM_BUILD_KILL_AT": kill_at}, killed=True)
    return killed, run(search, env)


def interrupted(
    source: Path, files: int, fsmem: str, runs: int, before: str, old_env: dict[str, str] | None, old: str | None
) -> None:
    """Per run, one right after the other so that they meet one load: a whole first search, one killed after
    half its batches were committed, and the next search on what it left; the next against the whole minus
    the killed run. With `old`, that revision's three runs follow this tree's in each run."""
    sides = [("this tree", [fsmem], None)]
    if old_env is not None:
        sides.append((str(old), [sys.executable, "-m", "fsmem"], old_env))
    rows = []
    for _ in range(runs):
        for name, argv, env in sides:
            copy = fresh_copy(source, "whole")
            whole = run([*argv, "--root", str(copy), "search", QUERY], env)[0]
            shutil.rmtree(copy)
            half = fresh_copy(source, "half")
            killed, rest = (wall for wall, _cpu in killed_then_next(argv, half, files, env))
            shutil.rmtree(half)
            left = max(whole - killed, 1e-9)
            rows.append(
                [name, f"{whole:.2f} s", f"{killed:.2f} s", f"{rest:.2f} s", f"{left:.2f} s", f"{rest / left:.2f}x"]
            )
    print(f"({files:,} files; {before} before, {load()} after)")
    print(
        table(
            "a whole build, one killed at half (SIGKILL after half the files committed), the next `fsmem search`",
            ["", "whole build", "killed run", "next run", "whole minus killed", "ratio (<= 1x)"],
            rows,
        )
    )


DUMPS = {  # what every search table holds, in an order that does not depend on how it was written
    # a file's stamp but its inode and ctime (each copy has its own), and its mtime without the racy mark
    "search_files": "SELECT id, path, abs(mtime_ns), size, rows, docs, type, tags, updated, importance, lines, groups,"
    " sources, cited FROM search_files ORDER BY id",
    "search_superseded": "SELECT * FROM search_superseded ORDER BY id",
    "search_sources": "SELECT * FROM search_sources ORDER BY id",
    "search_terms": "SELECT * FROM search_terms ORDER BY term",
    "search_meta": "SELECT * FROM search_meta WHERE key NOT IN ('built', 'walk') ORDER BY key",
    "search_postings": "SELECT * FROM search_postings ORDER BY term, chunk",
    "search_lengths": "SELECT * FROM search_lengths ORDER BY id",
    "search_dead": "SELECT * FROM search_dead ORDER BY chunk",
    "search_fts (fts5vocab instance)": "SELECT term, doc, col, offset FROM dump_fts ORDER BY term, doc, col, offset",
    "search_fts (fts5vocab row)": "SELECT term, doc, cnt FROM dump_fts_rows ORDER BY term",
    "search_names (fts5vocab instance)": "SELECT term, doc, col, offset FROM dump_names"
    " ORDER BY term, doc, col, offset",
}


def dumped(root: Path) -> dict[str, str]:
    """table -> a digest of every row it holds (`DUMPS`): FTS5's terms, rows, columns and offsets through
    fts5vocab, fsmem's postings, lengths and file rows."""
    import hashlib

    import apsw

    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    conn.execute(
        "CREATE VIRTUAL TABLE temp.dump_fts USING fts5vocab (main, search_fts, 'instance'); "
        "CREATE VIRTUAL TABLE temp.dump_fts_rows USING fts5vocab (main, search_fts, 'row'); "
        "CREATE VIRTUAL TABLE temp.dump_names USING fts5vocab (main, search_names, 'instance')"
    )
    found = {}
    for name, sql in DUMPS.items():
        digest = hashlib.sha256()
        rows = 0
        for row in conn.execute(sql):
            digest.update(repr(row).encode())
            rows += 1
        found[name] = f"{rows} rows, {digest.hexdigest()[:16]}"
    conn.close()
    return found


def same_index(source: Path, fsmem: str, old_env: dict[str, str]) -> None:
    """The search tables of a first search by this tree and by the old revision, each on a fresh copy, dumped
    (`dumped`) and compared: a faster build must write the same index."""
    dumps = []
    for argv, env in (([fsmem], None), ([sys.executable, "-m", "fsmem"], old_env)):
        copy = fresh_copy(source, "same-index")
        run([*argv, "--root", str(copy), "search", QUERY], env)
        dumps.append(dumped(copy))
        shutil.rmtree(copy)
    rows = [
        [name, ours, "same" if ours == dumps[1][name] else f"DIFFERS: {dumps[1][name]}"]
        for name, ours in dumps[0].items()
    ]
    print(table("every search table, this tree against --old", ["table", "this tree", "--old"], rows))
    if dumps[0] != dumps[1]:
        raise SystemExit("the indexes differ")


def timeline(source: Path, files: int, before: str) -> None:
    """The first search's command in one process, with the time (wall and this process's CPU, from its start)
    of each step: the workers' batches asked for and received, the writes between, the merge and the answer."""
    copy = fresh_copy(source, "timeline")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", TIMELINE, str(copy)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    shutil.rmtree(copy)
    if done.returncode not in (0, 1):
        raise SystemExit(f"the timeline run exited {done.returncode}: {done.stderr[-500:]}")
    marks = [line.split(None, 2) for line in done.stderr.splitlines() if line[:1] == " " or line[:1].isdigit()]
    waited = sum(float(what.split()[-5]) for _at, _cpu, what in marks if what.startswith("wrote batch"))
    print(f"({files:,} files; {before} before, {load()} after; {wall:.1f} s wall from outside)")
    print("\n".join(f"{at} s  {cpu} s CPU  {what}" for at, cpu, what in marks))
    print(f"the command waited {waited:.1f} s in all for its workers' files")


if __name__ == "__main__":
    main()
