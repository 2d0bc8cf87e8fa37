"""The row part scored file by file (`fsmem.search.rowscores`) against bm25() over every match: one ranking.

Scoring the best documents' files by seeking each file's rows must give what the one bm25() query gave:
the same candidates, in the same order (ties by row id), every score and relevance the same float to the
bit, after any files written, changed and removed between questions, within a scope, with superseded rows
and without, with column weights that are not round numbers. Each example ranks its questions twice on
one index, the way forced each time, and compares.
"""

from __future__ import annotations

import datetime as dt
import random

import apsw
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.search import rowscores, scoring
from fsmem.search.documents import Kept
from fsmem.search.postings import _native
from fsmem.search.settings import SearchSettings, SearchWeights

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
WORDS = ["ada", "quill", "globex", "walrus", "ledger", "budget", "deploy", "zephyr", "tea", "rain"]
EVERYWHERE = "common"  # a word in every row of every file


def _file(rng: random.Random, rows: int, superseded: bool, words: list[str] = WORDS, most: int = 6) -> str:
    """A topic of `rows` bullets of 1 to `most` of `words`, a heading every four, EVERYWHERE in every row."""
    out = [f"# {rng.choice(words).title()} {EVERYWHERE}", ""]
    for n in range(rows):
        if n % 4 == 0:
            out += ["", f"## {' '.join(rng.sample(words, rng.randint(1, 3)))} {EVERYWHERE}", ""]
        out.append(f"- {' '.join(rng.choices(words, k=rng.randint(1, most)))} {EVERYWHERE}")
    if superseded:
        out += ["", "## Superseded", f"- {rng.choice(words)} {EVERYWHERE} old"]
    return "\n".join(out) + "\n"


def _ranking(memory: Memory, query: str, way: str, search: SearchSettings, **options):
    """Every candidate's path, line, score and relevance (hex: to the bit), and the answer's top rows. `way`:
    "by file" (the native module's score function where it loads), "by file in Python" (the Python twin),
    "bm25"."""
    index = memory.search_index
    index.kept = Kept()  # nothing kept from the other way's ranking
    big = 1 << 62
    costs = ("POSTINGS_PER_FILE", "POSTINGS_PER_MATCH", "POSTINGS_PER_NATIVE_MATCH")
    saved = [getattr(rowscores, name) for name in costs], rowscores.native
    for name in costs:
        setattr(rowscores, name, 0 if way.startswith("by file") else big)
    rowscores.native = way == "by file"
    try:
        found = scoring.rank(index, query, search, now=NOW, **options)
    finally:
        for name, value in zip(costs, saved[0], strict=True):
            setattr(rowscores, name, value)
        rowscores.native = saved[1]
    rows = [(found.paths[i], found.lines[i], found.scores[i].hex(), found.relevance[i].hex()) for i in found.ids]
    return rows, found.top(5, 0.05), found.top(50, 0.0), found.best()


_steps = st.lists(
    st.tuples(st.sampled_from(["write", "remove"]), st.integers(0, 7), st.integers(1, 30), st.booleans()),
    min_size=1,
    max_size=8,
)
_questions = st.lists(
    st.lists(st.sampled_from([*WORDS, EVERYWHERE, "absent"]), min_size=1, max_size=4, unique=True),
    min_size=1,
    max_size=3,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=_steps,
    questions=_questions,
    seed=st.integers(0, 1000),
    top=st.sampled_from([1, 2, 300]),
    weights=st.sampled_from([(1.0, 0.5), (0.7, 0.3), (0.1, 2.9)]),
)
def test_scoring_file_by_file_ranks_as_bm25_over_every_match(
    tmp_path_factory, monkeypatch, steps, questions, seed, top, weights
):
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(scoring, "TOP_DOCUMENTS", top)  # 1, 2: only the best documents' files, as at scale
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("mem")
    Memory.init(root)
    (root / "topics").mkdir()
    (root / "topics" / "one.md").write_text(f"# One\n\n- walrus {EVERYWHERE}\n", encoding="utf-8")  # a one-row file
    memory = Memory(root)
    search = SearchSettings(weights=SearchWeights(text=weights[0], headings=weights[1]))
    for action, number, rows, superseded in steps:
        path = root / "topics" / f"t{number}.md"
        if action == "write":
            path.write_text(_file(rng, rows, superseded), encoding="utf-8")
        else:
            path.unlink(missing_ok=True)
        memory.search_index.refresh()  # updates between questions: the next ranking reads a new state
        for words in questions:
            query = " ".join(words)
            for options in ({}, {"include_superseded": True}, {"within": lambda p: p < "topics/t4"}):
                expected = _ranking(memory, query, "bm25", search, **options)
                assert _ranking(memory, query, "by file", search, **options) == expected
                assert _ranking(memory, query, "by file in Python", search, **options) == expected
    memory.close()


