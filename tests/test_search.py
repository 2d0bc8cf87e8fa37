import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest

from fsmem import Memory
from fsmem.store.cache import cache_path, connect
from fsmem.store.retrieval_log import records

GOALTENDER = """---
title: Goaltender
topic: Goaltender
importance: 0.9
updated: 2026-01-01
---
# Goaltender

## Facts
- sport: pesäpallo
- club: Kouvolan Pallonlyöjät

## Superseded
- sport: ice hockey
"""

BILLING = """---
title: Billing
topic: Billing
type: semantic
tags: [finance]
updated: 2026-01-01
---
# Billing

## Facts
- billing cycle: monthly, on the 1st
- proration: daily, for seat changes mid-cycle
- invoice format: PDF, emailed to the billing contact
"""

NOTE = """---
title: Session support 2026-01-02
type: episodic
updated: 2026-01-02
---
## people/Adam Smith
- Asked about invoices twice.
"""


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "topics").mkdir()
    (root / "topics" / "goaltender.md").write_text(GOALTENDER, encoding="utf-8")
    (root / "topics" / "billing.md").write_text(BILLING, encoding="utf-8")
    (root / "sessions").mkdir()
    (root / "sessions" / "s.md").write_text(NOTE, encoding="utf-8")
    return Memory(root)


def locations(result):
    return [h.location for h in result.hits]


def test_fact_is_found_through_its_context(memory):
    result = memory.search("what sport does the goaltender play", max_results=1)
    assert locations(result) == ["topics/goaltender.md:10"]
    hit = result.hits[0]
    assert hit.text == "- sport: pesäpallo" and hit.kind == "fact"
    assert hit.title == "Goaltender" and hit.headings == ["Facts"]
    assert "topics/goaltender.md\n[Facts]\n10: - sport: pesäpallo" in result.to_text()


def test_superseded_rows_are_left_out_unless_asked(memory):
    plain = memory.search("goaltender ice hockey", max_results=10)
    assert "topics/goaltender.md:14" not in locations(plain)
    wider = memory.search("goaltender ice hockey", max_results=10, include_superseded=True)
    assert locations(wider)[0] == "topics/goaltender.md:14"
    assert wider.hits[0].superseded and "[superseded]" in wider.to_text()


def test_threshold_gives_an_empty_answer_not_near_misses(memory):
    result = memory.search("quantum chromodynamics lattice")
    assert result.empty and result.to_dict()["results"] == []
    assert result.to_text().startswith("no relevant memory for 'quantum chromodynamics lattice'")
    strict = memory.search("proration", min_score=50)
    assert strict.empty and strict.best_score is not None and strict.best_score < 50


def test_budget_fits_whole_rows_and_counts_left_out(memory):
    # "billing invoices": four rows in the memory's own files (the root README.md is not ranked)
    full = memory.search("billing invoices", max_results=50)
    assert len(full.hits) >= 4
    small = memory.search("billing invoices", max_results=50, max_tokens=full.hits[0].tokens + full.hits[1].tokens)
    assert len(small.hits) == 2 and small.truncated and small.left_out == len(full.hits) - 2
    assert small.cut_by == "tokens"
    assert [h.text for h in small.hits] == [h.text for h in full.hits[:2]]  # never a row cut
    assert memory.tokens.count("\n".join(small.body_lines())) <= small.tokens
    capped = memory.search("billing invoices", max_results=1)
    assert len(capped.hits) == 1 and capped.left_out == len(full.hits) - 1 and capped.cut_by == "results"
    assert "left out by the result limit. Continue with offset=1" in capped.to_text()


def test_front_matter_filters_apply_before_ranking(memory):
    assert {h.path for h in memory.search("billing invoices", type="episodic").hits} == {"sessions/s.md"}
    assert {h.path for h in memory.search("billing invoices", tag="finance").hits} == {"topics/billing.md"}
    assert {h.path for h in memory.search("billing invoices", updated_after="2026-01-01T12:00").hits} == {
        "sessions/s.md"
    }


def test_near_spelling_matches_with_rapidfuzz(memory):
    assert locations(memory.search("prorration", max_results=1)) == ["topics/billing.md:12"]


def _indexed(memory):
    """path -> stored stamp (mtime_ns, size), straight from the search tables."""
    conn = connect(cache_path(memory.root))
    try:
        return {p: (abs(m), s) for p, m, s in conn.execute("SELECT path, mtime_ns, size FROM search_files")}
    finally:
        conn.close()


def test_index_follows_writes_human_edits_and_deletion(memory):
    assert memory.search("zeppelin").empty
    memory.write("topics/airships.md", "---\ntitle: Airships\n---\n# Airships\n\n- favourite: zeppelin\n")
    assert locations(memory.search("zeppelin")) == ["topics/airships.md:6"]
    path = memory.root / "topics" / "airships.md"
    path.write_text(path.read_text().replace("zeppelin", "blimp"))  # a human edit, same second
    assert memory.search("zeppelin").empty
    assert locations(memory.search("blimp")) == ["topics/airships.md:6"]
    path.unlink()
    assert memory.search("blimp").empty
    assert "topics/airships.md" not in _indexed(memory)


