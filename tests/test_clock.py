"""No test depends on today's date: the tests that deal in dates pass again with the clock moved to another day.

A test that hard-codes today's date (a session note's folder, say) passes on
the day it was written and fails on every other; CI then turns red on its own.
Here every test module that deals in dates runs again in a pytest of its own
with `--clock-day` (tests/conftest.py), which moves this process's clock to a
leap day years away, time of day kept. A test that pins the clock with
FSMEM_NOW, or computes the date as fsmem does, passes there as it does today.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MOVED_DAY = "2028-02-29"  # another year, month and day than any test was written on, and a leap day
# What marks a module as dealing in dates: a dated session folder, or the clock itself. (A module that only
# pins the clock with FSMEM_NOW depends on no day; one that pins it in one test and names a dated folder in
# another, as test_server_app once did, is found by the folder.)
DATED = re.compile(r"sessions/\d{4}/|\btoday\b|datetime\.now|date\.today")
LEFT_OUT = {
    "test_clock.py",  # this module
    "test_install.py",  # builds a wheel into a new venv: no date in it, and the slowest module
    "test_history_kills.py",  # every process it starts and kills runs on the pinned clock (kill_scenario.env)
}


def dated_modules() -> list[str]:
    return sorted(
        path.name
        for path in TESTS.glob("test_*.py")
        if path.name not in LEFT_OUT and DATED.search(path.read_text(encoding="utf-8"))
    )


def test_the_dated_modules_are_found():
    found = dated_modules()
    assert "test_server_app.py" in found and "test_cli.py" in found and "test_history_queries.py" in found


# The dated modules run in this many pytests of their own, so that a parallel run (pytest -n) spreads them
# over its workers; one pytest of all of them was the longest single test of the suite (150 s quiet).
SHARES = 4


@pytest.mark.slow
@pytest.mark.parametrize("share", range(SHARES), ids=lambda share: f"share {share + 1} of {SHARES}")
def test_dated_tests_pass_on_another_day(share):
    pytest.importorskip("time_machine")
    modules = dated_modules()[share::SHARES]
    env = {key: value for key, value in os.environ.items() if not key.startswith("FSMEM_")}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    command += ["--clock-day", MOVED_DAY]
    proc = subprocess.run([*command, *modules], cwd=TESTS, env=env, capture_output=True, text=True, timeout=600)
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    assert proc.returncode == 0, f"with the clock moved to {MOVED_DAY}:\n{tail}\n{proc.stderr[-2000:]}"
    assert " passed" in tail
