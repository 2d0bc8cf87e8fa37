"""Issue #19, finding 6: every command is bounded in the files it is given.

`recall --seen-file` and `evaluate` on a FIFO or /dev/zero, and `import locomo
/dev/zero`, hung past 30 s (then MemoryError under a memory limit). Every file
argument of every command now goes through `fsmem.store.outside_files`: a FIFO, a
device or a folder where a file is expected is refused at once, and a file is
read with a size cap (standard input too, where a command reads it). The
table below names every file and folder argument; a test walks the commands
so that a new one cannot be left out.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import cli_runner
import click
import pytest
from child_env import without_fsmem

from fsmem import Memory, connect
from fsmem.cli import cli
from fsmem.cli.inputs import SEEN_LIMIT, STDIN_LIMIT
from fsmem.errors import InvalidArgument, NotFound
from fsmem.evaluation import harness, locomo
from fsmem.server.settings import CONFIG_LIMIT
from fsmem.server.tokens import TOKENS_LIMIT
from fsmem.store import outside_files

FSMEM = str(Path(sys.executable).with_name("fsmem"))
SAY = {"fifo": "is a FIFO", "zero": "is a device", "folder": "is a folder", "large": "is larger than"}


@dataclass(frozen=True)
class Case:
    """How to give one argument a path: the command line, with {} for it; what it is; its size cap."""

    argv: tuple[str, ...]
    reads: bool = True  # False: a file the command writes
    limit: int | None = None  # None: no size case (an output, or read elsewhere)


FILE_ARGUMENTS: dict[tuple[str, str], Case] = {
    ("recall", "seen"): Case(("--root", "{root}", "recall", "alpha", "--seen-file", "{}"), limit=SEEN_LIMIT),
    ("evaluate", "evalset"): Case(("--root", "{root}", "evaluate", "{}"), limit=harness.EVALSET_LIMIT),
    ("evaluate", "plot_file"): Case(("--root", "{root}", "evaluate", "{evalset}", "--plot", "{}"), reads=False),
    ("import locomo", "file"): Case(("import", "locomo", "{}", "{out}"), limit=locomo.LOCOMO_LIMIT),
    ("serve", "config_file"): Case(("--root", "{root}", "serve", "--port", "0", "--config", "{}"), limit=CONFIG_LIMIT),
    # A token store that cannot be read is a warning at start (every request refused), as a damaged one is.
    ("serve", "tokens_file"): Case(("--root", "{root}", "serve", "--port", "0", "--tokens", "{}")),
    ("serve", "log_file"): Case(
        ("--root", "{root}", "serve", "--port", "0", "--tokens", "{tokens}", "--log", "{}"), reads=False
    ),
    ("token create", "tokens_file"): Case(
        ("--agent", "a", "token", "create", "--memory", "m", "--tokens", "{}"), limit=TOKENS_LIMIT
    ),
    ("token create", "config_file"): Case(
        ("--agent", "a", "token", "create", "--memory", "m", "--config", "{}"), limit=CONFIG_LIMIT
    ),
    ("connect", "file_"): Case(
        ("--root", "{root}", "connect", "cursor", "--write", "--file", "{}"), limit=connect.CONFIG_LIMIT
    ),
    ("token list", "tokens_file"): Case(("token", "list", "--tokens", "{}"), limit=TOKENS_LIMIT),
    ("token revoke", "tokens_file"): Case(("token", "revoke", "0123456789ab", "--tokens", "{}"), limit=TOKENS_LIMIT),
}
FOLDER_ARGUMENTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("init", "directory"): ("init", "{}"),
    ("import locomo", "target"): ("import", "locomo", "{locomo}", "{}"),
    ("serve", "memories"): ("serve", "--port", "0", "--memory", "team={}"),
    ("*", "root"): ("--root", "{}", "note", "x"),
}


def commands(group: click.Group = cli, prefix: str = ""):
    for name in group.list_commands(None):  # type: ignore[arg-type]
        command = group.get_command(None, name)  # type: ignore[arg-type]
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_the_tables_name_every_file_and_folder_argument():
    files, folders = set(), set()
    for name, command in commands():
        for param in command.params:
            label = f"{param.metavar or ''} {param.name}".upper()
            if param.name == "root":
                folders.add(("*", "root"))
            elif re.search(r"FILE|EVALSET", label):
                files.add((name, param.name))
            elif re.search(r"\bDIR\b|DIRECTORY|=PATH", label) or (name, param.name) == ("import locomo", "target"):
                folders.add((name, param.name))
    assert files == set(FILE_ARGUMENTS)
    assert folders == set(FOLDER_ARGUMENTS)


@pytest.fixture
def world(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text("---\ntitle: A\n---\nalpha\n")
    evalset = tmp_path / "eval.jsonl"
    evalset.write_text('{"question": "alpha?", "gold": [{"text": "alpha"}]}\n')
    locomo_file = tmp_path / "locomo.json"
    locomo_file.write_text("[]")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    return {
        "root": str(memory.root),
        "evalset": str(evalset),
        "locomo": str(locomo_file),
        "out": str(tmp_path / "out"),
        "tokens": str(tmp_path / "tokens.json"),
        "fifo": str(fifo),
        "zero": "/dev/zero",
        "folder": str(tmp_path / "folder"),
        "tmp": tmp_path,
    }


def run(argv: list[str], stdin=subprocess.DEVNULL, *, process: bool = False) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`; a test that gives it a FIFO takes `deadline`, so that a missed
    refusal fails instead of hanging); as a real `fsmem` process with `process`, where the command would keep
    running (`serve`) or stdin is endless, as for every command that serves when nothing stops it."""
    env = without_fsmem()
    if process or "serve" in argv:
        return cli_runner.real(argv, text=True, env=env, stdin=stdin, timeout=30)
    return cli_runner.run(argv, text=True, env=env, stdin=stdin)


