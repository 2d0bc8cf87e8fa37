"""Subjects: from a session-note heading to the entity or topic document it names.

`## people/Adam Smith` -> `entities/people/adam-smith.md`, `## topic/Billing`
-> `topics/billing.md`. A heading without a kind (`## Adam Smith`) is matched
against the titles, aliases and names of existing entity and topic documents
(rapidfuzz), else it becomes a topic. The directory of those documents is read
from their front matter and cached in `.fsmem/cache/` keyed on (mtime, size, inode),
so a run with nothing new re-reads nothing.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass, field, fields
from pathlib import Path

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format.facts import slugify
from fsmem.format.history_file import is_history_path
from fsmem.format.links import aliases_of
from fsmem.state_files import read_state
from fsmem.store import beneath
from fsmem.store.catalog import HEAD_BYTES, walk_stats
from fsmem.store.files import atomic_write, state_dir

_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,40}$")
TOPIC_KINDS = ("topic", "topics")
# 4: summaries read `*` and `+` facts too; 5: rows of fields, zlib-compressed; 6: each entry's inode;
# 7: its change time
CACHE_VERSION = 7
CACHE_NAME = "directory.json.zlib"  # 1/7 of the JSON of named fields it replaces (1.2 MB against 8.6 at 100k)
INFLATE_RATIO = 64  # the most the cache's bytes may grow when decompressed (fsmem's own: about 7); past it, a miss
OLD_CACHE_NAME = "directory.json"  # written before version 5: removed, so an upgraded memory does not keep it
_INTERESTING = frozenset("-*+# `~")


@dataclass(frozen=True)
class Target:
    """The document a subject heading resolves to, and the fields a new document gets."""

    path: str
    field: str  # "entity" or "topic"
    value: str  # e.g. "people/Adam Smith" or "Billing"
    title: str


@dataclass
class DirectoryEntry:
    """What INDEX.md and subject matching need from one entity or topic document."""

    path: str
    mtime_ns: int
    size: int
    title: str = ""
    description: str = ""
    importance: float = 0.0
    names: list[str] = field(default_factory=list)  # title, aliases, entity/topic name
    summary: str = ""  # first current facts, for documents without a description
    subject: str = ""  # its entity or topic name as a note subject says it (`people/Adam Smith`, `topic/Billing`)
    ino: int = 0  # with (mtime, size), what a cached entry is checked on: a copy keeps mtimes, never inodes
    ctime_ns: int = 0  # and the change time: an edit of the same size whose mtime was put back moves it alone


_FIELDS = [f.name for f in fields(DirectoryEntry)]  # the order of a cached row's values


def kinded(heading: str) -> Target | None:
    """The target of `kind/Name`, or None when the heading names no kind."""
    kind, sep, name = heading.partition("/")
    kind, name = kind.strip(), name.strip()
    if not sep or not name or not _KIND.match(kind):
        return None
    if kind.lower() in TOPIC_KINDS:
        return topic(name)
    kind = kind.lower()
    return Target(f"entities/{slugify(kind)}/{slugify(name)}.md", "entity", f"{kind}/{name}", name)


def topic(name: str) -> Target:
    return Target(f"topics/{slugify(name)}.md", "topic", name, name)


def match(name: str, entries: list[DirectoryEntry], threshold: float) -> DirectoryEntry | None:
    """The existing document whose title or alias best matches `name`, if it scores `threshold` or more."""
    from rapidfuzz import fuzz, process

    choices: list[str] = []
    owners: list[DirectoryEntry] = []
    for entry in sorted(entries, key=lambda e: e.path):
        for alias in entry.names:
            choices.append(alias.casefold())
            owners.append(entry)
    if not choices:
        return None
    best = process.extractOne(name.casefold().strip(), choices, scorer=fuzz.ratio, score_cutoff=threshold)
    return owners[best[2]] if best else None


def linked(name: str, entries: list[DirectoryEntry]) -> DirectoryEntry | None:
    """The document a `[[name]]` heading leads to, by the rules of links (`fsmem.format.links`); None when
    no document, or several, answer to it."""
    from fsmem.format.links import PATH_END, RESOLVED, choose, ends_path, fold, names_of

    wanted = fold(name)
    by_path = {entry.path: entry for entry in entries}
    candidates = []
    for entry in entries:
        is_topic = entry.subject.startswith("topic/")
        names = names_of(
            entry.path,
            title=entry.title,
            aliases=entry.names,
            entity=entry.subject or None if not is_topic else None,
            topic=entry.subject[len("topic/") :] if is_topic else None,
        )
        candidates += [(tier, entry.path) for tier, found in names if found == wanted]
        if ends_path(wanted, entry.path):
            candidates.append((PATH_END, entry.path))
    status, paths = choose(candidates)
    return by_path[paths[0]] if status == RESOLVED else None


def target_of(entry: DirectoryEntry) -> Target:
    kind = "topic" if entry.path.startswith("topics/") else "entity"
    return Target(entry.path, kind, entry.names[-1] if entry.names else entry.title, entry.title)


def _names(front: dict, title: str) -> list[str]:
    names = [title] if title else []
    names += aliases_of(front)  # as a link reads them: `aliases: 5` or a mapping names nothing
    for key in ("entity", "topic"):
        value = front.get(key)
        if value:
            names.append(str(value).split("/", 1)[-1].strip())
    return names


def _read_entry(root: Path, rel: str, full: Path, stat: os.stat_result) -> DirectoryEntry:
    with open(full, "rb") as handle:
        data = handle.read(HEAD_BYTES)
    text, _ = fmt.decode(data)
    return entry_from(rel, stat, fmt.split(text).front_matter, text)


def entry_from(rel: str, stat: os.stat_result, front: dict, text: str) -> DirectoryEntry:
    """A directory entry from a document's front matter (already parsed) and its text."""
    from fsmem.format.facts import is_bullet, parse_fact

    lines = text.splitlines()
    body_start = 0
    if lines and lines[0].lstrip(fmt.BOM).rstrip() == fmt.FENCE:
        body_start = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
    body = lines[body_start:]
    title = "" if front.get("title") is None else str(front.get("title"))
    title = title or next((h.title for h in fmt.headings("\n".join(body)) if h.level == 1), "") or Path(rel).stem
    importance = front.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        importance = 0.0
    description = front.get("description")
    summary: list[str] = []
    in_superseded = in_code = False
    for line in body:
        if line[:1] not in _INTERESTING:  # most lines: prose; only bullets, headings and fences matter here
            continue
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
            continue
        heading = None if in_code else fmt.HEADING.match(line)
        if heading and len(heading.group(1)) <= 2:
            in_superseded = heading.group(2).strip().lower() == fmt.SUPERSEDED_HEADING.lower()
        if in_superseded or in_code or not is_bullet(line):
            continue
        fact = parse_fact(line)
        if fact is not None and fact.value is not None:
            summary.append(f"{fact.key}: {fact.value}")
            if len(summary) == 3:
                break
    return DirectoryEntry(
        path=rel,
        mtime_ns=stat.st_mtime_ns,
        size=stat.st_size,
        title=str(title),
        description=" ".join(str(description).split()) if description is not None else "",
        importance=float(importance),
        names=_names(front, str(title)),
        summary="; ".join(summary),
        subject=_subject(front),
        ino=stat.st_ino,
        ctime_ns=stat.st_ctime_ns,
    )


def _same(entry: DirectoryEntry, stat: os.stat_result) -> bool:
    """Whether `entry` was made from the file `stat` describes: (mtime, size) alone let a directory cache that came
    with an untrusted copy (whose files' mtimes it knows) put titles and descriptions no file holds in INDEX.md."""
    same = entry.mtime_ns == stat.st_mtime_ns and entry.size == stat.st_size and entry.ino == stat.st_ino
    return same and entry.ctime_ns == stat.st_ctime_ns


def _subject(front: dict) -> str:
    if front.get("entity"):
        return str(front["entity"]).strip()
    return f"topic/{str(front['topic']).strip()}" if front.get("topic") else ""


def directory(root: Path, fresh: dict[str, DirectoryEntry] | None = None) -> list[DirectoryEntry]:
    """Every entity and topic document (not their history files), from the cache where (mtime, size, inode, ctime) match.

    `fresh` holds entries the caller built from texts it has just written (the
    consolidator), used when their (mtime, size) match. A document the memory's
    path rule refuses (a symbolic link out of the root or into `.fsmem/`) is
    left out.
    """
    from fsmem.store.paths import resolve

    cache_path = state_dir(root, "cache") / CACHE_NAME
    cached = _read_cache(cache_path)
    known = {e.path: e for e in cached}
    known.update(fresh or {})
    entries: list[DirectoryEntry] = []
    dirty = bool(fresh)
    for folder in ("entities", "topics"):
        for rel, full, stat in walk_stats(root, root / folder) if (root / folder).is_dir() else []:
            if is_history_path(rel):  # a document's history, not a subject of its own (nor a line of INDEX.md)
                continue
            old = known.get(rel)
            if old and _same(old, stat) and not os.path.islink(full):
                entries.append(old)
                continue
            try:
                real = resolve(root, rel)
            except FsmemError:
                dirty = True
                continue
            if old and _same(old, stat):
                entries.append(old)
                continue
            entries.append(_read_entry(root, rel, real, stat))
            dirty = True
    if dirty or len(entries) != len(cached):
        _write_cache(root, cache_path, entries)
    return entries


def _write_cache(root: Path, cache_path: Path, entries: list[DirectoryEntry]) -> None:
    """Each entry a row of its fields' values, compressed at level 1 (30 ms at 100k files; level 6 saves a
    fifth more for four times that)."""
    payload = {"version": CACHE_VERSION, "fields": _FIELDS, "rows": [[getattr(e, n) for n in _FIELDS] for e in entries]}
    data = zlib.compress(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), 1)
    atomic_write(cache_path, data, root=root, generated=True)  # a cache: never through a link
    try:  # the version before, 8.5 MB at 100k files; a link there is removed itself, never what it points to
        beneath.remove(root, os.path.relpath(cache_path.parent / OLD_CACHE_NAME, root), generated=True)
    except (OSError, FsmemError):
        pass


def _inflated(data: bytes) -> bytes:
    """`data` decompressed, refused (ValueError) past INFLATE_RATIO times its size: the cache's JSON compresses
    about 7 times, a planted zlib bomb 1,000 times (2 MB held 2 GB and took 30 s of `fsmem index`)."""
    inflater = zlib.decompressobj()
    limit = INFLATE_RATIO * len(data) + (1 << 16)
    out = inflater.decompress(data, limit)
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError(f"directory cache inflates past {limit} bytes, or is cut short")
    return out


def _read_cache(cache_path: Path) -> list[DirectoryEntry]:
    """The entries of the directory cache; none when it is missing, of another version or damaged.

    Rows rather than objects of named fields: decompressing and parsing them costs less than parsing the
    uncompressed objects did (124 against 139 ms of CPU at 100k files)."""
    try:
        cached = json.loads(_inflated(read_state(cache_path)).decode("utf-8"))
        if cached.get("version") != CACHE_VERSION or cached.get("fields") != _FIELDS:
            return []
        entries = [DirectoryEntry(*row) for row in cached["rows"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError, zlib.error):
        return []
    if not all(isinstance(e.path, str) and isinstance(e.names, list) for e in entries):
        return []
    return entries
