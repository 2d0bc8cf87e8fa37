"""`fsmem serve` answers one-shot CLI reads of its memories over the same owner-only socket as `fsmem watch`
(`fsmem.server.oneshot`): the walk's bytes, only reads, and the socket gone with the server.

The servers, and the commands that ask them, are real processes forked from a parent that has imported fsmem and
the web stack (tests/preloaded.py), but for the first test's server, started as a user starts it; the walks they are compared
with run through the CLI's entry point here (test_rendezvous.run)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import preloaded
import pytest
from child_env import without_fsmem
from conftest import configure
from preloaded import FSMEM
from test_rendezvous import CONNECT, NOW, READS, _as_nobody, _ask_by_hand, both, run, zephyr_memory

from fsmem.cli import rendezvous as rv
from fsmem.store.kill_points import PAUSE_ENV

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'fsmem[mcp]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install 'fsmem[server]'")

pytestmark = pytest.mark.slow
TIMEOUT = 60.0


class Server:
    """`fsmem serve` of one memory on a free port, in a process forked from the preloaded parent, its JSON log lines
    read from the file its stderr goes to."""

    def __init__(self, root: Path, tokens: Path, env: dict | None = None, started: bool = False):
        environment = without_fsmem()
        environment.update(FSMEM_NOW=NOW, **(env or {}))
        self._said = tempfile.TemporaryFile()
        args = ["serve", "--memory", f"team={root}", "--port", "0", "--tokens", str(tokens)]
        if started:  # as a user starts it
            self.process: subprocess.Popen | preloaded.Child = subprocess.Popen(
                [FSMEM, *args], stderr=self._said, stdout=subprocess.DEVNULL, env=environment
            )
        else:
            self.process = preloaded.start(args, env=environment, stderr=self._said.fileno())
        deadline = time.monotonic() + TIMEOUT  # listening: its signal handlers are in place (SIGTERM stops it)
        while not any(line.get("event") == "listening" for line in self.lines):
            assert time.monotonic() < deadline and self.process.poll() is None, (
                f"the server did not start: {self.lines}"
            )
            time.sleep(0.05)

    @property
    def lines(self) -> list[dict]:
        lines = []
        for line in os.pread(self._said.fileno(), 1 << 22, 0).decode("utf-8", "replace").splitlines(keepends=True):
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"raw": line})
        return lines

    def said(self, words: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for line in self.lines:
                if line.get("event") == "one-shot reads" and words in line["message"]:
                    return line["message"]
            time.sleep(0.02)
        raise AssertionError(f"the server never said {words!r}: {self.lines}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(TIMEOUT)


def gone(path: str) -> None:
    """Wait for the answering process to remove its socket (it may finish after the server has exited)."""
    deadline = time.monotonic() + TIMEOUT
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(path)


@pytest.fixture
def memory(tmp_path):
    return zephyr_memory(tmp_path)


def test_serve_answers_one_shot_reads_as_the_walk_does_and_takes_its_socket_away(memory, tmp_path):
    root = memory.root
    assert run(root, "ls")[0] == 2  # FSMEM_SOCKET=require: nothing answers before the server runs
    server = Server(root, tmp_path / "tokens.json", started=True)
    try:
        path = server.said("answering one-shot reads on ").split(" on ", 1)[1]
        assert path == rv.socket_path(os.path.realpath(root))
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600 and stat.S_ISSOCK(os.lstat(path).st_mode)
        assert stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode) == 0o700
        for args in READS:
            both(root, *args)
        (root / "topics/billing.md").write_text("# Billing\n\n- the zephyr plan, renamed\n")  # seen at once
        assert b"renamed" in both(root, "grep", "renamed")[1]
        terse = both(root, "--agent", "terse", "ls", env={"FSMEM_NOW": "2029-01-01T00:00:00+00:00"})
        assert terse == both(root, "ls", env={"FSMEM_AGENT": "terse", "FSMEM_NOW": "2029-01-01T00:00:00+00:00"})
        assert run(root, "rm", "topics/people.md")[0] == 0  # a write runs in the client, as before
        assert _ask_by_hand(path, root, ["rm", "topics/billing.md"]) == rv.REFUSED
        assert (root / "topics/billing.md").exists() and not (root / "topics/people.md").exists()
    finally:
        assert server.stop() == 0
    gone(path)  # with the server: a command walks again
    assert run(root, "ls")[0] == 2 and run(root, "ls", mode="auto") == run(root, "ls", mode="off")


def test_a_killed_server_leaves_no_answering_process(memory, tmp_path):
    server = Server(memory.root, tmp_path / "tokens.json")
    path = server.said("answering one-shot reads on ").split(" on ", 1)[1]
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(TIMEOUT)
    gone(path)  # its stdin ended: it stops and removes its socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with pytest.raises(OSError):
            sock.connect(path)


def _answerer(server: Server) -> int:
    """The pid of the server's answering process (`python -m fsmem.cli.answerer ROOT`)."""
    pid = server.process.pid
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if "fsmem.cli.answerer" in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"):
            return int(child)
    raise AssertionError("the server started no answering process")


