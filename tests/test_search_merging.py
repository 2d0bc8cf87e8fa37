"""The segments files written one at a time add to the FTS5 tables, merged behind the writes
(`fsmem.search.index.SearchIndex._merge_writes`, a step at a time: `fsmem.search.tables.merge_step`).

Merging rewrites the postings FTS5 holds, not what they say: every ranking (the row part file by file with
the native function and its Python twin, bm25() over every match, a bare FTS5 query) is the same, to the bit,
after each step as before the first. The merger runs once a process's writes are quiet, and leaves one segment
a table however many files were written.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from test_rowscores import _file, _questions as word_lists, _ranking

from fsmem import Memory
from fsmem.search import index as search_index, tables
from fsmem.search.settings import SearchSettings, SearchWeights
from fsmem.store import cache

BARE = "SELECT rowid, bm25(search_fts, ?, ?) FROM search_fts WHERE search_fts MATCH ? ORDER BY 2, rowid"
WAYS = ("by file", "by file in Python", "bm25")


def _segments(memory: Memory) -> tuple[int, int]:
    conn = memory.search_index.connection()
    return tables.segments(conn, "search_fts"), tables.segments(conn, "search_names")


def _answers(memory: Memory, questions: list[str], search: SearchSettings, weights) -> list:
    conn = memory.search_index.connection()
    found = []
    for query in questions:
        found += [_ranking(memory, query, way, search) for way in WAYS]
        bare = conn.execute(BARE, (*weights, " OR ".join(query.split()))).fetchall()
        found.append([(rowid, score.hex()) for rowid, score in bare])
    return found


_writes = st.lists(
    st.tuples(st.sampled_from(["write", "remove"]), st.integers(0, 9), st.integers(1, 70), st.booleans()),
    min_size=2,
    max_size=10,
)
_questions = word_lists.map(lambda questions: [" ".join(words) for words in questions])  # test_rowscores' questions


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    writes=_writes,
    questions=_questions,
    seed=st.integers(0, 1000),
    pages=st.sampled_from([1, 4, 128]),
    weights=st.sampled_from([(1.0, 0.5), (0.7, 0.3)]),
)
def test_every_answer_is_the_same_after_each_merge_step(
    tmp_path_factory, monkeypatch, writes, questions, seed, pages, weights
):
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(search_index, "MERGE_QUIET_S", 1e9)  # merged here, a step at a time, not behind
    monkeypatch.setattr(tables, "MERGE_STEP_PAGES", pages)  # 1 page: many steps, each a state read between
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("mem")
    Memory.init(root)
    (root / "topics").mkdir()
    for n in range(6):
        (root / "topics" / f"t{n}.md").write_text(_file(rng, rng.randint(1, 70), n % 3 == 0), encoding="utf-8")
    memory = Memory(root)
    search = SearchSettings(weights=SearchWeights(text=weights[0], headings=weights[1]))
    memory.search_index.refresh()
    for action, number, rows, superseded in writes:  # one file at a time: each its own transaction, a segment
        path = root / "topics" / f"t{number}.md"
        if action == "write":
            path.write_text(_file(rng, rows, superseded), encoding="utf-8")
        else:
            path.unlink(missing_ok=True)
        memory.search_index.update([f"topics/t{number}.md"])
    expected = _answers(memory, questions, search, weights)
    conn = memory.search_index.connection()
    for _step in range(10_000):
        with cache.transaction(conn):
            if not tables.merge_step(conn):
                break
        assert _answers(memory, questions, search, weights) == expected
    assert _segments(memory) == (1, 1)
    memory.close()


@pytest.fixture
def written(tmp_path, monkeypatch):
    """A memory of 20 files, its index built, then 12 files written one at a time through the API."""
    return _written(tmp_path, monkeypatch, quiet=0.05)


def _written(tmp_path, monkeypatch, *, quiet: float) -> Memory:
    """`written`, its merger waiting for `quiet` s of no writes before it merges."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(search_index, "MERGE_QUIET_S", quiet)
    rng = random.Random(7)
    Memory.init(tmp_path)
    (tmp_path / "topics").mkdir()
    for n in range(20):
        (tmp_path / "topics" / f"t{n}.md").write_text(_file(rng, 30, False), encoding="utf-8")
    memory = Memory(tmp_path)
    memory.search("walrus ledger")
    assert _segments(memory) == (1, 1)  # as a build leaves them
    for n in range(12):
        memory.write(f"topics/t{n}.md", _file(rng, 30, n % 4 == 0))
        memory.note(f"the walrus {n} keeps the ledger")
    return memory


def _rankings(memory: Memory) -> list:
    return [_ranking(memory, q, way, memory.search_settings) for q in ("walrus ledger", "zephyr") for way in WAYS]


def test_the_segments_written_files_add_are_merged_into_one_once_the_writes_are_quiet(written):
    expected = _rankings(written)
    assert written.search_index.writes_merged(timeout=60)
    assert _segments(written) == (1, 1)
    assert _rankings(written) == expected
    written.write("topics/t1.md", "- one more walrus\n")  # a write after the merge is merged in its turn
    assert written.search_index.writes_merged(timeout=60)
    assert _segments(written) == (1, 1)
    written.close()


def test_a_reader_reads_one_state_while_the_merger_writes(tmp_path, monkeypatch):
    """A read transaction begun before the merge reads the segments it began with to its end (WAL), and
    answers what it answered before, as a reader begun after the merge does."""
    written = _written(tmp_path, monkeypatch, quiet=1e9)  # the merger holds off until the reader has begun
    reader = cache.connect(written.search_index.path)
    query = ("walrus OR ledger",)
    sql = "SELECT rowid, bm25(search_fts) FROM search_fts WHERE search_fts MATCH ? ORDER BY 2, rowid"
    reader.execute("BEGIN")
    before = reader.execute(sql, query).fetchall()
    segments_before = tables.segments(reader, "search_fts")
    assert segments_before > 1
    monkeypatch.setattr(search_index, "MERGE_QUIET_S", 0.0)
    with written.search_index._merge_state:  # the merger, waiting out the quiet time, looks at it again
        written.search_index._merge_state.notify_all()
    assert written.search_index.writes_merged(timeout=60)
    assert tables.segments(reader, "search_fts") == segments_before and reader.execute(sql, query).fetchall() == before
    reader.execute("COMMIT")
    assert tables.segments(reader, "search_fts") == 1 and reader.execute(sql, query).fetchall() == before
    reader.close()
    written.close()


def test_a_write_of_another_process_takes_the_lock_between_merge_steps(written, monkeypatch):
    """Another process's write while this one's merger works (a step a page) waits for a step, not the merge,
    and its file is indexed; the merge ends with one segment."""
    monkeypatch.setattr(tables, "MERGE_STEP_PAGES", 1)
    other = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(written.root), "write", "topics/t3.md"],
        input="- the quokka keeps tea\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert other.returncode == 0, other.stderr
    assert any(h.path == "topics/t3.md" for h in written.search("quokka").hits)
    written.write("topics/t4.md", "- the wombat keeps rain\n")
    assert written.search_index.writes_merged(timeout=60)
    assert _segments(written) == (1, 1)
    assert any(h.path == "topics/t4.md" for h in written.search("wombat").hits)
    written.close()
