"""The server's log: one JSON object per line, on standard error or appended to a file.

Request lines carry ids, names, figures and reasons only (token id, agent,
memory, tool, status, duration, sizes): never a token, a tool's arguments or
a memory's text. The web server's own messages are written the same way.
Every character a terminal would act on or that reorders text (C1 controls,
bidi overrides; json.dumps escapes C0 itself) is written as its JSON escape, as
`--json` answers are (`fsmem.cli.printing.escaped_json`): a request's path is
anyone's to choose, and the log is often a terminal.
With several server processes every one appends to the same file: each line
goes out in one `write` on a file opened for appending, so lines are never
cut or interleaved, and a worker's lines name it (`"worker": N`).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from fsmem.cli.printing import escaped_json


class RequestLog:
    """Appends JSON lines to `path` (created 0600) or, without one, to standard error."""

    def __init__(self, path: str | os.PathLike[str] | None = None, stream: TextIO | None = None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._stream = stream
        self._fd: int | None = None
        self.fields: dict[str, Any] = {}  # added to every line (a worker process's number)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"time": _now(), **self.fields, **record}, ensure_ascii=False, separators=(",", ":"))
        line = escaped_json(line)  # a request's path is anyone's: no C1 control or bidi override reaches a terminal
        with self._lock:
            try:
                if self._fd is not None:
                    os.write(self._fd, (line + "\n").encode("utf-8"))
                    return
                stream = self._stream or sys.stderr
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):
                pass  # a log that cannot be written never stops a request

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class JsonLines(logging.Handler):
    """A logging handler that writes records (uvicorn's, the SDK's warnings) as JSON lines to a RequestLog."""

    def __init__(self, log: RequestLog):
        super().__init__()
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        self.log.write({"event": "log", "level": record.levelname.lower(), "logger": record.name, "message": message})


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
