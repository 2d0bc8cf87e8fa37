"""One-shot reads answered by a running `fsmem watch` over its local socket (`fsmem.cli.rendezvous`, `answering`):
the same bytes as the walk, for every change finished before the command started; fallback to the walk when no
watcher runs, when it hangs, when no socket can be made; another user can neither ask nor answer.

The watcher and every command asked of it, or left to choose, are real `fsmem` processes, forked from a parent
that has imported fsmem (tests/preloaded.py: a process as the script runs it, without an interpreter's start); the
walk each answer is compared with runs through the CLI's entry point in this process (tests/cli_runner.py). The
first reads of each kind are also walked by a process started as a user starts it, and the watcher of one test is
such a process, which must give the same bytes. A watcher's stderr goes to a file, read as it grows."""

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
import threading
import time
from pathlib import Path

import preloaded
import pytest
from cli_runner import run as run_here
from conftest import configure, write_file
from mounts import read_only

from fsmem import Memory
from fsmem.cli import rendezvous as rv
from fsmem.store.kill_points import PAUSE_ENV

FSMEM = str(Path(sys.executable).with_name("fsmem"))
TIMEOUT = 30.0
NOW = "2026-03-01T12:00:00+00:00"


def run(
    root: Path,
    *args: str,
    mode: str = "require",
    env: dict | None = None,
    cwd: Path | None = None,
    stdin=b"",
    here: bool | None = None,
    started: bool = False,
):
    """(exit code, stdout, stderr) of `fsmem ARGS` at `root`, asked of the watcher (`require`) or walked (`off`).
    A walk runs here (the CLI's entry point, which asks no watcher) unless `here` is False; any other command is a
    process, forked from the preloaded parent, or started as a user starts it (`started`)."""
    environment = {**os.environ, "FSMEM_NOW": NOW, rv.MODE_ENV: mode, **(env or {})}
    if mode == "auto":
        del environment[rv.MODE_ENV]
    if here is None:
        here = mode == "off"
    if here:
        assert mode == "off", "only a walk runs here: the CLI's entry point asks no watcher"
        done = run_here(args, cwd=cwd or root, env=environment, input=stdin)
    elif started:
        done = subprocess.run(
            [FSMEM, *args], cwd=cwd or root, env=environment, input=stdin, capture_output=True, timeout=TIMEOUT
        )
    else:
        done = preloaded.run(args, cwd=cwd or root, env=environment, input=stdin, text=False, timeout=TIMEOUT)
    return done.returncode, done.stdout, done.stderr


def _put_back(log: Path, before: bytes | None) -> None:
    if before is None:
        log.unlink(missing_ok=True)
    else:
        log.write_bytes(before)


def both(root: Path, *args: str, as_a_process: bool = False, **kwargs):
    """The command asked of the watcher and walked, which must be the same bytes; the answer. Each runs on the
    same retrieval log (a search's usage boost reads it, and every read adds to it). `as_a_process`: the walk is
    also a process's, which must give the same bytes as the walk here."""
    log, index = root / ".fsmem/logs/retrieval.jsonl", root / "INDEX.md"
    for _ in range(3):
        before = log.read_bytes() if log.exists() else None
        index_before = index.read_bytes() if index.exists() else None
        asked = run(root, *args, mode="require", **kwargs)
        _put_back(log, before)
        if as_a_process:
            apart = run(root, *args, mode="off", here=False, started=True, **kwargs)
            _put_back(log, before)
        walked = run(root, *args, mode="off", **kwargs)
        if (index.read_bytes() if index.exists() else None) == index_before:
            break  # the watcher did not regenerate INDEX.md (a file the answer lists) between the two
    assert asked == walked, (args, asked, walked)
    if as_a_process:
        assert apart == walked, (args, apart, walked)
    return asked


