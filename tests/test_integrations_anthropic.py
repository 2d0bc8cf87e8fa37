"""fsmem.integrations.anthropic: the SDK memory-tool classes, sync and async, and the SDK's tool runner driving them.

The runner talks to a scripted stand-in for the API through the HTTP client's
own in-memory transport: no network, the real runner code end to end.
"""

from __future__ import annotations

import importlib
import json
import os
import stat
from functools import partial
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand as Create,
    BetaMemoryTool20250818DeleteCommand as Delete,
    BetaMemoryTool20250818InsertCommand as Insert,
    BetaMemoryTool20250818RenameCommand as Rename,
    BetaMemoryTool20250818StrReplaceCommand as StrReplace,
    BetaMemoryTool20250818ViewCommand as View,
)

from fsmem.agents.memory_tool import format_size
from fsmem.integrations.anthropic import AsyncFsmemMemoryTool, FsmemMemoryTool
from fsmem.memory import Memory

pytestmark = pytest.mark.sdk_face  # the SDK's own classes and tool runner: run at its floor too
# the HTTP client package this SDK release is built on: httpx2 in current releases, httpx before
httpx = importlib.import_module(anthropic.DefaultHttpxClient.__bases__[0].__module__.partition(".")[0])

EDITED = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"

# A folder's size is its filesystem's (4K on ext4, less on tmpfs): the answer holds the one the folder has then.
NOTES_SIZE = "<the size of /memories/notes>"


def sized(expected: str, base: Path) -> str:
    if NOTES_SIZE not in expected:
        return expected
    return expected.replace(NOTES_SIZE, format_size((base / "memories" / "notes").stat().st_size))


# One scenario, every command and every kind of answer: (command, expected result or ("error", message)).
SCENARIO: list[tuple[Any, Any]] = [
    (
        Create(command="create", path="/memories/notes/a.txt", file_text="one\ntwo\n"),
        "File created successfully at: /memories/notes/a.txt",
    ),
    (
        Create(command="create", path="/memories/notes/a.txt", file_text="x"),
        ("error", "File /memories/notes/a.txt already exists"),
    ),
    (
        View(command="view", path="/memories/notes/a.txt"),
        "Here's the content of /memories/notes/a.txt with line numbers:\n     1\tone\n     2\ttwo\n     3\t",
    ),
    (
        View(command="view", path="/memories/notes/a.txt", view_range=[2, 2]),
        "Here's the content of /memories/notes/a.txt with line numbers:\n     2\ttwo",
    ),
    (
        View(command="view", path="/memories/notes"),
        "Here're the files and directories up to 2 levels deep in /memories/notes, excluding hidden items:\n"
        f"{NOTES_SIZE}\t/memories/notes\n8B\t/memories/notes/a.txt",
    ),
    (
        View(command="view", path="/memories/nope"),
        ("error", "The path /memories/nope does not exist. Please provide a valid path."),
    ),
    (
        StrReplace(command="str_replace", path="/memories/notes/a.txt", old_str="two", new_str="2"),
        EDITED + "     1\tone\n     2\t2\n     3\t",
    ),
    (
        StrReplace(command="str_replace", path="/memories/notes/a.txt", old_str="zzz", new_str="2"),
        ("error", "No replacement was performed, old_str `zzz` did not appear verbatim in /memories/notes/a.txt."),
    ),
    (
        Insert(command="insert", path="/memories/notes/a.txt", insert_line=1, insert_text="1.5"),
        "The file /memories/notes/a.txt has been edited.",
    ),
    (
        Insert(command="insert", path="/memories/notes/a.txt", insert_line=9, insert_text="x"),
        ("error", "Invalid `insert_line` parameter: 9. It should be within the range [0, 3]."),
    ),
    (
        Rename(command="rename", old_path="/memories/notes/a.txt", new_path="/memories/b.txt"),
        "Successfully renamed /memories/notes/a.txt to /memories/b.txt",
    ),
    (
        Rename(command="rename", old_path="/memories", new_path="/memories/x"),
        ("error", "Cannot rename the /memories directory itself"),
    ),
    (Delete(command="delete", path="/memories/notes"), "Successfully deleted /memories/notes"),
    (Delete(command="delete", path="/memories"), ("error", "Cannot delete the /memories directory itself")),
    (
        View(command="view", path="/memories/../secret"),
        ("error", "Path /memories/../secret would escape /memories directory"),
    ),
    (View(command="view", path="/tmp/x"), ("error", "Path must start with /memories, got: /tmp/x")),
]
FINAL_TREE = {"memories/b.txt": b"one\n1.5\n2\n"}


def tree(folder: Path) -> dict[str, bytes]:
    return {
        Path(root, name).relative_to(folder).as_posix(): Path(root, name).read_bytes()
        for root, _, names in os.walk(folder)
        for name in names
    }


