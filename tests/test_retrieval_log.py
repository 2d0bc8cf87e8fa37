"""The retrieval log: its cap comes from fsmem.yaml, it rotates, and reading spans both generations."""

from __future__ import annotations

import pytest
from test_tools import build_memory

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import ConfigError
from fsmem.store import retrieval_log


def set_cap(root, value):
    config = root / "fsmem.yaml"
    text = config.read_text().replace("max_bytes: 8388608", f"max_bytes: {value}")
    config.write_text(text)


def test_log_rotates_at_the_configured_cap_and_keeps_one_generation(tmp_path):
    root = build_memory(tmp_path)
    set_cap(root, 2048)
    assert retrieval_log.max_bytes_for(root) == 2048
    memory = Memory(root)
    for i in range(60):
        tools.call(memory, "grep", {"pattern": f"word{i}"})
    folder = root / ".fsmem" / "logs"
    current, rotated = folder / "retrieval.jsonl", folder / "retrieval.jsonl.1"
    assert current.stat().st_size <= 2048 and rotated.stat().st_size <= 2048
    assert sorted(p.name for p in folder.iterdir()) == ["retrieval.jsonl", "retrieval.jsonl.1"]
    kept = [r["arguments"]["pattern"] for r in retrieval_log.records(root)]
    assert kept == [f"word{i}" for i in range(60 - len(kept), 60)]  # the newest calls, in order
    assert 10 < len(kept) < 60


def test_cap_defaults_and_bad_values(tmp_path):
    root = build_memory(tmp_path)
    assert retrieval_log.max_bytes_for(root) == 8 * 1024 * 1024
    set_cap(root, "lots")
    with pytest.raises(ConfigError, match="logs.max_bytes must be a whole number of bytes, at least 1024"):
        retrieval_log.max_bytes_for(root)
    assert retrieval_log.max_bytes_for(tmp_path / "no-memory-here") == retrieval_log.DEFAULT_MAX_BYTES