class Watcher:
    """`fsmem watch` in a process of its own (forked from the preloaded parent, or started as a user starts it: `started`),
    answering once its socket is there; what it says on stderr goes to a file."""

    def __init__(self, root: Path, env: dict | None = None, wait: bool = True, started: bool = False):
        self.root = root
        self._said = tempfile.TemporaryFile()
        args = ["--root", str(root), "watch", "--settle", "0.1"]
        environment = {**os.environ, **(env or {})}
        if started:
            self.process: subprocess.Popen | preloaded.Child = subprocess.Popen(
                [FSMEM, *args], env=environment, stdout=subprocess.DEVNULL, stderr=self._said
            )
        else:
            self.process = preloaded.start(args, env=environment, stderr=self._said.fileno())
        if wait:
            self.wait_for("answering one-shot reads on ")

    @property
    def lines(self) -> list[str]:
        return os.pread(self._said.fileno(), 1 << 20, 0).decode("utf-8", "replace").splitlines(keepends=True)

    def wait_for(self, words: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            ended = self.process.poll() is not None
            found = [line for line in self.lines if words in line]
            if found:
                return found[0]
            if ended:
                break
            time.sleep(0.02)
        raise AssertionError(f"the watcher never said {words!r}: {''.join(self.lines)}")

    def socket(self) -> str:
        return self.wait_for("answering one-shot reads on ").split(" on ", 1)[1].strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            self.process.wait(TIMEOUT)
        self._said.close()


def zephyr_memory(base: Path) -> Memory:
    """A memory of three files under `base` that mention zephyr (test_server_oneshot.py asks the same reads)."""
    memory = Memory.init(base / "mem")
    write_file(
        memory.root, "topics/billing.md", "---\ntitle: Billing\ntags: [money]\n---\n# Billing\n\n- the zephyr plan\n"
    )
    write_file(memory.root, "topics/people.md", "---\ntitle: People\n---\n# People\n\n- Ada runs zephyr ops\n")
    write_file(memory.root, "sessions/2026-02-01.md", "# Session\n\n- asked about zephyr pricing\n")
    return memory


@pytest.fixture
def memory(tmp_path):
    return zephyr_memory(tmp_path)


@pytest.fixture
def watcher(memory):
    started = Watcher(memory.root)
    yield started
    started.stop()


READS = [
    ("ls", "--max-results", "3"),
    ("grep", "-i", "ZEPHYR", "--json"),
    ("grep", "zephyr", "--max-tokens", "30"),
    ("search", "zephyr pricing", "--json"),
    ("read", "topics/billing.md"),
    ("context", "--max-tokens", "120"),
    ("grep", "nothing-matches-this"),  # exit 1
]
ODD = [("read", "topics/none.md"), ("ls", "--no-such-option")]  # an error (exit 2), click's usage error


@pytest.mark.slow
def test_every_read_through_the_watcher_is_the_walks_answer_after_every_kind_of_change(memory):
    watcher = Watcher(memory.root, started=True)  # as a user starts it
    try:
        _every_read(memory.root)
    finally:
        watcher.stop()


def _every_read(root: Path) -> None:
    walked_apart: set[str] = set()  # the first read of each command is also walked by a process
    for args in READS + ODD:
        both(root, *args, as_a_process=args[0] not in walked_apart)
        walked_apart.add(args[0])
    # changes through files: an edit in place, a save by rename, a delete, a new folder
    (root / "topics/billing.md").write_text("---\ntitle: Billing\n---\n# Billing\n\n- the zephyr plan, renamed\n")
    fresh = root / "topics/.people.md.swp"
    fresh.write_text("# People\n\n- Grace now runs zephyr ops\n")
    os.replace(fresh, root / "topics/people.md")
    (root / "sessions/2026-02-01.md").unlink()
    write_file(root, "new/deep/zephyr.md", "# Zephyr\n\n- a zephyr in a new folder\n")
    for args in READS:
        both(root, *args)
    # and through fsmem, with its history
    assert run(root, "note", "zephyr note through fsmem", mode="off")[0] == 0
    assert run(root, "rm", "new/deep/zephyr.md", mode="off")[0] == 0
    for args in READS:
        both(root, *args)
    assert "Grace" in both(root, "grep", "Grace")[1].decode()


WORDS = ["zephyr", "ledger", "quartz", "marlin", "tundra"]
NAMES = [f"{folder}/{name}.md" for folder in ("topics", "notes", "notes/deep") for name in ("a", "b", "c", "A")]
# `make fuzz` (FSMEM_FUZZ_SCALE) multiplies the machine's examples, for a longer hunt
MACHINE_EXAMPLES = 3 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@pytest.mark.slow
def test_random_changes_through_files_and_fsmem_then_every_read_both_ways(tmp_path_factory):
    """A hypothesis state machine: writes, edits, moves and deletes through files and through fsmem, and the
    changes a stamp hides (the same size with the mtime put back, a time moved backwards, a case-only rename, a
    file deleted and made again, truncated and written again); after each, a read (ls, grep plain, -i and a
    regular expression, search, read, context) asked of the watcher and walked gives the same bytes, and but for
    search (whose usage boost reads the retrieval log) the bytes a walk of a copy without `.fsmem/` gives: two
    faces that keep the same stale row agree, and only a memory with no cache at all tells. A change may be made
    while no watcher runs, which the next one must find (a watcher started on a stale cache)."""
    from hypothesis import HealthCheck, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule

    names, words = st.sampled_from(NAMES), st.sampled_from(WORDS)
    reads = st.sampled_from(["ls", "grep", "grep -i", "grep regex", "search", "read", "context"])
    text = st.lists(st.lists(words, min_size=1, max_size=3), min_size=1, max_size=4)

    class Changes(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.root = Memory.init(tmp_path_factory.mktemp("machine") / "mem").root
            self.watcher = Watcher(self.root)

        def teardown(self) -> None:
            self.watcher.stop()

        @staticmethod
        def body(rel: str, lines: list[list[str]]) -> str:
            return f"# {rel}\n\n" + "".join(f"- {' '.join(line)}\n" for line in lines)

        @rule(rel=names, lines=text, settled=st.booleans())
        def write(self, rel, lines, settled):
            """`settled`: the mtime an old file has (`cp -p`, a checkout), so the next read stores a row that no
            stamp check reads again."""
            full = write_file(self.root, rel, self.body(rel, lines))
            if settled:
                os.utime(full, (1_577_836_800, 1_577_836_800))

        @rule(rel=names, word=words)
        def append(self, rel, word):
            if (self.root / rel).exists():
                with (self.root / rel).open("a") as handle:
                    handle.write(f"- {word} appended\n")

        @rule(rel=names)
        def delete(self, rel):
            (self.root / rel).unlink(missing_ok=True)

        @rule(source=names, dest=names)
        def move(self, source, dest):
            if (self.root / source).exists() and source != dest:
                (self.root / dest).parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.root / source, self.root / dest)

        @rule(kind=reads, word=words, other=words)
        def settle_then_read(self, kind, word, other):
            """Every file's mtime moved to 2020, then a read: the caches store rows no stamp check reads again."""
            for path in self.root.rglob("*.md"):
                if ".fsmem" not in path.parts:
                    os.utime(path, (1_577_836_800, 1_577_836_800))
            self.read_both_ways("ls", NAMES[0], word, other)  # the rows of every file, stored settled
            self.read_both_ways(kind, NAMES[0], word, other)

        @rule(rel=names, lines=text)
        def rewrite_while_no_watcher_runs(self, rel, lines):
            self.watcher.stop()
            self.rewrite_keeping_size_and_mtime(rel, lines)
            self.watcher = Watcher(self.root)

        @rule(rel=names, lines=text)
        def rewrite_keeping_size_and_mtime(self, rel, lines):
            """An edit of the same size whose mtime is put back (`cp -p`, `rsync -t`, a tool restoring times)."""
            full = self.root / rel
            if full.exists():
                before = full.stat()
                data = self.body(rel, lines).encode()[: before.st_size].ljust(before.st_size, b"-")
                with full.open("r+b") as handle:
                    handle.write(data)
                os.utime(full, ns=(before.st_atime_ns, before.st_mtime_ns))

        @rule(rel=names, seconds=st.integers(-86_400 * 400, -1))
        def move_mtime_back(self, rel, seconds):
            full = self.root / rel
            if full.exists():
                when = full.stat().st_mtime + seconds
                os.utime(full, (when, when))

        @rule(rel=names)
        def rename_case_only(self, rel):
            full = self.root / rel
            if full.exists():
                other = full.with_name(full.name.swapcase())
                if not other.exists():
                    os.rename(full, other)

        @rule(rel=names, lines=text, settled=st.booleans())
        def delete_and_make_again(self, rel, lines, settled):
            """A new inode, often the number the deleted file had."""
            (self.root / rel).unlink(missing_ok=True)
            self.write(rel, lines, settled)

        @rule(rel=names, lines=text)
        def truncate_and_write(self, rel, lines):
            full = self.root / rel
            if full.exists():
                with full.open("r+") as handle:
                    handle.truncate(0)
                    handle.flush()
                    handle.write(self.body(rel, lines))

        @rule(rel=names, lines=text)
        def write_through_fsmem(self, rel, lines):
            code, _out, err = run(self.root, "write", rel, mode="off", stdin=self.body(rel, lines).encode())
            full = self.root / rel
            twin = not full.exists() and (full.with_name(full.name.swapcase())).exists()
            assert (code, b"differs only by letter case" in err) == ((2, True) if twin else (0, False)), err

        @rule(rel=names)
        def rm_through_fsmem(self, rel):
            if (self.root / rel).exists():
                assert run(self.root, "rm", rel, mode="off")[0] == 0

        @rule(kind=reads, rel=names, word=words, other=words)
        def read_both_ways(self, kind, rel, word, other):
            args = {
                "ls": ("ls", "--json"),
                "grep": ("grep", word),
                "grep -i": ("grep", "-i", word.upper()),
                "grep regex": ("grep", f"{word[:3]}[a-z]+ ({other}|appended)"),
                "search": ("search", f"{word} {other}"),
                "read": ("read", rel),
                "context": ("context", "--max-tokens", "400"),
            }[kind]
            index = self.root / "INDEX.md"
            for _ in range(3):
                index_before = index.read_bytes() if index.exists() else None
                answer = both(self.root, *args)
                if kind == "search":
                    return
                copy = self.root.parent / "copy"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(self.root, copy, ignore=shutil.ignore_patterns(".fsmem"), symlinks=True)
                if (index.read_bytes() if index.exists() else None) == index_before:
                    break  # the watcher did not regenerate INDEX.md meanwhile
            assert run(copy, *args, mode="off") == answer, args

    Changes.TestCase.settings = settings(
        max_examples=MACHINE_EXAMPLES, stateful_step_count=10, deadline=None, suppress_health_check=list(HealthCheck)
    )
    Changes.TestCase().runTest()


def test_a_read_sees_every_change_finished_before_it_while_other_files_keep_changing(memory, watcher):
    root = memory.root
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            write_file(root, f"busy/f{n % 7}.md", f"# Busy\n\n- churn {n}\n")
            if n % 5 == 0:
                (root / f"busy/f{(n + 3) % 7}.md").unlink(missing_ok=True)
            n += 1

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for n in range(5):
            write_file(root, "topics/billing.md", f"# Billing\n\n- the zephyr plan, version {n}\n")
            if n % 3 == 0:
                (root / "topics/people.md").unlink(missing_ok=True)
            else:
                write_file(root, "topics/people.md", f"# People\n\n- zephyr person {n}\n")
            for args in [("ls", "topics"), ("grep", "zephyr", "topics"), ("read", "topics/billing.md")]:
                code, out, err = both(root, *args)
                assert f"version {n}" in out.decode() or args[0] == "ls"
    finally:
        stop.set()
        thread.join(TIMEOUT)


def test_a_request_carries_the_clock_the_agent_and_the_budget(memory, watcher):
    root = memory.root
    write_file(root, "topics/dated.md", "---\ntitle: Dated\nupdated: 2025-06-01\n---\n# Dated\n\n- zephyr dated\n")
    configure(root, {"budgets": {"agents": {"terse": {"max_results": 1}}}})
    early = both(root, "search", "zephyr", "--json", env={"FSMEM_NOW": "2025-06-02T00:00:00+00:00"})
    late = both(root, "search", "zephyr", "--json", env={"FSMEM_NOW": "2029-01-01T00:00:00+00:00"})
    assert early != late  # recency moved the scores
    small = both(root, "grep", "zephyr", "--max-tokens", "20")
    large = both(root, "grep", "zephyr", "--max-tokens", "400")
    assert small != large and len(small[1]) < len(large[1])
    # the watcher lists topics/dated.md in INDEX.md once its writes settle: the listings below are compared with
    # one another, so they are taken after that (it came between two of them on a fast disk)
    deadline = time.monotonic() + TIMEOUT
    while "topics/dated.md" not in (root / "INDEX.md").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    everyone = both(root, "ls")
    terse = both(root, "--agent", "terse", "ls")
    also_terse = both(root, "ls", env={"FSMEM_AGENT": "terse"})
    assert terse == also_terse and terse != everyone and b"[files 1-1 of " in terse[1]
    elsewhere = both(root, "--root", str(root), "ls", cwd=root.parent)  # another working folder, --root given
    assert elsewhere == everyone


def test_only_reads_are_asked_and_a_write_asked_by_hand_is_refused(memory, watcher):
    root = memory.root
    assert run(root, "rm", "topics/people.md")[0] == 0  # a write runs here, FSMEM_SOCKET=require or not
    assert not (root / "topics/people.md").exists()
    answer = _ask_by_hand(watcher.socket(), root, ["rm", "topics/billing.md"])
    assert answer == rv.REFUSED and (root / "topics/billing.md").exists()
    assert _ask_by_hand(watcher.socket(), root.parent, ["ls"]) == rv.REFUSED  # not this watcher's memory
    both(root, "ls")


def _ask_by_hand(path: str, root: Path, argv: list[str]) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        sock.connect(path)
        sock.sendall(rv.pack(rv.request(str(root), argv)))
        return sock.recv(1)


def test_the_protocol_is_bounded_both_ways(memory, watcher):
    path = watcher.socket()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # a frame past the cap: dropped unread
        sock.settimeout(TIMEOUT)
        sock.connect(path)
        sock.sendall((rv.MAX_REQUEST + 1).to_bytes(4, "big") + b"x" * 1024)
        assert _closed(sock)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:  # says nothing: dropped after its deadline
        silent.settimeout(TIMEOUT)
        silent.connect(path)
        assert _closed(silent)
    both(memory.root, "ls")


def _closed(sock: socket.socket) -> bool:
    """The watcher closed the connection without a word (a reset where it left bytes unread)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_without_a_watcher_the_command_walks_and_require_says_why(memory):
    root = memory.root
    assert run(root, "ls", mode="auto") == run(root, "ls", mode="off")
    code, out, err = run(root, "ls", mode="require")
    assert code == 2 and out == b"" and b"no running fsmem answered" in err


def test_a_stopped_watcher_is_walked_past(memory, watcher):
    root = memory.root
    expected = run(root, "ls", mode="off")
    os.kill(watcher.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert run(root, "ls", mode="auto") == expected
        assert time.monotonic() - started < rv.READY_SECONDS + 10
        code, _, err = run(root, "ls", mode="require")
        assert code == 2 and b"no running fsmem answered" in err
    finally:
        os.kill(watcher.process.pid, signal.SIGCONT)
    both(root, "ls")  # and it answers again


def test_a_killed_watchers_socket_is_stale_and_the_next_watcher_replaces_it(memory):
    root = memory.root
    first = Watcher(root)
    path = first.socket()
    first.process.kill()
    first.stop()
    assert stat.S_ISSOCK(os.lstat(path).st_mode)  # left behind
    assert run(root, "ls", mode="auto") == run(root, "ls", mode="off")
    assert run(root, "ls", mode="require")[0] == 2
    second = Watcher(root)
    try:
        assert second.socket() == path
        both(root, "ls")
        third = Watcher(root, wait=False)  # a second live watcher leaves the first one answering
        try:
            third.wait_for("answered by another process")
        finally:
            third.stop()
        both(root, "ls")
    finally:
        second.stop()
    assert not os.path.lexists(path)  # removed at a clean exit


STOP_SECONDS = 5.0  # a watcher asked to stop exits within this, here on 2 shared cores (at once on a quiet one)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda sig: sig.name)
def test_a_watcher_stopped_while_it_warms_up_exits_at_once_and_the_next_one_answers(memory, sig):
    """Ctrl-C or SIGTERM in the middle of the warm-up (held there by FSMEM_PAUSE_AT, as a slow catch-up of 100k
    files would hold it) ends the watcher there, exit 0, no socket left; the next watcher starts and answers."""
    root = memory.root
    run(root, "ls", mode="off")  # a cache for the watcher to catch up
    first = Watcher(root, env={PAUSE_ENV: "warm"}, wait=False, started=True)
    try:
        first.wait_for(f"paused at warm ({PAUSE_ENV}, pid ")
        asked = time.monotonic()
        first.process.send_signal(sig)
        assert first.process.wait(STOP_SECONDS) == 0, first.lines  # it waited out the pause (60 s) before
        assert time.monotonic() - asked < STOP_SECONDS
        said = "".join(first.lines)
        assert f"stopped by {sig.name} while warming up" in said and "Traceback" not in said, said
    finally:
        first.process.kill()
        first.stop()
    path = rv.socket_path(os.path.realpath(root))
    assert path is not None and not os.path.lexists(path)
    folder = Path(path).parent  # made as it listens: not there when the warm-up stopped before
    assert not (folder.exists() and list(folder.glob("*.sock")) + list(folder.glob(".*.sock")))
    second = Watcher(root)
    try:
        assert second.socket() == path
        both(root, "ls")
        both(root, "search", "zephyr pricing", "--json")
    finally:
        second.stop()


def test_a_memory_whose_socket_path_is_too_long_uses_a_short_private_folder(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    memory = Memory.init(deep / "mem")
    write_file(memory.root, "topics/a.md", "# A\n\n- zephyr\n")
    runtime = Path(tempfile.mkdtemp(prefix="rt-"))
    try:
        env = {"XDG_RUNTIME_DIR": str(runtime)}
        watcher = Watcher(memory.root, env=env)
        try:
            path = watcher.socket()
            assert path.startswith(str(runtime / "fsmem") + "/") and len(path) <= rv.MAX_SOCKET_PATH
            assert stat.S_IMODE(os.lstat(runtime / "fsmem").st_mode) == 0o700
            assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
            both(memory.root, "grep", "zephyr", env=env)
        finally:
            watcher.stop()
    finally:
        shutil.rmtree(runtime)


def test_on_a_read_only_mount_no_socket_is_made_and_commands_walk(memory, tmp_path):
    assert run(memory.root, "ls", mode="off")[0] == 0  # the caches exist before the mount
    with read_only(memory.root, tmp_path / "ro") as root:
        watcher = Watcher(root, wait=False)
        try:
            watcher.wait_for("one-shot commands will walk")
            assert not os.path.lexists(root / ".fsmem/run/answers.sock")
            assert run(root, "ls", mode="auto") == run(root, "ls", mode="off")
            assert run(root, "ls", mode="require")[0] == 2
        finally:
            watcher.stop()


def _stamps(root: Path, rel: str) -> tuple[object, object]:
    """The stamp of `rel` in the search index (mtime, size) and in the grep word index, as stored on disk."""
    import apsw

    state = root / ".fsmem"
    search = apsw.Connection(str(state / "cache.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    words = apsw.Connection(str(state / "grep-words.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        indexed = search.execute("SELECT abs(mtime_ns), size FROM search_files WHERE path = ?", (rel,)).fetchall()
        worded = words.execute("SELECT stamp FROM files WHERE path = ?", (rel,)).fetchall()
    finally:
        search.close()
        words.close()
    return indexed, worded


@pytest.mark.slow
def test_the_watcher_catches_up_the_caches_there_are_before_it_answers(memory):
    """The first search and grep asked of a new watcher need no walk: before its socket is there, the watcher
    has caught up the search index and the grep word index that exist (the feed's first catch-up of each is a
    walk of every file), as it has the metadata rows."""
    root = memory.root
    # every file older than the clock's tick, so that each cache keeps its stamp (a file written within the
    # tick is stored without one, to be read again: a stamp compared here would then be None on both sides)
    settled = time.time() - 60
    for path in root.rglob("*.md"):
        os.utime(path, (settled, settled))
    kept = Memory(root)
    kept.catalog.hold_feed()  # a long-lived process: its grep builds the word index
    kept.search("zephyr")
    kept.grep("zephyr")
    kept.close()
    rel = "topics/people.md"
    before = _stamps(root, rel)
    assert before[0] and before[1] and before[1][0][0] is not None, before
    (root / rel).write_text("---\ntitle: People\n---\n# People\n\n- Ada and Grace run zephyr ops\n")
    os.utime(root / rel, (settled + 30, settled + 30))
    watcher = Watcher(root)
    try:
        after = _stamps(root, rel)  # no request yet
        found = os.stat(root / rel)
        assert after[0] == [(found.st_mtime_ns, found.st_size)], after
        assert after[1] != before[1], after
        assert both(root, "search", "Grace zephyr", "--json")[0] == 0
        assert both(root, "grep", "Grace")[0] == 0
    finally:
        watcher.stop()


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        pytest.skip("running a client as another user needs root")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv here")
    prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    if subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, check=False).returncode:
        pytest.skip("cannot run this interpreter as nobody")
    return prefix


CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("refused", exc.errno)
    sys.exit(0)
try:
    s.sendall(b"\\0\\0\\0\\0")
    print("dropped" if s.recv(1) == b"" else "answered")
except (BrokenPipeError, ConnectionResetError):
    print("dropped")
"""


def test_another_user_can_neither_reach_nor_ask_the_watcher():
    prefix = _as_nobody()
    base = Path(tempfile.mkdtemp(prefix="rendezvous-other-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)  # others may enter the memory's folders, as on a shared machine
        memory = Memory.init(base / "mem")
        write_file(memory.root, "topics/a.md", "# A\n\n- zephyr\n")
        (memory.root / ".fsmem").mkdir(exist_ok=True)
        os.chmod(memory.root / ".fsmem", 0o755)
        watcher = Watcher(memory.root)
        try:
            path = watcher.socket()
            folder = os.path.dirname(path)
            assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700 and os.lstat(folder).st_uid == os.getuid()
            tried = subprocess.run([*prefix, sys.executable, "-c", CONNECT, path], capture_output=True, text=True)
            assert tried.stdout.split()[:1] == ["refused"], tried  # the folder's mode: EACCES
            os.chmod(folder, 0o711)  # even where the folder and the socket let it through,
            os.chmod(path, 0o666)
            tried = subprocess.run([*prefix, sys.executable, "-c", CONNECT, path], capture_output=True, text=True)
            assert tried.stdout.strip() == "dropped", tried  # the watcher checks the peer's uid
            os.chmod(folder, 0o700)
            os.chmod(path, 0o600)
            both(memory.root, "ls")
        finally:
            watcher.stop()
    finally:
        shutil.rmtree(base)


def test_the_client_refuses_a_folder_that_is_not_private(tmp_path):
    folder = tmp_path / "open"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    assert not rv.private(str(folder))
    os.chmod(folder, 0o700)
    assert rv.private(str(folder))
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert not rv.private(str(link))


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["ls"], "ls"),
        (["--root", "R", "grep", "x"], "grep"),
        (["--agent=a", "search", "x", "--root", "R"], "search"),
        (["ls", "--help"], None),
        (["-h"], None),
        (["--version", "ls"], None),
        (["read", "-"], None),
        (["note", "x"], "note"),
    ],
)
def test_which_command_a_line_names(argv, command):
    assert rv.command_and_root(argv)[0] == command


