"""What a long-lived process keeps, carried across writes (`fsmem.search.changes`, `documents.Kept`).

A Memory asked questions while files are written, rewritten and removed (through its own index, through
another connection, through another process) and while the index is rebuilt must answer every question as
a fresh process at the same state: the same rows in the same order, every score and relevance the same
float to the bit, and everything it keeps equal to what a fresh process reads; the counts the writers
record must add up to fts5vocab's own.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fsmem import Memory
from fsmem.search import changes, documents, index as search_index, postings, rowscores, scoring
from fsmem.search.analyzer import Analyzer
from fsmem.search.documents import Kept
from fsmem.search.index import SearchIndex
from fsmem.search.parsing import parse_file
from fsmem.search.settings import SearchSettings
from fsmem.store import cache as _cache

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
KEPT = changes.KEEP_COUNTS
WORDS = ["ada", "quill", "globex", "walrus", "ledger", "budget", "deploy", "zephyr", "tea", "rain", "déjà", "x"]
ODD = ["Straße", "naïve-café", "C++", "e-mail", "3.14", "ÜRÜMQI", "_under_", "it's", "2026-05-01"]


def _text(seed: int, rows: int) -> str:
    """A file of `rows` rows in sections, some with front matter (a type, aliases) and odd words."""
    rng = __import__("random").Random(seed)
    out = []
    if rng.random() < 0.5:
        aliases = ", ".join(rng.sample(WORDS + ODD, 2))
        out += ["---", f"type: {rng.choice(['person', 'project'])}", f"aliases: [{aliases}]", "---"]
    out += [f"# {rng.choice(WORDS).title()} {rng.choice(ODD)}", ""]
    for n in range(rows):
        if n % 5 == 0:
            out += ["", f"## {' '.join(rng.sample(WORDS + ODD, rng.randint(1, 3)))}", ""]
        out.append(f"- {' '.join(rng.choices(WORDS + ODD, k=rng.randint(1, 7)))}")
    return "\n".join(out) + "\n"


def _vocab(conn) -> tuple[dict, dict, dict, int]:
    """fts5vocab's counts: rows (term -> (doc, cnt)), columns (term -> column -> (doc, cnt)), names, named."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.cols USING fts5vocab(main, search_fts, 'col')")
    rows = {t: (d, c) for t, d, c in conn.execute("SELECT term, doc, cnt FROM search_vocab") if d}
    columns: dict[str, dict[str, tuple[int, int]]] = {}
    for term, column, d, c in conn.execute("SELECT term, col, doc, cnt FROM temp.cols"):
        if d:
            columns.setdefault(term, {})[column] = (d, c)
    names = {t: (d, c) for t, d, c in conn.execute("SELECT term, doc, cnt FROM search_names_vocab") if d}
    named = conn.execute("SELECT count(*) FROM search_names").fetchone()[0]
    return rows, columns, names, named


def _recorded(conn) -> tuple[dict, dict, dict, int]:
    """The same counts, added up from what the writers recorded of each file (`changes.row_counts`)."""
    rows: Counter = Counter()
    row_hits: Counter = Counter()
    columns: dict[str, Counter] = {"text": Counter(), "context": Counter()}
    column_hits: dict[str, Counter] = {"text": Counter(), "context": Counter()}
    names: Counter = Counter()
    name_hits: Counter = Counter()
    named = 0
    for (counts,) in conn.execute("SELECT counts FROM search_counts"):
        row_part, name_part, has_names = json.loads(counts)
        for term, (doc, text_doc, text_cnt, context_doc, context_cnt) in row_part.items():
            rows[term] += doc
            row_hits[term] += text_cnt + context_cnt
            columns["text"][term] += text_doc
            column_hits["text"][term] += text_cnt
            columns["context"][term] += context_doc
            column_hits["context"][term] += context_cnt
        for term, hits in name_part.items():
            names[term] += 1
            name_hits[term] += hits
        named += has_names
    by_term: dict[str, dict[str, tuple[int, int]]] = {}
    for column in ("text", "context"):
        for term, doc in columns[column].items():
            if doc:
                by_term.setdefault(term, {})[column] = (doc, column_hits[column][term])
    return (
        {t: (d, row_hits[t]) for t, d in rows.items() if d},
        by_term,
        {t: (d, name_hits[t]) for t, d in names.items() if d},
        named,
    )