def test_a_server_stopped_while_its_answering_process_warms_up_stops_that_one_too(memory, tmp_path):
    """The answering process held in its warm-up (FSMEM_PAUSE_AT) ends with the server's SIGTERM, there, and
    says so in the server's log before its "stopped"; no socket is made."""
    root = memory.root
    run(root, "ls", mode="off")  # a cache for the answering process to catch up
    server = Server(root, tmp_path / "tokens.json", env={PAUSE_ENV: "warm"}, started=True)
    try:
        answerer = _answerer(server)
        deadline = time.monotonic() + TIMEOUT
        while not any(f"pid {answerer})" in line.get("raw", "") for line in server.lines):
            assert time.monotonic() < deadline, server.lines
            time.sleep(0.02)
    finally:
        assert server.stop() == 0
    events = [line.get("event") or line.get("message") for line in server.lines]
    assert events[-2:] == ["one-shot reads", "stopped"], server.lines
    assert server.lines[-2]["message"] == "stopped by SIGTERM while warming up", server.lines
    assert not Path(f"/proc/{answerer}").exists() or Path(f"/proc/{answerer}/stat").read_text().split()[2] == "Z"
    assert not os.path.lexists(rv.socket_path(os.path.realpath(root)) or "")


def test_commands_walk_once_the_answering_process_is_gone_and_say_so_under_require(memory, tmp_path):
    root = memory.root
    server = Server(root, tmp_path / "tokens.json")
    try:
        path = server.said("answering one-shot reads on ").split(" on ", 1)[1]
        os.kill(_answerer(server), signal.SIGKILL)  # its socket stays behind, stale: refused at once
        assert os.path.exists(path)
        for args in READS[:3]:
            assert run(root, *args, mode="auto") == run(root, *args, mode="off")
        code, _, err = run(root, "ls", mode="require")
        assert code == 2 and b"no running fsmem answered" in err, err
    finally:
        server.stop()


def test_another_user_cannot_reach_the_servers_answering_process():
    prefix = _as_nobody()
    base = Path(tempfile.mkdtemp(prefix="oneshot-other-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)  # others may enter the memory's folders, as on a shared machine
        memory = zephyr_memory(base)
        (memory.root / ".fsmem").mkdir(exist_ok=True)
        os.chmod(memory.root / ".fsmem", 0o755)
        server = Server(memory.root, base / "tokens.json")
        try:
            path = server.said("answering one-shot reads on ").split(" on ", 1)[1]
            tried = subprocess.run([*prefix, sys.executable, "-c", CONNECT, path], capture_output=True, text=True)
            assert tried.stdout.split()[:1] == ["refused"], tried  # the folder's mode: EACCES
            os.chmod(os.path.dirname(path), 0o711)  # even where the folder and the socket let it through,
            os.chmod(path, 0o666)
            tried = subprocess.run([*prefix, sys.executable, "-c", CONNECT, path], capture_output=True, text=True)
            assert tried.stdout.strip() == "dropped", tried  # the answering process checks the peer's uid
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o600)
            both(memory.root, "ls")
        finally:
            assert server.stop() == 0
    finally:
        shutil.rmtree(base)


def test_fsmem_socket_off_starts_no_answering_process(memory, tmp_path):
    server = Server(memory.root, tmp_path / "tokens.json", env={rv.MODE_ENV: "off"})
    try:
        assert not any(line.get("event") == "one-shot reads" for line in server.lines)
        assert not os.path.exists(rv.socket_path(os.path.realpath(memory.root)) or "")
    finally:
        assert server.stop() == 0


def test_a_kept_memory_is_let_go_when_fsmem_yaml_changes(memory, tmp_path):
    """The answering process keeps the memories requests open (`kept_memories.Kept`) only while fsmem.yaml stays
    as it was: a budget changed between two commands is the next command's budget."""
    root = memory.root
    config = root / "fsmem.yaml"
    past = time.time() - 3600
    os.utime(config, (past, past))  # old enough to be kept
    server = Server(root, tmp_path / "tokens.json")
    try:
        server.said("answering one-shot reads on ")
        wide = both(root, "--agent", "terse", "ls")
        assert b"[files 1-1 of " not in wide[1]
        configure(root, {"budgets": {"agents": {"terse": {"max_results": 1}}}})
        os.utime(config, (past + 1, past + 1))  # changed, and old enough again
        narrow = both(root, "--agent", "terse", "ls")
        assert b"[files 1-1 of " in narrow[1]
    finally:
        assert server.stop() == 0


def test_a_kept_memory_is_let_go_when_fsmem_yaml_changes_with_its_size_and_mtime_put_back(memory):
    """An edit of the same size whose mtime was put back (`cp -p`, `rsync -t`) moves fsmem.yaml's change time
    alone: the kept memory is let go too, so the next command's budget is the file's, as a walk reads it."""
    from fsmem.cli.kept_memories import Kept

    config = memory.root / "fsmem.yaml"
    configure(memory.root, {"budgets": {"default": {"max_results": 10}}})
    past = time.time() - 3600
    os.utime(config, (past, past))  # old enough to be kept
    kept = Kept()
    try:
        assert kept.open(str(memory.root), None).budget.max_results == 10
        before = os.stat(config)
        config.write_text(config.read_text().replace("max_results: 10", "max_results: 20"))
        os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(config).st_size == before.st_size
        assert kept.open(str(memory.root), None).budget.max_results == 20
    finally:
        kept.close()
