"""What fsmem knows about each memory file without reading its body again: the catalog.

`Catalog.entries()` walks the memory (Markdown files outside hidden folders and
`.fsmem/`) and returns one `FileMeta` per file: front matter, title, token
count, headings and superseded ranges. `ls`, the front-matter filters of grep
and search, and INDEX.md all read from here, so a cache keyed on path, mtime
and size can sit behind this one class.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import format as fmt
from .paths import STATE_DIR, relative
from .tokens import TokenCounter

MEMORY_SUFFIXES = (".md", ".markdown")
# Above this size a file's tokens are estimated (bytes / 4) rather than counted.
EXACT_COUNT_LIMIT = 4 * 1024 * 1024
# Front matter is only looked for in the first bytes of a file.
HEAD_BYTES = 64 * 1024


@dataclass
class FileMeta:
    """Per-file metadata, everything `ls` shows and the filters need."""

    path: str
    size: int
    mtime_ns: int
    title: str | None = None
    description: str | None = None
    type: str | None = None
    tags: list[str] = field(default_factory=list)
    created: str | None = None
    updated: str | None = None
    importance: float | None = None
    entity: str | None = None
    topic: str | None = None
    tokens: int = 0
    tokens_estimated: bool = False
    headings: list[tuple[int, str, int, int]] = field(default_factory=list)  # level, title, line, end line
    superseded: list[tuple[int, int]] = field(default_factory=list)
    front_matter: dict[str, Any] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FileMeta":
        data = dict(data)
        data["headings"] = [tuple(h) for h in data.get("headings", [])]
        data["superseded"] = [tuple(r) for r in data.get("superseded", [])]
        data["problems"] = [tuple(p) for p in data.get("problems", [])]
        return cls(**data)


def is_memory_file(name: str) -> bool:
    return name.lower().endswith(MEMORY_SUFFIXES) and not name.startswith(".")


def walk(root: Path, start: Path | None = None) -> Iterator[Path]:
    """Memory files under `start` (default: the root), in a stable sorted order.

    Hidden files and folders (`.fsmem/`, `.git/`, editor swap files) are skipped;
    symlinked folders are not followed.
    """
    start = start or root
    if start.is_file():
        yield start
        return
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        subfolders = []
        for item in items:
            if item.name.startswith(".") or item.name == STATE_DIR:
                continue
            if item.is_dir(follow_symlinks=False):
                subfolders.append(Path(item.path))
            elif is_memory_file(item.name) and item.is_file():
                if item.is_symlink() and not _inside(root, item.path):
                    continue  # a link that leads out of the memory is never followed
                yield Path(item.path)
        stack.extend(reversed(subfolders))


def _inside(root: Path, path: str) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root + os.sep)


def read_meta(root: Path, path: Path, counter: TokenCounter, stat: os.stat_result | None = None) -> FileMeta:
    """Parse one file's metadata from disk (the slow path a cache avoids)."""
    stat = stat or path.stat()
    meta = FileMeta(path=relative(root, path), size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    exact = stat.st_size <= EXACT_COUNT_LIMIT
    with open(path, "rb") as handle:
        data = handle.read() if exact else handle.read(HEAD_BYTES)
    text, problems = fmt.decode(data)
    doc = fmt.split(text)
    fm = doc.front_matter
    meta.front_matter = fm
    meta.title = doc.title
    meta.description = doc.description
    meta.type = str(fm["type"]) if fm.get("type") is not None else None
    meta.tags = doc.tags
    meta.created = str(fm["created"]) if fm.get("created") is not None else None
    meta.updated = str(fm["updated"]) if fm.get("updated") is not None else None
    importance = fm.get("importance")
    meta.importance = float(importance) if isinstance(importance, (int, float)) and not isinstance(importance, bool) else None
    meta.entity = str(fm["entity"]) if fm.get("entity") is not None else None
    meta.topic = str(fm["topic"]) if fm.get("topic") is not None else None
    if exact:
        meta.tokens = counter.count(text)
        meta.headings = [(h.level, h.title, h.line, h.end_line) for h in fmt.headings(doc.body, doc.body_start_line)]
        meta.superseded = fmt.superseded_ranges(doc)
    else:
        meta.tokens = stat.st_size // 4
        meta.tokens_estimated = True
    if meta.title is None:
        meta.title = next((h[1] for h in meta.headings if h[0] == 1), None)
    meta.problems = [(p.line, p.message) for p in problems + fmt.validate(doc)]
    return meta


class Catalog:
    """The set of memory files and their metadata.

    This implementation re-reads every file on each call; a cache keyed on
    (path, mtime, size) can replace `_meta_for` without changing callers.
    """

    def __init__(self, root: Path, counter: TokenCounter):
        self.root = root
        self.counter = counter

    def _meta_for(self, path: Path, stat: os.stat_result) -> FileMeta:
        return read_meta(self.root, path, self.counter, stat)

    def entries(self, start: Path | None = None) -> list[FileMeta]:
        result = []
        for path in walk(self.root, start):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            result.append(self._meta_for(path, stat))
        return result

    def get(self, path: Path) -> FileMeta:
        return self._meta_for(path, path.stat())


def matches_filters(
    meta: FileMeta,
    *,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
) -> bool:
    """Front-matter filters shared by ls, grep and search."""
    if type is not None and meta.type != type:
        return False
    if tag:
        wanted = [tag] if isinstance(tag, str) else list(tag)
        have = {t.lower() for t in meta.tags}
        if not all(t.lower() in have for t in wanted):
            return False
    if updated_after is not None:
        threshold = fmt.parse_timestamp(updated_after)
        stamp = fmt.parse_timestamp(meta.updated) if meta.updated else None
        if threshold is None or stamp is None or stamp <= threshold:
            return False
    return True