def refused_at_once(done: subprocess.CompletedProcess, says: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("fsmem: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("fsmem: error: "), done.stderr
    assert says in lines[0] and "Traceback" not in done.stderr
    assert done.stdout == ""


def fill(argv: tuple[str, ...], world: dict, path: str) -> list[str]:
    return [part.replace("{}", path).format(**{k: v for k, v in world.items() if isinstance(v, str)}) for part in argv]


@pytest.mark.parametrize("argument", sorted(FILE_ARGUMENTS), ids=" ".join)
def test_a_fifo_a_device_a_folder_and_a_file_too_large_are_refused_at_once(world, argument, deadline):
    case = FILE_ARGUMENTS[argument]
    for kind in ("fifo", "zero", "folder"):
        refused_at_once(run(fill(case.argv, world, world[kind])), SAY[kind])
    if case.limit is not None:
        large = world["tmp"] / f"large-{argument[1]}"
        with open(large, "wb") as handle:
            handle.truncate(case.limit + 1)  # sparse: no disk used
        refused_at_once(run(fill(case.argv, world, str(large))), SAY["large"])


@pytest.mark.parametrize("argument", sorted(FOLDER_ARGUMENTS), ids=" ".join)
def test_a_folder_argument_that_is_a_fifo_or_a_device_is_refused(world, argument, deadline):
    for kind in ("fifo", "zero"):
        done = run(fill(FOLDER_ARGUMENTS[argument], world, world[kind]))
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (kind, done.stderr)
        assert "is not a folder" in done.stderr or SAY[kind] in done.stderr, done.stderr


def test_a_process_refuses_as_the_run_here(world, deadline):
    """The `fsmem` script, a real process, refuses a FIFO, a device and a folder with the same bytes."""
    env = without_fsmem()
    lines = [
        fill(FILE_ARGUMENTS[argument].argv, world, world[kind])
        for argument in (("recall", "seen"), ("import locomo", "file"), ("token list", "tokens_file"))
        for kind in ("fifo", "zero", "folder")
    ]
    for argv in [*lines, fill(FOLDER_ARGUMENTS["*", "root"], world, world["fifo"])]:
        signal.alarm(10)  # each pair of runs: 10 s
        cli_runner.same_as_a_process(argv, env=env)


def test_standard_input_is_read_with_a_cap(world):
    with open("/dev/zero", "rb") as zero:  # endless: a real process's stdin
        refused_at_once(run(["--root", world["root"], "note", "-"], stdin=zero, process=True), "larger than")
    with open("/dev/zero", "rb") as zero:
        refused_at_once(run(["--root", world["root"], "write", "topics/b.md"], stdin=zero, process=True), "larger than")
    with open("/dev/zero", "rb") as zero:
        refused_at_once(
            run(["--root", world["root"], "recall", "alpha", "--seen-file", "-"], stdin=zero, process=True),
            "larger than",
        )
    assert not (Path(world["root"]) / "topics" / "b.md").exists()
    assert STDIN_LIMIT >= 16 * outside_files.MiB


def test_dash_reads_standard_input_where_the_command_says_so(world):
    seen = subprocess.run(
        [FSMEM, "--root", world["root"], "recall", "alpha", "--seen-file", "-", "--json"],
        input="we already talked about alpha",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert seen.returncode in (0, 1), seen.stderr
    assert json.loads(seen.stdout)["skipped"] is not None


@pytest.fixture
def deadline():
    """A call that blocks (an open of a FIFO) fails the test after 10 s instead of hanging the suite."""

    def expire(signum, frame):
        raise TimeoutError("blocked for 10 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_the_library_refuses_alike(world, tmp_path, deadline):
    memory = Memory(world["root"])
    for path in (world["fifo"], "/dev/zero", world["folder"]):
        with pytest.raises(InvalidArgument):
            harness.evaluate(memory, path)
        with pytest.raises(InvalidArgument):
            locomo.import_locomo(path, tmp_path / "out")
    with pytest.raises(NotFound, match="does not exist"):
        harness.load_evalset(tmp_path / "missing.jsonl")
    with pytest.raises(InvalidArgument, match="is a FIFO"):
        harness.plot(None, world["fifo"])  # type: ignore[arg-type]  # refused before the report is looked at


def test_a_regular_file_within_the_cap_reads_as_before(tmp_path):
    file = tmp_path / "f.txt"
    file.write_bytes("\ufeffhé\n".encode())
    assert outside_files.read_text(file, what="the file", limit=100) == "hé\n"
    file.write_bytes(b"\xff")
    with pytest.raises(InvalidArgument, match="not UTF-8"):
        outside_files.read_text(file, what="the file", limit=100)
    assert outside_files.read_bytes(file, what="the file", limit=1) == b"\xff"
