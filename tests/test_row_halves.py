"""The row part's statements split between two connections on two threads (`fsmem.search.halves`): one answer.

Every other file's statement runs on a second connection of the asking thread's own, each connection keeping a
pool of its own; the two pools' best rows must be the one connection's to the bit, in its order (score, then row
id), for any pool size, with ties across the halves and superseded rows. The two connections must read one
state of the index: a write landing between the two read transactions' starts must leave the answer the one
the asking connection's state gives.
"""

from __future__ import annotations

import collections
import datetime as dt
import os
import random
import threading

from hypothesis import HealthCheck, given, settings, strategies as st
from test_rowscores import EVERYWHERE, _file as rows_file

from fsmem import Memory
from fsmem.search import halves, rowscores, scoring
from fsmem.search.documents import Kept

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
_TAKEN = rowscores._taken  # the unwrapped function: monkeypatch's wrappers would nest across examples
WORDS = ["ada", "quill", "globex", "walrus", "ledger", "budget"]  # fewer than test_rowscores': more ties


def _memory(root, rng: random.Random, files: list[tuple[int, bool, bool]]) -> Memory:
    Memory.init(root)
    (root / "topics").mkdir()
    for number, (rows, superseded, twice) in enumerate(files):
        text = rows_file(rng, rows, superseded, words=WORDS, most=5)
        (root / "topics" / f"t{number}.md").write_text(text, encoding="utf-8")
        if twice:  # the same rows in another file, likely in the other half: ties broken by row id across pools
            (root / "topics" / f"u{number}.md").write_text(text, encoding="utf-8")
    memory = Memory(root)
    memory.search_index.refresh()
    return memory


def _file_by_file(monkeypatch) -> None:
    for name in ("POSTINGS_PER_FILE", "POSTINGS_PER_MATCH", "POSTINGS_PER_NATIVE_MATCH"):
        monkeypatch.setattr(rowscores, name, 0)  # every question scored file by file


