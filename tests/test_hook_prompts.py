"""The Stop and UserPromptSubmit hooks as Claude Code runs them: `fsmem hook claude-code` as a subprocess, the
event's JSON on stdin, real transcripts and memories; and the settings `--write` produces, checked by `claude doctor`.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-05-04T10:00:00Z"
# what Claude Code 2.1 accepts from a command hook (https://code.claude.com/docs/en/hooks, "JSON output")
TOP_LEVEL = {"continue", "suppressOutput", "stopReason", "decision", "reason", "systemMessage", "hookSpecificOutput"}


def hook(root: Path, stdin: str | bytes, *args: str, process: bool = False) -> subprocess.CompletedProcess[bytes]:
    """The hook's command line run here (`cli_runner`: one that hit its time limit, which ends the process,
    would fail the test); with `process`, also as the `fsmem` script, which must print the same bytes."""
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    data = stdin.encode("utf-8", "surrogatepass") if isinstance(stdin, str) else stdin
    argv = ["--root", str(root), "hook", "claude-code", *args]
    if process:
        return cli_runner.same_as_a_process(argv, input=data, env=env)
    return cli_runner.run(argv, input=data, env=env)


def stop(transcript: Path, *, active: bool = False, session: str = "s-1") -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": "/nowhere",
            "hook_event_name": "Stop",
            "stop_hook_active": active,
        }
    )


def prompt(text: str) -> str:
    return json.dumps(
        {"session_id": "s-1", "cwd": "/nowhere", "hook_event_name": "UserPromptSubmit", "prompt": text},
        ensure_ascii=True,
    )


def said(role: str, text: str) -> dict:
    return {"type": role, "sessionId": "s-1", "message": {"role": role, "content": [{"type": "text", "text": text}]}}


def call(tool_id: str, name: str, tool_input: dict) -> dict:
    content = [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]
    return {"type": "assistant", "sessionId": "s-1", "message": {"role": "assistant", "content": content}}


def result(tool_id: str, text: str, *, error: bool = False) -> dict:
    content = [{"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}]
    return {"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": content}}


def work(n: int = 3) -> list[dict]:
    """`n` rounds of a working session: four summary lines each."""
    records = []
    for i in range(n):
        records += [
            said("user", f"Step {i}: the billing export for Globex fails"),
            call(f"toolu_w{i}", "Bash", {"command": f"pytest -q tests/test_export_{i}.py"}),
            result(f"toolu_w{i}", "1 failed"),
            said("assistant", f"Step {i} fixed: Adam Smith's invoices round down."),
        ]
    return records


def append(path: Path, *records: dict) -> Path:
    with open(path, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    return path


def decision(done: subprocess.CompletedProcess[bytes]) -> dict | None:
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return None
    answer = json.loads(done.stdout)
    assert set(answer) <= TOP_LEVEL
    return answer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    Memory.init(tmp_path / "mem")
    return tmp_path / "mem"


# -- Stop: asked once, at the right moment ---------------------------------------------------------------------


def test_stop_asks_once_for_keyed_notes_with_a_command_that_works_then_never_again(root, tmp_path):
    transcript = append(tmp_path / "s-1.jsonl", *work())
    answer = decision(hook(root, stop(transcript)))
    assert answer is not None and answer["decision"] == "block" and set(answer) == {"decision", "reason"}
    reason = answer["reason"]
    assert "## people/Adam Smith" in reason and "- employer: Globex" in reason and "once per session" in reason
    [command] = [line for line in reason.splitlines() if " note " in line]
    argv = shlex.split(command)
    assert argv[1:3] == ["--root", str(root)] and argv[3] == "note"
    env = without_fsmem()
    saved = subprocess.run(argv, capture_output=True, text=True, env={**env, "FSMEM_NOW": NOW}, timeout=60)
    assert saved.returncode == 0, saved.stderr  # the command the agent is given writes a keyed note
    [note] = (root / "sessions").glob("*/*/*/*.md")
    assert "## people/Adam Smith" in note.read_text() and "- employer: Globex" in note.read_text()
    [state] = (root / ".fsmem" / "hooks" / "claude-code" / "asked").glob("*.json")
    assert json.loads(state.read_text())["asked"] is True
    append(transcript, *work(4))
    assert decision(hook(root, stop(transcript))) is None  # more material, but asked already
    assert decision(hook(root, stop(transcript, session="s-2"))) is not None  # another session is asked once too
    logged = [json.loads(line) for line in (root / ".fsmem" / "logs" / "hooks.jsonl").read_text().splitlines()]
    assert [r["asked_to_save"] for r in logged if r["event"] == "Stop"] == [True, False, True]


def test_stop_hook_active_never_blocks(root, tmp_path):
    transcript = append(tmp_path / "s-1.jsonl", *work())
    assert decision(hook(root, stop(transcript, active=True))) is None
    active_missing = json.loads(stop(transcript))
    del active_missing["stop_hook_active"]
    assert decision(hook(root, json.dumps(active_missing))) is None  # anything but a plain false: no block
    assert decision(hook(root, stop(transcript))) is not None


@pytest.mark.parametrize(
    ("name", "tool_input"),
    [
        ("mcp__fsmem__note", {"text": "- employer: Globex", "subject": "people/Adam Smith"}),
        ("mcp__fsmem__write", {"path": "topics/billing.md", "body": "Invoices round down."}),
        ("mcp__plugin_tools_fsmem__edit", {"path": "topics/billing.md", "old": "a", "new": "b"}),
        (
            "Bash",
            {"command": "cd /tmp && /opt/venv/bin/fsmem --root /m --agent a note --subject 'people/A B' '- x: y'"},
        ),
        ("Bash", {"command": "python3 -m fsmem --root=/m note - <<'EOF'\n- employer: Globex\nEOF"}),
    ],
)
def test_a_session_in_which_the_agent_wrote_to_the_memory_is_not_asked(root, tmp_path, name, tool_input):
    transcript = append(tmp_path / "s-1.jsonl", *work(), call("toolu_n", name, tool_input), result("toolu_n", "ok"))
    assert decision(hook(root, stop(transcript))) is None
    append(transcript, *work())
    assert decision(hook(root, stop(transcript))) is None  # written once: never asked in this session


@pytest.mark.parametrize(
    ("name", "tool_input", "error"),
    [
        ("mcp__fsmem__note", {"text": "- employer: Globex"}, True),  # the write failed
        ("mcp__fsmem__grep", {"pattern": "note"}, False),  # a read
        ("Bash", {"command": "fsmem grep note && echo note"}, False),
        ("mcp__other__note", {"text": "x"}, False),  # another server's note tool
    ],
)
def test_a_call_that_wrote_nothing_to_the_memory_still_gets_the_question(root, tmp_path, name, tool_input, error):
    transcript = append(
        tmp_path / "s-1.jsonl", *work(), call("toolu_n", name, tool_input), result("toolu_n", "x", error=error)
    )
    assert decision(hook(root, stop(transcript))) is not None


def test_a_tool_name_of_any_length_leaves_the_stop_hook_quick(root, tmp_path):
    """The name is the transcript's: 21,000 characters of `fsmem__` held the hook's pattern for minutes."""
    hostile = "mcp__-" + "fsmem__" * 3_000 + "-"
    transcript = append(tmp_path / "s-1.jsonl", *work(), call("toolu_n", hostile, {}), result("toolu_n", "x"))
    spent = time.monotonic()
    assert decision(hook(root, stop(transcript))) is not None  # no fsmem tool: the question is still asked
    assert time.monotonic() - spent < 30


def test_no_new_material_is_not_asked_about(root, tmp_path):
    short = append(tmp_path / "short.jsonl", said("user", "hi"), said("assistant", "Hello!"))
    assert decision(hook(root, stop(short, session="short"))) is None  # a greeting is not worth a note
    transcript = append(tmp_path / "s-1.jsonl", *work())
    saved = hook(root, json.dumps({**json.loads(stop(transcript)), "hook_event_name": "PreCompact"}))
    assert saved.returncode == 0 and list((root / "sessions").glob("*/*/*/claude-code-s-1.md"))
    assert decision(hook(root, stop(transcript))) is None  # the memory holds every line already
    append(transcript, *work(2))
    assert decision(hook(root, stop(transcript))) is not None  # eight lines beyond what it holds


def test_a_last_line_still_being_written_waits(root, tmp_path):
    transcript = append(tmp_path / "s-1.jsonl", *work())
    with open(transcript, "a", encoding="utf-8") as handle:  # a note call the agent is writing now
        handle.write(json.dumps(call("toolu_n", "mcp__fsmem__note", {"text": "- a: b"}))[:40])
    assert decision(hook(root, stop(transcript))) is not None  # the half line is not read as anything


def test_a_transcript_not_read_to_its_end_within_the_budget_is_not_asked_about_yet(root, tmp_path):
    transcript = append(tmp_path / "s-1.jsonl", *work())
    assert decision(hook(root, stop(transcript), "--budget", "0")) is None  # no time to read: no block
    assert decision(hook(root, stop(transcript))) is not None  # the next Stop reads it and asks


def test_a_note_call_without_its_result_yet_is_not_asked_about(root, tmp_path):
    transcript = append(tmp_path / "s-1.jsonl", *work(), call("toolu_n", "mcp__fsmem__note", {"text": "- a: b"}))
    assert decision(hook(root, stop(transcript))) is None


@pytest.mark.parametrize("damage", ["config", "state", "transcript", "fifo", "read-only", "no-state-folder"])
def test_a_damaged_memory_or_transcript_never_blocks(root, tmp_path, damage):
    transcript = append(tmp_path / "s-1.jsonl", *work())
    if damage == "config":
        (root / "fsmem.yaml").write_text("budgets: [unclosed\n")
    elif damage == "state":
        folder = root / ".fsmem" / "hooks" / "claude-code" / "asked"
        folder.mkdir(parents=True)
        import hashlib

        (folder / f"{hashlib.sha256(b's-1').hexdigest()[:32]}.json").write_text("{not json")
    elif damage == "transcript":
        transcript.unlink()
        transcript.mkdir()
    elif damage == "fifo":  # a transcript no one ever writes: reading it must not hang
        transcript.unlink()
        os.mkfifo(transcript)
    elif damage == "read-only":
        (root / "fsmem.yaml").write_text("budgets:\n  default:\n    read_only: true\n")
    else:  # .fsmem/hooks is a file: the state cannot be written, so no block can be sent
        (root / ".fsmem").mkdir(exist_ok=True)
        (root / ".fsmem" / "hooks").write_text("")
    done = hook(root, stop(transcript))
    assert (done.returncode, done.stdout) == (0, b"")


def test_a_session_note_that_is_a_fifo_does_not_hang_the_stop_hook(root, tmp_path):
    from fsmem.hooks.claude_code import session_name

    transcript = append(tmp_path / "s-1.jsonl", *work())
    folder = root / "sessions" / "2026" / "05" / "04"
    folder.mkdir(parents=True)
    os.mkfifo(folder / f"{session_name('s-1')}.md")  # no one ever writes it: opening it to read would block
    answer = decision(hook(root, stop(transcript)))  # cli_runner fails a hook that hits its time limit
    assert answer is not None and answer["decision"] == "block"  # the FIFO holds none of the transcript


# -- UserPromptSubmit: relevant memory, or nothing -------------------------------------------------------------


@pytest.fixture
def known(root: Path) -> Path:
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    facts = "\n".join(f"- project {i}: Atlas billing export number {i} runs nightly" for i in range(60))
    for args in (
        ["note", "--subject", "people/Adam Smith", "- employer: Globex\n- likes long walks"],
        ["note", "--subject", "topic/Billing", facts],
        ["consolidate"],
    ):
        cli_runner.run(["--root", str(root), *args], check=True, env=env)
    return root


def context_of(done: subprocess.CompletedProcess[bytes]) -> str | None:
    answer = decision(done)
    if answer is None:
        return None
    assert set(answer) == {"hookSpecificOutput"}
    specific = answer["hookSpecificOutput"]
    assert set(specific) == {"hookEventName", "additionalContext"} and specific["hookEventName"] == "UserPromptSubmit"
    return specific["additionalContext"]


def test_the_prompt_hook_adds_what_clears_the_threshold_within_the_budget(known):
    added = context_of(hook(known, prompt("Where does Adam Smith work?"), process=True))
    assert added is not None and "employer: Globex" in added
    wide = context_of(hook(known, prompt("Atlas billing export nightly")))
    memory = Memory(known)
    assert wide is not None and memory.tokens.count(wide) <= 400
    (known / "fsmem.yaml").write_text(
        (known / "fsmem.yaml").read_text().replace("hook_max_tokens: 400", "hook_max_tokens: 120")
    )
    narrow = context_of(hook(known, prompt("Atlas billing export nightly")))
    assert narrow is not None and Memory(known).tokens.count(narrow) <= 120 < memory.tokens.count(wide)


def test_the_prompt_hook_prints_nothing_when_nothing_clears_the_threshold(known):
    done = hook(known, prompt("quantum chromodynamics on a lattice"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (known / "fsmem.yaml").write_text(
        known.joinpath("fsmem.yaml").read_text().replace("min_score: 0.06", "min_score: 50")
    )
    assert hook(known, prompt("Where does Adam Smith work?")).stdout == b""  # above any score: nothing


@pytest.mark.parametrize(
    "stdin",
    [
        prompt("Adam Smith\x00\x1b[2J\x1b]0;owned\x07 \u202eemployer"),
        prompt("Adam Smith \ud800 employer"),  # a lone surrogate, escaped in JSON as Claude Code may send it
        prompt("Adam " * 200_000),  # about a megabyte of prompt
        prompt("x" * (1 << 20)),  # more than the hook reads
        b'{"hook_event_name": "UserPromptSubmit", "prompt": "Adam \xff\xfe Smith"}',  # not UTF-8
        json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": {"text": "Adam Smith"}}),
        json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "\n\t  \x01"}),
        b"\x00" * 4096,
    ],
)
def test_a_hostile_prompt_gets_valid_output_or_none_quickly(known, stdin):
    started = time.monotonic()
    done = hook(known, stdin)
    added = context_of(done)
    assert b"Traceback" not in done.stderr and time.monotonic() - started < 30
    if added is not None:
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e\ud800-\udfff]", added)


def test_what_the_prompt_hook_adds_is_shown_as_text_never_obeyed(known):
    hostile = known / "topics" / "terminal.md"
    hostile.parent.mkdir(exist_ok=True)
    hostile.write_text(
        "---\ntitle: Terminal\n---\n# Terminal\n\n- Adam Smith's terminal \x1b[2J\x1b]0;owned\x07 \u202eok\n"
    )
    added = context_of(hook(known, prompt("Adam Smith terminal")))
    assert added is not None and "Adam Smith's terminal" in added
    assert "\x1b" not in added and "\u202e" not in added and "^[" in added


# -- the settings, as Claude Code itself checks them ------------------------------------------------------------

CLAUDE = shutil.which("claude")
_ESCAPES = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][A-Z0-9]|[=>78])")


def doctor(home: Path, cwd: Path) -> str:
    """What `claude doctor` shows, in a terminal of its own, with spaces and escapes taken out; closed with Enter."""
    master, slave = os.openpty()
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "TERM": "xterm", "DISABLE_AUTOUPDATER": "1"}
    proc = subprocess.Popen([CLAUDE, "doctor"], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    out, closed, deadline = b"", False, time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    out += os.read(master, 1 << 16)
                except OSError:
                    break
            seen = re.sub(rb"\s", b"", _ESCAPES.sub(b"", out))
            if not closed and b"Entertoclose" in seen and b"Checkingforupdates" not in seen[-400:]:
                os.write(master, b"\r")
                closed = True
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    return re.sub(r"\s", "", _ESCAPES.sub(b"", out).decode("utf-8", "replace"))


@pytest.mark.slow
@pytest.mark.skipif(CLAUDE is None, reason="Claude Code's CLI (npm @anthropic-ai/claude-code) is not installed")
def test_claude_doctor_accepts_the_hooks_that_connect_writes(root, tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    home.mkdir()
    env = without_fsmem()
    written = subprocess.run(
        [FSMEM, "--root", str(root), "connect", "claude-code", "--hooks", "--write"],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(home)},
        cwd=project,
        timeout=60,
    )
    assert written.returncode == 0, written.stderr
    settings = home / ".claude" / "settings.json"
    assert sorted(json.loads(settings.read_text())["hooks"]) == [
        "PreCompact",
        "SessionEnd",
        "SessionStart",
        "Stop",
        "UserPromptSubmit",
    ]
    shown = doctor(home, project)
    assert "Diagnostics" in shown and "Invalidsettings" not in shown, shown[-2000:]
    broken = json.loads(settings.read_text())
    broken["hooks"]["Stop"][0]["hooks"][0]["timeout"] = "15"  # the check can fail: a string where a number goes
    settings.write_text(json.dumps(broken))
    assert "Invalidsettings" in doctor(home, project)
