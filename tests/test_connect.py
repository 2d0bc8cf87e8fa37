"""`fsmem connect`: each client's entry parsed as that client parses it, and `--write` keeping the rest of its file."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import cli_runner
import pytest
from hypothesis import given, strategies as st

from fsmem import Memory, connect

FSMEM = str(Path(sys.executable).with_name("fsmem"))


def run(
    *args: str, home: Path, cwd: Path, env: dict[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "CODEX_"))}
    environ.update({"HOME": str(home), **(env or {})})
    if process:
        return cli_runner.same_as_a_process(args, text=True, cwd=cwd, env=environ)
    return cli_runner.run(args, text=True, cwd=cwd, env=environ)


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.init(tmp_path / "mem")


def connect_out(memory: Memory, tmp_path: Path, client: str, *extra: str) -> subprocess.CompletedProcess[str]:
    result = run("--root", str(memory.root), *extra, "connect", client, home=tmp_path, cwd=tmp_path, process=True)
    assert result.returncode == 0, result.stderr
    return result


def runs_with_ls(argv: list[str], tmp_path: Path) -> None:
    """The printed command starts this fsmem on the memory: with `ls` in place of `mcp`, it lists the memory."""
    assert Path(argv[0]).is_absolute() and Path(argv[0]).is_file()
    at = argv.index("mcp")
    done = subprocess.run(
        [*argv[:at], "ls", *argv[at + 1 :]], cwd="/", capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "README.md" in done.stdout


def test_claude_code_line_is_the_claude_mcp_add_command_with_absolute_paths(memory, tmp_path):
    line = connect_out(memory, tmp_path, "claude-code", "--agent", "bob").stdout
    words = shlex.split(line)
    assert words[:7] == ["claude", "mcp", "add", "--scope", "user", "fsmem", "--"]
    argv = words[7:]
    assert argv == [FSMEM, "--root", str(memory.root), "mcp", "--agent", "bob"]
    runs_with_ls(argv, tmp_path)


def test_claude_code_scope_is_passed_and_an_unknown_scope_is_refused(memory, tmp_path):
    line = connect_out(memory, tmp_path, "claude-code", "--agent", "bob")
    assert "--scope user" in line.stdout
    local = run("--root", str(memory.root), "connect", "claude-code", "--scope", "local", home=tmp_path, cwd=tmp_path)
    assert shlex.split(local.stdout)[3:5] == ["--scope", "local"]
    bad = run("--root", str(memory.root), "connect", "cursor", "--scope", "local", home=tmp_path, cwd=tmp_path)
    assert bad.returncode == 2
    assert "cursor has no scope 'local'; its scopes are: user, project." in bad.stderr


@pytest.mark.parametrize("client", ["claude-desktop", "cursor"])
def test_json_clients_get_an_mcpservers_block(memory, tmp_path, client):
    result = connect_out(memory, tmp_path, client)
    entry = json.loads(result.stdout)["mcpServers"]["fsmem"]
    assert entry == {"command": FSMEM, "args": ["--root", str(memory.root), "mcp"]}
    runs_with_ls([entry["command"], *entry["args"]], tmp_path)


def test_claude_desktop_says_where_its_file_is_on_each_system(memory, tmp_path):
    err = connect_out(memory, tmp_path, "claude-desktop").stderr
    assert "~/Library/Application Support/Claude/claude_desktop_config.json (macOS)" in err
    assert "%APPDATA%\\Claude\\claude_desktop_config.json (Windows)" in err
    assert "no official Linux app" in err


def test_codex_gets_a_toml_table(memory, tmp_path):
    result = connect_out(memory, tmp_path, "codex", "--agent", "bob")
    entry = tomllib.loads(result.stdout)["mcp_servers"]["fsmem"]
    assert entry == {"command": FSMEM, "args": ["--root", str(memory.root), "mcp", "--agent", "bob"]}
    runs_with_ls([entry["command"], *entry["args"]], tmp_path)


def test_launcher_falls_back_to_this_interpreter_without_a_script(tmp_path):
    """A Python with no fsmem script beside it: the entry is `python -m fsmem`, which runs."""
    lonely = tmp_path / "bin" / "python3"
    lonely.parent.mkdir()
    lonely.symlink_to(sys.executable)
    code = "import sys, sysconfig; sysconfig.get_path = lambda *a: '/nonexistent'; from fsmem import connect; "
    code += "print(connect.launcher())"
    repo = Path(__file__).resolve().parent.parent  # where `fsmem` imports from for a Python outside the venv
    done = subprocess.run([str(lonely), "-c", code], cwd=repo, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == repr([str(lonely), "-m", "fsmem"])


def test_unknown_client_exits_2_with_the_list(memory, tmp_path):
    result = run("--root", str(memory.root), "connect", "curser", home=tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert (
        "No such client 'curser'. Did you mean 'cursor'? The clients are: claude-code, claude-desktop, codex, cursor."
        in result.stderr
    )


def test_connect_does_not_import_mcp(memory, tmp_path):
    code = (
        "import sys\nfrom fsmem.cli import main\ntry:\n    main(['--root', sys.argv[1], 'connect', 'cursor'])\n"
        "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'anyio', 'starlette')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(memory.root)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().endswith("[]")


# --write


OTHER_JSON = '{\n  "theme": "dark",\n  "mcpServers": {\n    "other": {\n      "command": "npx",\n      "args": [\n        "x"\n      ]\n    }\n  }\n}\n'


def test_write_cursor_keeps_other_servers_and_keys_byte_for_byte(memory, tmp_path):
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text(OTHER_JSON)
    result = run("--root", str(memory.root), "connect", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    after = config.read_text()
    document = json.loads(after)
    assert list(document) == ["theme", "mcpServers"]
    assert document["mcpServers"]["other"] == {"command": "npx", "args": ["x"]}
    assert document["mcpServers"]["fsmem"]["args"] == ["--root", str(memory.root), "mcp"]
    assert after.startswith(OTHER_JSON[: OTHER_JSON.index("    }\n  }\n}")])  # the old lines, unchanged, first
    assert f"+++ {config}" in result.stderr and '+    "fsmem": {' in result.stderr
    again = run("--root", str(memory.root), "connect", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert again.returncode == 0
    assert "already has this entry; nothing was changed" in again.stderr
    assert config.read_text() == after


def test_write_cursor_project_scope_goes_in_the_folder(memory, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    result = run(
        "--root", str(memory.root), "connect", "cursor", "--scope", "project", "--write", home=tmp_path, cwd=project
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["fsmem"]["command"] == FSMEM
    assert not (tmp_path / ".cursor").exists()


def test_write_refuses_an_existing_fsmem_entry_without_force(memory, tmp_path):
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    old = '{"mcpServers": {"fsmem": {"command": "fsmem"}, "other": {"command": "y"}}}'
    config.write_text(old)
    refused = run("--root", str(memory.root), "connect", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert refused.returncode == 2
    assert "already has an 'fsmem' server, different from this one; nothing was changed (--force replaces it)" in (
        refused.stderr
    )
    assert config.read_text() == old
    forced = run("--root", str(memory.root), "connect", "cursor", "--write", "--force", home=tmp_path, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["other"] == {"command": "y"}
    assert servers["fsmem"]["command"] == FSMEM


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (".cursor/mcp.json", '{"mcpServers": {"other": ', "is not valid JSON (Expecting value, line 1)"),
        (".cursor/mcp.json", "[1, 2]", "does not hold a JSON object"),
        (".cursor/mcp.json", '{"mcpServers": []}', "mcpServers is not a JSON object"),
        (".codex/config.toml", "[mcp_servers\nx = 1\n", "is not valid TOML"),
        (".codex/config.toml", "mcp_servers = 3\n", "mcp_servers is not a table"),
    ],
)
def test_write_refuses_a_file_it_cannot_parse_and_changes_nothing(memory, tmp_path, name, text, message):
    config = tmp_path / name
    config.parent.mkdir()
    config.write_text(text)
    client = "codex" if name.endswith(".toml") else "cursor"
    result = run("--root", str(memory.root), "connect", client, "--write", home=tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "nothing was changed" in result.stderr
    assert "Traceback" not in result.stderr
    assert config.read_text() == text
    assert sorted(p.name for p in config.parent.iterdir()) == [config.name]


CODEX = """# my codex settings
model = "o3"  # keep

