"""fsmem's document index against FTS5: the same tokens, the same document frequencies, the very same BM25.

The document part of the score was FTS5's `-bm25()` over a table of documents; `fsmem.search.postings` keeps
only what BM25 reads (counts and lengths) and must give the very same floats, in the same order, after any
sequence of files written and removed. Each property runs a real FTS5 table beside the real index code, once
with the C module (`fsmem.search._native`) and once with its Python twin (tests/test_native.py holds the two
equal on posting rows of any shape, damaged ones included).
"""

from __future__ import annotations

import random
import shutil
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from fsmem.search import index as search_index, postings, scoring
from fsmem.search.analyzer import Analyzer
from fsmem.search.index import SearchIndex
from fsmem.search.parsing import Parsed, parse_file
from fsmem.search.tables import _insert, _remove
from fsmem.store import cache as _cache

ANALYZER = Analyzer()
NATIVE = postings._native  # None where the module was not built (tests/test_native.py fails then)


@pytest.fixture(scope="module", autouse=True, params=["native", "twin"])
def scoring_path(request):
    """Every test of this module twice: with fsmem.search._native, and with the Python twin that answers
    where the module is not built."""
    if request.param == "native" and NATIVE is None:
        pytest.skip("fsmem.search._native is not built (tests/test_native.py fails and says why)")
    saved = postings._native
    postings._native = NATIVE if request.param == "native" else None
    yield request.param
    postings._native = saved


WORDS = ["ada", "quill", "globex", "walrus", "ledger", "budget", "deploy", "zephyr", "tea", "rain", "x"]
FTS = "CREATE VIRTUAL TABLE docs USING fts5 (body, content='', contentless_delete=1, detail=full, tokenize='ascii')"


def _fts_tokens(conn, body: str) -> list[str]:
    conn.execute("DELETE FROM docs")
    conn.execute("INSERT INTO docs (rowid, body) VALUES (1, ?)", (body,))
    return [t for (t,) in conn.execute("SELECT term FROM docs_vocab ORDER BY offset")]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_each_term_of_a_body_is_one_token_of_fts5s_ascii_tokenizer(text):
    """A document's length is its body's terms and a posting is a term: FTS5 must see the same tokens."""
    conn = _cache.Connection(":memory:")
    conn.execute(FTS)
    conn.execute("CREATE VIRTUAL TABLE docs_vocab USING fts5vocab (docs, 'instance')")
    body = ANALYZER.text(text)
    assert _fts_tokens(conn, body) == body.split()


def test_a_term_longer_than_fts5s_token_limit_is_cut_where_fts5_cuts_it():
    """FTS5 keeps a token's first 32,768 bytes: terms longer than that, alike up to there, are one term."""
    conn = _cache.Connection(":memory:")
    conn.execute(FTS)
    prefix = "a" * (postings.MAX_TOKEN_BYTES - 1)
    terms = [prefix + "é" + "x", prefix + "é" + "y", prefix + "è", prefix + "b" * 2, "a" * 40000]
    for rowid, term in enumerate(terms, 1):
        conn.execute("INSERT INTO docs (rowid, body) VALUES (?, ?)", (rowid, term))
    for term in terms:
        found = [r for (r,) in conn.execute("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rowid", (f'"{term}"',))]
        alike = [n for n, other in enumerate(terms, 1) if postings.token_key(other) == postings.token_key(term)]
        assert found == alike
    # é is 0xC3 0xA9 and è 0xC3 0xA8: cut after 0xC3 both are one token; b (one byte) is not
    assert postings.token_key(terms[0]) == postings.token_key(terms[2]) != postings.token_key(terms[3])
    assert postings.token_key("short") == "short"
    index = _prepared()  # and in the index: the two are one term of a document, twice
    _write(index, "long.md", [[terms[0], "tea", terms[2]], [terms[3], terms[1]]], 0)
    _compare(index, [[terms[0]], [terms[3], "tea"], [terms[1], terms[4]]], {}, None)


