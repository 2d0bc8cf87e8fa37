"""fsmem.search._native against its Python twins: the document part of the score (fsmem.search.postings: the
same positions, the same floats to the bit, ties in the same order, the same rows refused as damaged;
tests/test_postings.py runs it against FTS5's bm25() on both paths), and a cold build's cutting of a plain
body's sections into rows (fsmem.format.rows.plain_rows) and of its rows' texts into stems
(fsmem.search.analyzer.stemmed_texts): the same strings, numbers and counts, in the same order."""

from __future__ import annotations

import importlib
import itertools
import math
import random
import struct
from array import array
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from fsmem.format.rows import plain_rows, plain_sections
from fsmem.search import postings
from fsmem.search.analyzer import Analyzer, stemmed_texts
from fsmem.search.index import SearchIndex
from fsmem.search.parsing import row_columns
from fsmem.search.postings import add_postings
from fsmem.store import cache as _cache

NATIVE = postings._native
NOT_BUILT = (
    "fsmem.search._native is not built: `make install` compiles fsmem/search/_native.c, which needs a C compiler "
    "and the Python headers (the compiler's messages: .venv/bin/python -m pip install -v --no-deps -e .)"
)


def test_the_native_module_is_built():
    """`make install` compiles the C module, on CI too: a build that failed (it is optional, so the install
    goes on) must not leave every search on the Python twin unnoticed."""
    try:
        module = importlib.import_module("fsmem.search._native")
    except ImportError as exc:
        pytest.fail(f"{NOT_BUILT} ({exc})")
    assert module is NATIVE
    assert {
        "term_parts",
        "best_documents",
        "plain_rows",
        "plain_sections",
        "row_columns",
        "stemmed_texts",
        "encode_postings",
    } <= set(dir(module))


def _prepared():
    conn = _cache.Connection(":memory:")
    SearchIndex(Path("unused"))._prepare(conn)  # the real schema, as the index makes it
    return conn


def _outcome(conn, phrases: list[list[str]], limit: int):
    """What a fresh state answers, every float as its bytes: each term's hits, positions, parts and dense
    parts, each query's best documents and scores; or that the index is damaged."""
    try:
        index = postings.decoded(conn, {})
        terms = {}
        for phrase in dict.fromkeys(sum(phrases, [])):
            term = index.term(conn, phrase)
            dense = term.dense.tobytes() if term.dense is not None else None
            terms[phrase] = (term.hits, term.positions.tolist(), term.parts.tobytes(), dense)
        answers = []
        for query in phrases:
            best, scores = postings.bm25(conn, query, limit, {postings._DECODED: index})
            answers.append((best, struct.pack(f"{len(scores)}d", *scores)))
        return terms, answers
    except postings.IndexDamaged:
        return "damaged"


