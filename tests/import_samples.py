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
