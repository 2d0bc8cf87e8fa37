"""The direct path (`fsmem.server.direct`) answers exactly as the SDK's session manager does.

Two servers in this process, each a real uvicorn on 127.0.0.1 with the door of
`fsmem serve`, over one memory and one token store: one with the direct path,
one with every request through the SDK's `StreamableHTTPSessionManager`. Every
request is posted to both; the status, the headers that matter, the body and
the request log's line must be the same, and the direct server must have
answered the plain requests itself (its session manager never called) and
left every other one to the SDK.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from test_tools import NOW, build_memory

from fsmem.server.tokens import TokenStore

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
uvicorn = pytest.importorskip("uvicorn", reason="needs the server extra: pip install 'fsmem[server]'")
import anyio  # noqa: E402
import httpx2  # noqa: E402

from fsmem.server.app import create_app  # noqa: E402
from fsmem.server.log import RequestLog  # noqa: E402
from fsmem.server.serving import listening_socket, uvicorn_config  # noqa: E402
from fsmem.server.settings import Limits, ServerSettings  # noqa: E402

pytestmark = pytest.mark.slow  # two real servers, though in this process: about 4 s
ACCEPT = "application/json, text/event-stream"
MATTER = ("content-type", "content-length", "mcp-session-id", "allow", "www-authenticate", "retry-after", "connection")
LOGGED = ("method", "path", "status", "rpc", "tool", "tool_error", "reason", "bytes_in", "bytes_out")


class Served:
    """One `MemoryServer` under uvicorn in a thread of this process, and the calls its session manager took."""

    def __init__(self, settings: ServerSettings, log: Path, direct: bool):
        self.log = log
        self.app = create_app(settings, log=RequestLog(log), direct=direct)
        self.to_sdk = 0
        handle = self.app.manager.handle_request

        async def counted(scope, receive, send):
            self.to_sdk += 1
            await handle(scope, receive, send)

        self.app.manager.handle_request = counted  # type: ignore[method-assign]
        sock = listening_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        self.server = uvicorn.Server(uvicorn_config(self.app, settings))  # as `fsmem serve` configures it
        self.thread = threading.Thread(target=lambda: anyio.run(self.server.serve, [sock]), daemon=True)
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                break
            threading.Event().wait(0.05)
        assert self.server.started

    def complete_lines(self) -> list[str]:
        """The log's whole lines: one being written has no newline yet."""
        return self.log.read_text().split("\n")[:-1]

    def lines(self) -> int:
        return len(self.complete_lines())

    def logged_after(self, lines: int) -> dict:
        """The request's log line (written once the answer is sent: it may come just after it); the server's
        other lines (a memory `warmed` at its start, in the background) are not the request's."""
        for _ in range(1000):
            records = [json.loads(line) for line in self.complete_lines()[lines:]]
            found = [record for record in records if record.get("event") == "request"]
            if found:
                return {key: found[0][key] for key in LOGGED}
            threading.Event().wait(0.01)
        raise AssertionError("no log line for the request")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("direct")
    mp = pytest.MonkeyPatch()
    mp.setenv("FSMEM_NOW", NOW)
    root = build_memory(tmp, "    tiny:\n      max_tokens: 60\n      max_results: 3\n")
    store = TokenStore(tmp / "tokens.json")
    tokens = {
        "full": store.create(memory="team", agent="researcher").token,
        "tiny": store.create(memory="team", agent="tiny").token,
        "read_only": store.create(memory="team", agent="researcher", read_only=True).token,
    }
    limits = Limits.from_dict({"rate_per_second": 100000, "burst": 100000})  # the door's limits are tested elsewhere
    settings = ServerSettings(memories={"team": root}, tokens=store.path, limits=limits)
    direct = Served(settings, tmp / "direct.jsonl", direct=True)
    sdk = Served(settings, tmp / "sdk.jsonl", direct=False)
    client = httpx2.Client(timeout=30)
    yield {"direct": direct, "sdk": sdk, "tokens": tokens, "client": client}
    client.close()
    direct.stop()
    sdk.stop()
    mp.undo()