_KINDS = ["docs byte", "docs cut", "docs longer", "counts cut", "counts width", "n", "chunk", "chunk negative"]
_DAMAGE = st.just("none") | st.sampled_from([*_KINDS, "chunk huge", "large gap", "types"])


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from([(0, 1), (1, 8), (8, 1000), (8, 8)]))
def test_the_c_module_and_its_python_twin_answer_alike(data, shape):
    """On random files (one document or many, some removed: their postings are dead), random terms' posting
    rows as the index writes them (gaps of one byte and of four, counts of 1, 2 or 4 bytes) or damaged, and
    random queries: the same positions and floats to the bit, ties in the same order, or IndexDamaged from
    both."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    saved = postings.CHUNK_BITS, postings.DENSE
    postings.CHUNK_BITS, postings.DENSE = shape
    try:
        conn = _prepared()
        fid, files = data.draw(st.integers(0, 3)), []
        for _ in range(data.draw(st.integers(1, 25))):
            lengths = data.draw(st.lists(st.integers(0, 40) | st.just(0), min_size=1, max_size=70))
            files.append((fid, lengths, data.draw(st.booleans() | st.just(True))))  # False: removed
            fid += (len(lengths) >> postings.BLOCK_BITS) + 1 + data.draw(st.integers(0, 6))
        conn.executemany(
            "INSERT INTO search_lengths VALUES (?, ?)",
            [(f, array("I", lengths).tobytes()) for f, lengths, live in files if live],
        )
        vocabulary = [f"t{n}" for n in range(data.draw(st.integers(1, 4)))]
        written: list[list] = []
        for term in vocabulary:
            share = data.draw(st.sampled_from([0.05, 0.3, 0.9]))
            rng = random.Random(data.draw(st.integers(0, 1 << 30)))
            rows: dict[int, tuple[list[int], list[int]]] = {}
            for f, lengths, _live in files:
                for n, length in enumerate(lengths):
                    if (length or rng.random() < 0.2) and rng.random() < share:
                        found = rows.setdefault(f >> postings.CHUNK_BITS, ([], []))
                        found[0].append((f << postings.BLOCK_BITS) + n)
                        found[1].append(rng.choice([1, 2, 3, 200, 300, 70000]))
            written += [[term, chunk, *postings._encode(chunk, ids, counts)] for chunk, (ids, counts) in rows.items()]
        if written:  # one row damaged, or none (half the time); a gap made huge, in a row before another
            kind = data.draw(_DAMAGE)
            followed = [row for row, after in zip(written, written[1:], strict=False) if row[0] == after[0]]
            rows = followed if kind == "large gap" and followed else written
            _damaged(kind, rows[data.draw(st.integers(0, len(rows) - 1))], rng)
        conn.executemany("INSERT OR REPLACE INTO search_postings VALUES (?, ?, ?, ?, ?)", written)
        queries = data.draw(st.lists(st.lists(st.sampled_from([*vocabulary, "absent"]), max_size=4), max_size=3))
        limit = data.draw(st.integers(0, 60))
        asked = [vocabulary, *queries]
        native = _outcome(conn, asked, limit)
        postings._native = None
        assert _outcome(conn, asked, limit) == native
    finally:
        postings.CHUNK_BITS, postings.DENSE = saved
        postings._native = NATIVE


# ASCII text made of what the cutting tells apart: line breaks, blank and indented lines, every ASCII space
# (\x1c-\x1f are spaces to re and str.strip), bullets and near-bullets, headings, letters, digits
_PIECES = st.sampled_from(
    ["\n", "\n\n", " ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "- ", "-", "* ", "+\t", "1. ", "12) ", "123. ", "1234. ",
     "7.", "#", "## ", "a", "Bc", "x_y", "9", "\0", ":", "[D1:3]", "\x7f"]
)  # fmt: skip
_ASCII_TEXT = st.lists(_PIECES | st.text(st.characters(max_codepoint=127), max_size=3), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(_ASCII_TEXT, st.integers(-2, 70), st.integers(-2, 70), st.integers(-5, 1000))
def test_the_c_module_cuts_rows_as_its_twin(body, begin, stop, number):
    """Any ASCII text (not only the plain bodies a cold build gives it), any range of it: the rows the C module
    cuts are `plain_rows`' (`_PLAIN_ROW`'s), with the same line numbers, texts and bullets."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    text = "\n" + body
    assert NATIVE.plain_rows(text, begin, stop, number) == plain_rows(text, begin, stop, number)
    assert NATIVE.plain_rows(text, 0, len(text), number) == plain_rows(text, 0, len(text), number)


# ASCII bodies of headings (any level, a subject, the superseded one, odd tails), bullets and lines
_HEADED_TEXT = st.lists(
    _PIECES
    | st.sampled_from(["# ", "### ", "####### ", "#\t", " #", "##", "people/Adam Smith", "a /b", " / ", "/x", "Superseded",
                       "SUPERSEDED", "\n# T", "\n## Superseded\n"])
    | st.text(st.characters(max_codepoint=127), max_size=3),
    max_size=60,
).map("".join)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_HEADED_TEXT, st.integers(-1, 50), st.sampled_from([None, "T", "a /b", "x"]), st.sampled_from([None, "topic/z"]))
def test_the_c_module_cuts_sections_as_its_twin(body, number, title, subject):
    """Any ASCII body, any first line, title and file subject: the sections the C module cuts are
    `plain_sections`' (headings, subject, superseded, and each section's rows), and so is the title."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    text = "\n" + body
    assert NATIVE.plain_sections(text, number, title, subject) == plain_sections(text, number, title, subject)


@settings(max_examples=400, deadline=None)
@given(st.lists(_ASCII_TEXT, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_the_c_module_stems_texts_as_its_twin(texts, counted, known):
    """Random ASCII texts joined as `Analyzer.texts` joins them: the same terms per text and the same counts,
    in the order they first occur; words not yet in the table (all of them, or none) stemmed alike."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    joined = " \0 ".join(t.replace("\0", "") for t in texts)
    found = []
    for cut in (NATIVE.stemmed_texts, stemmed_texts):
        analyzer = Analyzer()
        if known:
            stemmed_texts(joined, analyzer._table, analyzer._stem_new, None)
        asked: list[str] = []

        def missing(word: str, analyzer: Analyzer = analyzer, asked: list[str] = asked) -> str:
            asked.append(word)
            return analyzer._stem_new(word)

        counts: Counter[str] | None = Counter({"kept": 2}) if counted else None
        found.append((cut(joined, analyzer._table, missing, counts), counts and list(counts.items()), set(asked)))
    assert found[0] == found[1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_ASCII_TEXT, min_size=1, max_size=4), min_size=1, max_size=4))
