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
