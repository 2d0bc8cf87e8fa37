"""What the CLI answers when a call goes wrong or finds nothing (issue 19, finding 13).

The exit codes follow grep (0 found, 1 nothing found, 2 error); an error is
one line on stderr and, with --json, also a JSON document on stdout; a
mistyped command or option is answered with what it could have meant.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.cli import COMMANDS, cli
from fsmem.cli.app import run


def environment() -> dict[str, str]:
    env = without_fsmem()
    env["FSMEM_NOW"] = "2026-11-30T12:00:00+00:00"
    return env


def fsmem(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`); `test_a_process_answers_as_the_run_here` holds them equal."""
    return cli_runner.run(args, text=True, cwd=cwd, env=environment())


def test_a_process_answers_as_the_run_here(demo_memory, tmp_path):
    """The `fsmem` script as a real process: the same code and bytes for an answer, nothing found, a library
    error with --json, a usage error and a mistyped command."""
    root = str(demo_memory.root)
    for args in (
        ["read", "topics/billing.md", "--lines", "50:"],
        ["read", "topics/nope.md", "--json"],
        ["ls", "--json", "--max-results", "many"],
        ["grep", "zebra-unicorn", "--json"],
    ):
        cli_runner.same_as_a_process(["--root", root, *args], env=environment())
    cli_runner.same_as_a_process(["serach", "billing"], cwd=tmp_path, env=environment())


def in_process(capsys, *args: str) -> tuple[int, str, str]:
    """The CLI's own boundary (`fsmem.cli.app.run`), in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as done:
        run(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


# -- read past the end: say what the file holds, exit 1 like every other "nothing" --------------------------


def test_read_past_the_end_names_the_files_length_and_exits_1(demo_memory):
    root = str(demo_memory.root)
    past = fsmem("--root", root, "read", "topics/billing.md", "--lines", "50:")
    assert (past.returncode, past.stdout, past.stderr) == (
        1,
        "(no lines in this range: topics/billing.md has 25 lines)\n",
        "",
    )
    bounded = fsmem("--root", root, "read", "topics/billing.md", "--lines", "40:60", "--json")
    assert bounded.returncode == 1
    answer = json.loads(bounded.stdout)
    assert (answer["lines"], answer["total_lines"], answer["truncated"]) == ([], 25, False)
    last = fsmem("--root", root, "read", "topics/billing.md", "--lines", "25:")
    assert last.returncode == 0 and last.stdout.startswith("    25\t- Usage-based billing")
    (demo_memory.root / "topics" / "empty.md").write_bytes(b"")
    empty = fsmem("--root", root, "read", "topics/empty.md")
    assert (empty.returncode, empty.stdout) == (1, "(topics/empty.md is empty)\n")
    one = demo_memory.root / "topics" / "one.md"
    one.write_text("# One\n")
    assert (
        demo_memory.read("topics/one.md", lines="2:").to_text() == "(no lines in this range: topics/one.md has 1 line)"
    )


def test_a_read_that_shows_lines_or_is_cut_by_the_budget_is_not_empty(demo_memory):
    assert not demo_memory.read("topics/billing.md", lines="3:4").empty
    assert not demo_memory.read("topics/billing.md", max_tokens=30).empty  # cut: the answer names the next range
    assert demo_memory.read("topics/billing.md", lines="26:").empty


def test_show_past_the_end_of_an_old_version_exits_1_too(tmp_path):
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write("topics/a.md", "# A\n\n- colour: blue\n")
    length = len((memory.root / "topics" / "a.md").read_text().splitlines())
    memory.write("topics/a.md", "# A\n\n- colour: blue\n\nMore lines\nthan before.\n")
    done = fsmem("--root", str(memory.root), "show", "topics/a.md", "--at", "HEAD~1", "--lines", f"{length + 1}:")
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1] == f"(no lines in this range: topics/a.md has {length} lines)"


# -- did you mean ---------------------------------------------------------------------------------------------


def test_a_mistyped_command_is_answered_with_the_one_it_meant(tmp_path):
    done = fsmem("serach", "billing", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "Error: No such command 'serach'. Did you mean 'search'?"
    assert "Did you mean 'consolidate'?" in fsmem("consol", cwd=tmp_path).stderr
    nothing_like = fsmem("zzzz", cwd=tmp_path)
    assert nothing_like.stderr.splitlines()[-1] == "Error: No such command 'zzzz'."


@pytest.mark.parametrize(
    "args, hint",
    [
        (["search", "x", "--max"], "Did you mean one of: '--max-results', '--max-tokens'?"),  # click alone: '--tag'
        (["search", "x", "--max-token", "5"], "Did you mean '--max-tokens'?"),
        (["grep", "x", "--contex", "2"], "Did you mean '--context-lines'?"),
        (["read", "x.md", "--outlin"], "Did you mean '--outline'?"),
        (["--rot", "x", "ls"], "Did you mean '--root'?"),
    ],
)
def test_a_mistyped_option_is_answered_with_the_options_it_could_mean(capsys, args, hint):
    code, out, err = in_process(capsys, *args)
    assert (code, out) == (2, "")
    option = next(a for a in args if a.startswith("--"))
    assert err.splitlines()[-1] == f"Error: No such option {option!r}. {hint}"


def test_the_command_removed_in_0_3_is_answered_with_its_successor(demo_memory, capsys):
    """`fsmem eval` (renamed `evaluate` in 0.2) is gone in 0.3: click's error, with the command it could mean."""
    code, out, err = in_process(capsys, "--root", str(demo_memory.root), "eval", "--help")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == "Error: No such command 'eval'. Did you mean 'evaluate'?"


