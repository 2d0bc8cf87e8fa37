"""`stat PATH`: one file in figures, on every face: the CLI, `Memory.stat`, the agent tool, MCP and the server.

A memory with history answers the last change from its last commit; one without, from the file's time. The
answer is bounded by the budget like every other, and the scope hides what is outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import FsmemError

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-11-20T09:00:00Z"
BILLING = """---
title: Billing
---
# Billing

See [[people/Rosa Diaz]] and [[Nowhere]].

## Facts
- billing cycle: monthly
- plan: pro

## Superseded
- plan: basic (to 2026-11-01)
"""
ROSA = """---
title: Rosa Diaz
type: semantic
---
# Rosa Diaz

Owns [[topics/billing.md]]; see also [[Billing]].

## Facts
- employer: Globex
"""


def make(root: Path, *, git: bool) -> Memory:
    memory = Memory.init(root, git=git)
    memory.write("topics/billing.md", body=BILLING.split("---\n", 2)[2], set={"title": "Billing"})
    memory.write("entities/people/rosa-diaz.md", body=ROSA.split("---\n", 2)[2], set={"title": "Rosa Diaz"})
    (root / "topics" / "billing.history.md").write_text("# Billing: history\n\n- plan: free (to 2026-01-01)\n")
    return memory


@pytest.fixture
def history(tmp_path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    return make(tmp_path / "mem", git=True)


@pytest.fixture
def plain(tmp_path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    return make(tmp_path / "plain", git=False)


def fsmem(root: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, env=env)


def test_python_counts_facts_links_and_names_the_last_commit(history):
    answer = Memory(history.root).stat("topics/billing.md")
    assert answer.path == "topics/billing.md" and answer.tokens > 0
    assert answer.facts == {"current": 2, "superseded": 2}  # one under Superseded, one in billing.history.md
    assert answer.links == {"out": 2, "in": 2}
    change = answer.last_change
    assert change["from"] == "history" and change["date"].startswith("2026-11-20") and change["commit"]
    assert change["agent"] == "default"
    assert not answer.truncated and not answer.empty and answer.cited == ["topics/billing.md"]
    assert answer.to_text().splitlines() == [
        "topics/billing.md",
        f"size: {answer.tokens} tokens",
        "keyed facts: 2 current, 2 superseded",
        f"last change: {change['date']} by default, commit {change['commit']}: {change['message']}",
        'links: 2 out, 2 in (see memory.links(path="topics/billing.md"))',
    ]


def test_without_history_the_last_change_is_the_files_time(plain):
    target = plain.root / "topics" / "billing.md"
    os.utime(target, (1_700_000_000, 1_700_000_000))
    change = Memory(plain.root).stat("topics/billing.md").last_change
    assert change == {"from": "mtime", "date": "2023-11-14T22:13:20Z", "agent": None, "commit": None, "message": None}


def test_the_cli_prints_it_and_its_json(history):
    done = fsmem(history.root, "stat", "topics/billing.md", process=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "topics/billing.md" and lines[2] == "keyed facts: 2 current, 2 superseded"
    assert lines[-1] == "links: 2 out, 2 in (see fsmem links topics/billing.md)"
    data = json.loads(fsmem(history.root, "stat", "topics/billing.md", "--json").stdout)
    assert data["facts"] == {"current": 2, "superseded": 2} and data["links"] == {"out": 2, "in": 2}
    assert data["last_change"]["from"] == "history" and data["truncated"] is False
    missing = fsmem(history.root, "stat", "topics/nothing.md")
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_the_answer_stays_within_the_budget(history):
    memory = Memory(history.root)
    answer = memory.stat("topics/billing.md", max_tokens=30)
    assert answer.truncated and 0 < answer.rows < 5
    assert memory.tokens.count(answer.to_text()) <= 30  # the lines, and the note that says it was cut
    cut = fsmem(history.root, "stat", "topics/billing.md", "--max-tokens", "30")
    assert cut.returncode == 0 and "larger --max-tokens" in cut.stdout


def test_a_scope_hides_the_file_and_the_links_from_outside_it(history):
    scoped = Memory(history.root, scope=["topics/"])
    assert scoped.stat("topics/billing.md").links == {"out": 2, "in": 0}  # rosa-diaz.md is outside the scope
    with pytest.raises(FsmemError):
        scoped.stat("entities/people/rosa-diaz.md")


def test_the_agent_tool_answers_it_for_a_read_only_agent(history):
    reader = tools.read_only(Memory(history.root))
    assert "stat" in [d["name"] for d in tools.definitions(reader)]
    answer = tools.call(reader, "stat", {"path": "topics/billing.md"})
    assert not answer.is_error and 'links: 2 out, 2 in (see links(path="topics/billing.md"))' in answer.text
    refused = tools.call(reader, "stat", {"path": "topics/billing.md", "lines": "1:2"})
    assert refused.is_error


def test_mcp_offers_and_answers_it(history):
    pytest.importorskip("mcp")
    from test_mcp_server import run_session, text_of

    async def actions(session):
        listed = await session.list_tools()
        return listed, await session.call_tool("stat", {"path": "topics/billing.md"})

    listed, result = run_session(history.root, actions=actions)
    stat = next(t for t in listed.tools if t.name == "stat")
    assert stat.annotations.read_only_hint and not result.is_error
    assert "keyed facts: 2 current, 2 superseded" in text_of(result)
    assert result.structured_content == {"rows": 5, "truncated": False}
