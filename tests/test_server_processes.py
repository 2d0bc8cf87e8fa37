"""`fsmem serve` with `processes: 2`: real servers on 127.0.0.1, the MCP SDK's client and raw HTTP.

Two servers per run: one for pinning, sharing across workers, the rate limit
and the parent's wait for a head; one that loses a worker and is then stopped
with SIGTERM while writes are in flight. The settings' checks run in-process.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import cli_runner
import pytest
from child_env import without_fsmem
from test_server_app import (
    LIST,
    ServerProcess,
    _copy_memory,
    post,
    researcher_note,
    session,
    tool_call,
    waiting_for_the_lock,
)
from test_tools import NOW

from fsmem.errors import ConfigError
from fsmem.server.pinning import head_token, worker_for
from fsmem.server.settings import ServerSettings, processes, usable_cores
from fsmem.server.tokens import TokenStore
from fsmem.store.files import file_lock

HEADERS_RAW = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tokens_for(store: TokenStore, per_worker: int, count: int = 2) -> list[list[str]]:
    """`per_worker` tokens of the researcher for each of `count` workers (tokens are random: made until enough)."""
    found: list[list[str]] = [[] for _ in range(count)]
    while any(len(tokens) < per_worker for tokens in found):
        token = store.create(memory="team", agent="researcher").token
        tokens = found[worker_for(token.encode(), count)]  # type: ignore[index]
        if len(tokens) < per_worker:
            tokens.append(token)
    return found


def served_by(server: ServerProcess, token: str) -> set[int]:
    """The workers whose log lines show requests of `token` (a line is written just after its answer is sent)."""
    token_id = token.split("_")[1]
    server.wait_for(lambda line: line.get("event") == "request" and line.get("token") == token_id)
    time.sleep(0.2)
    return {line["worker"] for line in server.requests() if line.get("token") == token_id}


def raw(server: ServerProcess) -> socket.socket:
    address = urlsplit(server.base)
    return socket.create_connection((address.hostname, address.port), timeout=10)


def head(token: str, length: int) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


# -- one server, two workers --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    root = _copy_memory(tmp, "team")
    config = tmp / "server.yaml"
    config.write_text(
        f"memories:\n  team: {root}\ntokens: tokens.json\nprocesses: 2\n"
        "limits:\n  rate_per_second: 0.001\n  burst: 10\n  header_timeout_seconds: 2\n"
    )
    store = TokenStore(tmp / "tokens.json")
    tokens = tokens_for(store, 4)  # one of each worker per test
    server = ServerProcess("--config", str(config), tokens=store.path)
    yield {"server": server, "root": root, "tokens": tokens}
    assert server.stop() == 0


@pytest.mark.slow
def test_a_note_through_one_worker_is_found_by_search_and_grep_through_the_other(two):
    server, root = two["server"], two["root"]
    url = server.base + "/mcp"
    writer, reader = two["tokens"][0][0], two["tokens"][1][0]

    async def look(client):
        found = await client.call_tool("search", {"query": "quokkas of zanzibar"})
        grepped = await client.call_tool("grep", {"pattern": "zanzibar quokka"})
        return found.content[0].text, grepped.content[0].text

    before = session(url, reader, look)  # the reader's worker has its caches and grep's word index open
    assert before[0].startswith("no relevant memory for 'quokkas of zanzibar'") and before[1] == "(no matches)"

    async def note(client):
        return await client.call_tool("note", {"text": "- the zanzibar quokka ledger is kept by Ines"})

    noted = session(url, writer, note)
    assert noted.content[0].text.startswith(f"noted in {researcher_note(root)}")
    found, grepped = session(url, reader, look)
    assert researcher_note(root) in found and "zanzibar quokka ledger" in found
    assert f"{researcher_note(root)}:" in grepped and "zanzibar quokka ledger" in grepped
    assert served_by(server, writer) == {0} and served_by(server, reader) == {1}
    listening = [line for line in server.lines if line.get("event") == "listening"]
    assert len(listening) == 1 and listening[0]["processes"] == 2


@pytest.mark.slow
def test_a_later_request_with_another_workers_token_is_refused_and_the_connection_closed(two):
    server = two["server"]
    first, other = two["tokens"][0][1], two["tokens"][1][1]
    address = urlsplit(server.base)
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    body = json.dumps(LIST)
    headers = HEADERS_RAW
    conn.request("POST", "/mcp", body, {**headers, "Authorization": f"Bearer {first}"})
    answer = conn.getresponse()
    assert answer.status == 200 and answer.getheader("connection") != "close"
    answer.read()
    conn.request("POST", "/mcp", body, {**headers, "Authorization": f"Bearer {other}"})  # the same connection
    refused = conn.getresponse()
    assert refused.status == 421 and refused.getheader("connection") == "close"
    assert json.loads(refused.read())["error"]["message"] == (
        "this connection serves other tokens: send requests with this token on a new connection"
    )
    conn.close()
    assert post(server.base + "/mcp", other, LIST).status_code == 200  # on a connection of its own
    assert served_by(server, other) == {1}
    refusal = server.wait_for(lambda line: line.get("status") == 421)
    assert refusal["worker"] == 0 and refusal["reason"] == "other process" and "token" not in refusal


@pytest.mark.slow
def test_one_tokens_rate_limit_is_exact_over_several_connections(two):
    server = two["server"]
    tokens = two["tokens"][0][2], two["tokens"][1][2]
    address = urlsplit(server.base)
    statuses: dict[str, list[int]] = {token: [] for token in tokens}
    for token in tokens:  # burst 10, nearly no refill: 15 requests over 5 connections, 10 of them served
        conns = [http.client.HTTPConnection(address.hostname, address.port, timeout=10) for _ in range(5)]
        for _round in range(3):
            for conn in conns:
                conn.request("POST", "/mcp", json.dumps(LIST), {**HEADERS_RAW, "Authorization": f"Bearer {token}"})
                answer = conn.getresponse()
                answer.read()
                statuses[token].append(answer.status)
                if answer.getheader("connection") == "close":
                    conn.close()
        for conn in conns:
            conn.close()
    for token in tokens:
        assert statuses[token] == [200] * 10 + [429] * 5, statuses[token]
    assert served_by(server, tokens[0]) == {0} and served_by(server, tokens[1]) == {1}


@pytest.mark.slow
def test_the_parent_waits_for_a_head_in_pieces_and_bounds_a_slow_or_long_one(two):
    server = two["server"]
    token = two["tokens"][1][3]
    silent, slow = raw(server), raw(server)
    slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
    body = json.dumps(LIST).encode()
    pieces = raw(server)
    whole = head(token, len(body)) + body
    pieces.sendall(whole[:30])
    time.sleep(0.3)  # the parent has looked at the part and waits for the rest
    pieces.sendall(whole[30:])
    assert pieces.recv(100).startswith(b"HTTP/1.1 200")
    assert post(server.base + "/mcp", token, LIST).status_code == 200  # the silent and the slow hold nobody
    long = raw(server)
    long.sendall(b"POST /mcp HTTP/1.1\r\nX-Pad: " + b"a" * (17 << 10))
    assert long.recv(100).startswith(b"HTTP/1.1 431")
    slow.settimeout(5)
    began = time.monotonic()
    assert slow.recv(100).startswith(b"HTTP/1.1 408")  # the head deadline (2 s) counts from the connection
    silent.settimeout(5)
    assert silent.recv(100) == b""  # closed without a word, as one process closes it
    assert time.monotonic() - began < 2.5
    for sock in (silent, slow, pieces, long):
        sock.close()


def test_the_head_token_is_read_as_the_door_reads_it():
    assert head_token(b"POST /mcp HTTP/1.1\r\nHost: x\r\nAUTHORIZATION:  bearer  abc \r\n\r\n") == b"abc"
    assert head_token(b"POST /mcp HTTP/1.1\r\nAuthorization: Basic abc\r\nAuthorization: Bearer b\r\n\r\n") is None
    assert head_token(b"POST /mcp HTTP/1.1\r\nHost: x\r\n\r\nAuthorization: Bearer body\r\n") is None
    assert worker_for(None, 2) is None and worker_for(b"fsmem_x_y", 3) == worker_for(b"fsmem_x_y", 3)


# -- a worker lost, then SIGTERM ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_sigterm_lets_writes_in_flight_finish(tmp_path):
    root = _copy_memory(tmp_path, "team")
    store = TokenStore(tmp_path / "tokens.json")
    (first,), (second,) = tokens_for(store, 1)
    server = ServerProcess("--memory", f"team={root}", "--processes", "2", tokens=store.path)
    try:
        url = server.base + "/mcp"
        pids = {line["worker"]: line["pid"] for line in server.lines if line.get("event") == "worker started"}
        os.kill(pids[1], signal.SIGKILL)
        exited = server.wait_for(lambda line: line.get("event") == "worker exited")
        assert exited == {**exited, "worker": 1, "pid": pids[1], "how": "signal SIGKILL"}
        # a pid neither worker had: worker 0's own line (another pid than pids[1]) does not count
        again = server.wait_for(lambda line: line.get("event") == "worker started" and line["pid"] not in pids.values())
        assert again["worker"] == 1
        assert post(url, second, LIST).status_code == 200  # served by the new worker 1
        outcome: dict = {}
        with file_lock(root):  # both workers' notes wait for the write lock
            writers = [
                threading.Thread(
                    target=lambda t=token: outcome.setdefault(
                        t, post(url, t, tool_call("note", {"text": f"- during {t[6:18]}"}))
                    )
                )
                for token in (first, second)
            ]
            for writer in writers:
                writer.start()
            waiting_for_the_lock(root, pids[0], again["pid"])  # both notes in flight, one in each worker
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert server.proc.poll() is None  # still finishing what its workers started
        for writer in writers:
            writer.join(30)
        assert server.stop() == 0
        text = (root / researcher_note(root)).read_text()
        for token in (first, second):
            assert outcome[token].status_code == 200 and f"- during {token[6:18]}" in text
        assert served_by(server, first) == {0} and served_by(server, second) == {1}
        assert [line["event"] for line in server.lines].count("listening") == 1
        assert len(server.lines) == len(server.raw)  # three processes wrote to one standard error: whole lines only
        assert server.lines[-1]["event"] == "stopped" and server.lines[-1]["signal"] == "SIGTERM"
    finally:
        if server.proc.poll() is None:  # a failed assertion above: stop it all the same
            server.stop()


def test_a_worker_that_cannot_start_stops_the_server_with_an_error(tmp_path):
    """A worker that exits before serving, three times in a row: the parent stops (1), saying which and how."""
    root = _copy_memory(tmp_path, "team")
    script = (
        "import sys\n"
        "from fsmem.server.log import RequestLog\n"
        "from fsmem.server.parent import Parent\n"
        "from fsmem.server.settings import ServerSettings\n"
        "settings = ServerSettings(port=0, processes=2, tokens=sys.argv[2])\n"
        "settings.add_memory('team', sys.argv[1])\n"
        "def broken(settings, index, count, channel, log):\n"
        "    return 3 if index == 1 else channel.send(b'ready') and __import__('time').sleep(60)\n"
        "sys.exit(Parent(settings, RequestLog(), broken).run())\n"
    )
    env = without_fsmem()
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), str(tmp_path / "tokens.json")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert done.returncode == 1, done.stderr
    exits = [line for line in lines if line["event"] == "worker exited"]
    assert [(line["worker"], line["how"]) for line in exits] == [(1, "code 3")] * 3
    assert lines[-1] == {
        **lines[-1],
        "event": "error",
        "message": "worker 1 could not start: it exited (code 3) 3 times in a row before serving; the lines above say why",
    }
    assert not any(line["event"] == "listening" for line in lines)


# -- the setting ----------------------------------------------------------------------------------


def test_processes_is_a_number_or_auto_and_needs_sockets_passed_between_processes(tmp_path, monkeypatch):
    assert processes(3) == 3 and processes("2") == 2 and processes("auto") == usable_cores() >= 1
    for wrong in (0, -1, 65, "many", True, 1.5):
        with pytest.raises(ConfigError, match="processes must be a whole number from 1 to 64, or auto"):
            processes(wrong)
    config = tmp_path / "server.yaml"
    config.write_text("processes: 2\n")
    assert ServerSettings.load(config).processes == 2
    assert ServerSettings().processes == 1  # the default: one process; auto asks for one per core
    root = _copy_memory(tmp_path, "team")
    settings = ServerSettings(processes=2, tokens=tmp_path / "tokens.json")
    settings.add_memory("team", root)
    settings.check()
    monkeypatch.delattr(socket, "send_fds")  # as on Windows
    assert processes("auto") == 1 and ServerSettings().processes == 1
    with pytest.raises(ConfigError, match=r"processes: 2 needs a system that passes sockets between processes"):
        settings.check()


def test_serve_refuses_a_wrong_processes_in_one_line(tmp_path):
    root = _copy_memory(tmp_path, "team")
    env = without_fsmem()
    env.update(FSMEM_NOW=NOW, FSMEM_TOKENS=str(tmp_path / "tokens.json"))
    # the CLI in this process (tests/cli_runner.py: the same bytes; test_server_app refuses one as a process)
    done = cli_runner.run(["serve", "--memory", f"team={root}", "--processes", "0"], text=True, env=env)
    assert done.returncode == 2
    assert done.stderr == "fsmem: error: processes must be a whole number from 1 to 64, or auto, not 0\n"