def test_the_best_documents_files_are_scored_file_by_file_where_that_is_cheaper(tmp_path, monkeypatch):
    """With more matching documents than TOP_DOCUMENTS, the cost model picks the file by file way when the
    query's postings outweigh the files' seeks and rows, and the one bm25() query when they do not."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(scoring, "TOP_DOCUMENTS", 2)
    monkeypatch.setattr(rowscores, "POSTINGS_PER_FILE", 2)
    monkeypatch.setattr(rowscores, "POSTINGS_PER_MATCH", 0)
    monkeypatch.setattr(rowscores, "POSTINGS_PER_NATIVE_MATCH", 0)
    rng = random.Random(3)
    Memory.init(tmp_path)
    (tmp_path / "topics").mkdir()
    for n in range(30):
        (tmp_path / "topics" / f"t{n}.md").write_text(_file(rng, 12, n % 5 == 0), encoding="utf-8")
    memory = Memory(tmp_path)
    calls = []
    inner = rowscores.best_row_scores
    monkeypatch.setattr(rowscores, "best_row_scores", lambda *a: calls.append(1) or inner(*a))
    memory.search_index.refresh()
    assert scoring.rank(memory.search_index, f"walrus {EVERYWHERE}", memory.search_settings, now=NOW).ids
    assert calls  # 30 files' postings of a word in every row: cheaper file by file
    calls.clear()
    memory.search_index.kept = Kept()
    monkeypatch.setattr(rowscores, "POSTINGS_PER_FILE", 1 << 20)
    scoring.rank(memory.search_index, f"walrus {EVERYWHERE}", memory.search_settings, now=NOW)
    assert not calls  # a seek per file costing more than the postings: the one bm25() query
    memory.close()


@pytest.mark.parametrize(
    ("postings", "rows", "all_rows", "native", "cheaper"),
    [
        # the Python twin, measured at 100k files: file by file 629 ms, bm25() 1,247 ms
        (766_647, 22_051, 5_356_456, False, True),
        (1_140_466, 44_076, 5_356_456, False, False),  # every row of the files matches: 4,347 ms against 1,629 ms
        (76_110, 24_403, 535_683, False, False),  # at 10k files: 699 ms against 218 ms
        # the native module's function, CPU at load 6-10 (2026-12-07): at 100k files 12.6 ms against 83.6 ms
        (695_520, 21_777, 5_356_456, True, True),
        (444_777, 16_583, 535_683, True, True),  # at 10k files, every row of the files matching: 35.5 against 75.4
        (34_550, 18_706, 535_683, True, False),  # at 10k files: 11.3 ms against 7.7 ms
    ],
)
def test_the_cost_model_weighs_postings_against_files_and_rows(monkeypatch, postings, rows, all_rows, native, cheaper):
    monkeypatch.setattr(rowscores, "native", native)
    assert rowscores.native_built() is (native and _native is not None)
    assert rowscores.cheaper(postings, 300, rows, all_rows) is cheaper


def test_a_word_past_fts5s_token_limit_is_left_to_bm25():
    assert rowscores.usable(["walrus"]) and not rowscores.usable(["a" * 40000])


def test_the_auxiliary_function_is_registered_once_per_connection(tmp_path):
    Memory.init(tmp_path)
    (tmp_path / "a.md").write_text("- walrus\n", encoding="utf-8")
    memory = Memory(tmp_path)
    memory.search_index.refresh()
    conn = memory.search_index.connection()
    assert rowscores._scores_of(conn) is rowscores._scores_of(conn)
    memory.close()


def test_the_native_score_function_loads_once_per_connection_and_scores_as_bm25(tmp_path):
    """The native module, loaded as a SQLite extension, gives each matching row -bm25() to the bit, with the
    IDFs from the counts it is handed (here fts5vocab's, bm25()'s own), and leaves extension loading off.
    It fails where the module was built without the function, so a test run never falls back unnoticed."""
    assert getattr(_native, "row_score_entry", None), "fsmem.search._native built without sqlite3ext.h"
    Memory.init(tmp_path)
    rng = random.Random(5)
    (tmp_path / "topics").mkdir()
    for n in range(12):
        (tmp_path / "topics" / f"t{n}.md").write_text(_file(rng, 20, n % 3 == 0), encoding="utf-8")
    memory = Memory(tmp_path)
    memory.search_index.refresh()
    conn = memory.search_index.connection()
    assert rowscores.native_loaded(conn) and rowscores.native_loaded(conn)
    with pytest.raises(apsw.ExtensionLoadingError):
        conn.load_extension(_native.__file__, _native.row_score_entry)
    df = dict(conn.execute("SELECT term, doc FROM search_vocab").fetchall())
    # each row's size from FTS5's table of them, joined; NULL (or a value that is not sizes): xColumnSize's
    for sizes in (f"(SELECT sz FROM {rowscores.SIZES} WHERE id = search_fts.rowid)", "NULL", "x'80'", "x'0102ff'"):
        for words in (["walrus"], ["ada", EVERYWHERE, "absent"], WORDS[:6]):
            match = " OR ".join(words)
            weights = rng.choice([(1.0, 0.5), (0.7, 0.3), (0.1, 2.9)])
            counts = ", ".join(str(df.get(w, 0)) for w in words)
            scored = conn.execute(
                f"SELECT rowid, fsmem_row_score(search_fts, {sizes}, {weights[0]}, {weights[1]}, {counts})"
                " FROM search_fts WHERE search_fts MATCH ? ORDER BY rowid",
                (match,),
            ).fetchall()
            expected = conn.execute(
                f"SELECT rowid, -bm25(search_fts, {weights[0]}, {weights[1]}) FROM search_fts"
                " WHERE search_fts MATCH ? ORDER BY rowid",
                (match,),
            ).fetchall()
            assert scored == expected and len(expected) > 10
    with pytest.raises(apsw.SQLError, match="one row count per phrase"):
        conn.execute("SELECT fsmem_row_score(search_fts, NULL, 1.0, 1.0) FROM search_fts WHERE search_fts MATCH 'ada'")
    memory.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.integers(1, 12), st.booleans(), st.booleans()), min_size=1, max_size=8),
    words=st.lists(st.sampled_from(WORDS), max_size=3, unique=True),
    seed=st.integers(0, 1000),
    pools=st.lists(st.integers(0, 40), min_size=1, max_size=4),
)
def test_the_pool_kept_in_c_is_the_best_of_every_row_handed_over(
    tmp_path_factory, monkeypatch, files, words, seed, pools
):
    """`best_row_scores` keeps, across a question's statements, only the rows that can still be among the best
    `k`; its pool is `best_rows` over every matching row handed to Python: the same rows, order and scores to the
    bit, for any `k`, with ties (files written twice), superseded rows (left out, or kept) and a file's rows
    past the first `k`."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("mem")
    Memory.init(root)
    (root / "topics").mkdir()
    for number, (rows, superseded, twice) in enumerate(files):
        text = _file(rng, rows, superseded)
        (root / "topics" / f"t{number}.md").write_text(text, encoding="utf-8")
        if twice:  # the same rows in another file: the same scores, ties broken by row id
            (root / "topics" / f"u{number}.md").write_text(text, encoding="utf-8")
    memory = Memory(root)
    asked: list[tuple] = []
    inner = rowscores.best_row_scores
    monkeypatch.setattr(rowscores, "best_row_scores", lambda *call: asked.append(call) or inner(*call))
    for name in ("POSTINGS_PER_FILE", "POSTINGS_PER_MATCH", "POSTINGS_PER_NATIVE_MATCH"):
        monkeypatch.setattr(rowscores, name, 0)  # every question scored file by file
    memory.search_index.refresh()
    query = " ".join([*words, EVERYWHERE])  # some row matches
    scoring.rank(memory.search_index, query, SearchSettings(), now=NOW, within=lambda path: True)
    assert asked and rowscores.native_loaded(conn := asked[0][0])
    for _conn, match, phrases, df, weights, by_file, _superseded_too, _k, *_partner in asked:
        found = rowscores.row_scores(conn, match, phrases, df, weights, by_file)
        for k in [*pools, len(found), len(found) + 1]:
            for superseded_too in (False, True):
                cut = inner(conn, match, phrases, df, weights, by_file, superseded_too, k)
                uncut = rowscores.best_rows(found, None if superseded_too else by_file, k)
                assert [(r, s.hex()) for r, s in cut] == [(r, s.hex()) for r, s in uncut]
    memory.close()


