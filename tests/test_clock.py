"""No test depends on today's date: a test that reads the real date passes again with the clock moved to another day.

A test that hard-codes today's date (a session note's folder, say) passes on
the day it was written and fails on every other; CI then turns red on its own.
fsmem reads the date in one place, `fsmem.format.wall_clock`, which raises an
audit event; tests/conftest.py counts those events, and a test that read the
real date (FSMEM_NOW unset) and passed, in a module that deals in dates (names
a dated session folder, `today` or the clock), runs again at once with its
clock moved to a leap day years away, time of day kept. A test that pins the
clock with FSMEM_NOW, or computes the date as fsmem does, passes there as it
does today; a test that reads no date cannot tell the days apart and runs once,
as does one whose module only stamps commits with the date, and one whose only
read of the date is in making a fixture shared by several tests (a module's
server and its tokens): that fixture is made before any test's clock moves, in
this pytest or in one of its own, so a second run would move nothing. (Processes a test
starts keep the real clock: a test that compares their dates with its own
hard-coded one is not caught, as it never was.)
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from child_env import child_env
from conftest import deals_in_dates, wall_clock_reads

from fsmem import Memory

TESTS = Path(__file__).resolve().parent
FSMEM = TESTS.parent / "fsmem"
# Where fsmem may read the clock other than through wall_clock, and why no test's answer depends on it.
NOT_A_DATE = {
    "server/log.py": "the time stamp of a log line, which no answer carries",
    "cli/watch.py": "the time of day printed beside a message of fsmem watch",
    "operations/stat.py": "a file's modification time, formatted (time.gmtime of it): not the clock",
}
CLOCK_READ = re.compile(
    r"\b(?:datetime\.(?:now|today|utcnow)|date\.today|time\.(?:localtime|gmtime|strftime|ctime|asctime))\("
)


def test_fsmem_reads_the_date_only_through_wall_clock():
    """Else a test that reads the date elsewhere would not be counted, and would never run on another day."""
    readers = {}
    for path in sorted(FSMEM.rglob("*.py")):
        rel = path.relative_to(FSMEM).as_posix()
        lines = [
            n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if CLOCK_READ.search(line)
        ]
        if lines:
            readers[rel] = lines
    assert readers.pop("format/timestamps.py") == [_wall_clock_line()]
    assert set(readers) <= set(NOT_A_DATE), f"read the clock through fsmem.format.wall_clock: {readers}"


def _wall_clock_line() -> int:
    source = (FSMEM / "format" / "timestamps.py").read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(source, 1) if line.startswith("def wall_clock("))
    return next(n for n, line in enumerate(source, 1) if n > start and CLOCK_READ.search(line))


def test_the_modules_that_deal_in_dates_are_found():
    dated = {path.name for path in TESTS.glob("test_*.py") if deals_in_dates(path)}
    assert {"test_server_app.py", "test_cli.py", "test_history_queries.py", "test_writing.py"} <= dated
    assert "test_sync_trust.py" not in dated and "test_layout.py" not in dated


def test_a_note_written_without_fsmem_now_reads_the_wall_clock(tmp_path, monkeypatch):
    """What the counting hangs on: an audit event each time fsmem reads the real date, none when FSMEM_NOW is set."""
    memory = Memory.init(tmp_path / "mem")
    before = wall_clock_reads()
    memory.note("seen the billing page", session="s1")
    assert wall_clock_reads() > before
    monkeypatch.setenv("FSMEM_NOW", "2026-03-01T10:00:00+00:00")
    before = wall_clock_reads()
    assert memory.note("and again", session="s2").path == "sessions/2026/03/01/s2.md"
    assert wall_clock_reads() == before


@pytest.mark.parametrize("value", ["garbage", "2026-13-01", "yesterday"])
def test_a_fsmem_now_that_is_no_time_is_refused_not_read_as_the_wall_clock(tmp_path, value):
    """A run meant to be reproducible (FSMEM_NOW set) never quietly takes the real date: exit 2, nothing written."""
    memory = Memory.init(tmp_path / "mem")
    before = sorted(p.relative_to(memory.root) for p in memory.root.rglob("*.md"))
    done = subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(memory.root), "note", "seen the billing page"],
        env={**child_env(), "FSMEM_NOW": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"FSMEM_NOW is {value!r}, not a date or time" in done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.relative_to(memory.root) for p in memory.root.rglob("*.md")) == before


SYNTHETIC = """
import datetime as dt
from pathlib import Path

