"""The server benchmark's client (benchmarks/bench_server.py) against a real `fsmem serve` with its default limits.

A benchmark whose client breaks a documented limit measures its own refusals: each run of the
benchmark had one 429 (counted as an error), its one-client phase sending faster than its token's rate.
"""

from __future__ import annotations

import sys

import pytest
from test_server_app import ServerProcess
from test_tools import build_memory

from fsmem.server.settings import Limits
from fsmem.server.tokens import TokenStore

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install 'fsmem[server]'")

pytestmark = pytest.mark.slow
BENCHMARKS = str(__import__("pathlib").Path(__file__).resolve().parent.parent / "benchmarks")


@pytest.fixture(scope="module")
def bench_server():
    sys.path.insert(0, BENCHMARKS)
    try:
        import bench_server
    finally:
        sys.path.remove(BENCHMARKS)
    return bench_server


def test_one_client_alone_stays_within_its_tokens_rate(tmp_path, bench_server):
    """One client of cheap calls (each a few milliseconds) for longer than the burst lasts at the default rate:
    every request is served, none refused for the rate (before the client paced itself: a 429 after about
    20 requests, the client's session failed and the phase ended early)."""
    root = build_memory(tmp_path)
    config = tmp_path / "server.yaml"
    config.write_text(f"memories:\n  team: {root}\ntokens: tokens.json\n")  # every limit at its default
    store = TokenStore(tmp_path / "tokens.json")
    token = store.create(memory="team", agent="researcher").token
    server = ServerProcess("--config", str(config), tokens=store.path)
    limits = Limits()
    seconds = 2.0 + limits.burst / limits.rate_per_second  # the burst and two seconds more at the rate
    try:
        served = bench_server.run_server(
            server.base + "/mcp",
            [token],
            seconds,
            ["topics/billing.md", "entities/orgs/acme.md"],
            "solo",
            ("ls", "read"),
        )
    finally:
        assert server.stop() == 0
    requests = server.requests()
    refused = [line for line in requests if line["status"] not in (200, 202)]
    assert served["failures"] == [] and refused == []
    assert len(requests) > limits.burst + 10, len(requests)  # it went on well past the burst, paced
    assert not any(error for _, _, error, _ in served["records"])


def test_the_limit_part_measures_the_unique_mixs_own_calls(tmp_path, bench_server):
    """The limit part (`--only limit`) asks fsmem and the bare tools the calls the unique mix's clients draw
    (a fresh `Unique`, the clients in step), each kind as often; each side of each kind is measured on every
    call, rg's CPU counted, and the calls a second are the cores over the mean CPU of the four kinds."""
    import mix_limit

    root = bench_server.prepare(60, 4, tmp_path)
    targets = bench_server.read_targets(root)
    calls = bench_server.mix_calls(root, targets, bench_server.MIX_TOOLS, 4, 2)
    unique = bench_server.Unique(bench_server.read_targets(root, 10**9), root=root)
    plans = [bench_server.Plan(n, "limit", targets, bench_server.MIX_TOOLS, unique) for n in range(4)]
    assert calls == [plan.next() for _ in range(2) for plan in plans]

    warm = bench_server.Plan(0, "warm", targets, bench_server.MIX_TOOLS)
    result = mix_limit.measure(root, calls, [warm.next() for _ in bench_server.MIX_TOOLS])
    assert {tool: {side: f["calls"] for side, f in sides.items()} for tool, sides in result["kinds"].items()} == {
        tool: dict.fromkeys(sides, 2) for tool, sides in mix_limit.SIDES.items()
    }
    assert result["kinds"]["grep"][mix_limit.RG_JSON]["cpu_mean"] > 0
    bare = result["mixes"]["bare"]
    assert bare == {tool: result["kinds"][tool][mix_limit.LIMIT[tool]]["cpu_mean"] for tool in mix_limit.SIDES}
    assert result["calls_per_second"]["bare"] == pytest.approx(result["cores"] / (sum(bare.values()) / 4))