def test_an_answered_command_ends_without_the_interpreters_finalization(memory, watcher):
    """The client leaves once the answer is flushed: an exit function (here one a test registers) is not run when
    the watcher answered, and is when the command walked; the output and the exit code are the walk's."""
    code = (
        "import atexit, sys; atexit.register(lambda: sys.stderr.write('finalized')); "
        "sys.argv = ['fsmem', *sys.argv[1:]]; from fsmem.cli import main; main()"
    )
    for mode, finalized in (("require", False), ("off", True)):
        environment = {**os.environ, "FSMEM_NOW": NOW, rv.MODE_ENV: mode}
        for args, exit_code in ((["grep", "zephyr"], 0), (["grep", "nothing-matches-this"], 1)):
            done = subprocess.run(
                [sys.executable, "-c", code, *args], cwd=memory.root, env=environment, capture_output=True
            )
            assert (done.returncode, done.stdout) == run(memory.root, *args, mode="off")[:2]
            assert done.returncode == exit_code and (b"finalized" in done.stderr) is finalized, (mode, done)


def test_the_request_module_imports_only_what_the_start_needs():
    code = (
        "import sys; import fsmem.cli; before = set(sys.modules); import fsmem.cli.rendezvous; "
        "print(sorted(set(sys.modules) - before))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['_socket', 'fsmem.cli.rendezvous', 'fsmem.names']"


def test_a_watcher_on_a_terminal_sends_no_progress_with_an_answer(memory):
    """A watcher started on a terminal draws a cold build's progress there; the command it answers gets none of it
    (its stderr may be a file, where the walk draws none): the search that builds the index, asked, is the walk's.
    It sent "\\rfsmem: indexing files for search: ... \\x1b[K" in the answer's stderr (found by attack54a)."""
    import pty

    master, terminal = pty.openpty()
    said = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            said.extend(chunk)

    threading.Thread(target=drain, daemon=True).start()
    args = ["--root", str(memory.root), "watch", "--settle", "0.1"]
    process = preloaded.start(args, env=dict(os.environ), stderr=terminal)
    try:
        deadline = time.monotonic() + TIMEOUT
        while b"answering one-shot reads on " not in said and time.monotonic() < deadline:
            time.sleep(0.02)
        assert b"answering one-shot reads on " in said, bytes(said)
        code, out, err = both(memory.root, "search", "zephyr", env={"FSMEM_PROGRESS_AFTER": "0"})
        assert code == 0 and b"zephyr" in out and err == b""
    finally:
        process.terminate()
        process.wait(TIMEOUT)
        os.close(terminal)
        os.close(master)


def test_a_client_that_stops_taking_its_answer_holds_the_watcher_seconds_not_minutes(memory, watcher):
    """A client stopped (Ctrl-Z) while a long answer comes: the watcher drops it after `rv.SEND_SECONDS` and answers
    the next command. It waited for the whole answer to be taken for 120 s (`ANSWER_SECONDS`), every command meanwhile
    walking, its change feed unread (found by attack54a)."""
    root = memory.root
    configure(root, {"budgets": {"agents": {"reader": {"max_tokens": 10_000_000, "max_results": 1_000_000}}}})
    write_file(root, "topics/long.md", "# Long\n\n" + "".join(f"- zephyr line {i}\n" for i in range(50_000)))
    argv = ["--root", str(root), "--agent", "reader", "grep", "zephyr", "--max-results", "1000000"]
    time.sleep(1.1)  # fsmem.yaml older than a second: the memory is kept
    assert len(run(root, *argv)[1]) > 1 << 20  # the answer is past the socket's buffer
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stopped:
        stopped.settimeout(TIMEOUT)
        stopped.connect(watcher.socket())
        stopped.sendall(rv.pack(rv.request(str(root), argv)))
        assert stopped.recv(1) == rv.READY
        stopped.sendall(rv.GO)  # and takes nothing of the answer
        time.sleep(rv.SEND_SECONDS + 1)
        both(root, "ls")  # FSMEM_SOCKET=require: the watcher answered


def test_a_watcher_answers_only_a_client_of_its_own_version_install_and_file_name_encoding(memory, watcher):
    """A watcher started before an upgrade, or from another install, runs other code than the command would; under
    PYTHONUTF8=0 LC_ALL=C a command's file names are ASCII with escapes where the watcher's are UTF-8. Each is
    refused, and the command walks. The watcher answered all of them: `ls` listed 'café.md', which the walk there
    leaves out as not text, and `read` printed it where the walk refuses its name (found by attack54a)."""
    root = memory.root
    write_file(root, "topics/café.md", "# Café\n\n- zephyr\n")
    both(root, "ls", "topics")
    fields = rv.request(str(root), ["--root", str(root), "ls"])
    version, encoding, code = os.fsdecode(fields[0].removeprefix(rv.MAGIC)).split(" ", 2)
    assert fields[0] == rv.MAGIC + os.fsencode(f"{version} {encoding} {code}")
    others = [f"0.0.1 {encoding} {code}", f"{version} {encoding} {code}-elsewhere", f"{version} ascii:strict {code}"]
    for other in [b"FSMEM-ASK-1\n", *(rv.MAGIC + os.fsencode(o) for o in others)]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT)
            sock.connect(watcher.socket())
            sock.sendall(rv.pack([other, *fields[1:]]))
            assert sock.recv(1) == rv.REFUSED, other
    ascii_names = {"PYTHONUTF8": "0", "LC_ALL": "C", "PYTHONIOENCODING": "utf-8"}
    for args in (("ls", "topics"), ("read", "topics/café.md")):
        walked = run(root, *args, mode="off", here=False, started=True, env=ascii_names)
        assert run(root, *args, mode="auto", started=True, env=ascii_names) == walked
        code, _, err = run(root, *args, mode="require", started=True, env=ascii_names)
        assert code == 2 and b"the watcher refused" in err


