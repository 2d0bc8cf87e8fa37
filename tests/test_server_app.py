"""`fsmem serve`: real server processes on 127.0.0.1, driven by the MCP SDK's streamable HTTP client and raw HTTP.

Three servers per run: one for the tokens and scopes, one with tight limits,
one that is stopped with SIGTERM while a write is in flight; and one whose stop
must end while a write's git never returns.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cli_runner
import preloaded
import pytest
from child_env import without_fsmem
from git_readers import cat_file_readers
from test_tools import NOW, build_memory, snapshot

from fsmem import Memory
from fsmem.server.tokens import TokenStore
from fsmem.spec import tool_names
from fsmem.store import retrieval_log
from fsmem.store.files import file_lock

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install 'fsmem[server]'")
import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.slow
FSMEM = str(Path(sys.executable).with_name("fsmem"))
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class ServerProcess:
    """`fsmem serve ... --port 0`, its JSON log lines collected as they come: a real process, forked from a parent
    that has made the server's imports once (tests/preloaded.py)."""

    def __init__(self, *args: str, tokens: Path):
        env = without_fsmem()
        env.update(FSMEM_NOW=NOW, FSMEM_TOKENS=str(tokens))
        self.proc = preloaded.start(["serve", *args, "--port", "0"], env=env, stderr=subprocess.PIPE)
        self.lines: list[dict] = []
        self.raw: list[str] = []
        self._listening = threading.Event()
        self._logged = threading.Condition()  # told of each log line as it comes, for `wait_for`
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        if not self._listening.wait(60):  # a parent and a worker per core start on a busy machine
            self.proc.kill()
            raise AssertionError(f"the server did not start: {self.raw}")
        self.base = next(line["url"] for line in self.lines if line.get("event") == "listening").removesuffix("/mcp")

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.raw.append(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            with self._logged:
                self.lines.append(record)
                self._logged.notify_all()
            if record.get("event") == "listening":
                self._listening.set()

    def requests(self) -> list[dict]:
        return [line for line in self.lines if line.get("event") == "request"]

    def wait_for(self, predicate, timeout: float = 15.0) -> dict:
        """The last log line `predicate` holds for, waited for as lines come (at most `timeout` seconds)."""
        found: list[dict] = []

        def seen() -> bool:
            found[:] = [line for line in self.lines if predicate(line)]
            return bool(found)

        with self._logged:
            self._logged.wait_for(seen, timeout)
        if not found:
            raise AssertionError(f"no such log line in {self.lines[-5:]}")
        return found[-1]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.ended()

    def ended(self) -> int:
        """The exit code of a server already asked to stop, waited for without a second signal (one that came
        while the interpreter was ending, its handlers the default again, ended it by the signal: -15)."""
        try:
            code = self.proc.wait(60)  # its requests in flight have shutdown_grace_seconds (30) to finish
        except subprocess.TimeoutExpired:  # a server that does not stop fails the test, and is not left running
            self.proc.kill()
            self.proc.wait(20)
            raise AssertionError(
                f"the server did not stop within 60 s of SIGTERM; its log ended: {self.raw[-8:]}"
            ) from None
        self._drainer.join(20)  # every line the process wrote is in `lines` (its last, "stopped", too)
        return code


def waiting_for_the_lock(root: Path, *pids: int, timeout: float = 60.0) -> None:
    """Until each process of `pids` has the memory's write lock open: a write of its is in flight, waiting for the
    lock this test holds (a process opens the lock file to try for the lock, and closes it when it lets go)."""
    lock = os.path.realpath(root / ".fsmem" / "locks" / "write.lock")

    def holds_open(pid: int) -> bool:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            return False
        return any(_link(os.path.join(folder, name)) == lock for name in names)

    deadline = time.monotonic() + timeout
    while not all(holds_open(pid) for pid in pids):
        assert time.monotonic() < deadline, f"no write of {pids} waits for the lock"
        time.sleep(0.02)


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:  # closed meanwhile
        return None


def session(url: str, token: str | None, actions):
    """Run `actions(session)` in an initialised MCP client session over streamable HTTP; its result, or the error."""

    async def main():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    return await actions(client)

    try:
        return anyio.run(main)
    except BaseException as exc:  # the SDK raises from inside its task group
        return _innermost(exc)


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return next((_innermost(e) for e in exc.exceptions if "MCPError" in type(_innermost(e)).__name__), exc)
    return exc


def call(url: str, token: str | None, name: str, arguments: dict):
    async def actions(client):
        return await client.call_tool(name, arguments)

    return session(url, token, actions)


def text_of(result) -> str:
    assert not isinstance(result, BaseException), result
    return result.content[0].text


def post(url: str, token: str | None, body, **kwargs) -> httpx2.Response:
    headers = dict(HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url, content=data, headers=headers, timeout=30, **kwargs)


def tool_call(name: str, arguments: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _copy_memory(tmp: Path, name: str, extra_agents: str = "") -> Path:
    root = build_memory(tmp / name, extra_agents)
    return root


def fsmem_token(*args: str, tokens: Path) -> dict:
    """`fsmem token ... --json` as an operator runs it, beside the server: its answer. (It reads the date in a
    process of its own, so a test that makes or revokes its tokens so reads none and runs once.)"""
    env = without_fsmem()
    done = subprocess.run(
        [FSMEM, *args, "--tokens", str(tokens), "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- the tokens and scopes server ----------------------------------------------------------------------


def researcher_note(root: Path) -> str:
    """The researcher's session note on the pinned day (NOW): named after the agent and this copy's host id."""
    day = dt.datetime.fromisoformat(NOW)
    return f"sessions/{day:%Y/%m/%d}/researcher-{Memory(root, agent='researcher').host_id}.md"


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    team_root = _copy_memory(tmp, "team")
    config = team_root / "fsmem.yaml"  # a closed list of agents: a token for an undeclared one is refused
    config.write_text(config.read_text().replace("  closed: false", "  closed: true", 1))
    os.symlink("../entities/people/adam-smith.md", team_root / "topics" / "link.md")
    Memory(team_root).index()
    lab_root = _copy_memory(tmp, "lab")
    tokens = tmp / "secrets" / "tokens.json"
    store = TokenStore(tokens)
    made = {
        "full": store.create(memory="team", agent="researcher"),
        "read_only": store.create(memory="team", agent="researcher", read_only=True),
        "topics": store.create(memory="team", agent="researcher", paths=["topics/"]),
        # the same scope for the resource and prompt tests: a token's rate (10 a second, bursts of 20) is shared
        # by every test that uses it, and the path test's 17 requests spend most of a burst just before them
        "topics_views": store.create(memory="team", agent="researcher", paths=["topics/"]),
        "lab": store.create(memory="lab", agent="researcher"),
        "ghost": store.create(memory="team", agent="ghost"),
        "expired": store.create(memory="team", agent="researcher"),
        "revoked": store.create(memory="team", agent="researcher"),
        "gone": store.create(memory="gone", agent="researcher"),
    }
    load = [store.create(memory="team", agent="researcher") for _ in range(16)]  # the load test's, within every rate
    later = store.create(memory="team", agent="researcher")  # revoked by a test while the server runs
    store.revoke(made["revoked"].record.id)
    data = json.loads(tokens.read_text())
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).isoformat(timespec="seconds")
    for item in data["tokens"]:
        if item["id"] == made["expired"].record.id:
            item["expires"] = past
    tokens.write_text(json.dumps(data))
    server = ServerProcess(
        "--memory", f"team={team_root}", "--memory", f"lab={lab_root}", "--tokens", str(tokens), tokens=tokens
    )
    yield {
        "server": server,
        "team": team_root,
        "lab": lab_root,
        "tokens": {k: v.token for k, v in made.items()},
        "load": [made_load.token for made_load in load],
        "later": later,
        "store": store,
        "made": made,
    }
    assert server.stop() == 0


def test_the_default_is_one_process(team):
    """A server started without `processes` serves in one process (`auto` asks for one per usable core)."""
    listening = next(line for line in team["server"].lines if line.get("event") == "listening")
    assert listening.get("processes", 1) == 1


@pytest.mark.sdk_face
def test_a_token_lists_greps_reads_searches_and_notes(team):
    url, token = team["server"].base + "/mcp", team["tokens"]["full"]

    async def actions(client):
        listed = await client.list_tools()
        calls = [
            ("ls", {"path": "entities/people"}),
            ("grep", {"pattern": "proration", "ignore_case": True}),
            ("read", {"path": "topics/billing.md", "lines": "14:15"}),
            ("search", {"query": "proration for seat changes"}),
            ("note", {"text": "- employer: Globex", "subject": "people/Adam Smith"}),
        ]
        return listed, [await client.call_tool(name, arguments) for name, arguments in calls]

    listed, results = session(url, token, actions)
    assert [t.name for t in listed.tools] == tool_names(history=False)
    texts = [text_of(r) for r in results]
    assert not any(r.is_error for r in results), texts
    assert texts[0].splitlines()[-1] == "[files 1-2 of 2]"
    total = Memory(team["team"]).grep("proration", ignore_case=True).total
    assert texts[1].splitlines()[-1] == f"[matches 1-{total} of {total}]"
    assert "    15\t- proration: daily, for seat changes mid-cycle" in texts[2]
    assert "topics/billing.md" in texts[3]
    # the agent is the token's: its session note, its name in the retrieval log
    assert texts[4] == f"noted in {researcher_note(team['team'])} at line 11 (new file)"  # agent: in its front matter
    assert "- employer: Globex" in (team["team"] / researcher_note(team["team"])).read_text()
    logged = list(retrieval_log.records(team["team"]))[-5:]
    assert [(r["tool"], r["agent"]) for r in logged] == [
        (n, "researcher") for n in ("ls", "grep", "read", "search", "note")
    ]
    # the server logs a request once its answer is sent: the note's line (the researcher's first) may come after it
    team["server"].wait_for(
        lambda line: line.get("event") == "request" and line.get("tool") == "note" and line.get("agent") == "researcher"
    )
    lines = team["server"].requests()
    assert [line["rpc"] for line in lines[-8:]] == ["initialize", "notifications/initialized", "tools/list"] + [
        "tools/call"
    ] * 5
    assert lines[-1]["tool"] == "note" and lines[-1]["agent"] == "researcher" and lines[-1]["status"] == 200
    assert lines[-1]["token"] == team["made"]["full"].record.id


@pytest.mark.sdk_face
def test_stat_through_the_server_is_the_tokens_view(team):
    """`stat` is a tool of the server like every read: its figures, and a path token's scope."""
    url = team["server"].base + "/mcp"
    answer = call(url, team["tokens"]["full"], "stat", {"path": "topics/billing.md"})
    assert not answer.is_error and text_of(answer).splitlines()[0] == "topics/billing.md"
    assert "keyed facts: " in text_of(answer) and answer.structured_content["truncated"] is False
    outside = call(url, team["tokens"]["topics"], "stat", {"path": "entities/people/adam-smith.md"})
    assert outside.is_error and "outside this agent's scope" in text_of(outside)


@pytest.mark.sdk_face
def test_refused_without_a_valid_token_and_nothing_changes(team):
    server, tokens = team["server"], team["tokens"]
    before = (snapshot(team["team"]), snapshot(team["lab"]), len(list(retrieval_log.records(team["team"]))))
    url = server.base + "/mcp"
    cases = {
        None: "this server needs a token",
        "fsmem_nonsense": "this token is not valid here",
        tokens["full"][:-4] + "0000": "this token is not valid here",
        tokens["expired"]: "this token has expired",
        tokens["revoked"]: "this token was revoked",
    }
    for token, message in cases.items():
        refused = call(url, token, "note", {"text": "- employer: Initech"})
        assert "MCPError" in type(refused).__name__ and message in str(refused), (token, refused)
        raw = post(url, token, tool_call("write", {"path": "topics/x.md", "body": "x"}))
        assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
        assert message in raw.json()["error"]["message"]
    # a token of another memory, at that memory's endpoint
    other = call(server.base + "/mcp/lab", tokens["full"], "note", {"text": "- employer: Initech"})
    assert "this token is for another memory, not 'lab'" in str(other)
    assert post(server.base + "/mcp/team", tokens["lab"], tool_call("note", {"text": "x"})).status_code == 403
    assert post(server.base + "/mcp/nowhere", tokens["full"], LIST).status_code == 403
    assert post(url, tokens["gone"], LIST).status_code == 403  # a memory this server does not serve
    ghost = post(url, tokens["ghost"], LIST)
    assert ghost.status_code == 403 and "unknown agent 'ghost'" in ghost.json()["error"]["message"]
    # revoked with `fsmem token revoke` while the server runs: refused from the next request on
    later = team["later"]
    assert post(url, later.token, LIST).status_code == 200
    revoked = fsmem_token("token", "revoke", later.record.id, tokens=team["store"].path)
    assert [(t["id"], t["status"]) for t in revoked["tokens"]] == [(later.record.id, "revoked")]
    assert post(url, later.token, tool_call("note", {"text": "- employer: Initech"})).status_code == 401
    after = (snapshot(team["team"]), snapshot(team["lab"]), len(list(retrieval_log.records(team["team"]))))
    assert after == before
    # the lab token works at its own endpoint and at /mcp, on its own memory only
    assert not call(server.base + "/mcp/lab", tokens["lab"], "ls", {}).is_error
    assert "entities/orgs/acme.md" in text_of(call(url, tokens["lab"], "ls", {"path": "entities"}))
    refusals = [line for line in server.requests() if line["status"] in (401, 403)]
    assert {line["reason"] for line in refusals} >= {
        "token missing",
        "token malformed",
        "token wrong",
        "token expired",
        "token revoked",
        "other memory",
        "agent",
        "memory not served",
    }


@pytest.mark.sdk_face
def test_a_read_only_token_cannot_write_through_any_tool(team):
    url, token = team["server"].base + "/mcp", team["tokens"]["read_only"]
    before = snapshot(team["team"])

    async def actions(client):
        listed = await client.list_tools()
        writes = [
            await client.call_tool("note", {"text": "- employer: Initech"}),
            await client.call_tool("write", {"path": "topics/x.md", "body": "x"}),
            await client.call_tool("edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 60"}),
        ]
        return listed, writes

    listed, writes = session(url, token, actions)
    readers = tool_names(writes=False, history=False)
    assert [t.name for t in listed.tools] == readers
    for result in writes:
        assert result.is_error and f"is read-only; it may use {', '.join(readers)}" in text_of(result)
    assert snapshot(team["team"]) == before


@pytest.mark.sdk_face
def test_a_path_token_sees_nothing_outside_its_prefix_through_any_tool(team):
    url, token = team["server"].base + "/mcp", team["tokens"]["topics"]
    before = snapshot(team["team"])

    async def actions(client):
        calls = [
            ("ls", {}),
            ("ls", {"path": "entities"}),
            ("grep", {"pattern": "Adam|Acme|Atlas|Maria", "ignore_case": True}),
            ("grep", {"pattern": "Adam", "paths": ["entities"]}),
            ("grep", {"pattern": "a", "type": "semantic", "max_results": 200}),
            ("read", {"path": "entities/people/adam-smith.md"}),
            ("read", {"path": "topics/link.md"}),
            ("read", {"path": "INDEX.md"}),
            ("search", {"query": "Adam Smith finance lead Acme employer"}),
            ("write", {"path": "entities/people/new.md", "body": "x"}),
            ("edit", {"path": "entities/orgs/acme.md", "old": "Acme", "new": "X"}),
            ("note", {"text": "- employer: Initech"}),
            ("links", {"path": "entities/people/adam-smith.md"}),
            ("links", {"path": "topics/billing.md"}),
        ]
        listed = await client.list_tools()
        return listed, [await client.call_tool(name, arguments) for name, arguments in calls]

    listed, results = session(url, token, actions)
    assert [t.name for t in listed.tools] == [n for n in tool_names(history=False) if n != "note"]
    texts = [text_of(r) for r in results]
    assert texts[0].splitlines() == [
        line for line in texts[0].splitlines() if line.startswith("topics/") or line.startswith("[")
    ]
    assert texts[0].splitlines()[-1] == "[files 1-2 of 2]"
    grep_total = Memory(team["team"]).grep("Adam|Acme|Atlas|Maria", ["topics"], ignore_case=True).total
    assert texts[2].splitlines()[-1] == f"[matches 1-{grep_total} of {grep_total}]"
    for text in texts:
        assert "entities/" not in text.replace("'entities/", "").replace("'entities'", ""), text
        assert "profile" not in text and "adam-smith.md:" not in text
    for index in (1, 3, 5, 6, 7, 9, 10, 11, 12):
        assert results[index].is_error and "is outside this agent's scope (topics/)" in texts[index], texts[index]
    assert not results[8].is_error or "no relevant memory" in texts[8]
    assert not results[13].is_error and texts[13].splitlines()[-1] == "[0 links]"
    assert snapshot(team["team"]) == before


@pytest.mark.sdk_face
def test_the_context_resource_is_the_tokens_own_view(team):
    """resources/read of fsmem://context gives what `fsmem context` gives the token's agent, in its scope."""
    url = team["server"].base + "/mcp"

    async def actions(client):
        listed = await client.list_resources()
        return listed, await client.read_resource("fsmem://context")

    whole_listed, whole = session(url, team["tokens"]["full"], actions)
    assert [(r.name, str(r.uri)) for r in whole_listed.resources] == [("context", "fsmem://context")]
    assert whole.contents[0].text == Memory(team["team"], agent="researcher").context().to_text()
    _, scoped = session(url, team["tokens"]["topics_views"], actions)
    expected = Memory(team["team"], agent="researcher", scope=["topics/"]).context().to_text()
    assert scoped.contents[0].text == expected and "entities/" not in expected and "profile" not in expected
    assert expected != whole.contents[0].text


@pytest.mark.sdk_face
def test_the_distill_prompt_is_the_tokens_own_and_refused_to_a_scope(team):
    """prompts/list and prompts/get of `distill` over HTTP answer what the stdio server answers for the token's
    agent; a token with a scope is refused, as `fsmem mcp` refuses a scoped agent."""
    from fsmem.agents.mcp_server import distill_prompt

    url = team["server"].base + "/mcp"

    async def actions(client):
        listed = await client.list_prompts()
        return listed, await client.get_prompt("distill", {"max_tokens": "400"})

    listed, got = session(url, team["tokens"]["full"], actions)
    assert [p.name for p in listed.prompts] == ["distill"]
    expected = distill_prompt(Memory(team["team"], agent="researcher"), "distill", {"max_tokens": "400"})
    assert [m.content.text for m in got.messages] == [m.content.text for m in expected.messages]
    refused = session(url, team["tokens"]["topics_views"], actions)
    assert isinstance(refused, Exception) and "scope" in str(refused), refused


@pytest.mark.sdk_face
def test_the_example_client_configuration_reaches_the_server(team):
    config = json.loads((Path(__file__).resolve().parents[1] / "examples" / "mcp_http_config.json").read_text())
    entry = config["mcpServers"]["fsmem-team"]
    assert entry["type"] == "http" and entry["url"].endswith("/mcp")
    headers = {k: v.replace("${FSMEM_TOKEN}", team["tokens"]["full"]) for k, v in entry["headers"].items()}
    url = team["server"].base + "/mcp"

    async def main():
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as client:
                    await client.initialize()
                    return await client.call_tool("grep", {"pattern": "proration"})

    assert "topics/billing.md" in text_of(anyio.run(main))


def test_health_and_the_log_never_hold_a_token_or_memory_text(team):
    server = team["server"]
    warned = [line["message"] for line in server.lines if line.get("event") == "warning"]
    assert any(f"token {team['made']['ghost'].record.id} is refused" in w and "'ghost'" in w for w in warned)
    health = httpx2.get(server.base + "/health", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert httpx2.get(server.base + "/elsewhere", timeout=10).status_code == 404
    with httpx2.Client(timeout=10) as one_connection:  # Nagle off: an answer does not wait for the client's delayed ACK
        started = time.monotonic()
        for _ in range(20):
            assert one_connection.get(server.base + "/health").status_code == 200
        assert time.monotonic() - started < 0.6  # 20 x 40 ms with Nagle on
    log = "".join(server.raw)
    for token in team["tokens"].values():
        assert token not in log and token.rsplit("_", 1)[1] not in log
    assert "Globex" not in log and "employer" not in log and "proration" not in log
    for line in server.requests():
        assert set(line) >= {"time", "token", "agent", "memory", "tool", "status", "duration_ms"}


# -- limits ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tight")
    root = _copy_memory(tmp, "team", "    huge:\n      max_tokens: 2000000\n      max_results: 100000\n")
    # one file whose whole text is a larger answer than a socket's buffers hold (some 2.9 MB on loopback): 3.8 MB
    # in 2,000 lines of one-token words, which a read numbers, counts and fits in a sixth of the time the same bytes
    # take in 50,000 short lines of short words (the subject is the answer's size, not its number of lines)
    rows = "".join(f"- row {n}:" + " representation" * 126 + "\n" for n in range(2000))
    (root / "topics" / "big.md").write_text("---\ntitle: Big\n---\n# Big\n" + rows)
    config = tmp / "server.yaml"
    config.write_text(
        f"memories:\n  team: {root}\ntokens: tokens.json\nlimits:\n"
        "  max_request_bytes: 4096\n  rate_per_second: 2\n  burst: 3\n  concurrency: 1\n"
        "  read_timeout_seconds: 1\n  send_timeout_seconds: 1\n  max_answer_tokens: 2000000\n"
        # the big read is awaited however loaded the machine: the send timeout is what a test here waits for
        "  tool_timeout_seconds: 600\n"
    )
    store = TokenStore(tmp / "tokens.json")
    names = ("big", "flood", "other", "holder", "stuck", "slow", "bystander")
    made = {
        name: store.create(memory="team", agent="huge" if name == "stuck" else "researcher").token for name in names
    }
    server = ServerProcess("--config", str(config), tokens=store.path)
    yield {"server": server, "root": root, "tokens": made}
    assert server.stop() == 0


def test_an_oversized_request_is_refused_and_others_are_served(tight):
    url, tokens = tight["server"].base + "/mcp", tight["tokens"]
    before = snapshot(tight["root"])
    big = tool_call("write", {"path": "topics/huge.md", "body": "x" * 5000})
    refused = post(url, tokens["big"], big)
    assert refused.status_code == 413 and "larger than 4096 bytes" in refused.json()["error"]["message"]

    def chunks():
        data = json.dumps(big).encode()
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    chunked = httpx2.post(url, content=chunks(), headers=dict(HEADERS, Authorization=f"Bearer {tokens['big']}"))
    assert chunked.status_code == 413
    assert snapshot(tight["root"]) == before
    served = post(url, tokens["other"], tool_call("ls", {"path": "topics"}))
    assert served.status_code == 200 and not served.json()["result"]["isError"]


def test_a_flood_past_the_rate_limit_is_told_when_to_retry(tight):
    url, tokens = tight["server"].base + "/mcp", tight["tokens"]
    # on one kept connection: a new one for each would pass through the parent of several processes,
    # and on a busy machine six of them can take long enough for the bucket to refill
    headers = dict(HEADERS, Authorization=f"Bearer {tokens['flood']}")
    with httpx2.Client(headers=headers, timeout=30) as http:
        answers = [http.post(url, content=json.dumps(LIST).encode()) for _ in range(6)]
    statuses = [a.status_code for a in answers]
    assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:], statuses
    limited = next(a for a in answers if a.status_code == 429)
    assert limited.headers["retry-after"] == "1"
    assert (
        "rate limit: at most 2 requests a second for this token (bursts of 3); retry after"
        in limited.json()["error"]["message"]
    )
    assert post(url, tokens["other"], LIST).status_code == 200  # another token is not slowed
    time.sleep(1.6)
    assert post(url, tokens["flood"], LIST).status_code == 200  # and the flooder may go on after the wait


def test_one_token_has_a_bounded_share_of_costly_requests_and_its_cheap_calls_are_not_behind_them(tight):
    """A token's costly calls in flight and its cheap ones are counted apart (`concurrency: 1` each): while its
    note waits for the write lock, its grep is refused and its `ls` and `tools/list` are served. With one count
    for both, the `ls` got the 429 (an agent could not list while its own search ran). Three requests of the
    token in all: its burst."""
    url, tokens, root = tight["server"].base + "/mcp", tight["tokens"], tight["root"]
    answers: dict[str, httpx2.Response] = {}
    with file_lock(root):  # the server's write now waits for this process
        writer = threading.Thread(
            target=lambda: answers.setdefault(
                "note", post(url, tokens["holder"], tool_call("note", {"text": "- held: yes"}))
            )
        )
        writer.start()
        # the others are sent once the note waits for the lock, not before: sent at once, one could reach the
        # server first and take the token's place, and the note was refused (CI of b0ba3c1)
        waiting_for_the_lock(root, tight["server"].proc.pid)
        costly = post(url, tokens["holder"], tool_call("grep", {"pattern": "proration"}))
        assert costly.status_code == 429, costly.text
        message = costly.json()["error"]["message"]
        assert "already has 1 request(s) in flight (at most 1 costly calls at once" in message
        cheap = post(url, tokens["holder"], tool_call("ls", {"path": "topics"}))
        assert cheap.status_code == 200 and "topics/billing.md" in cheap.json()["result"]["content"][0]["text"]
        assert post(url, tokens["other"], LIST).status_code == 200
    writer.join(30)
    assert answers["note"].status_code == 200 and "noted in sessions/" in answers["note"].text


def test_a_slow_body_and_a_client_that_stops_reading_are_cut_off_and_others_are_served(tight):
    server, tokens = tight["server"], tight["tokens"]
    host, port = server.base.removeprefix("http://").split(":")

    def raw_request(token: str, body: bytes, declared: int | None = None, rcvbuf: int | None = None) -> socket.socket:
        sock = socket.socket()
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.connect((host, int(port)))
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {declared if declared is not None else len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        return sock

    started = time.monotonic()
    slow = raw_request(tokens["slow"], b'{"jsonrpc"', declared=200)
    slow.settimeout(10)
    assert slow.recv(100).startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started < 5
    slow.close()

    stuck = raw_request(tokens["stuck"], json.dumps(tool_call("read", {"path": "topics/big.md"})).encode(), rcvbuf=4096)
    try:
        time.sleep(0.5)  # the big read is running on a worker thread: others are still served
        served = post(server.base + "/mcp", tokens["bystander"], tool_call("ls", {"path": "topics"}))
        assert served.status_code == 200 and not served.json()["result"]["isError"]
        line = server.wait_for(lambda r: r.get("event") == "request" and r.get("reason") == "send timeout", timeout=600)
        assert line["tool"] == "read" and line["status"] == 200 and line["bytes_out"] < 3_000_000
    finally:
        stuck.close()
    served = post(server.base + "/mcp", tokens["bystander"], tool_call("grep", {"pattern": "proration"}))
    assert served.status_code == 200 and not served.json()["result"]["isError"]


def test_the_door_holds_a_token_to_twice_its_concurrency_while_bodies_arrive(tmp_path, own_tokens):
    """Before a body says what a request is, the door counts it against both of the token's shares at once: at
    most `2 * concurrency` requests of one token wait there. Two requests whose bodies have not arrived hold a
    token's two places (`concurrency: 1`); its third is refused with the door's message, another token is served,
    and the two held ones are answered once their bodies come."""
    root = _copy_memory(tmp_path, "team")
    config = tmp_path / "server.yaml"
    config.write_text(
        f"memories:\n  team: {root}\ntokens: {own_tokens['path']}\nlimits:\n"
        "  concurrency: 1\n  read_timeout_seconds: 120\n  rate_per_second: 1000\n  burst: 1000\n"
    )
    holder = own_tokens["door"]
    server = ServerProcess("--config", str(config), tokens=own_tokens["path"])
    host, port = server.base.removeprefix("http://").split(":")
    body = json.dumps(LIST).encode()

    def held() -> socket.socket:
        """A request of `holder` whose head is sent and whose body is not, but for its first byte."""
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {holder}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:1]
        )
        return sock

    def answered(sock: socket.socket) -> bool:
        """Whether the server has answered (poll, not select: a test process may hold more than 1,024 files)."""
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))

    waiting: list[socket.socket] = []
    try:
        waiting += [held(), held()]
        deadline = time.monotonic() + 60
        while True:  # until both wait at the door: a third sent before one of them arrived took its place
            third = post(server.base + "/mcp", holder, LIST)
            if third.status_code == 429:
                break
            assert third.status_code == 200, third.text
            for at, sock in enumerate(waiting):
                if answered(sock):  # refused: the third had taken its place; send it again
                    sock.close()
                    waiting[at] = held()
            assert time.monotonic() < deadline, "two requests never waited at the door together"
        message = third.json()["error"]["message"]
        assert "already has 2 request(s) in flight (at most 1 cheap and 1 costly" in message, message
        assert not any(answered(sock) for sock in waiting)
        assert post(server.base + "/mcp", own_tokens["slow"], LIST).status_code == 200  # another token's own places
        for sock in waiting:
            sock.sendall(body[1:])
        for sock in waiting:
            head = sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
        assert post(server.base + "/mcp", holder, LIST).status_code == 200  # and the places are given back
    finally:
        for sock in waiting:
            sock.close()
        assert server.stop() == 0