_documents = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=1, max_size=3)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), _documents, st.integers(0, 140)),
        st.tuples(st.just("remove"), st.integers(0, 50)),
        st.tuples(st.just("remove last"), st.integers(0, 0)),
    ),
    min_size=1,
    max_size=14,
)
_queries = st.lists(st.lists(st.sampled_from([*WORDS, "absent"]), min_size=1, max_size=5, unique=True), max_size=3)


def _prepared():
    conn = _cache.Connection(":memory:")
    SearchIndex(Path("unused"))._prepare(conn)  # the real schema and meta rows, as the index makes them
    conn.execute(FTS)
    conn.execute("CREATE VIRTUAL TABLE docs_vocab USING fts5vocab (docs, 'row')")
    return conn


def _write(conn, path: str, documents: list[list[str]], extra_rows: int) -> None:
    """One file through the real index code, and the same documents into the FTS5 table."""
    bodies = [" ".join(d) for d in documents]
    # the uncited document (group 0) is its rows' text; the cited ones are sent as `docs`
    rows = [(n + 1, 0, n, bodies[0] if n == 0 else "t", "") for n in range(len(documents) + extra_rows)]
    item = Parsed.of_rows(
        path,
        (1, 1, 1, 1),
        (None, None, None, None),
        "",
        rows,
        [f"s{n}" for n in range(1, len(documents))],
        "",
        bodies[1:],
    )
    pending = postings.Pending()
    _remove_both(conn, path)
    _insert(conn, item, pending, racy=False)
    pending.flush(conn)
    base = conn.execute("SELECT id FROM search_files WHERE path = ?", (path,)).fetchone()[0] << 6
    conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", [(base + n, b) for n, b in enumerate(bodies)])


def _remove_both(conn, path: str) -> None:
    found = conn.execute("SELECT id, rows FROM search_files WHERE path = ?", (path,)).fetchone()
    if found is None:
        return
    pending = postings.Pending()
    _remove(conn, path)
    pending.flush(conn)  # a transaction that only removes still rewrites a range where many documents died
    conn.execute("DELETE FROM docs WHERE rowid BETWEEN ? AND ?", (found[0] << 6, (found[0] << 6) + found[1]))


def _compare(conn, queries: list[list[str]], kept, vocabulary: list[str] | None = WORDS) -> None:
    """fsmem's scores and frequencies against FTS5's, and FTS5's two counts (fts5vocab, MATCH) against each
    other; without a `vocabulary`, only the queries' terms are counted (fts5vocab cannot show a cut term)."""
    for query in queries:
        match = " OR ".join(f'"{t}"' for t in query)
        for limit in (3, 3000):
            fts = conn.execute(
                "SELECT rowid, -bm25(docs) AS r FROM docs WHERE docs MATCH ? ORDER BY r DESC, rowid LIMIT ?",
                (match, limit),
            ).fetchall()
            best, scores = postings.bm25(conn, query, limit, kept)
            ids = postings.decoded(conn, kept).ids
            found = list(zip([ids[at] for at in best], scores, strict=True))
            assert found == [tuple(r) for r in fts]  # every float to the bit
    asked = [*vocabulary, "absent"] if vocabulary is not None else list(dict.fromkeys(sum(queries, [])))
    matched = {
        t: conn.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (f'"{t}"',)).fetchone()[0] for t in asked
    }
    if vocabulary is not None:
        vocab = dict(conn.execute("SELECT term, doc FROM docs_vocab").fetchall())
        assert set(vocab) <= set(asked)
        assert {t: n for t, n in vocab.items() if n} == {t: n for t, n in matched.items() if n}  # FTS5 agrees
    assert postings.frequencies(conn, asked, kept) == {t: n for t, n in matched.items() if n}


