"""Bounded documents (issue #22): a document shows at most `consolidate.superseded_in_document` superseded values
per key, its history file (NAME.history.md, beside it) holds all of them, and timeline, as_of and
include_superseded read it there, through the API, the tools and the CLI."""

from __future__ import annotations

import datetime as dt
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
from fsmem.format.history_file import document_of, history_path, is_history_path

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-12-01T08:00:00+00:00"
NADIA = "people/Nadia Okafor"
DOC = "entities/people/nadia-okafor.md"
HISTORY = "entities/people/nadia-okafor.history.md"
CHANGES = 40
START = dt.date(2026, 1, 1)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def day(n: int) -> str:
    """The date of change n (1-based): one change every three days from 2026-01-01."""
    return (START + dt.timedelta(days=3 * (n - 1))).isoformat()


def note(root: Path, date: str, session: str, body: str) -> None:
    path = root / "sessions" / date.replace("-", "/") / f"{session}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: Session {session}\ncreated: {date}T09:00:00+00:00\n---\n{body}", encoding="utf-8")


def superseded_lines(text: str, key: str) -> list[str]:
    section = text.split("## Superseded\n", 1)[1] if "## Superseded\n" in text else ""
    return [line for line in section.splitlines() if line.startswith(f"- {key}: ")]


@pytest.fixture(scope="module")
def changed(tmp_path_factory) -> Path:
    """Nadia's employer changed 40 times (E1 ... E40), in notes consolidated in two runs; a city once."""
    os.environ["FSMEM_NOW"] = NOW
    root = tmp_path_factory.mktemp("bounded") / "memory"
    memory = Memory.init(root)
    for n in range(1, CHANGES + 1):
        extra = "- city: Lagos\n" if n == 1 else ""
        note(root, day(n), f"s{n}", f"## {NADIA}\n- employer: E{n}\n{extra}")
        if n == 25:
            memory.consolidate()
    memory.consolidate()
    return root


def test_a_key_changed_40_times_keeps_10_superseded_lines_and_all_39_in_its_history_file(changed):
    text = (changed / DOC).read_text()
    shown = superseded_lines(text, "employer")
    assert [line.split(" (")[0] for line in shown] == [f"- employer: E{n}" for n in range(30, 40)]
    assert (
        "## Facts\n- city: Lagos ([2026-01-01](../../sessions/2026/01/01/s1.md))\n"
        "- employer: E40 ([2026-04-28](../../sessions/2026/04/28/s40.md))\n"
    ) in text
    history = (changed / HISTORY).read_text()
    assert history.startswith(
        "---\ntype: semantic\n---\n## Superseded\n- employer: E1 ([2026-01-01](../../sessions/2026/01/01/s1.md) to 2026-01-04)\n"
    )
    assert [line.split(" (")[0] for line in superseded_lines(history, "employer")] == [
        f"- employer: E{n}" for n in range(1, 40)
    ]
    assert "Lagos" not in history  # a key never superseded has no history


def test_timeline_has_all_40_values_through_the_api_the_tool_and_the_cli(changed):
    memory = Memory(changed)
    values = [e.value for e in memory.timeline(NADIA, "employer", max_results=100).entries]
    assert values == [f"E{n}" for n in range(1, CHANGES + 1)]
    first = memory.timeline(NADIA, "employer", max_results=1).entries[0]
    assert (first.date, first.until, first.path, first.line) == ("2026-01-01", "2026-01-04", HISTORY, 5)
    answer = tools.call(memory, "timeline", {"subject": NADIA, "key": "employer", "max_results": 100})
    assert not answer.is_error
    assert [row.split("  ")[0] for row in answer.text.splitlines()[1:-1]] == [
        f"employer: E{n}" for n in range(1, CHANGES + 1)
    ]
    proc = cli(changed, "timeline", NADIA, "employer", "--max-results", "100", "--json", process=True)
    data = json.loads(proc.stdout)
    assert [v["value"] for v in data["values"]] == [f"E{n}" for n in range(1, CHANGES + 1)]
    assert data["total"] == CHANGES and data["values"][-1]["current"] is True


def cli(root: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, env=env, check=True)


def test_as_of_a_date_whose_value_lives_only_in_the_history_file_answers_it(changed):
    memory = Memory(changed)
    when = day(5)  # E5 held from then until day(6): only the history file still shows it
    assert "E5 " not in (changed / DOC).read_text()
    found = memory.grep("employer: E", [HISTORY, DOC], as_of=when)
    assert [(m.path, m.text.split(" (")[0]) for m in found.matches] == [(HISTORY, "- employer: E5")]
    assert not found.matches[0].superseded
    hits = memory.search("employer", as_of=when).hits
    assert [(h.path, h.text.split(" (")[0]) for h in hits if h.path.startswith("entities/")] == [
        (HISTORY, "- employer: E5")
    ]
    answer = tools.call(memory, "grep", {"pattern": "employer: E", "paths": [HISTORY], "as_of": when})
    assert not answer.is_error and "- employer: E5 (" in answer.text and "E6 (" not in answer.text
    out = cli(changed, "grep", "employer: E", HISTORY, "--as-of", when).stdout
    assert "- employer: E5 ([2026-01-13](../../sessions/2026/01/13/s5.md) to 2026-01-16)" in out and "E4 (" not in out


