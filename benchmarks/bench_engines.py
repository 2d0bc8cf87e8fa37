"""SQLite FTS5 (what fsmem uses) against tantivy, on the same rows of the seeded corpus.

    python benchmarks/bench_engines.py [--files 10000]      # needs `pip install tantivy`; skipped without it

Both engines get the rows exactly as fsmem's index makes them (fsmem.search.index.parse_file: pre-stemmed
text and headings, the document's names once per file). Measured in one process, CPU time first:
- build: every row inserted (FTS5: fsmem's own tables and transaction; tantivy: one writer, one commit);
- size on disk;
- the row part of a query: the 1,000 best rows for the query's terms (FTS5: bm25() with fsmem's column
  weights; tantivy: its BM25 over one text+headings field, since it sums per-field scores rather than
  weighting term frequencies as BM25F does), median over the queries;
- updating one file: its rows deleted and inserted again, made durable (FTS5: one transaction in WAL mode;
  tantivy: delete by file id, add, commit), median over 20 files.
The rest of a search (neighbours, documents, subject, salience, reading the rows back) is Python on top
of either engine and costs the same.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import corpus, load, table
from corpus import SEARCH_QUERIES

QUERIES = SEARCH_QUERIES
POOL = 1000


def cpu_ms(function) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - started) * 1000


def folder_bytes(path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10000)
    args, _ = parser.parse_known_args()
    try:
        import tantivy
    except ImportError:
        print("skipped: tantivy is not installed (pip install tantivy)")
        return 0
    from fsmem.search import index as fts
    from fsmem.search.analyzer import Analyzer
    from fsmem.store.cache import connect, transaction
    from fsmem.store.catalog import walk_stats

    root = corpus(args.files)
    analyzer = Analyzer()
    files = list(walk_stats(root))
    parse_cpu, parse_wall = cpu_ms(lambda: None)
    parsed: list = []
    parse_cpu, parse_wall = cpu_ms(
        lambda: parsed.extend(fts.read_file(root, rel, full, analyzer) for rel, full, _st in files)
    )
    rows = sum(len(p.rows) for p in parsed)
    work = Path(tempfile.mkdtemp(prefix="fsmem-engines-"))
    results = []
    try:
        # -- FTS5, fsmem's tables --------------------------------------------
        db = work / "cache.sqlite"
        conn = connect(db)
        conn.execute(fts._SCHEMA)
        conn.execute("INSERT INTO search_meta VALUES ('rows', 0), ('docs', 0)")

        def fts_build():
            with transaction(conn):
                for item in parsed:
                    fts._insert(conn, item, racy=False)

        fts_build_cpu, fts_build_wall = cpu_ms(fts_build)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        fts_size = folder_bytes(work)

        def fts_query(terms):
            match = " OR ".join(f'"{t}"' for t in terms)
            return conn.execute(
                "SELECT rowid, -bm25(search_fts, 1.0, 0.5) AS s FROM search_fts WHERE search_fts MATCH ?"
                " ORDER BY s DESC, rowid LIMIT ?",
                (match, POOL),
            ).fetchall()

        # -- tantivy, the same rows ---------------------------------------------
        folder = work / "tantivy"
        folder.mkdir()
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("file", stored=False, indexed=True, fast=True)
        builder.add_integer_field("row", stored=True, indexed=False, fast=True)
        builder.add_text_field("text", stored=False, tokenizer_name="ws", index_option="position")
        builder.add_text_field("names", stored=False, tokenizer_name="ws", index_option="position")
        schema = builder.build()
        index = tantivy.Index(schema, path=str(folder))
        index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())

        def documents(number, item):
            base = number << fts.ROW_BITS
            for ordinal, (_line, _flags, _group, text, context) in enumerate(item.rows):
                yield tantivy.Document(file=number, row=base + ordinal, text=f"{text} {context}".strip())
            if item.names:
                yield tantivy.Document(file=number, row=-1, names=item.names)

        def tantivy_build():
            writer = index.writer(heap_size=128_000_000, num_threads=1)
            for number, item in enumerate(parsed, start=1):
                for document in documents(number, item):
                    writer.add_document(document)
            writer.commit()
            writer.wait_merging_threads()

        tv_build_cpu, tv_build_wall = cpu_ms(tantivy_build)
        index.reload()
        tv_size = folder_bytes(folder)

        def tantivy_query(terms):
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", t)) for t in terms]
            )
            return index.searcher().search(query, POOL).hits

        fts_q, tv_q = [], []
        for _round in range(3):
            for query in QUERIES:
                terms = list(dict.fromkeys(analyzer.terms(query)))
                fts_q.append(cpu_ms(lambda t=terms: fts_query(t)))
                tv_q.append(cpu_ms(lambda t=terms: tantivy_query(t)))

        # -- updating one file -----------------------------------------------------
        fts_u, tv_u = [], []
        for number, item in list(enumerate(parsed, start=1))[:: max(1, len(parsed) // 20)][:20]:

            def fts_update(item=item):
                with transaction(conn):
                    fts._remove(conn, item.path)
                    fts._insert(conn, item, racy=False)

            def tantivy_update(number=number, item=item):
                writer = index.writer(heap_size=15_000_000, num_threads=1)
                writer.delete_documents_by_query(tantivy.Query.term_query(schema, "file", number))
                for document in documents(number, item):
                    writer.add_document(document)
                writer.commit()
                writer.wait_merging_threads()

            fts_u.append(cpu_ms(fts_update))
            tv_u.append(cpu_ms(tantivy_update))
        conn.close()

        def med(samples, i):
            return statistics.median(s[i] for s in samples)

        results = [
            ["rows of the corpus (shared: read, split, stemmed)", f"{rows:,} rows", f"{parse_cpu / 1000:.1f} s", ""],
            ["build", "CPU / wall", f"{fts_build_cpu / 1000:.1f} / {fts_build_wall / 1000:.1f} s", f"{tv_build_cpu / 1000:.1f} / {tv_build_wall / 1000:.1f} s"],
            ["size on disk", "", f"{fts_size / 1e6:.1f} MB", f"{tv_size / 1e6:.1f} MB"],
            [f"row part of a query (top {POOL:,})", "CPU / wall, median", f"{med(fts_q, 0):.1f} / {med(fts_q, 1):.1f} ms", f"{med(tv_q, 0):.1f} / {med(tv_q, 1):.1f} ms"],
            ["update one file, durable", "CPU / wall, median", f"{med(fts_u, 0):.1f} / {med(fts_u, 1):.1f} ms", f"{med(tv_u, 0):.1f} / {med(tv_u, 1):.1f} ms"],
        ]  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        table(
            f"FTS5 (apsw) vs tantivy on the same rows, {args.files:,} files ({os.cpu_count()} cores, {load()})",
            ["measure", "", "SQLite FTS5", "tantivy"],
            results,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
