import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import write_file

from fsmem import Memory
from fsmem.errors import RootNotFound
from fsmem.store.cache import DatabaseError, cache_path, connect
from fsmem.watch import is_ignored

pytest.importorskip("watchdog")

DOC = "---\ntitle: {title}\n---\n# {title}\n"
TIMEOUT = 20.0


def _titles(memory):
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        rows = conn.execute("SELECT path, title FROM files").fetchall()
    return dict(rows)


def _eventually(check, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except DatabaseError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout} s")


@pytest.fixture
def watching(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    stop, ready = threading.Event(), threading.Event()
    log: list[str] = []
    outcome: dict = {}

    def run():
        try:
            outcome["stats"] = Memory(memory.root).watch(settle=0.1, log=log.append, stop=stop, ready=ready)
        except Exception as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT)
    yield memory, log, outcome
    stop.set()
    thread.join(TIMEOUT)
    assert not thread.is_alive()


def test_ignored_paths():
    assert is_ignored(".fsmem/cache.sqlite")
    assert is_ignored("topics/.fsmem-tmp-abc")
    assert is_ignored("topics/.billing.md.swp")
    assert is_ignored("topics/billing.md~")
    assert is_ignored("topics/#billing.md#")
    assert is_ignored("topics/4913")
    assert not is_ignored("topics/billing.md")


def test_create_edit_via_rename_delete_and_move(watching):
    memory, log, _ = watching
    write_file(memory.root, "topics/a.md", DOC.format(title="first"))
    _eventually(lambda: _titles(memory).get("topics/a.md") == "first")

    # An editor's save: write a temp file beside it, then rename over the original.
    temp = memory.root / "topics" / ".a.md.swp"
    temp.write_text(DOC.format(title="second"))
    os.replace(temp, memory.root / "topics/a.md")
    _eventually(lambda: _titles(memory).get("topics/a.md") == "second")

    os.rename(memory.root / "topics/a.md", memory.root / "topics/b.md")
    _eventually(lambda: "topics/a.md" not in _titles(memory) and _titles(memory).get("topics/b.md") == "second")

    (memory.root / "topics/b.md").unlink()
    _eventually(lambda: "topics/b.md" not in _titles(memory))
    assert any("forgot" in line for line in log)


def test_a_folder_moved_in_and_out(watching, tmp_path):
    memory, log, _ = watching
    outside = tmp_path / "incoming"
    write_file(outside, "x.md", DOC.format(title="x"))
    write_file(outside, "deep/y.md", DOC.format(title="y"))
    shutil.move(str(outside), str(memory.root / "entities"))
    _eventually(lambda: {"entities/x.md", "entities/deep/y.md"} <= set(_titles(memory)))
    shutil.move(str(memory.root / "entities"), str(tmp_path / "gone"))
    _eventually(lambda: not any(p.startswith("entities/") for p in _titles(memory)))
    assert any("rescanned" in line for line in log)


def test_state_folder_and_temp_files_trigger_nothing(watching):
    memory, log, _ = watching
    before = len(log)
    (memory.root / ".fsmem" / "note.txt").write_text("x")
    (memory.root / "topics").mkdir(exist_ok=True)
    (memory.root / "topics" / ".fsmem-tmp-123").write_text("x")
    write_file(memory.root, "topics/seen.md", DOC.format(title="seen"))
    _eventually(lambda: "topics/seen.md" in _titles(memory))
    assert all(".fsmem" not in line and "tmp" not in line for line in log[before:])


def test_root_disappearing_stops_with_a_clear_error(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    stop, ready = threading.Event(), threading.Event()
    outcome = {}

    def run():
        try:
            memory.watch(settle=0.1, stop=stop, ready=ready)
        except RootNotFound as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(TIMEOUT)
    shutil.rmtree(memory.root)
    thread.join(TIMEOUT)
    stop.set()
    assert "disappeared" in outcome["error"]


@pytest.mark.slow
def test_cli_watch_exits_cleanly_on_sigterm_and_ctrl_c(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("fsmem")), "--root", str(memory.root), "watch", "--settle", "0.1"],
            stderr=subprocess.PIPE,
            text=True,
        )
        first = proc.stderr.readline()
        assert "watching" in first
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
        assert "stopped:" in err and "Traceback" not in err


def _start(memory, **kwargs):
    stop, ready = threading.Event(), threading.Event()
    log: list[str] = []
    thread = threading.Thread(
        target=lambda: Memory(memory.root).watch(settle=0.1, log=log.append, stop=stop, ready=ready, **kwargs),
        daemon=True,
    )
    thread.start()
    assert ready.wait(TIMEOUT)
    return stop, thread, log


def test_index_md_follows_new_and_removed_documents(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    stop, thread, log = _start(memory)
    try:
        index = memory.root / "INDEX.md"
        write_file(
            memory.root,
            "topics/zebra-crossings.md",
            "---\ntitle: Zebra crossings\ndescription: where to cross\ntype: semantic\ntopic: zebra\n---\n# Zebra\n",
        )
        _eventually(lambda: index.is_file() and "Zebra crossings" in index.read_text())
        (memory.root / "topics/zebra-crossings.md").unlink()
        _eventually(lambda: "Zebra crossings" not in index.read_text())
        assert any("INDEX.md regenerated" in line for line in log)
    finally:
        stop.set()
        thread.join(TIMEOUT)


def test_consolidate_runs_once_session_notes_go_still(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    stop, thread, log = _start(memory, consolidate=True, consolidate_after=0.3)
    try:
        memory.note("- employer: Globex", session="s1", subject="people/Ada Quill")
        target = memory.root / "entities" / "people" / "ada-quill.md"
        _eventually(lambda: target.is_file() and "Globex" in target.read_text())
        _eventually(lambda: any(line.startswith("consolidated") for line in log))
        assert "Ada Quill" in (memory.root / "INDEX.md").read_text()
    finally:
        stop.set()
        thread.join(TIMEOUT)