def _new_process_memory(root):
    """A Memory with its own SearchIndex, as a new process would have (not this process's shared one)."""
    from fsmem.search.index import SearchIndex

    fresh = Memory(root)
    fresh._search_index = SearchIndex(Path(root).resolve())
    return fresh


def _damage_whole_file(memory):
    db = cache_path(memory.root)
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)


def _damage_postings(memory):
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_fts_data SET block = zeroblob(length(block)) WHERE id > 10")
    conn.close()


def _damage_rows(memory):
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_files SET lines = x'0102' WHERE path = 'topics/billing.md'")
    conn.close()


def _damage_row_lines(memory):
    """Packed rows of the right size whose lines are not the file's: only reading the file tells."""
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_files SET lines = zeroblob(length(lines))")
    conn.close()


def _damage_cited_notes(memory):
    """Cited-note numbers of the right size past the notes the file cites."""
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_files SET groups = unhex(replace(hex(zeroblob(rows * 2)), '00', 'FF'))")
    conn.close()


def _damage_document_postings(memory):
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_postings SET docs = x'0102030405', counts = x'01'")  # n no longer matches
    conn.close()


def _damage_document_lengths(memory):
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_lengths SET lengths = x'010203'")
    conn.close()


def _damage_version(memory):
    conn = connect(cache_path(memory.root))
    conn.execute("UPDATE search_meta SET value = '0:0' WHERE key = 'version'")
    conn.close()


@pytest.mark.parametrize(
    "damage",
    [
        _damage_whole_file,
        _damage_postings,
        _damage_rows,
        _damage_row_lines,
        _damage_cited_notes,
        _damage_document_postings,
        _damage_document_lengths,
        _damage_version,
    ],
)
def test_a_damaged_index_is_rebuilt_never_trusted(memory, damage):
    for path in memory.root.rglob("*.md"):  # older than the racy window, so nothing is re-read anyway
        os.utime(path, ns=(path.stat().st_mtime_ns - 10**10,) * 2)
    first = locations(memory.search("proration invoice"))
    memory.search_index.close()
    damage(memory)
    fresh = _new_process_memory(memory.root)
    assert locations(fresh.search("proration invoice")) == first
    assert set(_indexed(memory)) == {
        "README.md",
        "profile/identity.md",
        "topics/goaltender.md",
        "topics/billing.md",
        "sessions/s.md",
    }
    if damage is _damage_whole_file:  # the first to open the file throws it away: the search opens the count memo
        assert fresh.catalog.cache.rebuilt  # first (fsmem.operations.search), and the index is made anew
    elif damage is not _damage_version:
        assert fresh.search_index.rebuilt
    import shutil

    shutil.rmtree(memory.root / ".fsmem")
    assert locations(_new_process_memory(memory.root).search("proration invoice")) == first


def test_the_numpy_index_of_older_versions_is_removed(memory):
    folder = memory.root / ".fsmem" / "search" / "v6"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    assert locations(_new_process_memory(memory.root).search("proration"))
    assert not (memory.root / ".fsmem" / "search").exists()


def test_an_edit_by_another_process_is_seen_by_the_next_search(memory):
    assert memory.search("gondola").empty
    script = (
        "import sys; from fsmem import Memory; m = Memory(sys.argv[1]); "
        "p = m.root / 'topics' / 'billing.md'; p.write_text(p.read_text() + '\\n- The gondola fee is prorated.\\n'); "
        "assert m.search('gondola').hits"
    )
    subprocess.run([sys.executable, "-c", script, str(memory.root)], check=True)
    last = len((memory.root / "topics" / "billing.md").read_text().splitlines())
    assert locations(memory.search("gondola"))[0] == f"topics/billing.md:{last}"


def test_generated_index_and_consolidated_notes_are_not_ranked_twice(memory):
    memory.note("- The walrus colony moved to the north pier.", session="s1", subject="topic/Wildlife")
    before = [h.path for h in memory.search("walrus colony pier").hits]
    assert before and before[0].startswith("sessions/")
    memory.consolidate()
    assert (memory.root / "INDEX.md").exists()
    after = [h.path for h in memory.search("walrus colony pier", max_results=10).hits]
    assert after[0] == "topics/wildlife.md"
    assert not any(p.startswith("sessions/") or p == "INDEX.md" for p in after)
    hit = memory.search("walrus colony pier", max_results=1).hits[0]
    assert hit.text == "- The walrus colony moved to the north pier. (2026-01-10)"  # citation cut to its date
    assert hit.sources == ["sessions/2026/01/10/s1.md"]
    full = memory.read(hit.path, lines=str(hit.line)).lines[0][1]
    assert full == "- The walrus colony moved to the north pier. ([2026-01-10](../sessions/2026/01/10/s1.md))"
    memory.note("- A second walrus colony appeared at the south pier.", session="s1", subject="topic/Wildlife")
    grown = [h.path for h in memory.search("second walrus colony south", max_results=10).hits]
    assert grown[0].startswith("sessions/")  # a note that grew after consolidation is searched again