# -- shutdown ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_tokens(tmp_path_factory) -> dict:
    """A token of memory 'team' for each test below that serves a memory of its own, made once with the module's
    servers: those tests then read no date (making a token does) and start no `fsmem token` process (a second each;
    the operator's command is the face of test_refused_without_a_valid_token_and_nothing_changes and
    tests/test_server_tokens.py)."""
    tokens = tmp_path_factory.mktemp("own") / "tokens.json"
    store = TokenStore(tokens)
    made = {
        name: store.create(memory="team", agent="researcher").token
        for name in ("sigterm", "slow", "deadline", "door", "warm")
    }
    return {"path": tokens, **made}


def test_the_server_warms_its_memory_at_its_start_and_a_first_call_sees_an_edit_made_after(tmp_path, own_tokens):
    """The warmed memory holds the change feed, so a token's first call takes the running feed instead of a
    walk: what an editor saved after the warm-up is in its answers all the same."""
    root = _copy_memory(tmp_path, "team")
    Memory(root).index()  # a memory in use: its search index holds files
    server = ServerProcess("--memory", f"team={root}", tokens=own_tokens["path"])
    try:
        warmed = server.wait_for(lambda line: line.get("event") == "warmed", timeout=60)
        assert warmed["memory"] == "team" and warmed["seconds"] >= 0
        with open(root / "topics" / "billing.md", "a") as handle:  # an editor's save, after the warm-up
            handle.write("\n- Quokka invoices are due on the first of the month.\n")
        url, token = server.base + "/mcp", own_tokens["warm"]  # raw HTTP: the server's own path, not the SDK's

        def answer(name: str, arguments: dict) -> str:
            return post(url, token, tool_call(name, arguments)).json()["result"]["content"][0]["text"]

        assert "topics/billing.md" in answer("grep", {"pattern": "Quokka"})
        assert "Quokka invoices are due" in answer("search", {"query": "quokka invoices"})
    finally:
        assert server.stop() == 0
    assert [line for line in server.lines if line.get("event") == "warning"] == []


