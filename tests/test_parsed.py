"""The rows answers are read back from (`fsmem.search.parsed`): parsed once per version, never behind a lock."""

from __future__ import annotations

import hashlib
import os
import threading
from unittest import mock

import pytest
from hypothesis import example, given, settings, strategies as st

from fsmem import Memory, format as fmt
from fsmem.format import fences
from fsmem.format.rows import document_rows
from fsmem.search.parsed import FileRows, kept_file, ranked_cut
from fsmem.search.parsing import is_ranked, ranked_rows

DOC = "---\ntitle: Walrus {n}\ntype: semantic\n---\n# Walrus {n}\n\n- walrus fact {n}: tusks of ivory\n"


def test_a_file_is_parsed_once_however_many_answers_show_it(tmp_path):
    """64 files were kept parsed: two searches that showed 50 files each parsed them again at every answer."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    for n in range(100):
        text = DOC.format(n=n) if n < 50 else DOC.format(n=n).replace("walrus", "narwhal").replace("Walrus", "Narwhal")
        (memory.root / "topics" / f"w{n:03d}.md").write_text(text)
    parsed = memory.search_index.parsed
    for _ in range(3):
        for animal in ("walrus", "narwhal"):
            shown = {h.path for h in memory.search(f"{animal} tusks", max_results=50, max_tokens=8000).hits}
            assert len(shown) == 50
    assert parsed.parses == 100
    target = memory.root / "topics" / "w007.md"
    target.write_text(DOC.format(n="seven"))
    os.utime(target, ns=(1, 1))  # a new version, whatever the clock's grain
    assert memory.search_index.rows_of("topics/w007.md")[1][0].title == "Walrus seven"
    assert parsed.parses == 101


def test_kept_files_are_bounded_by_their_bytes(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    parsed = memory.search_index.parsed
    parsed.max_bytes = 3 * len(DOC.format(n=100))
    for n in range(100, 110):
        (memory.root / "topics" / f"w{n}.md").write_text(DOC.format(n=n))
        assert parsed.rows_of(f"topics/w{n}.md") is not None
    assert len(parsed._files) == 3 and parsed.kept_bytes <= parsed.max_bytes
    assert parsed.rows_of("topics/missing.md") is None


def test_answers_are_read_back_while_the_index_is_being_refreshed(tmp_path):
    """Rows were read back under the index's writer lock: every search waited for a refresh to finish."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "w.md").write_text(DOC.format(n=1))
    index = memory.search_index
    held, release = threading.Event(), threading.Event()

    def refresh_holding_the_lock() -> None:
        with index.lock:
            held.set()
            release.wait(10)

    writer = threading.Thread(target=refresh_holding_the_lock)
    writer.start()
    assert held.wait(10)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(index.rows_of("topics/w.md")))
    reader.start()
    reader.join(5)
    finished = not reader.is_alive()
    release.set()
    writer.join(10)
    reader.join(10)
    assert finished
    assert got[0][1][0].text == "- walrus fact 1: tusks of ivory"


_LINES = [
    "# Title",
    "## people/Ann Lee",
    "## Superseded",
    "### Deeper",
    "- sport: pesäpallo",
    "- Wow: that save was amazing!",
    "* key two: value",
    "+ plus",
    "  continued line",
    "1. numbered",
    "- ",
    "plain words here",
    "```",
    "code: line",
    "<!-- c -->",
    "x\ry",
    "",
    "",
]


@given(
    st.lists(st.sampled_from(_LINES), max_size=30),
    st.sampled_from(["", "---\ntitle: T\n---\n", "---\nentity: people/Ann\n---\n"]),
    st.sampled_from(["topics/t.md", "INDEX.md"]),
)
@example(["- a", "```", "code: line", "", ""], "", "topics/t.md")  # a fence left open: its row ends on a blank line
def test_rows_read_back_are_the_rows_of_the_file(lines, front, rel):
    """Kept as tuples and made a Row at a time, the rows answers show are those the file's parse gives, facts
    told from bullets, whether the body is cut by sections or line by line."""
    text = front + "\n".join(lines) + "\n"
    expected = ranked_rows(rel, text, document_rows(rel, fmt.split(text))) if is_ranked(rel, text) else []
    rows = FileRows(rel, kept_file(ranked_cut(rel, text)))
    assert list(rows) == expected
    assert len(rows) == len(expected)
    assert rows[1:-1] == expected[1:-1]
    if expected:
        assert rows[-1] == expected[-1]
    with pytest.raises(IndexError):
        rows[len(expected)]


