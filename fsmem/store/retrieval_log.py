"""The retrieval log: one JSON line per agent-facing call, under `.fsmem/logs/retrieval.jsonl`.

Budgets are tuned from data, so every tool call (and every recall, skipped or
not) records what it returned and what it cost. The log is capped like every
log of fsmem (`fsmem.store.logs`): past `logs: max_bytes` of fsmem.yaml it is
rotated to `retrieval.jsonl.1`.

Every record is built by `record()` (one rule for its fields and for how long
arguments are shortened) and written by `LoggedCall`, which also makes sure a
call is logged once: when a face that logs (the tool dispatcher, MCP through
it) runs a method that logs too (`Memory.search`), only the outermost writes.
Fields: time, agent, tool, arguments, paths ("path:line" or paths), rows,
tokens, latency_ms, truncated, empty; recall records add skipped and reason; a
call that failed adds error.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format import secrets
from fsmem.state_files import NOT_A_FILE, open_state
from fsmem.store import logs
from fsmem.store.files import state_dir

LOG_NAME = "retrieval.jsonl"
# Of each log file, at most its last this many bytes are read (stats, the ranking's usage counts): fsmem's own rotates
# at `logs.max_bytes` (8 MiB by default); a sparse 3 GB file there made each search read 3 GB (7-25 s, 3.2 GB held).
READ_BYTES = 64 << 20
DEFAULT_MAX_BYTES = logs.DEFAULT_MAX_BYTES
max_bytes_for = logs.max_bytes_for


LOGGED_STRING_CHARS = 200


def shorten(value: Any) -> Any:
    """Arguments as logged: secrets redacted, strings past LOGGED_STRING_CHARS cut (saying how long they were)."""
    if isinstance(value, str):
        if secrets.scan(value):  # a refused secret must not land in the log that records the refusal
            value = secrets.redact(value)
        if len(value) > LOGGED_STRING_CHARS:
            return value[:LOGGED_STRING_CHARS] + f"… ({len(value)} chars)"
        return value
    if isinstance(value, dict):
        return {str(k): shorten(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shorten(v) for v in value]
    return value


def record(
    *,
    agent: str | None,
    tool: str,
    arguments: Any,
    paths: list[str],
    rows: int,
    tokens: int,
    latency_ms: float,
    truncated: bool,
    empty: bool,
    error: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The one shape of a retrieval-log record, whatever face made the call."""
    data: dict[str, Any] = {
        "agent": agent,
        "tool": tool,
        "arguments": shorten(arguments),
        "paths": list(paths),
        "rows": rows,
        "tokens": tokens,
        "latency_ms": round(latency_ms, 3),
        "truncated": truncated,
        "empty": empty,
        **extra,
    }
    if error is not None:
        data["error"] = error
    return data


_inside_logged_call: contextvars.ContextVar[bool] = contextvars.ContextVar("fsmem_inside_logged_call", default=False)


class LoggedCall:
    """One agent-facing call, timed and logged once: `with LoggedCall(...) as call: ...; call.done(...)`.

    Nested inside another LoggedCall (the dispatcher running `Memory.search`),
    it writes nothing: the outermost face logs what the agent actually got.
    A call that never reaches `done` (an exception) is logged by the face that
    catches it, not here. A log that cannot be written never costs the caller
    its answer.
    """

    def __init__(self, root: Path, *, agent: str | None, tool: str, arguments: Any, state: Path | None = None):
        self.root = root
        self.state = state
        self.fields: dict[str, Any] = {"agent": agent, "tool": tool, "arguments": arguments}
        self.outcome: dict[str, Any] | None = None
        self.outermost = False
        self._token: contextvars.Token[bool] | None = None

    def __enter__(self) -> LoggedCall:
        self.outermost = not _inside_logged_call.get()
        self._token = _inside_logged_call.set(True)
        self.started = time.perf_counter()
        return self

    def done(self, **outcome: Any) -> None:
        """What the agent got: paths, rows, tokens, truncated, empty (and error or extra fields)."""
        self.outcome = outcome

    def __exit__(self, *exc_info: Any) -> None:
        if self._token is not None:
            _inside_logged_call.reset(self._token)
        if not self.outermost or self.outcome is None:
            return
        latency_ms = (time.perf_counter() - self.started) * 1000
        entry = record(**self.fields, latency_ms=latency_ms, **self.outcome)
        try:
            append(self.root, entry, state=self.state)
        except (OSError, FsmemError, ValueError):
            pass  # a read-only or full disk (or a broken cap setting) must not cost the agent its answer


def log_path(root: Path, *, state: Path | None = None) -> Path:
    """The log file; `state` is a state folder given explicitly, used instead of `root/.fsmem/`."""
    return state_dir(root, "logs", state=state) / LOG_NAME


def append(root: Path, record: dict[str, Any], *, max_bytes: int | None = None, state: Path | None = None) -> None:
    """Append one record (a `time` field is added when missing), the log capped (`fsmem.store.logs`).

    `max_bytes` defaults to the memory's configured cap; `state` is a state
    folder given explicitly, used instead of `root/.fsmem/`.
    """
    logs.append(root, LOG_NAME, record, max_bytes=max_bytes, state=state)


def open_log(path: Path) -> BinaryIO | None:
    """The log file at `path` opened for reading (`open_state`), or None where there is none: missing, or a FIFO or
    link at its name, which holds no record."""
    try:
        return open(open_state(path), "rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in NOT_A_FILE:
            raise
        return None


def tail_from(handle: BinaryIO, size: int, offset: int = 0) -> int:
    """Where reading a log of `size` bytes from `offset` starts, `handle` placed there: at `offset`, or where more
    than READ_BYTES are left (more than fsmem writes: a planted or sparse file), at the first whole line of its
    last READ_BYTES (the line the cut falls in is no record)."""
    if size - offset > READ_BYTES:
        handle.seek(size - READ_BYTES - 1)
        handle.readline(READ_BYTES)
        return handle.tell()
    handle.seek(offset)
    return offset


def records(
    root: Path, *, since: str | None = None, agent: str | None = None, state: Path | None = None
) -> Iterator[dict[str, Any]]:
    """Logged records, oldest first (the rotated generation included), filtered by time and agent."""
    threshold = fmt.parse_timestamp(since) if since else None
    folder = Path(state, "logs") if state is not None else Path(root, ".fsmem", "logs")
    for path in (folder / (LOG_NAME + ".1"), folder / LOG_NAME):
        handle = open_log(path)
        if handle is None:
            continue
        with handle:
            tail_from(handle, os.fstat(handle.fileno()).st_size)
            for line in handle:
                try:
                    record = json.loads(line.decode("utf-8", "replace"))
                except ValueError:  # JSONDecodeError, or an integer past Python's 4,300 digits
                    continue  # a torn last line after a crash is skipped, not fatal
                if not isinstance(record, dict):
                    continue  # nor is a line fsmem did not write (`5`, `[]`)
                if agent is not None and record.get("agent") != agent:
                    continue
                if threshold is not None:
                    stamp = fmt.parse_timestamp(str(record.get("time", "")))
                    if stamp is None or stamp < threshold:
                        continue
                yield record
