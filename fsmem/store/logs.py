"""fsmem's own logs under `.fsmem/logs/`: one JSON line a record, each log capped.

A log that would pass `max_bytes` (fsmem.yaml `logs: max_bytes`, 8 MiB by
default) is first rotated to `NAME.1` (one generation kept), so a log never
holds more than twice the cap, however long a memory lives. The retrieval log
(`fsmem.store.retrieval_log`) and the history problem log (`HISTORY_LOG`: what
a write's journal entry or commit could not do) are written here.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsmem.config import CONFIG_FILE, Config, LogSettings
from fsmem.errors import FsmemError
from fsmem.state_files import open_state
from fsmem.store.files import append_lines, file_lock, state_dir

DEFAULT_MAX_BYTES = LogSettings.max_bytes
HISTORY_LOG = "history.jsonl"

_caps: dict[Path, tuple[tuple[int, int], int]] = {}  # root -> ((mtime_ns, size) of fsmem.yaml, max_bytes)


def max_bytes_for(root: Path) -> int:
    """The cap from fsmem.yaml (`logs: max_bytes`), re-read only when the file changes."""
    root = Path(root)
    try:
        stat = (root / CONFIG_FILE).stat()
    except FileNotFoundError:
        return DEFAULT_MAX_BYTES
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _caps.get(root)
    if cached and cached[0] == stamp:
        return cached[1]
    value = Config.load(root).logs.max_bytes
    _caps[root] = (stamp, value)
    return value


def append(
    root: Path, name: str, record: dict[str, Any], *, max_bytes: int | None = None, state: Path | None = None
) -> None:
    """Append one record to the log `name` (a `time` field is added when missing); rotate before passing the cap.

    `max_bytes` defaults to the memory's configured cap; `state` is a state
    folder given explicitly, used instead of `root/.fsmem/`. The record is
    written when this returns. Threads appending to one log at once share one
    write (`_Group`): a server's 32 workers each took the log's lock in turn,
    and under load most of their time went to waiting for it.
    """
    from fsmem import format as fmt

    if max_bytes is None:
        max_bytes = max_bytes_for(root)
    record = {"time": fmt.now_iso(), **record}
    # backslashreplace writes a lone surrogate (from a bad argument) as the JSON escape it is, never fails.
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    data = text.encode("utf-8", "backslashreplace")
    key = (os.fspath(root), name, max_bytes, os.fspath(state) if state is not None else None)
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = _Group()
    group.append(data, lambda batch: _write(root, name, batch, max_bytes, state))


def _write(root: Path, name: str, data: bytes, max_bytes: int, state: Path | None) -> None:
    path = state_dir(root, "logs", state=state) / name
    with file_lock(root, f"{name.split('.')[0]}-log", state=state):
        try:
            if path.stat().st_size + len(data) > max_bytes:
                os.replace(path, path.with_name(name + ".1"))
        except FileNotFoundError:
            pass
        append_lines(path, data)


class _Batch:
    """Records written together, and how their write ended."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.done = False
        self.error: BaseException | None = None


class _Group:
    """The records threads of this process are appending to one log: a thread that finds no write under way
    writes every record waiting, under the log's lock, in one write; the others wait for it (group commit).
    Each record is written, or its caller sees the error of its batch's write, before `append` returns."""

    def __init__(self) -> None:
        self.ready = threading.Condition()
        self.open = _Batch()
        self.writing = False

    def append(self, data: bytes, write: Callable[[bytes], None]) -> None:
        with self.ready:
            batch = self.open
            batch.records.append(data)
            while not batch.done:
                if self.writing:
                    self.ready.wait()
                    continue
                # no write under way, so ours is the open batch (a batch taken is done before `writing` drops)
                self.open, self.writing = _Batch(), True
                self.ready.release()
                try:
                    write(b"".join(batch.records))
                except BaseException as exc:
                    batch.error = exc
                finally:
                    self.ready.acquire()
                    batch.done, self.writing = True, False
                    self.ready.notify_all()
        if batch.error is not None:
            raise batch.error


_groups: dict[tuple, _Group] = {}
_groups_lock = threading.Lock()


def history_problem(root: Path, stage: str, agent: str | None, exc: BaseException) -> None:
    """Log what history could not do for a write that is done (`stage`: discover, record, commit); never raises.

    The write's change is then committed later, as one made outside fsmem, and
    `fsmem check` and a refused history command name this error
    (`last_history_problem`).
    """
    try:
        append(root, HISTORY_LOG, {"stage": stage, "agent": agent, "error": str(exc)})
    except (OSError, FsmemError, ValueError):
        pass  # a read-only or full disk must not fail the write that was made


def last_history_problem(root: Path) -> str:
    """The error of the last history problem logged, for a message ("no error was logged" when there is none)."""
    try:
        with open(open_state(Path(root, ".fsmem", "logs", HISTORY_LOG)), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            line = handle.read().splitlines()[-1]
        return str(json.loads(line).get("error") or "no error was logged")
    except (OSError, IndexError, ValueError, AttributeError):
        return "no error was logged"
