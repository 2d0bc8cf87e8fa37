import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from click.testing import CliRunner

from fsmem.cli import COMMANDS, cli


def environment(env_extra=None):
    env = without_fsmem()
    env.update(env_extra or {})
    return env


def fsmem(*args, cwd=None, input=None, env_extra=None):
    """The command line run here (`cli_runner`); the installed script's test below runs it as a process too."""
    return cli_runner.run(args, text=True, cwd=cwd, input=input, env=environment(env_extra))


def test_every_command_has_help_text():
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, name
        command = cli.get_command(None, name)
        assert command.help and len(command.help) > 20, name


def test_every_command_is_documented_in_the_guide():
    """The guide's command table names every command (the CLI reference lists them all, generated)."""
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guide.md").read_text()
    for name in COMMANDS:  # a whole word: "fsmem stats" does not document "fsmem stat"
        assert re.search(rf"`fsmem {re.escape(name)}(?![\w-])", guide), name


def test_the_guide_check_matches_whole_command_names_only():
    """The check above would have passed for a missing `stat` row, since `fsmem stats` contains it."""
    assert not re.search(r"`fsmem stat(?![\w-])", "| `fsmem stats [--since DATE]` |")
    assert re.search(r"`fsmem stat(?![\w-])", "| `fsmem stat PATH` |")


