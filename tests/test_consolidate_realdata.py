"""FactConsolidation (MemoryAgentBench) through consolidation: every slot ends with only its newest value visible."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks" / "bench_factconsolidation.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_factconsolidation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_all_slots_end_with_the_current_value_visible(tmp_path, monkeypatch):
    bench = _bench()
    if not bench.DATA.exists():
        pytest.skip(f"{bench.DATA} is absent")
    monkeypatch.setenv("FSMEM_NOW", "2026-12-01T00:00:00+00:00")
    rows = bench.load()
    run = bench.consolidate_shuffled(tmp_path / "mem", rows, runs=3, seed=11)
    result = bench.evaluate(tmp_path / "mem", rows)
    assert (result["slots"], result["superseded_facts"]) == (294, 161)
    assert result["wrong"] == []
    assert result["slots_correct"] == 294 and result["superseded_marked"] == 161
    assert run["idempotent"]
