"""`fsmem` commands as real processes forked from one preloaded parent: a process each, SIGKILLed for real where a
test kills it, without an interpreter start and fsmem's imports each (some 0.3-0.5 s of CPU a command).

The parent (`Parent`) is a Python that imported fsmem's CLI and the modules its commands load, and does nothing
else: no thread, no memory opened, no test framework, no fsmem state. For each command it forks; the child takes
the command's whole environment, working folder, stdin, stdout and stderr (files), and a session of its own (a
kill of its process group, as tests/kill_scenario.py's git wrapper sends one, reaches it and the git it runs,
never the parent), sets `sys.argv` as the `fsmem` script does and calls `fsmem.cli.main()`; it ends as that
script's process ends (the interpreter's exit: exit functions run, streams flushed). The parent reports the
child's pid when it starts and its wait status when it ends, which `Child.wait` turns into a return code as
`subprocess` gives it (-9: SIGKILL).

What a child shares with its parent and a fresh `fsmem` process does not: the imported modules (no fsmem module
reads the environment when it is imported), the hash seed, and its standard streams' encoding (the parent's
locale: the tests' environment). Tests whose subject is the interpreter's start (the imports a command loads, the
arguments' bytes) run a fresh process (`subprocess`, tests/cli_runner.py's `real`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

FSMEM = str(Path(sys.executable).with_name("fsmem"))

# What `fsmem` note, sync, consolidate and check import (a child imports anything else itself, as a process does).
PRELOAD = tuple(
    """
fsmem.arguments
fsmem.budget
fsmem.cli.app fsmem.cli.generated fsmem.cli.history fsmem.cli.inputs fsmem.cli.options fsmem.cli.printing
fsmem.cli.rendezvous
fsmem.config.check fsmem.config.parse fsmem.config.sections
fsmem.consolidate.apply fsmem.consolidate.dates fsmem.consolidate.digest fsmem.consolidate.digest_run
fsmem.consolidate.documents fsmem.consolidate.extractors fsmem.consolidate.gather fsmem.consolidate.history
fsmem.consolidate.index_md fsmem.consolidate.ledger fsmem.consolidate.notes fsmem.consolidate.observations
fsmem.consolidate.plan fsmem.consolidate.relink fsmem.consolidate.report fsmem.consolidate.settings
fsmem.consolidate.subjects
fsmem.errors
fsmem.faces
fsmem.format.facts fsmem.format.frontmatter fsmem.format.history_file fsmem.format.links fsmem.format.markdown
fsmem.format.notes fsmem.format.portable fsmem.format.secrets fsmem.format.simple_fields fsmem.format.valid_time
fsmem.history.diff3 fsmem.history.git fsmem.history.health fsmem.history.host_rules fsmem.history.host_settings
fsmem.history.incoming fsmem.history.journal fsmem.history.merge fsmem.history.merge_facts
fsmem.history.merge_history_file fsmem.history.recovery fsmem.history.remote fsmem.history.repo
fsmem.history.sync fsmem.history.trees fsmem.history.trust fsmem.history.trust_config fsmem.history.trust_record
fsmem.history.worktree
fsmem.hooks.claude_code
fsmem.importers.notes
fsmem.memory
fsmem.names
fsmem.operations.core fsmem.operations.history fsmem.operations.transaction fsmem.operations.transcripts
fsmem.operations.upkeep fsmem.operations.writes
fsmem.query.as_of fsmem.query.fact_check fsmem.query.links fsmem.query.reading
fsmem.spec.commands fsmem.spec.operations fsmem.spec.params
fsmem.store.beneath fsmem.store.cache fsmem.store.catalog fsmem.store.feed fsmem.store.feed_check
fsmem.store.fields fsmem.store.files fsmem.store.freshness fsmem.store.host fsmem.store.inotify
fsmem.store.kill_points fsmem.store.logs fsmem.store.meta fsmem.store.names fsmem.store.note_status
fsmem.store.observed fsmem.store.outside_files fsmem.store.paths fsmem.store.progress fsmem.store.root
fsmem.store.scope fsmem.store.selection fsmem.store.superseded_lines fsmem.store.template fsmem.store.walk
fsmem.store.workers fsmem.store.writing
fsmem.tokens
apsw importlib.metadata rapidfuzz sqlite3 tiktoken
""".split()
)

# The parent: `python -c PARENT FSMEM MODULE...`. Requests come as JSON lines on fd 0 and answers go out on fd 1,
# both read and written raw (os.read, os.write), so that sys.stdin and sys.stdout, which a child inherits bound
# to fds 0 and 1, hold nothing buffered of them.
PARENT = r"""
import gc, importlib, json, os, sys, time

