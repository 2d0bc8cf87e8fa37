"""The shortcuts of fsmem.search.scoring's ranking give what the full sorts they replace give, and a rebuild
leaves the FTS5 tables in one segment each, scoring as before."""

import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from fsmem import Memory
from fsmem.search.scoring import Ranking, _best_first, best_documents

# Raw scores with neighbours that one denominator rounds to one score: 1.95 and the next float over 3.0,
# 5e-300 and 6e-300 over 1e24 (both the least subnormal); and plain ties.
RAW = st.sampled_from([0.0, 5e-300, 6e-300, 1.0, 1.95, math.nextafter(1.95, 2.0)])


@st.composite
def documents_from_sql(draw):
    """Document scores as document_scores builds them: raw scores in SQL's order (raw descending, then id),
    each over one positive denominator, which may round two raw scores to one score."""
    raws = draw(st.lists(st.tuples(RAW, st.integers(0, 60)), max_size=30, unique_by=lambda pair: pair[1]))
    denominator = draw(st.sampled_from([3.0, 1e24, 1.0]))
    return {doc: raw / denominator for raw, doc in sorted(raws, key=lambda pair: (-pair[0], pair[1]))}


def _full_sort(documents, count):
    return set(sorted(documents, key=lambda d: (-documents[d], d))[:count])


@settings(max_examples=200)
@given(documents_from_sql(), st.integers(1, 32))
def test_best_documents_are_the_head_of_the_full_sort(documents, count):
    assert best_documents(documents, count) == _full_sort(documents, count)


@settings(max_examples=100)
@given(st.dictionaries(st.integers(0, 400), RAW, max_size=40), st.integers(1, 45))
def test_best_documents_in_any_order_are_the_head_of_the_full_sort(documents, count):
    assert best_documents(documents, count) == _full_sort(documents, count)


def test_documents_tied_at_the_cut_are_taken_by_id():
    # SQL's order (by raw score) put 9 before 4, but both score 1.0: the full sort takes the lower id
    documents = {7: 2.0, 9: 1.0, 4: 1.0, 1: 0.5}
    assert best_documents(documents, 2) == {7, 4}
    assert best_documents(documents, 3) == {7, 9, 4}
    assert best_documents(documents, 9) == {7, 9, 4, 1}


@settings(max_examples=100)
@given(
    st.dictionaries(
        st.integers(0, 300),
        st.tuples(RAW, st.sampled_from(["a.md", "b.md", "topics/c.md"]), st.integers(1, 5)),
        max_size=40,
    )
)
def test_best_first_orders_as_the_three_part_key(rows):
    pool = list(rows)
    scores = {r: rows[r][0] for r in pool}
    paths = {r: rows[r][1] for r in pool}
    lines = {r: rows[r][2] for r in pool}
    expected = sorted(pool, key=lambda r: (-scores[r], paths[r], lines[r]))
    assert _best_first(pool, scores, paths, lines) == expected


@settings(max_examples=200)
@given(
    st.dictionaries(st.integers(0, 1 << 30), RAW, max_size=40),
    st.sampled_from([0.0, 5e-300, 1.0, 1.95, 2.0]),
    st.integers(0, 45),
)
def test_the_rows_above_the_threshold_are_the_head_a_test_of_each_finds(scores, min_score, limit):
    ids = _best_first(list(scores), scores, dict.fromkeys(scores, "a.md"), {r: r for r in scores})
    ranking = Ranking(ids, scores, scores, {}, {}, searchable=len(ids))
    above = [r for r in ids if scores[r] >= min_score and scores[r] > 0]
    assert ranking.top(limit, min_score) == (above[:limit], len(above))


def _segments(memory, table):
    from fsmem.search.tables import segments

    return memory.search_index.guarded(lambda conn: segments(conn, table))


def _ranked(memory, query):
    from fsmem.search.ranking import search

    _result, ranking = search(memory.search_index, memory.tokens, memory.search_settings, query, k=5, max_tokens=500)
    return [(ranking.paths[i], ranking.lines[i], ranking.scores[i]) for i in ranking.candidates]


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    for n in range(7):
        (root / f"topic-{n}.md").write_text(
            f"---\ntitle: Topic {n}\n---\n# Topic {n}\n- owner: Ada {n}\n- billing cycle: monthly {n}\n- plan {n}: gold\n",
            encoding="utf-8",
        )
    return Memory(root)


