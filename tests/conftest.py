"""Shared fixtures: real memories in tmp_path, built the way a user builds one."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from fsmem import Memory

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "memory"
SHARED_DATA = REPO.parent / "shared" / "data"


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
