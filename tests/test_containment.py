"""Containment: every face that takes a path, the same hostile payloads, and nothing outside the memory files read or changed.

The faces: `Memory` methods, the CLI (every payload through its entry point, and
a few of them for every command as a real subprocess), `tools.call`, the MCP
server (driven by the MCP SDK's own stdio client), the memory server over HTTP
(`fsmem serve`, raw JSON-RPC posts with a token), `MemoryTool` mapped onto an
fsmem memory (`MemoryTool.over(memory)`), and the Anthropic SDK drop-in classes
(sync and async) over a folder whose `memories/` is an fsmem memory. Each
payload must get a clear refusal within a time limit; afterwards the tree
(every file, hidden ones and links included) and the files outside it hash as
before, and no answer carries a secret planted outside the memory files.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from child_env import without_fsmem
from hostile import FOLDER_AS_FILE, SECRETS, build, payloads, tree_state

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import FsmemError, MemoryToolError

FSMEM = str(Path(sys.executable).with_name("fsmem"))
TIME_LIMIT = 20.0


@pytest.fixture
def hostile(tmp_path: Path):
    base, root, outside = build(tmp_path)
    before = (tree_state(root), tree_state(outside))
    yield base, root, outside
    assert (tree_state(root), tree_state(outside)) == before, "something outside the memory files changed"


def bounded(call: Callable[[], Any], limit: float = TIME_LIMIT) -> tuple[str, Any]:
    """("ok", result) or ("error", exception), failing the test if the call does not return within `limit`."""
    outcome: list[tuple[str, Any]] = []

    def run() -> None:
        try:
            outcome.append(("ok", call()))
        except BaseException as exc:  # judged by the caller
            outcome.append(("error", exc))

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(limit)
    assert outcome, f"no answer within {limit:g} s"
    assert time.monotonic() - started < limit
    return outcome[0]


def assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, text[:300]


def _environment() -> dict[str, str]:
    return without_fsmem()


# -- the positive control: the same faces do work on a memory file ------------------------------
def test_the_faces_work_on_a_memory_file(hostile):
    _base, root, _outside = hostile
    memory = Memory(root)
    assert memory.read("topics/billing.md").lines[-1] == (5, "- proration: daily")
    assert [m.path for m in memory.grep("proration").matches] == ["topics/billing.md"]
    assert [e.path for e in memory.ls().entries] == ["README.md", "profile/identity.md", "topics/billing.md"]
    assert not tools.call(memory, "read", {"path": "topics/billing.md"}).is_error
    assert "proration" in MemoryTool.over(memory).view("/memories/topics/billing.md")


# -- Memory --------------------------------------------------------------------------------------
MEMORY_OPS: dict[str, Callable[[Memory, str], Any]] = {
    "read": lambda m, p: m.read(p),
    "ls": lambda m, p: m.ls(p),
    "grep": lambda m, p: m.grep("SECRET", [p]),
    "check": lambda m, p: m.check(p),
    "meta": lambda m, p: m.meta(p),
    "write": lambda m, p: m.write(p, "SECRET-OVERWRITE\n"),
    "edit": lambda m, p: m.edit(p, old="proration", new="x"),
    "rm": lambda m, p: m.rm(p),
    "mv from": lambda m, p: m.mv(p, "topics/moved.md"),
    "mv to": lambda m, p: m.mv("topics/billing.md", p),
}
FILE_OPS = {"read", "meta", "write", "edit"}


def test_memory_methods_refuse_every_payload(hostile):
    _base, root, outside = hostile
    memory = Memory(root)
    for name, op in MEMORY_OPS.items():
        for what, path in payloads(outside, files=name in FILE_OPS):
            kind, value = bounded(lambda op=op, path=path: op(memory, path))
            assert kind == "error", f"{name} {what}: answered {value!r}"
            assert isinstance(value, FsmemError), f"{name} {what}: {type(value).__name__}: {value}"
            assert_no_secret([str(value)])


# -- the CLI ----------------------------------------------------------------------------------------
def _argv(path: str) -> bytes | None:
    """A payload as a command-line argument: a lone surrogate travels as the bytes a shell would pass."""
    if "\x00" in path:
        return None  # the operating system cannot pass a NUL byte in an argument at all
    if "\ud800" in path:
        return path.replace("\ud800", "").encode() + b"\xed\xa0\x80"  # an encoded surrogate: not UTF-8
    return os.fsencode(path)


CLI_OPS: dict[str, Callable[[bytes], list[bytes]]] = {
    "read": lambda p: [b"read", p],
    "ls": lambda p: [b"ls", p],
    "grep": lambda p: [b"grep", b"SECRET", p],
    "write": lambda p: [b"write", p],
    "edit": lambda p: [b"edit", p, b"--old", b"proration", b"--new", b"x"],
    "mv": lambda p: [b"mv", p, b"topics/moved.md"],
}  # check and rm resolve their path as ls and mv do; the Memory test gives them every payload


# The payloads every command also gets as a real `fsmem` process: bytes the OS passes as they are (a lone
# surrogate's, a newline's), a link out, a FIFO; the process must answer as the same command line run here does.
IN_A_PROCESS = {"lone surrogate in a name", "newline in a name", "folder link out of the root", "FIFO named .md"}


def run_here(argv: list[bytes], stdin: bytes) -> tuple[int, bytes, bytes]:
    """The command line run in this process through `fsmem.cli.dispatch`, the path and error boundary of the
    `fsmem` script (as a running watcher answers a command): exit code, stdout, stderr."""
    from fsmem.cli import dispatch

    streams = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    given = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    printed = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", write_through=True)
    warned = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    sys.stdin, sys.stdout, sys.stderr = given, printed, warned
    try:
        dispatch([os.fsdecode(word) for word in argv[1:]])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # what a process would print as a traceback
        code = 1
        err.write(b"Traceback\n" + traceback.format_exc().encode("utf-8", "backslashreplace"))
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_cli_refuses_every_payload_with_one_line_and_exit_2(hostile):
    _base, root, outside = hostile
    env = without_fsmem()
    jobs = []
    for name, args in CLI_OPS.items():
        for what, path in payloads(outside, files=name in ("read", "write", "edit")):
            argv = _argv(path)
            if argv is not None:
                jobs.append((name, what, [FSMEM.encode(), b"--root", os.fsencode(root), *args(argv)]))

    def run(job):
        name, what, argv = job
        done = subprocess.run(argv, input=b"SECRET-OVERWRITE\n", capture_output=True, env=env, timeout=60)
        return name, what, (done.returncode, done.stdout, done.stderr)

    results = []
    for name, what, argv in jobs:
        kind, answer = bounded(lambda argv=argv: run_here(argv, b"SECRET-OVERWRITE\n"))
        assert kind == "ok", f"{name} {what}: {answer!r}"
        results.append((name, what, answer))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        processes = list(pool.map(run, [job for job in jobs if job[1] in IN_A_PROCESS]))
    assert len(results) == len(jobs) > 150 and len(processes) == len(CLI_OPS) * len(IN_A_PROCESS)
    here = {(name, what): answer for name, what, answer in results}
    for name, what, answer in processes:
        assert answer == here[name, what], f"{name} {what}: as a process {answer!r}, here {here[name, what]!r}"
    for name, what, (code, stdout, stderr_bytes) in results + processes:
        stderr = stderr_bytes.decode("utf-8", "replace")
        assert code == 2, f"{name} {what}: exit {code}: {stderr}"
        assert "Traceback" not in stderr and stderr.startswith("fsmem: error: "), f"{name} {what}: {stderr}"
        assert stderr.count("\n") == 1, f"{name} {what}: {stderr!r}"
        assert_no_secret([stdout.decode("utf-8", "replace"), stderr])


# -- the tool dispatcher ------------------------------------------------------------------------
def tool_calls(outside: Path) -> list[tuple[str, str, dict[str, Any]]]:
    calls = []
    for what, path in payloads(outside):
        calls += [
            ("read", what, {"path": path}),
            ("list", what, {"path": path}),
            ("grep", what, {"pattern": "SECRET", "paths": [path]}),
            ("write", what, {"path": path, "body": "SECRET-OVERWRITE\n"}),
            ("edit", what, {"path": path, "old": "proration", "new": "x"}),
        ]
    what, path = FOLDER_AS_FILE
    calls += [("read", what, {"path": path}), ("write", what, {"path": path, "body": "x"})]
    return calls


def test_tools_call_answers_every_payload_with_an_error(hostile):
    _base, root, outside = hostile
    memory = Memory(root)
    for name, what, arguments in tool_calls(outside):
        kind, answer = bounded(lambda name=name, arguments=arguments: tools.call(memory, name, arguments))
        assert kind == "ok", f"{name} {what}: raised {answer!r}"
        assert answer.is_error and answer.text.startswith("error: "), f"{name} {what}: {answer.text}"
        answer.text.encode("utf-8")  # always text a client can send on
        assert_no_secret([answer.text])


# -- MCP, through the SDK's own client --------------------------------------------------------------
def ascii_json(self, **options) -> str:
    """The client's JSON, escaped to ASCII: how a client in another language sends a lone surrogate (`\\ud800`)."""
    return json.dumps(self.model_dump(mode="json", **options), ensure_ascii=True, separators=(",", ":"))


