"""The change feed's periodic check (`fsmem.store.feed_check`): a change no event reported is found by a walk
the feed takes off every question's path; a check over an unchanged memory costs the caches nothing."""

from __future__ import annotations

import math
import os
import sys
import threading
import time

import pytest

from fsmem import Memory
from fsmem.query import grep_cache
from fsmem.store import feed_check

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the feed reads inotify")

DOC = "---\ntitle: {title}\n---\n# {title}\n\n- walrus: {text}\n"


@pytest.fixture
def fed(tmp_path):
    """A Memory on a trusted feed, whose caches (rows, search index, grep outputs) are all caught up once,
    and whose feed checks only when a test asks (`verify_seconds` math.inf parks the check's thread)."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text(DOC.format(title="A", text="before"))
    memory.ls()
    memory.ls()
    feed = memory.catalog._feed
    assert feed is not None and feed.trusted, feed.reason
    feed.verify_seconds = math.inf
    memory.search("walrus")
    memory.grep("walrus", fixed_strings=True)
    yield memory
    memory.close()
    grep_cache.forget(memory.root)


def _write_behind_the_feed(memory: Memory, outside, text: str) -> None:
    """Write topics/a.md through a hard link outside the memory: the file changes, its folder gets no event."""
    if not outside.exists():
        os.link(memory.root / "topics" / "a.md", outside)
    with open(outside, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(DOC.format(title="Behind", text=text))


def _seen(memory: Memory) -> tuple[str | None, list[str], list[str]]:
    """What each cache answers about topics/a.md: its title (rows), search hits, grep lines."""
    title = memory.ls("topics").entries[0].title
    found = [hit.path for hit in memory.search("smuggled").hits]
    lines = [m.text for m in memory.grep("walrus", fixed_strings=True).matches]
    return title, found, lines


def test_a_change_no_event_reported_is_found_by_the_check(fed, tmp_path):
    _write_behind_the_feed(fed, tmp_path / "elsewhere.md", "smuggled")
    assert _seen(fed) == ("A", [], ["- walrus: before"])  # no event came: every cache answers as before
    assert fed.catalog._feed.check() == ["topics/a.md"]
    assert _seen(fed) == ("Behind", ["topics/a.md"], ["- walrus: smuggled"])


def test_the_checks_thread_finds_it_within_the_period(fed, tmp_path):
    feed = fed.catalog._feed
    checks = feed.checker.checks
    _write_behind_the_feed(fed, tmp_path / "elsewhere.md", "smuggled")
    feed.verify_seconds = 0.2  # the thread takes the new period at once
    deadline = time.monotonic() + 30
    while feed.checker.checks < checks + 2 and time.monotonic() < deadline:  # the thread's own turns
        feed.checker._wake.wait(0.05)
    assert feed.checker.checks >= checks + 2
    feed.verify_seconds = math.inf
    assert _seen(fed) == ("Behind", ["topics/a.md"], ["- walrus: smuggled"])


def test_a_check_of_an_unchanged_memory_leaves_every_cache_as_it_was(fed):
    feed = fed.catalog._feed
    index = fed.search_index
    kept = grep_cache.kept_for(fed.root)
    assert kept is not None and len(kept.entries) == 1
    generation, entries = kept.generation, dict(kept.entries)
    rows_walks, index_walks, indexed = fed.catalog.rows.walks, index.stats["walks"], index.stats["indexed"]
    feed.verify_seconds = 1e-6  # every call now comes more than a period after the last check of its cache
    try:
        for _ in range(3):
            assert feed.check() == []
            assert _seen(fed) == ("A", [], ["- walrus: before"])
    finally:
        feed.verify_seconds = math.inf
    assert feed.checker.checks >= 3
    assert kept.generation == generation and dict(kept.entries) == entries  # no grep output let go
    assert fed.catalog.rows.walks == rows_walks  # the rows walked nothing
    assert (index.stats["walks"], index.stats["indexed"]) == (index_walks, indexed)  # nor the search index


def test_a_call_never_waits_for_the_checks_walk(fed, tmp_path):
    """The check's walk holds its lock from start to end: calls made meanwhile answer without it."""
    feed = fed.catalog._feed
    _write_behind_the_feed(fed, tmp_path / "elsewhere.md", "smuggled")
    answers: list = []
    with feed.checker._lock:  # a check is walking
        caller = threading.Thread(target=lambda: answers.append(_seen(fed)), daemon=True)
        caller.start()
        caller.join(60)
        assert answers == [("A", [], ["- walrus: before"])]
    assert feed.check() == ["topics/a.md"]


def test_a_feed_whose_check_stopped_falls_back_to_walking_every_period(fed, tmp_path):
    """A forked child has no check thread (threads do not survive a fork): its consumers walk, as before."""
    feed = fed.catalog._feed
    feed.checker.stop()
    walks = fed.catalog.rows.walks
    _write_behind_the_feed(fed, tmp_path / "elsewhere.md", "smuggled")
    feed.verify_seconds = 1e-6
    try:
        assert _seen(fed) == ("Behind", ["topics/a.md"], ["- walrus: smuggled"])
    finally:
        feed.verify_seconds = math.inf
    assert fed.catalog.rows.walks == walks + 1


def test_walk_with_walk_names_what_changed_appeared_and_went(tmp_path):
    (tmp_path / "a.md").write_text("a")
    (tmp_path / "b.md").write_text("b")
    before = feed_check.take(tmp_path)
    assert before is not None and set(before) == {"a.md", "b.md"}
    with open(tmp_path / "a.md", "a") as handle:
        handle.write("more")
    (tmp_path / "b.md").unlink()
    (tmp_path / "c.md").write_text("c")
    after = feed_check.take(tmp_path)
    assert after is not None
    assert feed_check.changed(before, after) == ["a.md", "b.md", "c.md"]
    assert feed_check.changed(after, feed_check.take(tmp_path) or {}) == []


def test_a_paced_walk_pauses_between_slices_and_stops_when_told(tmp_path, monkeypatch):
    monkeypatch.setattr(feed_check, "SLICE", 2)
    for n in range(7):
        (tmp_path / f"n{n}.md").write_text(str(n))
    pauses: list[int] = []
    assert feed_check.take(tmp_path, lambda: pauses.append(1) is not None) is not None
    assert len(pauses) == 3  # after files 2, 4 and 6
    assert feed_check.take(tmp_path, lambda: True) is None