def test_the_c_module_remembers_what_its_table_said(files):
    """Calls after calls with one table, as a worker's Analyzer makes them file after file: the words the C
    module remembers from earlier calls give the stems the table gives (the twin looks every word up)."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    ours, twins = Analyzer(), Analyzer()
    for texts in files:
        joined = " \0 ".join(t.replace("\0", "") for t in texts)
        counts, twin_counts = Counter(), Counter()
        found = NATIVE.stemmed_texts(joined, ours._table, ours._stem_new, counts, ours._memo)
        assert found == stemmed_texts(joined, twins._table, twins._stem_new, twin_counts)
        assert list(counts.items()) == list(twin_counts.items())
    assert ours._table == twins._table


def test_each_memo_remembers_its_own_tables_words():
    """Two tables that stem one word apart, called in turn, each with its memo: each gives its own stem; without
    a memo every word is looked up; anything but a WordMemo is refused."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    first, second = ({"word": "first"}, NATIVE.WordMemo()), ({"word": "second"}, NATIVE.WordMemo())
    for table, memo in (first, second, first, second):
        assert NATIVE.stemmed_texts("a Word \0 word", table, lambda w: "", None, memo) == [table["word"]] * 2
    assert NATIVE.stemmed_texts("word", {"word": "none"}, lambda w: "", None) == ["none"]
    with pytest.raises(TypeError):
        NATIVE.stemmed_texts("word", {}, lambda w: "", None, {})
    with pytest.raises(TypeError):
        NATIVE.WordMemo(1)


def test_the_c_module_counts_one_stem_from_many_words():
    """Words with one stem, held as different str objects by the table, are one term in the counts, in the
    order each stem first occurs; long words and stems beyond ASCII go through too."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    long_word = "x" * 100
    table = {"runs": "run", "running": "".join(["r", "un"]), "cafe": "caf\u00e9", long_word: "long", "the": ""}
    memo = NATIVE.WordMemo()
    for _again in range(2):  # the words looked up in the table, then remembered
        counts: Counter[str] = Counter({"kept": 1})
        found = NATIVE.stemmed_texts(f"Running the cafe \0 runs {long_word} RUNS", table, lambda w: w, counts, memo)
        assert found == ["run caf\u00e9", "run long run"]
        assert list(counts.items()) == [("kept", 1), ("run", 3), ("caf\u00e9", 1), ("long", 1)]


@settings(max_examples=300, deadline=None)
@given(_ASCII_TEXT)
def test_analyzer_text_in_c_is_its_translation(text):
    """`Analyzer.text` of ASCII text, cut and looked up in C where built, gives the terms its byte translation
    and split give without the module (a NUL in the text too)."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    in_c = Analyzer().text(text)
    postings._native = None
    try:
        translated = Analyzer().text(text)
    finally:
        postings._native = NATIVE
    assert in_c == translated


