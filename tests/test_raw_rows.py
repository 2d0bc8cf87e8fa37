"""A cold build's raw rows (fsmem.search.raw_rows): the native tokenizer that the writing connection cuts them with
gives the analyzer's terms, in the same positions, and counts them as the workers count them; texts that are not
raw go through FTS5's own `ascii` as before; and a build whose workers send raw rows writes the same tables, to the
byte, as one that stems every row in Python."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from array import array
from collections import Counter
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings, strategies as st

from fsmem import Memory
from fsmem.search import index as search_index, raw_rows
from fsmem.search.analyzer import STOP_WORDS, Analyzer
from fsmem.store import workers

pytestmark = pytest.mark.skipif(
    not raw_rows.register(apsw.Connection(":memory:")), reason="the native module cuts no raw rows here"
)
ANALYZER = Analyzer()


def _cutting() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    assert raw_rows.register(conn)
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5 (text, context, content='', detail=full, tokenize='ascii');"
        "CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')"
    )
    return conn


def _positions(conn, row: int) -> list[tuple[str, str, int]]:
    return sorted(
        (
            (col, offset, term)
            for term, col, offset in conn.execute("SELECT term, col, offset FROM v WHERE doc = ?", (row,))
        ),
    )


WORDS = st.sampled_from(
    [
        *sorted(STOP_WORDS),
        "Running",
        "GENERALIZATION",
        "flies",
        "ares",
        "2023",
        "07",
        "x",
        "api",
        "sk9f8a7b6c5d4e3f2a1b0c9",  # a machine token: 20 characters or more, letters and digits
        "12345678901234567890123",  # only digits: a term
        "abcdefghijklmnopqrstuvwxyz",  # only letters: a term
        "[D1:3]",
        "[12:4]",
        "[D1:]",
        "place_of_death",
        "e-mail",
        "C++",
        "don't",
    ]
)
# words about the machine token's length (TOKEN_CHARS, 20): 18 to 22 characters, letters and one digit or none
NEAR_TOKENS = st.builds(
    lambda n, last, head: (head + "a" * n)[: n - 1] + last,
    st.integers(18, 22),
    st.sampled_from("0123456789aZ"),
    st.text(alphabet="ab9Z_", max_size=3),
)
CONTROLS = st.text(alphabet=[chr(c) for c in range(32)] + ["\x7f", "a", "Z", "9", " ", "_"], max_size=40)
TEXTS = st.one_of(
    st.lists(WORDS, max_size=12).map(" ".join),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=60),
    st.lists(st.one_of(WORDS, st.text(alphabet="aZ09[]:_- .\t\0\x01", max_size=6)), max_size=10).map("".join),
    st.lists(st.one_of(NEAR_TOKENS, WORDS, CONTROLS), max_size=10).map(" ".join),
    st.lists(NEAR_TOKENS, max_size=6).map("".join),
    CONTROLS.map(lambda text: "\x01" + text),  # a row of the file that begins with the raw mark's byte
    # many distinct words in one file: the cutter's table of words grows past its first size
    st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=24), max_size=300).map(
        " ".join
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=4), st.sampled_from(["", "July 15 2023", "May"]))
def test_a_raw_row_is_cut_into_the_analyzer_s_terms_and_counted_as_a_worker_counts_them(texts, when):
    raw = raw_rows.raw_texts(texts, when)
    assert raw is not None  # ASCII and short
    conn = _cutting()
    raw_rows.take(conn)
    conn.executemany("INSERT INTO t (rowid, text, context) VALUES (?, ?, ?)", [(n, t, "") for n, t in enumerate(raw)])
    values, document, found = raw_rows.take(conn)
    stems = [ANALYZER.terms(f"{text} {ANALYZER.text(when)}") for text in texts]
    for n, terms in enumerate(stems):  # the terms the index stored when workers sent stems: FTS5's `ascii` cut them
        assert _positions(conn, n) == [("text", at, term) for at, term in enumerate(terms)]
    counts = Counter(itertools.chain.from_iterable(stems))
    assert values == len(texts)
    if not counts:
        assert document is None and found == ""
        return
    n, length, terms, packed = document
    assert (n, length) == (0, sum(counts.values()))
    assert dict(zip(terms.split(" "), array("I", packed), strict=True)) == counts
    assert found == terms
    assert list(terms.split(" ")) == list(dict.fromkeys(itertools.chain.from_iterable(stems)))  # as they came


def test_a_text_not_raw_goes_through_fts5_s_ascii_as_before():
    plain = apsw.Connection(":memory:")
    conn = _cutting()
    plain.execute(
        "CREATE VIRTUAL TABLE t USING fts5 (text, context, content='', detail=full, tokenize='ascii');"
        "CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')"
    )
    row = (1, "Run runs [D1:3] the ÉCOLE café x-y", "juli 2023")
    for each in (plain, conn):
        each.execute("INSERT INTO t (rowid, text, context) VALUES (?, ?, ?)", row)
    assert _positions(conn, 1) == _positions(plain, 1)
    assert ("text", 2, "d1") in _positions(conn, 1)  # not cut as fsmem's analyzer would (that is for raw rows)
    assert raw_rows.take(conn)[0] == 0
    # and a query's terms too: every text a query gives FTS5 is its own
    assert conn.execute("SELECT rowid FROM t WHERE t MATCH 'd1 AND juli'").fetchall() == [(1,)]


def test_rows_are_raw_only_where_the_analyzer_s_ascii_path_cuts_them():
    assert raw_rows.raw_texts(["an ASCII row"], "") == [f"{raw_rows.RAW}an ASCII row"]
    assert raw_rows.raw_texts(["a row", "Kaffee für alle"], "") is None
    assert raw_rows.raw_texts(["x" * 40_000], "") is None  # a word FTS5 would store cut shorter
    assert raw_rows.raw_texts([], "") is None


def _write_memory(root: Path) -> None:
    """Files of every kind a build meets: plain rows (raw), a note's dated rows, rows that cite notes, rows
    with Unicode, markers and machine tokens, an empty file."""
    Memory.init(root)
    for number in range(48):
        folder = ("entities/people", "topics", "sessions/2026/07")[number % 3]
        lines = [
            f"- Renewal of contract {number} [D{number}:3] for ACME, the owner's running notes",
            "- The API key sk9f8a7b6c5d4e3f2a1b0c9d8 was rotated; place_of_death is a field",
        ]
        if number % 5 == 0:
            lines.append("- Kaffee für alle, café crème")
        if number % 7 == 0:
            lines.append("- Moved to Berlin (2026-07-14, sessions/2026/07/note-0002.md)")
        if folder.startswith("sessions"):  # dated by its folder: each row holds its date's words
            folder = f"{folder}/{1 + number % 28:02d}"
        path = root / folder / f"note-{number:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "\n".join(lines)
        path.write_text(f"---\ntitle: Note {number}\ntype: semantic\n---\n# Note {number}\n\n## Facts\n{body}\n")
    (root / "topics" / "empty.md").write_text("")
    settled = 1_700_000_000
    for path in root.rglob("*.md"):
        os.utime(path, (settled, settled))


def _dump(root: Path) -> dict[str, list]:
    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE temp.fts_i USING fts5vocab(main, search_fts, 'instance');"
            "CREATE VIRTUAL TABLE temp.names_i USING fts5vocab(main, search_names, 'instance')"
        )
        sql = {
            "fts": "SELECT * FROM temp.fts_i ORDER BY 1, 2, 3, 4",
            "names": "SELECT * FROM temp.names_i ORDER BY 1, 2, 3, 4",
            "sizes": "SELECT * FROM search_fts_docsize ORDER BY id",
            "postings": "SELECT * FROM search_postings ORDER BY 1, 2",
            "lengths": "SELECT * FROM search_lengths ORDER BY 1",
            "terms": "SELECT * FROM search_terms ORDER BY 1",
            "files": "SELECT id, path, rows, docs, lines, groups, sources FROM search_files ORDER BY id",
        }
        return {name: conn.execute(query).fetchall() for name, query in sql.items()}
    finally:
        conn.close()


def test_a_build_from_raw_rows_writes_the_tables_a_build_from_stems_writes(tmp_path, monkeypatch):
    template = tmp_path / "memory"
    _write_memory(template)
    monkeypatch.setattr(search_index, "BATCH_FILES", 20)  # a build in batches, of workers' tasks
    monkeypatch.setattr(search_index, "TASKS_PER_BATCH", 2)
    monkeypatch.setattr(search_index, "FIRST_TASK_FILES", 5)
    monkeypatch.setattr(workers, "PARALLEL_FROM", 5)
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    monkeypatch.setenv("FSMEM_NOW", "2026-09-01T12:00:00+00:00")
    taken = []
    real_take = raw_rows.take
    monkeypatch.setattr(raw_rows, "take", lambda conn: taken.append(1) or real_take(conn))
    dumps = []
    for cut in (True, False):
        root = tmp_path / f"cut-{cut}"
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        if not cut:
            monkeypatch.setattr(raw_rows, "register", lambda conn: False)
        index = search_index.SearchIndex(root)
        assert index.refresh() >= 49  # and the files Memory.init wrote
        index.close()
        dumps.append(_dump(root))
        shutil.rmtree(root / ".fsmem" / "logs", ignore_errors=True)
    assert len(taken) > 20  # the raw rows' files: most of them
    assert dumps[0] == dumps[1]
    assert len(dumps[0]["fts"]) > 500 and dumps[0]["postings"] and dumps[0]["terms"]
