"""Hostile requests to `fsmem serve`: the door tried from outside, each case held or not (bench_hostile.py).

A real server process on a memory with history, five tokens (one scoped to
topics/), the head deadline at 2 s (its default is 10 s) and every other limit
at its default. Each case is sent as an attacker would (raw HTTP, raw
sockets) and holds when the answer is the documented refusal or bounded
answer, within the time limit, and names neither a file outside the token's
scope nor a path of the host:

- where it comes from: Origin of another page, `null`, Host of another name;
- tokens: none, malformed, wrong secret, another memory's endpoint;
- the body: a declared length over the cap, not JSON, not UTF-8, nested
  100,000 deep, a lone surrogate in a tool argument;
- connections: idle, and a header sent a byte at a time, 20 of each;
- event streams: more than a token's share, with its requests still served;
- costs: a 200 KB pattern, a 900-character costly regex, 20,000 search words;
- history through a scope: show at HEAD~k for every k, log, diff.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from common import REPO, fsmem_bin

HEAD_TIMEOUT = 2.0
SECRET_NAMES = ("entities", "layoff", "jane", "merger")
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _call(name: str, arguments: dict, number: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


class Door:
    """The server under test, its tokens, and what no answer may hold."""

    def __init__(self, work: Path, processes: int = 1):
        import shutil

        from fsmem import Memory
        from fsmem.server.tokens import TokenStore

        self.root = work / "memory"
        Memory.init(self.root)
        shutil.copytree(REPO / "examples" / "memory", self.root, dirs_exist_ok=True)
        Memory.init(self.root, git=True)
        agent = Memory(self.root, agent="researcher")
        agent.write("entities/people/layoff-list-jane-doe.md", "# Plans\n\n- kept\n")
        agent.edit("topics/billing.md", old="net 30", new="net 45")
        agent.write("entities/orgs/secret-merger.md", "# Merger\n")
        store = TokenStore(work / "tokens.json")
        self.tokens = {
            name: store.create(memory="team", agent="researcher", paths=["topics/"] if name == "topics" else None).token
            for name in ("full", "topics", "streams", "bystander")
        }
        other = Memory.init(work / "other")  # served, so that /mcp/other is a real endpoint
        config = work / "server.yaml"
        config.write_text(
            f"memories:\n  team: {self.root}\n  other: {other.root}\ntokens: {store.path}\nport: 0\n"
            f"processes: {processes}\n"
            f"limits:\n  header_timeout_seconds: {HEAD_TIMEOUT}\n  rate_per_second: 1000\n  burst: 1000\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
        self.proc = subprocess.Popen(
            [fsmem_bin(), "serve", "--config", str(config)], env=env, stderr=subprocess.PIPE, text=True
        )
        url = None
        while url is None:
            line = self.proc.stderr.readline() if self.proc.stderr else ""
            if not line:
                raise SystemExit("fsmem serve did not start")
            url = json.loads(line).get("url")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr or []], daemon=True).start()
        self.url = url
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        self.at = (host, int(port))
        self.places = [str(self.root), sys.prefix, os.path.dirname(sys.executable), str(Path.home())]

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(60)

    def post(self, token: str | None, body, headers: dict | None = None):
        import httpx2

        data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=True).encode()
        sent = dict(HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {}))
        return httpx2.post(self.url, content=data, headers=sent, timeout=60)

    def clean(self, text: str, scoped: bool = False) -> bool:
        """No path of the host in `text`; for a scoped token, no name of a file outside its scope either."""
        if any(place in text for place in self.places):
            return False
        return not scoped or not any(name in text.lower() for name in SECRET_NAMES)


def _jsonrpc_error(answer, status: int, code: int) -> bool:
    try:
        data = answer.json()
    except ValueError:
        return False
    return answer.status_code == status and data.get("id") is None and data.get("error", {}).get("code") == code


def _tool_error(answer, starts: str = "error: ") -> bool:
    if answer.status_code != 200:
        return False
    result = answer.json().get("result", {})
    return bool(result.get("isError")) and result["content"][0]["text"].startswith(starts)


def _closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    sock.settimeout(limit)
    started, data = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except OSError:
        return data, float("inf")
    return data, time.monotonic() - started


def cases(door: Door) -> list[tuple[str, str, Callable[[], bool]]]:
    """(group, case, check): each check True when the server held."""
    full, topics = door.tokens["full"], door.tokens["topics"]
    out: list[tuple[str, str, Callable[[], bool]]] = []
    for origin in ("http://evil.example", "null", "https://evil.example:8443"):
        out.append(("where it comes from", f"Origin {origin}", lambda o=origin: _jsonrpc_error(door.post(full, LIST, {"Origin": o}), 403, -32003)))  # fmt: skip
    out.append(("where it comes from", "Host evil.example", lambda: _jsonrpc_error(door.post(full, LIST, {"Host": "evil.example"}), 421, -32003)))  # fmt: skip
    out.append(("where it comes from", "Host 127.0.0.1.evil.example", lambda: _jsonrpc_error(door.post(full, LIST, {"Host": "127.0.0.1.evil.example"}), 421, -32003)))  # fmt: skip
    for label, token in (("no token", None), ("malformed", "fsmem_x"), ("wrong secret", full[:-4] + "0000")):
        out.append(("tokens", label, lambda t=token: _jsonrpc_error(door.post(t, LIST), 401, -32001)))

    def other_endpoint() -> bool:
        import httpx2

        headers = dict(HEADERS, Authorization=f"Bearer {full}")
        return _jsonrpc_error(httpx2.post(door.url + "/other", json=LIST, headers=headers), 403, -32003)

    out.append(("tokens", "another memory's endpoint", other_endpoint))

    def declared() -> bool:
        sock = socket.create_connection(door.at)
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {full}\r\nContent-Type: "
            "application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 999999999\r\n\r\n{"
        )
        sock.sendall(head.encode())
        data, took = _closed(sock, 10)
        sock.close()
        return data.startswith(b"HTTP/1.1 413 ") and took < 2

    out.append(("the body", "Content-Length: 999999999", declared))
    out.append(("the body", "100,000 '['", lambda: _jsonrpc_error(door.post(full, b"[" * 100_000), 400, -32600)))
    out.append(("the body", "not JSON", lambda: _jsonrpc_error(door.post(full, b'{"jsonrpc": '), 400, -32700)))
    out.append(("the body", "not UTF-8", lambda: _jsonrpc_error(door.post(full, b'{"a": "\xff"}'), 400, -32700)))
    out.append(("the body", "a 5,000-digit number", lambda: _jsonrpc_error(door.post(full, b"9" * 5000), 400, -32700)))  # fmt: skip
    out.append(("the body", "lone surrogate in an argument", lambda: _tool_error(door.post(full, _call("read", {"path": "topics/\ud800.md"})), "error: argument 'path' contains")))  # fmt: skip
    out.append(("the body", "lone surrogate in a key", lambda: _tool_error(door.post(full, _call("grep", {"pattern": "x", "\udfff": 1})))))  # fmt: skip

    def connections(kind: str) -> bool:
        socks = []
        for _ in range(20):
            sock = socket.create_connection(door.at)
            if kind == "drip":
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            socks.append(sock)
        stop = threading.Event()

        def drip() -> None:
            while not stop.is_set():
                for sock in socks:
                    try:
                        sock.send(b"a")
                    except OSError:
                        pass
                time.sleep(0.2)

        if kind == "drip":
            threading.Thread(target=drip, daemon=True).start()
        try:
            served = door.post(door.tokens["bystander"], LIST).status_code == 200
            closed = [_closed(sock, HEAD_TIMEOUT + 8) for sock in socks]
        finally:
            stop.set()
            for sock in socks:
                sock.close()
        want = b"HTTP/1.1 408 " if kind == "drip" else b""
        return served and all(data.startswith(want) and took < HEAD_TIMEOUT + 3 for data, took in closed)

    out.append(("connections", "20 idle connections", lambda: connections("idle")))
    out.append(("connections", "20 headers sent a byte at a time", lambda: connections("drip")))

    def streams() -> bool:
        import httpx2

        token = door.tokens["streams"]
        headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        clients = [httpx2.Client(timeout=30) for _ in range(4)]
        opened = [c.send(c.build_request("GET", door.url, headers=headers), stream=True) for c in clients]
        try:
            statuses = [r.status_code for r in opened]
            posts = [door.post(token, LIST).status_code for _ in range(4)]
        finally:
            for response, client in zip(opened, clients, strict=True):
                response.close()
                client.close()
        return statuses == [200, 429, 429, 429] and posts == [200] * 4

    out.append(("event streams", "4 GET streams of one token", streams))

    def bounded(tool: str, arguments: dict, token: str, refused: bool, scoped: bool = False) -> Callable[[], bool]:
        def check() -> bool:
            started = time.monotonic()
            answer = door.post(token, _call(tool, arguments))
            text = answer.json()["result"]["content"][0]["text"] if answer.status_code == 200 else answer.text
            is_error = answer.status_code == 200 and answer.json()["result"]["isError"]
            for given in arguments.values():  # what the request itself said may be said back to it
                text = text.replace(str(given), "")
            return is_error == refused and time.monotonic() - started < 10 and door.clean(text, scoped)

        return check

    words = " ".join(f"w{n}" for n in range(20_000))
    for label, token in (("", full), (" (scoped token)", topics)):
        out.append(("costs and errors", f"200 KB pattern{label}", bounded("grep", {"pattern": "a" * 200_000}, token, True)))  # fmt: skip
        out.append(("costs and errors", f"200 KB fixed string{label}", bounded("grep", {"pattern": "a" * 200_000, "fixed_strings": True}, token, True)))  # fmt: skip
        out.append(("costs and errors", f"900-character costly regex{label}", bounded("grep", {"pattern": "(a|b|c)*x{1,50}" * 60}, token, False)))  # fmt: skip
        out.append(("costs and errors", f"20,000 search words{label}", bounded("search", {"query": words}, token, True)))  # fmt: skip
    for k in range(8):
        out.append(("history through a scope", f"show at HEAD~{k}", bounded("show", {"path": "topics/billing.md", "at": f"HEAD~{k}"}, topics, k > 1, True)))  # fmt: skip
    for at in (":/layoff", "HEAD^{/merger}", "deadbeef", "2020-01-01"):
        out.append(("history through a scope", f"show at {at}", bounded("show", {"path": "topics/billing.md", "at": at}, topics, True, True)))  # fmt: skip
    out.append(("history through a scope", "log topics", bounded("log", {"path": "topics"}, topics, False, True)))
    out.append(("history through a scope", "log of the memory", bounded("log", {}, topics, True, True)))
    return out


def server_cases(work: Path, limit: float, processes: int = 1) -> tuple[dict[str, list[int]], list[str]]:
    """Per group of cases: [tried, held]; and the cases that did not hold (`processes`: the server's)."""
    work.mkdir(parents=True, exist_ok=True)
    os.environ["FSMEM_NOW"] = "2026-11-30T10:00:00+00:00"
    try:
        door = Door(work, processes)
    finally:
        del os.environ["FSMEM_NOW"]
    groups: dict[str, list[int]] = {}
    failures: list[str] = []
    try:
        for group, label, check in cases(door):
            started = time.monotonic()
            try:
                held = check()
            except Exception as exc:  # a raised error is a case that did not hold
                held, label = False, f"{label} ({type(exc).__name__}: {exc})"
            held = held and time.monotonic() - started < limit
            tally = groups.setdefault(group, [0, 0])
            tally[0] += 1
            tally[1] += held
            if not held:
                failures.append(f"server: {group}: {label}")
    finally:
        code = door.stop()
    if code != 0:
        failures.append(f"server: fsmem serve exited {code} on SIGTERM")
    return groups, failures
