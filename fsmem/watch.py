"""`watch`: keep the metadata cache and INDEX.md current while humans and agents edit the files.

It runs on the memory's change feed (`fsmem.store.feed`), the one source of
events of the process: the same feed a server or an MCP session in this
process answers from. Bursts of changes are coalesced until the memory has
been still for `settle` seconds; then the catalog catches up with exactly
what changed (a folder made, moved or deleted is walked again), the search
index likewise, and INDEX.md is regenerated. Events under `.fsmem/`, hidden
files, fsmem's own temporary files and editor swap and backup files are
ignored. Where the feed cannot be trusted (a network or FUSE file system, no
inotify, a watcher that failed) the memory is walked every few seconds
instead, and a change is whatever the walk finds. The loop ends cleanly when
`stop` is set (the CLI sets it on Ctrl-C and SIGTERM) and raises RootNotFound
when the memory root disappears.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem.errors import FsmemError, RootNotFound
from fsmem.store.cache import RACY_NS
from fsmem.store.files import TEMP_PREFIX
from fsmem.store.paths import is_memory_path, is_visible_folder

if TYPE_CHECKING:
    from fsmem.store.catalog import Catalog
    from fsmem.store.feed import Delta

INDEX_FILE = "INDEX.md"
SESSIONS_DIR = "sessions/"
CONSUMER = "watch"
_SWAP_SUFFIXES = (".swp", ".swo", ".swx", ".tmp", "~", ".bak", ".orig")
_POLL_SECONDS = 0.1
_WALK_SECONDS = 2.0  # without trusted events: the memory is walked this often at least (more when walks are slow)


def is_ignored(rel: str) -> bool:
    """True for paths watch never acts on: machine state, hidden files, temp and swap files, names with control characters."""
    if not is_visible_folder(rel):
        return True
    name = rel.rsplit("/", 1)[-1]
    return (
        name.startswith((TEMP_PREFIX, "#", "~")) or name.endswith(_SWAP_SUFFIXES) or name == "4913"  # vim's probe file
    )


@dataclass
class WatchStats:
    """What one watch run did, for the log line at exit and for tests."""

    flushes: int = 0
    refreshed: int = 0
    removed: int = 0
    rescans: int = 0
    index_writes: int = 0
    consolidations: int = 0
    last_flush: float = 0.0
    errors: list[str] = field(default_factory=list)


class _Changes:
    """What changed since the last flush (files, folders, or everything), and when the last change came."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()
        self.everything = False  # a walk found changes no event named
        self.last_change = 0.0
        self.last_session_change: float | None = None  # for --consolidate

    def add(self, delta: Delta) -> bool:
        """Take the changes of one delta of the feed (the paths watch acts on); True when there were any."""
        files = {rel for rel in delta.files if is_memory_path(rel) and not is_ignored(rel)}
        folders = {rel for rel in delta.folders if not is_ignored(rel)}
        if not files and not folders:
            return False
        self.files |= files
        self.folders |= folders
        self.changed(any(_in_sessions(rel) for rel in files | folders))
        return True

    def changed(self, sessions: bool) -> None:
        self.last_change = time.monotonic()
        if sessions:
            self.last_session_change = self.last_change

    def take(self, quiet: float) -> tuple[set[str], set[str], bool] | None:
        """(files, folders, everything) once `quiet` seconds have passed without a change, else None."""
        if not self.files and not self.folders and not self.everything:
            return None
        if time.monotonic() - self.last_change < quiet:
            return None
        taken = (self.files, self.folders, self.everything)
        self.files, self.folders, self.everything = set(), set(), False
        return taken

    def take_sessions(self, after: float) -> bool:
        """True once session notes changed and then stayed still for `after` seconds."""
        if self.last_session_change is None or time.monotonic() - self.last_session_change < after:
            return False
        self.last_session_change = None
        return True


def _in_sessions(rel: str) -> bool:
    return rel.startswith(SESSIONS_DIR) or SESSIONS_DIR.startswith(rel + "/")


