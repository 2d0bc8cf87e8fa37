"""Names a Windows or macOS copy cannot hold: refused on every face when created, reported by check when stored.

Each payload is refused through `Memory`, the CLI, the tool dispatcher and
Claude's memory-tool drop-in with the reason, and nothing is created; a name
already in the memory stays readable, `fsmem check` reports it with the
`fsmem mv` that renames it (run here, as printed), and `fsmem sync` refuses
it from a remote as it refuses any name fsmem would not create.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import InvalidArgument, MemoryToolError
from fsmem.format.portable import portable_problem
from fsmem.store.names import unportable

DEVICE = "a device name Windows reserves with any extension and in any case"
CHARACTER = 'which Windows cannot hold in a file name (none of < > : " | ? * \\)'
TRAILING = "ends in a dot or a space, which Windows drops from a file name"
CASE = "differs only by letter case from topics/billing.md"

# (path as a face is given it, what the refusal says); topics/billing.md exists in the memory
REFUSED: list[tuple[str, str]] = [
    ("topics/con.md", f"is named CON, {DEVICE}"),
    ("topics/CON.md", f"is named CON, {DEVICE}"),
    ("topics/aux.md", f"is named AUX, {DEVICE}"),
    ("topics/Prn.notes.md", f"is named PRN, {DEVICE}"),
    ("topics/nul.md", f"is named NUL, {DEVICE}"),
    ("topics/com1.md", f"is named COM1, {DEVICE}"),
    ("topics/COM9.md", f"is named COM9, {DEVICE}"),
    ("topics/lpt1.md", f"is named LPT1, {DEVICE}"),
    ("topics/lpt9.md", f"is named LPT9, {DEVICE}"),
    ("aux/notes.md", f"has a folder 'aux' that is named AUX, {DEVICE}"),
    ("topics/a:b.md", f"holds ':', {CHARACTER}"),
    ("topics/what?.md", f"holds '?', {CHARACTER}"),
    ("topics/a<b.md", f"holds '<', {CHARACTER}"),
    ("topics/a>b.md", f"holds '>', {CHARACTER}"),
    ('topics/say "hi".md', f"holds '\"', {CHARACTER}"),
    ("topics/a|b.md", f"holds '|', {CHARACTER}"),
    ("topics/star*.md", f"holds '*', {CHARACTER}"),
    ("topics/dots./x.md", f"has a folder 'dots.' that {TRAILING}"),
    ("topics/space /x.md", f"has a folder 'space ' that {TRAILING}"),
    ("topics/Billing.md", f"{CASE}, which a macOS or Windows copy of this memory cannot hold beside it"),
    ("topics/BILLING.md", f"{CASE}, which a macOS or Windows copy of this memory cannot hold beside it"),
    (
        "Topics/new.md",
        "has a folder 'Topics' that differs only by letter case from topics, "
        "which a macOS or Windows copy of this memory cannot hold beside it",
    ),
]


@pytest.fixture
def memory(tmp_path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:00:00+00:00")
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    return memory


def files_of(root: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(top, name), root)
        for top, folders, names in os.walk(root)
        if ".fsmem" not in top
        for name in folders + names
    )


@pytest.mark.parametrize(("path", "reason"), REFUSED, ids=[p for p, _ in REFUSED])
def test_memory_refuses_every_unportable_name_with_its_reason(memory, path, reason):
    before = files_of(memory.root)
    for call in (
        lambda: memory.write(path, "x\n"),
        lambda: memory.mv("topics/billing.md", path),
    ):
        with pytest.raises(InvalidArgument) as refused:
            call()
        assert str(refused.value) == f"path {path!r} {reason}" + (
            "; use that name, or another" if "letter case" in reason else ""
        )
    assert files_of(memory.root) == before


@pytest.mark.parametrize(("path", "reason"), REFUSED, ids=[p for p, _ in REFUSED])
def test_the_cli_refuses_every_unportable_name_with_one_line_and_exit_2(memory, path, reason):
    before = files_of(memory.root)
    env = without_fsmem()
    for args in (["write", path], ["mv", "topics/billing.md", path]):
        if path == REFUSED[0][0]:  # the first name: the `fsmem` script, a real process, refuses with the same bytes
            cli_runner.same_as_a_process(["--root", str(memory.root), *args], input="x\n", env=env)
        done = cli_runner.run(["--root", str(memory.root), *args], input="x\n", text=True, env=env)  # run here
        assert done.returncode == 2
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"fsmem: error: path {path!r} {reason}"), done.stderr
    assert files_of(memory.root) == before


def test_the_tool_dispatcher_answers_every_unportable_name_with_an_error(memory):
    before = files_of(memory.root)
    for path, reason in REFUSED:
        for name, arguments in (
            ("write", {"path": path, "body": "x\n"}),
            ("edit", {"path": path, "old": "a", "new": "b"}),
            ("read", {"path": path}),
        ):
            answer = tools.call(memory, name, arguments)
            assert answer.is_error and answer.text.startswith(f"error: path {path!r} {reason}"), answer.text
    assert files_of(memory.root) == before


@pytest.mark.parametrize("over", ["a plain folder", "an fsmem memory"])
def test_claudes_memory_tool_refuses_every_unportable_name(memory, tmp_path, over):
    tool = MemoryTool(tmp_path / "base") if over == "a plain folder" else MemoryTool(memory_root=memory.root)
    tool.execute({"command": "create", "path": "/memories/topics/billing.md", "file_text": "x"}) if over.startswith(
        "a plain"
    ) else None
    base = tool.memory_root
    before = files_of(base)
    for path, reason in REFUSED:
        for arguments in (
            {"command": "create", "path": f"/memories/{path}", "file_text": "x"},
            {"command": "rename", "old_path": "/memories/topics/billing.md", "new_path": f"/memories/{path}"},
        ):
            with pytest.raises(MemoryToolError) as refused:
                tool.execute(arguments)
            shown = f"/memories/{path}"
            assert str(refused.value) == f"Path {shown} {reason}" + (
                "; use that name, or another" if "letter case" in reason else ""
            ), arguments
    assert files_of(base) == before


def test_names_already_stored_are_read_reported_and_renamed_by_the_printed_mv(memory):
    root = memory.root
    (root / "topics" / "con.md").write_text("# Con\n")
    (root / "topics" / "a:b.md").write_text("# A b\n")
    (root / "topics" / "Billing.md").write_text("# Billing again\n")
    (root / "aux").mkdir()
    (root / "aux" / "what?.md").write_text("# What\n")
    assert memory.read("topics/a:b.md").lines == [(1, "# A b")]  # stored: still reachable
    env = without_fsmem()
    check = cli_runner.same_as_a_process(["--root", str(root), "check"], text=True, env=env)  # a process's too
    reported = [line for line in check.stdout.splitlines() if "rename it with: " in line]
    assert reported == [
        f"aux:1: is named AUX, {DEVICE}; rename it with: fsmem mv aux aux_",
        f"aux/what?.md:1: holds '?', {CHARACTER}; rename it with: fsmem mv 'aux_/what?.md' aux_/what-.md",
        "topics/Billing.md:1: differs only by letter case from topics/billing.md, which a macOS or Windows copy "
        "cannot hold beside it; rename it with: fsmem mv topics/Billing.md topics/Billing-2.md",
        f"topics/a:b.md:1: holds ':', {CHARACTER}; rename it with: fsmem mv topics/a:b.md topics/a-b.md",
        f"topics/con.md:1: is named CON, {DEVICE}; rename it with: fsmem mv topics/con.md topics/con_.md",
    ]
    for line in reported:  # in the order printed
        args = shlex.split(line.split("rename it with: fsmem ", 1)[1])
        moved = cli_runner.run(["--root", str(root), *args], text=True, env=env)  # run here (cli_runner)
        assert moved.returncode == 0, moved.stderr
    again = cli_runner.run(["--root", str(root), "check"], text=True, env=env)
    assert "rename it with" not in again.stdout
    assert {"aux_/what-.md", "topics/Billing-2.md", "topics/a-b.md", "topics/con_.md", "topics/billing.md"} <= set(
        files_of(root)
    )
    assert (root / "topics" / "Billing-2.md").read_text() == "# Billing again\n"


def test_unportable_lists_a_folder_before_what_it_holds_and_keeps_the_lower_case_twin():
    found = unportable(["Topics/x.md", "topics/y.md", "topics/com1/z.md"])
    assert found == [
        (
            "Topics",
            "differs only by letter case from topics, which a macOS or Windows copy cannot hold beside it; "
            "rename it with: fsmem mv Topics Topics-2",
        ),
        ("topics/com1", f"is named COM1, {DEVICE}; rename it with: fsmem mv topics/com1 topics/com1_"),
    ]


def test_sync_refuses_unportable_names_from_a_remote_and_check_reports_them_where_they_are(tmp_path):
    _origin, (first, second) = S.make_hosts(tmp_path, hosts=2, writers=1)
    (first / "topics" / "con.md").write_text("# Con\n")
    (first / "topics" / "a:b.md").write_text("# A b\n")
    S.git("add", "-A", cwd=first)
    S.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "names from a Linux editor", cwd=first)
    S.fsmem(first, "sync")
    check = S.fsmem(first, "check", check=False).stdout  # where they are, with the rename
    assert "topics/con.md:1: is named CON" in check and "topics/a:b.md:1: holds ':'" in check
    done = S.fsmem(second, "sync", check=False)
    assert done.returncode == 2 and "a name a Windows or macOS copy cannot hold" in done.stderr
    assert "fsmem sync --repair" in done.stderr and not (second / "topics" / "con.md").exists()


NAME = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="/\\"),
    min_size=1,
    max_size=40,
).filter(lambda name: not name.startswith(".") and name.strip() == name)  # '/' and '\\' separate folders


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(folder=NAME, stem=NAME)
def test_any_name_the_rule_accepts_can_be_created_and_read_back(memory, folder, stem):
    path = f"{folder}/{stem}.md"
    try:
        memory.write(path, "kept\n")
    except InvalidArgument as refused:
        assert (
            portable_problem(folder) is not None
            or portable_problem(f"{stem}.md") is not None
            or "letter case" in str(refused)
            or "name longer" in str(refused)
            or folder.lower() == "fsmem.yaml"
        ), str(refused)
        return
    assert portable_problem(folder) is None and portable_problem(f"{stem}.md") is None
    assert memory.read(path).lines[-1][1] == "kept"
    assert any(item.path == path for item in memory.ls(folder).entries)
