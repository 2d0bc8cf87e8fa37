"""fsmem.server.limits and the server settings: rate buckets, in-flight caps, checked configuration."""

from __future__ import annotations

import pytest

from fsmem import Memory
from fsmem.errors import ConfigError
from fsmem.server.limits import InFlight, RateLimiter
from fsmem.server.settings import Limits, ServerSettings


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_bucket_allows_bursts_then_the_rate_and_says_how_long_to_wait():
    clock = Clock()
    rate = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [rate.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rate.take("a") == pytest.approx(0.5)
    assert rate.take("b") == 0.0  # another token has its own bucket
    clock.now = 0.5
    assert rate.take("a") == 0.0 and rate.take("a") == pytest.approx(0.5)
    clock.now = 100.0
    assert [rate.take("a") for _ in range(4)][-1] > 0  # never more than the burst after a long pause


def test_in_flight_caps_per_key_and_in_all():
    flight = InFlight(per_key=2, total=3)
    assert [flight.acquire("a"), flight.acquire("a"), flight.acquire("a")] == [None, None, "key"]
    assert flight.acquire("b") is None and flight.acquire("c") == "total"
    flight.release("a")
    assert flight.acquire("c") is None and flight.count == 3
    for key in ("a", "b", "c"):
        flight.release(key)
    assert flight.count == 0 and flight._counts == {}


def test_settings_from_a_file_and_their_checks(tmp_path):
    root = tmp_path / "team"
    Memory.init(root)
    config = tmp_path / "server.yaml"
    config.write_text(
        "memories:\n  team: team\ntokens: secrets/tokens.json\nlimits:\n  rate_per_second: 2.5\n  burst: 4\n"
    )
    settings = ServerSettings.load(config)
    assert settings.host == "127.0.0.1" and settings.memories == {"team": root.resolve()}
    assert settings.tokens == tmp_path / "secrets" / "tokens.json"
    assert settings.limits.rate_per_second == 2.5 and settings.limits.burst == 4 and settings.limits.concurrency == 4
    warnings = settings.check()
    assert any("does not exist yet" in w for w in warnings) and not any("listening on" in w for w in warnings)
    settings.host = "0.0.0.0"
    assert any("reverse proxy with TLS" in w for w in settings.check())
    settings.tokens = root / "tokens.json"
    with pytest.raises(ConfigError, match="inside memory 'team'"):
        settings.check()
    for bad, message in (
        ("limits:\n  burst: 0\n", "above 0"),
        ("limits:\n  speed: 3\n", "unknown server limit"),
        ("limits:\n  concurrency: 1.5\n", "whole number"),
        ("memories:\n  Team: team\n", "memory name"),
        ("memories:\n  x: nowhere\n", "holds no fsmem.yaml"),
        ("port: http\n", "port must be"),
        ("hosts: x\n", "unknown setting"),
    ):
        config.write_text(bad)
        with pytest.raises(ConfigError, match=message):
            ServerSettings.load(config)
    with pytest.raises(ConfigError, match="no memory to serve"):
        ServerSettings().check()
    assert Limits().max_request_bytes == 1 << 20