def watch(
    root: Path,
    catalog: Catalog,
    *,
    settle: float,
    log: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    ready: threading.Event | None = None,
    write_index: Callable[[], bool] | None = None,
    consolidate: Callable[[], Any] | None = None,
    consolidate_after: float,
    on_change: Callable[[set[str] | None], Any] | None = None,
    wait: Callable[[threading.Event, float], bool] | None = None,
) -> WatchStats:
    """Watch the memory at `root` until `stop` is set; returns what was done.

    After each burst of changes, once the memory has been still for `settle`
    seconds, the catalog catches up with what changed and `write_index` (None
    for a read-only agent) regenerates INDEX.md. With `consolidate`, it is
    called once session notes have changed and then stayed still for
    `consolidate_after` seconds.

    `ready` is set once the feed runs and the cache has been brought up to
    date, so a caller (or a test) knows that later edits will be seen.
    `on_change` is called with the changed files (None when folders changed,
    or a walk found the changes) once the cache has them: Memory keeps the
    search index in step through it.
    `wait(stop, seconds)` spends the time between two looks at the feed (default `stop.wait(seconds)`): the CLI
    answers one-shot reads meanwhile (`fsmem.cli.answering`), in this thread; it returns True once `stop` is set.
    """
    say = log or (lambda message: None)
    stop = stop or threading.Event()
    root = Path(root)
    changes = _Changes()
    stats = WatchStats()
    feed = catalog.hold_feed()
    if feed is not None:
        feed.catch_up(CONSUMER, lambda delta: None)  # from now on, its deltas are what changed since this point
    files = len(catalog.entries())  # a count: 100k files' metas held for the watch made every full collection of
    # the garbage collector in this process (during the one-shot reads it answers) 2-3 times slower
    extra = f"; consolidating {consolidate_after:g} s after session notes change" if consolidate else ""
    how = "" if feed is not None and feed.trusted else f"; walking every {_WALK_SECONDS:g} s ({_why(feed)})"
    say(f"watching {root} ({files} memory files; settle time {settle:g} s{extra}{how})")
    if write_index is not None:
        _write_index(write_index, stats, say)
    if ready is not None:
        ready.set()
    walker = _Walker(catalog)
    settle_again = 0.0  # when rows stored too fresh get their second look (the catalog asked the feed for it)
    pause = wait or (lambda stop, seconds: stop.wait(seconds))
    while not pause(stop, _POLL_SECONDS) and not stop.is_set():  # a `wait` that returns early still stops
        if not os.path.isdir(root):
            raise RootNotFound(f"the memory root {root} disappeared (deleted, moved or unmounted); watch stopped")
        if feed is not None and feed.trusted:
            delta = feed.catch_up(CONSUMER, lambda delta: delta)
            if delta.full:  # overflowed, or the period's check: a walk says whether anything changed
                walker.walk_now(changes, whole=True)
            else:
                changes.add(delta)
        else:
            walker.maybe_walk(changes)
        pending = changes.take(settle)
        if pending is not None:
            _flush(root, catalog, *pending, stats=stats, say=say)
            settle_again = time.monotonic() + RACY_NS / 1e9 + _POLL_SECONDS
            if on_change is not None:
                folders_or_all = pending[1] or pending[2]
                _notify(on_change, None if folders_or_all else set(pending[0]), stats, say)
            if write_index is not None and (pending[1] or pending[2] or pending[0] - {INDEX_FILE}):
                _write_index(write_index, stats, say)
        elif settle_again and time.monotonic() >= settle_again:
            settle_again = 0.0
            _quietly(catalog.sync, stats, say)
        if consolidate is not None and changes.take_sessions(consolidate_after):
            _consolidate(consolidate, stats, say, changes)
    say(f"stopped: {stats.flushes} update(s), {stats.refreshed} file(s) re-read, {stats.removed} forgotten")
    return stats


