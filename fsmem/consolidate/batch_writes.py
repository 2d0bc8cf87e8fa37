"""How a consolidation writes files: a batch at a time, fsynced together, each one guarded, every one counted.

A batch is written under the write lock (`fsmem.consolidate.apply`); `Writes` counts what it wrote, for the
crash tests: FSMEM_CONSOLIDATE_KILL_AFTER=N (a real SIGKILL) or `crash_after` (in process) end the run after
write N.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fsmem.consolidate import plan as C
from fsmem.store import beneath


class SimulatedCrash(BaseException):
    """Raised by the in-process crash hook (tests): like a SIGKILL, nothing after it runs and nothing is cleaned up."""


_crash_after: int | None = None  # in-process counterpart of FSMEM_CONSOLIDATE_KILL_AFTER, for tests


@contextlib.contextmanager
def crash_after(writes: int | None) -> Iterator[None]:
    """Within this block, a consolidation raises SimulatedCrash right after its `writes`-th file write."""
    global _crash_after
    saved, _crash_after = _crash_after, writes
    try:
        yield
    finally:
        _crash_after = saved


class Writes:
    """Counts file writes; with FSMEM_CONSOLIDATE_KILL_AFTER=N the process SIGKILLs itself after write N."""

    def __init__(self) -> None:
        raw = os.environ.get(C.KILL_ENV, "")
        self.kill_after = int(raw) if raw.isdigit() else None
        self.crash_after = _crash_after
        self.count = 0

    def done(self) -> None:
        self.count += 1
        if self.kill_after is not None and self.count >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.crash_after is not None and self.count >= self.crash_after:
            raise SimulatedCrash(self.count)


def write_batch(
    root: Path,
    batch: list[tuple[Path, bytes, str, bytes | None]],
    writes: Writes,
    replaced: list[tuple[str, int, str]] | None = None,
    changed: list[str] | None = None,
    refused: list[tuple[str, int, str]] | None = None,
) -> list[tuple[Path, bytes, str, str]]:
    """Replace each file through a temporary file in its folder: all written, fsynced together, then renamed.

    The same guarantee as one atomic write per file (a reader or a crash sees
    old or new bytes, and new bytes are on disk before their name is), with
    the fsyncs overlapped instead of one after another. Each file is placed
    below the root through no link that leaves it (`fsmem.store.beneath`): a
    document's link in memory is written through, a generated file's (a
    history file) is replaced by the file, and `replaced` told. Each file
    written comes back with the memory path it landed on (a link's target).

    Each file was read (under the write lock) as the bytes in its fourth item (None: no file); a person's editor
    saves without that lock, so a memory file that holds anything else when it is replaced is not written, its
    path added to `changed`, and what was saved kept (`beneath.Staged.publish_if`). With `refused`, a memory file
    whose folder the system will not let this process write (a person made it read-only) is left, and told there,
    the others written.
    """
    staged: list[tuple[beneath.Staged, Path, bytes, str, tuple[bytes | None] | None]] = []
    try:
        for full, data, rel, read in batch:
            generated = beneath.is_generated(rel)
            target = beneath.place(root, rel, generated=generated)
            try:
                staged.append((beneath.Staged(target, data), full, data, rel, None if generated else (read,)))
            except PermissionError as exc:
                target.folder.close()
                if generated or refused is None:
                    raise
                refused.append((rel, 1, f"its folder may not be written ({exc.strerror}): left as it is"))
                continue
            except BaseException:
                target.folder.close()
                raise
            if generated and target.link is not None and replaced is not None:
                replaced.append(
                    (
                        rel,
                        1,
                        "was a symbolic link; it is generated, so it was replaced by a regular file and the "
                        "link's target left as it was",
                    )
                )
        if staged:
            list(_pool().map(lambda s: s[0].sync(), staged))
        done = []
        for stage, full, data, rel, guard in staged:
            if guard is None:
                stage.publish()
            elif not stage.publish_if(guard[0]):
                if changed is not None:
                    changed.append(rel)
                continue
            done.append((full, data, rel, stage.place.inside))
            writes.done()
        for stage, *_ in staged:
            stage.place.folder.sync()
        return done
    finally:
        for stage, *_ in staged:
            if stage.fd is not None:  # not published: an error came first
                stage.discard()
            stage.place.folder.close()


_fsync_pool: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """Threads that fsync a batch of files at once (the disk then commits them together)."""
    global _fsync_pool
    if _fsync_pool is None:
        _fsync_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fsmem-fsync")
    return _fsync_pool