def test_sync_class_is_the_sdk_type_with_the_reference_constructor(tmp_path: Path) -> None:
    tool = FsmemMemoryTool(base_path=str(tmp_path / "m"))
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.base_path == tmp_path / "m" and tool.memory_root == tmp_path / "m" / "memories"
    assert stat.S_IMODE(tool.memory_root.stat().st_mode) == 0o700
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"} and tool.name == "memory"
    cached = FsmemMemoryTool(str(tmp_path / "m"), cache_control={"type": "ephemeral"})
    assert cached.to_dict() == {"type": "memory_20250818", "name": "memory", "cache_control": {"type": "ephemeral"}}


def test_sync_scenario_every_command_and_error(tmp_path: Path) -> None:
    tool = FsmemMemoryTool(str(tmp_path))
    for command, expected in SCENARIO:
        if isinstance(expected, tuple):
            with pytest.raises(ToolError) as caught:
                tool.execute(command)
            assert caught.value.content == expected[1], command
        else:
            assert tool.execute(command) == sized(expected, tmp_path), command
    assert tree(tmp_path) == FINAL_TREE


def test_sync_call_takes_the_raw_input_the_runner_passes(tmp_path: Path) -> None:
    tool = FsmemMemoryTool(str(tmp_path))
    assert (
        tool.call({"command": "create", "path": "/memories/x.txt", "file_text": "x"})
        == "File created successfully at: /memories/x.txt"
    )
    with pytest.raises(ToolError, match="^Path must start with /memories, got: x.txt$"):
        tool.call({"command": "view", "path": "x.txt"})
    assert tool.clear_all_memory() == "All memory cleared"
    assert tree(tmp_path) == {}


@pytest.mark.asyncio
async def test_async_class_makes_its_folder_on_first_use(tmp_path: Path) -> None:
    tool = AsyncFsmemMemoryTool(base_path=str(tmp_path / "m"))
    assert isinstance(tool, BetaAsyncAbstractMemoryTool)
    assert str(tool.base_path) == str(tmp_path / "m") and str(tool.memory_root) == str(tmp_path / "m" / "memories")
    assert not (tmp_path / "m").exists()
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    await tool._ensure_memory_root()
    assert stat.S_IMODE((tmp_path / "m" / "memories").stat().st_mode) == 0o700


@pytest.mark.asyncio
async def test_async_scenario_every_command_and_error(tmp_path: Path) -> None:
    tool = AsyncFsmemMemoryTool(str(tmp_path))
    for command, expected in SCENARIO:
        if isinstance(expected, tuple):
            with pytest.raises(ToolError) as caught:
                await tool.execute(command)
            assert caught.value.content == expected[1], command
        else:
            assert await tool.execute(command) == sized(expected, tmp_path), command
    assert tree(tmp_path) == FINAL_TREE
    assert await tool.call({"command": "view", "path": "/memories/b.txt", "view_range": [3, -1]}) == (
        "Here's the content of /memories/b.txt with line numbers:\n     3\t2\n     4\t"
    )


@pytest.mark.asyncio
async def test_async_validate_path_resolves_links(tmp_path: Path) -> None:
    tool = AsyncFsmemMemoryTool(str(tmp_path))
    await tool._ensure_memory_root()
    (tmp_path / "memories" / "real").mkdir()
    os.symlink(tmp_path / "memories" / "real", tmp_path / "memories" / "alias")
    resolved = await tool._validate_path("/memories/alias/f.txt")
    assert str(resolved) == os.path.join(os.path.realpath(tmp_path / "memories"), "real", "f.txt")
    with pytest.raises(ToolError, match="would escape"):
        await tool._validate_path("/memories/../x")


def test_fsmem_kwargs_and_accessor(tmp_path: Path) -> None:
    Memory.init(tmp_path / "memories")
    tool = FsmemMemoryTool(str(tmp_path), agent="reviewer", state_dir=tmp_path.parent / f"{tmp_path.name}-state")
    assert tool.backend.max_tokens == 1000
    with pytest.raises(ToolError, match="read-only for agent 'reviewer'"):
        tool.create(Create(command="create", path="/memories/x.md", file_text="x"))
    memory = tool.fsmem()
    assert memory.root == (tmp_path / "memories").resolve() and memory.agent == "reviewer"
    log = tmp_path.parent / f"{tmp_path.name}-state" / "logs" / "retrieval.jsonl"
    record = json.loads(log.read_text())
    assert record["tool"] == "memory.create" and record["agent"] == "reviewer" and "read-only" in record["error"]


@pytest.mark.asyncio
async def test_async_fsmem_accessor(tmp_path: Path) -> None:
    tool = AsyncFsmemMemoryTool(str(tmp_path), max_tokens=100)
    await tool.create(Create(command="create", path="/memories/t.md", file_text="- fact: one\n"))
    memory = await tool.fsmem(init=True)
    assert [m.path for m in memory.grep("fact").matches] == ["t.md"]


