"""Hostile sizes and kinds of file: what the memory's own files and its `.git/` may hold when they came in an
untrusted copy, or grew there.

No file in the memory, whatever its kind or size, may make a command hang or fail for the other files, and no
`.git/` entry may make a git call fsmem makes wait for ever. The commands run as real subprocesses under a
timeout, so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from test_hostile import NOW, cli

from fsmem import Memory

BILLING = "---\ntitle: Billing\ntype: semantic\n---\n# Billing\n- proration: daily\n"


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "billing.md").write_text(BILLING)
    return memory.root


def test_a_row_count_past_the_limit_in_the_cache_is_a_rebuild(root: Path) -> None:
    """A cache.sqlite whose `search_files.rows` said 2**63 - 1 made `continued_blocks` count that many blocks
    (search ran out of time and memory); a count past MAX_ROWS is now a damaged index, rebuilt from the files."""
    assert cli(root, "search", "proration").returncode == 0  # the index is made
    with sqlite3.connect(root / ".fsmem" / "cache.sqlite") as conn:
        conn.execute("UPDATE search_files SET rows = 9223372036854775807")
    conn.close()
    done = cli(root, "search", "proration", timeout=20)
    assert done.returncode == 0, done.stderr
    assert "topics/billing.md" in done.stdout
