"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for every request's head.

uvicorn closes a connection idle after an answer (`timeout_keep_alive`), but
its timer stops at the first byte that arrives, and a connection that never
sent a request has no timer at all: an open socket that sends nothing, or
sends a header a byte at a time, held its connection for as long as the
client liked (measured: past 30 s, and 190 such connections for 25 s). The
ASGI app cannot help, since it is called only once the head is complete.

Here each request's line and headers must arrive within `head_timeout`
seconds of the connection opening or of the previous answer; past that the
connection is closed (with a 408 when part of a head had come). The body has
its own deadline in the app (`read_timeout_seconds`).

A 408 is followed by a lingering close, as HTTP servers do it: the answer and
a FIN go out, what the client still sends is read and dropped for up to
`LINGER_SECONDS`, then the socket closes. Closing at once, with bytes of the
client's unread, makes the kernel answer with a reset that can destroy the
408 before the client reads it (seen under load: ECONNRESET instead of 408).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
LINGER_SECONDS = 2.0


class HeadDeadline(H11Protocol):
    """H11Protocol whose request heads must arrive within `head_timeout` seconds."""

    head_timeout: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._lingering = False

    @classmethod
    def with_timeout(cls, seconds: float) -> type[HeadDeadline]:
        return type(cls.__name__, (cls,), {"head_timeout": seconds})

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.head_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _waiting_for_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._waiting_for_head():
            return
        if not self._head_bytes:
            self.transport.close()
            return
        self.transport.write(_TIMEOUT)
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # after a 408: read and dropped until the linger ends
        if self._head_timer is not None:
            self._head_bytes += len(data)
        super().data_received(data)
        if not self._waiting_for_head():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            self._disarm()
        elif self._waiting_for_head():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
