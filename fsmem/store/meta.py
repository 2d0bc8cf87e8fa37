"""What one memory file says of itself, read without the rest of the memory: its `FileMeta`.

`read_meta` parses a file's front matter, title, token count, headings,
superseded ranges and problems; the catalog (`fsmem.store.catalog`) keeps the
result in the metadata cache so that it is parsed once per version of the
file. `superseded_of` is the light scan grep uses for a file the cache does
not know yet, and `matches_filters` the front-matter filters in Python, as
the cache's SQL applies them (`fsmem.store.selection`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fsmem.store import files, paths
from fsmem.store.paths import relative
from fsmem.store.rg_command import LEFT_OUT_LIMIT as LEFT_OUT_LIMIT
from fsmem.tokens import TokenCounter

# Above this size a file's tokens are estimated (bytes / 4) rather than counted.
EXACT_COUNT_LIMIT = 4 * 1024 * 1024
# Front matter is only looked for in the first bytes of a file.
HEAD_BYTES = 64 * 1024
NOTE_HEAD_BYTES = 4096  # enough for a session note's front matter, read first to see if it was consolidated


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
    version: str | None = None  # what a guarded write (expected_version) compares: fsmem.store.files.version_of
    aliases: list[str] = field(default_factory=list)  # front matter `aliases:`, names links resolve by
    wikilinks: list[tuple[int, str, str | None]] = field(default_factory=list)  # line, target, label

    def to_dict(self) -> dict[str, Any]:
        """Its fields by name, the values themselves (not copies: `dataclasses.asdict` deep-copied every heading,
        link and front-matter value, a fifth of the time a cold build of the metadata cache spent on a file)."""
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileMeta:
        data = dict(data)
        data["headings"] = [tuple(h) for h in data.get("headings", [])]
        data["superseded"] = [tuple(r) for r in data.get("superseded", [])]
        data["problems"] = [tuple(p) for p in data.get("problems", [])]
        data["wikilinks"] = [tuple(w) for w in data.get("wikilinks", [])]
        return cls(**data)


_FIELDS = tuple(item.name for item in fields(FileMeta))
is_memory_file = paths.is_memory_name


def read_meta(root: Path, path: Path, counter: TokenCounter, stat: os.stat_result | None = None) -> FileMeta:
    """Parse one file's metadata from disk (the slow path a cache avoids)."""
    from fsmem import format as fmt
    from fsmem.format import links, secrets

    stat = stat or path.stat()
    meta = FileMeta(path=relative(root, path), size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    exact = stat.st_size <= EXACT_COUNT_LIMIT
    data = paths.read_regular(path, -1 if exact else HEAD_BYTES)
    meta.version = files.version_of(data, stat) if exact else files.stat_version(stat)
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
    meta.importance = (
        float(importance) if isinstance(importance, (int, float)) and not isinstance(importance, bool) else None
    )
    meta.entity = str(fm["entity"]) if fm.get("entity") is not None else None
    meta.topic = str(fm["topic"]) if fm.get("topic") is not None else None
    if exact:
        meta.tokens = counter.count(text)
        heads = fmt.headings(doc.body, doc.body_start_line)
        meta.headings = [(h.level, h.title, h.line, h.end_line) for h in heads]
        meta.superseded = fmt.superseded_ranges(doc, heads)
        meta.wikilinks = [(w.line, w.target, w.label) for w in links.links_of(doc.body, doc.body_start_line)]
    else:
        meta.tokens = stat.st_size // 4
        meta.tokens_estimated = True
    meta.aliases = links.aliases_of(fm)
    if meta.title is None:
        meta.title = next((h[1] for h in meta.headings if h[0] == 1), None)
    meta.problems = [(p.line, p.message) for p in problems + fmt.validate(doc)]
    if exact:
        meta.problems += fmt.merge_marks(text)
    found = secrets.scan(text)
    if found:
        # reported by check, and never copied as such into the cache, ls rows or the context block
        meta.problems += [
            (s.line, f"{s.describe()[len(f'line {s.line}: ') :]}; secrets do not belong in memory") for s in found
        ]
        meta.problems.sort()
        meta.front_matter = secrets.redact_value(meta.front_matter)
        meta.title, meta.description = secrets.redact_value(meta.title), secrets.redact_value(meta.description)
        meta.headings = [(level, secrets.redact_value(title), a, b) for level, title, a, b in meta.headings]
        meta.aliases = [secrets.redact_value(alias) for alias in meta.aliases]
        secret_lines = {s.line for s in found}
        meta.wikilinks = [w for w in meta.wikilinks if w[0] not in secret_lines]
    return meta


def matches_filters(
    meta: FileMeta,
    *,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
) -> bool:
    """Front-matter filters shared by ls, grep and search."""
    from fsmem import format as fmt

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