script, *modules = sys.argv[1:]
for name in modules:
    importlib.import_module(name)
gc.freeze()  # the modules' objects are never collected: a child's collections leave their pages shared


def child(request):
    os.setsid()
    for fd, path, flags in (
        (0, request["stdin"] or os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    if request["cwd"]:
        os.chdir(request["cwd"])
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(script)  # as the script's interpreter has it
    from fsmem.cli import main

    sys.exit(main())  # the script's end: the exception leaves this process as it leaves the script's


pending = b""
while True:
    while b"\n" not in pending:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            sys.exit(0)
        pending += chunk
    line, pending = pending.split(b"\n", 1)
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    os.write(1, f"pid {pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(1, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
"""


class Parent:
    """One preloaded parent; commands run one at a time."""

    def __init__(self, env: Mapping[str, str], preload: Sequence[str] = PRELOAD):
        self.folder = Path(tempfile.mkdtemp(prefix="forked-fsmem-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PARENT, FSMEM, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env),
            cwd=self.folder,
        )
        self.pending = b""
        self.count = 0
        self.running: Child | None = None  # the child started last, until its end is read
        atexit.register(self.close)

    def start(
        self,
        args: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
    ) -> Child:
        """Fork a child running `fsmem ARGS` with exactly the environment `env`; returns once it runs."""
        if self.running is not None and self.running.ended is None:  # left running by a test that failed
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.running.pid, signal.SIGKILL)
            self.running.wait()
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        stdin = None
        if input is not None:
            stdin = self.folder / f"{self.count}.in"
            stdin.write_text(input, encoding="utf-8")
        request = {
            "args": [os.fspath(arg) for arg in args],
            "env": dict(env),
            "cwd": None if cwd is None else os.fspath(cwd),
            "stdin": None if stdin is None else str(stdin),
            "stdout": str(out),
            "stderr": str(err),
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        word, pid = self._line(None).split()
        assert word == "pid", word
        self.running = Child(self, int(pid), [FSMEM, *request["args"]], out, err, stdin)
        return self.running

    def run(
        self,
        args: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None = None,
        input: str | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`subprocess.run([fsmem, *args], capture_output=True, text=True, env=env, start_new_session=True)`."""
        return self.start(args, env=env, cwd=cwd, input=input).wait(timeout)

    def _line(self, timeout: float | None) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the preloaded fsmem parent ended (exit {self.proc.wait()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class Child:
    """A running command: its pid (and process group: the child leads a session of its own)."""

    def __init__(self, parent: Parent, pid: int, args: list[str], out: Path, err: Path, stdin: Path | None):
        self.parent, self.pid, self.args = parent, pid, args
        self.out, self.err, self.stdin = out, err, stdin
        self.returncode: int | None = None
        self.ended: str | None = None  # the parent's report of its end, once read

    def poll(self) -> int | None:
        """Its return code if it ended, else None (as `Popen.poll`)."""
        if self.ended is None:
            try:
                self.ended = self.parent._line(0)
            except TimeoutError:
                return None
        return int(self.ended.split()[1])

    def wait(self, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Its end, as `subprocess.run(..., text=True)` answers (after a timeout, its process group is killed and
        `subprocess.TimeoutExpired` raised)."""
        try:
            line = self.ended or self.parent._line(timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.ended = self.parent._line(None)
            raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        self.ended = line
        word, code = line.split()
        assert word == "exit", word
        self.returncode = int(code)
        stdout = _decoded(self.out.read_bytes().decode("utf-8"))
        stderr = _decoded(self.err.read_bytes().decode("utf-8", "replace"))
        for path in (self.out, self.err, self.stdin):
            if path is not None:
                path.unlink(missing_ok=True)
        return subprocess.CompletedProcess(self.args, self.returncode, stdout, stderr)


def _decoded(text: str) -> str:
    """Universal newlines, as `subprocess.run(text=True)` reads a pipe."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


_shared: list[Parent] = []


def shared() -> Parent:
    """This process's parent (started on first use, in this environment less FSMEM_*, GIT_* and KILLGIT_*)."""
    if not _shared or _shared[0].proc.poll() is not None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_", "KILLGIT_"))}
        _shared[:] = [Parent(clean)]
    return _shared[0]
