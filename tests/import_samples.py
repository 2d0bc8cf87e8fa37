"""Small, real-shaped inputs for `fsmem import`: a ChatGPT and a Claude.ai export, Claude Code transcripts, a vault.

Shaped as those tools write them (the fields fsmem reads, and some it does not), made here, so the tests
need no download and hold no one's history.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

T0 = 1_735_725_600  # 2025-01-01T10:00:00Z


def chatgpt_node(nid: str, parent: str | None, role: str, text: str, at: float, **extra: Any) -> dict[str, Any]:
    message = {
        "id": nid,
        "author": {"role": role, "name": extra.pop("name", None), "metadata": {}},
        "create_time": at,
        "update_time": None,
        "content": {"content_type": extra.pop("content_type", "text"), "parts": [text]},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": extra.pop("metadata", {}),
        "recipient": extra.pop("recipient", "all"),
    }
    return {"id": nid, "message": message, "parent": parent, "children": []}


def chatgpt_conversation(key: str, title: str, turns: list[tuple[str, str]], start: float = T0) -> dict[str, Any]:
    """A conversation whose shown branch is `turns` (role, text), with a system root and a dropped branch."""
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    system = chatgpt_node("sys", "root", "system", "", start, metadata={"is_visually_hidden_from_conversation": True})
    mapping["sys"] = system
    parent = "sys"
    for number, (role, text) in enumerate(turns):
        nid = f"{key}-{number}"
        extra: dict[str, Any] = {}
        if role == "tool-call":
            role, extra = "assistant", {"recipient": "python", "content_type": "code"}
        elif role == "tool":
            extra = {"name": "python", "content_type": "execution_output"}
        mapping[nid] = chatgpt_node(nid, parent, role, text, start + 10 * (number + 1), **extra)
        mapping[parent]["children"].append(nid)
        if number == 1:  # a regenerated answer the user moved away from: not on the shown branch
            mapping[f"{nid}-old"] = chatgpt_node(f"{nid}-old", parent, role, "the dropped answer", start + 11)
            mapping[parent]["children"].append(f"{nid}-old")
        parent = nid
    return {
        "title": title,
        "create_time": start,
        "update_time": start + 10 * (len(turns) + 1),
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "plugin_ids": None,
        "conversation_id": key,
        "id": key,
    }


def chatgpt_export(folder: Path, conversations: list[dict[str, Any]], name: str = "conversations.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(conversations, indent=1), encoding="utf-8")
    return path


CHATGPT = [
    chatgpt_conversation(
        "6781a0c2-1111",
        "Billing migration",
        [
            ("user", "We move billing to Stripe in March."),
            ("assistant", "Noted: billing moves to Stripe in March."),
            ("tool-call", "import pandas as pd\nprint(pd.__version__)"),
            ("tool", "2.2.1"),
            ("assistant", "pandas 2.2.1 is installed."),
        ],
    ),
    chatgpt_conversation(
        "6781a0c2-2222", "Trip to Lisbon", [("user", "Book a hotel in Alfama."), ("assistant", "Done.")]
    ),
]


def claude_export(folder: Path, conversations: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "conversations.json"
    path.write_text(json.dumps(conversations, indent=2), encoding="utf-8")
    return path


def claude_message(sender: str, text: str, at: str, content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "uuid": f"m-{at}",
        "text": text,
        "content": content if content is not None else [{"type": "text", "text": text}],
        "sender": sender,
        "created_at": at,
        "updated_at": at,
        "attachments": [],
        "files": [],
    }


CLAUDE = [
    {
        "uuid": "0b9e6c1d-aaaa",
        "name": "Atlas launch plan",
        "created_at": "2025-02-03T09:00:00.000000Z",
        "updated_at": "2025-02-03T09:05:00.000000Z",
        "account": {"uuid": "acc"},
        "chat_messages": [
            claude_message("human", "The Atlas launch is on April 2.", "2025-02-03T09:00:01.000000Z"),
            claude_message(
                "assistant",
                "",
                "2025-02-03T09:00:05.000000Z",
                [
                    {"type": "text", "text": "Let me look at the calendar."},
                    {"type": "tool_use", "name": "calendar", "input": {"day": "2025-04-02"}},
                    {"type": "tool_result", "name": "calendar", "content": [{"type": "text", "text": "free"}]},
                    {"type": "text", "text": "April 2 is free."},
                ],
            ),
        ],
    },
    {
        "uuid": "0b9e6c1d-bbbb",
        "name": "",
        "created_at": "2025-02-04T18:30:00Z",
        "updated_at": "2025-02-04T18:31:00Z",
        "chat_messages": [claude_message("human", "Plain text only.", "2025-02-04T18:30:00Z", content=[])],
    },
]


def transcript_records(session: str, turns: list[tuple[str, Any]], day: str = "2025-03-10") -> list[dict[str, Any]]:
    """Claude Code transcript records: a user or assistant message each, with the fields Claude Code writes."""
    records: list[dict[str, Any]] = [{"type": "summary", "summary": "Fix the flaky sync test", "leafUuid": "x"}]
    for number, (role, content) in enumerate(turns):
        records.append(
            {
                "parentUuid": None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/ada/atlas",
                "sessionId": session,
                "version": "2.0.1",
                "type": role,
                "message": {"role": role, "content": content},
                "uuid": f"{session}-{number}",
                "timestamp": f"{day}T08:{number:02d}:00.000Z",
            }
        )
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


TURNS = [
    ("user", "Why does test_sync fail?"),
    (
        "assistant",
        [
            {"type": "text", "text": "Let me run it."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q tests/test_sync.py"}},
        ],
    ),
    ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed\nE assert 2 == 3"}]),
    ("assistant", [{"type": "text", "text": "The clock is not pinned; pin it with FSMEM_NOW."}]),
]


def long_session(
    session: str,
    exchanges: int,
    *,
    agent: str | None = None,
    file_chars: int = 400,
    first: int = 0,
    parent_uuid: str | None = None,
) -> list[dict[str, Any]]:
    """A Claude Code session as its transcript holds it, `exchanges` rounds long: a prompt, an answer with a tool
    call, the tool's result (a file of `file_chars` characters), a reply; the last reply closes the session.

    Records are chained by `parentUuid` and carry `cwd`, `timestamp`, `isSidechain` and, for a subagent's
    transcript (`agent`), its `agentId`, as Claude Code writes them. `first` numbers a continuation.
    """
    records: list[dict[str, Any]] = []
    parent = parent_uuid

    def add(kind: str, content: Any, at: int) -> None:
        nonlocal parent
        uuid = f"{session}-{agent or 'main'}-{at:05d}"
        record: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": agent is not None,
            "userType": "external",
            "cwd": "/home/ada/atlas",
            "sessionId": session,
            "version": "2.0.14",
            "gitBranch": "main",
            **({"agentId": agent} if agent is not None else {}),
            "type": kind,
            "message": {"role": kind, "content": content}
            | ({"model": "claude-sonnet-4-5", "id": f"msg_{at}", "type": "message"} if kind == "assistant" else {}),
            "uuid": uuid,
            "timestamp": f"2025-03-10T{8 + at // 3600:02d}:{at // 60 % 60:02d}:{at % 60:02d}.000Z",
        }
        records.append(record)
        parent = uuid

    for n in range(first, first + exchanges):
        at = 4 * n
        add("user", f"Step {n}: look at module_{n}.py and say what its parse_{n} function returns", at)
        tool = f"toolu_{session}_{n}"
        add(
            "assistant",
            [
                {"type": "text", "text": f"I will read module_{n}.py first to see parse_{n}."},
                {
                    "type": "tool_use",
                    "id": tool,
                    "name": "Read",
                    "input": {"file_path": f"/home/ada/atlas/module_{n}.py"},
                },
            ],
            at + 1,
        )
        text = "\n".join(f"{i:4}\tdef parse_{n}_{i}(value): return value  # line {i}" for i in range(file_chars // 48))
        add("user", [{"type": "tool_result", "tool_use_id": tool, "content": text}], at + 2)
        last = n == first + exchanges - 1
        reply = f"Summary: parse_{n} returns its value unchanged; all {n + 1} steps done." if last else ""
        add("assistant", [{"type": "text", "text": reply or f"parse_{n} returns its value unchanged."}], at + 3)
    return records


def slash_clear(session: str) -> list[dict[str, Any]]:
    """What a transcript starts with after `/clear`: the command's markup, its empty output, a caveat (isMeta)."""
    base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/ada/atlas"}
    base |= {"sessionId": session, "version": "2.0.14", "type": "user", "timestamp": "2025-03-10T07:59:00.000Z"}
    caveat = (
        "Caveat: The messages below were generated by the user while running local commands. "
        "DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks."
    )
    return [
        base | {"uuid": "c-0", "isMeta": True, "message": {"role": "user", "content": caveat}},
        base
        | {
            "uuid": "c-1",
            "message": {
                "role": "user",
                "content": "<command-name>/clear</command-name>\n            <command-message>clear</command-message>\n"
                "            <command-args></command-args>",
            },
        },
        base | {"uuid": "c-2", "message": {"role": "user", "content": "<local-command-stdout></local-command-stdout>"}},
    ]
