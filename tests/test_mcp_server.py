"""`fsmem mcp`: the real server process, driven by the MCP SDK's own stdio client."""

from __future__ import annotations

import sys

import preloaded
import pytest
from test_tools import NOW, build_memory, expected_names, snapshot

from fsmem import Memory
from fsmem.agents import tools
from fsmem.spec import tool_names
from fsmem.store import retrieval_log

mcp = pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.sdk_face]  # the SDK's stdio client: run at its floor too


def run_session(root, *options, actions):
    """Start `fsmem mcp` on `root`, initialise a client session, run `actions(session)`, return its result.

    The server is a real process forked from a parent that has made its imports (tests/preloaded.py), through a
    launcher that hands it the SDK's pipes; the example configuration's test starts `python -m fsmem` itself."""
    command, *args = preloaded.launcher(["--root", str(root), "mcp", *options])
    params = StdioServerParameters(command=command, args=args, env={"FSMEM_NOW": NOW})

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                return await actions(session)

    return anyio.run(main)


def text_of(result) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def test_list_and_call_every_tool_over_stdio(tmp_path):
    root = build_memory(tmp_path)
    calls = [
        ("ls", {"path": "entities/people"}),
        ("grep", {"pattern": "proration", "ignore_case": True}),
        ("read", {"path": "topics/billing.md", "lines": "14:17"}),
        ("note", {"text": "- employer: Globex", "subject": "people/Adam Smith"}),
        ("write", {"path": "topics/support.md", "body": "# Support\n", "set": {"description": "Support hours"}}),
        ("edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"}),
        ("grep", {"pattern": 7}),
        ("read", {"path": "../../etc/passwd"}),
        ("edit", {"path": "topics/billing.md", "old": "- ", "new": "* "}),
    ]

    async def actions(session):
        listed = await session.list_tools()
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
        return listed, results

    listed, results = run_session(root, actions=actions)
    memory = Memory(root)
    assert [t.name for t in listed.tools] == expected_names(memory)
    for served, defined in zip(listed.tools, tools.definitions(memory), strict=False):
        assert (served.description, served.input_schema) == (defined["description"], defined["parameters"])
    assert [t.name for t in listed.tools if t.annotations.read_only_hint] == tool_names(writes=False, history=False)
    assert [t.name for t in listed.tools if t.annotations.destructive_hint] == ["write", "edit"]
    schemas = {t.name: t.output_schema for t in listed.tools}
    assert all(s is not None and s["required"] == ["rows", "truncated"] for s in schemas.values())
    assert "next_offset" in schemas["ls"]["properties"] and "next_lines" in schemas["read"]["properties"]
    assert set(schemas["note"]["properties"]) == {"rows", "truncated", "cut_by"}

    texts = [text_of(r) for r in results]
    errors = [r.is_error for r in results]
    assert errors == [False] * 6 + [True] * 3
    # the SDK client checked each answer's structured content against its tool's output schema
    assert [r.structured_content for r in results[:2]] == [
        {"rows": 2, "truncated": False},
        {"rows": 3, "truncated": False},
    ]
    assert all(r.structured_content is None for r in results[6:])
    assert texts[0].splitlines()[-1] == "[files 1-2 of 2]"
    assert texts[1].splitlines()[-2:] == ["15:- proration: daily, for seat changes mid-cycle", "[matches 1-3 of 3]"]
    assert "    17\t- payment terms: net 30" in texts[2]
    note = f"sessions/2026/11/30/default-{memory.host_id}.md"
    assert texts[3] == f"noted in {note} at line 10 (new file)"
    assert texts[4].startswith("wrote topics/support.md (new file); version ")
    assert texts[5].startswith("edited topics/billing.md at line 17; version ")
    assert texts[6] == "error: argument 'pattern' must be a string, not integer"
    assert texts[7] == "error: path '../../etc/passwd' escapes the memory root"
    assert texts[8].startswith("error: the old text matches 5 times in topics/billing.md")
    assert "- payment terms: net 45" in (root / "topics/billing.md").read_text()
    assert "- employer: Globex" in (root / note).read_text()

    logged = list(retrieval_log.records(root))
    assert [r["tool"] for r in logged] == [name for name, _ in calls]
    assert [bool(r.get("error")) for r in logged] == errors


def test_the_context_is_a_resource_and_an_unknown_one_is_a_clear_error(tmp_path):
    from mcp.shared.exceptions import MCPError

    root = build_memory(tmp_path)

    async def actions(session):
        listed = await session.list_resources()
        context = await session.read_resource("fsmem://context")
        try:
            await session.read_resource("fsmem://nothing")
        except MCPError as exc:
            return listed, context, exc
        return listed, context, None

    listed, context, refused = run_session(root, actions=actions)
    assert [(r.name, str(r.uri), r.mime_type) for r in listed.resources] == [
        ("context", "fsmem://context", "text/markdown")
    ]
    assert context.contents[0].text == Memory(root).context().to_text()
    assert refused is not None and str(refused) == "no resource 'fsmem://nothing'; fsmem offers fsmem://context"


