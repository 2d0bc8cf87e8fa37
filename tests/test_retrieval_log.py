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


def test_threads_appending_at_once_share_writes_and_every_record_is_written_once(tmp_path, monkeypatch):
    """Group commit: 16 threads append 25 records each at once; every record is in the log, whole, once,
    in fewer writes than records, and a failed write fails every caller whose record it held."""
    import json
    import threading
    import time

    from fsmem.store import logs

    logs._groups.clear()

    root = build_memory(tmp_path)
    writes = []
    real = logs._write

    def counted(*args):
        writes.append(args[2].count(b"\n"))
        if len(writes) == 1:  # the first write waits until the other 15 threads have queued a record behind it
            group = next(iter(logs._groups.values()))
            deadline = time.monotonic() + 30
            while len(group.open.records) < 15 and time.monotonic() < deadline:
                time.sleep(0.001)
        real(*args)

    monkeypatch.setattr(logs, "_write", counted)
    start = threading.Barrier(16)

    def worker(n):
        start.wait()
        for i in range(25):
            retrieval_log.append(root, {"tool": "t", "n": f"{n}-{i}"})

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = (root / ".fsmem" / "logs" / "retrieval.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["n"] for line in lines) == sorted(f"{n}-{i}" for n in range(16) for i in range(25))
    assert sum(writes) == 400 and writes[1] >= 15 and len(writes) <= 400 - 14

    def refuse(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(logs, "_write", refuse)
    failed = []

    def failing():
        try:
            retrieval_log.append(root, {"tool": "t"})
        except OSError as exc:
            failed.append(exc.errno)

    threads = [threading.Thread(target=failing) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [28] * 8