[mcp_servers.other]
command = "npx"
args = ["-y", "other"]

[mcp_servers.other.env]
KEY = "v"
"""


def test_write_codex_appends_the_table_and_keeps_the_file_byte_for_byte(memory, tmp_path):
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX)
    result = run(
        "--root", str(memory.root), "--agent", "bob", "connect", "codex", "--write", home=tmp_path, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    after = config.read_text()
    assert after.startswith(CODEX)
    document = tomllib.loads(after)
    assert document["model"] == "o3"
    assert document["mcp_servers"]["other"] == {"command": "npx", "args": ["-y", "other"], "env": {"KEY": "v"}}
    assert document["mcp_servers"]["fsmem"]["args"] == ["--root", str(memory.root), "mcp", "--agent", "bob"]


def test_write_codex_force_replaces_only_the_fsmem_table(memory, tmp_path):
    config = tmp_path / "codex-home" / "config.toml"
    config.parent.mkdir()
    old = CODEX + '\n[mcp_servers.fsmem]\ncommand = "fsmem"\n\n[mcp_servers.fsmem.env]\nA = "b"\n\n[tail]\nx = 1\n'
    config.write_text(old)
    env = {"CODEX_HOME": str(config.parent)}
    refused = run("--root", str(memory.root), "connect", "codex", "--write", home=tmp_path, cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "--force replaces it" in refused.stderr
    assert config.read_text() == old
    forced = run(
        "--root", str(memory.root), "connect", "codex", "--write", "--force", home=tmp_path, cwd=tmp_path, env=env
    )
    assert forced.returncode == 0, forced.stderr
    after = config.read_text()
    assert after.startswith(CODEX)
    document = tomllib.loads(after)
    assert document["tail"] == {"x": 1}
    assert document["mcp_servers"]["fsmem"] == {"command": FSMEM, "args": ["--root", str(memory.root), "mcp"]}


def test_write_codex_refuses_an_inline_definition_it_cannot_extend(memory, tmp_path):
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    old = 'mcp_servers = { fsmem = { command = "fsmem" } }\n'
    config.write_text(old)
    result = run("--root", str(memory.root), "connect", "codex", "--write", "--force", home=tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot extend as text" in result.stderr
    assert config.read_text() == old


def test_write_claude_desktop_with_file_and_claude_code_user_scope_refused(memory, tmp_path):
    target = tmp_path / "desktop.json"
    result = run(
        "--root",
        str(memory.root),
        "connect",
        "claude-desktop",
        "--write",
        "--file",
        str(target),
        home=tmp_path,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(target.read_text())["mcpServers"]["fsmem"]["command"] == FSMEM
    code = run("--root", str(memory.root), "connect", "claude-code", "--write", home=tmp_path, cwd=tmp_path)
    assert code.returncode == 2
    assert "run the `claude mcp add` line (fsmem connect claude-code)" in code.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["desktop.json", "mem"]


def test_write_claude_code_project_scope_writes_mcp_json(memory, tmp_path):
    result = run(
        "--root",
        str(memory.root),
        "connect",
        "claude-code",
        "--scope",
        "project",
        "--write",
        home=tmp_path,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["fsmem"]["command"] == FSMEM


def test_write_follows_a_symlinked_config_file(memory, tmp_path):
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text("{}")
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").symlink_to(real)
    result = run("--root", str(memory.root), "connect", "cursor", "--write", home=tmp_path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".cursor" / "mcp.json").is_symlink()
    assert "fsmem" in json.loads(real.read_text())["mcpServers"]


# --server


@pytest.mark.parametrize("client", ["claude-code", "cursor", "codex"])
def test_server_entry_names_the_token_variable_and_holds_no_token(memory, tmp_path, client):
    secret = "fsmem_secret_token_value"
    args = ("connect", client, "--server", "https://memory.example/mcp")
    result = run(*args, home=tmp_path, cwd=tmp_path, env={"FSMEM_TOKEN": secret})
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout + result.stderr
    if client == "codex":
        assert tomllib.loads(result.stdout)["mcp_servers"]["fsmem"] == {
            "url": "https://memory.example/mcp",
            "bearer_token_env_var": "FSMEM_TOKEN",
        }
    elif client == "cursor":
        entry = json.loads(result.stdout)["mcpServers"]["fsmem"]
        assert entry == {"url": "https://memory.example/mcp", "headers": {"Authorization": "Bearer ${env:FSMEM_TOKEN}"}}
    else:
        assert shlex.split(result.stdout) == [
            "claude", "mcp", "add", "--scope", "user", "--transport", "http", "fsmem",
            "https://memory.example/mcp", "--header", "Authorization: Bearer ${FSMEM_TOKEN}",
        ]  # fmt: skip


def test_server_write_holds_no_token(memory, tmp_path):
    secret = "fsmem_secret_token_value"
    args = ("connect", "codex", "--server", "http://127.0.0.1:8765/mcp", "--write")
    result = run(*args, home=tmp_path, cwd=tmp_path, env={"FSMEM_TOKEN": secret})
    assert result.returncode == 0, result.stderr
    text = (tmp_path / ".codex" / "config.toml").read_text()
    assert secret not in text
    assert tomllib.loads(text)["mcp_servers"]["fsmem"]["bearer_token_env_var"] == "FSMEM_TOKEN"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("claude-desktop", "--server", "https://m.example/mcp"), "Claude Desktop adds remote servers in its Settings"),
        (("cursor", "--server", "file:///etc/passwd"), "--server needs an http:// or https:// address"),
        (("cursor", "--server", "https://m.example/mcp", "--agent", "bob"), "with --server, the token names the agent"),
    ],
)
def test_server_refusals(tmp_path, args, message):
    result = run("connect", *args, home=tmp_path, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


@given(st.text())
def test_toml_string_round_trips_every_character(value):
    assert tomllib.loads(f"v = {connect.toml_string(value)}")["v"] == value


def test_codex_file_is_toml_whatever_its_name_and_desktop_on_linux_needs_file(memory, tmp_path):
    target = tmp_path / "codex.json"
    result = run(
        "--root", str(memory.root), "connect", "codex", "--write", "--file", str(target), home=tmp_path, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert tomllib.loads(target.read_text())["mcp_servers"]["fsmem"]["command"] == FSMEM
    desktop = run("--root", str(memory.root), "connect", "claude-desktop", "--write", home=tmp_path, cwd=tmp_path)
    assert desktop.returncode == 2
    assert "Claude Desktop has no official app for Linux" in desktop.stderr
    assert desktop.stdout == ""


def test_desktop_config_paths_on_each_system(tmp_path):
    paths = connect.desktop_config_paths(tmp_path, None)
    assert paths["macOS"] == tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"
    assert paths["Windows"] == tmp_path / "AppData/Roaming/Claude/claude_desktop_config.json"
    assert paths["Linux"] is None
    assert connect.desktop_config_paths(tmp_path, "/appdata")["Windows"] == Path(
        "/appdata/Claude/claude_desktop_config.json"
    )
    assert [connect.system_name(p) for p in ("darwin", "win32", "linux")] == ["macOS", "Windows", "Linux"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=5).filter(lambda k: k != "mcpServers"), JSON_VALUES, max_size=3),
    st.dictionaries(st.text(max_size=5).filter(lambda k: k != "fsmem"), JSON_VALUES, max_size=3),
)
def test_merged_json_keeps_every_other_key_and_server(others, servers):
    document = {**others, "mcpServers": servers}
    before = json.dumps(document, indent=2).encode() + b"\n"
    entry = {"command": "/abs/fsmem", "args": ["--root", "/abs/memory", "mcp"]}
    after = connect.merged_json(Path("mcp.json"), before, entry, force=False)
    assert after is not None
    assert json.loads(after) == {**others, "mcpServers": {**servers, "fsmem": entry}}
    assert connect.merged_json(Path("mcp.json"), after, entry, force=False) is None


# -- claude-code --hooks ---------------------------------------------------------------------------------------


def test_hooks_prints_the_hook_block_as_json(memory, tmp_path):
    from fsmem.cli.hook import DEFAULT_TIMEOUT, hooks_config

    done = run("--root", str(memory.root), "connect", "claude-code", "--hooks", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    block = json.loads(done.stdout)
    assert block == hooks_config(memory.root, DEFAULT_TIMEOUT)
    assert sorted(block["hooks"]) == ["PreCompact", "SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    argv = shlex.split(block["hooks"]["SessionEnd"][0]["hooks"][0]["command"])
    assert argv == [FSMEM, "--root", str(memory.root), "hook", "claude-code", "--timeout", "10"]
    assert str(tmp_path / ".claude" / "settings.json") in done.stderr


def test_hooks_write_keeps_other_hooks_and_settings_and_a_second_write_changes_nothing(memory, tmp_path):
    settings = tmp_path / "proj" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    theirs = {"type": "command", "command": "echo started"}
    settings.write_text(
        json.dumps({"model": "opus", "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [theirs]}]}})
    )
    args = ("--root", str(memory.root), "connect", "claude-code", "--hooks", "--scope", "project", "--write")
    done = run(*args, home=tmp_path, cwd=tmp_path / "proj")
    assert done.returncode == 0, done.stderr
    assert f"+++ {settings}" in done.stderr and f"wrote {settings}" in done.stderr
    written = json.loads(settings.read_text())
    ours = json.loads(done.stdout)["hooks"]["SessionStart"][0]
    assert written["model"] == "opus"
    assert written["hooks"]["SessionStart"] == [{"matcher": "startup", "hooks": [theirs]}, ours]
    assert written["hooks"]["SessionEnd"] == written["hooks"]["PreCompact"] == written["hooks"]["Stop"] == [ours]
    before = settings.read_bytes()
    again = run(*args, home=tmp_path, cwd=tmp_path / "proj")
    assert again.returncode == 0 and "already runs these hooks; nothing was changed" in again.stderr
    assert settings.read_bytes() == before


def test_hooks_write_replaces_another_fsmem_hook_only_with_force(memory, tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = {"type": "command", "command": "/old/venv/bin/fsmem --root /m hook claude-code"}
    settings.write_text(json.dumps({"hooks": {"SessionEnd": [{"hooks": [old]}]}}))
    args = ("--root", str(memory.root), "connect", "claude-code", "--hooks", "--write")
    refused = run(*args, home=tmp_path, cwd=tmp_path)
    assert refused.returncode == 2 and "already runs another fsmem hook on SessionEnd" in refused.stderr
    assert json.loads(settings.read_text()) == {"hooks": {"SessionEnd": [{"hooks": [old]}]}}
    forced = run(*args, "--force", home=tmp_path, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    [group] = json.loads(settings.read_text())["hooks"]["SessionEnd"]
    assert group == json.loads(forced.stdout)["hooks"]["SessionEnd"][0]


def test_hooks_is_for_claude_code_only(memory, tmp_path):
    done = run("--root", str(memory.root), "connect", "cursor", "--hooks", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 2 and "--hooks is for claude-code" in done.stderr


def test_no_ask_to_save_leaves_the_stop_hook_out_and_removes_only_fsmem_s(memory, tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"type": "command", "command": "notify-send done"}
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [theirs]}]}}))
    args = ("--root", str(memory.root), "connect", "claude-code", "--hooks", "--write")
    done = run(*args, home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stop = json.loads(settings.read_text())["hooks"]["Stop"]
    assert stop == [{"hooks": [theirs]}, json.loads(done.stdout)["hooks"]["Stop"][0]]
    left_out = run(*args, "--no-ask-to-save", home=tmp_path, cwd=tmp_path)
    assert left_out.returncode == 0, left_out.stderr
    assert "Stop" not in json.loads(left_out.stdout)["hooks"]
    written = json.loads(settings.read_text())["hooks"]
    assert written["Stop"] == [{"hooks": [theirs]}]
    assert sorted(written) == ["PreCompact", "SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    again = run(*args, "--no-ask-to-save", home=tmp_path, cwd=tmp_path)
    assert "nothing was changed" in again.stderr


def test_no_ask_to_save_goes_with_hooks(memory, tmp_path):
    done = run("--root", str(memory.root), "connect", "claude-code", "--no-ask-to-save", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 2 and "--no-ask-to-save goes with --hooks" in done.stderr


@pytest.mark.parametrize("hooks", [False, True])
def test_write_refuses_a_config_link_that_leads_to_no_file_and_makes_nothing_where_it_leads(memory, tmp_path, hooks):
    """A project's `.claude/settings.json` or `.mcp.json` comes with the project: as a link to a missing file in
    a missing folder, `--write` made that folder and wrote the file wherever the link said; now it exits 2."""
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere" / "deeper" / "x.json"
    name = project / (".claude/settings.json" if hooks else ".mcp.json")
    name.symlink_to(elsewhere)
    args = ("--hooks",) if hooks else ()
    result = run(
        "--root", str(memory.root), "connect", "claude-code", *args, "--scope", "project", "--write",
        home=tmp_path, cwd=project,
    )  # fmt: skip
    assert result.returncode == 2 and "which is no file; nothing was changed" in result.stderr, result.stderr
    assert not (tmp_path / "elsewhere").exists() and name.is_symlink()
    (tmp_path / "elsewhere").mkdir()
    elsewhere.parent.mkdir()
    assert run(
        "--root", str(memory.root), "connect", "claude-code", *args, "--scope", "project", "--write",
        home=tmp_path, cwd=project,
    ).returncode == 2  # fmt: skip
    assert not elsewhere.exists()


def test_the_diff_a_write_shows_keeps_the_files_secrets_out(memory, tmp_path):
    # before: a settings file written on one line (as a tool leaves it) is reformatted by the write, so the diff
    # on stderr showed every line of it, an `env` API key among them, into the terminal and any log of it
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    key = "sk-ant-api03-" + "Q7vT2mX9kR4pL8wZ3nB6yC1dF5gH0jK2sA4eU7iO9rY3tW6qE8zX1cV5bN7mM2lP4-AbCdEfGh"
    settings.write_text(json.dumps({"env": {"ANTHROPIC_API_KEY": key}, "theme": "dark"}))
    done = run("--root", str(memory.root), "connect", "claude-code", "--hooks", "--write", home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"ANTHROPIC_API_KEY"' in done.stderr and "[REDACTED:" in done.stderr  # the line is shown, not the key
    assert key not in done.stderr and key[:24] not in done.stderr
    assert json.loads(settings.read_text())["env"] == {"ANTHROPIC_API_KEY": key}  # the file keeps it
