"""A cold build's rows cut by SQLite (fsmem.search.raw_rows) against the workers' stems, in one process, alternating.

    python benchmarks/bench_fts5_tokenizer.py --root /work/wt/corpus-10k [--runs 4]
    python benchmarks/bench_fts5_tokenizer.py --root /work/wt/corpus-10k --build [--runs 4]   # a whole build

The workers of a cold build sent each row's stems, joined by spaces, which FTS5's `ascii` cut again; they now
send most rows as the files have them, and the writing connection cuts them with the native module's tokenizer
doing the analyzer's work, counting each file's document as it goes. This runs both ways over the same files held
in memory (their reading is the same either way), each with an analyzer that starts empty, as a worker's does:

- stems: each file parsed (`parse_file`: its rows' stems, its terms and the document's counts), each task of 50
  files pickled and unpickled (what the workers send), the rows, contexts and names inserted into FTS5 tables as
  the index makes them (`tokenize='ascii'`), 500 files a transaction;
- raw: the same with `parse_file(raw=True)`, on a connection with the cutter (`raw_rows.register`): each raw
  file's rows inserted, then its document taken (`raw_rows.take`), as `fsmem.search.tables` does.

With `--build`, a whole first build instead (`SearchIndex.refresh` and its merge, its workers included) on a
fresh copy, in a process of its own, the cutter on and off (`raw_rows.register` refusing), alternating: the CPU
of the process and of its workers (`getrusage`). Otherwise CPU is this thread's (`time.thread_time`). Both builds' tables are compared through fts5vocab ('instance': every
term, row, column and position) and every file's document as counted (its length, terms and counts).
A first prototype (commit 25c6fb9: a C tokenizer whose table of stems was filled beforehand) measured 4.97 s
against 3.80 s here (2026-12-08, load 9.1-13.7).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

import apsw
from common import load

from fsmem.search import parsing, raw_rows
from fsmem.search.analyzer import Analyzer

TASK_FILES, BATCH_FILES = 50, 500  # fsmem.search.index's worker task and write transaction
SCHEMA = """
CREATE VIRTUAL TABLE fts USING fts5 (text, context, content='', contentless_delete=1, detail=full, tokenize='ascii');
CREATE VIRTUAL TABLE doc_names USING fts5 (names, content='', contentless_delete=1, detail=full, tokenize='ascii');
"""
INSERT = "INSERT INTO fts (rowid, text, context) VALUES (?, ?, ?)"


BUILD = """
import resource, sys
from pathlib import Path
from fsmem.search import index, raw_rows
if sys.argv[2] == "stems":
    raw_rows.register = lambda conn: False
built = index.SearchIndex(Path(sys.argv[1]))
built.refresh()
built.wait_merged()
own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(own.ru_utime + own.ru_stime, workers.ru_utime + workers.ru_stime)
"""


def whole_builds(root: Path, runs: int) -> None:
    """A first build's CPU (the command's, its workers'), with and without the cutter, alternating."""
    found: dict[str, list[tuple[float, float]]] = {"stems": [], "raw": []}
    print(load(), flush=True)
    for run in range(runs):
        for name in ("stems", "raw") if run % 2 == 0 else ("raw", "stems"):
            copy = Path(tempfile.mkdtemp(prefix="fts5-tokenizer-")) / "memory"
            subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
            subprocess.run(["chmod", "-R", "u+w", str(copy)], check=True)
            shutil.rmtree(copy / ".fsmem", ignore_errors=True)
            done = subprocess.run(
                [sys.executable, "-c", BUILD, str(copy), name], capture_output=True, text=True, check=True
            )
            shutil.rmtree(copy.parent)
            own, workers = map(float, done.stdout.split())
            found[name].append((own, workers))
            print(f"run {run} {name}: {own + workers:.2f} s (command {own:.2f}, workers {workers:.2f})", flush=True)
    print(load())
    for name, values in found.items():
        middle = len(values) // 2
        total = sorted(a + b for a, b in values)[middle]
        own = sorted(a for a, _ in values)[middle]
        workers = sorted(b for _, b in values)[middle]
        print(f"{name}: median {total:.2f} s (command {own:.2f}, workers {workers:.2f})")


def corpus_texts(root: Path) -> list[tuple[str, str, parsing.Stamp]]:
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".md"):
                full = os.path.join(folder, name)
                with open(full, "rb") as handle:
                    data = handle.read()
                text, _problems = parsing.fmt.decode(data)
                found.append((os.path.relpath(full, root), text, parsing.stamp_of(os.stat(full))))
    return found