def both(pair, body, *, token: str = "full", headers: dict | None = None, method: str = "POST", twice=()):
    """The answers of both servers to the same request, compared: the direct server's answer, whether the
    direct server answered it itself (and the other through its SDK), whether the door answered it on both.

    `twice`: (name, value) headers sent after the others, so that a header may come twice.
    """
    named = {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {pair['tokens'][token]}"}
    for name, value in (headers or {}).items():
        if value is None:
            named.pop(name, None)
        else:
            named[name] = value
    sent = [*named.items(), *twice]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    answers, logged, took = [], [], []
    for side in (pair["direct"], pair["sdk"]):
        before, lines = side.to_sdk, side.lines()
        answer = pair["client"].request(method, side.url, content=data, headers=sent)
        logged.append(side.logged_after(lines))
        took.append(side.to_sdk - before)
        answers.append(answer)
    direct, sdk = answers
    assert direct.status_code == sdk.status_code, (direct.text, sdk.text)
    assert {k: direct.headers.get(k) for k in MATTER} == {k: sdk.headers.get(k) for k in MATTER}
    assert direct.content == sdk.content
    assert logged[0] == logged[1]
    return direct, took[0] == 0 and took[1] == 1, took[1] == 0


def rpc(method: str, params=None, id_=1) -> dict:
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: dict, id_=1) -> dict:
    return rpc("tools/call", {"name": name, "arguments": arguments}, id_)


INITIALIZE = rpc(
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
)

# requests the direct path answers itself: (body, keyword arguments of `both`)
PLAIN = {
    "initialize": (INITIALIZE, {}),
    "initialized": ({"jsonrpc": "2.0", "method": "notifications/initialized"}, {}),
    "unknown notification": ({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": 1}}, {}),
    "ping": (rpc("ping"), {}),
    "tools/list": (rpc("tools/list", {}), {}),
    "tools/list, read-only token": (rpc("tools/list"), {"token": "read_only"}),
    "ls": (call("ls", {"path": "topics"}), {}),
    "read": (call("read", {"path": "topics/billing.md"}, "a-string-id"), {}),
    "search": (call("search", {"query": "billing terms"}), {}),
    "grep": (call("grep", {"pattern": "net 30"}), {}),
    "a tool's error": (call("read", {"path": "no/such/file.md"}), {}),
    "a write refused to a read-only token": (call("note", {"text": "x"}), {"token": "read_only"}),
    "an unknown tool": (call("no_such_tool", {}), {}),
    "an answer cut by its budget": (call("ls", {}), {"token": "tiny"}),
    "a huge id": (call("ls", {"path": "topics"}, 10**30), {}),
    "a negative id": (rpc("ping", None, -7), {}),
    "an unknown method": (rpc("no/such/method"), {}),
    "invalid params": (rpc("tools/call", {"arguments": {}}), {}),
    "params of the wrong type": (rpc("tools/call", {"name": 5}), {}),
    "resources/list": (rpc("resources/list"), {}),
    "the context": (rpc("resources/read", {"uri": "fsmem://context"}), {}),
    "an unknown resource": (rpc("resources/read", {"uri": "fsmem://nothing"}), {}),
    "a lone surrogate in an argument": (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"\\ud800"}}}',
        {},
    ),
    "a handshake-era version header": (
        call("ls", {"path": "topics"}),
        {"headers": {"MCP-Protocol-Version": "2025-03-26"}},
    ),
    "a session id header (stateless: ignored)": (rpc("ping"), {"headers": {"Mcp-Session-Id": "abc"}}),
    "Accept: */*": (rpc("ping"), {"headers": {"Accept": "*/*"}}),
    "Accept: application/json only": (rpc("ping"), {"headers": {"Accept": "application/json"}}),
    "a charset in the content type": (rpc("ping"), {"headers": {"Content-Type": "application/json; charset=utf-8"}}),
    "a second content type (the first counts)": (rpc("ping"), {"twice": [("Content-Type", "text/plain")]}),
    "a second version header (the first counts)": (
        rpc("ping"),
        {"headers": {"MCP-Protocol-Version": "2025-06-18"}, "twice": [("MCP-Protocol-Version", "2026-07-28")]},
    ),
}

