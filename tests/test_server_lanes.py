"""fsmem.server.lanes: a cheap call never waits for a thread behind costly ones, and every token's share holds.

The costly calls are made slow deterministically: a tool registered for the
test (as a plugin registers one, so it runs on the costly lane) that holds its
thread until the test opens a gate, and says when it has started.
"""

from __future__ import annotations

import json
import threading

import anyio
import pytest
from test_tools import build_memory

from fsmem import Memory
from fsmem.agents.registry import Reply, tool, unregister
from fsmem.server.lanes import CHEAP_TOOLS, Lanes
from fsmem.server.settings import Limits, ServerSettings
from fsmem.server.tokens import TokenStore

pytest.importorskip("mcp")
import httpx2  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tool_call(name: str, arguments: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


@pytest.fixture
def held():
    """A costly tool `hold` whose calls keep their thread until `gate` is set; `started` counts them in."""
    started, gate = threading.Semaphore(0), threading.Event()

    @tool("hold")
    def hold(memory: Memory, *, max_tokens: int | None = None) -> Reply:
        """Hold a costly thread until the test lets go (registered for this test)."""
        started.release()
        gate.wait(60)
        return Reply("held")

    try:
        yield started, gate
    finally:
        gate.set()
        unregister("hold")


def test_a_cheap_call_answers_while_slow_calls_hold_every_costly_thread(tmp_path, held):
    from fsmem.server.app import MemoryServer
    from fsmem.server.log import RequestLog

    started, gate = held
    root = build_memory(tmp_path / "team")
    store = TokenStore(tmp_path / "tokens.json")
    heavy = store.create(memory="team", agent="researcher").token
    light = store.create(memory="team", agent="researcher").token
    limits = Limits(workers=2, cheap_workers=2, concurrency=4)
    settings = ServerSettings(memories={"team": root}, tokens=store.path, limits=limits)
    app = MemoryServer(settings, log=RequestLog(stream=open(tmp_path / "log.jsonl", "w")))  # noqa: SIM115
    answers: dict[str, list] = {"hold": [], "search": []}

    async def post(http, token: str, name: str, arguments: dict):
        return await http.post("/mcp", json=tool_call(name, arguments), headers={"Authorization": f"Bearer {token}"})

    async def main():
        async with app.manager.run():
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=HEADERS) as http:

                async def costly(token: str, name: str, arguments: dict) -> None:
                    answers[name].append(await post(http, token, name, arguments))

                async with anyio.create_task_group() as group:
                    for _ in range(4):  # the heavy token's whole share: two run, two wait for a costly thread
                        group.start_soon(costly, heavy, "hold", {})
                    for _ in range(2):
                        await anyio.to_thread.run_sync(started.acquire)  # every costly thread is held
                    group.start_soon(costly, light, "search", {"query": "proration"})  # waits its turn
                    try:
                        with anyio.fail_after(20):  # a failure's bound, not an ordering: it answers at once
                            ls = await post(http, light, "ls", {"path": "topics"})
                            read = await post(http, light, "read", {"path": "topics/billing.md"})
                            over = await post(http, heavy, "hold", {})  # past the heavy token's costly share
                            own = await post(http, heavy, "ls", {})  # its cheap share is its own: served
                        assert not started.acquire(blocking=False)  # still no costly thread free
                    finally:
                        gate.set()
                return ls, read, over, own

    ls, read, over, own = anyio.run(main)
    for answer, text in ((ls, "topics/billing.md"), (read, "proration")):
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
        assert text in answer.json()["result"]["content"][0]["text"]
    assert over.status_code == 429 and "4 request(s) in flight (at most 4 costly" in over.json()["error"]["message"]
    assert own.status_code == 200 and not own.json()["result"]["isError"]
    assert [a.json()["result"]["content"][0]["text"] for a in answers["hold"]] == ["held"] * 4
    assert [a.status_code for a in answers["search"]] == [200]
    assert not answers["search"][0].json()["result"]["isError"]
    # the log says where each call's time went: the holds that waited for a costly thread waited longer than
    # the ls and the read (served while they waited), and a hold that held spent its run waiting, not on CPU
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    calls = [line for line in lines if line.get("rpc") == "tools/call" and line["status"] == 200]
    assert all(isinstance(line[key], float) for line in calls for key in ("wait_ms", "run_ms", "cpu_ms"))
    holds = sorted((line for line in calls if line["tool"] == "hold"), key=lambda line: line["wait_ms"])
    cheap = [line for line in calls if line["tool"] in ("ls", "read")]
    assert len(holds) == 4 and len(cheap) == 3  # the light token's ls and read, the heavy token's ls
    assert holds[-1]["wait_ms"] > max(line["wait_ms"] for line in cheap)
    assert all(line["cpu_ms"] < line["run_ms"] for line in holds[:2])  # the two that held their thread


def test_each_tool_has_its_lane_and_unknown_tools_are_costly():
    lanes = Lanes.of(Limits(workers=3, cheap_workers=5))
    assert (lanes.costly.total_tokens, lanes.cheap.total_tokens, lanes.writes.total_tokens) == (3, 5, 1)
    assert lanes.handoff.total_tokens == 8
    assert CHEAP_TOOLS == {"ls", "read", "show"}
    assert all(lanes.for_read(name) is lanes.cheap for name in ("ls", "read", "show", None))
    assert all(lanes.for_read(name) is lanes.costly for name in ("search", "grep", "links", "log", "hold", ""))
    assert Limits().cheap_workers == 8 and Limits.from_dict({"cheap_workers": 2}).cheap_workers == 2