# text beyond ASCII in the forms a file or a question may come in: decomposed letters (NFD, macOS), lone
# combining marks, compatibility characters, and fullwidth text that NFKC turns into ASCII for the C module
_FORMS_TEXT = st.lists(
    _PIECES
    | st.sampled_from(["Zu\u0308rich", "Z\u00fcrich", "\u0308", "e\u0301", "\ufb01le", "\uff32\uff55\uff4e", "x\u00b2",
                       "\u212b", "\uff3b\uff24\uff11:\uff13\uff3d", "\u00df"])
    | st.text(max_size=3),
    max_size=40,
).map("".join)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_FORMS_TEXT)
def test_analyzer_text_of_any_form_in_c_is_as_without_it(text):
    """Text in any Unicode form gives the same terms with the C module as without it: the analyzer puts it in
    NFKC before cutting, and what is ASCII then (fullwidth letters, ligatures) is cut in C; the C module itself
    takes ASCII only, which every normal form leaves as it is."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    found = []
    for native in (NATIVE, None):
        postings._native = native
        try:
            analyzer = Analyzer()
            found.append((analyzer.text(text), analyzer.texts([text, text.upper()]), analyzer.words(text)))
        finally:
            postings._native = NATIVE
    assert found[0] == found[1]
    with pytest.raises(ValueError, match="ASCII"):
        NATIVE.stemmed_texts("Zu\u0308rich", {}, lambda w: w, None)


@settings(max_examples=200, deadline=None)
@given(st.lists(_ASCII_TEXT | _FORMS_TEXT, max_size=6))
def test_analyzer_texts_is_text_of_each(texts):
    """`Analyzer.texts`, in C where built, is `Analyzer.text` of each text, with every term and its count."""
    analyzer, terms, counts = Analyzer(), set(), Counter()
    found = analyzer.texts(texts, terms, counts)
    each = [Analyzer().text(t) for t in texts]
    assert found == each
    assert counts == Counter(" ".join(each).split())
    assert terms == set(counts)


def _damaged(kind: str, row: list, rng: random.Random) -> None:
    """`row` ([term, chunk, n, docs, counts]) damaged as a disk or a bug might: some of these the decoding
    must refuse, some it cannot tell from a valid row."""
    _term, chunk, n, docs, counts = row
    if kind == "docs byte":
        at = rng.randrange(len(docs))
        row[3] = docs[:at] + bytes([rng.choice([0, 1, 255, docs[at] ^ 1])]) + docs[at + 1 :]
    elif kind == "docs cut":
        row[3] = docs[: rng.randrange(len(docs))]
    elif kind == "docs longer":
        row[3] = docs + bytes(rng.choice([1, 4, 8]))
    elif kind == "counts cut":
        row[4] = counts[: rng.randrange(len(counts))]
    elif kind == "counts width":
        row[4] = counts + counts[: n * rng.choice([1, 2])]
    elif kind == "n":
        row[2] = rng.choice([0, -1, n - 1, n + 1, 2 * n])
    elif kind == "chunk":
        row[1] = chunk + rng.choice([-1, 1])
    elif kind == "chunk negative":
        row[1] = -rng.randint(1, 1 << 62)
    elif kind == "chunk huge":
        row[1] = rng.choice([1 << 40, 1 << 55, (1 << 63) - 1])
    elif kind == "large gap":  # the first gap made huge: its ids run into the next row's, or past 2 ** 63
        huge = struct.pack("I", rng.choice([1 << 20, (1 << 32) - 1]))
        row[3] = b"\0" + docs[1:n] + huge + (docs[n + 4 :] if docs[0] == 0 else docs[n:])
    elif kind == "types":
        at = rng.randrange(1, 5)
        row[at] = {1: rng.choice([2.5, "x"]), 2: rng.choice([2.5, "x"]), 3: "gaps", 4: "counts"}[at]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),
            st.lists(st.tuples(st.booleans(), st.sampled_from([0.0, 0.5, 1.25, 3.0]), st.booleans()), max_size=12),
        ),
        max_size=6,
        unique_by=lambda f: f[0],
    ),
    st.booleans(),
    st.integers(0, 30),
    st.booleans(),
)
def test_the_c_module_picks_the_best_rows_as_its_twin(files, keep_superseded, limit, wide):
    """Random files' matching rows (scores with ties, some rows superseded, packed rows of 2 or 4 bytes): the
    `limit` best rows the C module picks are the twin's (`rowscores.best_rows`), the very tuples in the same
    order, ties by row id; rows out of row id order are refused."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import rowscores
    from fsmem.search.index import ROW_BITS, SUPERSEDED

    found, packed = [], {}
    for fid, rows in sorted(files):
        values = [
            (n << 2) | (SUPERSEDED if superseded else 0) | (0 if wide else 2)
            for n, (superseded, _s, _m) in enumerate(rows)
        ]
        packed[fid] = array("I" if wide else "H", values)
        found += [((fid << ROW_BITS) + n, score) for n, (_sup, score, matched) in enumerate(rows) if matched]
    kept = None if keep_superseded else packed
    picked = NATIVE.best_rows(found, kept, SUPERSEDED, ROW_BITS, limit)
    saved, rowscores._native = rowscores._native, None
    try:
        twin = rowscores.best_rows(list(found), kept, limit)
    finally:
        rowscores._native = saved
    assert picked == twin and all(a is b for a, b in zip(picked, [found[found.index(t)] for t in twin], strict=True))
    if len(found) > 1:
        with pytest.raises(ValueError, match="order"):
            NATIVE.best_rows(found[::-1], kept, SUPERSEDED, ROW_BITS, limit)


