"""`fsmem hook claude-code` as Claude Code runs it: a subprocess, the event's JSON on stdin, real transcript files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from import_samples import long_session, slash_clear, write_jsonl

from fsmem import Memory
from fsmem.hooks import claude_code as cc
from fsmem.importers.transcripts import read_part

FSMEM = str(Path(sys.executable).with_name("fsmem"))

USER = {"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": "Fix the proration bug in billing"}}
ASSISTANT = {
    "type": "assistant",
    "sessionId": "s-1",
    "message": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I will run the billing tests first."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Bash",
                "input": {"command": "pytest -q tests/test_billing.py", "description": "Run billing tests"},
            },
        ],
    },
}
RESULT = {
    "type": "user",
    "sessionId": "s-1",
    "message": {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "F.\n1 failed, 1 passed", "is_error": False}
        ],
    },
}
LATER = {
    "type": "assistant",
    "sessionId": "s-1",
    "message": {"role": "assistant", "content": [{"type": "text", "text": "The proration rounds down; fixed."}]},
}
SUMMARY = [
    "user: Fix the proration bug in billing",
    "assistant: I will run the billing tests first.",
    "tool call Bash: command=pytest -q tests/test_billing.py, description=Run billing tests",
    "tool result (2 lines): F. 1 failed, 1 passed",
]


def hook(
    root: Path | None, stdin: str, *args: str, cwd: Path | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """The hook's command line run here (`cli_runner`: one that hit its time limit, which ends the process, would
    fail the test); with `process`, also as the `fsmem` script, which must print the same bytes."""
    env = without_fsmem()
    env["FSMEM_NOW"] = "2026-05-04T10:00:00Z"
    where = ["--root", str(root)] if root is not None else []
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run([*where, "hook", "claude-code", *args], input=stdin, text=True, env=env, cwd=cwd)


def event(name: str, transcript: Path | None, session: str = "s-1", **extra: str) -> str:
    data = {"session_id": session, "hook_event_name": name, "cwd": "/nowhere", **extra}
    if transcript is not None:
        data["transcript_path"] = str(transcript)
    return json.dumps(data)


def write_transcript(path: Path, *records: dict) -> Path:
    with open(path, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


def session_notes(root: Path) -> list[Path]:
    return sorted((root / "sessions").rglob("*.md")) if (root / "sessions").exists() else []


def log_lines(root: Path) -> list[dict]:
    path = root / ".fsmem" / "logs" / "hooks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def body(path: Path) -> str:
    return path.read_text().split("---\n", 2)[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Memory.init(tmp_path / "mem")
    return tmp_path / "mem"


def test_session_start_prints_the_context_as_additional_context(root):
    done = hook(root, event("SessionStart", None, source="startup"), process=True)
    assert done.returncode == 0 and done.stderr == ""
    answer = json.loads(done.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert answer["hookSpecificOutput"]["additionalContext"] == Memory(root).context().to_text()
    assert "profile/identity.md" in answer["hookSpecificOutput"]["additionalContext"]


def test_the_context_the_session_start_hook_adds_is_shown_as_text_never_obeyed(root):
    """A profile file holding terminal escapes and reordering characters: the block is `fsmem context`'s, controls
    shown as text, as the prompt hook's block is. It passed them raw (json.dumps escapes C0 only: C1's CSI and
    U+202E reached Claude Code and a terminal as they were; found by attack54a)."""
    (root / "profile" / "identity.md").write_text("# Identity\n\n- We work for ACME \x1b]0;owned\x07 \x9b2J \u202eok\n")
    done = hook(root, event("SessionStart", None, source="startup"))
    added = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "We work for ACME ^[]0;owned^G <U+009B>2J <U+202E>ok" in added
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", done.stdout + added)
    assert added == cli_runner.run(["--root", str(root), "context"], text=True, env=without_fsmem()).stdout.rstrip("\n")


@pytest.mark.parametrize("name", ["SessionEnd", "PreCompact"])
def test_an_ending_event_saves_the_session_as_one_note_of_summary_lines(root, tmp_path, name):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, ASSISTANT, RESULT)
    done = hook(root, event(name, transcript))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    [note] = session_notes(root)
    assert note.relative_to(root).as_posix() == "sessions/2026/05/04/claude-code-s-1.md"
    assert (
        body(note)
        == "\n".join(["# Claude Code session: Fix the proration bug in billing", "", "```text", *SUMMARY, "```"]) + "\n"
    )
    assert "type: episodic" in note.read_text()
    assert log_lines(root)[-1] == {
        "time": "2026-05-04T10:00:00+00:00",
        "hook": "claude-code",
        "event": name,
        "session_id": "s-1",
        "note": "claude-code-s-1",
        "lines": 4,
    }
    assert "imported_lines: 4\n" in note.read_text()  # the record of what the memory holds is the note's own
    assert cc.Pending(root).entries() == []  # nothing is left for the next command


def test_a_second_event_adds_nothing_twice_and_a_longer_transcript_only_its_new_part(root, tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, ASSISTANT, RESULT)
    assert hook(root, event("PreCompact", transcript, trigger="auto")).returncode == 0
    [note] = session_notes(root)
    first = note.read_bytes()
    assert hook(root, event("SessionEnd", transcript, reason="exit")).returncode == 0
    assert note.read_bytes() == first
    write_transcript(transcript, LATER)
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    assert session_notes(root) == [note]
    text = body(note)
    assert text.count("user: Fix the proration bug in billing") == 1
    assert text.endswith(
        "# Claude Code session, continued\n\n```text\nassistant: The proration rounds down; fixed.\n```\n"
    )


def test_a_long_event_is_saved_in_blocks_of_eight_lines_each_a_row_of_search(root, tmp_path):
    said = [f"user: question {n} about topic{n}" for n in range(1, 21)]
    records = [{"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": s[6:]}} for s in said]
    transcript = write_transcript(tmp_path / "s-1.jsonl", *records)
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    [note] = session_notes(root)
    blocks = [said[0:8], said[8:16], said[16:20]]
    assert (
        body(note)
        == "\n".join(
            ["# Claude Code session: question 1 about topic1"] + [x for b in blocks for x in ["", "```text", *b, "```"]]
        )
        + "\n"
    )
    best = Memory(root).search("topic17").hits[0]  # the block that says it, not the whole session
    assert best.text == "\n".join(["```text", *blocks[2], "```"])


def test_consolidation_files_nothing_of_a_saved_session(root, tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, ASSISTANT, RESULT)
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    Memory(root).consolidate()
    assert not (root / "topics" / "inbox.md").exists()  # not even the note's heading, as an observation
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".fsmem" not in p.parts) == [
        "INDEX.md",
        "README.md",
        "profile/identity.md",
        "sessions/2026/05/04/claude-code-s-1.md",
    ]


def test_a_line_still_being_written_waits_for_the_next_event(root, tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER)
    with open(transcript, "a") as handle:
        handle.write(json.dumps(LATER)[:30])
    assert hook(root, event("PreCompact", transcript)).returncode == 0
    assert "proration rounds down" not in body(session_notes(root)[0])
    transcript.write_text(json.dumps(USER) + "\n" + json.dumps(LATER) + "\n")
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    text = body(session_notes(root)[0])
    assert text.count("user: Fix the proration") == 1 and "assistant: The proration rounds down; fixed." in text


def test_a_broken_transcript_saves_what_it_can_exits_0_and_logs(root, tmp_path):
    transcript = tmp_path / "s-1.jsonl"
    transcript.write_text(json.dumps(USER) + "\n{not json\n" + json.dumps([1, 2]) + "\n")
    done = hook(root, event("PreCompact", transcript))
    assert (done.returncode, done.stdout) == (0, "")
    assert "user: Fix the proration bug in billing" in body(session_notes(root)[0])
    assert log_lines(root)[-1]["error"] == "2 transcript lines are not JSON; skipped"  # nor is [1, 2] a record


@pytest.mark.parametrize(
    ("stdin", "error"),
    [
        ("not json", "the hook's input is not JSON (Expecting value, line 1)"),
        ("[1]", "the hook's input is not a JSON object"),
        ('{"session_id": "x"}', "the hook's input has no hook_event_name"),
        ("\udcff".encode("utf-8", "surrogateescape").decode("latin-1"), None),
    ],
)
def test_bad_stdin_exits_0_and_logs(root, stdin, error):
    done = hook(root, stdin)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    logged = log_lines(root)[-1]
    assert logged["hook"] == "claude-code" and logged["event"] is None
    if error is not None:
        assert logged["error"] == error


def test_a_missing_transcript_exits_0_and_logs(root, tmp_path):
    done = hook(root, event("SessionEnd", tmp_path / "gone.jsonl"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert log_lines(root)[-1]["error"] == f"the transcript {str(tmp_path / 'gone.jsonl')!r} does not exist"
    assert session_notes(root) == []


def test_a_folder_as_transcript_exits_0_and_logs(root, tmp_path):
    done = hook(root, event("SessionEnd", tmp_path))
    assert done.returncode == 0
    assert (
        log_lines(root)[-1]["error"] == f"the transcript {str(tmp_path)!r} is a folder, not a regular file; give a file"
    )


def test_a_missing_memory_exits_0_with_one_line_on_stderr(tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER)
    done = hook(tmp_path / "nomem", event("SessionEnd", transcript))
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("fsmem hook: not an fsmem memory:") and done.stderr.count("\n") == 1
    assert not (tmp_path / "nomem").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions, not root")
def test_an_unwritable_memory_exits_0_and_says_why(root, tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER)
    hook(root, event("SessionStart", None))  # makes .fsmem/logs before the memory turns read-only
    (root / "sessions").mkdir(exist_ok=True)
    os.chmod(root / "sessions", 0o555)
    try:
        done = hook(root, event("SessionEnd", transcript))
    finally:
        os.chmod(root / "sessions", 0o755)
    assert (done.returncode, done.stdout) == (0, "")
    assert "permission denied" in log_lines(root)[-1]["error"].lower()
    assert session_notes(root) == []


def test_a_memory_that_cannot_take_the_note_exits_0_and_logs(root, tmp_path):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER)
    (root / "sessions").write_text("a file where the folder should be\n")
    done = hook(root, event("SessionEnd", transcript))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert log_lines(root)[-1]["event"] == "SessionEnd" and log_lines(root)[-1]["error"]
    assert (root / "sessions").read_text() == "a file where the folder should be\n"


def test_a_refused_secret_skips_its_line_and_keeps_the_rest(root, tmp_path):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    leak = {"type": "user", "message": {"role": "user", "content": f"the token is {token}"}}
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, leak, LATER)
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    text = body(session_notes(root)[0])
    assert token not in text and "the token is" not in text
    assert "user: Fix the proration bug in billing" in text and "assistant: The proration rounds down" in text
    error = log_lines(root)[-1]["error"]
    assert "transcript line 2 looks like a GitHub token; that line is left out and the rest saved" in error
    assert "nothing was written" not in error and token not in error


def test_an_unknown_event_is_ignored_and_logged(root):
    done = hook(root, event("SubagentStop", None))
    assert (done.returncode, done.stdout) == (0, "")
    assert log_lines(root)[-1]["error"].startswith("not an event fsmem handles")


def test_the_time_limit_stops_the_hook_with_exit_0(root, tmp_path):
    fifo = tmp_path / "stdin.fifo"
    os.mkfifo(fifo)
    env = without_fsmem()
    with open(os.open(fifo, os.O_RDWR), "w") as held_open:  # a writer that never closes: stdin never ends
        done = subprocess.run(
            [FSMEM, "--root", str(root), "hook", "claude-code", "--timeout", "1"],
            stdin=held_open,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
    assert (done.returncode, done.stdout) == (0, "")
    assert log_lines(root)[-1]["error"] == "stopped after the 1 s time limit"


def test_print_config_is_the_settings_hooks_block(root):
    done = hook(root, "", "--print-config")
    assert done.returncode == 0
    block = json.loads(done.stdout)
    assert sorted(block["hooks"]) == ["PreCompact", "SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    for name, groups in block["hooks"].items():
        [group] = groups
        [entry] = group["hooks"]
        limit = 4 if name == "UserPromptSubmit" else 10  # the person waits for the prompt hook
        assert entry["type"] == "command" and entry["timeout"] == limit + 5
        assert shlex.split(entry["command"]) == [
            os.path.abspath(FSMEM),
            "--root",
            str(root),
            "hook",
            "claude-code",
            "--timeout",
            str(limit),
        ]
    without = json.loads(hook(root, "", "--print-config", "--no-ask-to-save").stdout)
    assert sorted(without["hooks"]) == ["PreCompact", "SessionEnd", "SessionStart", "UserPromptSubmit"]
    registered = subprocess.run(
        shlex.split(block["hooks"]["SessionStart"][0]["hooks"][0]["command"]),
        input=event("SessionStart", None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(registered.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def test_print_config_without_a_memory_is_an_error(tmp_path):
    done = hook(tmp_path / "nomem", "", "--print-config")
    assert done.returncode == 2 and "not an fsmem memory" in done.stderr


def test_summarise_never_gives_raw_json_and_bounds_each_line():
    big = {"type": "tool_use", "name": "Write", "input": {"file_path": "a.py", "content": "x = 1\n" * 5000}}
    record = {"type": "assistant", "message": {"role": "assistant", "content": [big, {"type": "thinking"}]}}
    [line] = cc.summarise(record)
    assert line.startswith("tool call Write: file_path=a.py, content=x = 1 x = 1") and len(line) <= 230
    assert cc.summarise({"type": "summary", "summary": "x"}) == []
    assert cc.summarise({"type": "user", "isMeta": True, "message": {"content": "caveat"}}) == []


def test_session_names_are_valid_note_names():
    assert cc.session_name("0b7e-11aa") == "claude-code-0b7e-11aa"
    odd = cc.session_name("../../etc/passwd")
    assert odd.startswith("claude-code-etc-passwd-") and "/" not in odd


def test_a_folder_without_fsmem_yaml_gets_nothing_written(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER)
    for name in ("SessionStart", "SessionEnd", "PreCompact"):
        done = hook(folder, event(name, transcript))
        assert (done.returncode, done.stdout) == (0, "")
        assert (
            done.stderr
            == f"fsmem hook: not an fsmem memory: {folder} holds no fsmem.yaml (create one with: fsmem init {folder})\n"
        )
    assert list(folder.iterdir()) == []


def test_a_last_line_without_its_newline_is_taken_only_when_whole(tmp_path):
    whole = json.dumps(USER) + "\n"
    path = tmp_path / "t.jsonl"
    path.write_text(whole + json.dumps(LATER)[:30])
    part = read_part(path, 0)
    assert (part.lines, part.end, part.at_end) == ([SUMMARY[0]], len(whole), True)
    path.write_text(whole + json.dumps(LATER))  # written whole, its newline not yet
    part = read_part(path, 0)
    assert (
        part.lines == [SUMMARY[0], "assistant: The proration rounds down; fixed."] and part.end == path.stat().st_size
    )


# -- every line once, whoever saves it (issue 32, finding 1) -------------------------------------------------------


def fenced_lines(note: Path) -> list[str]:
    """The transcript lines a session note holds: those inside its ```text blocks, in order."""
    lines, inside = [], False
    for line in body(note).splitlines():
        if line in ("```text", "```"):
            inside = line == "```text"
        elif inside:
            lines.append(line)
    return lines


