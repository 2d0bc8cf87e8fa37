"""The two protocol faces as a hostile client meets them: a real `fsmem mcp` and a real `fsmem serve` on 127.0.0.1.

Each face takes one raw message (text or bytes, sent as the client sent it)
and gives back every answer it got for it, then checks that the answers are
what a JSON-RPC client may rely on (`check`): at most one answer, exactly one
for a request with a valid id, well-formed, for that id or null, and the
server still up. Used by tests/test_protocol_faces.py (the payload list),
tests/test_protocol_fuzz.py and benchmarks/bench_protocol_fuzz.py (the fuzzer).
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from child_env import without_fsmem
from test_tools import NOW

WAIT = 60.0  # seconds an answer may take on a loaded machine before the face counts as silent
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class FaceDown(AssertionError):
    """The server stopped or went silent."""


def request_id(message: Any) -> Any:
    """The id an answer must carry when `message` is a request with a valid one (a string or a whole number)."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    id_ = message["id"]
    if isinstance(id_, bool) or not isinstance(id_, (str, int)):
        return None
    if isinstance(id_, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in id_):
        return None
    return id_


def parsed(raw: str | bytes) -> Any:
    """The message as the client meant it (None when it is not JSON)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def check(raw: str | bytes, answers: list[dict[str, Any]]) -> None:
    """At most one answer, one for a request with a valid id, each well-formed, for that id or null."""
    assert len(answers) <= 1, answers
    wanted = request_id(parsed(raw))
    if wanted is not None:
        assert len(answers) == 1, f"no answer to {str(raw)[:200]!r}"
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0", answer
        assert ("result" in answer) != ("error" in answer), answer
        assert answer.get("id") in (wanted, None), (answer, wanted)
        if "error" in answer:
            error = answer["error"]
            assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), answer
            assert error["code"] != -32603 or "took longer" in error["message"], answer  # never an internal error
        else:
            assert answer["id"] == wanted, answer


class Stdio:
    """`fsmem mcp` on `root`, initialised; `send` writes one line and collects its answers."""

    name = "stdio"

    def __init__(self, root: Path):
        env = without_fsmem()
        env["FSMEM_NOW"] = NOW
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fsmem", "--root", str(root), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.probes = itertools.count()
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._drain, daemon=True).start()
        self._write(json.dumps(INITIALIZE).encode())
        assert self._next()["id"] == "init"
        self._write(json.dumps(INITIALIZED).encode())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise FaceDown(f"fsmem mcp is gone (exit {self.proc.poll()}): {b''.join(self.stderr)[-400:]!r}") from None

    def _next(self, wait: float = WAIT) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=wait)
        except queue.Empty:
            raise FaceDown(f"fsmem mcp said nothing for {wait:g} s (exit {self.proc.poll()})") from None
        answer = json.loads(line)
        assert isinstance(answer, dict), line
        return answer

    def send(self, raw: str | bytes) -> list[dict[str, Any]]:
        """Write `raw` as one line, then a ping; its answers: those before the ping's, and the one its id awaits."""
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        assert b"\n" not in data and b"\r" not in data
        probe = f"probe-{next(self.probes)}"
        self._write(data)
        self._write(json.dumps({"jsonrpc": "2.0", "id": probe, "method": "ping"}).encode())
        answers, pinged = [], False
        wanted = request_id(parsed(raw))
        while not pinged or (wanted is not None and not answers):
            answer = self._next()
            if answer.get("id") == probe:
                pinged = True
            else:
                answers.append(answer)
        return answers

    def stop(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(30)


class Http:
    """`fsmem serve` on 127.0.0.1 serving `root` to one token; `send` posts one body and reads its answer."""

    name = "http"

    def __init__(self, root: Path, tmp: Path):
        from test_server_app import ServerProcess

        from fsmem.server.tokens import TokenStore

        config = tmp / "server.yaml"
        config.write_text(
            f"memories:\n  team: {root}\ntokens: tokens.json\n"
            "limits:\n  rate_per_second: 100000\n  burst: 100000\n  concurrency: 64\n"
        )
        store = TokenStore(tmp / "tokens.json")
        self.token = store.create(memory="team", agent="researcher").token
        self.server = ServerProcess("--config", str(config), tokens=store.path)
        import httpx2

        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self.token}",
        }
        self.http = httpx2.Client(base_url=self.server.base, headers=headers, timeout=WAIT)

    def send(self, raw: str | bytes) -> list[dict[str, Any]]:
        data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        try:
            answer = self.http.post("/mcp", content=data)
        except Exception as exc:
            raise FaceDown(f"fsmem serve did not answer: {exc!r} (exit {self.server.proc.poll()})") from None
        assert answer.status_code in (200, 202, 400), (answer.status_code, answer.text[:300], str(raw)[:200])
        if answer.status_code == 202:
            assert answer.content == b""
            return []
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        body = answer.json()
        assert isinstance(body, dict), body
        assert answer.status_code == 200 or "error" in body, body
        return [body]

    def alive(self) -> bool:
        return self.server.proc.poll() is None and self.http.get("/health").status_code == 200

    def stop(self) -> int:
        self.http.close()
        return self.server.stop()
