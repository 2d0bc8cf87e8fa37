import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsmem import Memory
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
    assert "left out by the result limit. Continue with --offset 1" in capped.to_text()


def test_front_matter_filters_apply_before_ranking(memory):
    assert {h.path for h in memory.search("billing invoices", type="episodic").hits} == {"sessions/s.md"}
    assert {h.path for h in memory.search("billing invoices", tag="finance").hits} == {"topics/billing.md"}
    assert {h.path for h in memory.search("billing invoices", updated_after="2026-01-01T12:00").hits} == {
        "sessions/s.md"
    }


def test_near_spelling_matches_with_rapidfuzz(memory):
    assert locations(memory.search("prorration", max_results=1)) == ["topics/billing.md:12"]


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
    from fsmem.search.index import load_columns

    stored = load_columns(memory.root / ".fsmem" / "search")
    assert stored is not None and "topics/airships.md" not in [f.path for f in stored.files]


def _new_process_memory(root):
    """A Memory with its own SearchIndex, as a new process would have (not this process's shared one)."""
    from fsmem.search.index import SearchIndex

    fresh = Memory(root)
    fresh._search_index = SearchIndex(Path(root).resolve())
    return fresh


def _generation(memory):
    folder = memory.root / ".fsmem" / "search"
    return folder / (folder / "current").read_text().strip()


@pytest.mark.parametrize("damage", ["manifest", "pointer", "array", "version"])
def test_index_is_rebuilt_when_deleted_or_corrupt(memory, damage):
    import numpy as np

    from fsmem.search.index import load_columns

    first = locations(memory.search("proration"))
    folder = memory.root / ".fsmem" / "search"
    generation = _generation(memory)
    if damage == "manifest":
        (generation / "manifest.json").write_text("{not json")
    elif damage == "pointer":
        (folder / "current").write_text("v6/no-such-generation\n")
    elif damage == "array":  # right file, wrong length: caught by the consistency check
        np.save(generation / "text_by_term.npy", np.zeros(3, dtype=np.int32))
    else:
        manifest = json.loads((generation / "manifest.json").read_text())
        (generation / "manifest.json").write_text(json.dumps({**manifest, "version": manifest["version"] - 1}))
    assert load_columns(folder) is None
    assert locations(_new_process_memory(memory.root).search("proration")) == first
    assert load_columns(folder).files and _generation(memory) != generation
    assert [p.name for p in (folder / "v6").iterdir()] == [_generation(memory).name]  # the damaged one is gone
    import shutil

    shutil.rmtree(memory.root / ".fsmem")
    assert locations(Memory(memory.root).search("proration")) == first


def test_an_older_npz_cache_is_replaced(memory):
    folder = memory.root / ".fsmem" / "search"
    folder.mkdir(parents=True)
    (folder / "index.npz").write_bytes(b"PK old cache")
    assert locations(memory.search("proration"))
    assert sorted(p.name for p in folder.iterdir()) == ["current", "v6"]


def test_a_cache_replaced_by_another_process_between_searches(memory):
    """This process maps one generation; another process edits a file and writes a new one (removing the old)."""
    assert memory.search("gondola").empty
    before = _generation(memory)
    script = (
        "import sys; from fsmem import Memory; m = Memory(sys.argv[1]); "
        "p = m.root / 'topics' / 'billing.md'; p.write_text(p.read_text() + '\\n- The gondola fee is prorated.\\n'); "
        "assert m.search('gondola').hits"
    )
    subprocess.run([sys.executable, "-c", script, str(memory.root)], check=True)
    assert _generation(memory) != before and not before.exists()
    last = len((memory.root / "topics" / "billing.md").read_text().splitlines())
    assert locations(memory.search("gondola"))[0] == f"topics/billing.md:{last}"
    assert _generation(memory).name == [p.name for p in (memory.root / ".fsmem" / "search" / "v6").iterdir()][0]


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
    assert full == "- The walrus colony moved to the north pier. (2026-01-10, sessions/2026/01/10/s1.md)"
    memory.note("- A second walrus colony appeared at the south pier.", session="s1", subject="topic/Wildlife")
    grown = [h.path for h in memory.search("second walrus colony south", max_results=10).hits]
    assert grown[0].startswith("sessions/")  # a note that grew after consolidation is searched again


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


