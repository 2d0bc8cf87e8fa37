"""`fsmem import`: each format on small real-shaped samples, re-import, faults, secrets, and what stays out of faces."""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import given, settings, strategies as st
from import_samples import (
    CHATGPT,
    CLAUDE,
    TURNS,
    chatgpt_conversation,
    chatgpt_export,
    claude_export,
    long_session,
    transcript_records,
    write_jsonl,
)

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import InvalidArgument, PathEscape, ReadOnly
from fsmem.hooks import claude_code as cc, runner
from fsmem.importers.jsonstream import ArrayReader, JSONFault
from fsmem.importers.notes import digest

FSMEM = str(Path(sys.executable).with_name("fsmem"))
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.init(tmp_path / "mem")


def files(memory: Memory) -> dict[str, bytes]:
    """Every file of the memory but its machine state, with its bytes."""
    return {
        p.relative_to(memory.root).as_posix(): p.read_bytes()
        for p in sorted(memory.root.rglob("*"))
        if p.is_file() and ".fsmem" not in p.parts and ".git" not in p.parts
    }


def body(text: str) -> str:
    return text.split("\n---\n", 1)[1]


def commit_count(memory: Memory) -> int:
    done = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=memory.root, capture_output=True, text=True)
    return int(done.stdout)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = without_fsmem()
    return subprocess.run([FSMEM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


# -- chatgpt ------------------------------------------------------------------------------------------------


def test_a_chatgpt_export_becomes_one_dated_episode_per_conversation(memory, tmp_path):
    export = chatgpt_export(tmp_path / "export", CHATGPT)
    report = memory.import_from("chatgpt", str(export))
    assert (report.created_count, report.extended_count, report.unchanged, report.skipped_count) == (2, 0, 0, 0)
    note = memory.root / "sessions/2025/01/01/chatgpt-6781a0c2-1111.md"
    assert report.created == [
        "sessions/2025/01/01/chatgpt-6781a0c2-1111.md",
        "sessions/2025/01/01/chatgpt-6781a0c2-2222.md",
    ]
    said = [
        "user: We move billing to Stripe in March.",
        "assistant: Noted: billing moves to Stripe in March.",
        "tool call python: import pandas as pd print(pd.__version__)",
        "tool result (python): 2.2.1",
        "assistant: pandas 2.2.1 is installed.",
    ]
    assert note.read_text() == (
        "---\n"
        "title: Billing migration\n"
        "description: ChatGPT conversation imported by fsmem import chatgpt\n"
        "type: episodic\n"
        "session: chatgpt-6781a0c2-1111\n"
        "source: chatgpt\n"
        "conversation: 6781a0c2-1111\n"
        "created: 2025-01-01T10:00:00Z\n"
        "updated: 2025-01-01T10:01:00Z\n"
        "imported_lines: 5\n"
        f"imported_digest: {digest(said)}\n"
        "---\n"
        "# ChatGPT conversation: Billing migration\n"
        "\n"
        "```text\n" + "".join(line + "\n" for line in said) + "```\n"
    )
    assert "the dropped answer" not in note.read_text()  # only the branch current_node shows


def test_importing_the_same_export_again_changes_nothing_and_a_longer_one_adds_only_its_new_lines(tmp_path):
    memory = Memory.init(tmp_path / "mem", git=True)
    export = chatgpt_export(tmp_path / "export", CHATGPT)
    memory.import_from("chatgpt", str(export))
    before, commits = files(memory), commit_count(memory)
    again = memory.import_from("chatgpt", str(export))
    assert (again.created_count, again.extended_count, again.unchanged) == (0, 0, 2)
    assert files(memory) == before and commit_count(memory) == commits
    longer = copy.deepcopy(CHATGPT)
    turns = [("user", "Book a hotel in Alfama."), ("assistant", "Done."), ("user", "And a table at Zé da Mouraria.")]
    longer[1] = chatgpt_conversation("6781a0c2-2222", "Trip to Lisbon", turns)
    grown = memory.import_from("chatgpt", str(chatgpt_export(tmp_path / "export2", longer)))
    assert (grown.created_count, grown.extended, grown.unchanged) == (
        0,
        ["sessions/2025/01/01/chatgpt-6781a0c2-2222.md"],
        1,
    )
    text = (memory.root / grown.extended[0]).read_text()
    assert body(text).endswith(
        "```text\nuser: Book a hotel in Alfama.\nassistant: Done.\n```\n\n"
        "# ChatGPT conversation, continued\n\n```text\nuser: And a table at Zé da Mouraria.\n```\n"
    )
    assert "imported_lines: 3\n" in text and "updated: 2025-01-01T10:00:40Z\n" in text


def test_a_conversation_whose_note_was_archived_is_that_notes_never_a_second_one(tmp_path):
    """With consolidate.archive on, a conversation's note moves to the archive once consolidated; import looked
    for it under sessions/ alone and wrote a second note of the session there: the episode twice in search,
    `check` reporting twins, every consolidation failing to archive it. Now the archived note is the one found:
    the same export changes nothing, a longer one extends it."""
    memory = Memory.init(tmp_path / "mem", git=True)
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  archive: false", "  archive: true"))
    memory = Memory(memory.root)
    export = chatgpt_export(tmp_path / "export", CHATGPT)
    memory.import_from("chatgpt", str(export))
    memory.consolidate()
    archived = "archive/sessions/2025/01/01/chatgpt-6781a0c2-2222.md"
    assert (memory.root / archived).is_file() and not list((memory.root / "sessions").rglob("*.md"))
    before = files(memory)
    again = memory.import_from("chatgpt", str(export))
    assert (again.created_count, again.extended_count, again.unchanged) == (0, 0, 2)
    assert files(memory) == before
    longer = copy.deepcopy(CHATGPT)
    turns = [("user", "Book a hotel in Alfama."), ("assistant", "Done."), ("user", "And a table at Zé da Mouraria.")]
    longer[1] = chatgpt_conversation("6781a0c2-2222", "Trip to Lisbon", turns)
    grown = memory.import_from("chatgpt", str(chatgpt_export(tmp_path / "export2", longer)))
    assert (grown.created_count, grown.extended, grown.unchanged) == (0, [archived], 1)
    assert not list((memory.root / "sessions").rglob("*.md"))
    assert "Zé da Mouraria" in (memory.root / archived).read_text()
    assert memory.check().problems == []
    run_ = memory.consolidate()
    assert not any("not archived" in line for line in run_.to_text().splitlines()), run_.to_text()


def test_a_malformed_export_exits_2_naming_its_line_and_writes_nothing(memory, tmp_path):
    good = json.dumps(CHATGPT[0], indent=1)
    broken = tmp_path / "conversations.json"
    broken.write_text("[" + good + ',\n {"title": "x",, "mapping": {}}\n]', encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(broken.read_text())
    where = f"line {plain.value.lineno} column {plain.value.colno}"
    assert plain.value.lineno == good.count("\n") + 2
    before = files(memory)
    done = run("--root", str(memory.root), "import", "chatgpt", str(broken), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"fsmem: error: {broken} {where}: Expecting property name enclosed in double quotes; nothing was imported\n"
    )
    assert files(memory) == before  # the first, well-formed conversation was not written either


def test_a_conversation_of_the_wrong_shape_is_named_and_nothing_is_written(memory, tmp_path):
    export = chatgpt_export(tmp_path, [CHATGPT[0], {"title": "no mapping", "create_time": 1.0}])
    before = files(memory)
    with pytest.raises(InvalidArgument) as caught:
        memory.import_from("chatgpt", str(export))
    assert str(caught.value).endswith(
        "(conversation 2): the conversation has no mapping of messages; nothing was imported"
    )
    assert files(memory) == before


def test_a_conversation_holding_a_secret_is_skipped_and_named_and_the_rest_come_in(memory, tmp_path):
    leaky = chatgpt_conversation("leak-1", "Deploy keys", [("user", f"the token is {TOKEN}"), ("assistant", "ok")])
    report = memory.import_from("chatgpt", str(chatgpt_export(tmp_path, [*CHATGPT, leaky])))
    assert report.created_count == 2 and report.skipped_count == 1
    ((what, why),) = report.skipped
    assert what.startswith("'Deploy keys' (") and "(conversation 3)" in what
    assert why == "its line 1 looks like a GitHub token"  # one sentence: it said "its line 1, line 1: …"
    assert not any(TOKEN in text.decode() for text in files(memory).values())
    assert "skipped: 'Deploy keys'" in report.to_text()


# -- claude.ai ------------------------------------------------------------------------------------------------


def test_a_claude_export_becomes_episodes_with_tool_use_summarised(memory, tmp_path):
    export = claude_export(tmp_path / "claude", CLAUDE)
    report = memory.import_from("claude", str(export))
    assert report.created == [
        "sessions/2025/02/03/claude-0b9e6c1d-aaaa.md",
        "sessions/2025/02/04/claude-0b9e6c1d-bbbb.md",
    ]
    first = (memory.root / report.created[0]).read_text()
    assert body(first) == (
        "# Claude conversation: Atlas launch plan\n\n```text\n"
        "user: The Atlas launch is on April 2.\n"
        "assistant: Let me look at the calendar.\n"
        "tool call calendar: day=2025-04-02\n"
        "tool result: free\n"
        "assistant: April 2 is free.\n```\n"
    )
    second = (memory.root / report.created[1]).read_text()
    assert "title: Untitled\n" in second and "user: Plain text only." in second  # the text when content is empty
    assert memory.import_from("claude", str(export)).unchanged == 2


# -- claude code ----------------------------------------------------------------------------------------------


def test_a_projects_folder_of_transcripts_shares_the_hooks_reader_and_its_offset(memory, tmp_path):
    projects = tmp_path / "projects"
    transcript = write_jsonl(projects / "-home-ada-atlas" / "s-1.jsonl", transcript_records("s-1", TURNS))
    write_jsonl(projects / "-home-ada-site" / "s-2.jsonl", transcript_records("s-2", TURNS[:1], day="2025-03-11"))
    report = memory.import_from("claude-code", str(projects))
    assert report.created == ["sessions/2025/03/10/claude-code-s-1.md", "sessions/2025/03/11/claude-code-s-2.md"]
    assert body((memory.root / report.created[0]).read_text()) == (
        "# Claude Code session: Fix the flaky sync test\n\n```text\n"
        "user: Why does test_sync fail?\n"
        "assistant: Let me run it.\n"
        "tool call Bash: command=pytest -q tests/test_sync.py\n"
        "tool result (2 lines): 1 failed E assert 2 == 3\n"
        "assistant: The clock is not pinned; pin it with FSMEM_NOW.\n```\n"
    )
    # the hook's next event in that session saves nothing twice
    event = cc.HookEvent("SessionEnd", "s-1", str(transcript), None)
    assert runner.save_session(memory, event).note is None
    more = {"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": "Thanks!"}}
    with transcript.open("a") as out:
        out.write(json.dumps(more) + "\n")
    grown = memory.import_from("claude-code", str(transcript))
    assert grown.extended == ["sessions/2025/03/10/claude-code-s-1.md"]
    assert body((memory.root / grown.extended[0]).read_text()).endswith(
        "# Claude Code session, continued\n\n```text\nuser: Thanks!\n```\n"
    )


def test_the_hook_continues_a_sessions_note_that_consolidation_archived(tmp_path):
    """The hook looked for a session's note under sessions/ alone: once archived, the next event of the session
    wrote a second note of it, from the transcript's first line. Now it continues the archived note."""
    memory = Memory.init(tmp_path / "mem")
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  archive: false", "  archive: true"))
    memory = Memory(memory.root)
    transcript = write_jsonl(tmp_path / "s-9.jsonl", transcript_records("s-9", TURNS[:2]))
    assert runner.save_session(memory, cc.HookEvent("SessionEnd", "s-9", str(transcript), None)).note
    memory.consolidate()
    archived = memory.root / "archive/sessions/2025/03/10/claude-code-s-9.md"
    assert archived.is_file()
    write_jsonl(transcript, transcript_records("s-9", TURNS))
    assert runner.save_session(memory, cc.HookEvent("SessionEnd", "s-9", str(transcript), None)).note
    assert not list((memory.root / "sessions").rglob("*.md"))
    assert archived.read_text().count("user: Why does test_sync fail?") == 1
    assert "The clock is not pinned" in archived.read_text()


def test_a_session_the_hook_saved_is_continued_by_import_each_line_once(memory, tmp_path):
    transcript = write_jsonl(tmp_path / "s-9.jsonl", transcript_records("s-9", TURNS[:2]))
    saved = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-9", str(transcript), None))
    assert saved.note == "claude-code-s-9"
    write_jsonl(transcript, transcript_records("s-9", TURNS))
    report = memory.import_from("claude-code", str(transcript))
    assert (report.extended, report.skipped) == (["sessions/2025/03/10/claude-code-s-9.md"], [])
    text = (memory.root / report.extended[0]).read_text()
    assert body(text) == (
        "# Claude Code session: Fix the flaky sync test\n\n```text\n"
        "user: Why does test_sync fail?\n"
        "assistant: Let me run it.\n"
        "tool call Bash: command=pytest -q tests/test_sync.py\n```\n\n"
        "# Claude Code session, continued\n\n```text\n"
        "tool result (2 lines): 1 failed E assert 2 == 3\n"
        "assistant: The clock is not pinned; pin it with FSMEM_NOW.\n```\n"
    )
    assert memory.import_from("claude-code", str(transcript)).unchanged == 1


def test_a_subagents_transcript_is_its_own_episode_naming_its_parent(memory, tmp_path):
    project = tmp_path / "projects" / "-home-ada-atlas"
    parent = write_jsonl(project / "s-7.jsonl", long_session("s-7", 2))
    write_jsonl(project / "s-7" / "subagents" / "agent-a3f9c1e.jsonl", long_session("s-7", 2, agent="a3f9c1e"))
    write_jsonl(project / "s-7" / "subagents" / "agent-b77d2e0.jsonl", long_session("s-7", 1, agent="b77d2e0"))
    report = memory.import_from("claude-code", str(tmp_path / "projects"))
    assert report.skipped == []
    assert report.created == [
        "sessions/2025/03/10/claude-code-s-7.md",
        "sessions/2025/03/10/claude-code-s-7-agent-a3f9c1e.md",
        "sessions/2025/03/10/claude-code-s-7-agent-b77d2e0.md",
    ]
    sub = (memory.root / report.created[1]).read_text()
    assert "conversation: s-7-agent-a3f9c1e\nparent_session: claude-code-s-7\n" in sub
    assert body(sub).startswith("# Subagent of Claude Code session claude-code-s-7: Step 0: look at module_0.py")
    assert "Step 1" not in body((memory.root / report.created[2]).read_text())
    assert parent.exists() and memory.import_from("claude-code", str(tmp_path / "projects")).unchanged == 3


def test_a_subagents_transcript_without_its_parent_is_not_taken_for_the_session(memory, tmp_path):
    folder = tmp_path / "s-8" / "subagents"
    write_jsonl(folder / "agent-c0ffee1.jsonl", long_session("s-8", 1, agent="c0ffee1"))
    report = memory.import_from("claude-code", str(tmp_path / "s-8"))
    assert report.created == ["sessions/2025/03/10/claude-code-s-8-agent-c0ffee1.md"]
    assert "parent_session: claude-code-s-8\n" in (memory.root / report.created[0]).read_text()
    assert not list((memory.root / "sessions").rglob("claude-code-s-8.md"))


def test_the_hook_saves_a_sessions_subagents_and_import_then_adds_nothing(memory, tmp_path):
    project = tmp_path / "projects" / "-home-ada-atlas"
    transcript = write_jsonl(project / "s-6.jsonl", long_session("s-6", 2))
    write_jsonl(project / "s-6" / "subagents" / "agent-d00d1e5.jsonl", long_session("s-6", 2, agent="d00d1e5"))
    outcome = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-6", str(transcript), None))
    assert (outcome.note, outcome.saved_lines, outcome.subagent_lines, outcome.finished) == (
        "claude-code-s-6",
        10,
        10,
        True,
    )
    before = files(memory)
    report = memory.import_from("claude-code", str(tmp_path / "projects"))
    assert (report.created_count, report.extended_count, report.unchanged, report.skipped) == (0, 0, 2, [])
    assert files(memory) == before


def test_a_transcript_line_that_is_not_json_is_named_and_nothing_is_written(memory, tmp_path):
    good = write_jsonl(tmp_path / "projects" / "a" / "s-1.jsonl", transcript_records("s-1", TURNS))
    bad = tmp_path / "projects" / "b" / "s-2.jsonl"
    bad.parent.mkdir()
    bad.write_text(good.read_text() + '{"type": "user", "message": \n', encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        memory.import_from("claude-code", str(tmp_path / "projects"))
    assert str(caught.value) == (f"{bad} line 6: not a JSON record of a Claude Code transcript; nothing was imported")
    assert not (memory.root / "sessions").exists() or not list((memory.root / "sessions").rglob("*.md"))


def test_a_transcript_line_nested_past_what_json_reads_is_named_and_the_hook_saves_the_rest(memory, tmp_path):
    """json.loads raised RecursionError out of `records`: the import named no line, and the hook saved nothing of
    the session, at every event."""
    deep = {"type": "user", "sessionId": "s-1", "x": "DEEP"}
    lines = [json.dumps(r) for r in transcript_records("s-1", TURNS)]
    lines.insert(2, json.dumps(deep).replace('"DEEP"', "[" * 100_000 + "]" * 100_000))
    transcript = tmp_path / "s-1.jsonl"
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        memory.import_from("claude-code", str(transcript))
    assert (
        str(caught.value) == f"{transcript} line 3: not a JSON record of a Claude Code transcript; nothing was imported"
    )
    saved = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-1", str(transcript), None))
    assert saved.note == "claude-code-s-1" and saved.problems == ["1 transcript lines are not JSON; skipped"]


LONE = ["\ud83d", "\udfff", "a\ud800b", "\udc00\ud800"]  # a JavaScript string cut inside an emoji, and worse


def test_a_lone_surrogate_or_a_nul_in_a_conversation_is_saved_as_a_replacement_character(memory, tmp_path):
    """JSON may escape a lone surrogate, which UTF-8 cannot hold: writing the note raised UnicodeEncodeError, so the
    hook never saved such a session and import stopped part-way (a conversation before it written), naming no line.
    A NUL (`\\u0000`, a tool's binary output) was written into the note, which was then no text to grep."""
    turns = [
        ("user", f"Globex is the employer {LONE[0]}"),
        ("assistant", [{"type": "text", "text": f"noted{LONE[1]}\x00"}]),
    ]
    transcript = write_jsonl(tmp_path / "s-7.jsonl", transcript_records("s-7", turns))
    saved = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-7", str(transcript), None))
    assert (saved.note, saved.problems) == ("claude-code-s-7", [])
    note = next((memory.root / "sessions").rglob("claude-code-s-7.md")).read_text(encoding="utf-8")
    assert "user: Globex is the employer \ufffd\nassistant: noted\ufffd\ufffd\n" in note
    assert memory.import_from("claude-code", str(transcript)).unchanged == 1  # import reads it as the hook did
    good, bad = copy.deepcopy(CLAUDE[0]), copy.deepcopy(CLAUDE[0])
    bad["uuid"], bad["name"] = "0b9e6c1d-cccc", f"Atlas{LONE[2]}"
    bad["chat_messages"][0]["text"] = bad["chat_messages"][0]["content"][0]["text"] = f"launch {LONE[3]}\x00"
    report = memory.import_from("claude", str(claude_export(tmp_path / "claude", [good, bad])))
    assert len(report.created) == 2
    text = (memory.root / report.created[1]).read_text(encoding="utf-8")
    assert "title: Atlasa\ufffdb\n" in text and "user: launch \ufffd\ufffd\ufffd\n" in text  # a NUL too


NOT_TEXT = st.sampled_from(["\x00", "\ud800", "\ud83d", "\udbff", "\udc00", "\ude00", "\udfff"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.one_of(st.characters(), NOT_TEXT)), min_size=1, max_size=4))
def test_every_string_a_transcript_line_gives_is_one_utf8_holds(texts):
    """Whatever text JSON escapes in a record, `records` gives strings that UTF-8 can hold and that hold no NUL: what
    JSON reads (an escaped pair is one character), each lone surrogate and NUL U+FFFD."""
    record = {"type": "user", "message": {"content": texts}, texts[0]: texts}
    ((_, got),) = list(cc.records([json.dumps(record).encode("ascii")]))
    for text, kept in zip(texts, got["message"]["content"], strict=True):
        assert "\x00" not in kept.encode("utf-8").decode("utf-8")
        read = json.loads(json.dumps(text))
        assert kept == "".join("\ufffd" if "\ud800" <= c <= "\udfff" or c == "\x00" else c for c in read)


# -- markdown -------------------------------------------------------------------------------------------------


def vault(tmp_path: Path) -> Path:
    root = tmp_path / "Vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / "People").mkdir()
    (root / "People" / "Adam Smith.md").write_text(
        "---\ntags: [person]\naliases: [Adam]\n---\n# Adam Smith\n\nWorks with [[Atlas]] at Globex.\n"
    )
    (root / "Atlas.md").write_text("# Atlas\n\nLaunch on April 2. See [[People/Adam Smith|Adam]].\n")
    (root / "con.md").write_text("A name Windows cannot hold.\n")
    (root / "Keys.md").write_text(f"the token is {TOKEN}\n")
    (root / "diagram.png").write_bytes(b"\x89PNG\r\n")
    return root


def test_a_vault_comes_in_under_one_folder_with_its_paths_links_and_front_matter(memory, tmp_path):
    source = vault(tmp_path)
    report = memory.import_from("markdown", str(source))
    assert report.created == ["topics/Vault/Atlas.md", "topics/Vault/People/Adam Smith.md"]
    assert report.other_files == 1 and report.unchanged == 0
    assert [what for what, _ in report.skipped] == ["Vault/Keys.md", "Vault/con.md"]
    assert "GitHub token" in report.skipped[0][1] and "device name" in report.skipped[1][1]
    adam = memory.root / "topics/Vault/People/Adam Smith.md"
    assert adam.read_bytes() == (source / "People" / "Adam Smith.md").read_bytes()  # byte for byte
    assert (memory.root / "topics/Vault/Atlas.md").read_text() == (
        "---\ntitle: Atlas\n---\n# Atlas\n\nLaunch on April 2. See [[People/Adam Smith|Adam]].\n"
    )
    assert not (memory.root / "topics/Vault/.obsidian").exists()
    again = memory.import_from("markdown", str(source))
    assert (again.created_count, again.unchanged, again.skipped_count) == (0, 2, 2)
    adam.write_text(adam.read_text() + "Edited in the memory.\n")
    edited = memory.import_from("markdown", str(source), into="topics/Vault")
    assert "topics/Vault/People/Adam Smith.md is already in the memory, with other text" in edited.to_text()
    assert adam.read_text().endswith("Edited in the memory.\n")


def test_a_note_whose_front_matter_does_not_parse_is_named_and_nothing_is_written(memory, tmp_path):
    source = vault(tmp_path)
    (source / "Broken.md").write_text("---\ntitle: [unclosed\n---\ntext\n")
    before = files(memory)
    with pytest.raises(InvalidArgument) as caught:
        memory.import_from("markdown", str(source))
    assert str(caught.value).startswith(f"{source / 'Broken.md'} line ") and "not valid YAML" in str(caught.value)
    assert files(memory) == before


def test_an_agent_with_a_scope_or_read_only_cannot_import(memory, tmp_path):
    export = chatgpt_export(tmp_path, CHATGPT)
    with pytest.raises(InvalidArgument, match="import works on the whole memory"):
        Memory(memory.root, scope=["topics/"]).import_from("chatgpt", str(export))
    with pytest.raises(ReadOnly):
        Memory(memory.root, agent="reviewer").import_from("chatgpt", str(export))  # read-only in the template
    assert not (memory.root / "sessions").exists()


def test_a_fifo_is_never_opened_and_an_unzipped_export_folder_is_read(memory, tmp_path):
    source = vault(tmp_path)
    os.mkfifo(source / "pipe.md")
    os.mkfifo(tmp_path / "s-1.jsonl")
    report = memory.import_from("markdown", str(source))  # would hang on opening the FIFO
    assert ("Vault/pipe.md", "not a regular file (a FIFO or a device is never opened)") in report.skipped
    with pytest.raises(InvalidArgument, match="neither a transcript"):
        memory.import_from("claude-code", str(tmp_path / "s-1.jsonl"))
    export = chatgpt_export(tmp_path / "chatgpt-export-2025-01-02", CHATGPT)
    assert memory.import_from("chatgpt", str(export.parent)).created_count == 2


def test_an_input_inside_the_memory_is_refused(memory):
    with pytest.raises(InvalidArgument, match="inside the memory"):
        memory.import_from("markdown", str(memory.root / "profile"))


# -- what the rest of fsmem does with imported episodes ----------------------------------------------------------


def test_consolidation_files_no_imported_line_and_search_finds_the_episode(memory, tmp_path):
    memory.import_from("chatgpt", str(chatgpt_export(tmp_path, CHATGPT)))
    memory.import_from("claude", str(claude_export(tmp_path / "c", CLAUDE)))
    memory.note("- employer: Globex", subject="people/Adam Smith")
    memory.consolidate()
    documents = {rel: data.decode() for rel, data in files(memory).items() if not rel.startswith("sessions/")}
    assert not (memory.root / "topics/inbox.md").exists()
    for phrase in ("Stripe", "pandas", "Alfama", "calendar", "Atlas launch"):
        assert not any(phrase in text for rel, text in documents.items() if rel != "INDEX.md"), phrase
    found = memory.search("hotel in Alfama")
    assert [hit.path for hit in found.hits][:1] == ["sessions/2025/01/01/chatgpt-6781a0c2-2222.md"]
    assert "user: Book a hotel in Alfama." in found.hits[0].text
    assert [hit.path for hit in memory.search("Globex employer").hits][:1] == ["entities/people/adam-smith.md"]
    assert "sessions/" not in " ".join(h.path for h in memory.search("Globex employer").hits)  # filed: not twice


def test_a_long_conversation_is_kept_in_blocks_a_search_row_each(memory, tmp_path):
    turns = [("user" if n % 2 else "assistant", f"message number {n} about topic{n}") for n in range(19)]
    report = memory.import_from("chatgpt", str(chatgpt_export(tmp_path, [chatgpt_conversation("long", "Long", turns)])))
    text = (memory.root / report.created[0]).read_text()
    assert text.count("```text\n") == 3 and text.count("\n```\n") == 3  # 8 + 8 + 3 lines
    memory.consolidate()
    hits = memory.search("topic17").hits
    assert any("user: message number 17 about topic17" in hit.text for hit in hits)
    assert not any("topic3" in hit.text for hit in hits)  # the first block is not part of the answer


def test_import_is_offered_to_no_agent_and_no_mcp_client(memory):
    assert "import_from" not in [t.name for t in tools.offered(memory)]
    assert "import_from" not in [t["name"] for t in tools.mcp_tools(memory)]
    answer = tools.call(memory, "import_from", {"format": "markdown", "path": "/etc"})
    assert answer.is_error and "import_from" in answer.text


# -- the streaming reader -----------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(JSON, max_size=5), st.sampled_from([1, 2, 5, 64]), st.sampled_from([None, 1]))
def test_the_streaming_reader_reads_what_json_reads_whatever_the_buffer(items, chunk, indent):
    text = json.dumps(items, indent=indent)
    assert [item.value for item in ArrayReader(io.StringIO(text), chunk=chunk)] == json.loads(text)


@pytest.mark.parametrize(
    "text, line, column",
    [('[1,\n {"a": 1,}\n]', 2, 10), ("[1 2]", 1, 4), ("[1,]", 1, 4), ('["abc', 1, 2), ("[\n1,\n\n  x]", 4, 3)],
)
def test_the_streaming_reader_names_a_fault_where_json_does(text, line, column):
    for chunk in (1, 3, 100):
        with pytest.raises(JSONFault) as caught:
            list(ArrayReader(io.StringIO(text), chunk=chunk))
        assert (caught.value.line, caught.value.column) == (line, column)
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(text)
    assert (plain.value.lineno, plain.value.colno) == (line, column)


def test_an_item_larger_than_the_limit_is_refused_not_held():
    text = '[{"a": "' + "x" * 5000 + '"}]'
    with pytest.raises(JSONFault, match="an item larger than"):
        list(ArrayReader(io.StringIO(text), chunk=64, item_limit=1000))


def test_the_cli_report_is_json_with_counts_and_bounded_lists(memory, tmp_path):
    export = chatgpt_export(tmp_path, CHATGPT)
    done = run("--root", str(memory.root), "import", "chatgpt", str(export), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {k: report[k] for k in ("format", "created", "extended", "unchanged", "skipped")} == {
        "format": "chatgpt",
        "created": 2,
        "extended": 0,
        "unchanged": 0,
        "skipped": 0,
    }
    assert report["left_out"] == {"created_paths": 0, "extended_paths": 0, "skipped_items": 0}


def test_a_note_imported_before_the_record_held_bytes_is_continued_by_the_hook(memory, tmp_path):
    import hashlib

    transcript = write_jsonl(tmp_path / "s-3.jsonl", transcript_records("s-3", TURNS[:2]))
    [rel] = memory.import_from("claude-code", str(transcript)).created
    note = memory.root / rel
    said = [
        "user: Why does test_sync fail?",
        "assistant: Let me run it.",
        "tool call Bash: command=pytest -q tests/test_sync.py",
    ]
    whole = hashlib.sha256("".join(line + "\n" for line in said).encode()).hexdigest()[:16]  # as import wrote it then
    text = note.read_text()
    old = text.replace(f"imported_digest: {digest(said)}\n", f"imported_digest: {whole}\n")
    old = "".join(line for line in old.splitlines(keepends=True) if not line.startswith("imported_bytes:"))
    assert old != text and "imported_bytes" not in old
    note.write_text(old)
    write_jsonl(transcript, transcript_records("s-3", TURNS))
    outcome = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-3", str(transcript), None))
    assert (outcome.saved_lines, outcome.problems) == (2, [])
    assert body(note.read_text()).count("user: Why does test_sync fail?") == 1
    assert body(note.read_text()).endswith(
        "tool result (2 lines): 1 failed E assert 2 == 3\nassistant: The clock is not pinned; pin it with FSMEM_NOW.\n```\n"
    )
    assert memory.import_from("claude-code", str(transcript)).unchanged == 1


def test_a_resumed_sessions_file_is_one_note_whoever_saves_it_first(memory, tmp_path):
    earlier, now = "0b7e11aa-1111-4c4c-8d8d-000000000001", "0b7e11aa-2222-4c4c-8d8d-000000000002"
    copied = long_session(earlier, 2)  # a resumed session's file starts with the records of the one it resumed
    transcript = write_jsonl(tmp_path / f"{now}.jsonl", copied + long_session(now, 1, first=2))
    runner.save_session(memory, cc.HookEvent("PreCompact", now, str(transcript), None))
    report = memory.import_from("claude-code", str(transcript))
    assert (report.created, report.unchanged, report.skipped) == ([], 1, [])
    assert [p.name for p in (memory.root / "sessions").rglob("*.md")] == [f"claude-code-{now}.md"]


# -- a sessions/ folder that is a symbolic link -----------------------------------------------------------


def md_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.md")) if p.is_file()}


@pytest.mark.parametrize("target", ["outside", ".git", ".fsmem", "topics"])
def test_import_and_the_hook_write_no_note_through_a_sessions_folder_that_is_a_link(memory, tmp_path, target):
    """`sessions -> elsewhere`: import wrote each conversation through the link, outside the memory, into .git/
    or .fsmem/, or among the topics, and the hook found and rewrote a note there. Both now refuse, exit 2."""
    root = memory.root
    elsewhere = {"outside": tmp_path / "outside", ".git": root / ".git", ".fsmem": root / ".fsmem"}.get(
        target, root / "topics"
    )
    transcript = write_jsonl(tmp_path / "s-9.jsonl", transcript_records("s-9", TURNS[:2]))
    assert runner.save_session(memory, cc.HookEvent("SessionEnd", "s-9", str(transcript), None)).note
    elsewhere.mkdir(exist_ok=True)
    shutil.copytree(root / "sessions", elsewhere, dirs_exist_ok=True)  # the note saved is there too
    shutil.rmtree(root / "sessions")
    (root / "sessions").symlink_to(elsewhere)
    before = md_files(elsewhere)
    with pytest.raises(InvalidArgument, match="not a folder of session notes"):
        memory.import_from("chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT)))
    write_jsonl(transcript, transcript_records("s-9", TURNS))
    saved = runner.save_session(memory, cc.HookEvent("SessionEnd", "s-9", str(transcript), None))
    assert saved.note is None and any("not a folder of session notes" in problem for problem in saved.problems)
    assert md_files(elsewhere) == before
    done = run("import", "chatgpt", str(tmp_path / "export" / "conversations.json"), cwd=root)
    assert done.returncode == 2 and "not a folder of session notes" in done.stderr and "Traceback" not in done.stderr
    assert md_files(elsewhere) == before


def test_import_writes_no_note_through_a_dated_folder_that_links_out(memory, tmp_path):
    """`sessions/2025 -> outside`: import's writes go through the memory's write walk (`fsmem.store.beneath`),
    which refuses a link out; before, they were written at the path as given, outside the memory."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (memory.root / "sessions").mkdir(exist_ok=True)
    (memory.root / "sessions" / "2025").symlink_to(outside)
    with pytest.raises(PathEscape, match="leads outside the memory root"):
        memory.import_from("chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT)))
    assert list(outside.rglob("*")) == []