def test_a_rebuild_leaves_each_fts5_table_one_segment(memory, monkeypatch):
    import fsmem.search.index as index

    monkeypatch.setattr(index, "BATCH_FILES", 2)  # a build of 7 files commits 4 times: 4 segments a table
    memory.search("billing")
    assert [_segments(memory, t) for t in ("search_fts", "search_names")] == [1, 1]


def test_a_build_answers_while_its_segments_merge_as_the_merged_index_answers(memory, tmp_path, monkeypatch):
    """The first search answers from the rows its build committed while FTS5 merges them in a thread
    (`SearchIndex._merge_behind`), writing nothing meanwhile (the merge holds the write lock): the answer, to the
    byte, is the one of an index merged before answering, and whatever uses the index next finds it merged."""
    import json
    import shutil
    import threading

    import fsmem.search.index as index

    monkeypatch.setattr(index, "BATCH_FILES", 2)  # 7 files: a build in 4 batches, merged at its end
    queries = ["billing plan", "Ada walrus monthly", "gold owner topic"]
    inline_root = tmp_path / "inline"
    shutil.copytree(memory.root, inline_root)
    with monkeypatch.context() as inline:  # the merge done before the answer, in the search's own thread
        inline.setattr(index.SearchIndex, "_merge_behind", index.SearchIndex._merge)
        merged_first = Memory(inline_root)
        expected = [merged_first.search(q) for q in queries]
    assert _segments(merged_first, "search_fts") == 1

    release, started, events = threading.Event(), threading.Event(), []
    merge = index.merge_segments

    def held(conn):  # the merge holds the write lock until the first answer is given
        memo = "SELECT count(*) FROM sqlite_master WHERE name = 'counts'"  # the token counts' memo: made already
        events.append(f"memo tables: {conn.execute(memo).fetchone()[0]}")
        conn.execute("BEGIN IMMEDIATE")
        started.set()
        try:
            assert release.wait(20)
        finally:
            conn.execute("COMMIT")
        events.append("merge")
        merge(conn)

    monkeypatch.setattr(index, "merge_segments", held)
    first = memory.search(queries[0])
    events.append("answer")
    assert started.wait(20)  # the merge's thread runs, holding the write lock (before or after the answer came)
    release.set()
    unmerged = "SELECT count(*) FROM search_meta WHERE key = 'unmerged'"
    assert memory.search_index.guarded(lambda conn: conn.execute(unmerged).fetchone()[0]) == 0  # waits for it
    # the answer never waited for the merge, which began with the memo made (it writes nothing while merging)
    assert sorted(events[:2]) == ["answer", "memo tables: 1"] and events[2:] == ["merge"]
    assert _segments(memory, "search_fts") == 1 and _segments(memory, "search_names") == 1
    answers = [first, *(memory.search(q) for q in queries[1:])]
    for got, want in zip(answers, expected, strict=True):
        assert got.to_text() == want.to_text()
        assert json.dumps(got.to_dict()) == json.dumps(want.to_dict())
    assert all(a.hits for a in answers)


def test_merged_segments_score_every_row_as_before(memory, monkeypatch):
    import fsmem.search.index as index
    from fsmem.search.tables import merge_segments

    monkeypatch.setattr(index, "MERGE_QUIET_S", 1e9)  # the writes' segments left to the merge below
    memory.search("billing")
    for n in range(4):  # each write is a transaction of its own: a new segment
        memory.write(f"notes-{n}.md", f"- billing for Ada {n}: yearly plan\n- the walrus {n} owns a monthly plan\n")
    assert _segments(memory, "search_fts") > 1
    queries = ["billing plan", "Ada walrus monthly", "gold owner topic"]
    before = [_ranked(memory, q) for q in queries]
    memory.search_index.guarded(merge_segments)
    assert _segments(memory, "search_fts") == 1
    assert [_ranked(memory, q) for q in queries] == before and all(before)


