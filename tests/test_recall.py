import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import configure

from fsmem import Memory
from fsmem.store.retrieval_log import records

FACTS = "---\ntitle: Billing\nupdated: 2026-01-01\n---\n## Facts\n- proration: daily, for seat changes mid-cycle\n"


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-01-10T00:00:00+00:00")
    root = tmp_path / "mem"
    Memory.init(root)
    (root / "billing.md").write_text(FACTS)
    return Memory(root)


def set_recall(memory, **settings):
    configure(memory.root, {"search": {"recall": settings}})
    return Memory(memory.root)


def last_record(memory):
    return list(records(memory.root))[-1]


def test_recall_searches_when_no_rule_applies(memory):
    result = memory.recall("how is proration computed", seen="we talked about the weather")
    assert not result.skipped and result.reason is None
    assert [h.location for h in result.result.hits] == ["billing.md:6"]
    record = last_record(memory)
    assert record["tool"] == "recall" and record["skipped"] is False and record["reason"] is None
    assert record["paths"] == ["billing.md:6"] and record["rows"] == 1


def test_skip_when_the_turn_budget_is_spent(memory):
    result = memory.recall("proration", max_tokens=10)
    assert result.skipped and result.reason == "budget" and result.empty
    assert result.to_text() == "recall skipped: the token budget for this turn is spent"
    record = last_record(memory)
    assert (
        record["skipped"] is True and record["reason"] == "budget" and record["empty"] is True and record["paths"] == []
    )


def test_skip_when_the_query_is_already_in_context(memory):
    context = "User: How is proration computed?\nAssistant: daily, for seat changes."
    assert memory.recall("how is proration computed", seen=context).reason == "in_context"
    assert memory.recall("how is prorration computed", seen=context).reason == "in_context"  # fuzzy
    assert not memory.recall("seat change proration", seen="unrelated chatter about lunch").skipped


def test_skip_when_nothing_was_written_within_the_horizon(memory):
    old = 1_700_000_000  # 2023: older than the horizon
    os.utime(memory.root / "billing.md", (old, old))
    for path in memory.root.rglob("*.md"):
        os.utime(path, (old, old))
    memory = set_recall(memory, horizon_days=7)
    assert memory.recall("proration").reason == "nothing_new"
    (memory.root / "fresh.md").write_text("---\ntitle: Lunch\n---\n- lunch: pizza on fridays\n")
    assert memory.recall("proration").reason == "nothing_new"  # fresh, but not relevant
    assert not memory.recall("pizza lunch").skipped


def test_recall_cli_reads_the_seen_file(memory, tmp_path):
    context = tmp_path / "context.txt"
    context.write_text("how is proration computed")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-c", "from fsmem.cli import main; main()", "--root", str(memory.root), "recall"]
    skipped = subprocess.run(
        cmd + ["how is proration computed", "--seen-file", str(context), "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert skipped.returncode == 1, skipped.stderr
    assert json.loads(skipped.stdout)["reason"] == "in_context"
    found = subprocess.run(cmd + ["proration", "--seen-file", "-"], input="", capture_output=True, text=True, env=env)
    assert found.returncode == 0 and "6: - proration: daily" in found.stdout
    missing = subprocess.run(
        cmd + ["proration", "--seen-file", str(tmp_path / "nope")], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr
