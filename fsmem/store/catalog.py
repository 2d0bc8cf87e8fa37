"""What fsmem knows about each memory file without reading its body again: the catalog.

`Catalog.entries()` walks the memory (Markdown files outside hidden folders and
`.fsmem/`) and returns one `FileMeta` per file: front matter, title, token
count, headings and superseded ranges. `ls`, the front-matter filters of grep
and search, and INDEX.md all read from here, so a cache keyed on path, mtime
and size can sit behind this one class.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.errors import InvalidArgument
from fsmem.format import secrets
from fsmem.store import files, paths
from fsmem.store.paths import relative
from fsmem.store.scope import Scope
from fsmem.store.walk import walk, walk_stats  # noqa: F401  (the catalog's walk; imported from here by callers)
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileMeta:
        data = dict(data)
        data["headings"] = [tuple(h) for h in data.get("headings", [])]
        data["superseded"] = [tuple(r) for r in data.get("superseded", [])]
        data["problems"] = [tuple(p) for p in data.get("problems", [])]
        return cls(**data)


is_memory_file = paths.is_memory_name


def read_meta(root: Path, path: Path, counter: TokenCounter, stat: os.stat_result | None = None) -> FileMeta:
    """Parse one file's metadata from disk (the slow path a cache avoids)."""
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
        meta.headings = [(h.level, h.title, h.line, h.end_line) for h in fmt.headings(doc.body, doc.body_start_line)]
        meta.superseded = fmt.superseded_ranges(doc)
    else:
        meta.tokens = stat.st_size // 4
        meta.tokens_estimated = True
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
    return meta


class Catalog:
    """The set of memory files and their metadata, served from the cache when fresh.

    Each call stats every file it returns (cheap) and re-parses only the files
    whose (mtime_ns, size, inode) differ from the cached row, so edits made
    while no watcher runs are seen on the next call. With `use_cache=False`
    every file is parsed every time (what the benchmarks call a cold run).
    With a `scope`, only the files in it exist for this catalog.
    """

    def __init__(self, root: Path, counter: TokenCounter, *, use_cache: bool = True, scope: Scope | None = None):
        self.root = root
        self.counter = counter
        self.scope = scope
        self.cache = None
        if use_cache:
            from fsmem.store.cache import MetaCache

            self.cache = MetaCache(root, counter.encoding_name)
            if counter.memo is None:
                counter.memo = self.cache

    def _meta_for(self, path: Path, stat: os.stat_result) -> FileMeta:
        rel = relative(self.root, path)
        return self._metas([(rel, os.fspath(path), stat)], strict=True)[0]

    def _read(
        self, full: str, stat: os.stat_result, rel: str, skipped: list[tuple[str, str]] | None
    ) -> FileMeta | None:
        """One file's metadata from disk; a file that cannot be read (vanished, denied, not regular) is None."""
        try:
            return read_meta(self.root, Path(full), self.counter, stat)
        except FileNotFoundError:
            return None
        except (OSError, InvalidArgument) as exc:
            if skipped is None:
                raise
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            skipped.append((paths.shown(rel), f"skipped: {reason.lower()}"))
            return None

    def _metas(
        self,
        found: list[tuple[str, str, os.stat_result]],
        *,
        complete: bool = False,
        strict: bool = False,
        skipped: list[tuple[str, str]] | None = None,
    ) -> list[FileMeta]:
        """Metadata for (relative path, absolute path, stat) triples, re-reading only stale files.

        A file that cannot be read is left out (and added to `skipped`), unless
        `strict`: then the error is raised (one file asked for by name).
        """
        sink = None if strict else (skipped if skipped is not None else [])
        if self.cache is None:
            metas = (self._read(full, stat, rel, sink) for rel, full, stat in found)
            return [meta for meta in metas if meta is not None]
        from fsmem.store.cache import decode_row, stamp_of

        rows = self.cache.rows(None if complete or len(found) > 500 else [rel for rel, _, _ in found])
        result: list[FileMeta] = []
        fresh: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
        for rel, full, stat in found:
            stamp = stamp_of(stat)
            data = decode_row(rel, stamp, rows.get(rel))
            meta = None
            if data is not None:
                try:
                    meta = FileMeta.from_dict(data)
                except (TypeError, ValueError):
                    meta = None
            if meta is None:
                meta = self._read(full, stat, rel, sink)
                if meta is None:
                    continue
                fresh.append((stamp, meta.to_dict()))
            result.append(meta)
        if fresh or complete:
            self.cache.store(fresh, prune_except={m.path for m in result} if complete else None)
        return result

    def entries(self, start: Path | None = None, skipped: list[tuple[str, str]] | None = None) -> list[FileMeta]:
        """Every memory file under `start` (default: all); files that cannot be read go to `skipped`."""
        found = list(walk_stats(self.root, start, skipped, scope=self.scope))
        whole = self.scope is None and (start is None or Path(start) == self.root)
        return self._metas(found, complete=whole, skipped=skipped)

    def get(self, path: Path) -> FileMeta:
        return self._meta_for(path, path.stat())

    def superseded(self, rels: list[str]) -> dict[str, list[tuple[int, int]]]:
        """Superseded line ranges of the given files (missing files are left out).

        A document's are its `## Superseded` sections; a session note's are its
        keyed facts that a document has since superseded (fsmem.store.supersession).
        """
        never_cited: set[str] = set()
        out = self._documents_superseded(rels, never_cited)
        notes = [rel for rel in rels if rel in out and rel.startswith("sessions/") and rel not in never_cited]
        if notes:
            from fsmem.store.supersession import may_be_consolidated, superseded_note_lines

            texts = {}
            for rel in notes:
                try:
                    with open(os.path.join(self.root, rel), "rb") as handle:
                        head = handle.read(NOTE_HEAD_BYTES)
                        if not may_be_consolidated(fmt.decode(head)[0]):
                            continue  # never consolidated: no document cites its facts
                        texts[rel] = fmt.decode(head + handle.read(HEAD_BYTES * 16 - NOTE_HEAD_BYTES))[0]
                except OSError:
                    continue
            for rel, lines in superseded_note_lines(self.root, texts, self._documents_superseded).items():
                out[rel] = sorted(out[rel] + lines)
        return out

    def _documents_superseded(
        self, rels: list[str], never_cited: set[str] | None = None
    ) -> dict[str, list[tuple[int, int]]]:
        """The `## Superseded` ranges of the given files: fresh cache rows answer without parsing; other files
        get a light scan that skips YAML and token counting unless the text mentions the heading. Files whose
        fresh row says no document can cite them (never consolidated) go to `never_cited`."""

        known = self.cache.superseded(rels) if self.cache is not None else {}
        out: dict[str, list[tuple[int, int]]] = {}
        stale: list[tuple[str, str, os.stat_result]] = []
        base = os.fspath(self.root) + os.sep
        for rel in rels:
            full = base + rel
            try:
                stat = os.stat(full)
            except OSError:
                continue
            row = known.get(rel)
            if row is not None and row[0] == (stat.st_mtime_ns, stat.st_size, stat.st_ino):
                out[rel] = row[1]
                if never_cited is not None and not row[2]:
                    never_cited.add(rel)
            else:
                stale.append((rel, full, stat))
        # Many unknown files (a cold cache): let rg find the few that have the heading at all.
        headed = _with_superseded_heading(self.root, [rel for rel, _, _ in stale]) if len(stale) > 64 else None
        for rel, full, stat in stale:
            out[rel] = superseded_of(Path(full), stat) if headed is None or rel in headed else []
        return out

    def superseded_hint(self) -> list[str]:
        """Files the cache last saw with superseded ranges: a quick guess that `superseded` verifies."""
        return self.cache.paths_with_superseded() if self.cache is not None else []


def _with_superseded_heading(root: Path, rels: list[str]) -> set[str]:
    """The files among `rels` with a line that may be a `## Superseded` heading (a superset)."""
    import subprocess

    from fsmem.store.rg import find_rg

    found: set[str] = set()
    for start in range(0, len(rels), 2000):
        batch = rels[start : start + 2000]
        proc = subprocess.run(
            [
                find_rg(),
                "--no-config",
                "--no-ignore",
                "--files-with-matches",
                "--ignore-case",
                "--regexp",
                rf"^##[ \t]+{fmt.SUPERSEDED_HEADING}",
                "--",
                *batch,
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        found.update(
            line[2:] if line.startswith("./") else line for line in proc.stdout.decode("utf-8", "replace").splitlines()
        )
    return found


def superseded_of(path: Path, stat: os.stat_result | None = None) -> list[tuple[int, int]]:
    """The `## Superseded` ranges of one file, without YAML or token counting when it can.

    The body starts after the closing fence whether or not the YAML parses,
    unless the front matter block itself holds heading or code-fence lines;
    only then is the full parser needed to say where the body begins.
    """
    stat = stat or path.stat()
    if stat.st_size > EXACT_COUNT_LIMIT:
        return []
    try:
        data = paths.read_regular(path)
    except (OSError, InvalidArgument):
        return []
    if fmt.SUPERSEDED_HEADING.lower().encode() not in data.lower():
        return []
    text, _ = fmt.decode(data)
    lines = text.splitlines(keepends=True)
    first = lines[0].rstrip("\r\n").lstrip(fmt.BOM).rstrip() if lines else ""
    if first != fmt.FENCE:
        return _ranges_in(fmt.headings(text, 1))
    for index in range(1, len(lines)):
        line = lines[index].rstrip("\r\n")
        if line.rstrip() in ("---", "..."):
            block = lines[1:index]
            if any(b.lstrip(" \t").startswith(("#", "```", "~~~")) for b in block):
                return fmt.superseded_ranges(fmt.split(text))
            return _ranges_in(fmt.headings("".join(lines[index + 1 :]), index + 2))
    return _ranges_in(fmt.headings(text, 1))


def _ranges_in(headings) -> list[tuple[int, int]]:
    wanted = fmt.SUPERSEDED_HEADING.lower()
    return [(h.line, h.end_line) for h in headings if h.level == 2 and h.title.strip().lower() == wanted]


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