# -- the SDK's tool runner ----------------------------------------------------------------
def scripted_api(replies: list[list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], Any]:
    """A stand-in for the Messages API: answers each request with the next scripted content, records the requests."""
    requests: list[dict[str, Any]] = []

    def respond(request: Any) -> Any:
        requests.append(json.loads(request.content))
        content = replies[len(requests) - 1]
        stop = "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"
        body = {
            "id": f"msg_{len(requests)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return httpx.Response(200, json=body)

    return requests, respond


def tool_use(n: int, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": arguments}


RUNNER_REPLIES = [
    [
        tool_use(1, command="create", path="/memories/prefs.md", file_text="- coffee: black\n"),
        tool_use(2, command="view", path="/etc/passwd"),
    ],
    [tool_use(3, command="view", path="/memories/prefs.md")],
    [{"type": "text", "text": "Noted: black coffee."}],
]


def check_runner_conversation(requests: list[dict[str, Any]], base: Path) -> None:
    assert len(requests) == 3
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]  # later turns continue the thread
    assert requests[1]["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": "File created successfully at: /memories/prefs.md",
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "Path must start with /memories, got: /etc/passwd",
                "is_error": True,
            },
        ],
    }
    assert requests[2]["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_3",
            "content": "Here's the content of /memories/prefs.md with line numbers:\n     1\t- coffee: black\n     2\t",
        }
    ]
    assert tree(base) == {"memories/prefs.md": b"- coffee: black\n"}


def test_sync_tool_runner_dispatches_to_fsmem(tmp_path: Path) -> None:
    requests, respond = scripted_api(RUNNER_REPLIES)
    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://api.test",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(respond)),
    )
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=256,
        messages=[{"role": "user", "content": "I take my coffee black"}],
        tools=[FsmemMemoryTool(str(tmp_path))],
    )
    final = runner.until_done()
    assert [block.text for block in final.content] == ["Noted: black coffee."]
    check_runner_conversation(requests, tmp_path)


@pytest.mark.asyncio
async def test_async_tool_runner_dispatches_to_fsmem(tmp_path: Path) -> None:
    requests, respond = scripted_api(RUNNER_REPLIES)
    client = anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://api.test",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(respond)),
    )
    runner = client.beta.messages.tool_runner(
        model="claude-test",
        max_tokens=256,
        messages=[{"role": "user", "content": "I take my coffee black"}],
        tools=[AsyncFsmemMemoryTool(str(tmp_path))],
    )
    final = await runner.until_done()
    assert [block.text for block in final.content] == ["Noted: black coffee."]
    check_runner_conversation(requests, tmp_path)


# -- side by side with the SDK's reference backend ------------------------------------------
DIFFERENTIAL = SCENARIO + [
    (Create(command="create", path="/memories/crlf.txt", file_text="a\r\nb\r\n"), None),
    (View(command="view", path="/memories/crlf.txt", view_range=[0, -1]), None),
    (Insert(command="insert", path="/memories/crlf.txt", insert_line=2, insert_text="c\n"), None),
    (StrReplace(command="str_replace", path="/memories/crlf.txt", old_str="b\r", new_str="B"), None),
    (StrReplace(command="str_replace", path="/memories/crlf.txt", old_str="", new_str="x"), None),
    (Create(command="create", path="/memories/deep/er/est/f.md", file_text="# ☃\n"), None),
    (View(command="view", path="/memories"), None),
    (View(command="view", path="/memories/"), None),
    (View(command="view", path="/memories/deep/er/est/f.md", view_range=[1, -2]), None),
    (Rename(command="rename", old_path="/memories/deep", new_path="/memories/b.txt"), None),
    (Rename(command="rename", old_path="/memories/deep/er", new_path="/memories/moved"), None),
    (Insert(command="insert", path="/memories/moved", insert_line=0, insert_text="x"), None),
    (Delete(command="delete", path="/memories/moved/est/f.md"), None),
    (Delete(command="delete", path="/memories/moved/est/f.md"), None),
    (Create(command="create", path="/memories", file_text="x"), None),
    (View(command="view", path="/memoriesextra"), None),
    (View(command="view", path="/memories/../memories/b.txt"), None),
]


def outcome(run: Any) -> tuple[str, str]:
    try:
        return ("ok", run())
    except ToolError as exc:
        return ("error", str(exc))


def test_same_answers_and_files_as_the_sdk_reference(tmp_path: Path) -> None:
    reference = importlib.import_module("anthropic.lib.tools._beta_builtin_memory_tool")
    if not hasattr(reference, "BetaLocalFilesystemMemoryTool"):  # the extra's floor (0.84) predates the reference
        pytest.skip(f"anthropic {anthropic.__version__} has no BetaLocalFilesystemMemoryTool to compare with")
    BetaLocalFilesystemMemoryTool = reference.BetaLocalFilesystemMemoryTool

    ours, theirs = FsmemMemoryTool(str(tmp_path / "ours")), BetaLocalFilesystemMemoryTool(str(tmp_path / "theirs"))
    for command, _ in DIFFERENTIAL:
        mine, reference = outcome(partial(ours.execute, command)), outcome(partial(theirs.execute, command))
        assert mine == reference, command
    assert tree(tmp_path / "ours") == tree(tmp_path / "theirs")
