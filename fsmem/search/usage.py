"""How often search and recall returned each row, from the retrieval log, read once and then only as it grows.

Every agent-facing call appends a line to `.fsmem/logs/retrieval.jsonl`, so a
count made by reading the log whole was made again at every search of a busy
server: up to two 8 MiB files of JSON per search, growing with the hours. Here
each memory's counts are kept per process with how far each file was read; a
search reads only the lines appended since (a line still being written is
left for the next one), and a rotation (the file renamed to `.1`, the old `.1`
dropped) moves the current file's counts over and subtracts the dropped ones.
Anything else unexpected (a file truncated, replaced or gone) reads both files
again from the start.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from fsmem.store import retrieval_log

TOOLS = ("search", "recall")


class Usage(dict[str, int]):
    """`path:line` -> how often it was returned, and `top`, the highest count (0 when empty); `by_path` holds
    the same counts as path -> {line: count}, so a ranking looks a row up by its path and line without
    spelling its location (a pool of 2,500 rows, most of whose files were never returned).

    The one object of a memory is updated in place by later searches; readers only look up keys and
    `top` (both safe beside an update), and never iterate it."""

    top: int = 0

    def __init__(self) -> None:
        super().__init__()
        self.by_path: dict[str, dict[int, int]] = {}

    def put(self, location: str, count: int) -> None:
        """Set `location`'s count (0 or less: drop it), in both spellings."""
        place = _place(location)
        if count > 0:
            self[location] = count
            if place is not None:
                lines = self.by_path.get(place[0])
                if lines is None:
                    lines = self.by_path[place[0]] = {}
                lines[place[1]] = count
            return
        self.pop(location, None)
        if place is not None:
            lines = self.by_path.get(place[0])
            if lines is not None:
                lines.pop(place[1], None)
                if not lines:
                    del self.by_path[place[0]]


@functools.lru_cache(maxsize=65536)  # a busy log names the same rows again and again
def _place(location: str) -> tuple[str, int] | None:
    """(path, line) of a location as a ranking spells one (`f"{path}:{line}"`), else None: no row's."""
    path, colon, line = location.rpartition(":")
    if not colon or not (line.isascii() and line.isdigit()) or str(int(line)) != line:
        return None
    return path, int(line)


@dataclass
class _File:
    """How far one log file was read: its identity, the offset of the first byte not counted, its counts."""

    ino: int = -1
    offset: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class _Tally:
    def __init__(self, folder: Path):
        self.folder = folder
        self.lock = threading.Lock()
        self.usage = Usage()
        self.rotated = _File()  # retrieval.jsonl.1
        self.current = _File()  # retrieval.jsonl

    def refresh(self) -> Usage:
        current_path = self.folder / retrieval_log.LOG_NAME
        rotated_path = self.folder / (retrieval_log.LOG_NAME + ".1")
        with self.lock:
            current, size = _identity(current_path)
            rotated = _identity(rotated_path)[0]
            if (current, rotated) != (self.current.ino, self.rotated.ino) or size < self.current.offset:
                if self.current.ino != -1 and rotated == self.current.ino and current != self.current.ino:
                    # rotated: what was read of the current file is now `.1`; the old `.1` is gone
                    self._read(self.current, rotated_path)
                    self._drop(self.rotated)
                    self.rotated, self.current = self.current, _File(current)
                else:
                    self.usage = Usage()
                    self.rotated, self.current = _File(rotated), _File(current)
                    self._read(self.rotated, rotated_path)
            self._read(self.current, current_path)
            return self.usage

    def _read(self, part: _File, path: Path) -> None:
        """Count the whole lines of `path` after `part.offset` (a torn last line waits for its end)."""
        handle = retrieval_log.open_log(path)
        if handle is None:
            return
        with handle:
            found = os.fstat(handle.fileno())
            if found.st_ino != part.ino:
                return  # replaced since it was looked at: the next search starts again
            part.offset = retrieval_log.tail_from(handle, found.st_size, part.offset)
            data = handle.read(retrieval_log.READ_BYTES)
        end = data.rfind(b"\n") + 1
        if not end:
            return
        part.offset += end
        usage = self.usage
        for line in data[:end].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line after a crash is skipped, not fatal
            if not isinstance(record, dict) or record.get("tool") not in TOOLS:
                continue  # a line fsmem did not write (`5`, `[]`) is skipped too
            locations = record.get("paths")
            for location in locations if isinstance(locations, list) else ():
                if isinstance(location, str):
                    part.counts[location] = part.counts.get(location, 0) + 1
                    total = usage.get(location, 0) + 1
                    usage.put(location, total)
                    if total > usage.top:
                        usage.top = total

    def _drop(self, part: _File) -> None:
        """The counts of a file rotated away leave the totals (`top` is counted again)."""
        if not part.counts:
            return
        usage = self.usage
        for location, count in part.counts.items():
            usage.put(location, usage.get(location, 0) - count)
        usage.top = max(usage.values(), default=0)


def _identity(path: Path) -> tuple[int, int]:
    """(inode, size) of a log file, (-1, 0) when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return -1, 0
    return st.st_ino, st.st_size


_tallies: dict[str, _Tally] = {}
_tallies_lock = threading.Lock()


def usage_counts(root: Path) -> Usage:
    """How often each `path:line` was returned by search or recall, from the retrieval log."""
    key = os.fspath(root)
    with _tallies_lock:
        tally = _tallies.get(key)
        if tally is None:
            tally = _tallies[key] = _Tally(Path(root, ".fsmem", "logs"))
    return tally.refresh()
