"""How the search tables store a file's rows (issue #20: `.fsmem/` no larger than the memory's Markdown).

FTS5 row ids are packed: a file takes the next blocks of 64 ids, so the distances FTS5 stores between
postings stay small; a file's packed lines take 2 bytes a row unless one needs 4. The answers must not move:
rows past a file's first block are found, with the right line, through every path of the ranking.
"""

from __future__ import annotations

import shutil
from array import array

import pytest

from fsmem import Memory
from fsmem.search import scoring
from fsmem.store.cache import cache_path, connect

BLOCK_BITS = 6  # the layout these tests state: blocks of 64 row ids (fsmem.search.tables.BLOCK_BITS)


def _facts(title: str, count: int, *, special: int | None = None, word: str = "", gap: int = 0) -> str:
    lines = [f"---\ntitle: {title}\ntype: semantic\nupdated: 2026-01-01\n---\n# {title}\n", "\n" * gap, "## Facts\n"]
    for n in range(count):
        lines.append(f"- fact {n}: {word if n == special else 'plain'} value\n")
    return "".join(lines)


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "topics").mkdir()
    (root / "topics" / "a.md").write_text(_facts("Alpha", 3), encoding="utf-8")
    (root / "topics" / "b.md").write_text(_facts("Beta", 150, special=140, word="walrus"), encoding="utf-8")
    (root / "topics" / "c.md").write_text(_facts("Gamma", 2, special=1, word="walrus"), encoding="utf-8")
    return Memory(root)


def _line_of(memory, rel: str, start: str) -> int:
    lines = (memory.root / rel).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(start))


def _query(memory, sql):
    conn = connect(cache_path(memory.root))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _documents(memory) -> list[int]:
    """The ids of the documents the index holds: each file's ordinals with a length (fsmem.search.postings)."""
    found = _query(memory, "SELECT id, lengths FROM search_lengths")
    return sorted((fid << BLOCK_BITS) + n for fid, packed in found for n, size in enumerate(array("I", packed)) if size)


def test_each_file_takes_the_next_blocks_of_row_ids(memory):
    memory.search("walrus")
    files = _query(memory, "SELECT id, rows, docs FROM search_files ORDER BY id")
    topics = _query(memory, "SELECT path, rows FROM search_files WHERE path LIKE 'topics/%' ORDER BY path")
    assert topics == [("topics/a.md", 3), ("topics/b.md", 150), ("topics/c.md", 2)]
    for (fid, rows, _docs), (following, _r, _d) in zip(files, files[1:], strict=False):
        assert following == fid + (rows >> BLOCK_BITS) + 1  # no block left between two files
    wanted = sorted(fid * 64 + n for fid, rows, _docs in files for n in range(rows))
    assert [i for (i,) in _query(memory, "SELECT id FROM search_fts_docsize ORDER BY id")] == wanted
    documents = _documents(memory)
    assert documents == [fid * 64 for fid, _rows, docs in files if docs]


def _ranking(memory, query):
    """Every candidate's path, line and score (without the retrieval log, which each search adds to)."""
    memory.search_index.refresh()
    found = scoring.rank(memory.search_index, query, memory.search_settings)
    return [(found.paths[i], found.lines[i], found.scores[i]) for i in found.ids]


def test_a_file_changed_again_and_again_keeps_its_ranking_and_its_ids_packed(memory):
    first = _ranking(memory, "walrus")
    path = memory.root / "topics" / "b.md"
    for _ in range(3):
        path.write_text(path.read_text(encoding="utf-8") + "- fact extra: plain value\n", encoding="utf-8")
        memory.search("walrus")
    path.write_text(_facts("Beta", 150, special=140, word="walrus"), encoding="utf-8")
    assert _ranking(memory, "walrus") == first
    fid, rows = _query(memory, "SELECT id, rows FROM search_files WHERE path = 'topics/b.md'")[0]
    ids = [i for (i,) in _query(memory, f"SELECT id FROM search_fts_docsize WHERE id >> 6 >= {fid} ORDER BY id")]
    assert ids[:rows] == list(range(fid << BLOCK_BITS, (fid << BLOCK_BITS) + rows))
    current = sum(n for (n,) in _query(memory, "SELECT rows FROM search_files"))
    assert _query(memory, "SELECT count(*) FROM search_fts_docsize") == [(current,)]  # no old version's row is left
    shutil.rmtree(memory.root / ".fsmem")
    assert _ranking(Memory(memory.root), "walrus") == first