# requests left to the SDK: (body, keyword arguments of `both`)
TO_SDK = {
    "a posted response": ({"jsonrpc": "2.0", "id": 1, "result": {}}, {}),
    "a posted error": ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "no"}}, {}),
    "an empty Accept": (rpc("ping"), {"headers": {"Accept": ""}}),
    "Accept: text/event-stream only": (rpc("ping"), {"headers": {"Accept": "text/event-stream"}}),
    "Accept: text/html": (rpc("ping"), {"headers": {"Accept": "text/html"}}),
    "no content type": (rpc("ping"), {"headers": {"Content-Type": None}}),
    "a wrong content type": (rpc("ping"), {"headers": {"Content-Type": "text/plain"}}),
    "an upper-case content type": (rpc("ping"), {"headers": {"Content-Type": "Application/JSON"}}),
    "a longer media type": (rpc("ping"), {"headers": {"Content-Type": "application/json-seq"}}),
    "the 2026 wire": (rpc("ping"), {"headers": {"MCP-Protocol-Version": "2026-07-28"}}),
    "the 2026 wire first, then a handshake-era version": (
        rpc("ping"),
        {"headers": {"MCP-Protocol-Version": "2026-07-28"}, "twice": [("MCP-Protocol-Version", "2025-06-18")]},
    ),
    "a wrong content type first": (
        rpc("ping"),
        {"headers": {"Content-Type": "text/plain"}, "twice": [("Content-Type", "application/json")]},
    ),
    "an unknown version header": (rpc("ping"), {"headers": {"MCP-Protocol-Version": "1999-01-01"}}),
    "DELETE": (b"", {"method": "DELETE"}),
    "PUT": (rpc("ping"), {"method": "PUT"}),
}


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_a_plain_request_is_answered_directly_as_the_sdk_answers_it(pair, case):
    body, kwargs = PLAIN[case]
    _answer, direct, _door = both(pair, body, **kwargs)
    assert direct, "the direct server gave this request to the SDK"


@pytest.mark.parametrize("case", sorted(TO_SDK))
def test_anything_else_goes_to_the_sdk_and_is_answered_as_before(pair, case):
    body, kwargs = TO_SDK[case]
    _answer, direct, door = both(pair, body, **kwargs)
    assert not direct and not door


# messages the door's decoder answers (`fsmem.agents.jsonrpc`), before either path: the SDK took the first
# two for notifications and dropped the others, leaving the client without an answer
REFUSED = {
    "an id of null": ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600, None),
    "an id that is a fraction": (rpc("ping", None, 1.5), -32600, None),
    "a wrong JSON-RPC version": ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, -32600, 1),
    "no JSON-RPC version": ({"id": 1, "method": "ping"}, -32600, 1),
    "a batch": ([rpc("ping", None, 1), rpc("ping", None, 2)], -32600, None),
    "an empty batch": ([], -32600, None),
    "a bare string": ("ping", -32600, None),
    "params as a list": (rpc("tools/list", [], 4), -32602, 4),
    "not JSON": (b"{not json", -32700, None),
    "not UTF-8": (b"\xff\xfe", -32700, None),
    "too deep": (b"[" * 40 + b"]" * 40, -32600, None),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_door_answers_before_either_path(pair, case):
    body, code, id_ = REFUSED[case]
    answer, _direct, door = both(pair, body)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code and answer.json()["id"] == id_
    assert door  # refused by the door: neither path was asked


def test_a_tool_call_answer_is_the_sdks_json(pair):
    answer, direct, _door = both(pair, call("ls", {"path": "topics"}, 41))
    data = answer.json()
    assert direct and answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert data["jsonrpc"] == "2.0" and data["id"] == 41 and data["result"]["isError"] is False
    assert "topics/billing.md" in data["result"]["content"][0]["text"]


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text())
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner))


@settings(max_examples=40, deadline=None)
@given(
    jsonrpc=st.sampled_from(["2.0", "2.0", "1.0", None]),
    id_=st.one_of(st.just("absent"), _scalars),
    method=st.one_of(st.sampled_from(["ping", "tools/list", "tools/call", "initialize", "notifications/x"]), st.text()),
    params=st.one_of(
        st.just("absent"), _values, st.fixed_dictionaries({"name": st.text()}, optional={"arguments": _values})
    ),
)
def test_any_message_gets_the_same_answer_on_both_paths(pair, jsonrpc, id_, method, params):
    message = {"method": method}
    if jsonrpc is not None:
        message["jsonrpc"] = jsonrpc
    if id_ != "absent":
        message["id"] = id_
    if params != "absent":
        message["params"] = params
    both(pair, message)