def _ranking(index: SearchIndex, query: str, **options):
    found = scoring.rank(index, query, SearchSettings(), now=NOW, **options)
    rows = [(found.paths[i], found.lines[i], found.scores[i].hex(), found.relevance[i].hex()) for i in found.ids]
    return rows, found.unsearched, found.searchable


def _same_kept(carried: dict, fresh: dict) -> None:
    """Everything kept in both (of the kinds carried across writes) is equal."""
    for key in carried.keys() & fresh.keys():
        name = key[0] if type(key) is tuple and len(key) > 1 else key
        if name not in Kept.carriers:
            continue
        a, b = carried[key], fresh[key]
        if name == postings._DECODED:
            assert (a.ids, a.lengths, a.norm.tobytes(), a.rows) == (b.ids, b.lengths, b.norm.tobytes(), b.rows)
        elif name in (scoring._FILES, documents._SOURCES):  # what was asked, by id: equal where both asked
            assert {k: a[k] for k in a.keys() & b.keys()} == {k: b[k] for k in a.keys() & b.keys()}, key
        else:
            assert carried[key] == fresh[key], key


QUESTIONS = st.lists(st.sampled_from([*WORDS, "straße", "under", "absent", "walrsu"]), min_size=1, max_size=4)
SCOPES = st.sampled_from(["all", "within", "type"])
ASKED = st.none() | st.tuples(QUESTIONS, SCOPES)