def test_usage_looked_up_by_path_and_line_scores_as_by_location(memory):
    from fsmem.search.ranking import search, usage_counts

    for query in ["billing", "owner Ada", "gold plan", "billing cycle"]:
        memory.search(query)  # the retrieval log: the rows shown gain usage
    usage = usage_counts(memory.root)
    assert usage.top > 0 and usage.by_path

    def ranked(counts):
        found = search(
            memory.search_index,
            memory.tokens,
            memory.search_settings,
            "billing plan owner",
            k=5,
            max_tokens=500,
            usage=counts,
        )[1]
        return [(found.paths[i], found.lines[i], found.scores[i]) for i in found.candidates]

    without = ranked({})
    with_usage = ranked(usage)
    assert with_usage == ranked(dict(usage)) and with_usage != without  # a plain dict is looked up by location


def test_the_files_a_filter_lets_through_follow_every_change(memory):
    def found(**filters):
        return sorted({h.path for h in memory.search("billing cycle", **filters).hits})

    assert found(type="semantic") == [] and found(tag="money") == []
    assert found(type="semantic") == []  # asked again: what the filter let through is kept
    memory.write("topics/billing.md", "---\ntype: semantic\ntags: [money]\n---\n- billing cycle: yearly\n")
    assert found(type="semantic") == ["topics/billing.md"] == found(tag="money") == found(tag=["Money"])
    memory.write("topics/billing.md", "---\ntype: episodic\n---\n- billing cycle: yearly\n")
    assert found(type="semantic") == [] and found(type="episodic") == ["topics/billing.md"]
    assert found(tag="money") == []


def test_an_index_made_again_never_answers_from_what_was_kept_of_the_one_before(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "a.md").write_text("# A\n- the walrus sleeps on the ice\n")
    (root / "b.md").write_text("# B\n- beta plan is gold\n")
    memory = Memory(root)  # one long-lived memory, as a server holds it
    assert [(h.path, h.line) for h in memory.search("walrus").hits] == [("a.md", 2)]
    for name in os.listdir(root / ".fsmem"):
        if name.startswith("cache.sqlite"):
            os.remove(root / ".fsmem" / name)  # rm .fsmem/cache.sqlite: the index is built again, as many changes
    (root / "a.md").write_text("# A\n- alpha plan is silver\n")
    (root / "b.md").write_text("# B\n\n\n- the walrus swims in the sea\n")
    assert [(h.path, h.line, h.text) for h in memory.search("walrus").hits] == [
        ("b.md", 4, "- the walrus swims in the sea")
    ]  # not a.md:2, the row the walrus was kept at, which says something else now


CITING = """---
title: Melanie
entity: people/Melanie
---
# Melanie

## Notes
- We went camping with the kids by the lake. [D9:1] (2023-07-17, sessions/2023/07/17/s9.md)
- Work has been busy, but the weekend was calm. [D9:2] (2023-07-17, sessions/2023/07/17/s9.md)
"""


def test_the_notes_documents_cite_are_looked_up_only_where_some_document_cites_one(tmp_path, monkeypatch):
    """The document part reads which session note each of its best documents cites (their rows score as the
    note's): in a memory where no document cites one, it reads none (at 100k files, 1.5 ms of a new question's
    25 ms of CPU), and from the write that makes one cite, it reads them again."""
    import apsw

    statements: list[str] = []

    def traced(conn) -> None:
        conn.exec_trace = lambda _cursor, sql, _bindings: statements.append(sql) or True

    monkeypatch.setattr(apsw, "connection_hooks", [*apsw.connection_hooks, traced])
    monkeypatch.setenv("FSMEM_NOW", "2023-11-01T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "a.md").write_text("# A\n- the walrus sleeps by the lake\n")
    (root / "b.md").write_text("# B\n- the kids went camping\n")
    memory = Memory(root)  # one long-lived memory, as a server holds it

    def looked_up() -> bool:
        return any("FROM search_sources WHERE id IN" in sql for sql in statements)

    assert [h.path for h in memory.search("camping lake").hits] == ["a.md", "b.md"]
    assert not looked_up()
    memory.write("entities/people/melanie.md", CITING)
    statements.clear()
    hits = memory.search("camping lake").hits
    assert looked_up()
    assert hits[0].path == "entities/people/melanie.md" and hits[0].text.startswith("- We went camping")
