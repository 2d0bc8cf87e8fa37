"""The `distill` MCP prompt of `fsmem mcp`: listed and fetched by the MCP SDK's own stdio client, followed as it
says (one write call per part), after which no episode is left, for the prompt or for `fsmem distill`; and
listed by the MCP Inspector's CLI where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from child_env import without_fsmem
from import_samples import CHATGPT, chatgpt_export
from test_distill import FSMEM, NOW, command, run

from fsmem import Memory

mcp = pytest.importorskip("mcp")
from test_mcp_server import run_session  # noqa: E402

pytestmark = pytest.mark.slow
PART = re.compile(r"^Part: EPISODE=(\S+) \(.*\), lines A-B=(\d+-\d+) of \d+; PATH=(\S+); WHO=(\S+)$", re.M)


@pytest.fixture
def root(tmp_path):
    root = Memory.init(tmp_path / "mem").root
    assert run(root, "import", "chatgpt", str(chatgpt_export(tmp_path / "export", CHATGPT))).returncode == 0
    return root


def test_the_prompt_is_listed_fetched_and_followed_then_nothing_is_left(root):
    from mcp.shared.exceptions import MCPError

    async def actions(session):
        listed = await session.list_prompts()
        small = await session.get_prompt("distill", {"max_tokens": "300"})
        whole = await session.get_prompt("distill", {})
        text = whole.messages[0].content.text
        written = []
        for episode, lines, path, who in PART.findall(text):
            said = text.split(f"PATH={path}; WHO={who}\n```text\n", 1)[1].split("\n```", 1)[0]
            body = "## topic/Agent notes\n" + "".join(f"- Heard: {line}\n" for line in said.splitlines()[:1])
            fields = {"type": "episodic", "distilled_from": episode, "distilled_lines": lines, "distilled_by": who}
            written.append(await session.call_tool("write", {"path": path, "body": body, "set": fields}))
        after = await session.get_prompt("distill", {})
        try:
            await session.get_prompt("nothing", {})
        except MCPError as exc:
            return listed, small, text, written, after, exc
        return listed, small, text, written, after, None

    listed, small, text, written, after, refused = run_session(root, actions=actions)
    assert [(p.name, [a.name for a in p.arguments]) for p in listed.prompts] == [("distill", ["max_tokens"])]
    assert "write(path=PATH, body=NOTES" in text and "`- key: value`" in text
    assert [m[0] for m in PART.findall(text)] == [
        "sessions/2025/01/01/chatgpt-6781a0c2-1111.md",
        "sessions/2025/01/01/chatgpt-6781a0c2-2222.md",
    ]
    assert "user: We move billing to Stripe in March." in text
    small_text = small.messages[0].content.text
    assert "left out at the token budget: ask for this prompt again" in small_text
    assert Memory(root).tokens.count(small_text) <= 300
    assert [w.is_error for w in written] == [False, False], [w.content[0].text for w in written]
    assert after.messages[0].content.text == "Every episode of the memory is distilled: nothing to do."
    assert refused is not None and str(refused) == "no prompt 'nothing'; fsmem offers distill"
    # what the agent wrote counts for the operator's command too
    assert run(root, "distill", "--command", command("keyed")).returncode == 1


def test_the_inspector_cli_lists_the_prompt_where_it_is_installed(root):
    """`npx --no-install` never downloads: run where the inspector is installed ($MCP_INSPECTOR_DIR, a folder whose
    node_modules holds it, or globally); skipped where it is not."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed")
    args = [npx, "--no-install", "@modelcontextprotocol/inspector", "--cli", FSMEM, "--root", str(root), "mcp"]
    env = without_fsmem()
    try:
        done = subprocess.run(
            [*args, "--method", "prompts/list"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=os.environ.get("MCP_INSPECTOR_DIR") or root,
            env={**env, "FSMEM_NOW": NOW},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP Inspector did not answer")
    if done.returncode != 0 and ("missing packages" in done.stderr or "could not determine" in done.stderr):
        pytest.skip("the MCP Inspector is not installed (set MCP_INSPECTOR_DIR to where it is)")
    assert done.returncode == 0, done.stderr
    assert [p["name"] for p in json.loads(done.stdout)["prompts"]] == ["distill"]


def test_a_scoped_agent_is_refused_the_prompt(root):
    from mcp.shared.exceptions import MCPError

    async def actions(session):
        try:
            await session.get_prompt("distill", {})
        except MCPError as exc:
            return exc
        return None

    refused = run_session(root, "--path", "topics/", actions=actions)
    assert refused is not None and "this agent has a scope" in str(refused)
    assert sys.executable  # the server ran under this interpreter