class _Walker:
    """Changes found by walking: where events cannot be trusted, and after an overflow or a period's check."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.next_walk = 0.0
        self.version = catalog.version()

    def walk_now(self, changes: _Changes, *, whole: bool = False) -> None:
        """Walk and see whether the rows changed: `whole` walks even where the catalog trusts the feed (after
        an overflow, or the period's check); otherwise the catalog catches up as it does (untrusted: a walk)."""
        started = time.monotonic()
        if whole:
            found = self.catalog.rescan()
            self.version = self.catalog.version()
        else:
            version = self.catalog.version()
            found, self.version = version != self.version, version
        took = time.monotonic() - started
        self.next_walk = time.monotonic() + max(_WALK_SECONDS, 10 * took)
        if found:
            changes.everything = True
            changes.changed(sessions=True)

    def maybe_walk(self, changes: _Changes) -> None:
        if time.monotonic() >= self.next_walk:
            self.walk_now(changes)


def _why(feed: Any) -> str:
    return "no change feed" if feed is None else feed.reason


def _flush(
    root: Path,
    catalog: Catalog,
    files: set[str],
    folders: set[str],
    everything: bool,
    *,
    stats: WatchStats,
    say: Callable[[str], None],
) -> None:
    """Bring the cache up to date with what changed (the catalog catches up with the feed), and say what."""
    stats.flushes += 1
    stats.last_flush = time.monotonic()
    if not _quietly(catalog.sync, stats, say):
        return
    if folders or everything:
        stats.rescans += 1
        stats.refreshed += len(files)
        where = ", ".join(sorted(folders)[:5]) + (f" and {len(folders) - 5} more" if len(folders) > 5 else "")
        say(f"folders changed: rescanned {where}" if folders else "changes found by a walk: rescanned the memory")
        if not files:
            return
    present = sorted(rel for rel in files if _is_memory_file(root, rel))
    gone = sorted(files.difference(present))
    stats.refreshed += len(present)
    stats.removed += len(gone)
    parts = []
    if present:
        parts.append(f"re-read {_names(present)}")
    if gone:
        parts.append(f"forgot {_names(gone)}")
    say("; ".join(parts))


def _quietly(action: Callable[[], Any], stats: WatchStats, say: Callable[[str], None]) -> bool:
    try:
        action()
        return True
    except (OSError, FsmemError) as exc:
        stats.errors.append(str(exc))
        say(f"error while updating the cache: {exc}")
        return False


def _is_memory_file(root: Path, rel: str) -> bool:
    """True when `rel` is a memory file by the whole containment rule (a link out of the memory is not)."""
    from fsmem.store.paths import resolve

    try:
        return resolve(root, rel, want="file").is_file()
    except FsmemError:
        return False


def _notify(on_change: Callable[[set[str] | None], Any], files: set[str] | None, stats: WatchStats, say) -> None:
    try:
        on_change(files)
    except Exception as exc:  # noqa: BLE001 - a failed index update must not stop the watcher; searches catch up
        stats.errors.append(str(exc))
        say(f"error while updating the search index: {exc}")


def _write_index(write_index: Callable[[], bool], stats: WatchStats, say: Callable[[str], None]) -> None:
    try:
        if write_index():
            stats.index_writes += 1
            say("INDEX.md regenerated")
    except Exception as exc:  # a bad file must not stop the watcher; say what happened
        stats.errors.append(str(exc))
        say(f"could not regenerate INDEX.md: {exc}")


def _consolidate(
    consolidate: Callable[[], Any], stats: WatchStats, say: Callable[[str], None], changes: _Changes
) -> None:
    from fsmem.errors import LockTimeout

    try:
        report = consolidate()
    except LockTimeout as exc:
        say(f"consolidation deferred: {exc}")
        changes.last_session_change = time.monotonic()  # try again after another quiet spell
        return
    except Exception as exc:
        stats.errors.append(str(exc))
        say(f"consolidation failed: {exc}")
        return
    stats.consolidations += 1
    summary = report.to_text().splitlines()[-1] if hasattr(report, "to_text") else "done"
    say(f"consolidated: {summary}")


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
