"""With pytest-xdist, each worker starts with the long tests (tests/conftest.py), so none is left to run alone at the end."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from child_env import child_env
from conftest import LONG

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


def first_on_each_worker(tmp_path: Path, module: str, *options: str) -> list[str]:
    """Run `module` with the suite's conftest on two workers, without pytest's cache (as on a clean checkout):
    the name each worker ran first, sorted."""
    pytest.importorskip("xdist")
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    (tmp_path / "test_synthetic.py").write_text(textwrap.dedent(module))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "worksteal"]
    proc = subprocess.run(
        command + list(options), cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [json.loads(line) for line in (tmp_path / "order.jsonl").read_text().splitlines()]
    assert len(runs) == 14, runs
    first: dict[str, str] = {}
    for worker, name in runs:
        first.setdefault(worker, name)
    return sorted(first.values())


@pytest.mark.slow
def test_each_worker_starts_with_a_long_test(tmp_path):
    """The two long tests come last in their module; each of two workers runs one of them first."""
    assert first_on_each_worker(tmp_path, SYNTHETIC) == ["long one", "long two"]


@pytest.mark.slow
def test_a_clean_checkout_deals_out_the_long_tests_the_repository_kept(tmp_path):
    """Without pytest's cache and with no `slow` marker, the durations kept in tests/durations.json (written by
    --save-durations) still put a long test first on each worker."""
    unmarked = SYNTHETIC.replace("@pytest.mark.slow\n", "")
    assert first_on_each_worker(tmp_path, unmarked)[0].startswith("short"), (
        "without durations, the order is the module's"
    )
    assert not (tmp_path / "durations.json").exists()
    kept = {"test_synthetic.py::test_long_one": 30.0, "test_synthetic.py::test_long_two": 25.0}
    (tmp_path / "durations.json").write_text(json.dumps(kept))
    (tmp_path / "order.jsonl").unlink()
    assert first_on_each_worker(tmp_path, unmarked) == ["long one", "long two"]


def test_save_durations_keeps_the_long_tests_of_the_run(tmp_path):
    """--save-durations writes the run's tests of at least conftest.LONG seconds, and none shorter. The copy of
    the conftest takes a tenth of LONG (the threshold's value is not what is tested), so the long test sleeps
    a tenth as long."""
    text, moved = re.subn(r"^LONG = [0-9.]+", f"LONG = {LONG / 10}", (TESTS / "conftest.py").read_text(), flags=re.M)
    assert moved == 1, "conftest.py sets LONG on a line of its own"
    (tmp_path / "conftest.py").write_text(text)
    (tmp_path / "test_timed.py").write_text(
        f"import time\n\ndef test_quick():\n    pass\n\ndef test_long():\n    time.sleep({LONG / 10 + 0.1})\n"
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--save-durations"]
    proc = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = json.loads((tmp_path / "durations.json").read_text())
    assert list(kept) == ["test_timed.py::test_long"] and kept["test_timed.py::test_long"] >= LONG / 10