# a term's part of a document's score: few distinct values (ties), zeros (documents lacking it), any float
_PART = st.sampled_from([0.0, 0.0, 0.0, 1e-6, 0.1 + 0.2, 0.3, 1.0, 2.5]) | st.floats(0, 10)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(0, 2500), st.integers(0, 700), st.integers(1, 4))
def test_the_c_module_picks_the_best_documents_as_a_full_sort_ranks_them(data, rows, limit, count):
    """The C module's best documents of dense terms (one part per document), past its cut from a sample of
    the scores or without one (few documents, a limit near them, many ties or zeros so that too few reach the
    cut, or the sample above the rest), and of sparse terms: what a full sort by score descending, then position, gives, each score the
    parts added in the query's order, to the bit."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    sparse = data.draw(st.booleans())
    terms, scores = [], [0.0] * rows
    touched = set()
    for _ in range(count):
        if sparse:
            positions = sorted(data.draw(st.sets(st.integers(0, max(rows - 1, 0)), max_size=60))) if rows else []
            parts = [data.draw(_PART) or 1e-6 for _ in positions]
            for at, part in zip(positions, parts, strict=True):
                scores[at] += part
            touched.update(positions)
            terms.append((array("i", positions), array("d", parts), None))
        else:
            seed = data.draw(st.integers(0, 1 << 30))
            rng = random.Random(seed)
            choices = [data.draw(_PART) for _ in range(data.draw(st.integers(1, 6)))]
            dense = [rng.choice(choices) for _ in range(rows)]
            if data.draw(st.booleans()):  # the sampled documents (every 16th) score above the others
                dense = [part + 20.0 if at % 16 == 0 else part for at, part in enumerate(dense)]
            scores = [a + b for a, b in zip(scores, dense, strict=True)]
            terms.append((array("i"), array("d"), array("d", dense)))
    eligible = sorted(touched) if sparse else [at for at in range(rows) if scores[at] != 0.0]
    expected = sorted(eligible, key=lambda at: (-scores[at], at))[:limit]
    best, values = NATIVE.best_documents(terms, rows, limit, sparse)
    assert best == expected
    assert struct.pack(f"{len(values)}d", *values) == struct.pack(f"{len(best)}d", *(scores[at] for at in best))


# a plain body's sections as parse_file hands them over: each its rows' lines (a line past what 30 bits hold
# packs as the largest), its context, whether superseded, whether it continues the section before's run
_SECTION = st.tuples(
    st.lists(st.integers(0, 70000) | st.sampled_from([0x3FFFFFFF, 0x40000000, 1 << 70]), max_size=6),
    st.sampled_from(["", "fact", "ann lee", "é"]),
    st.booleans(),
    st.booleans(),
)
_TERMS = st.sampled_from(["", "met bob lake", "sport", "café"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_SECTION, max_size=6), st.data(), st.sampled_from(["", "may 8 2024", "juli"]))
def test_the_c_module_makes_a_plain_body_s_columns_as_its_twin(sections, data, when):
    """Any sections (empty ones too) with any terms, dated or not: the C module's rows' terms, contexts,
    packed lines and flags, and superseded ordinals are `row_columns`'."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    n = sum(len(section[0]) for section in sections)
    terms = data.draw(st.lists(_TERMS, min_size=n, max_size=n))
    assert NATIVE.row_columns(terms, when, sections) == row_columns(terms, when, sections)
    for wrong in (terms + ["x"], terms[1:]) if terms else (["x"],):  # a row without its line, a line too many
        with pytest.raises(ValueError):
            NATIVE.row_columns(wrong, when, sections)
        with pytest.raises(ValueError):
            row_columns(wrong, when, sections)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from(["", "a", "bc", "é", "a b"]), max_size=5), st.integers(0, 1 << 40)),
        max_size=5,
    ),
    st.integers(0, 1 << 32),
)
def test_the_c_module_adds_a_document_s_postings_as_its_twin(docs, count):
    """Documents one after another into one batch's rows, terms new and met before (empty ones too, and more
    than one space between two): the same ids and counts per term; and a ValueError where the counts are not
    one a term, before the rows change."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    ours: dict[str, tuple[list[int], list[int]]] = {}
    twins: dict[str, tuple[list[int], list[int]]] = {}
    for terms, doc in docs:
        joined = " ".join(terms)
        packed = array("I", [count % (1 << 32)] * (len(joined.split(" ")) if joined else 0)).tobytes()
        NATIVE.add_postings(ours, doc, joined, packed)
        add_postings(twins, doc, joined, packed)
        for wrong in (packed + b"\0\0\0\0", packed[:-1], packed[4:]) if packed else (b"\0\0\0\0", b"\0"):
            for add, rows in ((NATIVE.add_postings, ours), (add_postings, twins)):
                with pytest.raises(ValueError):
                    add(rows, doc, joined, wrong)
    assert ours == twins


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([-1, 255, (7 << 14) - 1]),
    st.lists(st.integers(-2, 1 << 33), max_size=12),
    st.lists(st.sampled_from([0, 1, 9, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, -1]), max_size=12),
)
def test_the_c_module_encodes_a_posting_row_as_its_twin(before, steps, counts):
    """A posting row's columns from its ids (each a step after the one before: small steps, steps of 256 or
    more, past 4 bytes, none and back) and counts (each width, past 4 bytes, negative): the same bytes, or the
    same error (no ids, not as many counts, ids that do not grow, a gap or count past 4 bytes)."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    ids = list(itertools.accumulate(steps, initial=before))[1:]
    for wanted in (counts, counts[: len(ids)], [*counts, *[1] * len(ids)][: len(ids)]):
        outcomes = []
        for encode in (NATIVE.encode_postings, postings.encode_postings):
            try:
                outcomes.append(encode(before, list(ids), list(wanted)))
            except (ValueError, OverflowError) as exc:
                outcomes.append(type(exc))
        assert outcomes[0] == outcomes[1]
    if (
        ids
        and 1 <= min(steps) <= max(steps) < 1 << 32
        and len(counts) >= len(ids)
        and 0 <= min(counts[: len(ids)]) <= max(counts[: len(ids)]) < 1 << 32
    ):
        n, gaps, packed = NATIVE.encode_postings(before, ids, counts[: len(ids)])
        decoded, found = postings._decode(0, n, gaps, packed) if before == -1 else (ids, None)
        assert decoded == ids
        assert found is None or found.tolist() == counts[: len(ids)]