def build(db: Path, files, raw: bool) -> tuple[dict[str, float], dict[str, dict[str, int]]]:
    """One build's CPU by stage (parsing, pickling and unpickling each task, writing the FTS5 rows), and each
    file's document as counted, by its path."""
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536")
    if raw and not raw_rows.register(conn):
        raise SystemExit("the native module cuts no raw rows here")
    conn.execute(SCHEMA)
    for table in ("fts", "doc_names"):
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
    analyzer = Analyzer()
    spent = dict.fromkeys(("parse", "send", "write"), 0.0)
    documents: dict[str, dict[str, int]] = {}
    fid = 0
    for start in range(0, len(files), BATCH_FILES):
        conn.execute("BEGIN")
        for task_start in range(start, min(start + BATCH_FILES, len(files)), TASK_FILES):
            clock = time.thread_time()
            chunk = files[task_start:][:TASK_FILES]
            task = parsing.ParsedTask([parsing.parse_file(r, t, s, analyzer, raw=raw) for r, t, s in chunk], None)
            parsed_at = time.thread_time()
            task = pickle.loads(pickle.dumps(task))
            sent_at = time.thread_time()
            rows, names = [], []
            for item in task.files:
                file_rows = [(fid << 6) + n for n in range(len(item.texts))]
                if item.raw:  # rows in row id order: the files' before it first
                    conn.executemany(INSERT, rows)
                    conn.executemany(INSERT, zip(file_rows, item.texts, item.contexts, strict=True))
                    rows, (_values, document, _terms) = [], raw_rows.take(conn)
                    item.counted = [document] if document else []
                else:
                    rows += zip(file_rows, item.texts, item.contexts, strict=True)
                documents[item.path] = _counts(item.counted)
                if item.names:
                    names.append((fid, item.names))
                fid += (len(item.texts) >> 6) + 1
            conn.executemany(INSERT, rows)
            conn.executemany("INSERT INTO doc_names (rowid, names) VALUES (?, ?)", names)
            written_at = time.thread_time()
            spent["parse"] += parsed_at - clock
            spent["send"] += sent_at - parsed_at
            spent["write"] += written_at - sent_at
        clock = time.thread_time()
        conn.execute("COMMIT")
        spent["write"] += time.thread_time() - clock
    conn.close()
    return spent, documents


def _counts(docs) -> dict[str, int]:
    """A file's documents as counted: term (by document) -> count, and each document's length."""
    found: dict[str, int] = {}
    for n, length, terms, packed in docs or ():
        found[f"{n} length"] = length
        found.update({f"{n} {term}": count for term, count in zip(terms.split(), array("I", packed), strict=True)})
    return found


def dump(db: Path) -> tuple[int, int]:
    """A hash and a count of every (term, row, column, position) of both tables."""
    conn = apsw.Connection(str(db))
    total, digest = 0, 0
    for table in ("fts", "doc_names"):
        conn.execute(f"CREATE VIRTUAL TABLE temp.v_{table} USING fts5vocab(main, {table}, 'instance')")
        for row in conn.execute(f"SELECT term, doc, col, offset FROM temp.v_{table}"):
            digest ^= hash(row)
            total += 1
    conn.close()
    return digest, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--build", action="store_true", help="whole first builds, each in a process of its own")
    args = parser.parse_args()
    if args.build:
        whole_builds(args.root, args.runs)
        return
    files = corpus_texts(args.root)
    work = Path(tempfile.mkdtemp(prefix="fts5-tokenizer-"))
    print(f"{len(files)} files; {load()}", flush=True)
    results: dict[str, list[dict[str, float]]] = {"stems": [], "raw": []}
    counted: dict[str, dict] = {}
    for run in range(args.runs):
        for name in ("stems", "raw") if run % 2 == 0 else ("raw", "stems"):
            spent, counted[name] = build(work / f"{name}-{run}.sqlite", files, name == "raw")
            results[name].append(spent)
            stages = " ".join(f"{k} {v:.2f}" for k, v in spent.items())
            print(f"run {run} {name}: {sum(spent.values()):.2f} s ({stages})", flush=True)
    print(load())
    for name, runs in results.items():
        medians = {stage: sorted(r[stage] for r in runs)[len(runs) // 2] for stage in ("parse", "send", "write")}
        total = sorted(sum(r.values()) for r in runs)[len(runs) // 2]
        print(f"{name}: median {total:.3f} s ({' '.join(f'{k} {v:.3f}' for k, v in medians.items())})")
    print(
        f"the same terms, rows, columns and positions: {dump(work / 'stems-0.sqlite') == dump(work / 'raw-0.sqlite')}"
    )
    print(f"every file's document counted alike: {counted['stems'] == counted['raw']}")


if __name__ == "__main__":
    main()
