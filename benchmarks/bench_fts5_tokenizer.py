"""What an FTS5 tokenizer doing fsmem's analysis would save a first search, in one process: a prototype measured.

    python benchmarks/bench_fts5_tokenizer.py --root /work/wt/corpus-10k [--runs 3]

docs/performance.md ("The first command on a fresh copy") asked whether the workers of a cold build should send
each row's raw text and let SQLite cut it while it writes, through a tokenizer in C doing fsmem's analysis
(`fsmem.search.analyzer`), rather than the rows' stems joined by spaces that the `ascii` tokenizer cuts again.
This runs both ways over the same files held in memory (their reading is the same either way), alternating:

- today: each file parsed (`parse_file`: its rows' stems, its terms and the document's counts), each task of 50
  files pickled and unpickled (what the workers send), the rows, contexts and names inserted into FTS5 tables as
  the index makes them (`tokenize='ascii'`), 500 files a transaction;
- the prototype: the same, but the analyzer hands back each text as it is (no stems, terms or counts), and the
  tables cut with `benchmarks/fts5_analyzer_prototype.c` (built here with gcc as a SQLite extension), whose
  word -> stem table is filled beforehand from an analyzer that has seen the corpus.

The prototype is the least such a tokenizer could cost: no word stemmed, no document counted, no Unicode word
cut (an integrated one would do all three somewhere), so its saving is an upper bound. CPU is this thread's
(`time.thread_time`); both builds' tables are compared through fts5vocab ('instance': every term, row, column
and position), which must be equal where no word was missing from the table.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import apsw
from common import load

from fsmem.search import parsing
from fsmem.search.analyzer import Analyzer

HERE = Path(__file__).resolve().parent
TASK_FILES, BATCH_FILES = 50, 500  # fsmem.search.index's worker task and write transaction
SCHEMA = """
CREATE VIRTUAL TABLE fts USING fts5 (text, context, content='', contentless_delete=1, detail=full, tokenize='{0}');
CREATE VIRTUAL TABLE doc_names USING fts5 (names, content='', contentless_delete=1, detail=full, tokenize='{0}');
"""


class RawAnalyzer(Analyzer):
    """Hands every text back as it is: what workers would send if SQLite's tokenizer did the analysis."""

    def text(self, text: str) -> str:
        return text

    def texts(self, texts, terms=None, counts=None):  # noqa: ANN001, ANN201 - Analyzer.texts' own
        return list(texts)


def built_extension(out: Path) -> Path:
    library = out / "fts5_analyzer_prototype.so"
    subprocess.run(
        ["gcc", "-O2", "-fPIC", "-shared", str(HERE / "fts5_analyzer_prototype.c"), "-o", str(library)], check=True
    )
    return library


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


def build(
    db: Path, files, analyzer: Analyzer, tokenizer: str, library: Path | None, table, counted: bool = False
) -> tuple[dict[str, float], dict[str, tuple]]:
    """One build's CPU by stage: parsing, pickling and unpickling each task, writing the FTS5 rows; and each
    file's document as counted (`postings.Counted`'s length, terms and counts) where it was: by the parse, or
    with `counted` by the tokenizer as it cuts each file's rows (then the vocabulary is gathered from them)."""
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536")
    if library is not None:
        conn.enable_load_extension(True)
        conn.load_extension(str(library), "sqlite3_fsmemproto_init")
        conn.enable_load_extension(False)
        for _row in conn.executemany("SELECT fsmem_proto_put(?, ?)", table.items()):
            pass
    conn.execute(SCHEMA.format(tokenizer))
    for table_name in ("fts", "doc_names"):
        conn.execute(f"INSERT INTO {table_name}({table_name}, rank) VALUES ('automerge', 0)")
    spent = dict.fromkeys(("parse", "send", "write"), 0.0)
    documents: dict[str, tuple] = {}
    vocabulary: set[str] = set()
    if counted:
        conn.execute("SELECT fsmem_proto_counting(1)")
    fid = 0
    for start in range(0, len(files), BATCH_FILES):
        conn.execute("BEGIN")
        for task_start in range(start, min(start + BATCH_FILES, len(files)), TASK_FILES):
            clock = time.thread_time()
            task = parsing.ParsedTask(
                [
                    parsing.parse_file(rel, text, stamp, analyzer)
                    for rel, text, stamp in files[task_start:][:TASK_FILES]
                ],
                None,
            )
            parsed_at = time.thread_time()
            task = pickle.loads(pickle.dumps(task))
            sent_at = time.thread_time()
            rows, names = [], []
            for item in task.files:
                base = fid << 6
                file_rows = [(base + n, t, c) for n, (t, c) in enumerate(zip(item.texts, item.contexts, strict=True))]
                if counted:  # each file's rows, then what the tokenizer counted of them
                    conn.executemany("INSERT INTO fts (rowid, text, context) VALUES (?, ?, ?)", file_rows)
                    (blob,) = conn.execute("SELECT fsmem_proto_take()").fetchone()
                    cut = blob.index(0)
                    found = blob[:cut].decode()
                    vocabulary.update(found.split())
                    item.counted = [(0, 0, found, blob[cut + 1 :])] if found else []
                else:
                    rows += file_rows
                documents[item.path] = item.counted
                if item.names:
                    names.append((fid, item.names))
                fid += (len(item.texts) >> 6) + 1
            conn.executemany("INSERT INTO fts (rowid, text, context) VALUES (?, ?, ?)", rows)
            conn.executemany("INSERT INTO doc_names (rowid, names) VALUES (?, ?)", names)
            written_at = time.thread_time()
            spent["parse"] += parsed_at - clock
            spent["send"] += sent_at - parsed_at
            spent["write"] += written_at - sent_at
        clock = time.thread_time()
        conn.execute("COMMIT")
        spent["write"] += time.thread_time() - clock
    if library is not None:
        spent["misses"] = conn.execute("SELECT fsmem_proto_misses()").fetchone()[0]
    conn.close()
    return spent, documents


