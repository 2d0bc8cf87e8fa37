"""One printer for people: nothing a memory, a remote or an argument holds reaches stdout or stderr as a control.

The walk runs every `fsmem` command (`fsmem.cli.COMMANDS`, so a new command must be
added here or said to print nothing for people) as the `fsmem` script runs it (`cli_runner`,
file descriptors 1 and 2 included; the reads also as a real process, held to the same bytes) over a memory
whose files, file names, commit authors and subjects hold terminal escapes and
text-reordering characters, pushed from a hostile second clone and synced in.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S
from hostile_remote import clone, git
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem.cli import COMMANDS
from fsmem.cli.printing import json_text, visible

# clipboard write, window title, clear screen, C1 CSI, RLO, an isolate, backspace, a lone CR, DEL, BOM, a tag
PAYLOAD = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;owned\x07\x1b[2J\x9b31m\u202egnp.exe\u2066\x08x\rY\x7f\ufeff\U000e0041"
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\x08", "\x7f", "\ufeff", "\U000e0041", "\x00"]
NOW = "2026-12-01T12:00:00+00:00"
# Commands that print nothing for a person: what they write goes to a program.
NOT_FOR_PEOPLE = {
    "mcp": "JSON-RPC on stdout for an MCP client",
    "hook": "a hook's answer on stdout is read by Claude Code, for the model",
    "serve": "a server: its log is JSON lines",
    "watch": "runs until stopped; its lines pass the same echo (test_watch)",
}


def raw_in(text: str) -> list[str]:
    """The controls of the payload found raw in `text` (a CR counts only when no newline follows it)."""
    found = [repr(c) for c in RAW if c in text]
    if re.search("\r(?!\n)", text):
        found.append("'\\r'")
    return found


# -- the one function -----------------------------------------------------------------------------


def test_visible_shows_every_control_as_text_and_keeps_lines_and_tabs():
    assert visible("a\tb\nc\r\nd") == "a\tb\nc\r\nd"
    assert visible("\x1b]0;t\x07\x1b[2J") == "^[]0;t^G^[[2J"
    assert visible("x\ry\x7f\x00") == "x^My^?^@"
    assert visible("\x9b31m \u202eabc\u2069 \u200b\ufeff\U000e0041") == (
        "<U+009B>31m <U+202E>abc<U+2069> <U+200B><U+FEFF><U+E0041>"
    )
    assert visible(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf<E9>"  # a byte that was not UTF-8
    assert visible("caf\u00e9 \u05e9\u05dc\u05d5\u05dd \U0001f468\u200d\U0001f469") == (
        "caf\u00e9 \u05e9\u05dc\u05d5\u05dd \U0001f468\u200d\U0001f469"  # letters, Hebrew, a ZWJ emoji: as they are
    )
    assert raw_in(visible(PAYLOAD)) == []


def test_json_text_escapes_what_json_leaves_raw_and_keeps_the_value():
    value = {"subject": PAYLOAD, "name": "caf\u00e9 \u2028"}
    text = json_text(value)
    assert raw_in(text) == [] and "\u2028" not in text and "caf\u00e9" in text
    assert json.loads(text) == value
    assert "\\u202e" in text and "\\u009b" in text and "\\udb40\\udc41" in text


# -- every command, as a person runs it ---------------------------------------------------------------


# The commands whose runs are also held to a real `fsmem` process's bytes (they change nothing a run reads).
AS_A_PROCESS = {"ls", "grep", "read", "check", "log", "--help"}


def run(root: Path, *args: str, process: bool = False) -> tuple[int, str]:
    """Run `fsmem` here (`cli_runner`: its file descriptors 1 and 2 too, where a child such as git writes), its
    stdin the payload (what write reads as a body): exit code, then stdout and stderr; with `process`, also as a
    real process, which must print the same bytes."""
    env = {**S.env(), "FSMEM_NOW": NOW, "COLUMNS": "200"}
    argv = ["--root", str(root), *args]
    how = {"input": PAYLOAD.encode(), "env": env}
    proc = cli_runner.same_as_a_process(argv, **how) if process else cli_runner.run(argv, **how)
    out = proc.stdout.decode("utf-8", "surrogateescape") + proc.stderr.decode("utf-8", "surrogateescape")
    return proc.returncode, out


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A victim host that synced a hostile clone's commit (payload in the author, the subject and the files),
    then was refused one whose file name holds the payload; and a few files with it made on the victim."""
    base = tmp_path_factory.mktemp("printer")
    origin, (victim,) = S.make_hosts(base, hosts=1, writers=1)
    hostile = clone(origin, base / "hostile", user=f"Eve {PAYLOAD}")
    (hostile / "topics" / "evil.md").write_text(
        f"---\ntitle: Evil\ntags: [evil]\n---\n# Evil {PAYLOAD}\n\n## Facts\n- owner: Eve {PAYLOAD}\n"
        f"- plan: pwn [[Nowhere {PAYLOAD}]]\n\nThe pwn line {PAYLOAD} ends here.\n"
    )
    (hostile / "sessions" / "2026" / "11" / "30").mkdir(parents=True)
    (hostile / "sessions" / "2026" / "11" / "30" / "eve.md").write_text(
        f"---\nsession: eve\nagent: eve\n---\n## topic/Evil\n- owner: Mallory {PAYLOAD}\n"
    )
    git(hostile, "add", "-A")
    git(hostile, "commit", "-q", "-m", f"innocent {PAYLOAD}\n\nbody {PAYLOAD}")
    git(hostile, "push", "-q", "origin", "HEAD:main")
    code, out = run(victim, "sync")
    assert code == 0, out
    git(hostile, "fetch", "-q", "origin")
    git(hostile, "reset", "-q", "--hard", "origin/main")
    (hostile / "topics" / f"name {PAYLOAD}.md").write_text("# Named\n")
    git(hostile, "add", "-A")
    git(hostile, "commit", "-q", "-m", f"second {PAYLOAD}")
    git(hostile, "push", "-q", "origin", "HEAD:main")
    (victim / "topics" / f"local {PAYLOAD}.md").write_text("# Local\n")  # a name the walk skips and check reports
    (victim / "topics" / "local.md").write_text(f"# Local\n\n- owner: Local {PAYLOAD}\n")
    (base / "import").mkdir()
    (base / "import" / "note.md").write_text(f"# Imported {PAYLOAD}\n\n- owner: pwn {PAYLOAD}\n")
    (base / "evalset.jsonl").write_text(json.dumps({"query": f"pwn {PAYLOAD}", "relevant": ["topics/evil.md"]}) + "\n")
    (base / "seen.txt").write_text(f"pwn {PAYLOAD}\n")
    return {"root": victim, "base": base}


