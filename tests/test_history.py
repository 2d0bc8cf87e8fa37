"""History on git: every write through every face is one commit of exactly its files, by its agent; changes
made outside fsmem are committed on their own first; bursts lose nothing; without git nothing changes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest
from conftest import configure, write_file

from fsmem import HistoryOff, Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.history import journal

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def commits(root: Path, count: int | None = None) -> list[tuple[str, str, list[str]]]:
    """(author, subject, files) of the last commits, newest first."""
    limit = [f"-n{count}"] if count else []
    out = git(root, "log", *limit, "--no-renames", "--format=%x1e%an%x1f%s", "--name-only")
    found = []
    for chunk in out.split("\x1e")[1:]:
        head, _, files = chunk.partition("\n")
        author, subject = head.split("\x1f")
        found.append((author, subject, [f for f in files.split("\n") if f]))
    return found


def clean(root: Path) -> bool:
    return git(root, "status", "--porcelain") == ""


@pytest.fixture
def fixed_now(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:15:00+00:00")


@pytest.fixture
def memory(tmp_path) -> Memory:
    return Memory.init(tmp_path / "mem", git=True)


def test_init_git_makes_a_repository_ignoring_machine_state_with_the_merge_driver(memory):
    root = memory.root
    assert (root / ".git").is_dir() and memory.history is not None
    assert ".fsmem/" in (root / ".gitignore").read_text().splitlines()
    assert "*.md merge=fsmem" in (root / ".gitattributes").read_text().splitlines()
    assert "fsmem.history.merge" in git(root, "config", "merge.fsmem.driver")
    [(author, subject, files)] = commits(root)
    assert subject == "init: a new fsmem memory with history" and author == "default"
    assert set(files) == {".gitattributes", ".gitignore", "README.md", "fsmem.yaml", "profile/identity.md"}
    memory.note("- employer: Globex", subject="people/Adam Smith")
    assert (root / ".fsmem").is_dir() and clean(root)


def test_each_write_is_one_commit_of_exactly_its_files_by_its_agent(memory, fixed_now):
    root = memory.root
    agent = Memory(root, agent="researcher")
    note = agent.note("- employer: Globex", subject="people/Adam Smith").path
    agent.note("- role: cfo", subject="people/Adam Smith")
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    agent.edit("topics/billing.md", old="monthly", new="weekly")
    memory.write("topics/billing.md", None, set={"description": "How we bill"})
    memory.mv("topics/billing.md", "topics/invoices.md")
    memory.rm("topics/invoices.md")
    assert commits(root, 7) == [
        ("default", "rm topics/invoices.md", ["topics/invoices.md"]),
        ("default", "mv topics/billing.md -> topics/invoices.md", ["topics/billing.md", "topics/invoices.md"]),
        ("default", "write topics/billing.md: set description", ["topics/billing.md"]),
        ("researcher", "edit topics/billing.md", ["topics/billing.md"]),
        ("default", "write topics/billing.md (new file)", ["topics/billing.md"]),
        ("researcher", f"note {note}: +1 line", [note]),
        ("researcher", f"note {note}: +2 lines (new file)", [note]),
    ]
    assert git(root, "show", f"HEAD:{note}") == (root / note).read_text()
    assert clean(root) and not journal.pending(memory.history)


def test_a_staged_file_of_a_human_is_not_swept_into_an_agent_commit(memory):
    root = memory.root
    write_file(root, "topics/draft.md", "---\ntitle: Draft\n---\nA human's draft.\n")
    git(root, "add", "topics/draft.md")
    memory.write("topics/billing.md", "# Billing\n")
    assert commits(root, 1) == [("default", "write topics/billing.md (new file)", ["topics/billing.md"])]
    assert git(root, "status", "--porcelain", "topics/draft.md") == "A  topics/draft.md\n"


def test_a_change_made_outside_fsmem_is_committed_on_its_own_before_the_agent_commit(memory):
    root = memory.root
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    with open(root / "topics/billing.md", "a") as handle:  # a human in an editor
        handle.write("- seats: 12\n")
    Memory(root, agent="researcher").edit("topics/billing.md", old="monthly", new="weekly")
    (agent, agent_subject, _), (human, human_subject, files) = commits(root, 2)
    assert (agent, agent_subject) == ("researcher", "edit topics/billing.md")
    assert human_subject == "outside fsmem: topics/billing.md" and files == ["topics/billing.md"]
    assert human == git(root, "config", "user.name").strip() or human == "outside fsmem"
    outside = git(root, "show", "HEAD~1:topics/billing.md")
    assert "- cycle: monthly\n- seats: 12\n" in outside  # the human's change alone
    assert "- cycle: weekly\n- seats: 12\n" in git(root, "show", "HEAD:topics/billing.md")


def test_a_write_that_puts_back_what_head_holds_still_commits_the_hand_edit_it_replaces(memory, fixed_now):
    """HEAD holds a file; a human edits it; a write puts HEAD's bytes back. The write commits nothing of its
    own (HEAD holds its result already), and the human's bytes were in no commit: they are committed first.
    The clock is pinned: both writes stamp `updated:`, and a second between them made the bytes differ."""
    root = memory.root
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    kept = (root / "topics" / "billing.md").read_text()
    with open(root / "topics/billing.md", "a") as handle:  # a human in an editor
        handle.write("- seats: 12\n")
    Memory(root, agent="researcher").write("topics/billing.md", kept)
    (agent, agent_subject, _), (_, human_subject, files) = commits(root, 2)
    assert (agent, agent_subject) == ("researcher", "write topics/billing.md")
    assert human_subject == "outside fsmem: topics/billing.md" and files == ["topics/billing.md"]
    assert "- seats: 12\n" in git(root, "show", "HEAD~1:topics/billing.md")
    assert git(root, "show", "HEAD:topics/billing.md") == kept and clean(root)


def test_consolidate_is_one_commit_whose_message_is_its_report_summary_first(memory, fixed_now):
    root = memory.root
    memory.note("- employer: Globex", subject="people/Adam Smith")
    write_file(root, "topics/hand.md", "---\ntitle: Hand\n---\nWritten by hand.\n")
    report = Memory(root, agent="researcher").consolidate()
    (author, subject, files), (_, outside, _) = commits(root, 2)
    assert outside == "outside fsmem: topics/hand.md"
    assert author == "researcher"
    # the subject is the summary line, which names no file; the report's other lines follow in the body
    message = git(root, "log", "-1", "--format=%B").strip().splitlines()
    assert message[0].startswith("consolidated 1 of 1 note(s)") and message[1] == ""
    assert sorted(line for line in message if line) == sorted(report.to_text().strip().splitlines())
    assert set(files) == set(report.files_written) | {"INDEX.md"}
    assert clean(root)


LINKED_BY_CONSOLIDATION = [  # (the link, its text, the file consolidation really writes, the note's subject)
    ("entities/people/ann-lee.md", "../../topics/ann.md", "topics/ann.md", "people/Ann Lee"),
    ("entities/people", "../topics/people", "topics/people/ann-lee.md", "people/Ann Lee"),
]


@pytest.mark.parametrize(("place", "text", "real", "subject"), LINKED_BY_CONSOLIDATION)
def test_a_consolidation_through_an_in_memory_link_commits_the_file_it_wrote_and_keeps_the_link(
    memory, fixed_now, place, text, real, subject
):
    """Sync fuzzer finding (a repair "deleted" a session note the remote had made a link to profile/identity.md):
    a consolidation that marks a note or writes a document through an in-memory link committed the link's name,
    read from disk as no file, so the commit removed the link from HEAD (and the push from every host), left it
    untracked here, and never committed the file it wrote. Now the commit holds the file really written and the
    link as it was, in HEAD and on disk, and the work tree is clean."""
    root = memory.root
    if subject is not None:
        write_file(root, real, "---\ntitle: Ann\ntype: entity\n---\n# Ann\n\n## Facts\n- city: Oslo\n")
        Memory(root, agent="w1").note("- employer: Globex", subject=subject)
    link = root / place
    if link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(text, link)
    git(root, "add", "-A")
    git(root, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "a link")
    before = git(root, "rev-parse", f"HEAD:{real}").strip()

    report = Memory(root, agent="w1").consolidate()

    assert report.counts["notes_consolidated"] == 1, report.to_text()
    (author, subject_line, files), _ = commits(root, 2)
    assert author == "w1" and subject_line.startswith("consolidated 1 of 1 note(s)")
    assert real in files and place not in files  # the file written, not the link
    assert git(root, "rev-parse", f"HEAD:{real}").strip() != before
    assert git(root, "ls-tree", "HEAD", place).split()[:1] == ["120000"]  # still a link in HEAD
    assert link.is_symlink() and os.readlink(link) == text
    assert clean(root), git(root, "status", "--porcelain")


def test_a_session_note_that_links_to_a_file_that_is_no_note_is_neither_marked_nor_committed(memory, fixed_now):
    """The sync fuzzer's link (a remote made a session note a link to profile/identity.md) used to be consolidated
    as a note, marking profile/identity.md through it. Now nothing is read from it or written through it: the
    report names it, the run commits INDEX.md alone, and the link stays in HEAD and on disk."""
    root = memory.root
    link = root / "sessions/2026/11/30/w1-fuzz1.md"
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink("../../../../profile/identity.md", link)
    git(root, "add", "-A")
    git(root, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "a link")
    head, identity = git(root, "rev-parse", "HEAD"), (root / "profile/identity.md").read_bytes()

    report = Memory(root, agent="w1").consolidate()

    assert report.skipped == ["sessions/2026/11/30/w1-fuzz1.md"] and report.counts["notes_consolidated"] == 0
    assert [files for _author, _subject, files in commits(root, 1)] == [["INDEX.md"]]  # the run's own commit
    assert git(root, "rev-parse", "HEAD~1") == head and (root / "profile/identity.md").read_bytes() == identity
    assert git(root, "ls-tree", "HEAD", "sessions/2026/11/30/w1-fuzz1.md").split()[:1] == ["120000"]
    assert os.readlink(link) == "../../../../profile/identity.md"
    assert clean(root), git(root, "status", "--porcelain")


LINKED_BY_HAND = [  # (the link, its text before (None: made by hand), its text after)
    ("topics/alias.md", None, "billing.md"),  # a person's link to a memory file
    ("topics/alias.md", "billing.md", "other.md"),  # a tracked link re-pointed (ln -sfn)
    ("topics/alias.md", "billing.md", "gone.md"),  # to nothing
    ("topics/out.md", None, "../../outside.md"),  # out of the memory (fsmem check reports it)
    ("topics/alias.md", "billing.md", "../../outside.md"),
]


@pytest.mark.parametrize(("place", "before", "after"), LINKED_BY_HAND)
def test_a_link_made_or_repointed_outside_fsmem_is_committed_as_a_link(memory, fixed_now, place, before, after):
    """A link a person makes or re-points in the memory was read from disk as no file: the commit of changes made
    outside fsmem removed it from HEAD (and, pushed, from every host) and left it untracked here. Now it is
    committed as `git add` commits it: mode 120000, its text as the blob, never the bytes it leads to."""
    root = memory.root
    (root.parent / "outside.md").write_text("# Secret\n")
    write_file(root, "topics/billing.md", "# Billing\n")
    write_file(root, "topics/other.md", "# Other\n")
    link = root / place
    if before is not None:
        os.symlink(before, link)
    git(root, "add", "-A")
    git(root, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "files")
    tree = git(root, "ls-tree", "-r", "HEAD")
    if link.is_symlink():
        link.unlink()
    os.symlink(after, link)

    Memory(root, agent="w1").consolidate()

    outside = [files for _, subject, files in commits(root) if subject.startswith("outside fsmem")]
    assert outside == [[place]]
    text_id = subprocess.run(
        ["git", "-C", str(root), "hash-object", "--stdin"], input=after, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert git(root, "ls-tree", "HEAD", place).split()[:3] == ["120000", "blob", text_id]
    made = git(root, "log", "-1", "--format=%H", "--grep=^outside fsmem").strip()
    rest = [line for line in git(root, "ls-tree", "-r", made).splitlines() if not line.endswith("\t" + place)]
    assert rest == [line for line in tree.splitlines() if not line.endswith("\t" + place)]  # nothing else changed
    assert link.is_symlink() and os.readlink(link) == after
    assert clean(root), git(root, "status", "--porcelain")


@pytest.mark.parametrize("target", ["billing.md", "deep"])
def test_a_link_made_by_hand_and_removed_by_fsmem_is_committed_as_a_link_both_times(memory, fixed_now, target):
    """`rm` of a link no commit holds yet: the link as it stood, committed first as made outside fsmem, is a link
    (mode 120000, its text) in that commit too, never a file holding its text; then the removal."""
    root = memory.root
    write_file(root, "topics/billing.md", "# Billing\n")
    (root / "topics" / "deep").mkdir()
    os.symlink(target, root / "topics" / "alias.md")
    memory.rm("topics/alias.md")
    assert [subject for _, subject, _ in commits(root, 2)] == ["rm topics/alias.md", "outside fsmem: topics/alias.md"]
    assert git(root, "ls-tree", "HEAD~1", "topics/alias.md").split()[0] == "120000"
    assert git(root, "show", "HEAD~1:topics/alias.md") == target
    assert git(root, "ls-tree", "HEAD", "topics/alias.md") == ""
    assert (root / "topics" / "billing.md").exists() and (root / "topics" / "deep").is_dir()


def test_every_face_commits_its_writes(memory, fixed_now):
    root = memory.root
    cli = subprocess.run(
        [FSMEM, "--root", str(root), "--agent", "researcher", "note", "- city: Oslo", "--subject", "people/Ann Lee"],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    answer = tools.call(Memory(root, agent="researcher"), "write", {"path": "topics/tools.md", "body": "# Tools\n"})
    assert not answer.is_error
    tool = MemoryTool.over(Memory(root, agent="researcher"))
    tool.execute({"command": "create", "path": "/memories/topics/mt.md", "file_text": "# MT\n\n- a\n"})
    tool.execute({"command": "str_replace", "path": "/memories/topics/mt.md", "old_str": "- a", "new_str": "- b"})
    tool.execute({"command": "rename", "old_path": "/memories/topics/mt.md", "new_path": "/memories/topics/m2.md"})
    tool.execute({"command": "delete", "path": "/memories/topics/m2.md"})
    plain = MemoryTool(memory_root=root, create_root=False)  # the drop-in without state_dir or agent
    plain.execute({"command": "create", "path": "/memories/topics/plain.md", "file_text": "# Plain\n"})
    subjects = [(author, subject) for author, subject, _ in commits(root, 7)]
    assert subjects == [
        ("default", "memory.create topics/plain.md"),
        ("researcher", "memory.delete topics/m2.md"),
        ("researcher", "memory.rename topics/mt.md -> topics/m2.md"),
        ("researcher", "memory.str_replace topics/mt.md"),
        ("researcher", "memory.create topics/mt.md"),
        ("researcher", "write topics/tools.md (new file)"),
        ("researcher", subjects[6][1]),
    ]
    assert subjects[6][1].startswith("note sessions/") and clean(root)


BURST = """
import sys
from fsmem import Memory
memory = Memory(sys.argv[1], agent=None)
for i in range(int(sys.argv[3])):
    memory.note(f"- burst {sys.argv[2]} {i}: x", session=f"s{sys.argv[2]}")