@pytest.mark.slow
def test_mcp_answers_every_payload_with_an_error(hostile, monkeypatch):
    pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
    import anyio
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # pydantic cannot write a lone surrogate as UTF-8; a JSON escape carries it as any client may send it.
    monkeypatch.setattr(types.JSONRPCRequest, "model_dump_json", ascii_json)
    _base, root, outside = hostile
    calls = tool_calls(outside)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fsmem", "--root", str(root), "mcp"], env=_environment()
    )

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                results = []
                for name, _what, arguments in calls:
                    with anyio.fail_after(TIME_LIMIT):
                        results.append(await session.call_tool(name, arguments))
                return results

    results = anyio.run(main)
    for (name, what, _arguments), result in zip(calls, results, strict=True):
        text = result.content[0].text
        assert result.is_error and text.startswith("error: "), f"{name} {what}: {text}"
        assert_no_secret([text])


# -- the memory server, over HTTP -------------------------------------------------------------------
@pytest.mark.slow
def test_the_server_answers_every_payload_with_an_error(hostile, tmp_path):
    pytest.importorskip("uvicorn")
    import httpx2

    from fsmem.server.tokens import TokenStore

    _base, root, outside = hostile
    store = TokenStore(tmp_path / "server" / "tokens.json")
    token = store.create(memory="hostile", agent="researcher").token
    config = tmp_path / "server" / "server.yaml"
    config.write_text(
        f"memories:\n  hostile: {root}\ntokens: {store.path}\nport: 0\nlimits:\n  rate_per_second: 100000\n  burst: 100000\n"
    )
    server = subprocess.Popen(
        [FSMEM, "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True, env=_environment()
    )
    try:
        url = None
        while url is None:  # warnings may come first
            url = json.loads(server.stderr.readline()).get("url")
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        headers["Content-Type"] = "application/json"
        with httpx2.Client(headers=headers, timeout=TIME_LIMIT) as http:
            for number, (name, what, arguments) in enumerate(tool_calls(outside)):
                message = {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                }
                body = json.dumps(message, ensure_ascii=True).encode()  # a lone surrogate travels as a JSON escape
                answer = http.post(url, content=body)
                data = answer.json()  # a lone surrogate too gets the tool's answer (the door holds it for the tool)
                text = data["result"]["content"][0]["text"]
                assert answer.status_code == 200 and data["result"]["isError"] and text.startswith("error: "), (
                    f"{name} {what}: {text}"
                )
                assert_no_secret([text])
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0


# -- Claude's memory tool mapped onto the memory, and the SDK drop-in classes ------------------------
def memory_tool_commands(outside: Path) -> list[tuple[str, str, dict[str, Any]]]:
    commands = []
    for what, path in payloads(outside):
        full = path if path.startswith("/") else "/memories/" + path
        commands += [
            ("view", what, {"path": full}),
            ("create", what, {"path": full, "file_text": "SECRET-OVERWRITE\n"}),
            ("str_replace", what, {"path": full, "old_str": "proration", "new_str": "x"}),
            ("insert", what, {"path": full, "insert_line": 0, "insert_text": "x"}),
            ("delete", what, {"path": full}),
            ("rename", what, {"old_path": full, "new_path": "/memories/topics/moved.md"}),
            ("rename", what, {"old_path": "/memories/topics/billing.md", "new_path": full}),
        ]
    what, path = FOLDER_AS_FILE
    for command in ("create", "str_replace", "insert"):
        arguments = {"path": f"/memories/{path}", "file_text": "x", "old_str": "a", "new_str": "b"}
        arguments.update(insert_line=0, insert_text="x")
        keep = {"create": ("path", "file_text"), "str_replace": ("path", "old_str", "new_str")}
        wanted = keep.get(command, ("path", "insert_line", "insert_text"))
        commands.append((command, what, {k: arguments[k] for k in wanted}))
    return commands


def test_memory_tool_over_a_memory_refuses_every_payload(hostile):
    _base, root, outside = hostile
    tool = MemoryTool.over(Memory(root))
    for command, what, arguments in memory_tool_commands(outside):
        kind, value = bounded(lambda command=command, arguments=arguments: getattr(tool, command)(**arguments))
        assert kind == "error", f"{command} {what}: answered {value!r}"
        assert isinstance(value, MemoryToolError), f"{command} {what}: {type(value).__name__}: {value}"
        assert_no_secret([str(value)])
    listing = tool.view("/memories")
    for hidden in ("fsmem.yaml", ".git", ".fsmem", "gitlink", "conflink", "statelink", "outlink", "fifo", "loop"):
        assert hidden not in listing


BACKSLASHED = [  # '\\' is a folder separator to the containment rule: read literally, `..` climbed one folder more
    ("backslash, then dot-dot to the configuration", "/memories/a\\b/../fsmem.yaml"),
    ("backslashes, then dot-dot to the configuration", "/memories/a\\b\\c/../../fsmem.yaml"),
]


def test_memory_tool_over_a_memory_reads_a_backslash_as_the_rule_does(hostile):
    _base, root, _outside = hostile
    tool = MemoryTool.over(Memory(root))
    for what, path in BACKSLASHED:
        for command, arguments in [
            ("view", {"path": path}),
            ("str_replace", {"path": path, "old_str": "tokenizer", "new_str": "x"}),
            ("insert", {"path": path, "insert_line": 0, "insert_text": "x"}),
            ("delete", {"path": path}),
            ("rename", {"old_path": path, "new_path": "/memories/topics/moved.md"}),
        ]:
            kind, value = bounded(lambda command=command, arguments=arguments: getattr(tool, command)(**arguments))
            assert kind == "error", f"{command} {what}: answered {value!r}"
            assert isinstance(value, MemoryToolError), f"{command} {what}: {type(value).__name__}: {value}"
            assert_no_secret([str(value)])
    assert tool.is_fsmem


def test_memory_tool_over_a_memory_writes_where_the_other_faces_read(tmp_path: Path):
    memory = Memory.init(tmp_path / "m")
    tool = MemoryTool.over(memory)
    tool.create("/memories/topics\\tea.md", "green\n")
    assert memory.read("topics/tea.md").lines[-1][1] == "green"
    assert not (tmp_path / "m" / "topics\\tea.md").exists()


def sdk_command(command: str, arguments: dict[str, Any]):
    from anthropic.types.beta import (
        BetaMemoryTool20250818CreateCommand as Create,
        BetaMemoryTool20250818DeleteCommand as Delete,
        BetaMemoryTool20250818InsertCommand as Insert,
        BetaMemoryTool20250818RenameCommand as Rename,
        BetaMemoryTool20250818StrReplaceCommand as StrReplace,
        BetaMemoryTool20250818ViewCommand as View,
    )

    kind = {
        "view": View,
        "create": Create,
        "str_replace": StrReplace,
        "insert": Insert,
        "delete": Delete,
        "rename": Rename,
    }[command]
    return kind(command=command, **arguments)


def test_anthropic_drop_in_classes_refuse_every_payload(hostile):
    pytest.importorskip("anthropic", reason="needs the anthropic extra: pip install 'fsmem[anthropic]'")
    import anyio
    from anthropic.lib.tools import ToolError

    from fsmem.integrations.anthropic import AsyncFsmemMemoryTool, FsmemMemoryTool

    base, _root, outside = hostile
    sync_tool, async_tool = FsmemMemoryTool(str(base)), AsyncFsmemMemoryTool(str(base))
    for command, what, arguments in memory_tool_commands(outside):
        sdk = sdk_command(command, arguments)
        for label, call in (
            ("sync", lambda sdk=sdk: sync_tool.execute(sdk)),
            ("async", lambda sdk=sdk: anyio.run(async_tool.execute, sdk)),
        ):
            kind, value = bounded(call)
            assert kind == "error", f"{label} {command} {what}: answered {value!r}"
            assert isinstance(value, ToolError), f"{label} {command} {what}: {type(value).__name__}: {value}"
            assert_no_secret([str(value)])
