"""The retrieval log: one JSON line per agent-facing call, under `.fsmem/logs/retrieval.jsonl`.

Budgets are tuned from data, so every tool call (and every recall, skipped or
not) records what it returned and what it cost. The log is capped: when it
passes `max_bytes` it is rotated to `retrieval.jsonl.1` (one generation kept),
so it never grows without bound.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from . import format as fmt
from .store import file_lock, state_dir

LOG_NAME = "retrieval.jsonl"
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


def log_path(root: Path, *, state: Path | None = None) -> Path:
    """The log file; `state` is a state folder given explicitly, used instead of `root/.fsmem/`."""
    return state_dir(root, "logs", state=state) / LOG_NAME


def append(
    root: Path, record: dict[str, Any], *, max_bytes: int = DEFAULT_MAX_BYTES, state: Path | None = None
) -> None:
    """Append one record (a `time` field is added when missing); rotate past `max_bytes`."""
    record = {"time": fmt.now_iso(), **record}
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    path = log_path(root, state=state)
    with file_lock(root, "retrieval-log", state=state):
        try:
            if path.stat().st_size + len(line) > max_bytes:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)


def records(
    root: Path, *, since: str | None = None, agent: str | None = None, state: Path | None = None
) -> Iterator[dict[str, Any]]:
    """Logged records, oldest first (the rotated generation included), filtered by time and agent."""
    threshold = fmt.parse_timestamp(since) if since else None
    folder = Path(state, "logs") if state is not None else Path(root, ".fsmem", "logs")
    for path in (folder / (LOG_NAME + ".1"), folder / LOG_NAME):
        try:
            handle = open(path, encoding="utf-8")
        except FileNotFoundError:
            continue
        with handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line after a crash is skipped, not fatal
                if agent is not None and record.get("agent") != agent:
                    continue
                if threshold is not None:
                    stamp = fmt.parse_timestamp(str(record.get("time", "")))
                    if stamp is None or stamp < threshold:
                        continue
                yield record
