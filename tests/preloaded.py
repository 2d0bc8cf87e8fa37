"""Real `fsmem` processes forked from a parent that has imported fsmem, its server and the MCP SDK once.

A server test's subject is what the process does (its sockets, its signals, its log, its workers, its exit
code), not the interpreter's start, which costs `fsmem serve` or `fsmem mcp` two seconds of CPU for the MCP SDK's
and uvicorn's imports alone. `spawn` asks a parent started once per pytest process (this module run as a script)
to fork a child: the child takes the given stdin, stdout and stderr (passed over a Unix socket), folder,
environment and `sys.argv`, and runs `fsmem.cli.main()` as the `fsmem` script does, then exits as a process
exits (atexit, threads joined). It is a real process with a pid of its own: signals reach it, `/proc` shows it,
its exit code is reported by the parent. `Child` answers what `subprocess.Popen` answers (`pid`, `poll`, `wait`,
`send_signal`, `kill`, `stderr`). A test that is about the start itself runs `fsmem` as a process of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

FSMEM = str(Path(sys.executable).with_name("fsmem"))
PRELOAD = ("fsmem.cli", "fsmem.cli.app", "fsmem.server.app", "fsmem.server.serving", "fsmem.agents.mcp_server")
_parent: dict[str, Any] = {}
_starting = threading.Lock()


def spawn(
    args: list[str], *, env: dict[str, str], cwd: str | None = None, stdin: int | None = None, stderr_pipe: bool = True
) -> Child:
    """`fsmem ARGS` as a child of the preloaded parent: stdin and stdout /dev/null (or the descriptor `stdin`),
    stderr a pipe (`Child.stderr`, text) unless `stderr_pipe` is false (then /dev/null)."""
    path = _socket_path()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    devnull = os.open(os.devnull, os.O_RDWR)
    read_end, write_end = os.pipe() if stderr_pipe else (None, devnull)
    try:
        request = json.dumps({"argv": [FSMEM, *args], "env": env, "cwd": cwd or os.getcwd()}).encode() + b"\n"
        fds = [devnull if stdin is None else stdin, devnull, write_end]
        socket.send_fds(conn, [request], fds)
    finally:
        os.close(devnull)
        if write_end != devnull:
            os.close(write_end)
    return Child(conn, None if read_end is None else os.fdopen(read_end, encoding="utf-8", errors="replace"))


class Child:
    """A forked `fsmem`, as `subprocess.Popen` shows a process: its exit code is the parent's report."""

    def __init__(self, conn: socket.socket, stderr: IO[str] | None):
        self.conn, self.stderr = conn, stderr
        self.returncode: int | None = None
        self._lines = conn.makefile("r", encoding="utf-8")
        self.pid = int(json.loads(self._lines.readline())["pid"])
        self._ended = threading.Event()
        threading.Thread(target=self._await_exit, daemon=True).start()

    def _await_exit(self) -> None:
        line = self._lines.readline()
        self.returncode = int(json.loads(line)["code"]) if line else -9
        self.conn.close()
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(FSMEM, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if not self._ended.is_set():
            os.kill(self.pid, number)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)


def _socket_path() -> str:
    """The preloaded parent's socket, the parent started on first use (one per pytest process)."""
    with _starting:
        proc = _parent.get("proc")
        if proc is None or proc.poll() is not None:
            import tempfile

            folder = tempfile.mkdtemp(prefix="fsmem-preloaded-")
            path = os.path.join(folder, "parent.sock")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
            proc = subprocess.Popen([sys.executable, __file__, path], stdin=subprocess.PIPE, env=env)
            deadline = time.monotonic() + 120
            while not os.path.exists(path):  # the parent binds its socket once its imports are done
                assert proc.poll() is None and time.monotonic() < deadline, "the preloaded parent did not start"
                time.sleep(0.02)
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
def _serve(path: str) -> list[Any] | None:
    """Fork a child per request; report each child's exit code on its request's connection. Returns in a child
    (the request it is to run); in the parent only when pytest has gone (its stdin closed)."""
    import importlib
    import selectors

    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # the socket exists only once it listens
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(sys.stdin, selectors.EVENT_READ, "pytest")
    children: dict[int, socket.socket] = {}
    while True:
        for key, _mask in selector.select(0.02):
            if key.data == "pytest":
                if not os.read(sys.stdin.fileno(), 1):
                    return None
                continue
            conn, _ = listener.accept()
            message, fds, _flags, _address = socket.recv_fds(conn, 1 << 20, 3)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                selector.close()
                listener.close()
                for other in children.values():
                    other.close()
                conn.close()
                return [json.loads(message), fds]
            for fd in fds:
                os.close(fd)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            try:
                conn.sendall(json.dumps({"code": code}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


def _run_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the child: the request's streams, folder, environment and command line, then the `fsmem` script."""
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

    main()


def launcher(args: list[str]) -> list[str]:
    """A command line whose process hands its own stdin, stdout and stderr, folder and environment to a child
    `fsmem ARGS` of the preloaded parent, passes SIGTERM and SIGINT on to it and exits with its code: for a
    client that starts the server itself (the MCP SDK's stdio client), at the cost of an interpreter without
    `site` (some 20 ms)."""
    return [sys.executable, "-S", __file__, "--launch", _socket_path(), *args]


def _launch(path: str, args: list[str]) -> int:
    import signal

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps({"argv": [FSMEM, *args], "env": dict(os.environ), "cwd": os.getcwd()}).encode() + b"\n"
    socket.send_fds(conn, [request], [0, 1, 2])
    child = Child(conn, None)
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
