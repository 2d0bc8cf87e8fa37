"""fsmem context: profile/ first, then INDEX.md (or the catalog when it is missing), trimmed in whole lines."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys

import cli_runner
import pytest
from test_tools import build_memory

from fsmem import Memory

INDEX = """---
title: Index
description: Table of contents of entities and topics
---
# Index

## Entities
- entities/people/adam-smith.md — Adam Smith: finance lead at Acme
- entities/projects/atlas.md — Project Atlas: billing migration

## Topics
- topics/billing.md — Billing: cycles, proration, invoices
"""


@pytest.fixture
def root(tmp_path):
    return build_memory(tmp_path, "    tiny:\n      max_tokens: 80\n      max_results: 5\n")


def test_profile_first_then_the_catalog_when_there_is_no_index(root):
    block = Memory(root).context()
    lines = block.text.splitlines()
    assert lines[:2] == [
        "# Memory",
        "Shared memory files. Look things up with ls, grep, read and search; save what you learn with note.",
    ]
    headings = [line for line in lines if line.startswith(("## profile/", "## Entities"))]
    assert headings == [
        "## profile/identity.md (Identity)",
        "## profile/team.md (Team)",
        "## Entities and topics (INDEX.md does not exist yet; `fsmem consolidate` writes it)",
    ]
    assert "- escalation: Maria Lopez for anything touching production" in lines
    assert "title: Team" not in block.text  # front matter is left out
    assert lines[-6:] == [
        "- entities/orgs/acme.md — Acme Corp: Customer; 1,200 seats on the enterprise plan, migrating billing with Project Atlas",
        "- entities/people/adam-smith.md — Adam Smith: Customer-side finance lead at Acme; owns the billing migration on their side",
        "- entities/people/maria-lopez.md — Maria Lopez: Our on-call SRE lead; decides deployment windows",
        "- entities/projects/atlas.md — Project Atlas: Migration of Acme's billing from the legacy invoicing system to usage-based billing",
        "- topics/billing.md — Billing: How we bill customers: cycles, proration, invoices and the usage-based migration",
        "- topics/deployments.md — Deployments: When and how we deploy, freezes, and the rollback rule",
    ]
    assert not block.index_exists and not block.truncated and block.cut == []
    assert block.sources == ["profile/identity.md", "profile/team.md", "catalog"]
    assert block.tokens == Memory(root).tokens.count(block.text) <= 2000


def test_index_follows_the_profile_when_it_exists(root):
    (root / "INDEX.md").write_text(INDEX)
    block = Memory(root).context()
    text = block.text
    assert block.index_exists and block.sources == ["profile/identity.md", "profile/team.md", "INDEX.md"]
    assert text.index("## profile/team.md") < text.index("## INDEX.md") < text.index("- topics/billing.md — Billing")
    assert "does not exist" not in text and "title: Index" not in text
    assert text.endswith("## Topics\n- topics/billing.md — Billing: cycles, proration, invoices")


def test_superseded_profile_facts_are_left_out(root):
    team = root / "profile" / "team.md"
    team.write_text(team.read_text() + "\n## Superseded\n- tone: long and chatty (until 2026-10-01)\n")
    assert "long and chatty" not in Memory(root).context().text


def test_trimmed_to_the_budget_in_whole_lines_with_a_note(root):
    (root / "INDEX.md").write_text(INDEX)
    memory = Memory(root)
    full = memory.context().text.splitlines()
    for budget in range(40, 400, 7):
        block = memory.context(max_tokens=budget)
        assert block.tokens == memory.tokens.count(block.text) <= budget
        lines = block.text.splitlines()
        if not block.truncated:
            assert lines == full
            continue
        assert lines[-1].startswith(f"[context cut at the {budget}-token budget; left out: ")
        assert lines[:-1] == full[: len(lines) - 1]  # a prefix of the full block: whole lines, profile first
        assert "INDEX.md (read it)" in lines[-1] or "INDEX.md from line" in lines[-1]


def test_cut_note_names_the_line_to_continue_from(root):
    block = Memory(root).context(max_tokens=120)
    assert block.cut[0] == 'profile/identity.md from line 12 (read it with lines="12:")'
    assert block.cut[1:] == [
        "profile/team.md (read it)",
        "6 of 6 entity/topic rows (list entities and topics to see them)",
    ]
    assert block.text.splitlines()[-2] == "- tone: (how answers should sound)"  # line 11 of profile/identity.md


def test_the_cut_note_names_the_read_that_goes_on_in_the_words_of_the_face_that_asked(root):
    """It said `read it with lines '12:'` on every face: no flag of the command line, no argument of a tool.
    The read it names, sent as given, shows the lines the block left out."""
    api = Memory(root).context(max_tokens=120).cut
    assert api[0] == 'profile/identity.md from line 12 (read it with lines="12:")'

    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    done = cli_runner.run(["--root", str(root), "context", "--max-tokens", "120"], text=True, env=env)
    said = re.search(r"profile/identity.md from line 12 \(read it with ([^)]*)\)", done.stdout)
    assert said is not None and said[1] == "--lines 12:", done.stdout
    following = cli_runner.run(
        ["--root", str(root), "read", "profile/identity.md", *shlex.split(said[1])], text=True, env=env
    )
    assert following.stdout.split("\t", 1)[0] == "    12", following.stdout
    pytest.importorskip("mcp")
    from fsmem.agents.mcp_server import CONTEXT_URI, read_context

    small = Memory(root)
    small.budget = dataclasses.replace(small.budget, max_tokens=120)
    text = read_context(small, CONTEXT_URI).contents[0].text
    assert 'lines="' in text and "lines '" not in text, text


def test_agent_budget_caps_the_block(root):
    tiny = Memory(root, agent="tiny")
    block = tiny.context(max_tokens=5000)
    assert block.max_tokens == 80 and block.tokens <= 80 and block.truncated


def test_cli(root):
    done = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(root), "context", "--agent", "tiny"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0
    assert done.stdout == Memory(root, agent="tiny").context().text + "\n"
    bad = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(root), "context", "--max-tokens", "0"],
        capture_output=True,
        text=True,
    )
    assert (bad.returncode, bad.stderr) == (2, "fsmem: error: --max-tokens must be at least 1\n")


def test_a_profile_rewritten_with_its_size_and_mtime_put_back_is_read_again_by_a_long_lived_process(tmp_path):
    """The lines kept per version of a file (`context._SUMMARIES`) are keyed on its change time too: an edit of the
    same size whose mtime was put back (`cp -p`, `rsync -t`) is in the next context, as a fresh process shows it."""
    import os

    memory = Memory.init(tmp_path / "mem")
    profile = memory.root / "profile" / "identity.md"
    os.utime(profile, (1_577_836_800, 1_577_836_800))  # 2020: settled, so its lines are kept
    memory.context()
    assert "walrus" not in memory.context().text
    before = os.stat(profile)
    text = profile.read_text()
    profile.write_text(text.replace("team: (who the agents", "team: (walrus agents "))
    os.utime(profile, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(profile).st_size == before.st_size
    assert "walrus" in memory.context().text
