"""The memory the read tests page through: one file of sixty numbered lines, and a real `fsmem` process on it.

Shared by tests/test_read_json.py and tests/test_read_version.py, which each make their `root` fixture of
`memory_of_sixty_lines` (a fixture imported from here under the name its tests take would be redefined by
their parameters, ruff's F811).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem

from fsmem import Memory

NOW = "2026-11-30T10:00:00+00:00"


def memory_of_sixty_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A memory whose `topics/a.md` holds sixty lines of a few words each, the clock pinned to `NOW`."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    folder = tmp_path / "memory"
    Memory.init(folder)
    (folder / "topics").mkdir(exist_ok=True)
    (folder / "topics" / "a.md").write_text(
        "".join(f"line number {i} with some words in it\n" for i in range(1, 61)), encoding="utf-8"
    )
    return folder


def fsmem(root: Path, *args: str) -> subprocess.CompletedProcess:
    """A real `fsmem` process on `root`."""
    env = {**without_fsmem(), "FSMEM_NOW": NOW}
    command = [sys.executable, "-m", "fsmem", "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
