"""`read --json` says what the text answer says: why it was cut and how to go on, and holds the same lines.

The JSON of a read dropped the notes the text carries, so a budget too small for one line answered
`truncated: true` with no `next_lines` and no reason; and at 50 tokens it held 3 lines where the text held 1,
though the guide says a JSON document holds the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sixty_lines import fsmem, memory_of_sixty_lines

from fsmem import Memory
from fsmem.agents import tools


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return memory_of_sixty_lines(tmp_path, monkeypatch)


def test_the_api_answer_says_why_it_was_cut(root: Path) -> None:
    answer = Memory(root).read("topics/a.md", max_tokens=3).to_dict()
    assert answer["truncated"] and answer["lines"] == [] and answer["next_lines"] is None
    assert answer["cut_by"] == "tokens"
    assert any("too small to show line 1" in note for note in answer["notes"]), answer


def test_the_api_answer_names_its_continuation_and_cause(root: Path) -> None:
    answer = Memory(root).read("topics/a.md", max_tokens=40).to_dict()
    assert answer["truncated"] and answer["cut_by"] == "tokens" and answer["next_lines"] == f"{answer['end'] + 1}:"
    whole = Memory(root).read("topics/a.md").to_dict()
    assert not whole["truncated"] and whole["cut_by"] is None and whole["notes"] == []


def test_the_cli_json_carries_the_notes_of_the_text(root: Path) -> None:
    text = fsmem(root, "read", "topics/a.md", "--max-tokens", "3")
    done = fsmem(root, "read", "topics/a.md", "--max-tokens", "3", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["truncated"] and answer["cut_by"] == "tokens" and answer["next_lines"] is None
    assert answer["notes"] and "too small" in answer["notes"][0]
    assert text.returncode == 0 and "[" in text.stdout


@pytest.mark.parametrize("budget", ["30", "50", "80", "200"])
def test_the_cli_json_holds_the_rows_the_text_holds(root: Path, budget: str) -> None:
    text = fsmem(root, "read", "topics/a.md", "--max-tokens", budget)
    done = fsmem(root, "read", "topics/a.md", "--max-tokens", budget, "--json")
    assert text.returncode == done.returncode == 0, (text.stderr, done.stderr)
    shown = [int(line.split("\t", 1)[0]) for line in text.stdout.splitlines() if "\t" in line]
    answer = json.loads(done.stdout)
    assert [row["line"] for row in answer["lines"]] == shown, (text.stdout, answer)
    if shown:
        assert answer["next_lines"] == f"{shown[-1] + 1}:"
        assert f"next: --lines {answer['next_lines']}" in text.stdout
    else:  # at 30 tokens line 1 and the note that says where to go on do not fit together
        assert answer["next_lines"] is None and answer["notes"] == text.stdout.splitlines()


def test_grep_json_holds_the_rows_the_text_holds(root: Path) -> None:
    text = fsmem(root, "grep", "line", "--max-tokens", "50")
    done = fsmem(root, "grep", "line", "--max-tokens", "50", "--json")
    answer = json.loads(done.stdout)
    shown = [line for line in text.stdout.splitlines() if line[:1].isdigit()]
    assert len(answer["matches"]) == len(shown), (text.stdout, answer)
    assert f"--offset {answer['next_offset']}" in text.stdout


def test_a_read_stopped_by_the_read_limit_says_so_as_json(root: Path) -> None:
    """A file past the 64 MiB read limit (sparse: no disk used) is cut there; the text said so, and the JSON
    said `truncated: false`."""
    config = root / "fsmem.yaml"
    config.write_text(config.read_text().replace("max_line_chars: 2000", "max_line_chars: 50", 1))  # NULs cost
    huge = root / "topics" / "huge.md"
    with huge.open("wb") as handle:
        handle.write(b"# Huge\n")
        handle.truncate(65 * 1024 * 1024)
    done = fsmem(root, "read", "topics/huge.md", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["truncated"] and answer["cut_by"] == "read_limit" and answer["next_lines"] is None, answer
    assert any("read no further than its first 67,108,864 bytes" in note for note in answer["notes"]), answer
    through_python = Memory(root).read("topics/huge.md").to_dict()
    assert {k: through_python[k] for k in ("truncated", "cut_by", "notes")} == {
        k: answer[k] for k in ("truncated", "cut_by", "notes")
    }


def test_the_tool_answer_says_why_it_was_cut_as_structured_content(root: Path) -> None:
    """MCP's structured content (`ToolAnswer.structured`) names the cause as the JSON does, beside the next part."""
    memory = Memory(root)
    memory.budget = memory.budget.narrowed(max_tokens=30)
    too_small = tools.call(memory, "read", {"path": "topics/a.md"})
    assert "too small to show line 1" in too_small.text
    assert too_small.structured() == {"rows": 0, "truncated": True, "cut_by": "tokens"}
    memory.budget = Memory(root).budget.narrowed(max_tokens=60)
    cut = tools.call(memory, "read", {"path": "topics/a.md"}).structured()
    assert cut is not None and cut["cut_by"] == "tokens" and cut["next_lines"], cut
    whole = tools.call(Memory(root), "read", {"path": "topics/a.md"}).structured()
    assert whole == {"rows": 60, "truncated": False}