def test_kept_candidates_give_a_fresh_ranking_whatever_the_clock_the_log_or_the_scope(memory):
    """A query's candidates are kept per state of the index; the clock, the retrieval log and a scope
    still count at every call, and a write lets them go."""
    import datetime as dt

    from fsmem.search.index import SearchIndex
    from fsmem.search.scoring import rank
    from fsmem.store import retrieval_log

    for name in ("a", "b"):
        (memory.root / "topics" / f"{name}.md").write_text(
            f"---\ntitle: Note {name}\nupdated: 2026-01-0{1 if name == 'a' else 2}\n---\n- walrus sighting\n"
        )
    memory.search("walrus")
    kept = memory.search_index
    fresh = SearchIndex(memory.root)
    fresh.kept.at = lambda state, conn=None: {}  # nothing kept

    def order(index, **kw):
        ranking = rank(index, "walrus sighting", memory.search_settings, limit=20, **kw)
        return [(ranking.paths[r], round(ranking.scores[r], 9)) for r in ranking.ids]

    early, late = dt.datetime(2026, 1, 3, tzinfo=dt.UTC), dt.datetime(2027, 6, 1, tzinfo=dt.UTC)
    for now in (early, late, early):
        assert order(kept, now=now) == order(fresh, now=now)
    assert order(kept, now=early) != order(kept, now=late)  # recency moved the scores
    assert order(kept, now=early)[0][0] == "topics/b.md"
    for _ in range(3):
        retrieval_log.append(memory.root, {"tool": "search", "paths": ["topics/a.md:5"]})
    from fsmem.search.ranking import usage_counts

    assert order(kept, now=early, usage=usage_counts(memory.root)) == order(
        fresh, now=early, usage=usage_counts(memory.root)
    )
    assert order(kept, now=early, usage=usage_counts(memory.root))[0][0] == "topics/a.md"
    # a scope's ranking is never kept: it sees only its own files, and the next unscoped one sees both
    only_a = order(kept, now=early, within=lambda path: path == "topics/a.md")
    assert [path for path, _ in only_a] == ["topics/a.md"]
    assert {path for path, _ in order(kept, now=early)} == {"topics/a.md", "topics/b.md"}
    (memory.root / "topics" / "c.md").write_text("---\ntitle: Note c\n---\n- walrus sighting walrus\n")
    memory.search("walrus")  # the index takes the new file, which lets the kept candidates go
    assert order(kept, now=early) == order(fresh, now=early)
    assert "topics/c.md" in {path for path, _ in order(kept, now=early)}
    fresh.close()


def test_importance_salience_breaks_a_tie(memory):
    for name, importance in (("a", 0.1), ("b", 0.9)):
        (memory.root / "topics" / f"{name}.md").write_text(
            f"---\ntitle: Note\nimportance: {importance}\nupdated: 2026-01-01\n---\n- walrus sighting at the pier\n"
        )
    assert [h.path for h in memory.search("walrus sighting").hits] == ["topics/b.md", "topics/a.md"]


def test_usage_from_the_retrieval_log_breaks_a_tie(memory):
    for name in ("a", "b"):
        (memory.root / "topics" / f"{name}.md").write_text(
            "---\ntitle: Note\nupdated: 2026-01-01\n---\n- walrus sighting\n"
        )
    from fsmem.store import retrieval_log

    for _ in range(3):
        retrieval_log.append(memory.root, {"tool": "search", "paths": ["topics/b.md:5"]})
    assert [h.path for h in memory.search("walrus sighting").hits] == ["topics/b.md", "topics/a.md"]


def test_each_search_is_logged_with_the_shared_fields(memory):
    result = Memory(memory.root, agent="researcher").search("proration", max_results=2)
    record = list(records(memory.root))[-1]
    assert set(record) == {
        "time",
        "agent",
        "tool",
        "arguments",
        "paths",
        "rows",
        "tokens",
        "latency_ms",
        "truncated",
        "empty",
    }
    assert record["agent"] == "researcher" and record["tool"] == "search"
    assert record["arguments"]["query"] == "proration" and record["arguments"]["max_results"] == 2
    assert record["paths"] == locations(result) and record["rows"] == len(result.hits)
    assert record["tokens"] == result.tokens and record["empty"] is False


def test_agent_budget_caps_k(memory):
    reviewer = Memory(memory.root, agent="reviewer")  # max_results 20, max_tokens 1000
    assert reviewer.search("billing", max_results=500).tokens <= 1000