class CarriedAcrossWrites(RuleBasedStateMachine):
    """A long-lived index asked questions between writes, against a fresh one at each state."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(__import__("tempfile").mkdtemp(prefix="fsmem-changes-"))
        Memory.init(self.root)
        (self.root / "topics").mkdir()
        self.index = SearchIndex(self.root)
        self.held = self.index.kept
        self.decoded = 0

    @initialize(seeds=st.lists(st.integers(0, 10_000), min_size=1, max_size=6), keep=st.sampled_from([1, 3, KEPT]))
    def files(self, seeds, keep):
        changes.KEEP_COUNTS = keep  # few: the files written before the latest few are removed without counts
        for n, seed in enumerate(seeds):
            (self.root / "topics" / f"t{n}.md").write_text(_text(seed, 3 + seed % 9), encoding="utf-8")
        self.index.refresh()

    @rule(number=st.integers(0, 5), seed=st.integers(0, 10_000), rows=st.sampled_from([0, 1, 4, 12, 70]), then=ASKED)
    def write(self, number, seed, rows, then):
        (self.root / "topics" / f"t{number}.md").write_text(_text(seed, rows), encoding="utf-8")
        self.index.update([f"topics/t{number}.md"])
        self._then(then)

    @rule(number=st.integers(0, 5), then=ASKED)
    def remove(self, number, then):
        (self.root / "topics" / f"t{number}.md").unlink(missing_ok=True)
        self.index.update([f"topics/t{number}.md"])
        self._then(then)

    @rule(number=st.integers(0, 5), seed=st.integers(0, 10_000), then=ASKED)
    def write_through_another_connection(self, number, seed, then):
        """Another process's writer: its own connection, its own kept things."""
        (self.root / "topics" / f"t{number}.md").write_text(_text(seed, 1 + seed % 6), encoding="utf-8")
        other = SearchIndex(self.root)
        other.update([f"topics/t{number}.md"])
        other.close()
        self._then(then)

    @rule(number=st.integers(0, 5), swap=st.booleans(), passed=st.booleans(), then=ASKED)
    def rewrite_in_the_same_tick(self, number, swap, passed, then):
        """The file replaced with its mtime kept (a new inode): its very bytes, or other bytes of the same size
        (two words of three letters swapped), read again inside the racy window or once it has passed. Only
        the digest tells the two apart: the first keeps its rows, the second is indexed again."""
        path = self.root / "topics" / f"t{number}.md"
        if not path.exists():
            return
        before = path.stat()
        data = path.read_bytes()
        if swap:
            data = data.replace(b"ada", b"\0").replace(b"tea", b"ada").replace(b"\0", b"tea")
        temp = path.with_name("replacing.tmp")
        temp.write_bytes(data)
        os.utime(temp, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(temp, path)
        self._read_again(passed, [f"topics/t{number}.md"])
        self._then(then)

    @rule(passed=st.booleans(), then=ASKED)
    def walk(self, passed, then):
        """A reader that walks (another process, the feed's check): every racy row is read again."""
        self._read_again(passed, None)
        self._then(then)

    def _read_again(self, passed: bool, paths: list[str] | None) -> None:
        racy = search_index.RACY_NS
        search_index.RACY_NS = 0 if passed else 10**18  # the clock pinned, as far as the racy window goes
        try:
            if paths is None:
                self.index.refresh()
            else:
                self.index.update(paths)
        finally:
            search_index.RACY_NS = racy

    @rule(words=QUESTIONS)
    def same_as_a_fresh_build(self, words):
        """The index, after whatever was written and read again, holds what a build of the same files holds:
        each file's rows and fields, fts5vocab's counts, the totals, and every score and relevance."""
        fresh_root = Path(__import__("tempfile").mkdtemp(prefix="fsmem-fresh-"))
        try:
            __import__("shutil").copytree(self.root, fresh_root / "m", ignore=lambda _d, names: [".fsmem"])
            fresh = SearchIndex(fresh_root / "m")
            fresh.refresh()
            self.index.kept = Kept()
            query = " ".join(words)
            assert _held(self.index, query) == _held(fresh, query)
            fresh.close()
        finally:
            self.index.kept = self.held
            __import__("shutil").rmtree(fresh_root, ignore_errors=True)

    def _then(self, then) -> None:
        """Most writes are followed by a question (two writes in a row are carried across as one change)."""
        if then is not None:
            self.ask(*then)

    @rule()
    def rebuild(self):
        """The index made again: another `built`, nothing carried from before."""
        self.index.close()
        _cache.discard(self.index.path)
        self.index.refresh()

    @rule()
    def warm(self):
        """A long-lived process's warm-up: the documents, their ranking ids, the files too large to index, every
        file's packed rows and the common words' counts kept before any question asks for them (carried from then
        on, held against a fresh process's by `ask` and against fts5vocab by `kept_counts_are_fts5vocabs`)."""
        self.index.kept = self.held
        counted = scoring.warm(self.index)
        conn = self.index.connection()
        common = [t for t, d in conn.execute("SELECT term, doc FROM search_vocab") if d >= 2]
        assert counted == len(common)
        assert all(("search_vocab", t) in self.held._kept for t in common)
        files = {fid for (fid,) in conn.execute("SELECT id FROM search_files")}
        assert not files or set(self.held._kept[scoring._FILES]) == files

    @rule(words=QUESTIONS, scope=SCOPES)
    def ask(self, words, scope):
        query = " ".join(words)
        options = {"within": lambda p: p < "topics/t3"} if scope == "within" else {}
        if scope == "type":
            options = {"type": "person"}
        before = self.held._state
        kept_decoded = postings._DECODED in self.held._kept
        made = _count_decoded()
        self.index.kept = self.held
        carried = _ranking(self.index, query, **options)
        after = self.held._state
        if kept_decoded and before is not None and after[0] == before[0] and after != before:
            assert made() == 0, "a single write's changes were carried, not read again"
        self.index.kept = Kept()
        fresh = _ranking(self.index, query, **options)
        fresh_kept = self.index.kept._kept
        self.index.kept = self.held
        assert carried == fresh
        _same_kept(self.held._kept, fresh_kept)
        # the words' counts per column too (kept where the row part bounds a question's best rows), carried
        # to the next state and held against fts5vocab there (`kept_counts_are_fts5vocabs`)
        terms = scoring.query_terms(self.index.analyzer, query)[0]
        rowscores._column_hits(self.index.connection(), terms, self.held._kept)

    @invariant()
    def kept_counts_are_fts5vocabs(self):
        conn = self.index.connection()
        meta = dict(conn.execute("SELECT key, value FROM search_meta WHERE key IN ('built', 'changes')"))
        if not self.held._kept or self.held._state != (meta["built"], meta["changes"]):
            return  # kept for an earlier state: carried at the next question
        rows, columns, names, named = _vocab(conn)
        for key, value in self.held._kept.items():
            if type(key) is tuple and key[0] == "search_vocab":
                assert value == rows.get(key[1], (0, 0)) or value == (0, 0) == rows.get(key[1], (0, 0)), key
            elif type(key) is tuple and key[0] == "search_names_vocab":
                assert value == names.get(key[1], (0, 0)), key
            elif type(key) is tuple and key[0] == "search_vocab_columns":
                assert {c: v for c, v in value.items() if v[0]} == columns.get(key[1], {}), key
            elif key == "named":
                assert value == named

    def teardown(self):
        changes.KEEP_COUNTS = KEPT
        self.index.close()
        __import__("shutil").rmtree(self.root, ignore_errors=True)


def _held(index: SearchIndex, query: str) -> tuple:
    """What an index holds, whatever its files' ids and stamps (and the digests kept beside racy ones): per file
    its rows and fields, fts5vocab's counts, the totals, and the answer to `query` (row -> score and relevance,
    to the bit)."""
    conn = index.connection()
    files = {
        path: rest
        for path, *rest in conn.execute(
            "SELECT path, rows, docs, type, tags, updated, importance, lines, groups, sources, cited FROM search_files"
        )
    }
    totals = dict(conn.execute("SELECT key, value FROM search_meta WHERE key IN ('rows', 'docs')"))
    found = scoring.rank(index, query, SearchSettings(), now=NOW)
    answer = {(found.paths[i], found.lines[i]): (found.scores[i].hex(), found.relevance[i].hex()) for i in found.ids}
    return files, _vocab(conn), totals, answer, found.unsearched, found.searchable


_made = [0]
_init = postings._Decoded.__init__


def _counting_init(self, conn):
    _made[0] += 1
    _init(self, conn)


def _count_decoded():
    start = _made[0]
    return lambda: _made[0] - start


@pytest.fixture(autouse=True)
def _decoded_counted(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(postings._Decoded, "__init__", _counting_init)
    monkeypatch.setattr(scoring, "EXACT_COUNT_LIMIT", 400)  # some files listed as too large to index
    # a build's batches record no counts: their files' removals cannot be carried to the words' counts
    monkeypatch.setattr(search_index, "BATCH_FILES", 5)
    monkeypatch.setattr(documents, "COMMON_ROWS", 2)  # `warm_counts` keeps the words of two rows or more


CarriedAcrossWrites.TestCase.settings = settings(
    max_examples=50, stateful_step_count=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
test_what_is_kept_is_carried_across_writes_as_a_fresh_process_reads_it = CarriedAcrossWrites.TestCase


@pytest.mark.parametrize("seed", range(6))
def test_recorded_counts_add_up_to_fts5vocabs(tmp_path, seed):
    """Every file written alone records its terms' counts; together they are fts5vocab's, column by column
    (the analyser's terms are the tokens FTS5's `ascii` tokenizer cuts), names included."""
    Memory.init(tmp_path)
    (tmp_path / "topics").mkdir()
    index = SearchIndex(tmp_path)
    rng = __import__("random").Random(seed)
    for step in range(12):
        number = rng.randint(0, 5)
        path = tmp_path / "topics" / f"t{number}.md"
        if rng.random() < 0.2:
            path.unlink(missing_ok=True)
        else:
            path.write_text(_text(rng.randint(0, 10_000), rng.choice([0, 1, 5, 30, 70])), encoding="utf-8")
        index.update([f"topics/t{number}.md"])
        conn = index.connection()
        assert _recorded(conn) == _vocab(conn), step
    index.close()


def test_a_term_past_fts5s_token_limit_is_counted_as_fts5_cuts_it(tmp_path):
    Memory.init(tmp_path)
    (tmp_path / "topics" / "long.md").parent.mkdir()
    (tmp_path / "topics" / "long.md").write_text(f"# Long\n\n- {'x' * 33000} {'x' * 33000}y words\n", encoding="utf-8")
    index = SearchIndex(tmp_path)
    index.refresh()
    conn = index.connection()
    assert _recorded(conn) == _vocab(conn)
    index.close()


def test_a_row_counts_its_terms_as_the_parsed_file_holds_them():
    parsed = parse_file("topics/a.md", "# Tea time\n\n## Rain\n\n- tea tea rain\n- ada\n", (1, 1, 1, 1), Analyzer())
    rows, names, has_names = json.loads(changes.row_counts(parsed.texts, parsed.contexts, parsed.names))
    assert (parsed.texts, parsed.contexts) == (["tea tea rain", "ada"], ["rain", "rain"])
    assert rows["tea"] == [1, 1, 2, 0, 0]  # one row holds it, twice, in its text
    assert rows["rain"] == [2, 1, 1, 2, 2]  # both rows: the first in its text and headings, the other in its headings
    assert names == {"tea": 1, "time": 1} and has_names == 1


def test_a_write_by_another_process_is_carried_into_the_next_answer(tmp_path, monkeypatch):
    """The changes are in the database: a long-lived Memory carries what it kept across another process's
    write, and answers as a fresh process does."""
    Memory.init(tmp_path)
    (tmp_path / "topics").mkdir()
    for n in range(6):
        (tmp_path / "topics" / f"t{n}.md").write_text(_text(n, 8), encoding="utf-8")
        os.utime(tmp_path / "topics" / f"t{n}.md", (1e9, 1e9))  # not racy: not indexed again at the next search
    memory = Memory(tmp_path)
    index = memory.search_index
    memory.search("ada walrus budget")
    before = index.kept._state
    script = (
        "import sys; from fsmem import Memory; Memory(sys.argv[1]).write('topics/t1.md', '# New\\n\\n- ada tea\\n')"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, env={**os.environ})
    made = _count_decoded()
    index.refresh()
    carried = _ranking(index, "ada walrus budget")
    assert index.kept._state[0] == before[0] and index.kept._state[1] > before[1]
    assert made() == 0
    held = index.kept
    index.kept = Kept()
    assert _ranking(index, "ada walrus budget") == carried
    index.kept = held
    memory.close()


def test_only_the_latest_files_keep_their_counts(tmp_path, monkeypatch):
    """A memory grown note by note keeps the terms' counts of its latest KEEP_COUNTS files, not of every file."""
    monkeypatch.setattr(changes, "KEEP_COUNTS", 3)
    Memory.init(tmp_path)
    (tmp_path / "topics").mkdir()
    index = SearchIndex(tmp_path)
    index.refresh()  # built (empty): from now on each file is indexed as it is written
    for n in range(8):
        (tmp_path / "topics" / f"t{n}.md").write_text(_text(n, 4), encoding="utf-8")
        index.update([f"topics/t{n}.md"])
    conn = index.connection()
    kept = [fid for (fid,) in conn.execute("SELECT id FROM search_counts ORDER BY id")]
    latest = [fid for (fid,) in conn.execute("SELECT id FROM search_files ORDER BY id DESC LIMIT 3")]
    assert kept == sorted(latest) and len(kept) == 3
    index.close()