def test_sigterm_lets_the_write_in_flight_finish_then_exits_0(tmp_path, own_tokens):
    root = _copy_memory(tmp_path, "team")
    tokens, token = own_tokens["path"], own_tokens["sigterm"]
    server = ServerProcess("--memory", f"team={root}", tokens=tokens)
    outcome: dict = {}
    with file_lock(root):
        # raw HTTP: the SDK's client asks for the tool list again after a call, and the server is gone by then
        writer = threading.Thread(
            target=lambda: outcome.setdefault(
                "note", post(server.base + "/mcp", token, tool_call("note", {"text": "- during: shutdown"}))
            )
        )
        writer.start()
        waiting_for_the_lock(root, server.proc.pid)  # the note is in flight, waiting for the write lock
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert server.proc.poll() is None  # still finishing what it started
    writer.join(30)
    assert server.ended() == 0
    answer = outcome["note"].json()["result"]
    assert (
        answer["content"][0]["text"] == f"noted in {researcher_note(root)} at line 10 (new file)"
    )  # agent: in its front matter
    assert "- during: shutdown" in (root / researcher_note(root)).read_text()
    assert server.lines[-1]["event"] == "stopped" and server.lines[-1]["signal"] == "SIGTERM", server.lines[-4:]


def test_sigterm_ends_the_server_within_its_deadline_whatever_still_runs(tmp_path, monkeypatch, own_tokens):
    """A write whose git never returns (a hook that waits), a streaming MCP session (GET /mcp) and a one-shot client
    connected to the answerer and idle, at SIGTERM: the requests get their grace, and the process ends within the
    grace and `CLOSE_SECONDS` of the signal, exit 0, "stopped" last. The write's thread, which uvicorn cancels but
    cannot stop, kept the stopped server alive, its "stopped" line written (the interpreter's exit waits for
    anyio's worker threads), until a second SIGTERM met the default handler: as seen after the team tests."""
    from fsmem.server.serving import CLOSE_SECONDS

    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "mem"
    Memory.init(root, git=True).close()
    started, release = tmp_path / "git-started", tmp_path / "git-released"
    # the write's `git update-ref` waits: a git before the real one on PATH (a memory's own hooks never run). The
    # first alone waits (mkdir: one caller makes the folder), until the release, two minutes or tmp_path's removal
    # (pytest may remove it before the loop sees the release); a later one passes
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\nfor word in "$@"; do if [ "$word" = update-ref ] && mkdir \'{started}\' 2>/dev/null; then\n'
        f"n=0; while [ ! -e '{release}' ] && [ -d '{tmp_path}' ] && [ $n -lt 2400 ]; do sleep 0.05; n=$((n+1)); done\n"
        "fi; done\n"
        f"exec '{shutil.which('git')}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    tokens, token = own_tokens["path"], own_tokens["deadline"]
    grace = 1
    config = tmp_path / "server.yaml"
    config.write_text(f"memories:\n  team: {root}\ntokens: {tokens}\nlimits:\n  shutdown_grace_seconds: {grace}\n")
    server = ServerProcess("--config", str(config), tokens=tokens)
    host, port = server.base.removeprefix("http://").rsplit(":", 1)
    said = server.wait_for(lambda line: str(line.get("message", "")).startswith("answering one-shot reads on"))
    one_shot = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream = socket.create_connection((host, int(port)))
    try:
        one_shot.connect(said["message"].removeprefix("answering one-shot reads on").strip())  # and says nothing
        stream.sendall(
            f"GET /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        stream.settimeout(30)
        assert stream.recv(64).startswith(b"HTTP/1.1 200"), "no event stream"
        writer = threading.Thread(
            target=lambda: post(server.base + "/mcp", token, tool_call("note", {"text": "- during: shutdown"})),
            daemon=True,  # its answer never comes: the server ends under it
        )
        writer.start()
        deadline = time.monotonic() + 60
        while not started.exists():  # the write's git runs, and will not return
            assert time.monotonic() < deadline and server.proc.poll() is None, server.raw[-4:]
            time.sleep(0.02)
        asked = time.monotonic()
        assert server.stop() == 0
        took = time.monotonic() - asked
    finally:
        release.touch()  # the waiting git, orphaned by the server's end, ends too
        one_shot.close()
        stream.close()
    assert took < grace + CLOSE_SECONDS + 15, took  # the deadline, and a loaded machine's slack
    assert server.lines[-1]["event"] == "stopped" and server.lines[-1]["signal"] == "SIGTERM", server.lines[-4:]


def test_the_views_of_one_memory_share_its_git_readers(tmp_path, monkeypatch):
    """The server keeps a memory open for each token's view (agent, read-only flag, scope): each one's history was
    read by `git cat-file` processes of its own, two a view for as long as it was kept (up to 256). One repository
    now has one reader of each kind in the server, whatever is asked through however many views."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = tmp_path / "mem"
    memory = Memory.init(root, git=True)
    memory.write("topics/billing.md", "# Billing\n\n- cycle: monthly\n")
    memory.write("entities/acme.md", "# Acme\n\n- owner: Bo\n")
    memory.close()
    store = TokenStore(tmp_path / "tokens.json")
    views = [
        {},
        {"read_only": True},
        {"paths": ["topics/"]},
        {"paths": ["entities/"]},
        {"paths": ["topics/", "entities/"]},
    ]
    tokens = [store.create(memory="team", agent="default", **view).token for view in views]
    server = ServerProcess("--memory", f"team={root}", "--tokens", str(store.path), tokens=store.path)
    try:
        url = server.base + "/mcp"
        for view, token in zip(views, tokens, strict=True):
            path = "entities/acme.md" if view.get("paths") == ["entities/"] else "topics/billing.md"
            for name, arguments in (("log", {"path": path}), ("show", {"path": path, "at": "HEAD"})):
                answer = post(url, token, tool_call(name, arguments)).json()["result"]
                assert answer["isError"] is False, answer
            assert len(cat_file_readers(server.proc.pid)) <= 2, cat_file_readers(server.proc.pid)
        assert "batch" in cat_file_readers(server.proc.pid)
    finally:
        assert server.stop() == 0


def test_serve_refuses_an_agent_and_a_token_store_inside_a_memory(tmp_path):
    root = _copy_memory(tmp_path, "team")
    env = without_fsmem()
    agent = cli_runner.run(["serve", "--memory", f"team={root}", "--agent", "researcher"], text=True, env=env)
    assert agent.returncode == 2 and "takes no --agent" in agent.stderr
    inside = subprocess.run(  # a process: the refusal as an operator meets it
        [FSMEM, "serve", "--memory", f"team={root}", "--tokens", str(root / "tokens.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert inside.returncode == 2 and "inside memory 'team'" in inside.stderr


# -- in process: time limits of tools, many clients at once ---------------------------------------------


def test_a_slow_read_is_given_up_but_a_slow_write_is_awaited(tmp_path, monkeypatch, own_tokens):
    from fsmem.agents import tools as agent_tools
    from fsmem.server.app import MemoryServer
    from fsmem.server.log import RequestLog
    from fsmem.server.settings import Limits, ServerSettings

    monkeypatch.setenv("FSMEM_NOW", NOW)  # the note lands on the pinned day, whatever day the suite runs
    root = _copy_memory(tmp_path, "team")
    tokens, token = own_tokens["path"], own_tokens["slow"]
    settings = ServerSettings(memories={"team": root}, tokens=tokens, limits=Limits(tool_timeout_seconds=0.3))
    real_call = agent_tools.call

    def slow_call(memory, name, arguments=None):
        time.sleep(1.0)
        return real_call(memory, name, arguments)

    monkeypatch.setattr(agent_tools, "call", slow_call)
    lines: list[str] = []

    class Lines:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    app = MemoryServer(settings, log=RequestLog(stream=Lines()))

    async def main():
        async with app.manager.run():
            transport = httpx2.ASGITransport(app=app)
            headers = dict(HEADERS, Authorization=f"Bearer {token}")
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as http:
                read = await http.post("/mcp", json=tool_call("grep", {"pattern": "proration"}))
                write = await http.post("/mcp", json=tool_call("note", {"text": "- slow: but kept"}))
                return read.json()["result"], write.json()["result"]

    read, write = anyio.run(main)
    assert read["isError"] and read["content"][0]["text"].startswith("error: grep took longer than 0.3 s")
    assert not write["isError"] and write["content"][0]["text"].startswith("noted in sessions/")
    assert "- slow: but kept" in (root / researcher_note(root)).read_text()
    assert '"reason":"tool timeout"' in lines[0]


def test_many_clients_at_once_lose_no_note_and_see_no_error(team):
    """The load test's promise in small: 16 clients mixing search, read, grep and note on one memory."""
    url, root = team["server"].base + "/mcp", team["team"]
    tokens = team["load"]  # made with the server, so that this test reads no date (no second run of 16 clients)
    calls = [
        ("search", {"query": "proration seats"}),
        ("read", {"path": "topics/billing.md"}),
        ("grep", {"pattern": "Acme"}),
    ]

    async def client(number: int, results: list):
        headers = dict(HEADERS, Authorization=f"Bearer {tokens[number]}")
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            for round_ in range(4):
                name, arguments = calls[(number + round_) % 3]
                for body in (tool_call(name, arguments), tool_call("note", {"text": f"- load {number}-{round_}: yes"})):
                    answer = await http.post(url, json=body)
                    results.append((answer.status_code, answer.json()["result"]["isError"]))

    async def main():
        results: list = []
        async with anyio.create_task_group() as group:
            for number in range(16):
                group.start_soon(client, number, results)
        return results

    results = anyio.run(main)
    assert len(results) == 16 * 4 * 2 and set(results) == {(200, False)}
    notes = (root / researcher_note(root)).read_text()
    assert all(f"- load {n}-{r}: yes" in notes for n in range(16) for r in range(4))


def test_tokens_granting_the_same_view_share_one_memory_and_few_are_kept(tmp_path, monkeypatch):
    from fsmem.server import app as app_module
    from fsmem.server.settings import ServerSettings

    root = _copy_memory(tmp_path, "team")
    store = TokenStore(tmp_path / "tokens.json")
    same = [store.create(memory="team", agent="researcher").record for _ in range(2)]
    others = [store.create(memory="team", agent="researcher", paths=[f"topics/t{n}"]).record for n in range(3)]
    monkeypatch.setattr(app_module, "MEMORIES_KEPT", 2)
    server = app_module.MemoryServer(ServerSettings(memories={"team": root}, tokens=store.path))

    async def view(record):
        return await server._memory(record, root.resolve())

    first, second = anyio.run(view, same[0]), anyio.run(view, same[1])
    assert first is second and first.agent == "researcher" and first.scope is None
    assert first.budget.max_tokens == 4000  # researcher's budget, under the server's answer cap
    for record in others:
        assert anyio.run(view, record).scope.prefixes == tuple(record.paths)
    assert len(server._memories) == 2