def run_cli(root, *args, input=None):
    return subprocess.run(
        [sys.executable, "-c", "from fsmem.cli import main; main()", "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=input,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )


def test_cli_search_json_text_and_exit_codes(memory):
    done = run_cli(memory.root, "search", "proration", "--k", "1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"results", "tokens", "truncated", "left_out"}
    assert {"path", "line", "text", "score"} <= set(data["results"][0])
    assert data["results"][0]["path"] == "topics/billing.md" and data["results"][0]["line"] == 12
    missing = run_cli(memory.root, "search", "quantum chromodynamics")
    assert missing.returncode == 1 and missing.stdout.startswith("no relevant memory")
    bad = run_cli(memory.root, "search", "x", "--updated-after", "yesterday")
    assert (
        bad.returncode == 2 and bad.stderr.startswith("fsmem: error: --updated-after") and "Traceback" not in bad.stderr
    )
    bad_k = run_cli(memory.root, "search", "x", "--k", "0")
    assert bad_k.returncode == 2 and "max_results must be a whole number of at least 1" in bad_k.stderr


def test_an_edit_spliced_into_the_index_scores_as_a_fresh_build(memory):
    import shutil

    import numpy as np

    from fsmem.search.ranking import search

    def scores(m):
        return np.asarray(
            search(m.search_index, m.tokens, m.search_settings, "proration invoice walrus", k=5, max_tokens=500)[
                2
            ].scores
        )

    scores(memory)
    path = memory.root / "topics" / "billing.md"
    path.write_text(path.read_text() + "\n- The walrus invoice needs proration.\n")
    spliced = scores(memory)
    shutil.rmtree(memory.root / ".fsmem")
    fresh = Memory(memory.root)
    fresh._search_index = __import__("fsmem.search.index", fromlist=["SearchIndex"]).SearchIndex(memory.root.resolve())
    assert np.array_equal(spliced, scores(fresh)) and spliced.max() > 0


def test_top_rows_are_the_head_of_the_full_order_ties_included():
    import numpy as np

    from fsmem.search.ranking import Ranking

    scores = np.array([0.5, 0.0, 0.9, 0.5, -1.0, 0.5, 0.2, 0.9, 0.0, 0.5])
    ranking = Ranking(scores=scores, relevance=scores, keep=scores >= 0)
    assert ranking.candidates.tolist() == [2, 7, 0, 3, 5, 9, 6, 1, 8]
    assert ranking.top(4, 0.3) == ([2, 7, 0, 3], 6)  # the 0.5 tie is cut in row order, as the full order does
    assert ranking.top(10, 0.3) == ([2, 7, 0, 3, 5, 9], 6)
    assert ranking.top(0, 0.0) == ([], 7) and ranking.best() == 0.9


def test_threads_sharing_the_index_bring_it_up_to_date_once(memory, monkeypatch):
    """A server's requests share one index per memory: after a write, one thread splices, the others wait."""
    from concurrent.futures import ThreadPoolExecutor

    from fsmem.search import index as index_module

    memory.search("zeppelin")  # warm
    memory.write("topics/airships.md", "---\ntitle: Airships\n---\n# Airships\n\n- favourite: zeppelin\n")
    import time

    splices = []
    real_splice = index_module.splice

    def slow_splice(*args):
        splices.append(1)
        time.sleep(0.3)  # long enough for every other thread to arrive meanwhile
        return real_splice(*args)

    monkeypatch.setattr(index_module, "splice", slow_splice)
    with ThreadPoolExecutor(6) as pool:
        found = list(pool.map(lambda _: locations(memory.search("zeppelin")), range(12)))
    assert found == [["topics/airships.md:6"]] * 12
    assert len(splices) == 1


def test_a_search_that_waited_sees_a_write_made_during_the_refresh_it_waited_for(memory, monkeypatch):
    """Taking another thread's refresh is allowed only when it began after the call: no write is missed."""
    import threading
    import time

    from fsmem.search import index as index_module

    memory.search("zeppelin")  # warm
    memory.write("topics/a.md", "---\ntitle: A\n---\n# A\n\n- first: alpha\n")
    real_splice = index_module.splice
    slow = threading.Event()

    def slow_splice(*args):
        if not slow.is_set():
            slow.set()
            time.sleep(0.5)
        return real_splice(*args)

    monkeypatch.setattr(index_module, "splice", slow_splice)
    first = threading.Thread(target=memory.search, args=("alpha",))
    first.start()
    slow.wait(5)  # the first refresh is under way; this write comes after its walk
    memory.write("topics/b.md", "---\ntitle: B\n---\n# B\n\n- second: zeppelin\n")
    assert locations(memory.search("zeppelin")) == ["topics/b.md:6"]
    first.join()


def test_after_a_splice_the_index_is_read_from_its_files_not_kept_in_memory(memory):
    """A long-lived server splices after every write; keeping each new copy in memory made it grow by the index's size."""
    import numpy as np

    memory.search("zeppelin")
    memory.write("topics/airships.md", "---\ntitle: Airships\n---\n# Airships\n\n- favourite: zeppelin\n")
    assert locations(memory.search("zeppelin")) == ["topics/airships.md:6"]
    arrays = memory.search_index._columns.arrays
    assert all(isinstance(array, np.memmap) for array in arrays.values())
