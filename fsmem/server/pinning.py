"""Which server process serves a request: the one its bearer token hashes to, so that a token's limits are exact.

With `processes: N` every token is served by one process, picked by a stable
hash of the token as sent (CRC-32 of its bytes, the same in every process and
every run), and that process alone keeps the token's rate, its requests in
flight and its event streams: never N times a token's share. The parent reads
the token from a request's head (`head_token`) before handing the connection
over; a worker refuses (`Pinned`: 421, the connection closed) a later request
on that connection that carries a token of another process. A request without
a token goes to any process, which refuses it as one process does.
"""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any

from fsmem.server.door import FORBIDDEN, bearer, json_answer
from fsmem.server.log import RequestLog

HEAD_END = b"\r\n\r\n"
HANDOVER = struct.Struct("!d")  # what comes with a socket from the parent: the seconds left for its request's head
READY = b"ready"  # what a worker tells the parent once it serves


def worker_for(token: bytes | None, count: int) -> int | None:
    """The process (0 to count-1) that serves `token`; None for no token (any process will do)."""
    if token is None:
        return None
    return zlib.crc32(token) % count


def head_complete(data: bytes) -> bool:
    return HEAD_END in data


def head_token(data: bytes) -> bytes | None:
    """The bearer token of a request head (bytes up to the blank line), read as `door.bearer` reads it.

    The first `Authorization` header counts; one that is not `Bearer ...` gives None.
    """
    head = data.split(HEAD_END, 1)[0]
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.lower() == b"authorization":
            value = value.strip()
            return value[7:].strip() if value[:7].lower() == b"bearer " else None
    return None


class Pinned:
    """An ASGI app in front of a worker's: requests whose token belongs to another process are refused (421).

    The parent hands a connection to the process of its first request's token; a client that sends
    another token on the same connection later is told to open a new connection for it.
    """

    def __init__(self, app: Any, index: int, count: int, log: RequestLog):
        self.app, self.index, self.count, self.log = app, index, count, log

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if scope["type"] == "http":
            token = bearer(scope)
            owner = worker_for(token.encode("latin-1") if token is not None else None, self.count)
            if owner is not None and owner != self.index:
                await self._refuse(scope, send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: dict[str, Any], send) -> None:
        started = time.perf_counter()
        message = "this connection serves other tokens: send requests with this token on a new connection"
        body = {"jsonrpc": "2.0", "id": None, "error": {"code": FORBIDDEN, "message": message}}
        sent = await json_answer(send, 421, body, {"Connection": "close"})
        self.log.write(
            {
                "event": "request",
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": 421,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "reason": "other process",
                "bytes_out": sent,
            }
        )
