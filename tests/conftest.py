"""Shared fixtures: real memories in tmp_path, built the way a user builds one."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

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
T = TypeVar("T")


def pytest_addoption(parser):
    parser.addoption(
        "--clock-day",
        metavar="YYYY-MM-DD",
        help="run every test with this process's clock moved to that day (time of day kept, still ticking): "
        "a test that depends on today's date fails (tests/test_clock.py runs the dated tests so)",
    )
    parser.addoption(
        "--save-durations",
        action="store_true",
        help=f"write this run's long tests and their durations to tests/{COMMITTED_DURATIONS.name}, the order a "
        "clean checkout (CI) deals them out in",
    )


# No test may depend on today's date. A test that reads the real date (fsmem.format.wall_clock, with FSMEM_NOW
# unset) in a module that deals in dates runs a second time at once, with the clock moved to a leap day years
# away (time of day kept); a test that hard-codes today fails there. Only those tests: one that reads no date
# cannot tell the days apart, and one in a module that names no dated folder, no `today` and no clock of its
# own only stamps commits with the date (a git-heavy module's tests do, and would cost twice for nothing).
MOVED_DAY = "2028-02-29"
DEALS_IN_DATES = re.compile(r"sessions/\d{4}/|\btoday\b|datetime\.now|date\.today")
_deals_in_dates: dict[str, bool] = {}


def deals_in_dates(path: Path) -> bool:
    """Whether a test module's text names a dated session folder, `today` or the clock."""
    if str(path) not in _deals_in_dates:
        _deals_in_dates[str(path)] = bool(DEALS_IN_DATES.search(path.read_text(encoding="utf-8")))
    return _deals_in_dates[str(path)]


_wall_clock_reads = [0]
_making_a_shared_fixture = [0]  # depth: inside the setup of a fixture wider than one test


def _count_wall_clock_reads(event: str, args: tuple) -> None:
    if event == "fsmem.wall_clock" and not _making_a_shared_fixture[0]:
        _wall_clock_reads[0] += 1


sys.addaudithook(_count_wall_clock_reads)