def test_ls_grep_read_through_the_installed_script(demo_memory):
    """The installed `fsmem` script, a real process, answers each command line as the run here does."""
    root = str(demo_memory.root)
    for args in (
        ["ls", "--json"],
        ["grep", "-i", "PRORATION", "--json"],
        ["grep", "zebra-unicorn"],
        ["read", "topics/billing.md", "--section", "Facts"],
        ["--max-results", "x", "ls"],
    ):
        cli_runner.same_as_a_process(["--root", root, *args], env=environment())
    listed = fsmem("--root", root, "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["total"] == 12 and data["left_out"] == 0
    found = fsmem("--root", root, "grep", "-i", "PRORATION", "--json")
    assert found.returncode == 0
    assert json.loads(found.stdout)["total"] == 3
    none = fsmem("--root", root, "grep", "zebra-unicorn")
    assert none.returncode == 1 and "(no matches)" in none.stdout
    read = fsmem("--root", root, "read", "topics/billing.md", "--section", "Facts")
    assert read.returncode == 0 and "    14\t- billing cycle: monthly, on the 1st" in read.stdout


def test_root_is_found_from_the_working_directory_and_env(demo_memory, tmp_path):
    inside = fsmem("ls", "--max-results", "1", cwd=demo_memory.root / "topics")
    assert inside.returncode == 0
    assert "files 1-1 of 12; 11 left out by the result limit" in inside.stdout
    via_env = fsmem("ls", "topics", cwd=tmp_path, env_extra={"FSMEM_ROOT": str(demo_memory.root)})
    assert via_env.returncode == 0 and "topics/billing.md" in via_env.stdout
    outside = fsmem("ls", cwd=tmp_path)
    assert outside.returncode == 2
    assert "fsmem init" in outside.stderr and "Traceback" not in outside.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["read", "../../etc/passwd"], "escapes the memory root"),
        (["read", "/etc/passwd"], "is absolute"),
        (["grep", "(oops"], "invalid regular expression"),
        (["read", "topics/billing.md", "--lines", "9:1"], "not a valid range"),
        (["edit", "topics/billing.md", "--old", "billing contact", "--new", "x"], "matches 2 times"),
        (["--agent", "reviewer", "note", "x"], "read-only"),
        (["ls", "--depth", "0"], "--depth must be at least 1"),
        (["write", "x.md", "--set", "novalue"], "key=value"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(demo_memory, args, message):
    before = {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")}
    result = fsmem("--root", str(demo_memory.root), *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")} == before


def test_usage_errors_exit_2(demo_memory):
    result = fsmem("--root", str(demo_memory.root), "grep")
    assert result.returncode == 2 and "Missing argument" in result.stderr
    result = fsmem("--root", str(demo_memory.root), "frobnicate")
    assert result.returncode == 2


def test_init_then_note_write_edit_mv_rm_round_trip(tmp_path):
    root = tmp_path / "m"
    assert fsmem("init", str(root)).returncode == 0
    again = fsmem("init", str(root))
    assert again.returncode == 2 and "already holds a memory" in again.stderr
    env = {"FSMEM_NOW": "2026-11-30T09:00:00+00:00"}
    noted = fsmem(
        "--root",
        str(root),
        "note",
        "-",
        "--session",
        "s1",
        "--subject",
        "topic/Billing",
        input="- cycle: monthly\n",
        env_extra=env,
    )
    assert noted.returncode == 0 and "sessions/2026/11/30/s1.md" in noted.stdout
    wrote = fsmem(
        "--root",
        str(root),
        "write",
        "topics/billing.md",
        "--set",
        "type=semantic",
        "--set",
        "importance=0.5",
        input="# Billing\n- cycle: monthly\n",
        env_extra=env,
    )
    assert wrote.returncode == 0, wrote.stderr
    text = (root / "topics/billing.md").read_text()
    assert "type: semantic\n" in text and "importance: 0.5\n" in text and text.endswith("- cycle: monthly\n")
    keep = fsmem("--root", str(root), "write", "topics/billing.md", "--set", "tags=[billing]", input="", env_extra=env)
    assert keep.returncode == 0
    assert (root / "topics/billing.md").read_text().endswith("- cycle: monthly\n")  # empty stdin keeps the body
    assert "tags: [billing]" in (root / "topics/billing.md").read_text()
    edited = fsmem("--root", str(root), "edit", "topics/billing.md", "--old", "monthly", "--new", "yearly", "--json")
    assert json.loads(edited.stdout)["line"] > 1
    assert fsmem("--root", str(root), "mv", "topics/billing.md", "topics/money.md").returncode == 0
    assert fsmem("--root", str(root), "rm", "topics/money.md").returncode == 0
    assert not (root / "topics/money.md").exists()


def test_check_reports_path_line_message(empty_memory):
    (empty_memory.root / "topics").mkdir()
    (empty_memory.root / "topics/bad.md").write_text("---\ntitle: ok\ntype: opinion\n---\nbody\n")
    (empty_memory.root / "topics/broken.md").write_text("---\ntitle: [\n---\n")
    result = fsmem("--root", str(empty_memory.root), "check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "topics/bad.md:3: type must be one of semantic, episodic, procedural, not 'opinion'" in lines
    assert any(line.startswith("topics/broken.md:") and "not valid YAML" in line for line in lines)
    ok = fsmem("--root", str(empty_memory.root), "check", "profile")
    assert ok.returncode == 0


def test_grep_json_offset_paging_via_cli(empty_memory):
    (empty_memory.root / "many.md").write_text("".join(f"needle {i}\n" for i in range(120)))
    first = json.loads(
        fsmem("--root", str(empty_memory.root), "grep", "needle", "--max-results", "50", "--json").stdout
    )
    assert first["total"] == 120 and first["truncated"] and first["next_offset"] == 50
    last = json.loads(fsmem("--root", str(empty_memory.root), "grep", "needle", "--offset", "100", "--json").stdout)
    assert [m["line"] for m in last["matches"]] == list(range(101, 121)) and not last["truncated"]


def test_write_set_with_an_impossible_date_is_kept_as_text_not_a_traceback(demo_memory):
    root = demo_memory.root
    result = fsmem("--root", str(root), "write", "topics/billing.md", "--set", "review=2026-13-45", input="")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "\nreview: 2026-13-45\n" in (root / "topics" / "billing.md").read_text()


def test_configuration_is_read_again_when_fsmem_yaml_changes(demo_memory):
    """The parsed copy under .fsmem/ spares short commands PyYAML, and never outlives an edit of fsmem.yaml."""

    from fsmem import Memory

    assert Memory(demo_memory.root).budget.max_tokens == 2000
    config = demo_memory.root / "fsmem.yaml"
    old = os.stat(config)
    os.utime(config, ns=(old.st_atime_ns, old.st_mtime_ns - 5_000_000_000))  # out of the racy window
    assert Memory(demo_memory.root).budget.max_tokens == 2000
    assert (demo_memory.root / ".fsmem" / "config.json").exists()
    config.write_text(config.read_text().replace("max_tokens: 2000", "max_tokens: 1234"))
    assert Memory(demo_memory.root).budget.max_tokens == 1234
    (demo_memory.root / ".fsmem" / "config.json").write_text("{not json")
    os.utime(config, ns=(old.st_atime_ns, old.st_mtime_ns - 4_000_000_000))
    assert Memory(demo_memory.root).budget.max_tokens == 1234  # read again, and stored
    same = os.stat(config)  # an edit of the same size with its mtime put back (cp -p, rsync -t): the change time moved
    config.write_text(config.read_text().replace("max_tokens: 1234", "max_tokens: 4321"))
    os.utime(config, ns=(same.st_atime_ns, same.st_mtime_ns))
    assert Memory(demo_memory.root).budget.max_tokens == 4321
    probe = "import sys; from fsmem import Memory; Memory(sys.argv[1]).grep('proration'); print('yaml' in sys.modules)"
    warm = subprocess.run([sys.executable, "-c", probe, str(demo_memory.root)], capture_output=True, text=True)
    assert warm.stdout.strip() == "False", warm.stderr
