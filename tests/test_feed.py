"""The change feed (`fsmem.store.feed`): a Memory asked more than once refreshes only what changed, and
still sees every change finished before a call — or walks, and says so, where events cannot be trusted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.store import feed as feeds
from fsmem.store.feed import untrusted_file_system

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")

DOC = "---\ntitle: {title}\ntype: semantic\n---\n# {title}\n\n- fact: {title}\n"


def _inotify_fds() -> int:
    """inotify instances this process holds open."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:inotify":
                count += 1
        except OSError:
            pass
    return count


def _titles(memory: Memory, path: str = "topics") -> dict[str, str | None]:
    return {e.path: e.title for e in memory.ls(path, max_results=1000).entries}


@pytest.fixture
def watched(tmp_path):
    """A Memory that has answered twice, so it runs on the feed (and walked once, when the feed started)."""
    yield from _watched(tmp_path)


@pytest.fixture(params=["inotify", "observer"])
def fed(request, tmp_path, monkeypatch):
    """`watched`, on each source of events: inotify read on demand, and watchdog's observer with its cookie
    barrier (the source of platforms without inotify; here watchdog's own inotify observer, on its thread)."""
    monkeypatch.setattr(feeds, "SOURCE", request.param)
    yield from _watched(tmp_path)


def _watched(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text(DOC.format(title="A"))
    memory.ls()
    memory.ls()
    assert memory.catalog._feed is not None and memory.catalog._feed.trusted, memory.catalog._feed.reason
    yield memory
    memory.close()


def _walks(memory: Memory) -> int:
    return memory.catalog.rows.walks


# -- an editor's save, finished before a call, is seen by that call, without a walk ------------------


def _atomic_rename(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def _truncate_and_write(path: Path, text: str) -> None:
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(text)


def _backup_then_write(path: Path, text: str) -> None:
    backup = path.with_name(path.name + "~")
    os.replace(path, backup)  # vim with backupcopy=no, emacs: the old file becomes the backup
    path.write_text(text)
    backup.unlink()


def _vim_like(path: Path, text: str) -> None:
    probe = path.with_name("4913")  # vim's probe that the folder is writable
    probe.write_text("")
    probe.unlink()
    swap = path.with_name("." + path.name + ".swp")
    swap.write_text("swap")
    _backup_then_write(path, text)
    swap.unlink()


@pytest.mark.parametrize("save", [_atomic_rename, _truncate_and_write, _backup_then_write, _vim_like])
def test_each_kind_of_editor_save_is_seen_by_the_next_call_without_a_walk(fed, save):
    walks = _walks(fed)
    for n in range(3):  # several saves in a row, each seen at once, with a title of the same length
        save(fed.root / "topics" / "a.md", DOC.format(title=f"A{n}"))
        assert _titles(fed) == {"topics/a.md": f"A{n}"}
    _atomic_rename(fed.root / "topics" / "new.md", DOC.format(title="New"))
    assert _titles(fed) == {"topics/a.md": "A2", "topics/new.md": "New"}
    assert fed.meta("topics/a.md").title == "A2"
    assert _walks(fed) == walks  # the feed told it where to look


def test_folders_made_moved_and_deleted_are_followed(fed):
    root = fed.root
    (root / "topics" / "x" / "y").mkdir(parents=True)
    (root / "topics" / "x" / "y" / "deep.md").write_text(DOC.format(title="Deep"))
    assert _titles(fed)["topics/x/y/deep.md"] == "Deep"
    os.rename(root / "topics" / "x", root / "topics" / "z")
    (root / "topics" / "z" / "y" / "later.md").write_text(DOC.format(title="Later"))  # under the new name
    assert sorted(_titles(fed)) == ["topics/a.md", "topics/z/y/deep.md", "topics/z/y/later.md"]
    os.rename(root / "topics" / "z", root / "gone")  # out of topics/, still in the memory
    assert sorted(_titles(fed)) == ["topics/a.md"]
    assert sorted(_titles(fed, "gone")) == ["gone/y/deep.md", "gone/y/later.md"]
    os.rename(root / "gone", root.parent / "outside")  # out of the memory
    assert "gone/y/deep.md" not in [e.path for e in fed.ls(max_results=1000).entries]
    (root.parent / "outside" / "y" / "ignored.md").write_text("not memory any more")
    os.rename(root.parent / "outside", root / "back")  # and in again, with a file made while away
    assert sorted(_titles(fed, "back")) == ["back/y/deep.md", "back/y/ignored.md", "back/y/later.md"]


def test_a_rename_storm_leaves_the_listing_a_fresh_walk_gives(fed):
    root = fed.root / "topics"
    for n in range(40):
        (root / f"f{n}.md").write_text(DOC.format(title=f"F{n}"))
    fed.ls()
    names = [f"f{n}.md" for n in range(40)]
    for round_ in range(31):  # every file renamed 31 times, over each other's old names, and some swapped
        renamed = [f"r{round_}-{n}.md" for n in range(40)]
        for old, new in zip(names, renamed, strict=True):
            os.rename(root / old, root / new)
        os.rename(root / renamed[0], root / "swap.md")
        os.rename(root / renamed[1], root / renamed[0])
        os.rename(root / "swap.md", root / renamed[1])
        names = renamed
    fresh = Memory(fed.root)
    assert fed.ls(max_results=1000).to_dict() == fresh.ls(max_results=1000).to_dict()
    assert _titles(fed)["topics/r30-0.md"] == "F1"  # swapped an odd number of times


def test_an_overflowed_queue_is_said_once_and_covered_by_a_whole_walk(watched):
    feed = watched.catalog._feed
    root = watched.root / "topics"
    for name in ("p.md", "q.md"):
        (root / name).write_text("x")
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    for _ in range(limit // 2 + 10):  # alternating names: the kernel merges only an event equal to the last
        os.utime(root / "p.md")
        os.utime(root / "q.md")
    (root / "during.md").write_text(DOC.format(title="During"))
    walks = _walks(watched)
    assert _titles(watched)["topics/during.md"] == "During"
    assert feed.overflows == 1 and _walks(watched) == walks + 1
    assert feed.trusted  # still watching, after the walk
    (root / "after.md").write_text(DOC.format(title="After"))
    assert _titles(watched)["topics/after.md"] == "After"
    log = (watched.root / ".fsmem" / "logs" / "feed.jsonl").read_text().splitlines()
    assert sum("overflowed" in json.loads(line)["message"] for line in log) == 1


def test_another_process_writing_through_fsmem_is_seen_by_the_next_call(fed):
    fsmem = Path(sys.executable).with_name("fsmem")
    env = {**os.environ, "FSMEM_ROOT": str(fed.root)}
    subprocess.run([str(fsmem), "write", "topics/other.md"], input=b"# Other\n", env=env, check=True)
    assert "topics/other.md" in _titles(fed)
    subprocess.run([str(fsmem), "rm", "topics/other.md"], env=env, check=True)
    assert "topics/other.md" not in _titles(fed)
    subprocess.run([str(fsmem), "note", "from another process"], env=env, check=True)
    assert any(e.path.startswith("sessions/") for e in fed.ls(max_results=1000).entries)


def test_a_watcher_that_dies_is_said_once_and_every_call_walks(watched):
    feed = watched.catalog._feed
    os.close(feed._source.fd)  # the descriptor goes away under the feed
    (watched.root / "topics" / "b.md").write_text(DOC.format(title="B"))
    walks = _walks(watched)
    assert _titles(watched) == {"topics/a.md": "A", "topics/b.md": "B"}
    assert not feed.trusted and _walks(watched) == walks + 1
    (watched.root / "topics" / "c.md").write_text(DOC.format(title="C"))
    assert "topics/c.md" in _titles(watched) and _walks(watched) == walks + 2
    log = (watched.root / ".fsmem" / "logs" / "feed.jsonl").read_text()
    assert log.count("the watcher failed") == 1


def test_a_watcher_whose_descriptor_dies_is_not_handed_to_the_next_feed(tmp_path):
    """Another memory's feed still attached to the shared watcher (a long-lived server holds several) must not keep
    a dead descriptor in use: the next feed to start gets a watcher of its own, trusted. It was handed the dead
    one, and its first watch failed with 'invalid argument' (the number was another file's) or EBADF."""
    first = next(_watched(tmp_path / "one"))
    other = next(_watched(tmp_path / "two"))  # attached to the same watcher
    dead = first.catalog._feed._source
    assert dead is other.catalog._feed._source
    os.close(dead.fd)  # the descriptor goes away under both feeds
    (first.root / "topics" / "b.md").write_text(DOC.format(title="B"))
    assert "topics/b.md" in _titles(first)  # walked: its feed is off
    assert not first.catalog._feed.trusted
    third = next(_watched(tmp_path / "three"))  # asserts its feed started, trusted
    assert third.catalog._feed._source is not dead
    (other.root / "topics" / "c.md").write_text(DOC.format(title="C"))
    assert "topics/c.md" in _titles(other) and not other.catalog._feed.trusted  # it walks now too
    (third.root / "topics" / "d.md").write_text(DOC.format(title="D"))
    assert "topics/d.md" in _titles(third) and third.catalog._feed.trusted
    for memory in (first, other, third):
        memory.close()


def test_a_watcher_that_cannot_start_leaves_the_walk(tmp_path, monkeypatch):
    from fsmem.store import inotify

    def refuse():
        raise OSError(24, "inotify instance limit reached")

    monkeypatch.setattr(inotify.Inotify, "shared", staticmethod(refuse))
    memory = Memory.init(tmp_path / "mem")
    memory.ls()
    memory.ls()
    assert not memory.catalog._feed.trusted
    walks = _walks(memory)
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "n.md").write_text(DOC.format(title="N"))
    assert _titles(memory) == {"topics/n.md": "N"} and _walks(memory) == walks + 1
    log = (memory.root / ".fsmem" / "logs" / "feed.jsonl").read_text()
    assert log.count("did not start (inotify instance limit reached)") == 1
    memory.close()


def test_a_missed_event_is_stale_no_longer_than_the_verify_period(watched, tmp_path):
    """A write through a hard link outside the memory reaches the file but sends its folder no event."""
    feed = watched.catalog._feed
    feed.verify_seconds = math.inf  # the check runs when asked below, as its thread would within the period
    outside = tmp_path / "elsewhere.md"
    os.link(watched.root / "topics" / "a.md", outside)
    with open(outside, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(DOC.format(title="Through a hard link"))
    assert _titles(watched) == {"topics/a.md": "A"}
    feed.check()
    assert _titles(watched) == {"topics/a.md": "Through a hard link"}


def test_network_and_fuse_file_systems_are_not_trusted(tmp_path):
    real = os.path.realpath(tmp_path)
    mounts = (
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        f"90 27 0:50 / {real} rw,relatime - fuse.sshfs host:/mem rw\n"
    )
    assert "fuse.sshfs" in untrusted_file_system(tmp_path / "mem", mounts)
    assert untrusted_file_system(tmp_path / "mem", mounts.replace("fuse.sshfs", "tmpfs")) is None
    nfs = f"91 27 0:51 / {real}/mem rw - nfs4 server:/x rw\n"
    assert "nfs4" in untrusted_file_system(tmp_path / "mem" / "topics", mounts + nfs)
    assert untrusted_file_system(tmp_path / "memo", "27 1 254:0 / / rw - ext4 /dev/vda rw\n" + nfs) is None


def test_one_feed_per_root_shared_and_stopped_with_its_last_user(tmp_path):
    first = Memory.init(tmp_path / "mem")
    second = Memory(first.root)
    for _ in range(2):
        first.ls()
        second.ls()
    assert first.catalog._feed is second.catalog._feed is feeds.current(first.root)
    assert _inotify_fds() == 1
    first.close()
    assert feeds.current(first.root) is not None
    del second  # collected, not closed: its finalizer gives the feed back
    assert feeds.current(first.root) is None and _inotify_fds() == 0


@pytest.mark.parametrize("source", ["inotify", "observer"])
def test_close_gives_the_feed_back_after_the_exit_hooks_have_run(tmp_path, monkeypatch, source):
    """A memory closed by an exit function that runs after weakref's (which turns every finalizer off) gave nothing
    back: its close called the finalizer that holds its share of the feed, a no-op from then on, and the feed's
    inotify instance (the shared one, or watchdog's own) stayed open. Tests/cli_runner.py ran that hook in the
    middle of a pytest process, and from then on no closed memory gave its feed back."""
    import weakref

    monkeypatch.setattr(feeds, "SOURCE", source)
    before = _inotify_fds()
    memory = Memory.init(tmp_path / "mem")
    memory.ls()
    memory.ls()
    feed = memory.catalog._feed
    assert feed is not None and feed.trusted and feed.users == 1
    monkeypatch.setattr(weakref.finalize, "_shutdown", True)  # as at the interpreter's exit, once weakref's hook ran
    memory.close()
    assert feed.users == 0 and feeds.current(memory.root.resolve()) is None and _inotify_fds() <= before


def test_thousands_of_memory_objects_never_exhaust_the_watch_limits(tmp_path):
    # more Memory objects than Linux's default inotify instances per user (128), twice over: were an instance
    # kept per object, this would fail part way; the count after every one says at once that none is. What the
    # process held before (another test's, in this pytest process) is the baseline, not this test's to judge:
    # it may end meanwhile, as its memory's finalizer runs when the collector does.
    before = _inotify_fds()
    roots = [Memory.init(tmp_path / f"m{n}").root for n in range(40)]
    for n in range(300):
        memory = Memory(roots[n % len(roots)])
        memory.ls()
        memory.ls()  # the second call takes the feed
        assert memory.catalog._feed.trusted
        assert _inotify_fds() <= max(before, 1)  # one instance for every feed of the process
    del memory
    held = {key.resolve() for key in feeds._feeds.snapshot()}
    assert _inotify_fds() <= before and not held & {r.resolve() for r in roots}


def test_search_takes_the_feed_too(watched, monkeypatch):
    import fsmem.search.index as search_index

    assert watched.search("walrus").hits == []
    watched.search("walrus")  # the search consumer's first catch-up walks; from now on it takes deltas
    walked = []
    real = search_index.SearchIndex._refresh
    monkeypatch.setattr(search_index.SearchIndex, "_refresh", lambda self, conn: walked.append(1) or real(self, conn))
    (watched.root / "topics" / "w.md").write_text("# Walrus\n- walrus tusks: ivory, up to a metre\n")
    assert [h.path for h in watched.search("walrus tusks").hits] == ["topics/w.md"]
    _truncate_and_write(watched.root / "topics" / "w.md", "# Seal\n- seal whiskers: long\n")
    assert watched.search("walrus tusks").hits == []
    assert walked == []


def test_a_memory_that_only_searches_takes_the_feed_from_its_second_search(tmp_path, monkeypatch):
    import fsmem.search.index as search_index

    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "w.md").write_text("# Walrus\n- walrus tusks: ivory\n")
    memory.search("walrus")
    memory.search("walrus")
    assert memory.catalog._feed is not None and memory.catalog._feed.trusted, memory.catalog._feed.reason
    memory.search("walrus")  # the search consumer has walked once; now only deltas
    walked = []
    real = search_index.SearchIndex._refresh
    monkeypatch.setattr(search_index.SearchIndex, "_refresh", lambda self, conn: walked.append(1) or real(self, conn))
    (memory.root / "topics" / "s.md").write_text("# Seal\n- seal whiskers: long\n")
    assert [h.path for h in memory.search("seal whiskers").hits] == ["topics/s.md"]
    assert walked == []
    memory.close()
    assert feeds.current(memory.root) is None


def test_a_forked_child_walks_and_leaves_its_parents_feed_alone(watched):
    pid = os.fork()
    if pid == 0:  # the child: the shared queue is not its to read
        try:
            (watched.root / "topics" / "child.md").write_text(DOC.format(title="Child"))
            ok = "topics/child.md" in _titles(watched) and not watched.catalog._feed.trusted
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    (watched.root / "topics" / "parent.md").write_text(DOC.format(title="Parent"))
    walks = _walks(watched)
    assert {"topics/child.md", "topics/parent.md"} <= set(_titles(watched))
    assert watched.catalog._feed.trusted and _walks(watched) == walks


def test_context_is_kept_while_nothing_changed_and_made_again_after_an_edit(watched):
    first = watched.context()
    assert watched.context().text == first.text
    profile = watched.root / "profile" / "identity.md"
    _truncate_and_write(profile, profile.read_text() + "\n- standing rule: answer in French\n")
    assert "answer in French" in watched.context().text
    (watched.root / "INDEX.md").write_text("# Index\n\n- [A](topics/a.md): the letter\n")
    text = watched.context().text
    assert "the letter" in text and "answer in French" in text


# -- the catalogs of one memory in a process share the feed's work --------------------------------------


def test_another_memory_of_the_root_takes_the_running_feed_at_its_first_call_and_walks_nothing(watched):
    """A server holds one `Memory` per token's view: each of them walking the whole memory on its first
    calls cost 32 walks of 10,000 files on a server's first seconds."""
    views = [Memory(watched.root, agent=None) for _ in range(4)]
    _atomic_rename(watched.root / "topics" / "a.md", DOC.format(title="Edited"))
    for view in views:
        assert _titles(view) == {"topics/a.md": "Edited"}
        assert view.catalog._feed is watched.catalog._feed
    (watched.root / "topics" / "b.md").write_text(DOC.format(title="B"))
    assert _titles(views[-1]) == _titles(views[0]) == {"topics/a.md": "Edited", "topics/b.md": "B"}
    assert [view.catalog.rows.walks for view in views] == [0, 0, 0, 0]
    for view in views:
        view.close()


def test_a_row_stored_too_fresh_is_looked_at_again_by_whichever_view_is_asked_next(watched):
    from fsmem.store.cache import cache_path, connect

    other = Memory(watched.root)
    other.ls()
    (watched.root / "topics" / "fresh.md").write_text(DOC.format(title="Fresh"))
    watched.ls()  # stores the new row marked racy (written within the racy window)

    def racy() -> int:
        with connect(cache_path(watched.root)) as conn:
            return conn.execute("SELECT racy FROM files WHERE path = 'topics/fresh.md'").fetchone()[0]

    assert racy() == 1
    time.sleep(1.1)
    other.ls()  # the other view takes the second look the first one asked for
    assert racy() == 0
    other.close()


def test_a_cache_made_anew_under_a_running_feed_is_walked_whole(watched):
    from fsmem.store.cache import cache_path

    (watched.root / "topics" / "b.md").write_text(DOC.format(title="B"))
    assert len(_titles(watched)) == 2
    for suffix in ("", "-wal", "-shm"):
        Path(f"{cache_path(watched.root)}{suffix}").unlink(missing_ok=True)
    assert _titles(watched) == {"topics/a.md": "A", "topics/b.md": "B"}
    assert _titles(Memory(watched.root)) == {"topics/a.md": "A", "topics/b.md": "B"}


def test_a_grep_of_many_files_on_the_feed_subtracts_superseded_lines_without_a_stat_per_file(watched, monkeypatch):
    """A grep of a common word matched 9,000 of 10,000 files, and checked each file's row against its stamp."""
    from fsmem.store.cache import MetaCache

    root = watched.root / "topics"
    for n in range(80):
        tail = "\n## Superseded\n- walrus: old value\n" if n % 4 == 0 else ""
        (root / f"w{n}.md").write_text(f"---\ntitle: W{n}\n---\n# W{n}\n\n- walrus: seen {n}\n{tail}")

    def totals(memory):
        return memory.grep("walrus").total, memory.grep("walrus", include_superseded=True).total

    watched.grep("walrus")
    time.sleep(1.1)  # rows stored within a second of their file's write are checked again: settled now
    checked: list[int] = []  # rows looked up to be checked against their files' stamps
    real = MetaCache.superseded
    monkeypatch.setattr(MetaCache, "superseded", lambda self, paths: checked.append(len(paths)) or real(self, paths))
    assert totals(watched) == (80, 100)
    assert not any(checked)
    monkeypatch.undo()
    _truncate_and_write(root / "w1.md", "---\ntitle: W1\n---\n# W1\n\n## Superseded\n- walrus: gone\n")
    (root / "w0.md").unlink()
    assert totals(watched) == totals(Memory(watched.root)) == (78, 98)


def test_an_observer_that_stops_is_said_once_and_every_call_walks(tmp_path, monkeypatch):
    monkeypatch.setattr(feeds, "SOURCE", "observer")
    memory = next(_watched(tmp_path))
    feed = memory.catalog._feed
    observer = feed._observed._observer
    observer.stop()
    observer.join()
    (memory.root / "topics" / "b.md").write_text(DOC.format(title="B"))
    walks = _walks(memory)
    assert _titles(memory) == {"topics/a.md": "A", "topics/b.md": "B"}  # no cookie can be seen: it walks
    assert not feed.trusted and _walks(memory) == walks + 1
    assert _titles(memory)["topics/b.md"] == "B" and _walks(memory) == walks + 2
    log = (memory.root / ".fsmem" / "logs" / "feed.jsonl").read_text()
    assert log.count("the observer stopped") == 1
    assert not list((memory.root / ".fsmem" / "cookies").iterdir())  # no cookie left behind
    memory.close()
