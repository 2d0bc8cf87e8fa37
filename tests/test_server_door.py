"""The door of `fsmem serve`, tried as an attacker would: a real server process, raw HTTP and raw sockets.

What it must hold (README, "Security model"): a request from a web page or
for another Host is refused before its token is looked at; a declared body
over the cap is refused at once; a body that is not JSON, or too deep, is a
JSON-RPC error, never a 500; a lone surrogate in a tool argument is the tool
answer every face gives; a connection that sends no complete request head
is closed by a deadline; event streams have their own limit; no error names
a path of the host; no query costs more than its bounds; and a scoped token
learns nothing of other files from history.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from test_server_app import HEADERS, ServerProcess, session, text_of, tool_call
from test_tools import NOW, build_memory

from fsmem import Memory
from fsmem.server.tokens import TokenStore

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install 'fsmem[server]'")
import anyio  # noqa: E402
import httpx2  # noqa: E402

pytestmark = pytest.mark.slow
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ALLOWED = "http://app.example:3000"


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("door")
    root = build_memory(tmp)
    os.environ["FSMEM_NOW"] = NOW
    try:
        Memory.init(root, git=True)
        agent = Memory(root, agent="researcher")
        agent.write("entities/people/layoff-list-jane-doe.md", "# Plans\n\n- kept\n")
        agent.edit("topics/billing.md", old="net 30", new="net 45")
        agent.write("entities/orgs/secret-merger.md", "# Merger\n")
    finally:
        del os.environ["FSMEM_NOW"]
    store = TokenStore(tmp / "tokens.json")
    names = ("full", "topics", "streams", "bystander", "heavy")
    made = {
        n: store.create(memory="team", agent="researcher", paths=["topics/"] if n == "topics" else None) for n in names
    }
    config = tmp / "server.yaml"
    config.write_text(
        f"memories:\n  team: {root}\ntokens: tokens.json\nallowed_origins: [{ALLOWED}]\n"
        "limits:\n  header_timeout_seconds: 1\n  rate_per_second: 1000\n  burst: 1000\n"
    )
    server = ServerProcess("--config", str(config), tokens=store.path)
    host, port = server.base.removeprefix("http://").split(":")
    yield {"server": server, "root": root, "tokens": {k: v.token for k, v in made.items()}, "at": (host, int(port))}
    assert server.stop() == 0


def post(door, token: str, body, headers: dict | None = None) -> httpx2.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = dict(HEADERS, Authorization=f"Bearer {token}", **(headers or {}))
    return httpx2.post(door["server"].base + "/mcp", content=data, headers=sent, timeout=30)


def raw(door, head: bytes) -> socket.socket:
    sock = socket.create_connection(door["at"])
    sock.sendall(head)
    return sock


def answer_of(sock: socket.socket, limit: float = 10) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    sock.settimeout(limit)
    started, data = time.monotonic(), b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data, time.monotonic() - started
        data += chunk


def refused_as_jsonrpc(answer: httpx2.Response, status: int, code: int) -> str:
    assert answer.status_code == status and answer.headers["content-type"] == "application/json", answer.text
    data = answer.json()
    assert data["id"] is None and data["error"]["code"] == code and "result" not in data
    return data["error"]["message"]


# -- 2. Origin and Host -------------------------------------------------------------------------------


def test_a_web_page_or_another_host_is_refused_before_the_token(door):
    token = door["tokens"]["full"]
    logged = len(door["server"].requests())
    for origin in ("http://evil.example", "null", "http://app.example", "https://app.example:3000"):
        message = refused_as_jsonrpc(post(door, token, LIST, {"Origin": origin}), 403, -32003)
        assert message.startswith(f"requests from the web page at {origin!r} are refused")
    message = refused_as_jsonrpc(post(door, token, LIST, {"Host": "evil.example"}), 421, -32003)
    assert message.startswith("this server answers to the Host names 127.0.0.1, [::1], localhost, not 'evil.example'")
    # refused before the token is looked at: a bad token gets the same answer
    assert post(door, "fsmem_nonsense", LIST, {"Origin": "http://evil.example"}).status_code == 403
    deadline = time.monotonic() + 10
    while len(door["server"].requests()) < logged + 6 and time.monotonic() < deadline:
        time.sleep(0.05)  # the server's log lines are read as they come
    reasons = [line["reason"] for line in door["server"].requests()[logged : logged + 6]]
    assert reasons == ["origin"] * 4 + ["host", "origin"]
    # what a loopback server does answer: no Origin (the MCP SDK, curl), its own names, any port
    for host in ("127.0.0.1", "localhost", f"localhost:{door['at'][1]}", f"127.0.0.1:{door['at'][1]}"):
        assert post(door, token, LIST, {"Host": host}).status_code == 200


def test_an_allowed_origin_is_answered_with_cors_headers(door):
    token = door["tokens"]["full"]
    answered = post(door, token, LIST, {"Origin": ALLOWED})
    assert answered.status_code == 200 and answered.headers["access-control-allow-origin"] == ALLOWED
    preflight = httpx2.request(
        "OPTIONS",
        door["server"].base + "/mcp",
        headers={"Origin": ALLOWED, "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.status_code == 204 and "authorization" in preflight.headers["access-control-allow-headers"]
    evil = httpx2.request("OPTIONS", door["server"].base + "/mcp", headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers


# -- 4. the body ------------------------------------------------------------------------------------


def test_a_declared_length_over_the_cap_is_refused_at_once_and_the_connection_closed(door):
    token = door["tokens"]["full"]
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 999999999\r\n\r\n"
    ).encode()
    data, took = answer_of(raw(door, head + b'{"jsonrpc":'))
    assert data.startswith(b"HTTP/1.1 413 ") and b"connection: close" in data.lower()
    assert b"larger than 1048576 bytes" in data and took < 2


def test_a_body_that_is_not_json_or_too_deep_is_a_jsonrpc_error(door):
    token = door["tokens"]["full"]
    too_deep = refused_as_jsonrpc(post(door, token, b"[" * 100_000), 400, -32600)
    assert too_deep == "Invalid request: JSON nested more than 32 levels deep"
    deep_but_valid = b"[" * 40 + b"1" + b"]" * 40
    assert refused_as_jsonrpc(post(door, token, deep_but_valid), 400, -32600) == too_deep
    assert refused_as_jsonrpc(post(door, token, b'{"jsonrpc": '), 400, -32700).startswith("Parse error: ")
    assert refused_as_jsonrpc(post(door, token, b'{"a": "\xff"}'), 400, -32700) == (
        "Parse error: the message is not UTF-8 text"
    )
    assert refused_as_jsonrpc(post(door, token, b"1" * 5000), 400, -32700).startswith("Parse error: ")
    assert not any(line["status"] == 500 for line in door["server"].requests())


def test_a_lone_surrogate_in_a_tool_argument_is_the_tool_answer(door):
    token = door["tokens"]["full"]
    body = json.dumps(tool_call("read", {"path": "topics/\ud800.md"}), ensure_ascii=True).encode()
    answer = post(door, token, body)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] and result["content"][0]["text"] == (
        "error: argument 'path' contains '\\ud800', which is not text (a lone surrogate, or bytes that are "
        "not UTF-8); send plain text"
    )
    key = json.dumps(tool_call("grep", {"pattern": "x", "\udfff": 1}), ensure_ascii=True).encode()
    assert post(door, token, key).json()["result"]["isError"]


# -- 4. connection deadlines --------------------------------------------------------------------------


def test_a_client_still_sending_after_its_deadline_reads_the_408_not_a_reset(door):
    """Closed at once with the client's bytes unread, the socket answers with a reset instead of a FIN, and the
    client's read fails (ECONNRESET; before the lingering close this failed about one run in four here); the
    lingering close reads and drops them, so the 408 and a clean end always arrive."""
    socks = [raw(door, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(24)]
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            for sock in socks:
                try:
                    sock.send(b"X")
                except OSError:
                    pass
            time.sleep(0.001)

    threading.Thread(target=flood, daemon=True).start()
    try:
        for sock in socks:
            data, took = answer_of(sock)
            assert data.startswith(b"HTTP/1.1 408 ") and took < 4
    finally:
        stop.set()
        for sock in socks:
            sock.close()


def test_idle_and_header_drip_connections_are_closed_by_the_head_deadline(door):
    idle = [socket.create_connection(door["at"]) for _ in range(20)]
    drips = [raw(door, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(20)]
    stop = threading.Event()

    def drip() -> None:
        while not stop.is_set():
            for sock in drips:
                try:
                    sock.send(b"X")
                except OSError:
                    pass
            time.sleep(0.2)

    threading.Thread(target=drip, daemon=True).start()
    try:
        served = post(door, door["tokens"]["bystander"], LIST)  # others are served meanwhile
        assert served.status_code == 200
        for sock in idle:
            data, took = answer_of(sock)
            assert data == b"" and took < 4
        for sock in drips:
            data, took = answer_of(sock)
            assert data.startswith(b"HTTP/1.1 408 ") and took < 4
    finally:
        stop.set()
        for sock in idle + drips:
            sock.close()
    # a connection that keeps sending requests is not cut: each head has its own deadline
    with httpx2.Client(headers=dict(HEADERS, Authorization=f"Bearer {door['tokens']['bystander']}")) as http:
        for _ in range(4):
            assert http.post(door["server"].base + "/mcp", json=LIST).status_code == 200
            time.sleep(0.6)


def test_a_head_over_the_cap_is_refused_with_a_431_whether_it_comes_whole_or_never_ends(door):
    """httptools sets no bound on a request's head (h11 did): a head of more than 16 KiB, sent whole or sent
    on and on without its end, is answered 431 and the connection closed, before the app or the token."""
    big = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * (20 << 10) + b"\r\ncontent-length: 0\r\n\r\n"
    endless = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * (40 << 10)
    for head in (big, endless):
        sock = raw(door, head)
        try:
            data, took = answer_of(sock)
        finally:
            sock.close()
        assert data.startswith(b"HTTP/1.1 431 ") and data.endswith(b"\r\n\r\n") and took < 4
    # a head just under the cap is served as any other
    pad = b"a" * (15 << 10)
    with httpx2.Client(headers=dict(HEADERS, Authorization=f"Bearer {door['tokens']['bystander']}")) as http:
        assert http.post(door["server"].base + "/mcp", json=LIST, headers={"X-Pad": pad.decode()}).status_code == 200


def test_pipelined_requests_are_answered_in_order_and_the_next_head_has_its_deadline(door):
    body = json.dumps(LIST).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {door['tokens']['bystander']}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = raw(door, (head + body) * 2)
    try:
        data, took = answer_of(sock)  # both answers, then the head deadline (1 s) closes the idle connection
    finally:
        sock.close()
    assert data.count(b"HTTP/1.1 200 ") == 2 and data.count(b'"tools"') == 2 and 0.9 < took < 4


def test_event_streams_have_their_own_limit(door):
    token = door["tokens"]["streams"]
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    with httpx2.Client(timeout=30) as first, httpx2.Client(timeout=30) as second:
        stream = first.send(first.build_request("GET", door["server"].base + "/mcp", headers=headers), stream=True)
        try:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            more = second.send(second.build_request("GET", door["server"].base + "/mcp", headers=headers), stream=True)
            refused = more.status_code, more.read() if more.status_code == 429 else b""
            more.close()
            assert refused[0] == 429 and b"already has 1 event stream(s) open" in refused[1]
            # the stream does not count among the token's requests: four at once are all served
            results: list[int] = []
            calls = [
                threading.Thread(target=lambda: results.append(post(door, token, LIST).status_code)) for _ in range(4)
            ]
            for thread in calls:
                thread.start()
            for thread in calls:
                thread.join(30)
            assert results == [200] * 4
        finally:
            stream.close()


# -- 3 and 5. errors and costs ----------------------------------------------------------------------------


def host_places(root: Path) -> list[str]:
    return [str(root), sys.prefix, os.path.dirname(sys.executable), str(Path.home())]


def test_no_error_names_a_path_of_the_host_and_a_long_pattern_has_a_clear_bound(door):
    for name in ("full", "topics"):
        token = door["tokens"][name]
        cases = [
            ("grep", {"pattern": "a" * 200_000}, True),
            ("grep", {"pattern": "a" * 200_000, "fixed_strings": True}, True),
            ("grep", {"pattern": "(a|b|c)*x{1,50}" * 60}, False),  # 900 characters of the costliest kind run
            ("grep", {"pattern": r"\p{L}{1,50}" * 40}, True),
            ("read", {"path": "/etc/passwd"}, True),
        ]
        texts = []
        for tool, arguments, refused in cases:
            started = time.monotonic()
            result = post(door, token, tool_call(tool, arguments)).json()["result"]
            texts.append(result["content"][0]["text"])
            assert time.monotonic() - started < 5
            assert result["isError"] == refused, texts[-1]
        assert texts[0] == (
            "error: the pattern is 200,000 characters; a regular expression may have at most 1,000: look for a "
            "shorter part of it, or search for a fixed string with -F (up to 10,000)"
        )
        assert texts[1].startswith("error: the pattern is 200,000 characters; a fixed string (-F) may have at most")
        assert "is too costly to run" in texts[3]
        for text in texts:
            for place in host_places(door["root"]):
                assert place not in text, text
    # a fixed string of the bound is searched
    result = post(door, door["tokens"]["full"], tool_call("grep", {"pattern": "a" * 10_000, "fixed_strings": True}))
    assert not result.json()["result"]["isError"]


def distinct_words(count: int) -> str:
    """`count` words of four letters that stem to `count` distinct terms (a command line holds 100 KB)."""
    from fsmem.search.analyzer import Analyzer
    from fsmem.search.scoring import query_terms

    letters = "bcdfghjklmnpqrstvwxz"
    words = [a + b + c + d for a in letters for b in "aeiou" for c in letters for d in "aeiou"][:count]
    assert len(query_terms(Analyzer(), " ".join(words))[0]) == count
    return " ".join(words)


def test_a_query_of_twenty_thousand_words_is_refused_before_it_runs_on_every_face(door):
    words = distinct_words(10_000) + " " + " ".join(f"w{n}" for n in range(10_000))
    started = time.monotonic()
    result = post(door, door["tokens"]["full"], tool_call("search", {"query": words})).json()["result"]
    assert result["isError"] and time.monotonic() - started < 5
    assert result["content"][0]["text"] == (
        "error: the query has 20,000 distinct words; a search takes at most 100: ask with the words that name "
        "what you need"
    )
    env = without_fsmem()
    started = time.monotonic()
    done = cli_runner.run(["--root", str(door["root"]), "search", words], text=True, env=env)  # the CLI, here
    assert done.returncode == 2 and done.stderr.startswith("fsmem: error: the query has 20,000 distinct words")
    assert time.monotonic() - started < 20
    # recall, whose query is a whole turn, searches its first words
    recalled = Memory(door["root"], agent="researcher").recall("proration " + words)
    assert not recalled.skipped


# -- 1. history through a scoped token ---------------------------------------------------------------------


def test_a_scoped_token_learns_no_other_file_from_history(door):
    token = door["tokens"]["topics"]
    url = door["server"].base + "/mcp"

    async def actions(client):
        calls = [("show", {"path": "topics/billing.md", "at": f"HEAD~{k}"}) for k in range(8)]
        calls += [("log", {"path": "topics"}), ("show", {"path": "topics/billing.md", "at": "HEAD"})]
        return [await client.call_tool(name, arguments) for name, arguments in calls]

    results = session(url, token, actions)
    texts = [text_of(r) for r in results]
    for text in texts:
        for word in ("entities", "layoff", "jane", "merger"):
            assert word not in text.lower(), text
    assert "- payment terms: net 45" in texts[-1] and not results[-1].is_error
    refusals = {t for t, r in zip(texts, results, strict=True) if r.is_error}
    assert all(t.startswith("error: no version of topics/billing.md at 'HEAD~") for t in refusals)


# -- 5. an abandoned read keeps its share until it ends --------------------------------------------------------


def test_a_read_given_up_keeps_its_tokens_slot_until_its_thread_ends(tmp_path, monkeypatch):
    from fsmem.agents import tools as agent_tools
    from fsmem.server.app import MemoryServer
    from fsmem.server.log import RequestLog
    from fsmem.server.settings import Limits, ServerSettings

    root = build_memory(tmp_path)
    store = TokenStore(tmp_path / "tokens.json")
    token = store.create(memory="team", agent="researcher").token
    limits = Limits(tool_timeout_seconds=0.3, concurrency=1, workers=2)
    settings = ServerSettings(memories={"team": root}, tokens=store.path, limits=limits)
    real_call = agent_tools.call
    running = []
    go, ended = threading.Event(), threading.Event()

    def slow_call(memory, name, arguments=None):
        running.append(name)
        go.wait(60)  # held past the 0.3 s limit until the test has seen its slot still taken
        running.remove(name)
        try:
            return real_call(memory, name, arguments)
        finally:
            ended.set()

    monkeypatch.setattr(agent_tools, "call", slow_call)
    app = MemoryServer(settings, log=RequestLog(stream=open(os.devnull, "w")))  # noqa: SIM115

    async def main():
        async with app.manager.run():
            transport = httpx2.ASGITransport(app=app)
            headers = dict(HEADERS, Authorization=f"Bearer {token}")
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
                given_up = await http.post("/mcp", json=tool_call("grep", {"pattern": "proration"}))
                while_running = await http.post("/mcp", json=tool_call("grep", {"pattern": "proration"}))
                threads = len(running)
                go.set()
                await anyio.to_thread.run_sync(ended.wait, 60)
                # the thread's end is handed to the event loop just after it: until the loop has taken it, refused
                deadline = anyio.current_time() + 10
                # a costly call: a cheap one (a list) is counted apart, and was served all along
                while (
                    after := await http.post("/mcp", json=tool_call("grep", {"pattern": "proration"}))
                ).status_code == 429:
                    assert "in flight" in after.text and anyio.current_time() < deadline, after.text
                    await anyio.sleep(0.01)
                return given_up, while_running, threads, after

    given_up, while_running, threads, after = anyio.run(main)
    assert given_up.json()["result"]["isError"]
    assert while_running.status_code == 429 and "already has 1 request(s) in flight" in while_running.text
    assert threads == 1 and after.status_code == 200


def test_errors_for_agents_name_no_path_of_the_host(tmp_path, monkeypatch):
    """An OSError naming the install (rg missing) and a broken fsmem.yaml, as the dispatcher and the door say them."""
    import fsmem.query.grep as grep_module
    from fsmem.agents import tools
    from fsmem.agents.tools import hide_host_paths

    root = build_memory(tmp_path)
    memory = Memory(root, agent="researcher")
    missing = os.path.join(sys.prefix, "bin", "no-such-rg")
    monkeypatch.setattr(grep_module, "find_rg", lambda: missing)
    answer = tools.call(memory, "grep", {"pattern": "proration"})
    assert answer.is_error and answer.text == "error: no such file or directory ('<host path>')", answer.text
    assert hide_host_paths(f"{root}/fsmem.yaml is not valid YAML; {root}: {Path.home()}/x", root) == (
        "fsmem.yaml is not valid YAML; the memory: <host path>"
    )
    monkeypatch.undo()

    from fsmem.server.app import MemoryServer
    from fsmem.server.log import RequestLog
    from fsmem.server.settings import ServerSettings

    store = TokenStore(tmp_path / "tokens.json")
    token = store.create(memory="team", agent="researcher").token
    app = MemoryServer(ServerSettings(memories={"team": root}, tokens=store.path), log=RequestLog(stream=sys.stderr))
    (root / "fsmem.yaml").write_text("budgets: [unclosed\n")

    async def main():
        async with app.manager.run():
            transport = httpx2.ASGITransport(app=app)
            headers = dict(HEADERS, Authorization=f"Bearer {token}")
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
                return await http.post("/mcp", json=LIST)

    refused = anyio.run(main)
    message = refused.json()["error"]["message"]
    assert refused.status_code == 403 and message.startswith("this token's agent cannot use the memory: ")
    assert str(root) not in message and str(tmp_path) not in message, message


def test_a_path_of_c1_controls_and_bidi_overrides_reaches_the_log_escaped(door):
    """Anyone who can reach the port chooses the path a request line logs: C1's CSI and U+202E were written raw
    (json.dumps escapes C0 only) to the log, which is stderr, often a terminal (found by attack54a)."""
    answer = httpx2.get(door["server"].base + "/mcp/%C2%9B2J%E2%80%AEx%1B]0;t%07", timeout=30)
    assert answer.status_code == 401
    server = door["server"]
    line = server.wait_for(lambda line: line.get("event") == "request" and "2J" in (line.get("path") or ""))
    assert line["path"] == "/mcp/\x9b2J\u202ex\x1b]0;t\x07"  # the same value, parsed
    raw = next(text for text in server.raw if "2J" in text)
    assert "\\u009b2J\\u202ex\\u001b]0;t\\u0007" in raw and not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", raw)