def rendered(records: list[dict]) -> list[str]:
    return [line for record in records for line in cc.summarise(record)]


def fsmem(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`)."""
    env = without_fsmem()
    env["FSMEM_NOW"] = "2026-05-04T10:00:00Z"
    return cli_runner.run(["--root", str(root), *args], text=True, env=env)


def test_a_long_session_is_saved_whole_by_one_event_then_import_adds_nothing(root, tmp_path):
    records = long_session("s-long", 196)  # 980 lines, as long as the real session of the issue
    transcript = write_jsonl(tmp_path / "projects" / "-home-ada-atlas" / "s-long.jsonl", records)
    assert hook(root, event("SessionEnd", transcript, session="s-long")).returncode == 0
    [note] = session_notes(root)
    assert "more lines of this part left out" not in note.read_text()
    assert fenced_lines(note) == rendered(records) and len(rendered(records)) == 980
    assert fenced_lines(note)[-1] == "assistant: Summary: parse_195 returns its value unchanged; all 196 steps done."
    assert note.relative_to(root).as_posix() == "sessions/2025/03/10/claude-code-s-long.md"  # its own start
    before = note.read_bytes()
    done = fsmem(root, "import", "claude-code", str(tmp_path / "projects"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["created"], report["extended"], report["unchanged"], report["skipped"]) == (0, 0, 1, 0)
    assert note.read_bytes() == before


def test_an_imported_session_is_continued_by_the_hook_each_line_once(root, tmp_path):
    first = long_session("s-2", 40)
    transcript = write_jsonl(tmp_path / "s-2.jsonl", first)
    assert fsmem(root, "import", "claude-code", str(transcript)).returncode == 0
    later = long_session("s-2", 200, first=40, parent_uuid=first[-1]["uuid"])
    with transcript.open("a") as out:
        out.write("".join(json.dumps(r) + "\n" for r in later))
    assert hook(root, event("PreCompact", transcript, session="s-2")).returncode == 0
    [note] = session_notes(root)
    assert fenced_lines(note) == rendered(first + later)
    again = fsmem(root, "import", "claude-code", str(transcript), "--json")
    assert json.loads(again.stdout)["unchanged"] == 1
    assert fenced_lines(note) == rendered(first + later)


@pytest.mark.parametrize("finisher", ["SessionEnd", "import", "consolidate"])
def test_an_event_cut_short_by_its_time_budget_is_finished_by_the_next_command(root, tmp_path, finisher):
    records = long_session("s-3", 400, file_chars=6_000)  # about 3 MB: three parts of a megabyte
    transcript = write_jsonl(tmp_path / "s-3.jsonl", records)
    assert transcript.stat().st_size > 2 * (1 << 20)
    done = hook(root, event("PreCompact", transcript, session="s-3"), "--budget", "0")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    [note] = session_notes(root)
    saved = fenced_lines(note)
    assert 0 < len(saved) < len(rendered(records)) and saved == rendered(records)[: len(saved)]
    assert log_lines(root)[-1]["unfinished"].startswith("the time budget ran out")
    assert [entry[0] for entry in cc.Pending(root).entries()] == [str(transcript)]
    if finisher == "SessionEnd":
        assert hook(root, event("SessionEnd", transcript, session="s-3")).returncode == 0
    elif finisher == "import":
        assert fsmem(root, "import", "claude-code", str(transcript)).returncode == 0
    else:
        assert fsmem(root, "consolidate").returncode in (0, 1)
    assert fenced_lines(note) == rendered(records)
    assert cc.Pending(root).entries() == []


def test_the_hook_and_import_title_a_session_alike_and_never_by_a_slash_command(tmp_path):
    records = slash_clear("s-4") + long_session("s-4", 3)
    transcript = write_jsonl(tmp_path / "s-4.jsonl", records)
    titles = []
    for how in ("hook", "import"):
        Memory.init(tmp_path / how)
        if how == "hook":
            assert hook(tmp_path / how, event("SessionEnd", transcript, session="s-4")).returncode == 0
        else:
            assert fsmem(tmp_path / how, "import", "claude-code", str(transcript)).returncode == 0
        [note] = session_notes(tmp_path / how)
        titles.append(note.read_text())
    hooked, imported = titles
    assert hooked == imported
    assert "title: 'Step 0: look at module_0.py and say what its parse_0 function returns'" in hooked
    assert "# Claude Code session: Step 0:" in hooked and "<command-name>" not in hooked.split("```")[0]


def test_a_session_with_a_refused_line_saved_by_the_hook_is_left_unchanged_by_import(root, tmp_path):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    records = long_session("s-5", 3)
    records[4]["message"]["content"] = f"the token is {token}"
    transcript = write_jsonl(tmp_path / "s-5.jsonl", records)
    assert hook(root, event("SessionEnd", transcript, session="s-5")).returncode == 0
    [note] = session_notes(root)
    assert token not in note.read_text() and len(fenced_lines(note)) == len(rendered(records)) - 1
    report = json.loads(fsmem(root, "import", "claude-code", str(transcript), "--json").stdout)
    assert (report["unchanged"], report["skipped"]) == (1, 0)


def test_a_note_the_hook_saved_before_it_kept_a_record_is_continued_from_its_old_offset(root, tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-05-04T09:00:00Z")
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, ASSISTANT, RESULT)
    old = "\n".join(["# Claude Code session (transcript summary)", "", "```text", *SUMMARY, "```"])
    Memory(root).note(old, session="claude-code-s-1")  # as the hook wrote it, its offset kept beside it
    digest = hashlib.sha256(b"s-1").hexdigest()[:32]
    state = {"session_id": "s-1", "transcript": str(transcript), "offset": transcript.stat().st_size}
    (root / ".fsmem" / "hooks" / "claude-code").mkdir(parents=True)
    (root / ".fsmem" / "hooks" / "claude-code" / f"{digest}.json").write_text(json.dumps(state))
    write_transcript(transcript, LATER)
    assert hook(root, event("SessionEnd", transcript)).returncode == 0
    [note] = session_notes(root)
    assert fenced_lines(note) == [*SUMMARY, "assistant: The proration rounds down; fixed."]
    assert "imported_lines: 5\n" in note.read_text() and "conversation: s-1\n" in note.read_text()
    assert json.loads(fsmem(root, "import", "claude-code", str(transcript), "--json").stdout)["unchanged"] == 1
