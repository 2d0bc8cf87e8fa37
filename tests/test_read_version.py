"""A cut read's continuation carries the file's version, and going on after the file changed is refused.

`read PATH --lines 40:` after someone rewrote PATH went on silently in the new content: the first page of one
file and the second of another read as one. The continuation now names the version its page showed
(`next: --lines 4: --if-version V`, `expected_version` in Python and the tools, `next_expected_version` in
MCP's structured content), and a read given a version the file is no longer at shows nothing and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sixty_lines import fsmem, memory_of_sixty_lines

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import ChangedOnDisk


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return memory_of_sixty_lines(tmp_path, monkeypatch)


def rewrite(root: Path) -> None:
    """Someone else rewrites the file: every line moves down by two."""
    target = root / "topics" / "a.md"
    target.write_text("# A\n\n" + target.read_text(encoding="utf-8"), encoding="utf-8")


def test_the_api_continuation_carries_the_version_and_refuses_a_changed_file(root: Path) -> None:
    memory = Memory(root)
    first = memory.read("topics/a.md", max_tokens=40)
    assert first.next_arguments == {"lines": first.next_lines, "expected_version": first.version}
    assert f'next: lines="{first.next_lines}", expected_version="{first.version}"' in first.to_text()
    second = memory.read("topics/a.md", **first.next_arguments, max_tokens=40)
    assert second.lines[0][0] == first.end + 1
    rewrite(root)
    with pytest.raises(ChangedOnDisk, match="has changed since version .*its lines may have moved"):
        memory.read("topics/a.md", **second.next_arguments, max_tokens=40)
    again = memory.read("topics/a.md", lines=second.next_lines, max_tokens=40)  # asked for: no version, no check
    assert again.lines


def test_the_cli_continuation_carries_the_version_and_refuses_a_changed_file(root: Path) -> None:
    first = fsmem(root, "read", "topics/a.md", "--max-tokens", "60", "--json")
    answer = json.loads(first.stdout)
    text = fsmem(root, "read", "topics/a.md", "--max-tokens", "60").stdout
    assert f"next: --lines {answer['next_lines']} --if-version {answer['version']}]" in text
    go_on = ["read", "topics/a.md", "--lines", answer["next_lines"], "--if-version", answer["version"]]
    assert fsmem(root, *go_on, "--max-tokens", "60").returncode == 0
    rewrite(root)
    refused = fsmem(root, *go_on, "--max-tokens", "60")
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert f"topics/a.md has changed since version {answer['version']}" in refused.stderr
    assert "Traceback" not in refused.stderr
    as_json = json.loads(fsmem(root, *go_on, "--json").stdout)
    assert "has changed since version" in as_json["error"]["message"]


def test_the_tool_continuation_carries_the_version_and_refuses_a_changed_file(root: Path) -> None:
    memory = Memory(root)
    memory.budget = memory.budget.narrowed(max_tokens=60)
    first = tools.call(memory, "read", {"path": "topics/a.md"})
    assert first.next is not None and set(first.next) == {"lines", "expected_version"}, first.text
    assert first.structured() == {
        "rows": first.rows,
        "truncated": True,
        "cut_by": "tokens",
        "next_lines": first.next["lines"],
        "next_expected_version": first.next["expected_version"],
    }
    assert not tools.call(memory, "read", {"path": "topics/a.md", **first.next}).is_error
    rewrite(root)
    refused = tools.call(memory, "read", {"path": "topics/a.md", **first.next})
    assert refused.is_error and "has changed since version" in refused.text, refused.text


def test_a_version_of_no_file_is_a_clear_error(root: Path) -> None:
    done = fsmem(root, "read", "topics/a.md", "--if-version", "not-a-version")
    assert done.returncode == 2 and "has changed since version 'not-a-version'" in done.stderr, done