@pytest.mark.parametrize("mode", ["OFF", "0", "on", "require ", "\x1b]0;x\x07"])
def test_a_socket_mode_that_is_not_one_is_refused(memory, mode):
    """FSMEM_SOCKET=OFF asked a running watcher where off was meant, as any value but the two did (found by
    attack54a): a read is refused with exit 2, the value shown escaped. A command that is never asked (a write, a
    hook, whose exit 2 would block its agent) reads no mode, and runs."""
    code, out, err = run(memory.root, "ls", mode=mode)
    assert (code, out) == (2, b"") and err.startswith(f"fsmem: error: FSMEM_SOCKET is {mode!r}".encode()), err
    assert b"\x1b" not in err
    assert run(memory.root, "note", "kept", mode=mode)[0] == 0


def test_a_read_that_must_be_answered_and_is_not_fails_as_every_error_does_with_json_too(memory):
    """FSMEM_SOCKET=require with no watcher, or an odd FSMEM_SOCKET: with --json the error is also the JSON document
    on stdout that every failed command prints there; it printed none."""
    for mode, words in (("require", "no running fsmem answered"), ("on", "FSMEM_SOCKET is 'on'")):
        code, out, err = run(memory.root, "ls", "--json", mode=mode)
        assert code == 2 and err.startswith(f"fsmem: error: {words}".encode()), err
        assert words in json.loads(out)["error"]["message"] and json.loads(out)["error"]["exit"] == 2
        assert run(memory.root, "ls", "--", "--json", mode=mode)[1] == b""  # an argument, not the flag


def test_a_watcher_of_another_hash_seed_time_zone_and_locale_answers_the_walks_bytes(memory):
    """The watcher runs a command in its own interpreter: another hash seed (the order of a set of strings),
    time zone and locale than the client's. An answer that depended on them would differ from the walk's, which
    runs in the client's. Tags, aliases and names in several scripts give a set's order something to show."""
    write_file(
        memory.root,
        "topics/café.md",
        "---\ntitle: Café Zürich\ntags: [zephyr, a, ç, İ, ı, b]\naliases: [Zed, Ä, ab]\n---\n# Café\n\n"
        "- owner: Zoë Ünal\n- zephyr: İstanbul ığ\n",
    )
    started = Watcher(memory.root, env={"PYTHONHASHSEED": "1", "TZ": "Etc/GMT+12", "LC_ALL": "C"}, started=True)
    try:
        client = {"TZ": "Pacific/Chatham", "COLUMNS": "33", "LC_ALL": "C.UTF-8", "LANG": "tr_TR.UTF-8"}
        for args in [*READS, ("grep", "-i", "İSTANBUL"), ("ls", "--json"), ("search", "Zoë zephyr", "--json")]:
            both(memory.root, *args, env=client)
    finally:
        started.stop()