"""


@pytest.mark.slow
def test_a_burst_of_writers_loses_no_commit(memory):
    root = memory.root
    procs = [subprocess.Popen([sys.executable, "-c", BURST, str(root), str(w), "12"]) for w in range(6)]
    assert [p.wait(timeout=300) for p in procs] == [0] * 6
    journal.drain(memory.history, wait=True)
    notes = [subject for _, subject, _ in commits(root) if subject.startswith("note ")]
    assert len(notes) == 72  # one commit per write, none lost or merged into another
    tree = git(root, "grep", "-h", "burst", "HEAD").splitlines()
    # each line is a keyed fact ('burst 0 3'), stamped with the time of its write: every write is there once
    assert sorted(line.split(" (as of ")[0] for line in tree) == sorted(
        f"- burst {w} {i}: x" for w in range(6) for i in range(12)
    )
    assert clean(root) and not journal.pending(memory.history)
    subprocess.run(["git", "-C", str(root), "fsck", "--no-dangling"], check=True, capture_output=True)


def test_a_write_left_in_the_journal_is_committed_by_the_next_one(memory, monkeypatch):
    calls = []
    monkeypatch.setattr(journal, "drain", lambda repo, **kw: calls.append(repo) or 0)  # a writer killed early
    memory.write("topics/a.md", "# A\n")
    monkeypatch.undo()
    assert calls and len(journal.pending(memory.history)) == 1
    memory.write("topics/b.md", "# B\n")
    assert [s for _, s, _ in commits(memory.root, 2)] == [
        "write topics/b.md (new file)",
        "write topics/a.md (new file)",
    ]


def test_without_git_nothing_changes_and_history_commands_say_how_to_turn_it_on(empty_memory, tmp_path):
    root = empty_memory.root
    empty_memory.note("x")
    assert empty_memory.history is None and not (root / ".fsmem" / "history").exists()
    with pytest.raises(HistoryOff, match=re.escape(f'Memory.init(directory="{root}", git=True)')):
        empty_memory.log()
    out = cli_runner.run(["--root", str(root), "log"], text=True)  # the CLI's boundary, in this process
    assert out.returncode == 2 and f"fsmem init --git {root}" in out.stderr and "Traceback" not in out.stderr
    assert "log" not in [d["name"] for d in tools.definitions(empty_memory)]
    on = Memory.init(tmp_path / "on", git=True)
    assert {"log", "show"} <= {d["name"] for d in tools.definitions(on)}


PROBE = """
import sys
from fsmem import Memory
m = Memory(sys.argv[1])
m.read("profile/identity.md"); m.ls(); m.grep("identity")
print(json.dumps(sorted(n for n in sys.modules if n.startswith("fsmem.history"))))
"""


@pytest.mark.parametrize("with_git", [False, True])
def test_reads_start_no_git_and_load_no_git_machinery(tmp_path, with_git):
    memory = Memory.init(tmp_path / "mem", git=with_git)
    probe = "import json\n" + PROBE
    out = subprocess.run([sys.executable, "-c", probe, str(memory.root)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_a_memory_the_enclosing_repository_ignores_has_no_history(tmp_path):
    outer = tmp_path / "project"
    outer.mkdir()
    git(outer, "init", "-q")
    (outer / ".gitignore").write_text("scratch/\n")
    memory = Memory.init(outer / "scratch")
    memory.write("topics/a.md", "# A\n")
    assert memory.history is None
    assert subprocess.run(["git", "-C", str(outer), "rev-parse", "HEAD"], capture_output=True).returncode != 0


def test_a_memory_inside_an_existing_work_tree_is_used_as_it_is(tmp_path):
    outer = tmp_path / "project"
    outer.mkdir()
    git(outer, "init", "-q")
    memory = Memory.init(outer / "notes" / "mem", git=True)
    assert not (memory.root / ".git").exists() and memory.history.prefix == "notes/mem/"
    memory.write("topics/a.md", "# A\n")
    [(_, subject, files)] = commits(outer, 1)
    assert subject == "write topics/a.md (new file)" and files == ["notes/mem/topics/a.md"]
    assert memory.log().entries[0].paths == ["topics/a.md"]


def test_history_can_be_switched_off_in_fsmem_yaml(memory):
    configure(memory.root, {"history": {"enabled": False}})
    before = git(memory.root, "rev-parse", "HEAD")
    Memory(memory.root).write("topics/a.md", "# A\n")
    assert git(memory.root, "rev-parse", "HEAD") == before


def test_init_git_turns_history_on_for_an_existing_memory(demo_memory):
    Memory.init(demo_memory.root, git=True)
    [(_, subject, files)] = commits(demo_memory.root)
    assert subject == "init: a new fsmem memory with history" and "topics/billing.md" in files


def test_an_entry_whose_blobs_were_lost_is_set_aside_and_the_change_committed_from_the_file(memory, monkeypatch):
    monkeypatch.setattr(journal, "drain", lambda repo, **kw: 0)
    memory.write("topics/a.md", "# A\n")
    monkeypatch.undo()
    repo = memory.history
    [name] = journal.pending(repo)
    entry = json.loads((journal.journal_dir(repo) / name).read_text())
    blob = entry["changes"][0][2]
    (repo.git_dir / "objects" / blob[:2] / blob[2:]).unlink()  # a power cut took the object, not the file
    memory.write("topics/b.md", "# B\n")
    assert not journal.pending(repo) and (repo.state("journal-damaged") / name).is_file()
    memory.consolidate()  # commits what changed outside the journal first
    subjects = [s for _, s, _ in commits(memory.root, 3)]
    assert "outside fsmem: topics/a.md" in subjects
    subprocess.run(["git", "-C", str(memory.root), "fsck", "--no-dangling"], check=True, capture_output=True)


def test_the_background_maintenance_runs_for_a_memory_whose_folder_name_the_shell_would_read(tmp_path):
    """`git gc --auto` and the commit graph run every 256 commits as one `sh -c` line: its words were joined
    unquoted, so fsmem's own settings (a merge driver with spaces, a name with parentheses) made it a syntax
    error and it never ran, and a folder named with `$(…)` would have been a command."""
    marker = tmp_path / "ran"
    memory = Memory.init(tmp_path / f"mem $(touch {marker}) x", git=True)
    memory.note("one line to commit")
    journal.maintain(memory.history)
    graph = memory.root / ".git" / "objects" / "info" / "commit-graph"
    for _ in range(300):
        if graph.exists():
            break
        time.sleep(0.1)
    assert graph.is_file() and not marker.exists()