def test_read_only_server_offers_no_writes_and_changes_nothing(tmp_path):
    root = build_memory(tmp_path)
    before = snapshot(root)

    async def actions(session):
        listed = await session.list_tools()
        write = await session.call_tool("write", {"path": "topics/x.md", "body": "x"})
        escape = await session.call_tool("read", {"path": "/etc/passwd"})
        missing = await session.call_tool("grep", {})
        return listed, write, escape, missing

    listed, write, escape, missing = run_session(root, "--read-only", actions=actions)
    readers = expected_names(Memory(root), writes=False)
    assert [t.name for t in listed.tools] == readers
    assert (
        write.is_error
        and text_of(write) == f"error: this agent is read-only; it may use {', '.join(readers)}, not write"
    )
    assert escape.is_error and "is absolute; give a path relative to the memory root" in text_of(escape)
    assert missing.is_error and text_of(missing).startswith("error: grep needs the argument 'pattern'")
    assert snapshot(root) == before


def test_the_example_client_configuration_starts_a_working_server(tmp_path):
    import json
    from pathlib import Path

    root = build_memory(tmp_path)
    config = json.loads((Path(__file__).resolve().parents[1] / "examples" / "mcp_config.json").read_text())
    entry = config["mcpServers"]["fsmem-reviewer"]
    assert entry["command"] == "fsmem"
    args = [str(root) if a == "/path/to/memory" else a for a in entry["args"]]
    params = StdioServerParameters(command=sys.executable, args=["-m", "fsmem", *args])

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                return await session.list_tools()

    listed = anyio.run(main)
    assert [t.name for t in listed.tools] == expected_names(Memory(root, agent="reviewer"), writes=False)


def test_a_search_over_mcp_is_logged_once(tmp_path):
    """Before 0.2 every MCP search was logged twice, so `fsmem stats` counted it double."""
    root = build_memory(tmp_path)

    async def actions(session):
        return await session.call_tool("search", {"query": "proration"})

    result = run_session(root, actions=actions)
    assert not result.is_error
    records = list(retrieval_log.records(root))
    assert [r["tool"] for r in records] == ["search"]
    assert Memory(root).stats().tools[0].calls == 1


def test_a_scoped_server_sees_only_its_prefix(tmp_path):
    root = build_memory(tmp_path)

    async def actions(session):
        return [
            await session.call_tool("ls", {}),
            await session.call_tool("read", {"path": "entities/orgs/acme.md"}),
        ]

    listed, refused = run_session(root, "--path", "topics/", actions=actions)
    assert [line.split()[0] for line in text_of(listed).splitlines()] == [
        "topics/billing.md",
        "topics/deployments.md",
        "[files",
    ]
    assert refused.is_error and "outside this agent's scope (topics/)" in text_of(refused)


def test_requests_written_before_the_client_closes_its_side_are_all_answered(tmp_path):
    """A client may write its requests and close stdin (`fsmem mcp < requests`): each is answered before the
    server ends, a write among them included. The SDK cancelled what was running once its input ended, so the
    note was written and no answer came for it or for anything after `initialize`."""
    import json
    import subprocess

    from child_env import without_fsmem

    root = Memory.init(tmp_path / "mem").root
    requests = [
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "note", "arguments": {"text": "zephyr from a pipe"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "grep", "arguments": {"pattern": "zephyr"}},
        },
        {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ls", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}},  # need not be answered
    ]
    env = {**without_fsmem(), "FSMEM_NOW": NOW}
    done = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(root), "mcp"],
        input="".join(json.dumps(r) + "\n" for r in requests).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert {"init", 2, 3, "list"} <= set(answers), answers.keys()
    assert "error" not in answers[2] and "noted in sessions/" in answers[2]["result"]["content"][0]["text"]
    assert "error" not in answers[3] and "error" not in answers["list"]
    assert Memory(root).grep("zephyr from a pipe").matches  # the note the answer says was written


@pytest.mark.parametrize("call", [False, True], ids=["idle", "building"])
def test_ctrl_c_ends_the_server_at_once_with_its_input_still_open(tmp_path, call):
    """Ctrl-C (SIGINT) ends `fsmem mcp` as SIGTERM does, while it waits for the client's next line on an open
    input, and in the middle of a first search's build (held there by FSMEM_PAUSE_AT); the next search goes on
    from what the build committed. It waited for the next line, or the input's end, however long."""
    import json
    import signal
    import subprocess
    import time

    from child_env import without_fsmem

    from fsmem.store.kill_points import PAUSE_ENV

    memory = Memory.init(tmp_path / "mem")
    for i in range(3):
        (memory.root / "topics").mkdir(exist_ok=True)
        (memory.root / "topics" / f"zephyr-{i}.md").write_text(f"# Zephyr {i}\n\n- the zephyr plan {i}\n")
    env = {**without_fsmem(), "FSMEM_NOW": NOW, PAUSE_ENV: "search-parsed"}
    server = subprocess.Popen(
        [sys.executable, "-m", "fsmem", "--root", str(memory.root), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        hello = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}]
        lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if call:
            search = {"name": "search", "arguments": {"query": "zephyr plan"}}
            lines.append({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search})
        assert server.stdin is not None and server.stdout is not None and server.stderr is not None
        server.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1
        if call:
            assert b"paused at search-parsed" in server.stderr.readline()
        asked = time.monotonic()
        server.send_signal(signal.SIGINT)
        assert server.wait(5) == -signal.SIGINT
        assert time.monotonic() - asked < 5
    finally:
        server.kill()
        server.wait()
    found = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(memory.root), "search", "zephyr plan"],
        capture_output=True,
        env={**without_fsmem(), "FSMEM_NOW": NOW},
        timeout=60,
    )
    assert found.returncode == 0 and b"zephyr-" in found.stdout, found
