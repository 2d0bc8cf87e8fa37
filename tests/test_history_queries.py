"""log, show --at, diff, restore and revert: on paths, dates and revisions, each answer within its budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import EditConflict, InvalidArgument, Memory, NotFound
from fsmem.agents import tools

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def cli(root: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = without_fsmem()
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, env=env)


@pytest.fixture
def dated(tmp_path, monkeypatch) -> Memory:
    """A memory with history whose billing topic changed on four days, by two agents."""
    monkeypatch.setenv("FSMEM_NOW", "2026-11-01T09:00:00+00:00")
    memory = Memory.init(tmp_path / "mem", git=True)
    researcher = Memory(memory.root, agent="researcher")
    researcher.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n- terms: net 30\n")
    monkeypatch.setenv("FSMEM_NOW", "2026-11-05T09:00:00+00:00")
    memory.edit("topics/billing.md", old="net 30", new="net 45")
    monkeypatch.setenv("FSMEM_NOW", "2026-11-10T09:00:00+00:00")
    researcher.note("- employer: Globex", subject="people/Adam Smith")
    monkeypatch.setenv("FSMEM_NOW", "2026-11-20T09:00:00+00:00")
    researcher.edit("topics/billing.md", old="monthly", new="weekly")
    return memory


def test_log_lists_who_changed_what_and_when_newest_first(dated):
    log = dated.log()
    rows = [(e.agent, e.message, e.date[:10]) for e in log.entries]
    assert rows[:3] == [
        ("researcher", "edit topics/billing.md", "2026-11-20"),
        (
            "researcher",
            "note sessions/2026/11/10/researcher-" + dated.host_id + ".md: +2 lines (new file)",
            "2026-11-10",
        ),
        ("default", "edit topics/billing.md", "2026-11-05"),
    ]
    assert log.total == 5 and log.entries[0].paths == ["topics/billing.md"]
    assert log.to_text().splitlines()[0].startswith(f"{log.entries[0].commit}  2026-11-20 09:00  researcher  edit")
    assert [e.message for e in dated.log("topics/billing.md").entries] == [
        "edit topics/billing.md",
        "edit topics/billing.md",
        "write topics/billing.md (new file)",
    ]
    assert [e.date[:10] for e in dated.log(since="2026-11-06").entries] == ["2026-11-20", "2026-11-10"]
    assert {e.agent for e in dated.log(agent="researcher").entries} == {"researcher"}
    assert dated.log(agent="research").total == 0  # the agent's name exactly, not a pattern


def test_log_pages_with_offset_and_respects_the_token_budget(dated):
    first = dated.log(max_results=2)
    assert first.page.next_offset == 2 and first.truncated and first.to_dict()["cut_by"] == "results"
    assert "Continue with offset=2" in first.to_text()
    seen, offset = [], 0
    while offset is not None:
        page = dated.log(offset=offset, max_results=2)
        seen += [e.commit for e in page.entries]
        offset = page.page.next_offset
    assert seen == [e.commit for e in dated.log().entries] and len(seen) == 5
    small = dated.log(max_tokens=40)
    assert small.tokens <= 40 and small.to_dict()["cut_by"] == "tokens" and small.page.next_offset == len(small.entries)


def test_show_gives_a_file_as_it_was_at_a_revision_or_a_date_within_the_budget(dated):
    old = dated.show("topics/billing.md", at="2026-11-03")
    assert "- terms: net 30" in old.to_text() and "net 45" not in old.to_text()
    assert old.at["message"] == "write topics/billing.md (new file)"
    commit = dated.log("topics/billing.md").entries[1].commit
    middle = dated.show("topics/billing.md", at=commit)
    assert "- cycle: monthly" in middle.to_text() and "- terms: net 45" in middle.to_text()
    assert dated.show("topics/billing.md", at="HEAD~1").read.lines == middle.read.lines
    cut = dated.show("topics/billing.md", at=commit, max_tokens=60)
    assert cut.truncated and cut.tokens <= 60 and cut.read.next_lines
    rest = dated.show("topics/billing.md", at=commit, lines=cut.read.next_lines)
    assert rest.read.start == cut.read.end + 1
    with pytest.raises(NotFound, match="did not exist"):
        dated.show("topics/none.md", at="HEAD")
    with pytest.raises(NotFound, match="no commit at or before 2020-01-01"):
        dated.show("topics/billing.md", at="2020-01-01")
    with pytest.raises(InvalidArgument):
        dated.show("topics/billing.md", at="--output=/tmp/x")


def test_diff_since_a_revision_or_date_cut_at_the_budget_with_a_continuation(dated):
    whole = dated.diff("2026-11-02", "topics/billing.md")
    text = whole.to_text()
    assert "-- terms: net 30" in text and "+- terms: net 45" in text and "+- cycle: weekly" in text
    cut = dated.diff("2026-11-02", max_tokens=80)
    assert cut.truncated and cut.tokens <= 80 and 'next: lines="' in cut.to_text()
    rest = dated.diff("2026-11-02", lines=cut.read.next_lines, max_tokens=4000)
    assert [n for n, _ in rest.read.lines][0] == cut.read.end + 1
    between = dated.diff("HEAD~3..HEAD~2")
    assert "+- terms: net 45" in between.to_text() and "weekly" not in between.to_text()
    assert dated.diff().empty  # nothing outside the history
    (dated.root / "topics/billing.md").write_text("changed by hand\n")
    assert "+changed by hand" in dated.diff(path="topics/billing.md").to_text()


def test_restore_and_revert_are_new_commits_and_rewrite_nothing(dated):
    before = git(dated.root, "rev-list", "HEAD").split()
    restored = dated.restore("topics/billing.md", at="2026-11-03")
    assert restored.action == "restore" and "net 30" in (dated.root / "topics/billing.md").read_text()
    assert git(dated.root, "rev-list", "HEAD").split()[1:] == before  # one new commit on top, nothing rewritten
    assert dated.log(max_results=1).entries[0].message.startswith("restore topics/billing.md as of ")
    dated.restore("topics/billing.md", at="HEAD~1")  # back to weekly / net 45
    target = dated.log("topics/billing.md").entries[3].commit  # the edit of net 30 -> net 45 (Nov 5)
    reverted = dated.revert(target)
    text = (dated.root / "topics/billing.md").read_text()
    assert "- terms: net 30" in text and "- cycle: weekly" in text  # merged into the later change
    assert reverted.action == "revert" and dated.log(max_results=1).entries[0].message.startswith(f"revert {target}")
    weekly = dated.log("topics/billing.md").entries[3].commit  # monthly -> weekly (Nov 20)
    dated.edit("topics/billing.md", old="weekly", new="daily")
    with pytest.raises(EditConflict, match="changed since on the same lines"):
        dated.revert(weekly)
    assert "daily" in (dated.root / "topics/billing.md").read_text()


def test_history_through_the_cli_and_the_tools(dated):
    root = dated.root
    out = cli(root, "log", "topics/billing.md", "--json", "--max-results", "1", process=True)
    data = json.loads(out.stdout)
    assert out.returncode == 0 and data["total"] == 3 and data["next_offset"] == 1
    assert cli(root, "log", "--since", "2030-01-01").returncode == 1
    mine = cli(root, "--agent", "researcher", "log", "--json")
    assert {c["agent"] for c in json.loads(mine.stdout)["commits"]} == {"researcher"}
    shown = cli(root, "show", "topics/billing.md", "--at", "2026-11-03")
    assert shown.returncode == 0 and "net 30" in shown.stdout
    assert cli(root, "diff", "topics/billing.md").returncode == 1  # no difference
    assert "+- cycle: weekly" in cli(root, "diff", "2026-11-02", "topics/billing.md").stdout
    restore = cli(root, "restore", "topics/billing.md", "--at", "2026-11-03", "--json")
    assert json.loads(restore.stdout)["action"] == "restore"
    revert = cli(root, "revert", "HEAD")
    assert revert.returncode == 0 and "weekly" in (root / "topics/billing.md").read_text()
    log = tools.call(dated, "log", {"path": "topics/billing.md", "max_results": 2})
    assert not log.is_error and "Continue with offset=2" in log.text
    show = tools.call(dated, "show", {"path": "topics/billing.md", "at": "2026-11-03"})
    assert not show.is_error and "net 30" in show.text
    bad = tools.call(dated, "show", {"path": "topics/billing.md", "at": "no-such-rev"})
    assert bad.is_error and "; log() lists them" in bad.text


def test_reads_and_log_work_on_a_read_only_mount(dated, tmp_path):
    """Finding 11 (issue 31): `fsmem log` failed on a read-only mount (it made its state folders first). Reads
    write nothing they need: on a real read-only mount, log, show, diff, ls, read, grep and search answer."""
    from mounts import read_only

    root = dated.root
    expected = cli(root, "log", "--json")
    assert expected.returncode == 0, expected.stderr
    with read_only(root, tmp_path / "ro") as mounted:
        for args in (
            ("log",),
            ("log", "--json"),
            ("show", "topics/billing.md", "--at", "HEAD~1"),
            ("diff", "HEAD~1"),
            ("ls",),
            ("read", "topics/billing.md"),
            ("grep", "net"),
            ("search", "billing"),
        ):
            done = cli(mounted, *args)
            assert done.returncode == 0, (args, done.stderr)
            assert "Traceback" not in done.stderr
        assert json.loads(cli(mounted, "log", "--json").stdout) == json.loads(expected.stdout)
