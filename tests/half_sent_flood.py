"""The process of tests/test_server_flood.py's `Flood`: a module of its own, so that the process it is started in
(spawned, not forked) imports little besides it."""

from __future__ import annotations

import selectors
import socket
import time

HALF = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"  # never ends


def flood(address, count, seconds, counts, held, churned, done) -> None:
    """`count` connections that each send `HALF` and wait, re-opened as the server closes them; `counts`: the
    connections opened and those the server closed."""
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(address)
        selector.register(sock, selectors.EVENT_WRITE, "connecting")
        counts[0] += 1

    def reopen(sock: socket.socket) -> None:
        selector.unregister(sock)
        sock.close()
        counts[1] += 1
        open_one()

    ends = time.monotonic() + seconds
    try:
        for _ in range(count):
            open_one()
        held.set()
        while not done.is_set() and time.monotonic() < ends:
            for key, _mask in selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "connecting":
                    try:
                        sock.send(HALF)
                    except OSError:
                        reopen(sock)
                        continue
                    selector.modify(sock, selectors.EVENT_READ, "sent")
                    continue
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    reopen(sock)
            if counts[1] >= count:
                churned.set()
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