def run_cli(root, *args, input=None, process=False):
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, input=input, env=dict(os.environ))


def test_cli_search_json_text_and_exit_codes(memory):
    done = run_cli(memory.root, "search", "proration", "--max-results", "1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"results", "tokens", "truncated", "left_out"}
    assert {"path", "line", "text", "score"} <= set(data["results"][0])
    assert data["results"][0]["path"] == "topics/billing.md" and data["results"][0]["line"] == 12
    # a search that finds rows moves their scores (the usage log): a process's bytes are compared where none is
    missing = run_cli(memory.root, "search", "quantum chromodynamics", process=True)
    assert missing.returncode == 1 and missing.stdout.startswith("no relevant memory")
    bad = run_cli(memory.root, "search", "x", "--updated-after", "yesterday")
    assert (
        bad.returncode == 2 and bad.stderr.startswith("fsmem: error: --updated-after") and "Traceback" not in bad.stderr
    )
    bad_k = run_cli(memory.root, "search", "x", "--max-results", "0", process=True)
    assert (bad_k.returncode, bad_k.stderr) == (2, "fsmem: error: --max-results must be at least 1\n")


def test_a_file_too_large_to_index_is_named_by_search_and_check_never_skipped_in_silence(memory):
    """A file over the index's limit (4 MiB) has no rows: a search says it did not look in it, as check does."""
    from fsmem.store.meta import EXACT_COUNT_LIMIT

    big = memory.root / "topics" / "big.md"
    line = "- proration walrus: a line the index never holds\n"
    big.write_text("---\ntitle: Big\n---\n# Big\n" + line * (EXACT_COUNT_LIMIT // len(line) + 10))
    memory = Memory(memory.root)
    found = memory.search("proration walrus")
    assert "topics/big.md" not in {h.path for h in found.hits}
    assert found.unsearched == [("topics/big.md", big.stat().st_size)]
    assert found.to_text().splitlines()[-2] == (
        f"(not searched: 1 file over {EXACT_COUNT_LIMIT:,} bytes, too large for the index: topics/big.md;"
        " grep finds its lines)"
    )
    assert found.to_dict()["unsearched"] == [{"path": "topics/big.md", "bytes": big.stat().st_size}]
    nothing = memory.search("quantum chromodynamics")
    assert nothing.empty and "topics/big.md" in nothing.to_text()
    scoped = Memory(memory.root, scope=["sessions/"])
    assert scoped.search("proration walrus").unsearched == []  # outside a scope, it does not exist
    problems = [(p[0], p[2]) for p in memory.check().problems if p[0] == "topics/big.md"]
    assert problems == [
        (
            "topics/big.md",
            f"too large to search ({big.stat().st_size:,} bytes, over {EXACT_COUNT_LIMIT:,}): search finds none"
            " of its lines, grep does; split it into smaller files",
        )
    ]
    assert memory.grep("proration walrus", paths=["topics/big.md"], max_results=1).matches


def _scores(memory, query="proration invoice walrus billing"):
    from fsmem.search.ranking import search

    _result, ranking = search(memory.search_index, memory.tokens, memory.search_settings, query, k=5, max_tokens=500)
    return {(ranking.paths[i], ranking.lines[i]): ranking.scores[i] for i in ranking.candidates}


def test_an_updated_index_scores_exactly_as_a_fresh_build(memory):
    import shutil

    _scores(memory)
    path = memory.root / "topics" / "billing.md"
    path.write_text(path.read_text() + "\n- The walrus invoice needs proration.\n")
    memory.write("topics/walrus.md", "---\ntitle: Walrus\n---\n- walrus billing: monthly\n")
    memory.rm("sessions/s.md")
    updated = _scores(memory)
    shutil.rmtree(memory.root / ".fsmem")
    fresh = _scores(_new_process_memory(memory.root))
    assert updated == fresh and max(updated.values()) > 0


def test_top_rows_are_the_head_of_the_full_order():
    from fsmem.search.ranking import Ranking

    scores = {1: 0.9, 2: 0.9, 3: 0.5, 4: 0.5, 5: 0.2, 6: 0.0}
    ranking = Ranking(list(scores), scores, scores, {}, {}, searchable=6)
    assert ranking.top(3, 0.3) == ([1, 2, 3], 4)
    assert ranking.top(10, 0.3) == ([1, 2, 3, 4], 4)
    assert ranking.top(0, 0.0) == ([], 5) and ranking.best() == 0.9
    assert Ranking([], {}, {}, {}, {}, searchable=0).best() is None
    assert Ranking([], {}, {}, {}, {}, searchable=3).best() == 0.0


def _stamp(memory, rel):
    st = (memory.root / rel).stat()
    return (st.st_mtime_ns, st.st_size)


def test_every_write_through_fsmem_updates_the_index_at_once(memory):
    memory.search("proration")  # the index exists; from here on no search runs until the end
    memory.write("topics/airships.md", "---\ntitle: Airships\n---\n- favourite: zeppelin\n")
    assert _indexed(memory)["topics/airships.md"] == _stamp(memory, "topics/airships.md")
    memory.edit("topics/airships.md", old="zeppelin", new="blimp")
    assert _indexed(memory)["topics/airships.md"] == _stamp(memory, "topics/airships.md")
    note = memory.note("- The blimp hangar is in Akron.", session="s9")
    assert _indexed(memory)[note.path] == _stamp(memory, note.path)
    memory.mv("topics/airships.md", "topics/dirigibles.md")
    assert "topics/airships.md" not in _indexed(memory)
    assert _indexed(memory)["topics/dirigibles.md"] == _stamp(memory, "topics/dirigibles.md")
    memory.rm("topics/dirigibles.md")
    assert "topics/dirigibles.md" not in _indexed(memory)
    assert locations(memory.search("blimp hangar")) == [f"{note.path}:9"]


def _search_files(root):
    """path -> (id, racy, digest), and the index's count of changes, straight from the search tables."""
    conn = connect(cache_path(root))
    try:
        found = {p: (i, m < 0, d) for p, i, m, d in conn.execute("SELECT path, id, mtime_ns, digest FROM search_files")}
        return found, int(conn.execute("SELECT value FROM search_meta WHERE key = 'changes'").fetchone()[0])
    finally:
        conn.close()


def _segments(root):
    from fsmem.search import tables

    conn = connect(cache_path(root))
    try:
        return tables.segments(conn, "search_fts"), tables.segments(conn, "search_names")
    finally:
        conn.close()


def test_a_racy_file_read_again_with_its_bytes_unchanged_keeps_its_rows(memory, monkeypatch):
    """A write through fsmem is indexed at once, inside the racy window, so its row is marked racy. The readers
    after it (the next search, whose change feed names the file; a walk once the window passed; another
    process) find the bytes the rows were made from: the row keeps its id and rows, its stamp is settled (and its
    digest let go), and no change is recorded, no FTS5 segment added, nothing left for the merger."""
    from fsmem.search import index as search_index
    from fsmem.search.parsing import content_digest

    monkeypatch.setattr(search_index, "RACY_NS", 10**18)  # every file is inside the window until said otherwise
    monkeypatch.setattr(search_index, "MERGE_QUIET_S", 1e9)  # the segments stay as the writes leave them
    memory.search("proration")
    memory.write("topics/airships.md", "---\ntitle: Airships\n---\n- favourite: zeppelin\n")
    files, changes = _search_files(memory.root)
    fid, racy, digest = files["topics/airships.md"]
    assert racy and digest == content_digest((memory.root / "topics" / "airships.md").read_bytes())
    segments = _segments(memory.root)
    assert locations(memory.search("zeppelin")) == ["topics/airships.md:4"]  # read again, still racy
    assert locations(memory.search("zeppelin")) == ["topics/airships.md:4"]
    monkeypatch.setattr(search_index, "RACY_NS", 0)  # the window has passed
    memory.close()  # its change feed too: the next Memory walks, as another process does
    other = _new_process_memory(memory.root)
    assert locations(other.search("zeppelin")) == ["topics/airships.md:4"]
    assert other.search_index.stats["indexed"] == 0 and other.search_index.stats["restamped"] >= 1
    files, after = _search_files(memory.root)
    assert files["topics/airships.md"] == (fid, False, None) and after == changes  # settled: no digest kept
    assert _segments(memory.root) == segments
    assert _indexed(memory) == {p: _stamp(memory, p) for p in _indexed(memory)}
    updated = _scores(other, "zeppelin proration airships")
    other.close()
    import shutil

    shutil.rmtree(memory.root / ".fsmem")
    assert _scores(_new_process_memory(memory.root), "zeppelin proration airships") == updated


def test_a_first_build_digests_its_racy_files_alone_and_a_refresh_every_file_it_reads(memory, monkeypatch):
    """A digest is kept only beside a racy file's row, or compared with one stored beside the file's row: a first
    build (no row yet) digests only the files written within the racy window, so a copy of a memory with its
    mtimes is not digested at all; a refresh of an index that holds files digests every file it reads again."""
    from fsmem.search import parsing

    hour_ago = time.time() - 3600
    for path in memory.root.rglob("*.md"):
        os.utime(path, (hour_ago, hour_ago))
    fresh = memory.root / "topics" / "airships.md"
    fresh.write_text("---\ntitle: Airships\n---\n- favourite: zeppelin\n", encoding="utf-8")
    digested: list[bytes] = []
    real = parsing.content_digest
    monkeypatch.setattr(parsing, "content_digest", lambda data: digested.append(data) or real(data))
    assert locations(memory.search("zeppelin")) == ["topics/airships.md:4"]
    assert digested == [fresh.read_bytes()]
    files, _changes = _search_files(memory.root)
    assert files["topics/airships.md"][1:] == (True, real(fresh.read_bytes()))
    assert {path: digest for path, (_id, _racy, digest) in files.items() if digest is not None} == {
        "topics/airships.md": real(fresh.read_bytes())
    }
    digested.clear()
    billing = memory.root / "topics" / "billing.md"
    os.utime(billing, (hour_ago - 60, hour_ago - 60))  # moved, not racy: read again by the next walk
    memory.close()
    assert locations(_new_process_memory(memory.root).search("billing cycle"))[0].startswith("topics/billing.md")
    assert billing.read_bytes() in digested


def test_a_racy_file_rewritten_with_its_size_and_mtime_is_indexed_again(memory, monkeypatch):
    """Same size, same mtime, same inode, other bytes, within the racy window: the digest, not the stamp, says
    the rows changed (the system moves the ctime; the mtime is what would have hidden it)."""
    from fsmem.search import index as search_index

    monkeypatch.setattr(search_index, "RACY_NS", 10**18)
    memory.search("proration")
    path = memory.root / "topics" / "billing.md"
    before = path.stat()
    data = path.read_bytes()
    with open(path, "r+b") as handle:  # in place: the same inode
        handle.write(data.replace(b"PDF", b"XML"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    monkeypatch.setattr(search_index, "RACY_NS", 0)
    memory.close()  # its change feed too: the next Memory walks, as another process does
    other = _new_process_memory(memory.root)
    hits = other.search("XML invoice format").hits
    assert hits and (hits[0].path, hits[0].text) == (
        "topics/billing.md",
        "- invoice format: XML, emailed to the billing contact",
    )
    assert other.search("PDF", min_score=0.0).hits == []
    updated = _scores(other, "XML PDF invoice format")
    other.close()
    import shutil

    shutil.rmtree(memory.root / ".fsmem")
    assert _scores(_new_process_memory(memory.root), "XML PDF invoice format") == updated


def test_an_index_of_version_11_is_given_its_digests_not_rebuilt(memory):
    """Version 12 adds `search_files.digest`: an index of 11 gets the column (NULL: those files' rows are made
    again when next read, as before) and keeps its rows, its `built` and every answer."""
    from fsmem.search.analyzer import ANALYZER_VERSION

    for path in memory.root.rglob("*.md"):  # written a while ago: no row is racy, none is read again
        os.utime(path, (1e9, 1e9))
    memory.search("proration")
    scores = _scores(_new_process_memory(memory.root))
    conn = connect(cache_path(memory.root))
    try:
        conn.execute("ALTER TABLE search_files DROP COLUMN digest")
        conn.execute("UPDATE search_meta SET value = ? WHERE key = 'version'", (f"11:{ANALYZER_VERSION}",))
        built = conn.execute("SELECT value FROM search_meta WHERE key = 'built'").fetchone()[0]
    finally:
        conn.close()
    other = _new_process_memory(memory.root)
    assert _scores(other) == scores
    conn = connect(cache_path(memory.root))
    try:
        meta = dict(conn.execute("SELECT key, value FROM search_meta WHERE key IN ('built', 'version')"))
        digests = [d for (d,) in conn.execute("SELECT digest FROM search_files")]
    finally:
        conn.close()
    assert meta["built"] == built and meta["version"].startswith("12:") and digests and set(digests) == {None}
    other.write("topics/airships.md", "- favourite: zeppelin\n")
    assert _search_files(memory.root)[0]["topics/airships.md"][2] is not None


def test_consolidation_updates_the_index_of_every_file_it_writes(memory):
    memory.search("proration")
    memory.note("- employer: Initech", session="s1", subject="people/Adam Smith")
    report = memory.consolidate()
    indexed = _indexed(memory)
    assert report.files_written and all(indexed[p] == _stamp(memory, p) for p in report.files_written)
    assert locations(memory.search("Adam Smith employer", max_results=1)) == ["entities/people/adam-smith.md:11"]


def test_a_write_never_creates_an_index_nobody_searched(memory):
    memory.ls()  # the metadata cache exists, the search index does not
    memory.write("topics/airships.md", "- favourite: zeppelin\n")
    assert _indexed(memory) == {}


@pytest.mark.slow
def test_the_watcher_updates_the_index_without_a_search(memory):
    import threading
    import time

    pytest.importorskip("watchdog")
    memory.search("proration")
    stop, ready = threading.Event(), threading.Event()
    watcher = threading.Thread(target=lambda: memory.watch(settle=0.1, stop=stop, ready=ready), daemon=True)
    watcher.start()
    try:
        assert ready.wait(20)
        path = memory.root / "topics" / "billing.md"
        path.write_text(path.read_text() + "\n- The gondola fee is prorated.\n")
        deadline = time.monotonic() + 20
        while _indexed(memory).get("topics/billing.md") != _stamp(memory, "topics/billing.md"):
            assert time.monotonic() < deadline, "the watcher did not update the index"
            time.sleep(0.05)
    finally:
        stop.set()
        watcher.join(10)


CONCURRENT = """
import os, random, sys
from pathlib import Path
from fsmem.search.index import SearchIndex
root, me = Path(sys.argv[1]), int(sys.argv[2])
index, rng = SearchIndex(root), random.Random(me)
shared = sorted((root / "topics").glob("shared-*.md"))
mine = []
for round in range(25):
    for path in rng.sample(shared, 2):  # both processes edit the same files, atomically
        text = path.read_text()
        temp = path.with_name(f".tmp-{me}")
        temp.write_text(text + f"- worker{me} round{round} walrus invoice\\n")
        os.replace(temp, path)
    if round % 5 == 1:
        new = root / "topics" / f"own-{me}-{round}.md"
        new.write_text(f"# Own {me}\\n- made by worker{me} in round{round}\\n")
        mine.append(new)
    if round % 5 == 3 and mine:
        mine.pop(0).unlink()
    index.refresh()
"""


@pytest.mark.slow
def test_two_processes_updating_at_once_both_end_correct(memory):
    import shutil

    for n in range(6):
        (memory.root / "topics" / f"shared-{n}.md").write_text(f"# Shared {n}\n- proration of invoices\n")
    memory.search("proration")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    workers = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT, str(memory.root), str(n)], env=env, stderr=subprocess.PIPE)
        for n in (1, 2)
    ]
    for worker in workers:
        assert worker.wait(120) == 0, worker.stderr.read().decode()
    # no search ran here since: the index holds what the two processes left, which must be a fresh build's
    indexed = _indexed(memory)
    on_disk = {p.relative_to(memory.root).as_posix() for p in memory.root.rglob("*.md") if ".fsmem" not in p.parts}
    assert set(indexed) == on_disk
    assert all(indexed[p] == _stamp(memory, p) for p in on_disk)
    concurrent = _scores(_new_process_memory(memory.root), "walrus invoice worker1 worker2 proration")
    shutil.rmtree(memory.root / ".fsmem")
    assert _scores(_new_process_memory(memory.root), "walrus invoice worker1 worker2 proration") == concurrent


MICROSOFT = """---
title: Microsoft
topic: Microsoft
---
# Microsoft

## Facts
- ceo: Steve Jobs ([2020-02-07](../../sessions/2020/02/07/facts-037.md))

## Superseded
- ceo: Satya Nadella ([2020-01-18](../../sessions/2020/01/18/facts-017.md) to 2020-02-07)
"""

WINDOWS_PHONE = """---
title: Windows Phone
topic: Windows Phone
---
# Windows Phone

## Facts
- developer: Microsoft ([2020-02-14](../../sessions/2020/02/14/facts-045.md))
"""


def test_a_fact_is_found_by_its_subject(memory):
    (memory.root / "topics" / "microsoft.md").write_text(MICROSOFT)
    (memory.root / "topics" / "windows-phone.md").write_text(WINDOWS_PHONE)
    (memory.root / "topics" / "msft.md").write_text("---\ntitle: Redmond\naliases: [Seattle area]\n---\n- hq: yes\n")
    top = memory.search("Who is the chief executive officer of Microsoft?", max_results=1).hits[0]
    assert (top.path, top.text) == ("topics/microsoft.md", "- ceo: Steve Jobs (2020-02-07)")
    assert locations(memory.search("Who is the developer of Windows Phone?", max_results=1)) == [
        "topics/windows-phone.md:8"
    ]
    assert locations(memory.search("seattle area", max_results=1)) == ["topics/msft.md:5"]  # an alias names it too


def test_a_long_lived_process_survives_its_state_folder_being_deleted(memory):
    import shutil

    assert locations(memory.search("proration"))
    shutil.rmtree(memory.root / ".fsmem")
    assert locations(memory.search("proration"))  # the same SearchIndex object: it notices and rebuilds
    assert "topics/billing.md" in _indexed(memory)


def test_searches_at_once_share_one_walk_and_still_see_every_earlier_write(memory, monkeypatch):
    import threading
    import time

    import fsmem.search.index as search_index

    memory.search("proration")  # built
    walks = []
    real_walk = search_index.walk_stats

    def slow_walk(root, *args, **kwargs):
        walks.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every other search to be asked while this walk runs
        yield from real_walk(root, *args, **kwargs)

    monkeypatch.setattr(search_index, "walk_stats", slow_walk)
    # written by hand, so only a walk can see it: every search asked after this must find it
    (memory.root / "topics" / "walrus.md").write_text("# Walrus\n- walrus tusks: ivory, up to a metre\n")
    memories = [Memory(memory.root) for _ in range(8)]
    found: list[bool] = []
    start = threading.Barrier(len(memories))

    def search(each: Memory) -> None:
        start.wait()
        found.append(any(h.path == "topics/walrus.md" for h in each.search("walrus tusks").hits))

    threads = [threading.Thread(target=search, args=(each,)) for each in memories]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert found == [True] * len(memories)
    assert 1 <= len(walks) <= 2, f"{len(walks)} walks for {len(memories)} searches at once"


def test_a_file_removed_between_its_reading_and_its_rows_is_not_indexed(memory, monkeypatch):
    import fsmem.search.index as search_index

    memory.search("proration")  # built
    doomed = memory.root / "topics" / "doomed.md"
    doomed.write_text("# Doomed\n- walrus count: three\n")
    real_read = search_index.read_file

    def read_then_vanish(root, rel, full, analyzer, **given):
        parsed = real_read(root, rel, full, analyzer, **given)
        if rel == "topics/doomed.md":
            doomed.unlink()  # another process removes it, and its own refresh is already over
        return parsed

    monkeypatch.setattr(search_index, "read_file", read_then_vanish)
    memory.search_index.refresh()
    assert "topics/doomed.md" not in _indexed(memory)


def test_a_memory_of_one_entity_finds_its_fact_by_the_entity_name(tmp_path, monkeypatch):
    # BM25's IDF of a name found in one of two named documents is 0: the subject part must still count
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T12:00:00+00:00")
    memory = Memory.init(tmp_path / "fresh")
    memory.note("- employer: Globex", session="s1", subject="people/Ada Quill")
    memory.consolidate()
    for question in ("Ada employer", "Where does Ada work?"):
        hits = memory.search(question).hits
        assert hits and (hits[0].path, hits[0].text) == (
            "entities/people/ada-quill.md",
            "- employer: Globex (2026-11-30T12:00:00Z)",  # the citation cut to its stamp
        )


def test_ranking_reads_beside_a_thread_that_holds_the_index(memory):
    import threading

    from fsmem.search.scoring import rank
    from fsmem.search.settings import SearchSettings

    memory.search("proration")  # built, and this thread's connection is open
    index = memory.search_index
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with index.lock:  # what a refresh or a write's index update holds
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    try:
        ranked: list[list[int]] = []
        reader = threading.Thread(target=lambda: ranked.append(rank(index, "proration", SearchSettings()).ids))
        reader.start()
        reader.join(5)
        assert ranked and ranked[0], "ranking waited for the index lock"
    finally:
        release.set()
        holder.join(10)


def test_kept_frequencies_give_the_scores_a_fresh_index_gives_after_every_change(memory):
    """Document frequencies, the vocabulary and the named documents kept give a fresh index's scores after every
    change (carried across it, or read again)."""
    from fsmem.search.index import SearchIndex
    from fsmem.search.scoring import rank

    def scores(index, query):
        ranking = rank(index, query, memory.search_settings, limit=20)
        return {ranking.paths[r]: round(ranking.scores[r], 9) for r in ranking.ids}

    queries = ["proration seat changes", "billing cycle", "pesapalo club", "walrus"]
    for step in range(4):
        memory.search("warm")
        kept = memory.search_index
        fresh = SearchIndex(memory.root)
        fresh.kept.at = lambda state, conn=None: {}  # nothing kept: every frequency asked of the tables
        for query in queries:
            assert scores(kept, query) == scores(fresh, query), (step, query)
        fresh.close()
        (memory.root / "topics" / f"extra{step}.md").write_text(
            f"---\ntitle: Extra {step}\n---\n- proration: walrus seats {step}\n- billing cycle: yearly\n"
        )
    state = memory.search_index.kept._state
    memory.search("proration")
    assert memory.search_index.kept._state != state  # the new files moved it


@pytest.mark.parametrize(
    ("saved", "asked"),
    [
        ("Zu\u0308rich", "Z\u00fcrich"),  # saved in NFD (macOS), asked in NFC
        ("Z\u00fcrich", "Zu\u0308rich"),  # and the reverse
        ("\ufb01nance in \uff3a\u00fcrich", "finance Z\u00fcrich"),  # a ligature and a fullwidth letter (NFKC)
    ],
)
def test_a_word_is_found_whatever_its_unicode_form(memory, saved, asked):
    """A word saved in one Unicode form is found by a question typed in another: index and question are cut
    from the same (NFKC) form, so an NFD file from macOS meets an NFC question."""
    (memory.root / "topics" / "office.md").write_text(f"# Office\n\n- office: {saved}\n", encoding="utf-8")
    result = memory.search(asked, max_results=3)
    assert locations(result)[:1] == ["topics/office.md:3"]
    assert memory.search(saved, max_results=3).hits[0].location == "topics/office.md:3"