def command_lines(base: Path) -> dict[str, list[list[str]]]:
    """Each command's runs, text and JSON, asked about (or given) the payload where it takes text."""
    evil = "topics/evil.md"
    return {
        "init": [["init", str(base / "fresh" / f"x{PAYLOAD}")]],
        "ls": [["ls", "topics", "--json"], ["ls", f"topics/{PAYLOAD}"]],
        "grep": [["grep", "pwn"], ["grep", "-i", "-C", "2", "pwn", "--json"]],
        "read": [["read", evil], ["read", evil, "--json"]],
        "links": [["links", evil]],
        "stat": [["stat", evil], ["stat", evil, "--json"]],
        "note": [["note", f"- plan: pwn {PAYLOAD}", "--subject", f"topic/Evil {PAYLOAD}"]],
        "write": [["write", f"topics/w{PAYLOAD}.md"], ["write", "topics/w.md", "--set", f"title=w {PAYLOAD}"]],
        "edit": [["edit", evil, "--old", "ends here", "--new", f"ends {PAYLOAD}"]],
        "rm": [["rm", f"topics/{PAYLOAD}.md"]],
        "mv": [["mv", "topics/w.md", "topics/moved.md"]],
        "check": [["check"], ["check", "--json"]],
        "connect": [["connect", f"x{PAYLOAD}"]],
        "tools": [["tools"]],
        "agent": [["agent", "add", f"eve{PAYLOAD}"]],
        "stats": [["stats", "--agent", PAYLOAD]],
        "context": [["context"]],
        "consolidate": [["consolidate"]],
        "distill": [["distill", "--command", f"true {PAYLOAD}"]],
        "config": [["config", "--local", "distill.command", f"true {PAYLOAD}"], ["config", "--local"]],
        "index": [["index"]],
        "search": [["search", "pwn owner"], ["search", "pwn owner", "--json"]],
        "recall": [["recall", "pwn owner", "--seen-file", str(base / "seen.txt")]],
        "timeline": [["timeline", "topic/Evil"], ["timeline", PAYLOAD]],
        "evaluate": [["evaluate", str(base / "evalset.jsonl")]],
        "import": [["import", "markdown", str(base / "import"), "--into", "topics/imported"]],
        "log": [["log"], ["log", "--json"]],
        "show": [["show", evil, "--at", "HEAD"], ["show", evil, "--at", PAYLOAD]],
        "diff": [["diff", "HEAD~3"]],
        "restore": [["restore", evil, "--at", "HEAD~1"]],
        "revert": [["revert", "HEAD"]],
        "sync": [["sync"]],
        "token": [
            ["token", "create", "--memory", f"m{PAYLOAD}", "--agent", "w1", "--tokens", str(base / "t.json")],
            ["token", "list", "--tokens", str(base / "t.json")],
        ],
        "--help": [["ls", f"--{PAYLOAD}"], [PAYLOAD]],  # click's usage errors
    }