@settings(max_examples=40, deadline=None)
@given(_steps, _queries, st.sampled_from([(8, 64, 1_000_000, 8), (1, 2, 1_000_000, 1000), (0, 1, 5, 1)]))
def test_scores_and_frequencies_are_fts5s_after_any_writes_and_removals(steps, queries, shape):
    """Small ranges (`CHUNK_BITS` 0 or 1), ranges rewritten after every death or two, few values kept per
    state, every term dense or none: the very floats of FTS5's bm25(), in its order, and its document
    frequencies."""
    saved = postings.CHUNK_BITS, postings.PURGE_DEAD, postings.KEPT_POSTINGS, postings.DENSE
    postings.CHUNK_BITS, postings.PURGE_DEAD, postings.KEPT_POSTINGS, postings.DENSE = shape
    try:
        conn = _prepared()
        paths: list[str] = []
        for n, step in enumerate(steps):
            if step[0] == "write":
                path = f"f{n % 5}.md" if n % 3 else f"g{n}.md"
                _write(conn, path, step[1], step[2])
                paths = [p for p in paths if p != path] + [path]
            elif paths:
                path = paths[-1] if step[0] == "remove last" else paths[step[1] % len(paths)]
                _remove_both(conn, path)
                paths.remove(path)
            if paths:
                kept: dict = {}
                _compare(conn, queries, kept)
                _compare(conn, queries, kept)  # again from what this state kept
        ids = [i for (i,) in conn.execute("SELECT id FROM search_files ORDER BY id")]
        assert ids == sorted(set(ids))
    finally:
        postings.CHUNK_BITS, postings.PURGE_DEAD, postings.KEPT_POSTINGS, postings.DENSE = saved


@pytest.mark.parametrize("dense", [1, 8, 1000])
def test_scores_on_a_larger_memory_are_fts5s_to_the_bit(monkeypatch, dense):
    """Hundreds of documents over a skewed vocabulary and queries of many terms: where the order of a
    score's additions shows in its last bit (the examples above are too small to show it often); with
    sparse sums (DENSE 1: rare terms), dense ones (1000), and both."""
    monkeypatch.setattr(postings, "DENSE", dense)
    rng = random.Random(20)
    vocabulary = [f"w{n}" for n in range(40)]
    conn = _prepared()
    for n in range(300):
        documents = [rng.choices(vocabulary, weights=range(40, 0, -1), k=rng.randint(1, 30)) for _ in range(2)]
        _write(conn, f"f{n}.md", documents, rng.randint(0, 3))
        if n % 7 == 3:
            _remove_both(conn, f"f{n - 2}.md")
    queries = [rng.sample(vocabulary, rng.randint(3, 8)) for _ in range(150)]
    _compare(conn, queries, {}, vocabulary)


_scores = st.lists(st.sampled_from([0.0, 0.0, 0.1 + 0.2, 0.3, 1.0, 2.5, 1e-6]) | st.floats(0, 10), max_size=3000)


@settings(max_examples=200, deadline=None)
@given(_scores, st.integers(0, 400), st.sampled_from([1, 2, 16]))
def test_the_best_scores_are_picked_as_a_full_sort_ranks_them(values, limit, every):
    """`best_first` against the full sort it replaces: the same positions, in the same order, ties by position,
    whether its cut lets enough values through or not (few distinct scores, many zeros, a sample of every
    value, of every other, of every 16th)."""
    saved, postings.SAMPLE_EVERY = postings.SAMPLE_EVERY, every
    try:
        expected = sorted(range(len(values)), key=values.__getitem__, reverse=True)[:limit]
        assert postings.best_first(values, limit) == expected
    finally:
        postings.SAMPLE_EVERY = saved


def _ranking(memory, query):
    """Every candidate's path, line and score (without the retrieval log, which each search adds to)."""
    memory.search_index.refresh()
    found = scoring.rank(memory.search_index, query, memory.search_settings)
    return [(found.paths[i], found.lines[i], found.scores[i]) for i in found.ids]


def _rows_by_chunk(memory) -> dict[int, list[tuple]]:
    conn = _cache.connect(_cache.cache_path(memory.root))
    try:
        found: dict[int, list[tuple]] = {}
        for row in conn.execute("SELECT chunk, term, n, docs, counts FROM search_postings ORDER BY chunk, term"):
            found.setdefault(row[0], []).append(tuple(row[1:]))
        return found
    finally:
        conn.close()