import pytest

from fsmem import Memory

RUNS = Path(__file__).parent / "runs.txt"


def ran(name):
    with RUNS.open("a") as handle:
        handle.write(name + "\\n")


def test_hard_codes_today(tmp_path):
    ran("hard_codes_today")
    path = Memory.init(tmp_path / "mem").note("seen", session="s1").path
    assert path == "sessions/{today}/s1.md"


def test_computes_the_date_as_fsmem_does(tmp_path):
    ran("computes")
    path = Memory.init(tmp_path / "mem").note("seen", session="s1").path
    assert path == f"sessions/{{dt.datetime.now().astimezone():%Y/%m/%d}}/s1.md"


def test_pins_the_clock(tmp_path, monkeypatch):
    ran("pins")
    monkeypatch.setenv("FSMEM_NOW", "2026-03-01T10:00:00+00:00")
    assert Memory.init(tmp_path / "mem").note("seen", session="s1").path == "sessions/2026/03/01/s1.md"


def test_reads_no_date():
    ran("no_date")


@pytest.fixture(scope="module")
def tickets():
    return ["one"]  # a module's state: the first run of a test below takes it


def test_takes_a_modules_ticket(tickets, tmp_path):
    ran("takes_ticket")
    assert tickets.pop() == "one"  # run twice in one process, the second run would find none
    Memory.init(tmp_path / "mem").note("seen", session="s1")


@pytest.fixture(scope="module")
def dated_note(tmp_path_factory):  # made once on the real day, as again in any pytest of its own
    return Memory.init(tmp_path_factory.mktemp("shared") / "mem").note("seen", session="s1").path


def test_uses_a_modules_dated_note(dated_note):
    ran("modules_note")
    assert dated_note.startswith("sessions/")


def test_hard_codes_today_beside_a_modules_state(tickets, tmp_path):
    ran("hard_codes_today_shared")
    path = Memory.init(tmp_path / "mem").note("seen", session="s1").path
    assert path == "sessions/{today}/s1.md"
"""


UNDATED = """
from pathlib import Path

from fsmem import Memory


def test_writes_a_note(tmp_path):
    with (Path(__file__).parent / "runs.txt").open("a") as handle:
        handle.write("undated\\n")
    Memory.init(tmp_path / "mem").note("seen", session="s1")
"""


def test_a_test_that_hard_codes_today_fails_and_one_that_does_not_passes(tmp_path):
    """The bug the moved clock exists for, in a module of its own run by this suite's conftest."""
    pytest.importorskip("time_machine")
    today = dt.datetime.now().astimezone()
    if today.hour == 23 and today.minute >= 58:
        today = today + dt.timedelta(minutes=3)  # a run across midnight would see the next day
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_synthetic.py").write_text(textwrap.dedent(SYNTHETIC.format(today=f"{today:%Y/%m/%d}")))
    (tmp_path / "test_undated.py").write_text(textwrap.dedent(UNDATED))
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist"]
    proc = subprocess.run(command, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "FAILED test_synthetic.py::test_hard_codes_today " in out
    assert "FAILED test_synthetic.py::test_hard_codes_today_beside_a_modules_state" in out
    assert "failed with the clock moved to 2028-02-29: it depends on the day" in out
    assert "sessions/2028/02/29/s1.md" in out  # what fsmem wrote on the moved day
    assert "in a pytest of its own" in out  # the test that shares a module's fixture ran again apart
    assert "6 passed" in out and "2 failed" in out
    runs = (tmp_path / "runs.txt").read_text().split()
    # a test that read the date in a module that deals in dates ran twice, the others once; one sharing a
    # module's state ran again in a pytest of its own, where that state was made anew; one whose only date is
    # its module fixture's ran once (a pytest of its own makes that fixture on the real day again)
    twice = ["hard_codes_today", "computes", "takes_ticket", "hard_codes_today_shared"]
    assert sorted(runs) == sorted(twice * 2 + ["pins", "no_date", "undated", "modules_note"])
