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
    shutil.rmtree(memory.root / "entities" / "deep")
    _eventually(lambda: "entities/deep/y.md" not in _titles(memory) and "entities/x.md" in _titles(memory))
    shutil.move(str(memory.root / "entities"), str(tmp_path / "gone"))
    _eventually(lambda: not any(p.startswith("entities/") for p in _titles(memory)))
    _eventually(lambda: any("folders changed: rescanned entities" in line for line in log))


def test_an_edit_in_place_is_seen(watching):
    """An editor that truncates and writes the file itself (no rename): the feed's event for the write."""
    memory, _, _ = watching
    write_file(memory.root, "topics/a.md", DOC.format(title="first"))
    _eventually(lambda: _titles(memory).get("topics/a.md") == "first")
    with open(memory.root / "topics" / "a.md", "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(DOC.format(title="edited in place"))
    _eventually(lambda: _titles(memory).get("topics/a.md") == "edited in place")


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
    gone = tmp_path / "gone"
    memory.root.rename(gone)  # at once: a removal can race the watcher's own writes there (tmpfs: "not empty")
    shutil.rmtree(gone, ignore_errors=True)
    thread.join(TIMEOUT)
    stop.set()
    assert "disappeared" in outcome["error"]
    assert not memory.root.exists()  # its machine state (the feed's log, the cache) made no folder again


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
        while "answering one-shot reads" not in proc.stderr.readline():  # warmed up (test_rendezvous.py stops a
            pass  # watcher that still warms up)
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


# -- on the change feed: one source of events in the process -------------------------------------------


def _inotify_fds() -> int:
    count = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{name}") == "anon_inode:inotify"
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")
def test_watch_and_every_memory_of_the_process_share_one_feed(watching):
    """watch ran its own watchdog observer (a thread, its own inotify instance) beside the feed the process's
    other Memory objects answered from."""
    from fsmem.store import feed as feeds

    memory, log, _ = watching
    feed = feeds.current(memory.root.resolve())
    assert feed is not None and feed.trusted
    other = Memory(memory.root)
    write_file(memory.root, "topics/shared.md", DOC.format(title="shared"))
    assert [e.path for e in other.ls("topics").entries] == ["topics/shared.md"]
    assert other.catalog._feed is feed
    _eventually(lambda: _titles(memory).get("topics/shared.md") == "shared")
    assert _inotify_fds() == 1
    assert not [t for t in threading.enumerate() if "observer" in type(t).__name__.lower()]
    other.close()


def test_watch_does_not_wake_itself_with_its_own_writes(tmp_path):
    """INDEX.md, regenerated after a change, is a write the feed reports: it must not start another round."""
    memory = Memory.init(tmp_path / "mem")
    stop, thread, log = _start(memory)
    try:
        write_file(memory.root, "topics/a.md", "---\ntitle: Apples\ndescription: fruit\ntopic: apples\n---\n# A\n")
        index = memory.root / "INDEX.md"
        _eventually(lambda: index.is_file() and "Apples" in index.read_text())
        time.sleep(1.5)  # the regeneration's own events, and the second look at fresh rows, have come and gone
        settled = list(log)
        time.sleep(1.0)
        assert log == settled
        assert sum(line == "INDEX.md regenerated" for line in log) == 2  # at start, and after the change
    finally:
        stop.set()
        thread.join(TIMEOUT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")
def test_rows_stored_too_fresh_are_stored_settled_once_they_are_older(watching):
    memory, _, _ = watching
    write_file(memory.root, "topics/fresh.md", DOC.format(title="fresh"))

    def racy():
        with contextlib.closing(connect(cache_path(memory.root))) as conn:
            found = conn.execute("SELECT racy FROM files WHERE path = 'topics/fresh.md'").fetchone()
        return found[0] if found else None

    _eventually(lambda: racy() is not None)
    _eventually(lambda: racy() == 0)


def test_where_events_cannot_be_trusted_watch_walks_and_still_follows_every_change(tmp_path, monkeypatch):
    import fsmem.watch as watch_module
    from fsmem.store import inotify

    def refuse():
        raise OSError(24, "inotify instance limit reached")

    monkeypatch.setattr(inotify.Inotify, "shared", staticmethod(refuse))
    monkeypatch.setattr(watch_module, "_WALK_SECONDS", 0.2)
    memory = Memory.init(tmp_path / "mem")
    stop, thread, log = _start(memory)
    try:
        assert "walking every 0.2 s (the watcher did not start (inotify instance limit reached))" in log[0]
        write_file(memory.root, "topics/a.md", DOC.format(title="first"))
        _eventually(lambda: _titles(memory).get("topics/a.md") == "first")
        (memory.root / "topics" / "a.md").unlink()
        _eventually(lambda: "topics/a.md" not in _titles(memory))
        _eventually(lambda: any("changes found by a walk: rescanned the memory" in line for line in log))
    finally:
        stop.set()
        thread.join(TIMEOUT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")
def test_an_overflowed_queue_is_covered_by_a_walk(watching):
    memory, log, _ = watching
    root = memory.root / "topics"
    root.mkdir(exist_ok=True)
    for name in ("p.md", "q.md"):
        (root / name).write_text("x")
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for _ in range(limit // 2 + 10):
        os.utime(root / "p.md")
        os.utime(root / "q.md")
    write_file(memory.root, "topics/during.md", DOC.format(title="during"))
    _eventually(lambda: _titles(memory).get("topics/during.md") == "during")
    write_file(memory.root, "topics/after.md", DOC.format(title="after"))
    _eventually(lambda: _titles(memory).get("topics/after.md") == "after")


def test_watch_does_not_hand_the_feed_back_what_it_learnt_from_it(watching):
    """watch told the search index of the files the feed named through Memory's write path, which marks them
    on the feed for every consumer, watch included: each change came back as a new one, every settle time."""
    memory, log, _ = watching
    (memory.root / "areas").mkdir()
    _eventually(lambda: any("rescanned areas" in line for line in log))
    write_file(memory.root, "areas/once.md", DOC.format(title="once"))
    _eventually(lambda: any("re-read areas/once.md" in line for line in log))
    time.sleep(1.5)  # several settle times (0.1 s), and the second look at a row stored too fresh
    assert sum("areas/once.md" in line for line in log) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")
def test_the_periodic_walk_finds_a_change_no_event_reported(watching, tmp_path):
    """A write through a hard link outside the memory sends the memory's folders no event: the feed's check
    (a walk of its own within VERIFY_SECONDS; shortened here) names the file, and INDEX.md follows."""
    from fsmem.store import feed as feeds

    memory, log, _ = watching
    outside = tmp_path / "outside.md"
    doc = "---\ntitle: {title}\ndescription: d\ntopic: linked\n---\n# L\n"
    outside.write_text(doc.format(title="Before the link"))
    (memory.root / "topics").mkdir(exist_ok=True)
    os.link(outside, memory.root / "topics" / "linked.md")
    index = memory.root / "INDEX.md"
    _eventually(lambda: _titles(memory).get("topics/linked.md") == "Before the link")
    _eventually(lambda: "Before the link" in index.read_text())

    def racy():
        with contextlib.closing(connect(cache_path(memory.root))) as conn:
            return conn.execute("SELECT racy FROM files WHERE path = 'topics/linked.md'").fetchone()[0]

    _eventually(lambda: racy() == 0)  # its second look is over: what follows is the stamp's change alone
    time.sleep(0.3)
    feed = feeds.current(memory.root.resolve())
    assert feed is not None and feed.trusted
    outside.write_text(doc.format(title="Written from outside"))
    time.sleep(0.5)
    assert _titles(memory)["topics/linked.md"] == "Before the link"  # no event came
    feed.verify_seconds = 0.3
    _eventually(lambda: _titles(memory).get("topics/linked.md") == "Written from outside")
    _eventually(lambda: "Written from outside" in index.read_text())
    # the check names the file (and INDEX.md, written since the check before): no rescan of the memory
    assert any(line.startswith("re-read ") and "topics/linked.md" in line for line in log), "\n".join(log)


def test_watch_does_not_hold_every_files_metadata(tmp_path):
    """The watch counts the memory's files for its first line and lets their metadata go: held for its whole
    life, 100,000 files' metas made each full garbage collection in the process (during the one-shot reads it
    answers) walk 700,000 objects more."""
    import gc

    from fsmem.store.meta import FileMeta

    memory = Memory.init(tmp_path / "mem")
    for i in range(40):
        write_file(memory.root, f"topics/t{i:02}.md", DOC.format(title=f"T{i}"))

    def metas() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, FileMeta))

    before = metas()
    stop, ready, log = threading.Event(), threading.Event(), []
    thread = threading.Thread(
        target=lambda: Memory(memory.root).watch(settle=0.1, log=log.append, stop=stop, ready=ready), daemon=True
    )
    thread.start()
    try:
        assert ready.wait(TIMEOUT)
        assert "(4" in log[0] and "memory files" in log[0], log  # 40 topics and the template's files
        assert metas() - before < 40
    finally:
        stop.set()
        thread.join(TIMEOUT)


def test_machine_state_never_makes_a_memory_root_again(tmp_path):
    """A memory root deleted or moved away under a running fsmem stays gone: its state folder and its cache are
    made under the root, never the root itself (a watcher that logged the loss made it again, .fsmem/ alone)."""
    from fsmem.store.cache import MetaCache
    from fsmem.store.files import state_dir

    memory = Memory.init(tmp_path / "mem")
    memory.root.rename(tmp_path / "gone")
    with pytest.raises(RootNotFound, match="gone"):
        state_dir(memory.root, "logs")
    cache = MetaCache(memory.root, "fingerprint")
    cache.open()
    assert cache.in_memory and not memory.root.exists()