_PART = st.sampled_from([0.0, -0.0, 0.1, 0.3, 1e-6, 2.5, 1 / 3])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),
            st.lists(st.tuples(st.booleans(), st.integers(0, 2), _PART, st.booleans()), min_size=1, max_size=10),
            st.booleans(),
            _PART,
        ),
        max_size=5,
        unique_by=lambda f: f[0],
    ),
    st.data(),
    st.tuples(
        _PART, _PART, st.sampled_from([0.0, 0.7, 1.0]), st.sampled_from([0.37, 1.0, 7.25]), st.sampled_from([1.0, 2.3])
    ),
)
def test_the_c_module_scores_the_candidates_as_its_twin(files, data, weights):
    """Random candidate rows (linked to their neighbours or not, citing one of two notes or none, with or
    without a row part, a document part by note and by file, a subject part): the C module's relevance of
    each is the twin's (`scoring.pool_relevance`) to the bit, with the same paths and lines, in the pool's
    order."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import scoring
    from fsmem.search.index import LINKED, ROW_BITS

    of_file, raw, groups, every = {}, {}, {}, []
    for fid, rows, wide, subject in files:
        values = [
            (n + 3) << 2 | (LINKED if linked else 0) | (0 if wide else 2) for n, (linked, _c, _p, _m) in enumerate(rows)
        ]
        cites = [note for _l, note, _p, _m in rows]
        cited = array("B", cites) if any(cites) else None
        of_file[fid] = (f"f{fid}.md", array("I" if wide else "H", values), cited, ("s/a.md", "s/b.md"), subject)
        for n, (_l, _c, part, matched) in enumerate(rows):
            every.append((fid << ROW_BITS) + n)
            if matched:
                raw[(fid << ROW_BITS) + n] = part
        groups[fid << ROW_BITS] = subject * 3
    groups["s/a.md"] = 0.25
    pool = data.draw(st.permutations(every)) if every else []
    pool = pool[: data.draw(st.integers(0, len(pool)))]
    arguments = (pool, of_file, raw, groups, *weights)
    found = NATIVE.pool_relevance(*arguments, ROW_BITS, LINKED)
    saved, scoring.native_pool = scoring.native_pool, False
    try:
        twin = scoring.pool_relevance(*arguments)
    finally:
        scoring.native_pool = saved
    assert [list(d.items()) for d in found] == [list(d.items()) for d in twin]
    bits = [struct.pack("<d", score) for score in found[0].values()]
    assert bits == [struct.pack("<d", score) for score in twin[0].values()]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-(1 << 40), 1 << 40), min_size=1, max_size=30),
    st.data(),
    st.sampled_from([3.0, 1e24, 1.0, 0.37, 5e-324]),
)
def test_the_c_module_scales_the_documents_scores_as_its_twin(ids, data, denominator):
    """Random positions of an id array (repeated or not) with scores: the C module's dict of each id's score over
    the denominator is the twin's (`documents.scaled`), the same keys in the same order, floats to the bit; a
    position out of range and a zero denominator are refused alike."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import documents

    positions = data.draw(st.lists(st.integers(0, len(ids) - 1), max_size=40))
    scores = data.draw(st.lists(_PART | st.floats(0, 1e300), min_size=len(positions), max_size=len(positions)))
    kept = array("q", ids)
    found = NATIVE.scaled_documents(positions, scores, kept, denominator)
    saved, documents.native_scaled = documents.native_scaled, False
    try:
        twin = documents.scaled(positions, scores, kept, denominator)
        for bad in ((positions + [len(ids)], scores + [1.0], denominator), (positions + [0], scores + [1.0], 0.0)):
            with pytest.raises(Exception) as from_twin:
                documents.scaled(bad[0], bad[1], kept, bad[2])
            with pytest.raises(from_twin.type):
                NATIVE.scaled_documents(bad[0], bad[1], kept, bad[2])
    finally:
        documents.native_scaled = saved
    assert list(found) == list(twin)
    assert [struct.pack("<d", v) for v in found.values()] == [struct.pack("<d", v) for v in twin.values()]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 1 << 40),
        st.tuples(
            st.sampled_from([0.0, -0.0, 5e-300, 6e-300, 1.0, 1.95, math.nextafter(1.95, 2.0), float("nan")]),
            st.sampled_from(["a.md", "b.md", "topics/c.md", "é.md", "Z.md"]),
            st.integers(-3, 5) | st.just(1 << 70),
        ),
        max_size=60,
    ),
    st.randoms(use_true_random=False),
)
def test_the_c_module_orders_the_candidates_as_its_twin(rows, rng):
    """Random candidate rows with tied scores, paths and lines in any pool order: the C module's order is the
    three stable sorts' of `scoring._best_first`; where a score is NaN or a line past 64 bits it leaves the
    rows to the twin (None)."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import scoring

    pool = list(rows)
    rng.shuffle(pool)
    scores = {r: rows[r][0] for r in pool}
    paths = {r: rows[r][1] for r in pool}
    lines = {r: rows[r][2] for r in pool}
    found = NATIVE.best_first_rows(pool, scores, paths, lines)
    saved, scoring.native_pool = scoring.native_pool, False
    try:
        twin = scoring._best_first(pool, scores, paths, lines)
    finally:
        scoring.native_pool = saved
    if any(math.isnan(s) for s in scores.values()) or any(line == 1 << 70 for line in lines.values()):
        assert found is None
    else:
        assert found == twin
    assert scoring._best_first(pool, scores, paths, lines) == twin


_TIMES = st.integers(0, 40) | st.sampled_from([1, 1, 2, 7, 1 << 40, 1 << 70, -1, True, 2.0])


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.integers(0, 5), st.integers(0, 7)),
        st.tuples(_PART | st.floats(0, 1e300), st.sampled_from([3, 4, 9])),
        max_size=40,
    ),
    st.dictionaries(st.integers(0, 5), st.sampled_from([0.0, 1e-3, 1.0, 1.37, 1.5 + 1e-9, 2.0]), max_size=6),
    st.dictionaries(
        st.sampled_from(["f0.md", "f1.md", "f2.md", "f5.md"]),
        st.dictionaries(st.sampled_from([3, 4, 9]), _TIMES, max_size=3) | st.none(),
        max_size=4,
    )
    | st.none(),
    st.sampled_from([0.1, 0.25, 1.0, 1 / 3]) | st.floats(1e-3, 10),
    st.sampled_from([1, 5, 40, 1 << 40]),
    st.randoms(use_true_random=False),
)
def test_the_c_module_scores_the_salience_as_its_twin(rows, base, by_path, w_usage, top, rng):
    """Random candidate rows of a few files, each file's base factor and the retrieval log's counts by path and
    line (some rows never returned, some files absent, counts of other types): the C module's scores are the
    twin's (`scoring.salience_scores`) to the bit, in the pool's order; where a count or a file's factor is not
    of its type it leaves the rows to the twin (None), and where the twin raises, it raises alike."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import scoring
    from fsmem.search.index import ROW_BITS

    pool = [fid << ROW_BITS | ordinal for fid, ordinal in rows]
    rng.shuffle(pool)
    relevance = {rid: rows[rid >> ROW_BITS, rid & 255][0] for rid in pool}
    paths = {rid: f"f{rid >> ROW_BITS}.md" for rid in pool}
    lines = {rid: rows[rid >> ROW_BITS, rid & 255][1] for rid in pool}
    arguments = (pool, base, relevance, paths, lines, by_path, w_usage, math.log1p(top))
    saved, scoring.native_pool = scoring.native_pool, False
    try:
        twin = scoring.salience_scores(*arguments)
    except (KeyError, ValueError) as raised:
        twin = raised
    finally:
        scoring.native_pool = saved
    found = NATIVE.salience_scores(*arguments, ROW_BITS)
    counts = [n for lines_of in (by_path or {}).values() for n in (lines_of or {}).values()]
    odd = any(type(n) is not int or not 0 <= n < 1 << 63 for n in counts)
    if found is None:
        assert isinstance(twin, Exception) or odd
    else:
        assert not isinstance(twin, Exception)
        assert list(found) == list(twin)
        assert [struct.pack("<d", v) for v in found.values()] == [struct.pack("<d", v) for v in twin.values()]
    if not isinstance(twin, Exception):
        assert scoring.salience_scores(*arguments) == twin


def test_the_c_module_scores_each_count_of_usage_as_its_twin():
    """Every count from 1 to 300 at weights where the order of the usage term's operations shows in the last
    bit (a file's base factor 0.0 leaves it bare): the C module's scores are the twin's to the bit."""
    if NATIVE is None:
        pytest.fail(NOT_BUILT)
    from fsmem.search import scoring
    from fsmem.search.index import ROW_BITS

    pool = [1 << ROW_BITS | n for n in range(300)]
    paths = dict.fromkeys(pool, "f1.md")
    lines = {rid: rid & 511 for rid in pool}
    by_path = {"f1.md": {line: line + 1 for line in lines.values()}}
    for w_usage in (0.1, 0.3, 1 / 3, 0.7, 2.9):
        arguments = (pool, {1: 0.0}, dict.fromkeys(pool, 1.0), paths, lines, by_path, w_usage, math.log1p(301))
        saved, scoring.native_pool = scoring.native_pool, False
        try:
            twin = scoring.salience_scores(*arguments)
        finally:
            scoring.native_pool = saved
        found = NATIVE.salience_scores(*arguments, ROW_BITS)
        assert [struct.pack("<d", v) for v in found.values()] == [struct.pack("<d", v) for v in twin.values()]
