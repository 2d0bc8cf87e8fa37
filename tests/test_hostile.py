"""Hostile files and inputs, one test per finding of the hostile trial (issue #10, findings 6 to 11).

Each test failed on the code before the containment rule (`fsmem.store.paths`)
and passes after it; its docstring names the finding. Commands that used to
hang run as real subprocesses under a timeout, so a regression fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import ConfigError, FsmemError, InvalidArgument, MemoryToolError, PathEscape
from fsmem.format.frontmatter import MAX_NESTING
from fsmem.store import retrieval_log
from fsmem.store.fields import MAX_FIELD_DEPTH

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-11-30T10:00:00+00:00"
BILLING = "---\ntitle: Billing\ntype: semantic\n---\n# Billing\n- proration: daily\n- payment terms: net 30\n"


@pytest.fixture
def memory(tmp_path: Path, monkeypatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "billing.md").write_text(BILLING)
    return memory


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a runaway expansion fails instead of swapping


def cli(root: Path, *args: str, input: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """The installed `fsmem` on `root`; a command that does not finish within `timeout` fails the test."""
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    return subprocess.run(
        [FSMEM, "--root", str(root), *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=_limit_memory,
    )


def within(seconds: float, call):
    """`call()`'s result, or its exception raised here; fails when it does not return within `seconds`."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:
            outcome.append((False, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"no answer within {seconds} s"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _environment() -> dict[str, str]:
    return without_fsmem()


# -- finding 6: links into .fsmem/ and .git/ --------------------------------------------------------
def test_ls_grep_and_search_leave_out_links_into_state_and_git(memory: Memory) -> None:
    """Finding 6: ls and search listed and indexed a link into .fsmem/ that read refused (and a link into
    .git/ was readable); such links are neither listed, grepped, indexed nor read, and check names them."""
    pytest.importorskip("bm25s")
    root = memory.root
    (root / ".fsmem").mkdir(exist_ok=True)
    (root / ".fsmem" / "notes.md").write_text("- employer: SECRET-STATE globex\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = https://SECRET-GIT@example.com/globex\n')
    os.symlink(root / ".fsmem" / "notes.md", root / "topics" / "state.md")
    os.symlink(root / ".git" / "config", root / "topics" / "git.md")
    os.symlink(root / ".git", root / "topics" / "gitdir")

    assert [e.path for e in memory.ls().entries] == ["README.md", "profile/identity.md", "topics/billing.md"]
    assert memory.grep("SECRET").total == 0
    assert memory.grep("globex", ["topics"], ignore_case=True).total == 0
    hits = memory.search("globex employer SECRET").hits
    assert not [h for h in hits if "SECRET" in h.text or h.path.startswith("topics/")]
    problems = {(p, m) for p, _, m in memory.check().problems}
    assert ("topics/state.md", "skipped: a symbolic link to a path that is not a memory file") in problems
    assert ("topics/git.md", "skipped: a symbolic link to a path that is not a memory file") in problems
    with pytest.raises(PathEscape, match="leads into .fsmem/"):
        memory.read("topics/state.md")
    with pytest.raises(PathEscape, match=r"leads to .git/config through a symbolic link"):
        memory.read("topics/git.md")
    with pytest.raises(PathEscape, match=r"leads to .git through a symbolic link"):
        memory.ls("topics/gitdir")


# -- finding 7: the memory tool mapped onto a memory -------------------------------------------------
def test_memory_tool_over_a_memory_cannot_touch_its_configuration_or_git(memory: Memory) -> None:
    """Finding 7: mapped onto a memory, str_replace on /memories/fsmem.yaml turned a read-only agent writable,
    and on /memories/.git/config planted a core.fsmonitor command for the next `git status`."""
    root = memory.root
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    config, git = (root / "fsmem.yaml").read_bytes(), (root / ".git" / "config").read_bytes()
    tool = MemoryTool.over(memory)
    with pytest.raises(MemoryToolError, match=r"^Path /memories/fsmem.yaml is fsmem's configuration"):
        tool.str_replace("/memories/fsmem.yaml", "read_only: true", "read_only: false")
    with pytest.raises(MemoryToolError, match=r"^Path /memories/.git/config is hidden"):
        tool.str_replace("/memories/.git/config", "bare = false", "bare = false\n\tfsmonitor = touch /tmp/owned")
    for command, arguments in [
        ("view", {"path": "/memories/fsmem.yaml"}),
        ("view", {"path": "/memories/.git/config"}),
        ("insert", {"path": "/memories/Fsmem.yaml", "insert_line": 0, "insert_text": "x: 1"}),
        ("create", {"path": "/memories/.git/hooks/pre-commit", "file_text": "#!/bin/sh\n"}),
        ("delete", {"path": "/memories/fsmem.yaml"}),
        ("delete", {"path": "/memories/.git"}),
        ("rename", {"old_path": "/memories/fsmem.yaml", "new_path": "/memories/config.md"}),
        ("rename", {"old_path": "/memories/topics/billing.md", "new_path": "/memories/fsmem.yaml"}),
    ]:
        with pytest.raises(MemoryToolError):
            getattr(tool, command)(**arguments)
    assert (root / "fsmem.yaml").read_bytes() == config and (root / ".git" / "config").read_bytes() == git
    listing = tool.view("/memories")
    assert "fsmem.yaml" not in listing and ".git" not in listing
    assert "/memories/topics/billing.md" in listing

    reviewer = MemoryTool.over(Memory(root, agent="reviewer"))
    with pytest.raises(MemoryToolError, match="read-only for agent 'reviewer'"):
        reviewer.create("/memories/topics/x.md", "x")
    locked = MemoryTool.over(tools.read_only(Memory(root)))
    with pytest.raises(MemoryToolError, match="read-only"):
        locked.str_replace("/memories/topics/billing.md", "net 30", "net 45")
    assert (root / "topics" / "billing.md").read_text() == BILLING


# -- finding 8: edit, read and grep of files that are not memory; configuration paths; names ----------
def test_edit_cannot_reach_the_configuration_or_git(memory: Memory) -> None:
    """Finding 8: `fsmem edit fsmem.yaml ...` gave it front matter and every later command failed until a
    human repaired it; editing .git/config broke git."""
    root = memory.root
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    config, git = (root / "fsmem.yaml").read_bytes(), (root / ".git" / "config").read_bytes()
    with pytest.raises(PathEscape, match="configuration"):
        memory.edit("fsmem.yaml", old="max_tokens: 2000", new="max_tokens: 9999")
    with pytest.raises(PathEscape, match="hidden"):
        memory.edit(".git/config", old="bare = false", new="bare = true")
    with pytest.raises(PathEscape):
        memory.write("FSMEM.yaml", "x")
    done = cli(root, "edit", "fsmem.yaml", "--old", "tokenizer", "--new", "x")
    assert done.returncode == 2 and done.stderr.startswith("fsmem: error: path 'fsmem.yaml' is fsmem's configuration")
    assert (root / "fsmem.yaml").read_bytes() == config and (root / ".git" / "config").read_bytes() == git
    assert cli(root, "ls").returncode == 0


def test_edit_of_a_memory_file_without_front_matter_adds_none(memory: Memory) -> None:
    """Finding 8: edit (and a write that keeps the body) added front matter to a file that had none."""
    path = memory.root / "topics" / "plain.md"
    path.write_text("# Plain\n- payment terms: net 30\n")
    memory.edit("topics/plain.md", old="net 30", new="net 45")
    assert path.read_text() == "# Plain\n- payment terms: net 45\n"
    memory.write("topics/plain.md", "# Plain\n- payment terms: net 60\n")
    assert path.read_text() == "# Plain\n- payment terms: net 60\n"
    memory.edit("topics/billing.md", old="net 30", new="net 45")  # a file with front matter: updated is touched
    assert "updated: 2026-11-30T10:00:00+00:00\n" in (memory.root / "topics" / "billing.md").read_text()


def test_read_and_grep_do_not_open_git_files(memory: Memory) -> None:
    """Finding 8: read and grep opened .git/config, whose remote URLs can hold tokens."""
    (memory.root / ".git").mkdir()
    (memory.root / ".git" / "config").write_text("url = https://SECRET-token@example.com\n")
    (memory.root / ".git" / "notes.md").write_text("SECRET-token\n")
    for call in (
        lambda: memory.read(".git/config"),
        lambda: memory.read(".git/notes.md"),
        lambda: memory.read(".GIT/notes.md"),
        lambda: memory.grep("SECRET", [".git/config"]),
        lambda: memory.grep("SECRET", [".git"]),
        lambda: memory.ls(".git"),
    ):
        with pytest.raises(PathEscape, match="hidden"):
            call()
    assert memory.grep("SECRET").total == 0


@pytest.mark.parametrize(
    "archive_dir", ["../x", "/tmp/fsmem-archive", ".hidden/sessions", "archive/../../x", ".fsmem/archive", ""]
)
def test_archive_dir_must_be_a_visible_folder_inside_the_memory(memory: Memory, archive_dir: str) -> None:
    """Finding 8: `consolidate.archive_dir: ../x` in fsmem.yaml moved consolidated notes outside the root."""
    config = memory.root / "fsmem.yaml"
    text = config.read_text().replace("archive: false", "archive: true")
    config.write_text(text.replace("archive_dir: archive/sessions", f"archive_dir: '{archive_dir}'"))
    memory = Memory(memory.root)
    memory.note("- employer: Globex", session="s", subject="people/Adam Smith")
    with pytest.raises(ConfigError, match="consolidate.archive_dir"):
        memory.consolidate()
    assert not (memory.root.parent / "x").exists()
    assert [p.name for p in (memory.root / "sessions").rglob("*.md")] == ["s.md"]


def test_archive_dir_reached_through_a_link_out_is_refused(memory: Memory, tmp_path: Path) -> None:
    """Finding 8: the archive folder is checked where it really is: a link that leads out is a ConfigError."""
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("archive: false", "archive: true"))
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", memory.root / "archive")
    memory = Memory(memory.root)
    memory.note("- employer: Globex", session="s", subject="people/Adam Smith")
    with pytest.raises(ConfigError, match="leads outside the memory root"):
        memory.consolidate()
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_names_with_control_characters_are_not_memory(memory: Memory) -> None:
    """Finding 8: a file name may hold newlines, spoofing lines of ls and grep output."""
    root = memory.root
    spoof = "topics/x.md  9 tok  -  -\nfake.md"
    (root / spoof).write_text("- proration: weekly\n")
    (root / "topics" / "tab\there.md").write_text("- proration: hourly\n")
    listing = memory.ls()
    assert [e.path for e in listing.entries] == ["README.md", "profile/identity.md", "topics/billing.md"]
    assert "fake.md" not in listing.to_text().splitlines()
    found = memory.grep("proration")
    assert [m.path for m in found.matches] == ["topics/billing.md"]
    problems = [p for p, _, _ in memory.check().problems]
    assert repr(spoof) in problems and "\n" not in "".join(problems)
    with pytest.raises(InvalidArgument, match="control character"):
        memory.read(spoof)


def test_state_folder_in_any_letter_case_is_refused(memory: Memory) -> None:
    """Finding 8: `.FSMEM/` passed the check, and on a case-insensitive file system it is `.fsmem/`."""
    for path in (".FSMEM/x.md", ".Fsmem/cache.md", "topics/../.fsMem/x.md"):
        with pytest.raises(PathEscape, match=".fsmem/"):
            memory.write(path, "x")
    assert not any(p.name.lower() == ".fsmem" and p.name != ".fsmem" for p in memory.root.iterdir())


# -- finding 9: a YAML alias bomb -------------------------------------------------------------------------
def alias_bomb(levels: int = 9) -> str:
    """Front matter whose last field expands to 9**levels strings ("billion laughs")."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]")
    return "---\ntitle: Laughs\n" + "\n".join(lines) + "\n---\n# Laughs\n- joke: billion laughs\n"


@pytest.mark.slow
def test_alias_bomb_gets_bounded_answers_everywhere(memory: Memory) -> None:
    """Finding 9: a YAML alias bomb in any front matter hung ls, check, read, search, context, consolidate and
    index (3 GB in 40 s), and an agent planted it with one `write`, which then hung holding the write lock."""
    root = memory.root
    written = cli(root, "write", "topics/planted.md", input=alias_bomb())  # the agent's one write
    assert written.returncode == 0, written.stderr
    assert cli(root, "note", "--subject", "people/Adam Smith", "--", "- employer: Globex").returncode == 0  # lock free
    (root / "topics" / "laughs.md").write_text(alias_bomb())  # and the same text as a whole file
    listed = cli(root, "ls", "--json")
    assert listed.returncode == 0 and "topics/laughs.md" in listed.stdout
    checked = cli(root, "check")
    assert checked.returncode == 1
    assert "topics/laughs.md:3: front matter uses a YAML anchor or alias" in checked.stdout
    read = cli(root, "read", "topics/laughs.md")
    assert read.returncode == 0 and "l9: &l9" in read.stdout  # shown as the text it is
    assert cli(root, "grep", "billion").returncode == 0
    assert cli(root, "search", "billion laughs joke", timeout=60).returncode in (0, 1)
    assert cli(root, "context").returncode == 0
    assert cli(root, "consolidate", timeout=60).returncode in (0, 1)
    assert cli(root, "index").returncode == 0


def test_front_matter_size_is_capped(memory: Memory) -> None:
    """Finding 9: front matter is parsed only up to 64 KiB; a larger block is a reported problem, the file text."""
    path = memory.root / "topics" / "huge.md"
    path.write_text("---\n" + "".join(f"k{n}: {'v' * 60}\n" for n in range(2000)) + "---\n# Huge\n")
    meta = memory.meta("topics/huge.md")
    assert meta.front_matter == {} and meta.problems[0] == (1, "front matter is longer than 64 KiB; not read as YAML")
    assert memory.read("topics/huge.md", lines="1:1").lines == [(1, "---")]


@pytest.mark.parametrize(
    "value",
    ["9" * 5000, "1_" + "9" * 5000, "[1, " + "9" * 5000 + "]", "!!int abc", "!!float abc"],
    ids=["long integer", "long integer with _", "long integer in a list", "int tag on text", "float tag on text"],
)
def test_a_value_yaml_cannot_construct_is_a_problem_of_its_file_alone(memory: Memory, value: str) -> None:
    """An integer of over 4,300 digits (Python's cap on int('...')) or a tag its text does not fit raised
    ValueError out of the front matter's parser: one such file, an agent's one `write`, made ls, check,
    search, context and stat of the whole memory answer only `fsmem: error: ValueError`."""
    text = f"---\ntitle: Planted\nn: {value}\n---\n# Planted\n- joke: billion laughs\n"
    memory.write("topics/planted.md", text)  # the agent's one write: the text is its body
    (memory.root / "topics" / "whole.md").write_text(text)  # and the same text as a whole file
    meta = memory.meta("topics/whole.md")
    assert meta.front_matter == {}
    assert meta.problems[0][1].startswith("front matter holds a value YAML cannot construct: ")
    assert "set_int_max_str_digits" not in meta.problems[0][1]
    assert {"topics/planted.md", "topics/whole.md"} <= {entry.path for entry in memory.ls().entries}
    assert memory.search("billion laughs joke").hits
    assert "Planted" in memory.read("topics/whole.md").to_text()
    assert memory.stat("topics/whole.md").tokens > 0
    memory.context()


@pytest.mark.parametrize("depth", [32, 33, 600, 900, 3000])
def test_front_matter_nested_deeply_is_a_problem_of_its_file_alone(memory: Memory, depth: int) -> None:
    """The C parser reads a thousand levels of `[[[...]]]`; the reading after it recursed, and one such file
    (600 or 900 levels) made every command of the whole memory answer 'the input is nested too deeply'."""
    assert MAX_NESTING == MAX_FIELD_DEPTH  # whatever a write sets is read
    value = "[" * depth + "x" + "]" * depth
    (memory.root / "topics" / "deep.md").write_text(f"---\ntitle: {value}\n---\n# Deep\n- joke: billion laughs\n")
    meta = memory.meta("topics/deep.md")
    if depth <= MAX_NESTING:
        assert str(meta.title).startswith("[[[") and not any("nested" in why for _, why in meta.problems)
    else:
        assert meta.front_matter == {} and meta.problems[0][1] in (
            "front matter is nested too deeply to read",
            "front matter is not valid YAML: exceeded maximum nesting depth",
        )
    assert "topics/deep.md" in [entry.path for entry in memory.ls().entries]
    assert memory.search("billion laughs joke").hits
    memory.context()
    memory.index()


# -- finding 10: files that cannot be read ------------------------------------------------------------------
@pytest.mark.slow
def test_a_fifo_named_md_never_blocks(memory: Memory) -> None:
    """Finding 10: a FIFO named *.md blocked `read` for ever."""
    root = memory.root
    os.mkfifo(root / "topics" / "pipe.md")
    done = cli(root, "read", "topics/pipe.md")
    assert done.returncode == 2
    assert (
        done.stderr
        == "fsmem: error: path 'topics/pipe.md' is not a regular file (a FIFO, socket or device); fsmem opens only files\n"
    )
    with pytest.raises(InvalidArgument, match="not a regular file"):
        within(10, lambda: memory.read("topics/pipe.md"))
    assert tools.call(memory, "read", {"path": "topics/pipe.md"}).is_error
    with pytest.raises(MemoryToolError, match="not a regular file"):
        within(10, lambda: MemoryTool.over(memory).view("/memories/topics/pipe.md"))
    assert cli(root, "grep", "proration").returncode == 0
    listed = within(10, memory.ls)
    assert [e.path for e in listed.entries][-1] == "topics/billing.md" and listed.skipped == ["topics/pipe.md"]
    assert ("topics/pipe.md", 1, "skipped: not a regular file (a FIFO, socket or device)") in memory.check().problems


def _answers_everything(memory: Memory, bad: str, reason: str, *, consolidate: bool = True) -> None:
    """ls, check, search and context answer with the rest of the memory; check names `bad`; consolidate and index run."""
    pytest.importorskip("bm25s")
    memory.note("- employer: Globex", session="s", subject="people/Adam Smith")
    listing = memory.ls()
    assert "topics/billing.md" in [e.path for e in listing.entries] and bad in listing.skipped
    assert (bad, 1, reason) in memory.check().problems
    assert [h.path for h in memory.search("proration daily").hits][:1] == ["topics/billing.md"]
    assert "profile/identity.md" in memory.context().sources
    assert memory.grep("proration").total == 1
    if consolidate:
        report = memory.consolidate()
        assert report.counts["notes_consolidated"] == 1
        memory.index()
        assert "adam-smith" in (memory.root / "INDEX.md").read_text()


def test_a_symlink_loop_does_not_fail_the_whole_answer(memory: Memory) -> None:
    """Finding 10: one symbolic link loop failed ls, check, search, context, consolidate and index as a whole."""
    os.symlink("loop.md", memory.root / "topics" / "loop.md")
    os.symlink("b.md", memory.root / "topics" / "a.md")
    os.symlink("a.md", memory.root / "topics" / "b.md")
    _answers_everything(memory, "topics/loop.md", "skipped: a symbolic link loop")
    with pytest.raises(InvalidArgument, match="symbolic link loop"):
        memory.read("topics/a.md")


def test_an_unreadable_file_does_not_fail_the_whole_answer(memory: Memory) -> None:
    """Finding 10: one unreadable file (chmod 000) failed ls, check, search, context, consolidate and index."""
    if os.geteuid() == 0:
        pytest.skip("running as root, which reads a chmod 000 file; the next test makes its open fail instead")
    locked = memory.root / "topics" / "locked.md"
    locked.write_text("- secret: x\n")
    locked.chmod(0)
    try:
        _answers_everything(memory, "topics/locked.md", "skipped: permission denied")
    finally:
        locked.chmod(0o644)


def test_a_file_the_mode_bits_forbid_is_skipped_by_every_walk(memory: Memory, monkeypatch) -> None:
    """Finding 10, as a user who is not root: the walk reads the mode bits it already has (no extra system
    call), so a chmod 000 file is skipped and reported by ls, check, search, context, consolidate and index.
    Running as root, the walk is shown the process identity of an ordinary user."""
    from fsmem.store import walk as walking

    locked = memory.root / "topics" / "locked.md"
    locked.write_text("- secret: x\n")
    locked.chmod(0)
    owner = locked.stat().st_uid
    monkeypatch.setattr(walking, "_identity", lambda: (owner if owner else 1000, frozenset({12345})))
    try:
        _answers_everything(memory, "topics/locked.md", "skipped: permission denied")
    finally:
        locked.chmod(0o644)


def test_a_file_whose_open_fails_does_not_fail_the_whole_answer(memory: Memory, monkeypatch) -> None:
    """Finding 10, also as root: a file whose every open fails with EACCES is skipped and reported by ls,
    check, search and context (which read file contents), and the rest of the answer still comes."""
    locked = memory.root / "topics" / "locked.md"
    locked.write_text("---\ntitle: Locked\n---\n- secret: x\n")
    target = os.fspath(locked)

    def refusing(real):
        def opener(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.fspath(file) == target:
                raise PermissionError(errno.EACCES, "Permission denied", target)
            return real(file, *args, **kwargs)

        return opener

    monkeypatch.setattr(os, "open", refusing(os.open))
    monkeypatch.setattr(builtins, "open", refusing(builtins.open))
    monkeypatch.setattr(io, "open", refusing(io.open))
    _answers_everything(memory, "topics/locked.md", "skipped: permission denied", consolidate=False)


# -- finding 11: NUL bytes, lone surrogates, deep and long paths --------------------------------------------
def test_nul_in_note_text_or_subject_is_refused_and_the_session_stays_usable(memory: Memory) -> None:
    """Finding 11: a NUL byte in note text or a subject was stored; every later note to that session failed,
    and consolidate skipped the note."""
    for call in (
        lambda: memory.note("- employer: Glo\x00bex", session="s"),
        lambda: memory.note("- employer: Globex", session="s", subject="people/Adam\x00Smith"),
        lambda: memory.note("- employer: \ud800", session="s"),
        lambda: memory.write("topics/x.md", "body\x00"),
        lambda: memory.write("topics/billing.md", set={"title": "Bil\x00ling"}),
        lambda: memory.write("topics/billing.md", set={"tags": ["ok", "b\ud800d"]}),
        lambda: memory.edit("topics/billing.md", old="net 30", new="net\x0045"),
        lambda: memory.edit("topics/billing.md", old="net\x0030", new="net 45"),
    ):
        with pytest.raises(InvalidArgument, match="nothing was stored"):
            call()
    assert not (memory.root / "sessions").exists() and not (memory.root / "topics" / "x.md").exists()
    assert (memory.root / "topics" / "billing.md").read_text() == BILLING
    memory.note("- employer: Globex", session="s", subject="people/Adam Smith")
    memory.note("- role: cfo", session="s", subject="people/Adam Smith")
    assert memory.consolidate().counts["notes_consolidated"] == 1


SURROGATE_CALLS = [
    ("list", {"path": "topics/\ud800"}),
    ("grep", {"pattern": "\ud800"}),
    ("grep", {"pattern": "x", "paths": ["\ud800"]}),
    ("read", {"path": "\ud800.md"}),
    ("read", {"path": "topics/billing.md", "section": "\ud800"}),
    ("search", {"query": "billing \ud800"}),
    ("note", {"text": "- employer: \ud800"}),
    ("note", {"text": "- employer: x", "subject": "people/\ud800"}),
    ("write", {"path": "topics/x.md", "body": "\ud800"}),
    ("write", {"path": "topics/billing.md", "set": {"title": "\ud800"}}),
    ("edit", {"path": "topics/billing.md", "old": "net 30", "new": "\ud800"}),
    ("\ud800", {}),
]


def test_lone_surrogate_in_any_tool_argument_is_an_error_answer(memory: Memory) -> None:
    """Finding 11: a lone surrogate in a tool argument made `tools.call` raise for every tool."""
    for name, arguments in SURROGATE_CALLS:
        answer = tools.call(memory, name, arguments)
        assert answer.is_error and answer.text.startswith("error: "), (name, answer.text)
        answer.text.encode("utf-8")
    assert (memory.root / "topics" / "billing.md").read_text() == BILLING
    assert not (memory.root / "sessions").exists()
    logged = list(retrieval_log.records(memory.root))
    assert len(logged) == len(SURROGATE_CALLS) and all(r.get("error") for r in logged)
    assert logged[0]["arguments"] == {"path": "topics/\ud800"}  # logged as the JSON escape it is


@pytest.mark.slow
def test_mcp_answers_a_lone_surrogate_and_a_deep_path(memory: Memory, monkeypatch) -> None:
    """Finding 11: a lone surrogate left an MCP client waiting for ever for a reply, and a 2,000-component path
    came back as a JSON-RPC error (RecursionError) instead of a tool answer."""
    pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
    import json

    import anyio
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    def ascii_json(self, **options) -> str:  # how a client in another language sends "\ud800"
        return json.dumps(self.model_dump(mode="json", **options), ensure_ascii=True, separators=(",", ":"))

    monkeypatch.setattr(types.JSONRPCRequest, "model_dump_json", ascii_json)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fsmem", "--root", str(memory.root), "mcp"], env=_environment()
    )
    calls = SURROGATE_CALLS[:-1] + [
        ("write", {"path": "/".join(["d"] * 2000) + "/x.md", "body": "x"}),
        ("read", {"path": "x" * 300 + ".md"}),
        ("read", {"path": "topics/billing.md"}),
    ]

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                answers = []
                for name, arguments in calls:
                    with anyio.fail_after(30):
                        answers.append(await session.call_tool(name, arguments))
                return answers

    answers = anyio.run(main)
    assert [a.is_error for a in answers] == [True] * (len(calls) - 1) + [False]
    texts = [a.content[0].text for a in answers]
    assert texts[0].startswith("error: argument 'path' contains '\\ud800', which is not text")
    assert "is deeper than 64 folders" in texts[-3] and "has a name longer than 255 bytes" in texts[-2]
    assert "- proration: daily" in texts[-1]
    assert not (memory.root / "d").exists()


def test_deep_and_long_paths_are_invalid_arguments_before_the_file_system(memory: Memory) -> None:
    """Finding 11: a 2,000-component path raised RecursionError, and ENAMETOOLONG escaped the API as OSError."""
    deep = "/".join(["d"] * 2000) + "/x.md"
    for path, reason in (
        (deep, "is deeper than 64 folders"),
        ("x" * 300 + ".md", "has a name longer than 255 bytes"),
        ("/".join(["p" * 200] * 25) + "/x.md", "is longer than 4096 bytes"),
    ):
        for call in (
            lambda path=path: memory.write(path, "x"),
            lambda path=path: memory.read(path),
            lambda path=path: memory.ls(path),
            lambda path=path: memory.edit(path, old="a", new="b"),
            lambda path=path: memory.grep("x", [path]),
        ):
            with pytest.raises(InvalidArgument, match=reason):
                call()
    assert not (memory.root / "d").exists()
    done = cli(memory.root, "write", deep, input="x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "deeper than 64 folders" in done.stderr


def test_operating_system_errors_reach_the_caller_as_fsmem_errors(memory: Memory, monkeypatch) -> None:
    """Finding 11: OSError (ENAMETOOLONG, ENOSPC, EACCES…) escaped the API; every error through it is an FsmemError."""
    from fsmem.store import writing

    def full_disk(path, data, **options):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(writing, "atomic_write", full_disk)
    with pytest.raises(FsmemError, match=r"^no space left on device \('topics/billing.md'\)$"):
        memory.edit("topics/billing.md", old="net 30", new="net 45")
    answer = tools.call(memory, "edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"})
    assert answer.is_error and answer.text == "error: no space left on device ('topics/billing.md')"


# -- the memory's own README ------------------------------------------------------------------------------
def test_the_root_readme_is_listed_and_read_but_not_grepped_or_ranked(memory: Memory) -> None:
    """The memory's README.md (its conventions, for humans) is not memory: ls shows it and read reads it,
    but grep and search leave it out unless it is named."""
    assert "README.md" in [e.path for e in memory.ls().entries]
    assert memory.read("README.md", lines="1:1").lines == [(1, "---")]
    assert memory.grep("conventions", ignore_case=True).total == 0
    assert memory.grep("conventions", ignore_case=True, type="procedural").total == 0
    assert memory.grep("conventions", ["README.md"], ignore_case=True).total > 0
    pytest.importorskip("bm25s")
    assert all(h.path != "README.md" for h in memory.search("conventions of this memory for a human").hits)


# -- runs of blank lines ----------------------------------------------------------------------------------
@pytest.mark.parametrize("blank", ["\n", " \n", "\u3000\n"], ids=["empty", "spaces", "ideographic-space"])
def test_a_long_run_of_blank_lines_does_not_hang_a_search(memory: Memory, blank: str) -> None:
    """A section ending in 200,000 blank lines (a file an editor padded, or one made to hang the build): the
    plain cut of a body tried its regex again from each line of a run with no row after it, a cost that grew
    with the square of the run (17,000 lines: 25 s; these: about an hour). The search answers in the
    subprocess's time limit, with the row after the run at its line."""
    body = f"---\ntitle: Padded\n---\n# Padded\n{blank * 200_000}## Facts\n- mascot: walrus\n{blank * 200_000}"
    (memory.root / "topics" / "padded.md").write_text(body, encoding="utf-8")
    done = cli(memory.root, "search", "walrus mascot", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    line = body.splitlines().index("- mascot: walrus") + 1
    assert [(hit["path"], hit["line"]) for hit in json.loads(done.stdout)["results"]] == [("topics/padded.md", line)]