def _ranking(memory: Memory, query: str, split: bool, monkeypatch, **options):
    """Every candidate's path, line, score and relevance (hex: to the bit), ranked afresh."""
    memory.search_index.kept = Kept()  # nothing kept from the other way's ranking
    monkeypatch.setattr(rowscores, "SPLIT_FILES", 1 if split else 1 << 30)
    options.setdefault("within", lambda path: True)  # every file's rows scored, not the best documents' files
    found = scoring.rank(memory.search_index, query, memory.search_settings, now=NOW, **options)
    return [(found.paths[i], found.lines[i], found.scores[i].hex(), found.relevance[i].hex()) for i in found.ids]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.integers(1, 12), st.booleans(), st.booleans()), min_size=1, max_size=8),
    words=st.lists(st.sampled_from(WORDS), max_size=3, unique=True),
    seed=st.integers(0, 1000),
    pools=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    chunk=st.sampled_from([1, 2, 1000]),
    shares=st.sampled_from([2, 3, 1000]),
)
def test_two_connections_pools_are_the_one_connections_pool(
    tmp_path_factory, monkeypatch, files, words, seed, pools, chunk, shares
):
    """`best_row_scores` with a partner gives the one connection's rows, order and floats, for any `k`, the
    superseded rows left out or kept, a statement seeking one file or more; a search ranks alike either way."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    monkeypatch.setattr(rowscores, "FILES_A_STATEMENT", chunk)
    monkeypatch.setattr(rowscores, "SHARES", shares)
    monkeypatch.setattr(halves, "in_two", _theirs_first)

    def every_other_run(conn, left, *question):
        """The helper takes every other run of files (its connection's first), so both pools hold rows."""
        if threading.current_thread() is threading.main_thread():
            return _TAKEN(conn, left, *question)
        runs = list(left)
        left.clear()
        left.extend(runs[1::2])
        return _TAKEN(conn, collections.deque(runs[::2]), *question)

    monkeypatch.setattr(rowscores, "_taken", every_other_run)
    memory = _memory(tmp_path_factory.mktemp("mem"), random.Random(seed), files)
    _file_by_file(monkeypatch)
    query = " ".join([*words, EVERYWHERE])  # some row matches
    asked: list[tuple] = []
    inner = rowscores.best_row_scores
    monkeypatch.setattr(rowscores, "best_row_scores", lambda *call: asked.append(call[:8]) or inner(*call))
    for options in ({}, {"include_superseded": True}):
        assert _ranking(memory, query, True, monkeypatch, **options) == _ranking(
            memory, query, False, monkeypatch, **options
        )
    conn, match, phrases, df, weights, by_file, _superseded_too, _k = asked[0]
    index = memory.search_index
    monkeypatch.setattr(rowscores, "SPLIT_FILES", 1)

    def compared(conn) -> None:
        for k in [*pools, 1 << 20]:
            for superseded_too in (False, True):
                one = inner(conn, match, phrases, df, weights, by_file, superseded_too, k)
                two = inner(conn, match, phrases, df, weights, by_file, superseded_too, k, lambda: index.partner(conn))
                assert [(r, s.hex()) for r, s in two] == [(r, s.hex()) for r, s in one]

    index.reading(compared)
    memory.close()


def test_the_merge_keeps_the_one_pools_order():
    """Ties by row id across the two pools, and only the best k."""
    one = [(8, 3.0), (2, 1.5), (4, 1.0)]
    other = [(1, 3.0), (9, 3.0), (3, 1.5)]
    assert rowscores.merged(one, other, 4) == [(1, 3.0), (8, 3.0), (9, 3.0), (2, 1.5)]
    assert rowscores.merged(one, [], 2) == one[:2]


def test_the_helpers_half_runs_on_the_partner_in_another_thread(tmp_path, monkeypatch):
    """A split question's other half runs on the asking thread's second connection, in the helper thread."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    memory = _memory(tmp_path, random.Random(2), [(12, n % 3 == 0, n % 2 == 0) for n in range(12)])
    _file_by_file(monkeypatch)
    ran: list[tuple[str, object]] = []
    inner = halves.same_state
    monkeypatch.setattr(halves, "in_two", _theirs_first)
    monkeypatch.setattr(
        halves, "same_state", lambda conn, *a: ran.append((threading.current_thread().name, conn)) or inner(conn, *a)
    )
    split = _ranking(memory, f"walrus {EVERYWHERE}", True, monkeypatch)
    assert split == _ranking(memory, f"walrus {EVERYWHERE}", False, monkeypatch) and split
    ((thread, partner),) = ran
    assert thread.startswith("fsmem-search-half")
    assert partner is memory.search_index._readers.partner
    memory.close()


def _in_helper(theirs):
    return halves._helper_thread().submit(theirs).result()


def _theirs_first(mine, theirs):
    """`halves.in_two` with the helper's share run to its end first: it takes the runs of files it can."""
    other = _in_helper(theirs)
    return mine(), other


def test_a_write_between_the_two_read_transactions_never_mixes_two_states(tmp_path, monkeypatch):
    """A write committed after the asking connection's read transaction began, before the partner's: the
    partner sees another state, so its half runs on the asking connection, and the answer is the old state's."""
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    rng = random.Random(4)
    memory = _memory(tmp_path, rng, [(12, n % 3 == 0, False) for n in range(12)])
    _file_by_file(monkeypatch)
    query = f"walrus ledger {EVERYWHERE}"
    before = _ranking(memory, query, False, monkeypatch)
    helped: list[object] = []
    inner = halves.same_state

    def after_a_write(mine, theirs):
        for path in sorted((tmp_path / "topics").glob("*.md")):  # every file written again: every half changes
            path.write_text(rows_file(rng, 12, False, words=WORDS, most=5), encoding="utf-8")
        memory.search_index.refresh()  # commits on the index's own connection while the reader's is open
        return _theirs_first(mine, theirs)

    monkeypatch.setattr(halves, "in_two", after_a_write)
    monkeypatch.setattr(halves, "same_state", lambda *a: helped.append(inner(*a)) or helped[-1])
    assert _ranking(memory, query, True, monkeypatch) == before
    assert helped == [None]  # the partner saw the write, so it ran nothing
    monkeypatch.setattr(halves, "in_two", _theirs_first)
    after = _ranking(memory, query, True, monkeypatch)
    assert after == _ranking(memory, query, False, monkeypatch) != before  # the write did change the answer
    assert helped[-1] is not None  # and with no write between, the partner ran its half
    memory.close()


def test_a_question_with_few_files_is_not_split(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-06-01T00:00:00+00:00")
    memory = _memory(tmp_path, random.Random(3), [(6, False, False) for _ in range(4)])
    _file_by_file(monkeypatch)
    asked: list[object] = []
    monkeypatch.setattr(halves, "in_two", lambda *a: asked.append(a))
    memory.search_index.kept = Kept()
    assert rowscores.SPLIT_FILES > 4
    found = scoring.rank(memory.search_index, f"walrus {EVERYWHERE}", memory.search_settings, now=NOW, within=bool)
    assert found.ids
    assert not asked
    memory.close()


def test_a_forked_child_makes_its_own_helper_thread():
    """A child forked after a split inherits the pool but not its thread: its halves would wait for ever."""
    halves.in_two(lambda: 1, lambda: 2)
    parent = halves._helper_thread()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a half its helper runs, or nothing at all within the timeout
        try:
            os.close(read)
            found = halves._helper_thread().submit(lambda: b"ran").result(timeout=10)
            os.write(write, found if halves._helper_thread() is not parent else b"same")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as out:
        assert out.read() == b"ran"
    os.waitpid(pid, 0)