def dump(db: Path, library: Path | None) -> tuple[int, int]:
    """A hash and a count of every (term, row, column, position) of both tables."""
    conn = apsw.Connection(str(db))
    if library is not None:  # the tables need their tokenizer registered to be opened
        conn.enable_load_extension(True)
        conn.load_extension(str(library), "sqlite3_fsmemproto_init")
    total, digest = 0, 0
    for table_name in ("fts", "doc_names"):
        conn.execute(f"CREATE VIRTUAL TABLE temp.v_{table_name} USING fts5vocab(main, {table_name}, 'instance')")
        for row in conn.execute(f"SELECT term, doc, col, offset FROM temp.v_{table_name}"):
            digest ^= hash(row)
            total += 1
    conn.close()
    return digest, total


def _counts(docs) -> dict[str, int]:
    from array import array

    if not docs:
        return {}
    _n, _length, terms, packed = docs[0]
    return dict(zip(terms.split(), array("I", packed), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--counted", action="store_true", help="the tokenizer counts each file's document too")
    args = parser.parse_args()
    files = corpus_texts(args.root)
    work = Path(tempfile.mkdtemp(prefix="fts5-tokenizer-"))
    library = built_extension(work)
    warm, raw = Analyzer(), RawAnalyzer()
    clock = time.thread_time()
    for rel, text, stamp in files:  # every word's stem computed once, as a first search's workers do
        parsing.parse_file(rel, text, stamp, warm)
    print(f"{len(files)} files; a cold analyzer's first pass {time.thread_time() - clock:.2f} s of CPU")
    print(f"{load()}")
    results: dict[str, list[dict[str, float]]] = {"today": [], "prototype": []}
    for run in range(args.runs):
        for name in ("today", "prototype") if run % 2 == 0 else ("prototype", "today"):
            db = work / f"{name}-{run}.sqlite"
            if name == "today":
                spent, today = build(db, files, warm, "ascii", None, None)
            else:
                spent, counted = build(db, files, raw, "fsmemproto", library, warm._table, args.counted)
            results[name].append(spent)
            stages = " ".join(f"{k} {v:.2f}" for k, v in spent.items() if k != "misses")
            print(
                f"run {run} {name}: {sum(v for k, v in spent.items() if k != 'misses'):.2f} s ({stages})"
                f"{' misses ' + str(spent['misses']) if 'misses' in spent else ''}",
                flush=True,
            )
    print(f"{load()}")
    for name, runs in results.items():
        for stage in ("parse", "send", "write"):
            values = sorted(r[stage] for r in runs)
            print(f"{name} {stage}: median {values[len(values) // 2]:.3f} s")
        totals = sorted(sum(r[s] for s in ("parse", "send", "write")) for r in runs)
        print(f"{name} total: median {totals[len(totals) // 2]:.3f} s")
    same = dump(work / "today-0.sqlite", None) == dump(work / "prototype-0.sqlite", library)
    print(f"the same terms, rows, columns and positions: {same}")
    if args.counted:
        plain = [p for p, docs in today.items() if docs is None or len(docs) <= 1]
        alike = sum(_counts(today[p]) == _counts(counted[p]) for p in plain)
        print(f"files of one document (or none) counted alike by the tokenizer: {alike} of {len(plain)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
