"""With pytest-xdist, each worker starts with the long tests (tests/conftest.py), so none is left to run alone at the end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SYNTHETIC = """
import json, os
from pathlib import Path

import pytest

LOG = Path(__file__).parent / "order.jsonl"


def ran(name):
    with LOG.open("a") as handle:
        handle.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER"), name]) + "\\n")


@pytest.mark.parametrize("n", range(12))
def test_short(n):
    ran(f"short {n}")


@pytest.mark.slow
def test_long_one():
    ran("long one")


@pytest.mark.slow
def test_long_two():
    ran("long two")
"""


@pytest.mark.slow
def test_each_worker_starts_with_a_long_test(tmp_path):
    """The two long tests come last in their module; each of two workers runs one of them first."""
    pytest.importorskip("xdist")
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    (tmp_path / "test_synthetic.py").write_text(textwrap.dedent(SYNTHETIC))
    env = {key: value for key, value in os.environ.items() if not key.startswith("FSMEM_")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "worksteal"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [json.loads(line) for line in (tmp_path / "order.jsonl").read_text().splitlines()]
    first = {}
    for worker, name in runs:
        first.setdefault(worker, name)
    assert sorted(first.values()) == ["long one", "long two"], runs
    assert len(runs) == 14