# -- --json errors: a JSON document on stdout as well as the line on stderr --------------------------------------


def test_an_error_with_json_is_a_json_document_on_stdout_and_a_line_on_stderr(demo_memory):
    root = str(demo_memory.root)
    missing = fsmem("--root", root, "read", "topics/nope.md", "--json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout) == {
        "error": {"message": "topics/nope.md does not exist; list files with ls", "exit": 2}
    }
    assert missing.stderr == "fsmem: error: topics/nope.md does not exist; list files with ls\n"
    plain = fsmem("--root", root, "read", "topics/nope.md")
    assert (plain.returncode, plain.stdout, plain.stderr) == (2, "", missing.stderr)
    usage = fsmem("--root", root, "ls", "--json", "--max-results", "many")
    assert usage.returncode == 2 and "Error: Invalid value for '--max-results'" in usage.stderr
    assert json.loads(usage.stdout) == {
        "error": {"message": "Invalid value for '--max-results': 'many' is not a valid integer.", "exit": 2}
    }
    nothing = fsmem("--root", root, "grep", "zebra-unicorn", "--json")  # nothing found is an answer, not an error
    assert nothing.returncode == 1 and json.loads(nothing.stdout)["total"] == 0


def test_json_after_a_double_dash_is_an_argument_not_the_flag(demo_memory, capsys):
    code, out, err = in_process(capsys, "--root", str(demo_memory.root), "read", "--", "--json")
    assert code == 2 and out == "" and err.startswith("fsmem: error: ")


def test_every_command_with_json_answers_its_errors_in_json(demo_memory, capsys):
    with_json = [name for name in COMMANDS if any(p.name == "as_json" for p in cli.get_command(None, name).params)]
    assert len(with_json) >= 20
    for name in with_json:
        code, out, err = in_process(capsys, "--root", str(demo_memory.root), name, "--json", "--zzzz-qqqq")
        assert code == 2, name
        assert json.loads(out) == {"error": {"message": "No such option '--zzzz-qqqq'.", "exit": 2}}, name
        assert err.splitlines()[-1] == "Error: No such option '--zzzz-qqqq'.", name


@pytest.mark.parametrize(
    "args",
    [
        ["--root", "", "rm", "topics/billing.md"],
        ["rm", "topics/billing.md", "--root="],
        ["--root=", "ls"],  # the lean parser leaves it to click
        ["grep", "net", "--root", ""],
        ["--agent", "", "note", "kept"],
        ["ls", "--agent="],
    ],
)
def test_an_empty_root_or_agent_is_refused_not_taken_for_the_default(demo_memory, args):
    """`fsmem --root "$MEMORY" rm x.md` with MEMORY unset removed x.md from the working folder's memory: an empty
    --root (or --agent) meant the default (found by attack54a). It is refused, exit 2, and nothing changes; an
    empty FSMEM_ROOT is still an unset one."""
    before = {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")}
    done = fsmem(*args, cwd=demo_memory.root)
    assert done.returncode == 2 and "is empty; leave the option out to mean the default" in done.stderr, done
    assert {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")} == before
    env = {**environment(), "FSMEM_ROOT": "", "FSMEM_AGENT": ""}
    assert cli_runner.run(["ls"], text=True, cwd=demo_memory.root, env=env).returncode == 0