def test_a_consolidated_note_reads_back_its_fenced_blocks_only():
    body = "# S\n\n- met: Bob\n\n```\nsaved words\n```\n"
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    text = f"---\ntitle: S\n{fmt.CONSOLIDATED_FIELD}: sha256-{digest}\n---\n{body}"
    rel = "sessions/2026/01/01/s.md"
    assert fmt.is_consolidated(text)
    rows = FileRows(rel, kept_file(ranked_cut(rel, text)))
    assert [(r.line, r.text, r.kind) for r in rows] == [(9, "```\nsaved words\n```", "paragraph")]


_HEADS = ["---\ntitle: Ivory {n}\n---\n", "---\ntitle: Ivory {n}\n...\n", "---\t\ntopic: tusks {n}\n---  \n"]
_HEADS += [
    "---\r\ntitle: Ivory {n}\r\n---\r\n",
    "---\ntitle: Ivory {n}\rowner: x\n---\n",
    "\ufeff---\ntitle: Ivory {n}\n---\n",
    "",
]
_BODIES = [
    "# Ivory {n}\n\n- walrus tusks: {n} kg\n- narwhal tusk {n}\n",
    "## Facts\n- walrus tusks: {n}\r\n\n- seals\n",
]
_BODIES += ["- tusks of ivory {n}\n\n## Old (superseded)\n- walrus tusks: {n} cm\n"]


@settings(max_examples=6, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(_HEADS), st.sampled_from(_BODIES)), min_size=1, max_size=8),
    st.lists(
        st.sampled_from(["walrus tusks", "ivory narwhal", "tusks 3 kg", "seals ivory", "superseded walrus"]),
        min_size=1,
        max_size=3,
    ),
)
def test_answers_are_the_same_when_front_matter_is_found_line_by_line(tmp_path_factory, files, questions):
    """The rows read back from files whose fences `split` finds with one pattern (`fences.plain_fences`) are those its
    line-by-line path gives: the same answers, titles, headings and superseded marks (two memories, as a
    question asked again scores its rows' use)."""

    def answers() -> list[dict]:
        memory = Memory.init(tmp_path_factory.mktemp("mem") / "mem")
        (memory.root / "topics").mkdir()
        for n, (head, body) in enumerate(files):
            path = memory.root / "topics" / f"t{n}.md"
            path.write_bytes((head + body).format(n=n).encode())
            os.utime(path, ns=(1_780_000_000 * 10**9, 1_780_000_000 * 10**9))  # the same recency in both
        return [memory.search(q, max_tokens=4000).to_dict() for q in questions]

    with mock.patch.dict(os.environ, {"FSMEM_NOW": "2026-06-01T00:00:00+00:00"}):
        fast = answers()
        with mock.patch.object(fences, "plain_fences", lambda _text: None):
            assert answers() == fast


def test_a_hand_edit_of_the_same_size_and_time_is_read_back(tmp_path):
    """A file is kept parsed per version: an edit that keeps its size and mtime still has a new ctime, and the
    version read back is the one whose bytes were read."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    target = memory.root / "topics" / "w.md"
    target.write_text(DOC.format(n=1))
    before = target.stat()
    assert "tusks of ivory" in memory.search("walrus tusks").to_text()
    target.write_text(DOC.format(n=1).replace("tusks of ivory", "tusks of bones"))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    shown = memory.search("walrus tusks").to_text()
    assert "tusks of bones" in shown and "tusks of ivory" not in shown


def test_rows_read_with_the_index_stamp_are_the_file_as_it_is_now(tmp_path):
    """An answer passes the stamp the index holds (`expected`): a file not kept at that stamp is read without a
    stat first, and one kept at it is still stat'ed, so a same-size edit with its mtime put back (only its ctime
    moves) is read again, whether or not the version before was kept."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    target = memory.root / "topics" / "w.md"
    target.write_text(DOC.format(n=1))
    os.utime(target, ns=(5_000_000_000, 5_000_000_000))
    parsed = memory.search_index.parsed
    before = parsed.rows_of("topics/w.md")
    assert before is not None and before[1][0].text == "- walrus fact 1: tusks of ivory"
    for kept_before in (True, False):
        if not kept_before:
            parsed.clear()
        stamp = before[0]
        target.write_text(DOC.format(n=1 if kept_before else 2).replace("ivory", "ebony"))
        os.utime(target, ns=(5_000_000_000, 5_000_000_000))
        while target.stat().st_ctime_ns == stamp[3]:  # the clock's grain: the same version to the stamp
            os.utime(target, ns=(5_000_000_000, 5_000_000_000))
        with mock.patch("fsmem.search.parsed.os.stat", wraps=os.stat) as stat:
            now = parsed.rows_of("topics/w.md", stamp)
        assert stat.called == kept_before
        assert now is not None and now[0] != stamp and now[0][:2] == stamp[:2]
        assert now[1][0].text == f"- walrus fact {1 if kept_before else 2}: tusks of ebony"
        before = now
        assert parsed.rows_of("topics/w.md", now[0])[1][0].text == now[1][0].text