NAMES = ["diego", "silva", "lena", "patel", "ines"]  # in headings only, never in a row's text nor a file's name


def _person(rng: random.Random, rows: int, superseded: bool, named: bool) -> str:
    title = " ".join(rng.sample(NAMES, 2)).title() if named else "Notes"
    out = ["---", f"title: Zulu {rng.randint(0, 99)}", "---", f"# {title}", ""]  # the heading is not its name
    for n in range(rows):
        if n % 5 == 0:
            extra = NAMES if named and rng.random() < 0.1 else []  # now and then a name twice in a row's headings
            section = " ".join(rng.sample([*WORDS, *extra], rng.randint(1, 2)))
            out += ["", f"## {section}", ""]
        out.append(f"- {' '.join(rng.choices(WORDS, k=rng.randint(1, 4) if named else rng.randint(6, 20)))}")
    if superseded:
        out += ["", "## Superseded", f"- {rng.choice(WORDS)} old"]
    return "\n".join(out) + "\n"


def _pool(memory: Memory, query: str, every_word: bool, search: SearchSettings, monkeypatch, **options):
    """Every candidate's path, line, score and relevance (hex: to the bit), in order, with the row part's best
    rows taken from those holding every word where that is proved right, or from the OR's bm25() query."""
    index = memory.search_index
    index.kept = Kept()
    with monkeypatch.context() as patched:
        patched.setattr(rowscores, "POSTINGS_PER_FILE", 1 << 62)  # never file by file: the bm25() query's way
        if not every_word:
            patched.setattr(rowscores, "best_holding_every_word", lambda *args: None)
        found = scoring.rank(index, query, search, now=NOW, **options)
    return [(found.paths[i], found.lines[i], found.scores[i].hex(), found.relevance[i].hex()) for i in found.ids]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.integers(1, 25), st.booleans()), min_size=1, max_size=8),
    unnamed=st.integers(0, 40),
    questions=st.lists(
        st.tuples(
            st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True),
            st.lists(st.sampled_from([*WORDS, "zulu", "absent"]), max_size=2, unique=True),  # zulu: names only
            st.randoms(use_true_random=False),
        ),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 1000),
    pool=st.sampled_from([1, 2, 5, 10]),
    weights=st.sampled_from([(1.0, 0.5), (0.7, 0.3), (0.1, 2.9), (0.0, 1.0)]),
)
def test_the_best_rows_holding_every_word_are_the_or_querys_best(
    tmp_path_factory, monkeypatch, files, unnamed, questions, seed, pool, weights
):
    """Names in titles and headings only, asked with each other, with words of the text and with an unknown
    word: the row part from the rows holding every word (where the bound allows it) ranks as bm25() over
    every row holding any, the same candidates in the same order, every score and relevance to the bit."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(scoring, "POOL_MIN", pool)  # a pool small enough for the memory's rows to fill
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("mem")
    Memory.init(root)
    (root / "entities").mkdir()
    for number, (rows, superseded) in enumerate(files):
        (root / "entities" / f"p{number}.md").write_text(_person(rng, rows, superseded, True), encoding="utf-8")
    for number in range(unnamed):  # rows without names: a name's IDF above FTS5's floor
        (root / "entities" / f"u{number}.md").write_text(_person(rng, 8, False, False), encoding="utf-8")
    memory = Memory(root)
    memory.search_index.refresh()
    search = SearchSettings(weights=SearchWeights(text=weights[0], headings=weights[1]))
    for names, others, shuffle in questions:
        words = names + others
        shuffle.shuffle(words)  # names first, last or between the other words: each phrase keeps its place
        query = " ".join(words)
        for options in ({}, {"include_superseded": True}, {"within": lambda p: p < "entities/p4"}):
            assert _pool(memory, query, True, search, monkeypatch, **options) == _pool(
                memory, query, False, search, monkeypatch, **options
            )
    memory.close()


def test_a_name_in_headings_only_is_ranked_from_the_rows_holding_every_word(tmp_path, monkeypatch):
    """Two names in the titles of many files and no row's text: the rows holding both outscore every row
    holding one, so the row part takes its best rows from theirs alone; a pool deeper than those rows, or a
    word in every row that a bound cannot tell apart, goes to bm25() over every row holding any word."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    Memory.init(tmp_path)
    (tmp_path / "entities").mkdir()
    people = [("Diego", "Silva"), ("Diego", "Patel"), ("Lena", "Silva")] * 4 + [("Ines", "Ledger")] * 30
    for n, (first, last) in enumerate(people):
        rows = "".join(f"- budget tea rain {'deploy ' * (r % 3)}\n" for r in range(10))
        text = f"---\ntitle: p{n}\n---\n# {first} {last}\n\n## Facts\n\n{rows}"  # the heading is not a name
        (tmp_path / "entities" / f"p{n}.md").write_text(text, encoding="utf-8")
    memory = Memory(tmp_path)
    memory.search_index.refresh()
    proved = []
    inner = rowscores.best_holding_every_word
    monkeypatch.setattr(rowscores, "best_holding_every_word", lambda *a: proved.append(inner(*a) is not None))
    for pool, query, expected in ((5, "diego silva", True), (41, "diego silva", False), (5, "silva budget", False)):
        monkeypatch.setattr(scoring, "POOL_MIN", pool)
        memory.search_index.kept = Kept()
        proved.clear()
        scoring.rank(memory.search_index, query, memory.search_settings, now=NOW)
        assert proved == [expected], (pool, query)
    memory.close()