def test_ls_search_grep_and_index_keep_the_history_file_out_unless_superseded_facts_are_asked_for(changed):
    memory = Memory(changed)
    assert [m.path for m in memory.ls("entities/people").entries] == [DOC]
    assert [m.path for m in memory.ls("entities/people", include_superseded=True).entries] == [HISTORY, DOC]
    assert [m.path for m in memory.ls(HISTORY).entries] == [HISTORY]  # named, it is listed
    assert memory.grep("E3", [HISTORY]).total == 0
    assert memory.grep("E3 ", [HISTORY], include_superseded=True).total == 1
    assert all(h.path != HISTORY for h in memory.search("employer E3").hits)
    assert any(h.path == HISTORY for h in memory.search("employer E3", include_superseded=True).hits)
    assert "history" not in (changed / "INDEX.md").read_text()
    assert memory.check().problems == []
    assert memory.links(HISTORY).links == [] and memory.links(DOC).backlinks == []


def test_a_superseded_line_removed_by_hand_stays_in_the_timeline(tmp_path):
    memory = Memory.init(tmp_path / "m")
    for n in range(1, 4):
        note(memory.root, day(n), f"s{n}", f"## {NADIA}\n- employer: E{n}\n")
    memory.consolidate()
    path = memory.root / DOC
    text = path.read_text()
    line = next(line for line in text.splitlines() if line.startswith("- employer: E1 "))
    path.write_text(text.replace(line + "\n", ""))
    assert [e.value for e in memory.timeline(NADIA, "employer").entries] == ["E1", "E2", "E3"]
    note(memory.root, day(4), "s4", f"## {NADIA}\n- employer: E4\n")
    memory.consolidate()
    assert [e.value for e in memory.timeline(NADIA, "employer").entries] == ["E1", "E2", "E3", "E4"]
    history = memory.root / HISTORY
    kept = [line for line in history.read_text().splitlines() if " E1 " not in line]
    history.write_text("\n".join(kept) + "\n")
    path.write_text(path.read_text().replace(line + "\n", ""))  # removed from both: forgotten
    note(memory.root, day(5), "s5", f"## {NADIA}\n- employer: E5\n")
    memory.consolidate()
    assert [e.value for e in memory.timeline(NADIA, "employer").entries] == ["E2", "E3", "E4", "E5"]


def test_superseded_in_document_0_keeps_every_superseded_value_in_the_history_file_only(tmp_path):
    memory = Memory.init(tmp_path / "m")
    config = memory.root / "fsmem.yaml"
    text = config.read_text()
    assert "  superseded_in_document: 10 " in text
    config.write_text(text.replace("  superseded_in_document: 10 ", "  superseded_in_document: 0  ", 1))
    memory = Memory(memory.root)
    for n in range(1, 4):
        note(memory.root, day(n), f"s{n}", f"## {NADIA}\n- employer: E{n}\n- role: cto\n")
    memory.consolidate()
    text = (memory.root / DOC).read_text()
    assert superseded_lines(text, "employer") == [] and "- employer: E3 (" in text
    assert len(superseded_lines((memory.root / HISTORY).read_text(), "employer")) == 2
    assert [e.value for e in memory.timeline(NADIA, "employer").entries] == ["E1", "E2", "E3"]


def test_history_paths_name_the_document_beside_them():
    assert history_path(DOC) == HISTORY and document_of(HISTORY) == DOC
    assert is_history_path(HISTORY) and not is_history_path(DOC)
    assert not is_history_path("topics/history.md")


def test_sync_s_merge_of_a_history_file_pools_its_values_and_makes_none_current():
    from fsmem.history.merge import merge_text

    head = "---\ntype: semantic\n---\n## Superseded\n"
    e1 = "- employer: E1 ([2026-01-01](../../sessions/2026/01/01/a.md) to 2026-01-02)\n"
    city = "- city: Oslo ([2026-01-01](../../sessions/2026/01/01/a.md) to 2026-01-05)\n"
    e2 = "- employer: E2 ([2026-01-02](../../sessions/2026/01/02/b.md) to 2026-01-03)\n"
    e5 = "- employer: E5 ([2026-01-02](../../sessions/2026/01/02/c.md) to 2026-01-04)\n"
    base = head + city + e1
    ours, theirs = base + e2, head + e1 + e5  # theirs forgot the city by hand
    merged, kept = merge_text(base, ours, theirs, path=HISTORY)
    assert (merged, kept) == (head + e1 + e2 + e5, 0)
    assert merge_text(base, theirs, ours, path=HISTORY) == (merged, 0)


def test_context_without_index_md_lists_documents_not_their_history_files(changed, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(changed, copy)
    (copy / "INDEX.md").unlink()
    text = Memory(copy).context().to_text()
    assert f"- {DOC} — Nadia Okafor" in text and "history" not in text


def test_reading_the_document_as_of_a_date_whose_value_it_no_longer_shows_names_the_history_file(changed):
    memory = Memory(changed)
    early = memory.read(DOC, as_of=day(5))  # E5 held then: bounded out of the document, kept in its history
    assert not any("employer: E" in text for _, text in early.lines)
    assert early.notes[-1] == f"[the value that held on {day(5)} of employer is kept in {HISTORY}: read it with as_of]"
    late = memory.read(DOC, as_of=day(35))  # E35 is among the superseded values the document still shows
    assert not any("is kept in" in n for n in late.notes)
    assert not any("is kept in" in n for n in memory.read(HISTORY, as_of=day(5)).notes)
    out = cli(changed, "read", DOC, "--as-of", day(5)).stdout
    assert f"is kept in {HISTORY}: read it with --as-of]" in out