def test_every_command_is_walked(tmp_path):
    walked = set(command_lines(tmp_path)) - {"--help"}
    assert walked | set(NOT_FOR_PEOPLE) == set(COMMANDS), set(COMMANDS) - walked - set(NOT_FOR_PEOPLE)
    assert not walked & set(NOT_FOR_PEOPLE)


def test_log_shows_a_remotes_author_and_subject_as_text(world):
    """The finding itself: `fsmem log` printed a remote's author and commit subject raw."""
    code, out = run(world["root"], "log", process=True)
    assert code == 0, out
    assert f"innocent {visible(PAYLOAD)}" in out and f"Eve {visible(PAYLOAD)}" in out
    assert raw_in(out) == []
    code, out = run(world["root"], "log", "topics/evil.md", "--json")
    commits = json.loads(out)["commits"]
    assert raw_in(out) == [] and f"Eve {PAYLOAD}" in [c["agent"] for c in commits]
    assert f"innocent {PAYLOAD}" in [c["message"] for c in commits]


@pytest.mark.slow
def test_no_command_prints_a_control_raw(world):
    """Every run's stdout and stderr hold the payload's characters only as text (`^[`, `<U+202E>`)."""
    root, base = world["root"], world["base"]
    shown_payload = 0
    for name, lines in command_lines(base).items():
        for args in lines:
            code, out = run(root, *args, process=name in AS_A_PROCESS)
            assert "Traceback" not in out, (args, out)
            assert raw_in(out) == [], (args, raw_in(out), out[:2000])
            shown_payload += "^[]52;c;" in out or "\\u001b]52;c;" in out
    assert shown_payload >= 15  # the payload did reach the output, as text, in many answers


# -- drawn: whatever a file holds, whatever an argument says -----------------------------------------------------

# every kind of character `visible` shows, the CR it lets through before a newline, and the text around them
_DRAWN = "\x1b\x07\x08\r\n\t\x00\x7f\x85\x9b\xad\u061c\u200b\u200e\u2028\u202e\u2066\ufeff\U000e0041\udce9é :-[]#"
_PIECE = st.text(alphabet=st.sampled_from(_DRAWN + "ab"), min_size=1, max_size=10)
_READS = (
    "ls",
    "ls --json",
    "grep {w}",
    "grep -F {w}",
    "search {w}",
    "read {p}",
    "read {p} --json",
    "links {p}",
    "context",
    "stat {p}",
    "read {p} --section {w}",
    "ls --tag {w}",
    "check",
)
EXAMPLES = 25 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_PIECE, title=_PIECE, body=_PIECE, word=_PIECE, command=st.sampled_from(_READS))
def test_no_read_prints_a_control_raw_whatever_a_file_and_an_argument_hold(
    tmp_path_factory, name, title, body, word, command
):
    """A file whose name, title, tag, heading, fact and body hold drawn controls, read by a drawn command whose
    argument holds them too: stdout and stderr are what `visible` leaves as they are (no control raw), and no
    traceback. The walk above tries each command once with one payload; this draws their mixtures (a CR before a
    newline, a control cut by a budget, a name that is not UTF-8)."""
    root = _drawn_memory(tmp_path_factory)
    for old in (root / "drawn").iterdir():
        old.unlink()
    safe_name = name.replace("\x00", "").replace("/", "") or "x"
    rel = f"drawn/{safe_name}.md"
    text = (
        f"---\ntitle: {json.dumps(title)}\ntags: [{json.dumps(word)}]\n---\n# {word}\n\n- key: {body}\n\n{body} pwn\n"
    )
    (root / os.fsencode(rel).decode("utf-8", "surrogateescape")).write_bytes(
        text.encode("utf-8", "surrogateescape").replace(b"\x00", b"")
    )
    argv = [part.format(w=word, p=rel) for part in command.split(" ")]
    if command.split(" ")[0] in ("grep", "search"):
        argv[1:2] = [word]
    proc = cli_runner.run(["--root", str(root), *argv], env={**S.env(), "FSMEM_NOW": NOW, "COLUMNS": "200"})
    out = proc.stdout.decode("utf-8", "surrogateescape") + proc.stderr.decode("utf-8", "surrogateescape")
    assert "Traceback" not in out and proc.returncode in (0, 1, 2), (argv, out)
    assert visible(out) == out, (argv, [c for c in out if visible(c) != c], out[:2000])


_MEMORIES: dict[str, Path] = {}


def _drawn_memory(factory) -> Path:
    """One memory for every drawn example (a new one each would be most of an example's time)."""
    if "root" not in _MEMORIES:
        from fsmem import Memory

        root = factory.mktemp("drawn") / "mem"
        Memory.init(root)
        (root / "drawn").mkdir()
        _MEMORIES["root"] = root
    return _MEMORIES["root"]
