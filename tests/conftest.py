"""Shared fixtures: real memories in tmp_path, built the way a user builds one."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from fsmem import Memory

# CI runs the same examples every time (a red CI must be reproducible, never a new draw's luck);
# HYPOTHESIS_PROFILE=explore draws new ones, to look for what the fixed draw misses.
try:
    from hypothesis import settings
except ImportError:  # a venv built for one purpose (tests/test_extras_floor.py) runs no property test
    pass
else:
    settings.register_profile("default", derandomize=True, database=None)
    settings.register_profile("explore", derandomize=False)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "memory"
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption(
        "--clock-day",
        metavar="YYYY-MM-DD",
        help="run every test with this process's clock moved to that day (time of day kept, still ticking): "
        "a test that depends on today's date fails (tests/test_clock.py runs the dated tests so)",
    )


@pytest.fixture(autouse=True)
def _moved_clock(request):
    """With --clock-day, the whole test runs on another day (time-machine moves time, datetime and the C clock)."""
    day = request.config.getoption("--clock-day")
    if not day:
        yield
        return
    import datetime as dt

    import time_machine

    now = dt.datetime.now().astimezone()
    moved = dt.datetime.combine(dt.date.fromisoformat(day), now.timetz())
    with time_machine.travel(moved, tick=True):
        yield


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    """No test sees the developer's FSMEM_* settings or session."""
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", "FSMEM_NOW"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def empty_memory(tmp_path) -> Memory:
    return Memory.init(tmp_path / "mem")


@pytest.fixture
def demo_memory(tmp_path) -> Memory:
    """The template plus the example memory of examples/memory."""
    memory = Memory.init(tmp_path / "mem")
    shutil.copytree(EXAMPLES, memory.root, dirs_exist_ok=True)
    return memory


def write_file(root: Path, rel: str, text: str, *, dedent: bool = True) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((textwrap.dedent(text) if dedent else text).encode("utf-8"))
    return path


def configure(root: Path, settings: dict) -> None:
    """Set `settings` (nested as fsmem.yaml nests them) in the memory's fsmem.yaml, keeping every other one.

    A second section appended at the end is refused (a key set twice), so a test edits the file's mapping."""
    import yaml

    config = Path(root) / "fsmem.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}

    def merge(into: dict, new: dict) -> None:
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    merge(data, settings)
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
