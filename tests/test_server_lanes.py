"""fsmem.server.lanes: a cheap call never waits for a thread behind costly ones, every token's share holds, and
the costly lane takes a call only when it can answer it in time, counting each run's own share of the time.

The costly calls are made slow deterministically: a tool registered for the
test (as a plugin registers one, so it runs on the costly lane) that holds its
thread until the test lets it go, and says when it has started. The test waits
for what it needs to have happened (a hold waiting for a thread, a run ended),
never for a time, and the backlog's clock is the test's.
"""

from __future__ import annotations

import json
import sys
import threading

import anyio
import pytest
from test_tools import build_memory

from fsmem import Memory
from fsmem.agents.registry import Reply, tool, unregister
from fsmem.server.door import BUSY
from fsmem.server.lanes import CHEAP_TOOLS, Backlog, Lanes
from fsmem.server.settings import Limits, ServerSettings
from fsmem.server.tokens import TokenStore

pytest.importorskip("mcp")
import httpx2  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tool_call(name: str, arguments: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


class Gate:
    """Lets the test's holds go: one at a time (`one`), or every one now and later (`open`)."""

    def __init__(self) -> None:
        self.passes = threading.Semaphore(0)
        self.opened = threading.Event()

    def wait(self) -> None:
        while not self.opened.is_set() and not self.passes.acquire(timeout=0.05):
            pass

    def one(self) -> None:
        self.passes.release()

    def set(self) -> None:
        self.opened.set()


@pytest.fixture
def held():
    """A costly tool `hold` whose calls keep their thread until the test lets them go; `started` counts them in."""
    started, gate = threading.Semaphore(0), Gate()

    @tool("hold")
    def hold(memory: Memory, *, max_tokens: int | None = None) -> Reply:
        """Hold a costly thread until the test lets go (registered for this test)."""
        started.release()
        gate.wait()
        return Reply("held")

    try:
        yield started, gate
    finally:
        gate.set()
        unregister("hold")


class Clock:
    """A clock the test moves (the costly lane's backlog measures runs and their own time by it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def until(condition, what: str) -> None:
    """Wait for `condition()` on the event loop, for at most 20 s (a failure's bound, not an ordering)."""
    try:
        with anyio.fail_after(20):
            while not condition():
                await anyio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"after 20 s, still not: {what}") from None


def serving(tmp_path, limits: Limits, clock: Clock | None = None, agents=("researcher", "researcher")):
    """A server of `build_memory`'s team memory with `limits` (its costly lane's backlog on `clock`), a token
    for each of `agents`, and its log's path."""
    from fsmem.server.app import MemoryServer
    from fsmem.server.log import RequestLog

    root = build_memory(tmp_path / "team")
    store = TokenStore(tmp_path / "tokens.json")
    made = [store.create(memory="team", agent=agent).token for agent in agents]
    settings = ServerSettings(memories={"team": root}, tokens=store.path, limits=limits)
    app = MemoryServer(settings, log=RequestLog(stream=open(tmp_path / "log.jsonl", "w")))  # noqa: SIM115
    if clock is not None:
        app.lanes.backlog = Backlog(limits.workers, limits.tool_timeout_seconds, clock=clock)
    return app, made, tmp_path / "log.jsonl"


def client(app, token: str | None = None) -> httpx2.AsyncClient:
    """An HTTP client of `app` in this process, with `token` on every request."""
    headers = HEADERS | ({"Authorization": f"Bearer {token}"} if token else {})
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1", headers=headers)


def test_a_cheap_call_answers_while_slow_calls_hold_every_costly_thread(tmp_path, held):
    started, gate = held
    limits = Limits(workers=2, cheap_workers=2, concurrency=4)
    app, (heavy, light, newcomer), log = serving(tmp_path, limits, agents=("researcher", "researcher", "reviewer"))
    answers: dict[str, list] = {"hold": [], "search": []}
    costly, backlog = app.lanes.costly, app.lanes.backlog

    def queued(calls: int) -> bool:
        """`calls` costly calls past the door, two of them on the two costly threads and the rest waiting for one
        (not merely come in: the door may still be opening the token's view of the memory)."""
        return backlog.calls == calls and backlog.running == 2 and costly.statistics().tasks_waiting == calls - 2

    async def post(http, token: str, name: str, arguments: dict):
        return await http.post("/mcp", json=tool_call(name, arguments), headers={"Authorization": f"Bearer {token}"})

    async def main():
        async with app.manager.run():
            async with client(app) as http:

                async def call(token: str, name: str, arguments: dict) -> None:
                    answers[name].append(await post(http, token, name, arguments))

                async with anyio.create_task_group() as group:
                    for _ in range(4):  # the heavy token's whole share: two run, two wait for a costly thread
                        group.start_soon(call, heavy, "hold", {})
                    await until(lambda: queued(4), "two holds run and two wait for a thread")
                    group.start_soon(call, light, "search", {"query": "proration"})  # waits its turn
                    await until(lambda: queued(5), "the search waits for a thread")
                    try:
                        with anyio.fail_after(20):  # a failure's bound, not an ordering: it answers at once
                            ls = await post(http, light, "ls", {"path": "topics"})
                            read = await post(http, light, "read", {"path": "topics/billing.md"})
                            over = await post(http, heavy, "hold", {})  # past the heavy token's costly share
                            own = await post(http, heavy, "ls", {})  # its cheap share is its own: served
                            first = await post(http, newcomer, "ls", {})  # a view of the memory not opened yet
                        assert queued(5)  # every costly thread still held
                    finally:
                        gate.set()
                return ls, read, over, own, first

    ls, read, over, own, first = anyio.run(main)
    assert started.acquire(blocking=False)  # the holds ran (two at first, two once the gate opened)
    for answer, text in ((ls, "topics/billing.md"), (read, "proration")):
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
        assert text in answer.json()["result"]["content"][0]["text"]
    assert over.status_code == 429 and "4 request(s) in flight (at most 4 costly" in over.json()["error"]["message"]
    assert own.status_code == 200 and not own.json()["result"]["isError"]
    assert first.status_code == 200 and "topics/billing.md" in first.json()["result"]["content"][0]["text"]
    assert [a.json()["result"]["content"][0]["text"] for a in answers["hold"]] == ["held"] * 4
    assert [a.status_code for a in answers["search"]] == [200]
    assert not answers["search"][0].json()["result"]["isError"]
    # the log says where each call's time went, and the cheap calls' lines came while every hold still held
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [line for line in lines if line.get("rpc") == "tools/call" and line["status"] == 200]
    assert [line["tool"] for line in calls][:4] == ["ls", "read", "ls", "ls"]
    assert sorted(line["tool"] for line in calls[4:]) == ["hold"] * 4 + ["search"]
    for line in calls:
        assert all(isinstance(line[key], float) and line[key] >= 0 for key in ("wait_ms", "run_ms", "cpu_ms"))
        assert line["wait_ms"] + line["run_ms"] <= line["duration_ms"] + 0.1  # each rounded to 0.1 ms


def test_a_costly_call_the_backlog_would_answer_late_is_refused_at_once_as_busy(tmp_path, held):
    """With one costly thread held and runs of 20 s lately, one more costly call would be answered in about 40 s,
    past half its 30 s limit: it is refused before it runs, with when to ask again, and a cheap call is served."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    started, gate = held
    clock = Clock()
    app, (heavy, light), log = serving(tmp_path, Limits(workers=1, cheap_workers=2, tool_timeout_seconds=30), clock)

    async def main():
        async with app.manager.run(), client(app, heavy) as http:

            async def hold() -> None:
                answer = await http.post("/mcp", json=tool_call("hold", {}))
                assert answer.json()["result"]["content"][0]["text"] == "held"

            async with anyio.create_task_group() as group:
                group.start_soon(hold)
                await anyio.to_thread.run_sync(started.acquire)
                clock.now += 20  # the first hold runs 20 s
                gate.one()
            await until(lambda: app.lanes.backlog.calls == 0, "the first hold ended")
            async with anyio.create_task_group() as group:
                group.start_soon(hold)  # a thread is free: taken
                await anyio.to_thread.run_sync(started.acquire)
                async with client(app, light) as light_http:
                    async with streamable_http_client("http://127.0.0.1/mcp", http_client=light_http) as (read, write):
                        async with ClientSession(read, write) as session:
                            await session.initialize()
                            with pytest.raises(MCPError) as refused:
                                await session.call_tool("search", {"query": "proration"})
                            listing = await session.call_tool("ls", {"path": "topics"})
                            gate.one()
                            await until(lambda: app.lanes.backlog.calls == 0, "the second hold ended")
                            found = await session.call_tool("search", {"query": "proration"})
            return refused.value, listing, found

    refused, listing, found = anyio.run(main)
    assert refused.code == BUSY and refused.data == {"retry_after": 20}
    assert "the server is busy: 1 searches, greps and other costly calls are in hand" in refused.message
    assert "about 40 s; nothing was run: retry after 20 s" in refused.message
    assert not listing.is_error and "topics/billing.md" in listing.content[0].text
    assert not found.is_error and "topics/billing.md" in found.content[0].text
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    busy = [line for line in lines if line.get("reason") == "backlog"]
    assert [(line["status"], line["tool"], line.get("wait_ms")) for line in busy] == [(503, "search", None)]
    assert [line["tool"] for line in lines if line.get("rpc") == "tools/call" and line["status"] == 200] == [
        "hold",
        "ls",
        "hold",
        "search",
    ]


def test_a_costly_call_slowed_by_others_keeps_its_time_and_one_slow_alone_is_given_up(tmp_path, held):
    """The time limit counts a costly run's own share of the time: two runs side by side for 1.5 s have had
    0.75 s each, under a limit of 1 s, so neither is given up; one run alone for 1.5 s is."""
    started, gate = held
    clock = Clock()
    app, (token, _), _log = serving(tmp_path, Limits(workers=2, cheap_workers=2, tool_timeout_seconds=1), clock)

    async def main():
        async with app.manager.run():
            async with client(app, token) as http:
                answers = []

                async def hold() -> None:
                    answers.append((await http.post("/mcp", json=tool_call("hold", {}))).json())

                async with anyio.create_task_group() as group:
                    group.start_soon(hold)
                    group.start_soon(hold)
                    for _ in range(2):
                        await anyio.to_thread.run_sync(started.acquire)
                    clock.now += 1.5
                    await anyio.sleep(1.2)  # past the limit on the wall clock: what is tested is a time limit
                    assert answers == []  # neither given up
                    gate.one()
                    gate.one()
                side_by_side = list(answers)
                answers.clear()
                async with anyio.create_task_group() as group:
                    group.start_soon(hold)
                    await anyio.to_thread.run_sync(started.acquire)
                    clock.now += 1.5
                    await until(lambda: answers, "the lone hold is given up")
                    gate.one()
                return side_by_side, answers

    side_by_side, alone = anyio.run(main)
    assert [a["result"]["content"][0]["text"] for a in side_by_side] == ["held", "held"]
    assert alone[0]["result"]["isError"]
    assert alone[0]["result"]["content"][0]["text"] == (
        "error: hold took longer than 1 s and was given up; ask for less (a narrower pattern, path or query)"
    )


def test_the_backlog_counts_each_run_its_share_and_says_when_to_ask_again():
    clock = Clock()
    backlog = Backlog(2, 30, clock=clock)
    assert backlog.retry_after() is None  # no run measured yet: every call is taken
    first = backlog.started()
    clock.now += 4
    second = backlog.started()
    clock.now += 4
    assert backlog.own_since(first) == 6.0 and backlog.own_since(second) == 2.0  # 4 alone, then 4 shared by two
    backlog.ended(first)
    clock.now += 2
    assert backlog.own_since(second) == 4.0 and backlog.run == 8.0
    backlog.ended(second)  # a run of 6 s: the mean moves a fifth of the way
    assert backlog.run == pytest.approx(7.6)
    for _ in range(2):
        backlog.enter()
    assert backlog.ahead() == 1 and backlog.expected() == pytest.approx(7.6 * 1.5)
    assert backlog.retry_after() is None  # 11.4 s: within half the limit
    for _ in range(3):
        backlog.enter()
    # four ahead: 7.6 * 3 = 22.8 s; the two beyond the 1.9 that fit end in (4 - 1.95) * 7.6 / 2 = 7.8 s
    assert backlog.ahead() == 4 and backlog.retry_after() == 8
    for _ in range(5):
        backlog.leave()
    assert backlog.calls == 0 and backlog.retry_after() is None


def test_the_backlog_judges_a_call_by_the_runs_of_its_kind():
    """Greps of 20 s and searches of 1 s: with one call ahead, a search is taken and a grep refused."""
    clock = Clock()
    backlog = Backlog(2, 30, clock=clock)
    for kind, seconds in (("grep", 20.0), ("search", 1.0)):
        mark = backlog.started(kind)
        clock.now += seconds
        backlog.ended(mark)
    assert backlog.runs == {"grep": 20.0, "search": 1.0} and backlog.run == pytest.approx(16.2)
    for _ in range(2):
        backlog.enter()
    assert backlog.expected("search") == pytest.approx(9.1) and backlog.retry_after("search") is None
    assert backlog.expected("grep") == pytest.approx(28.1) and backlog.retry_after("grep") == 9
    assert backlog.expected("links") == pytest.approx(24.3)  # a kind not run yet: the lane's mean


def test_each_tool_has_its_lane_and_unknown_tools_are_costly():
    lanes = Lanes.of(Limits(workers=3, cheap_workers=5))
    assert (lanes.costly.total_tokens, lanes.cheap.total_tokens, lanes.writes.total_tokens) == (3, 5, 1)
    assert lanes.handoff.total_tokens == 8
    assert CHEAP_TOOLS == {"ls", "read", "show"}
    assert all(lanes.for_read(name) is lanes.cheap for name in ("ls", "read", "show", None))
    assert all(lanes.for_read(name) is lanes.costly for name in ("search", "grep", "links", "log", "hold", ""))
    assert Limits().cheap_workers == 8 and Limits.from_dict({"cheap_workers": 2}).cheap_workers == 2


def test_a_serving_process_hands_the_interpreter_on_after_half_a_millisecond():
    from fsmem.server.serving import GIL_SWITCH_SECONDS, quick_handoffs

    before = sys.getswitchinterval()
    try:
        quick_handoffs()
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_SECONDS) == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)