def test_a_row_past_a_files_first_block_is_found_through_every_filter(memory, monkeypatch):
    where = ("topics/b.md", _line_of(memory, "topics/b.md", "- fact 140: walrus"))
    plain = [(h.path, h.line) for h in memory.search("walrus").hits]
    assert where in plain and ("topics/c.md", _line_of(memory, "topics/c.md", "- fact 1: walrus")) in plain
    assert where in [(h.path, h.line) for h in memory.search("walrus", type="semantic").hits]
    monkeypatch.setattr(scoring, "TOP_DOCUMENTS", 1)  # only the best document's rows are scored row by row
    assert where in [(h.path, h.line) for h in memory.search("walrus fact 140").hits]


def test_lines_take_two_bytes_a_row_unless_one_needs_four(memory):
    far = memory.root / "topics" / "far.md"
    far.write_text(_facts("Far", 2, special=1, word="narwhal", gap=17000), encoding="utf-8")
    hits = memory.search("narwhal").hits
    assert (hits[0].path, hits[0].line) == ("topics/far.md", _line_of(memory, "topics/far.md", "- fact 1: narwhal"))
    assert hits[0].line > 1 << 14  # line << 2 | flags needs more than 16 bits
    widths = dict(_query(memory, "SELECT path, length(lines) / rows FROM search_files WHERE path LIKE 'topics/%'"))
    assert widths == {"topics/a.md": 2, "topics/b.md": 2, "topics/c.md": 2, "topics/far.md": 4}


def test_a_document_past_a_files_first_block_leads_to_its_file(memory, monkeypatch):
    """Document n of a file is stored at its first row id + n: a file citing 70 session notes has documents
    in its second block, and the document part must still lead to the file's rows."""
    facts = "".join(f"- fact {n}: plain value (2026-01-01, sessions/n{n}.md)\n" for n in range(69))
    cited = facts + "- fact 69: walrus walrus walrus value (2026-01-01, sessions/n69.md)\n"
    (memory.root / "topics" / "cited.md").write_text(
        f"---\ntitle: Cited\nupdated: 2026-01-01\n---\n# Cited\n\n## Facts\n{cited}", encoding="utf-8"
    )
    monkeypatch.setattr(scoring, "TOP_DOCUMENTS", 1)  # only the best document's rows are scored row by row
    where = ("topics/cited.md", _line_of(memory, "topics/cited.md", "- fact 69: walrus"))
    assert (memory.search("walrus").hits[0].path, memory.search("walrus").hits[0].line) == where
    fid, rows = _query(memory, "SELECT id, rows FROM search_files WHERE path = 'topics/cited.md'")[0]
    documents = [i for i in _documents(memory) if i >> 6 >= fid]
    assert rows == 70 and (fid << BLOCK_BITS) + 70 in documents  # the walrus fact's note is the 70th


def test_an_older_index_with_its_document_table_is_made_again_without_it(memory):
    """Before fsmem.search.postings the documents were an FTS5 table (`search_docs`, and its vocabulary):
    an index of that version is dropped whole, those tables with it, and the answers are the same."""
    first = _ranking(memory, "walrus")
    conn = connect(cache_path(memory.root))
    conn.execute("CREATE VIRTUAL TABLE search_docs USING fts5 (body, content='', contentless_delete=1)")
    conn.execute("CREATE VIRTUAL TABLE search_docs_vocab USING fts5vocab (search_docs, 'row')")
    conn.execute("INSERT INTO search_docs (rowid, body) VALUES (64, 'walrus walrus')")
    conn.execute("UPDATE search_meta SET value = '8:4' WHERE key = 'version'")
    conn.close()
    memory.search_index.close()
    assert _ranking(Memory(memory.root), "walrus") == first
    names = {n for (n,) in _query(memory, "SELECT name FROM sqlite_master")}
    assert not {n for n in names if n.startswith("search_docs")}
    assert {"search_postings", "search_lengths", "search_dead"} <= names
