"""`watch`: keep the metadata cache and INDEX.md current while humans and agents edit the files.

watchdog (imported here only) reports file events; bursts are coalesced until
the memory has been still for `settle` seconds, then the files named are
re-read into the cache (a folder event triggers a full rescan, which also
forgets deleted files). Events under `.fsmem/`, hidden files, fsmem's own
temporary files and editor swap and backup files are ignored. The loop ends
cleanly when `stop` is set (the CLI sets it on Ctrl-C and SIGTERM) and raises
RootNotFound when the memory root disappears.
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
from fsmem.store.paths import is_memory_path, is_visible_folder, resolve

if TYPE_CHECKING:
    from fsmem.store.catalog import Catalog

INDEX_FILE = "INDEX.md"
SESSIONS_DIR = "sessions/"
_SWAP_SUFFIXES = (".swp", ".swo", ".swx", ".tmp", "~", ".bak", ".orig")
_IGNORED_EVENTS = {"opened", "closed_no_write"}
_POLL_SECONDS = 0.1


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
    """Memory-relative paths reported since the last flush, and when the last one came."""

    def __init__(self, root: str):
        self.root = root.rstrip(os.sep) + os.sep
        self.lock = threading.Lock()
        self.files: set[str] = set()
        self.rescan = False
        self.last_event = 0.0
        self.last_session_change: float | None = None  # for --consolidate

    def add(self, raw_path: str | bytes, is_directory: bool) -> None:
        path = os.fsdecode(raw_path)
        if not path.startswith(self.root):
            return
        rel = path[len(self.root) :].replace(os.sep, "/")
        if not rel or is_ignored(rel):
            return
        if not is_directory and not is_memory_path(rel):
            return
        with self.lock:
            if is_directory:
                self.rescan = True
            else:
                self.files.add(rel)
            self.last_event = time.monotonic()
            if rel.startswith(SESSIONS_DIR) or (is_directory and SESSIONS_DIR.startswith(rel + "/")):
                self.last_session_change = self.last_event

    def take_sessions(self, after: float) -> bool:
        """True once session notes changed and then stayed still for `after` seconds."""
        with self.lock:
            if self.last_session_change is None or time.monotonic() - self.last_session_change < after:
                return False
            self.last_session_change = None
            return True

    def retry(self, files: list[str], *, after: float, quiet: float) -> None:
        """Look at `files` again in `after` seconds (they were too fresh to cache)."""
        with self.lock:
            self.files.update(files)
            self.last_event = max(self.last_event, time.monotonic() + after - quiet)

    def take(self, quiet: float) -> tuple[set[str], bool] | None:
        """The pending changes once `quiet` seconds have passed without a new one, else None."""
        with self.lock:
            if not self.files and not self.rescan:
                return None
            if time.monotonic() - self.last_event < quiet:
                return None
            files, rescan = self.files, self.rescan
            self.files, self.rescan = set(), False
            return files, rescan


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
) -> WatchStats:
    """Watch the memory at `root` until `stop` is set; returns what was done.

    After each burst of changes, once the memory has been still for `settle`
    seconds, the catalog re-reads the files named and `write_index` (None for
    a read-only agent) regenerates INDEX.md. With `consolidate`, it is called
    once session notes have changed and then stayed still for
    `consolidate_after` seconds.

    `ready` is set once the observer runs and the cache has been brought up to
    date, so a caller (or a test) knows that later edits will be seen.
    `on_change` is called with the changed files (None after a rescan) once the
    cache has them: Memory keeps the search index in step through it.
    """
    import warnings

    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    # watchdog's inotify backend warns when folders appear faster than it registers them; the events still arrive.
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)

    say = log or (lambda message: None)
    stop = stop or threading.Event()
    root = Path(root)
    changes = _Changes(str(root))
    stats = WatchStats()

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event) -> None:
            if event.event_type in _IGNORED_EVENTS:
                return
            if event.is_directory and event.event_type == "modified":
                return  # a file inside changed; its own event follows
            changes.add(event.src_path, event.is_directory)
            dest = getattr(event, "dest_path", "")
            if dest:
                changes.add(dest, event.is_directory)

    observer = Observer()
    observer.schedule(Handler(), str(root), recursive=True)
    observer.start()
    try:
        files = catalog.entries()
        extra = f"; consolidating {consolidate_after:g} s after session notes change" if consolidate else ""
        say(f"watching {root} ({len(files)} memory files; settle time {settle:g} s{extra})")
        if write_index is not None:
            _write_index(write_index, stats, say)
        if ready is not None:
            ready.set()
        while not stop.wait(_POLL_SECONDS):
            if not os.path.isdir(root):
                raise RootNotFound(f"the memory root {root} disappeared (deleted, moved or unmounted); watch stopped")
            pending = changes.take(settle)
            if pending is not None:
                racy = _flush(root, catalog, *pending, stats=stats, say=say)
                if on_change is not None:
                    _notify(on_change, None if pending[1] else set(pending[0]), stats, say)
                if racy:
                    changes.retry(racy, after=RACY_NS / 1e9, quiet=settle)
                if write_index is not None and (pending[1] or pending[0] - {INDEX_FILE}):
                    _write_index(write_index, stats, say)
            if consolidate is not None and changes.take_sessions(consolidate_after):
                _consolidate(consolidate, stats, say, changes)
    finally:
        observer.stop()
        observer.join(timeout=5)
    say(f"stopped: {stats.flushes} update(s), {stats.refreshed} file(s) re-read, {stats.removed} forgotten")
    return stats


def _flush(
    root: Path, catalog: Catalog, files: set[str], rescan: bool, *, stats: WatchStats, say: Callable[[str], None]
) -> list[str]:
    """Bring the cache up to date for the changed paths; returns those too recent to be stored yet."""
    stats.flushes += 1
    stats.last_flush = time.monotonic()
    try:
        if rescan:
            total = len(catalog.entries())
            stats.rescans += 1
            stats.refreshed += len(files)
            say(f"folders changed: rescanned {total} memory files")
            return _too_recent(root, files)
        present: list[str] = []
        gone: list[str] = []
        for rel in sorted(files):
            (present if _is_memory_file(root, rel) else gone).append(rel)
        for rel in list(present):
            try:
                catalog.get(root / rel)
            except (OSError, FsmemError):  # vanished, or cannot be read: not in the cache
                present.remove(rel)
                gone.append(rel)
        if catalog.cache is not None and gone:
            catalog.cache.forget(gone)
        stats.refreshed += len(present)
        stats.removed += len(gone)
        parts = []
        if present:
            parts.append(f"re-read {_names(present)}")
        if gone:
            parts.append(f"forgot {_names(gone)}")
        say("; ".join(parts))
        return _too_recent(root, present)
    except OSError as exc:
        stats.errors.append(str(exc))
        say(f"error while updating the cache: {exc}")
        return []


def _is_memory_file(root: Path, rel: str) -> bool:
    """True when `rel` is a memory file by the whole containment rule (a link out of the memory is not)."""
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
        with changes.lock:  # try again after another quiet spell
            changes.last_session_change = time.monotonic()
        return
    except Exception as exc:
        stats.errors.append(str(exc))
        say(f"consolidation failed: {exc}")
        return
    stats.consolidations += 1
    summary = report.to_text().splitlines()[-1] if hasattr(report, "to_text") else "done"
    say(f"consolidated: {summary}")


def _too_recent(root: Path, rels) -> list[str]:
    """Files modified inside the cache's racy window: stored only once they are older."""
    threshold = time.time_ns() - RACY_NS
    recent = []
    for rel in rels:
        try:
            if os.stat(root / rel).st_mtime_ns >= threshold:
                recent.append(rel)
        except OSError:
            pass
    return recent


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
