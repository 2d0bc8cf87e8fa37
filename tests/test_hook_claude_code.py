"""`fsmem hook claude-code` as Claude Code runs it: a subprocess, the event's JSON on stdin, real transcript files."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.hooks import claude_code as cc

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


def hook(root: Path | None, stdin: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    env["FSMEM_NOW"] = "2026-05-04T10:00:00Z"
    where = ["--root", str(root)] if root is not None else []
    return subprocess.run(
        [FSMEM, *where, "hook", "claude-code", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


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
    done = hook(root, event("SessionStart", None, source="startup"))
    assert done.returncode == 0 and done.stderr == ""
    answer = json.loads(done.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert answer["hookSpecificOutput"]["additionalContext"] == Memory(root).context().to_text()
    assert "profile/identity.md" in answer["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("name", ["SessionEnd", "PreCompact"])
def test_an_ending_event_saves_the_session_as_one_note_of_summary_lines(root, tmp_path, name):
    transcript = write_transcript(tmp_path / "s-1.jsonl", USER, ASSISTANT, RESULT)
    done = hook(root, event(name, transcript))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    [note] = session_notes(root)
    assert note.relative_to(root).as_posix() == "sessions/2026/05/04/claude-code-s-1.md"
    assert (
        body(note) == "\n".join(["# Claude Code session (transcript summary)", "", "```text", *SUMMARY, "```"]) + "\n"
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
    assert list((root / ".fsmem" / "hooks" / "claude-code").iterdir())  # the offset is host-local state


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
            ["# Claude Code session (transcript summary)"] + [x for b in blocks for x in ["", "```text", *b, "```"]]
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
    assert text.count("Fix the proration") == 1 and "assistant: The proration rounds down; fixed." in text


def test_a_broken_transcript_saves_what_it_can_exits_0_and_logs(root, tmp_path):
    transcript = tmp_path / "s-1.jsonl"
    transcript.write_text(json.dumps(USER) + "\n{not json\n" + json.dumps([1, 2]) + "\n")
    done = hook(root, event("PreCompact", transcript))
    assert (done.returncode, done.stdout) == (0, "")
    assert "user: Fix the proration bug in billing" in body(session_notes(root)[0])
    assert log_lines(root)[-1]["error"] == "1 transcript lines are not JSON; skipped"


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
    assert "transcript line 2" in error and "GitHub token" in error and token not in error


def test_an_unknown_event_is_ignored_and_logged(root):
    done = hook(root, event("Stop", None))
    assert (done.returncode, done.stdout) == (0, "")
    assert log_lines(root)[-1]["error"].startswith("not an event fsmem handles")


def test_the_time_limit_stops_the_hook_with_exit_0(root, tmp_path):
    fifo = tmp_path / "stdin.fifo"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
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
    assert sorted(block["hooks"]) == ["PreCompact", "SessionEnd", "SessionStart"]
    for groups in block["hooks"].values():
        [group] = groups
        [entry] = group["hooks"]
        assert entry["type"] == "command" and entry["timeout"] == 15
        assert shlex.split(entry["command"]) == [
            os.path.abspath(FSMEM),
            "--root",
            str(root),
            "hook",
            "claude-code",
            "--timeout",
            "10",
        ]
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


def test_a_line_longer_than_a_chunk_is_skipped_not_waited_for():
    assert cc.new_part(b"x" * 64, 100, chunk=64) == cc.NewPart([], 164, 1)
    assert cc.new_part(b"x" * 63, 100, chunk=64) == cc.NewPart([], 100, 0)
    whole = (json.dumps(USER) + "\n").encode()
    assert cc.new_part(whole + b"{partial", 0) == cc.NewPart([SUMMARY[0]], len(whole), 0)