def wall_clock_reads() -> int:
    """How many times this process has read the real date through fsmem.format.wall_clock, outside the making
    of a fixture wider than one test."""
    return _wall_clock_reads[0]


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A fixture wider than one test (a module's server, its tokens) is made once, before any test's clock
    moves, and made again so in a pytest of its own: a run on another day never moves the date it read, so
    that read does not make its first test run twice (its tests' own reads still do)."""
    if fixturedef.scope == "function":
        return (yield)
    _making_a_shared_fixture[0] += 1
    try:
        return (yield)
    finally:
        _making_a_shared_fixture[0] -= 1


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Run the test; if it read the real date and passed, run it again on MOVED_DAY, and report that run's failure."""
    if item.config.getoption("--clock-day") or not _moved_clock_available():
        return None
    from _pytest.runner import runtestprotocol  # what pytest-rerunfailures runs a test again with

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    before = _wall_clock_reads[0]
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    if _wall_clock_reads[0] > before and all(report.passed for report in reports) and deals_in_dates(item.path):
        if _shares_fixtures(item):
            moved = _run_apart(item, reports)
        else:
            item.stash[_CLOCK_DAY] = MOVED_DAY
            try:
                moved = runtestprotocol(item, nextitem=nextitem, log=False)
            finally:
                del item.stash[_CLOCK_DAY]
        extra = sum(report.duration for report in moved)
        if any(report.failed for report in moved):
            reports = [next((m for m in moved if m.when == r.when), r) for r in reports]
            note = f"it read today's date and failed with the clock moved to {MOVED_DAY}: it depends on the day"
            for report in reports:
                report.sections.append(("moved clock", note))
        for report in reports:
            if report.when == "call":
                report.duration += extra  # --durations shows what the test cost, both days
                report.user_properties.append((MOVED_CLOCK_SECONDS, extra))  # for the summary's line
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


_CLOCK_DAY = pytest.StashKey[str]()
MOVED_CLOCK_SECONDS = "moved_clock_seconds"
TESTS = Path(__file__).resolve().parent


def _shares_fixtures(item) -> bool:
    """Whether the test uses a fixture of this suite wider than one test (a module's server, say): its first run
    may have changed what that fixture holds (a token revoked, a rate spent), so a second run in this process
    would not start where the first did."""
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            if fixturedef.scope != "function" and TESTS in Path(fixturedef.func.__code__.co_filename).parents:
                return True
    return False


def _run_apart(item, reports):
    """The test again on MOVED_DAY in a pytest of its own (its fixtures made anew); the call report, failed with
    that pytest's output if it failed."""
    import copy
    import subprocess
    import time

    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
    command += ["--clock-day", MOVED_DAY, item.nodeid]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=item.config.rootpath, capture_output=True, text=True, timeout=900)
    call = copy.copy(next(report for report in reports if report.when == "call"))
    call.duration = time.monotonic() - started
    if proc.returncode != 0:
        call.outcome = "failed"
        output = proc.stdout[-4000:] + proc.stderr[-2000:]
        call.longrepr = f"{item.nodeid} on {MOVED_DAY}, in a pytest of its own:\n{output}"
    return [call]  # the setup and teardown of this run are inside the pytest of its own


def _moved_clock_available() -> bool:
    try:
        import time_machine  # noqa: F401
    except ImportError:  # a venv built for one purpose (tests/test_extras_floor.py)
        return False
    return True


@pytest.fixture(autouse=True)
def _moved_clock(request):
    """On a moved day (--clock-day, or a test's second run), the test runs then (time-machine moves time,
    datetime and the C clock; time of day kept, still ticking)."""
    day = request.config.getoption("--clock-day") or request.node.stash.get(_CLOCK_DAY, None)
    if not day:
        yield
        return
    import datetime as dt

    import time_machine

    now = dt.datetime.now().astimezone()
    moved = dt.datetime.combine(dt.date.fromisoformat(day), now.timetz())
    with time_machine.travel(moved, tick=True):
        yield


# With pytest-xdist (make test), a long test started last leaves the other workers idle while it runs. Each
# worker's first tests are therefore the long ones, dealt out so that the workers' shares even out: longest
# first, by the durations of the last run (pytest's cache), else those of a run kept in the repository
# (tests/durations.json, so that a clean checkout — CI — deals them out as well), else the `slow` marker's
# guess. The other tests keep their order, module by module (their module-scoped fixtures are built once).
DURATIONS = "fsmem/durations"
COMMITTED_DURATIONS = Path(__file__).resolve().parent / "durations.json"
LONG = 5.0  # seconds: a test at least this long is dealt out first
SLOW_GUESS = 20.0  # what a `slow` test is taken to cost when no run has measured it


def known_durations(config) -> dict[str, float]:
    """Seconds per test id: the last local run's (pytest's cache) over the repository's kept run."""
    import json

    try:
        known = json.loads(COMMITTED_DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is not None:
        known.update(cache.get(DURATIONS, {}))
    return known


def pytest_collection_modifyitems(config, items):
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2 or len(items) < workers:
        return
    known = known_durations(config)

    def cost(item) -> float:
        return known.get(item.nodeid, SLOW_GUESS if item.get_closest_marker("slow") else 0.0)

    # the share each worker takes first, as pytest-xdist's worksteal scheduler cuts the collection
    sizes, left = [], len(items)
    for share in range(workers):
        sizes.append(left // (workers - share))
        left -= sizes[-1]
    long = sorted((item for item in items if cost(item) >= LONG), key=cost, reverse=True)
    shares: list[list] = [[] for _ in range(workers)]
    totals = [0.0] * workers
    for item in long:
        room = [n for n in range(workers) if len(shares[n]) < sizes[n]]
        n = min(room, key=lambda n: totals[n])
        shares[n].append(item)
        totals[n] += cost(item)
    dealt = set(map(id, long))
    rest = iter(item for item in items if id(item) not in dealt)
    for n in range(workers):
        shares[n].extend(next(rest) for _ in range(sizes[n] - len(shares[n])))
    items[:] = [item for share in shares for item in share]


def pytest_runtest_logreport(report):
    if report.passed or report.failed:
        _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    for name, seconds in report.user_properties:
        if name == MOVED_CLOCK_SECONDS:
            _moved_runs.append(seconds)


_moved_runs: list[float] = []  # seconds of each second run on MOVED_DAY, as reported to this process


def pytest_terminal_summary(terminalreporter):
    """What the runs on MOVED_DAY cost: the price of the day check, to keep in sight."""
    if _moved_runs:
        terminalreporter.write_line(
            f"moved clock: {len(_moved_runs)} tests read today's date and ran again on {MOVED_DAY}, "
            f"{sum(_moved_runs):.1f} s of test time"
        )


_durations: dict[str, float] = {}


def pytest_sessionfinish(session):
    """Keep this run's durations (in the controller, or a run without workers) for the next run's order; with
    --save-durations, its long tests also in the repository's file."""
    config = session.config
    if hasattr(config, "workerinput") or not _durations:
        return
    measured = {nodeid: round(seconds, 2) for nodeid, seconds in _durations.items()}
    cache = getattr(config, "cache", None)
    if cache is not None:
        known = cache.get(DURATIONS, {})
        known.update(measured)
        cache.set(DURATIONS, known)
    if config.getoption("--save-durations"):
        import json

        long = {nodeid: seconds for nodeid, seconds in sorted(measured.items()) if seconds >= LONG}
        COMMITTED_DURATIONS.write_text(json.dumps(long, indent=0) + "\n", encoding="utf-8")


def copy_source(source: Path) -> Path:
    """A copy of this checkout without the developer's .venv and caches: what a user's `pip install .` would see."""
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
            "build",
            "dist",
            "demo-memory",
            "bench-out",
            ".hypothesis",
            "*.so",  # the C module an editable install compiled in place: a user's checkout has only its source
        ),
    )
    return source


def _temporary_folders_in_memory() -> None:
    """Every test's temporary folders (tmp_path, tempfile's, those of the processes tests start) on tmpfs where the
    machine has one with room and no TMPDIR was chosen: the suite writes, fsyncs and removes memories, git
    repositories and virtual environments by the thousand, and on a disk shared with other work those waits were
    most of its longest files' time (tests/test_sync_fuzz.py: 25 s of wall on tmpfs, over 3 min on this machine's
    disk under load). What is written is the same; a green run leaves none behind (pyproject.toml's
    tmp_path_retention_policy), a failed test keeps its own."""
    folder = scratch_folder()
    if folder and not os.environ.get("TMPDIR"):
        os.environ["TMPDIR"] = folder  # pytest-xdist's workers and every process a test starts inherit it
        tempfile.tempdir = None  # read again from TMPDIR


def scratch_folder() -> str | None:
    """Linux's shared-memory tmpfs where it has room, else None (the default temporary folder). On this project's
    disk a memory's fsyncs and removals were most of a test's time (tests/test_consolidate_invariant.py's 45
    examples: 13-20 s of wall against 3 s on tmpfs, and 1.5 s more CPU); the bytes written are the same."""
    try:
        free = os.statvfs(SHARED_MEMORY)
    except OSError:
        return None
    # 2 GB: a run's folders, all kept, took 1.2 GB
    room = free.f_bavail * free.f_frsize >= 2 << 30 and os.access(SHARED_MEMORY, os.W_OK)
    return SHARED_MEMORY if room else None


SHARED_MEMORY = "/dev/shm"


def made_once_a_run(tmp_path_factory, name: str, make: Callable[[Path], T]) -> T:
    """What `make` makes in a new folder, made once a run: with pytest-xdist (`make test`), by the first worker to
    ask, in a folder of the run's that every worker shares, while the others wait (a lock) and then take it; a
    session- or module-scoped fixture alone is made once a worker, each building the same wheel (5-6 s of CPU)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return make(tmp_path_factory.mktemp(name))
    import fcntl
    import pickle

    shared = tmp_path_factory.getbasetemp().parent / f"{name}-{run}"  # the run's basetemp, above each worker's
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed, or when a worker that holds it dies
        made = shared / "made.pickle"
        if made.exists():
            return pickle.loads(made.read_bytes())
        result = make(Path(tempfile.mkdtemp(dir=shared)))
        made.write_bytes(pickle.dumps(result))  # only once made: a worker whose make failed leaves it to the next
        return result


@pytest.fixture(scope="session")
def fsmem_wheel(tmp_path_factory) -> Path:
    """fsmem's wheel, built once a run from a copy of this checkout as `pip install .` builds it (in an
    isolated build environment): what the fresh virtual environments of tests/test_install.py and
    tests/test_extras_floor.py install (tests/venvs.py), as a user's pip installs a release's wheel."""
    return made_once_a_run(tmp_path_factory, "wheel", _build_wheel)


def _build_wheel(base: Path) -> Path:
    import subprocess

    source = copy_source(base / "fsmem")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
    built = subprocess.run(
        [*command, "-w", str(base / "dist"), str(source)], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("fsmem-*.whl")
    return wheel


@pytest.fixture(scope="session")
def _config_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("config-home")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, _config_home):
    """No test sees the developer's FSMEM_* settings or session, nor makes a key in their config folder."""
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", "FSMEM_NOW"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(_config_home))


@pytest.fixture(autouse=True)
def _folder_given_back():
    """A test leaves the process in the folder it found: a passed test's tmp_path is removed at its end
    (pyproject.toml's tmp_path_retention_policy), and a worker left in it fails every later test that asks
    for its folder. A test that moves (other than through monkeypatch.chdir, given back before this) fails."""
    before = os.getcwd()
    yield
    try:
        left = os.getcwd()
    except FileNotFoundError:
        left = None
    if left != before:
        os.chdir(before)
        pytest.fail(f"the test left the process in {left or 'a removed folder'}: use monkeypatch.chdir")


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


def pytest_configure(config):
    """Compile fsmem's modules and the tests' helpers once, before any test. Where PYTHONDONTWRITEBYTECODE is
    set (this project's machines set it), every fsmem a test starts would otherwise compile some 200 modules
    again: half the CPU time of a small command such as `fsmem ls`. compileall writes only what is out of date,
    into the __pycache__ folders git ignores."""
    if hasattr(config, "workerinput"):
        return  # the controller compiled before it started the workers (and chose their temporary folder)
    _temporary_folders_in_memory()
    import compileall

    for folder in (REPO / "fsmem", TESTS):
        compileall.compile_dir(folder, quiet=1)