def test_a_file_written_touches_only_its_own_range_and_dead_postings_go_when_many(tmp_path, monkeypatch):
    """A write adds to the last range's rows (a common term's other postings stay as they are); a changed
    file's old postings are skipped, and dropped when its range has PURGE_DEAD dead documents."""
    from fsmem import Memory

    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    monkeypatch.setattr(postings, "CHUNK_BITS", 2)  # four file ids a range
    monkeypatch.setattr(postings, "PURGE_DEAD", 3)
    monkeypatch.setattr(search_index, "RACY_NS", 0)  # a file is indexed once, not again at the next search
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "topics").mkdir()
    for n in range(12):
        (root / "topics" / f"t{n:02}.md").write_text(f"# T{n}\n\n- walrus budget {n}: ledger\n", encoding="utf-8")
    memory = Memory(root)
    memory.search("walrus ledger")
    before = _rows_by_chunk(memory)
    last = max(before)
    memory.note("a walrus on the ledger")
    memory.search("walrus")
    after = _rows_by_chunk(memory)
    assert {c: r for c, r in after.items() if c < last} == {c: r for c, r in before.items() if c < last}
    conn = _cache.connect(_cache.cache_path(root))
    chunk = conn.execute("SELECT id FROM search_files WHERE path = 'topics/t05.md'").fetchone()[0] >> 2
    paths = [p for (p,) in conn.execute("SELECT path FROM search_files WHERE id >> 2 = ? ORDER BY id", (chunk,))]
    assert len(paths) >= 3
    for path in paths[:2]:
        (root / path).write_text("# Changed\n\n- walrus budget again: ledger\n", encoding="utf-8")
        memory.search("walrus")
    assert _rows_by_chunk(memory)[chunk] == before[chunk]  # two dead documents in its range: skipped, kept
    assert {h.path for h in memory.search("walrus budget again").hits[:2]} == set(paths[:2])
    (root / paths[2]).write_text("# Changed\n\n- walrus budget again: ledger\n", encoding="utf-8")
    memory.search("walrus")
    live = {fid << 6 for (fid,) in conn.execute("SELECT id FROM search_lengths")}  # one document each here
    purged = _rows_by_chunk(memory)[chunk]  # the third: the range written again, without them
    assert purged != before[chunk]
    assert all(set(postings._decode(chunk, n, docs, counts)[0]) <= live for _t, n, docs, counts in purged)
    assert conn.execute("SELECT count(*) FROM search_dead WHERE chunk = ?", (chunk,)).fetchone() == (0,)
    conn.close()
    found = _ranking(memory, "walrus ledger budget again")
    memory.close()
    shutil.rmtree(root / ".fsmem")
    assert _ranking(Memory(root), "walrus ledger budget again") == found  # what a new index gives


_FILES = [
    # a session note: every row gets its note's month as date words, counted once per row
    (
        "sessions/2026/07/14/s1.md",
        "---\ntitle: Call\n---\n# Call\n\n- renewal renewal for Acme [D1:3]\n- the the\n\nÜrümqi Straße déjà vu\n",
    ),
    # a term past FTS5's 32,768 bytes, which it cuts: counted as cut, as the documents' own counting does
    ("topics/long.md", f"# Long\n\n{'x' * 33000} {'x' * 33000}y plain words\n\nplain again\n"),
    ("topics/empty.md", "---\ntitle: Empty\n---\n"),
    ("topics/stop.md", "# Stop\n\nthe and of\n"),
]


@pytest.mark.parametrize(("rel", "text"), _FILES)
def test_a_parsed_file_counts_its_document_as_its_terms_give_it(rel, text):
    """Where no row cites a note, parse_file counts the file's document from the words it looked up: the same
    length and counts as the document's terms counted one by one (`postings.counted`), as the command
    writing the file counted them before."""
    parsed = parse_file(rel, text, (1, 1, 1, 1), Analyzer())
    assert not parsed.sources
    expected = postings.counted([(n, body) for n, body in enumerate(parsed.documents()) if body])
    assert _as_dicts(parsed.counted) == _as_dicts(expected)


def _as_dicts(found) -> list[tuple[int, int, dict[str, int]]]:
    out = []
    for n, length, terms, packed in found:
        counts = array("I")
        counts.frombytes(packed)
        out.append((n, length, dict(zip(terms.split(" ") if terms else [], counts, strict=True))))
    return out
