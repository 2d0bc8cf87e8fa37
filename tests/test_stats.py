"""fsmem stats: the figures match the calls made, the filters work, the CLI exits like grep."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from test_tools import build_memory

from fsmem import Memory
from fsmem.agents import tools
from fsmem.query.stats import percentile
from fsmem.store import retrieval_log


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T10:00:00+00:00")
    return build_memory(tmp_path)


def nearest_rank(values, fraction):
    ordered = sorted(values)
    return ordered[math.ceil(fraction * len(ordered)) - 1]


def test_percentile_is_nearest_rank():
    values = list(range(1, 21))
    assert percentile(values, 0.5) == 10
    assert percentile(values, 0.95) == 19
    assert percentile([7.5], 0.95) == 7.5
    assert percentile([3, 1, 2], 0.5) == 2


def test_stats_match_the_calls_made(root):
    researcher = Memory(root, agent="researcher")
    reviewer = Memory(root, agent="reviewer")
    made = [
        tools.call(researcher, "grep", {"pattern": "proration"}),
        tools.call(researcher, "grep", {"pattern": "no-such-text"}),
        tools.call(researcher, "grep", {"pattern": "-", "max_results": 2}),
        tools.call(researcher, "grep", {"pattern": 5}),
        tools.call(researcher, "read", {"path": "topics/billing.md"}),
        tools.call(reviewer, "read", {"path": "topics/billing.md", "lines": "1:3"}),
        tools.call(reviewer, "ls", {}),
    ]
    result = researcher.stats()
    by_tool = {t.tool: t for t in result.tools}
    assert [t.tool for t in result.tools] == ["grep", "read", "ls"]
    assert result.calls == 7
    latencies = {name: [r["latency_ms"] for r in retrieval_log.records(root) if r["tool"] == name] for name in by_tool}
    for name, figures in by_tool.items():
        answers = [a for a in made if a.tool == name]
        assert figures.calls == len(answers)
        assert figures.mean_tokens == pytest.approx(sum(a.tokens for a in answers) / len(answers))
        assert figures.empty_share == sum(a.empty for a in answers) / len(answers)
        assert figures.truncated_share == sum(a.truncated for a in answers) / len(answers)
        assert figures.error_share == sum(a.is_error for a in answers) / len(answers)
        assert figures.p50_ms == nearest_rank(latencies[name], 0.5)
        assert figures.p95_ms == nearest_rank(latencies[name], 0.95)
        assert figures.skip_share is None
    grep = by_tool["grep"]
    assert (grep.empty_share, grep.truncated_share, grep.error_share) == (0.25, 0.25, 0.25)

    only_reviewer = researcher.stats(agent="reviewer")
    assert [(t.tool, t.calls) for t in only_reviewer.tools] == [("read", 1), ("ls", 1)]


def test_since_filter_and_skip_share_of_recall_records(root):
    for time, skipped in [
        ("2026-10-01T00:00:00+00:00", True),
        ("2026-11-02T00:00:00+00:00", True),
        ("2026-11-03T00:00:00+00:00", False),
        ("2026-11-04T00:00:00+00:00", True),
        ("2026-11-05T00:00:00+00:00", False),
    ]:
        retrieval_log.append(
            root,
            {
                "time": time,
                "agent": "researcher",
                "tool": "recall",
                "arguments": {"query": "q"},
                "paths": [],
                "rows": 0,
                "tokens": 0 if skipped else 40,
                "latency_ms": 1.0,
                "truncated": False,
                "empty": skipped,
                "skipped": skipped,
                "reason": "budget spent" if skipped else None,
            },
        )
    memory = Memory(root)
    (recall,) = memory.stats(since="2026-11-01").tools
    assert (recall.calls, recall.skip_share, recall.mean_tokens, recall.empty_share) == (4, 0.5, 20.0, 0.5)
    (everything,) = memory.stats().tools
    assert everything.calls == 5 and everything.skip_share == 0.6
    assert "60%" in memory.stats().to_text().splitlines()[1]


def run_cli(root, *args):
    return subprocess.run([sys.executable, "-m", "fsmem", "--root", str(root), *args], capture_output=True, text=True)


def test_cli_exit_codes_and_json(root):
    empty = run_cli(root, "stats")
    assert (empty.returncode, empty.stdout.strip()) == (1, "(no tool calls logged)")
    tools.call(Memory(root, agent="researcher"), "grep", {"pattern": "proration"})
    done = run_cli(root, "stats", "--json", "--agent", "researcher")
    assert done.returncode == 0
    document = json.loads(done.stdout)
    assert document["calls"] == 1 and document["agent"] == "researcher"
    assert document["tools"][0]["tool"] == "grep" and document["tools"][0]["calls"] == 1
    text = run_cli(root, "stats")
    assert text.stdout.splitlines()[0].split() == [
        "tool",
        "calls",
        "p50",
        "ms",
        "p95",
        "ms",
        "mean",
        "tok",
        "empty",
        "cut",
        "errors",
        "skipped",
    ]
    bad = run_cli(root, "stats", "--since", "last tuesday")
    assert bad.returncode == 2
    assert bad.stderr == "fsmem: error: --since takes an ISO 8601 date or time such as 2026-11-01, not 'last tuesday'\n"
