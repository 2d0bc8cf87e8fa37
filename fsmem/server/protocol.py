"""uvicorn's HTTP/1.1 protocol (httptools, a C parser) with a deadline and a size cap for every request's head.

uvicorn closes a connection idle after an answer (`timeout_keep_alive`), but
its timer stops at the first byte that arrives, and a connection that never
sent a request has no timer at all: an open socket that sends nothing, or
sends a header a byte at a time, held its connection for as long as the
client liked (measured: past 30 s, and 190 such connections for 25 s). The
ASGI app cannot help, since it is called only once the head is complete.

Here each request's line and headers must arrive within `head_timeout`
seconds of the connection opening or of the previous answer; past that the
connection is closed (with a 408 when part of a head had come). A head of
more than `MAX_HEAD_BYTES` is refused with a 431 (httptools, unlike h11,
sets no bound of its own). The body has its own deadline in the app
(`read_timeout_seconds`).

A 408 or 431 is followed by a lingering close, as HTTP servers do it: the
answer and a FIN go out, what the client still sends is read and dropped for
up to `LINGER_SECONDS`, then the socket closes. Closing at once, with bytes
of the client's unread, makes the kernel answer with a reset that can
destroy the answer before the client reads it (seen under load: ECONNRESET
instead of 408).

Connections that have not yet shown a valid token (`Strangers`) may hold at
most half of `max_connections`: past that, one that waits for a head (or
lingers after a refusal) of the address holding the most such connections
is closed: first the oldest that sent part of a head and stopped (or
lingers), then the oldest that has sent nothing; never one whose bytes have
come but are not read yet (the kernel holds them: a burst of new
connections, accepted in one turn of the event loop before any is read,
would otherwise close one whose whole head had come). A client that floods
the server with half-sent requests then holds at most that half, and only
its own connections make room for its new ones; a connection of its address
that has not sent its head yet outlasts every half-sent one; the other half
stays for requests whose token checked out (measured: 300 half-sent requests
from the honest client's own address, re-opened as they close, and its every
call answered). The door marks a connection whose request showed a valid
token (`VOUCH`, a key of the ASGI scope); from then on it is never closed
for a stranger.

The parser is httptools rather than h11 (pure Python) because the event
loop's thread frames every request of the server: with h11 the server spent
measurably more of its CPU on each call (`benchmarks/bench_server_call.py`; docs/performance.md,
"The memory server under load").
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

try:
    import fcntl
    import termios
except ImportError:  # Windows: no FIONREAD; every connection counts as read
    fcntl = termios = None  # type: ignore[assignment]

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from fsmem.server.door import VOUCH

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
LINGER_SECONDS = 2.0
MAX_HEAD_BYTES = 16 << 10  # a request's line and headers (h11's bound; an MCP request's head is under 1 KiB)
STALLED, SILENT = 0, 1  # what a closable stranger has done: sent part of a head (or was refused), or nothing
_FIONREAD = getattr(termios, "FIONREAD", None) if termios is not None else None


class Strangers:
    """The connections of one server process that have not shown a valid token, by client address, oldest first.

    At most `limit` of them: past it, one of the address that holds the most is closed, among those whose
    connection waits for a head or lingers after a refusal (one whose request is being answered is left
    alone: it is about to be refused, or to show its token): the oldest that stalled part-way through a
    head (or lingers), else the oldest that has sent nothing. One whose bytes wait unread in the kernel is
    never closed: they may be a whole head; once they are read (`read`), it is served or has stalled. While
    the address's only candidates wait unread, nothing is closed for it (no other address's connection
    either): the count passes the limit by what one turn of the event loop accepted, until they are read.
    A flood from one address thus only closes its own connections, one of them that has sent nothing only
    once none that stalled is left, and a new connection from it (an honest client's too, which sends its
    head at once) is the last of its kind to go. Used from the event loop's thread only.
    """

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.by_address: dict[Any, dict[HeadDeadline, None]] = {}
        self.count = 0
        self.unread: set[HeadDeadline] = set()  # seen with bytes in the kernel, not read since (asked once each)

    def add(self, conn: HeadDeadline) -> None:
        self.by_address.setdefault(conn.address, {})[conn] = None
        self.count += 1
        self.trim()

    def read(self, conn: HeadDeadline) -> None:
        """`conn` read what it was sent: it is now served, or stalled, and may make room."""
        self.unread.discard(conn)
        self.trim()

    def discard(self, conn: HeadDeadline) -> None:
        self.unread.discard(conn)
        held = self.by_address.get(conn.address)
        if held is None or conn not in held:
            return
        del held[conn]
        self.count -= 1
        if not held:
            del self.by_address[conn.address]

    def trim(self) -> None:
        """Close connections as the rule says until at most `limit` are left, or none may be closed now."""
        while self.count > self.limit and self._close_one():
            pass

    def _close_one(self) -> bool:
        for _address, held in sorted(self.by_address.items(), key=lambda item: -len(item[1])):
            silent, waiting = None, False
            for conn in held:
                stall = conn.stall()
                if stall is None or (stall == SILENT and silent is not None):
                    continue
                if self._unread(conn):
                    waiting = True
                    continue
                if stall == STALLED:
                    self._close(conn)
                    return True
                silent = conn  # closed only if none of the address stalled part-way
            if silent is not None:
                self._close(silent)
                return True
            if waiting:
                return False  # its own are read soon: room is made from them, never from another address
        return False

    def _unread(self, conn: HeadDeadline) -> bool:
        if conn in self.unread:
            return True
        if conn.unread():
            self.unread.add(conn)
            return True
        return False

    def _close(self, conn: HeadDeadline) -> None:
        self.discard(conn)
        conn.transport.abort()


class HeadDeadline(HttpToolsProtocol):
    """HttpToolsProtocol whose request heads must arrive within `head_timeout` seconds and `MAX_HEAD_BYTES`."""

    head_timeout: float = 10.0
    strangers: Strangers | None = None  # one per server process: see `serving`

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._lingering = False
        self.address: Any = None
        self.vouched = False

    @classmethod
    def serving(cls, seconds: float, max_connections: int) -> type[HeadDeadline]:
        """The protocol of one server process: heads within `seconds`, strangers on half its connections."""
        attributes = {"head_timeout": seconds, "strangers": Strangers(max_connections // 2)}
        return type(cls.__name__, (cls,), attributes)

    def stall(self) -> int | None:
        """STALLED when it lingers after a refusal or has sent part of a head, SILENT when it waits for a head and
        has sent nothing that was read, None when closing it could lose a request."""
        if self._lingering:
            return STALLED
        if self._head_timer is None or not self._waiting_for_head():
            return None
        return STALLED if self._head_bytes else SILENT

    def unread(self) -> bool:
        """Whether the kernel holds bytes the client sent that this process has not read yet."""
        sock = self.transport.get_extra_info("socket")
        if _FIONREAD is None or sock is None:
            return False
        try:
            return struct.unpack("i", fcntl.ioctl(sock.fileno(), _FIONREAD, b"\0\0\0\0"))[0] > 0
        except (OSError, ValueError):
            return False

    def _vouch(self) -> None:
        """Its request's token checked out: it is no stranger any more."""
        if not self.vouched:
            self.vouched = True
            if self.strangers is not None:
                self.strangers.discard(self)

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.head_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _waiting_for_head(self) -> bool:
        """No request whose head has arrived is unanswered (none in progress, none pipelined behind it)."""
        return (self.cycle is None or self.cycle.response_complete) and not self.pipeline

    def _refuse(self, answer: bytes) -> None:
        """Answer, send a FIN, read and drop what still comes for `LINGER_SECONDS`, then close."""
        self._disarm()
        self.transport.write(answer)
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._lingering or not self._waiting_for_head():
            return
        if not self._head_bytes:
            self.transport.close()
            return
        self._refuse(_TIMEOUT)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else None
        self._arm()
        if self.strangers is not None:
            self.strangers.add(self)

    def data_received(self, data: bytes) -> None:
        if not self._lingering:  # after a 408 or 431 what comes is read and dropped until the linger ends
            waiting = self._head_timer is not None
            if waiting:
                self._head_bytes += len(data)
            super().data_received(data)
            if waiting and self._head_timer is not None and self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(_TOO_LARGE)  # still no complete head after more bytes than any head may hold
        if self.strangers is not None and not self.vouched:
            self.strangers.read(self)

    def on_headers_complete(self) -> None:
        self._disarm()
        if self._lingering:
            return  # a request pipelined behind a refused one is not served
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > MAX_HEAD_BYTES:
            self._refuse(_TOO_LARGE)  # came whole in one read: refused before the app sees it
            return
        super().on_headers_complete()
        self.scope[VOUCH] = self._vouch  # type: ignore[literal-required]

    def on_body(self, body: bytes) -> None:
        if not self._lingering:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._lingering:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            self._disarm()
        elif self._waiting_for_head():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.strangers is not None:
            self.strangers.discard(self)
        super().connection_lost(exc)
