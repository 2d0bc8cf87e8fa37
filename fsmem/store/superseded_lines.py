"""Superseded line ranges of memory files, for grep and read: from the metadata cache when its row is fresh.

A document's are its `## Superseded` sections; a session note's are its
keyed facts that a document has since superseded (`fsmem.store.note_status`
says which). A file the cache does not know yet gets a light scan
(`superseded_of`) that skips YAML and token counting unless its text
mentions the heading at all.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from fsmem.errors import InvalidArgument
from fsmem.store import paths
from fsmem.store.cache import SCAN_FROM, MetaCache, Stamp, decoded_ranges
from fsmem.store.walk import path_of


class Fresh:
    """What the metadata rows say of superseded ranges, taken once per state of the rows: the memory files they
    know, and those that are not simply 'none, never cited' (ranges, a note a document may cite, a racy row).

    Only for rows caught up with the files just now (a catalog on a trusted change feed): an answer then
    needs no stat per file. A grep of a common word matched 9,000 of 10,000 files, and checking each
    file's row against its stamp, decoding every row, cost more than rg's own pass."""

    __slots__ = ("known", "special")  # a plain record, never changed once made (a dataclass execs code at import)

    def __init__(self, known: frozenset[str], special: dict[str, tuple[list[tuple[int, int]], bool, bool]]):
        self.known = known
        self.special = special  # path -> (ranges, maybe cited, racy)


_fresh: dict[str, tuple[tuple[str, int], Fresh]] = {}  # cache file -> ((rows id, files version), its Fresh)
_fresh_lock = threading.Lock()


def fresh_rows(cache: MetaCache) -> Fresh | None:
    """The `Fresh` of the cache's rows as they are now, made once per state of them for the whole process."""
    rows_id = cache.rows_id()
    if rows_id is None:
        return None

    def read(conn):
        version = cache.files_version(conn)
        key = os.fspath(cache.path)
        with _fresh_lock:
            kept = _fresh.get(key)
        if kept is not None and kept[0] == (rows_id, version):
            return kept[1]
        known = frozenset(path_of(k) for (k,) in conn.execute("SELECT key FROM files INDEXED BY files_list"))
        special: dict[str, tuple[list[tuple[int, int]], bool, bool]] = {}
        for key_, ranges, cited, racy in conn.execute(
            "SELECT key, superseded, maybe_cited, racy FROM files INDEXED BY files_list"
            " WHERE superseded != '[]' OR maybe_cited != 0 OR racy != 0"
        ):
            try:
                parsed = [(int(a), int(b)) for a, b in json.loads(ranges)] if ranges != "[]" else []
            except (ValueError, TypeError):
                parsed, racy = [], 1  # a damaged row: the file is looked at
            special[path_of(key_)] = (parsed, bool(cited), bool(racy))
        made = Fresh(known, special)
        with _fresh_lock:
            _fresh[key] = ((rows_id, version), made)
        return made

    return cache.reading(read, None)


def superseded_ranges(
    root: Path, cache: MetaCache, rels: list[str], fresh: Fresh | None = None, *, every_file: bool = True
) -> dict[str, list[tuple[int, int]]]:
    """Superseded line ranges of the given files (missing files are left out; with `every_file` False, so are
    those that have none: a grep of a name in 60,000 files asks for 18,000 that have some).

    A document's are its `## Superseded` sections; a session note's are its
    keyed facts that a document has since superseded (fsmem.store.note_status).
    `fresh` (rows just caught up with the files) spares the stat of every file it knows.
    """
    maybe_cited: set[str] = set()
    out = _documents_superseded(root, cache, rels, maybe_cited, fresh, every_file=every_file)
    notes = sorted(rel for rel in maybe_cited if rel.startswith("sessions/"))
    if notes:
        from fsmem import format as fmt
        from fsmem.store.meta import HEAD_BYTES, NOTE_HEAD_BYTES
        from fsmem.store.note_status import may_be_consolidated, superseded_note_lines

        texts = {}
        for rel in notes:
            try:
                with open(os.path.join(root, rel), "rb") as handle:
                    head = handle.read(NOTE_HEAD_BYTES)
                    if not may_be_consolidated(fmt.decode(head)[0]):
                        continue  # never consolidated: no document cites its facts
                    texts[rel] = fmt.decode(head + handle.read(HEAD_BYTES * 16 - NOTE_HEAD_BYTES))[0]
            except OSError:
                continue
        for rel, lines in superseded_note_lines(
            root, texts, lambda paths: _documents_superseded(root, cache, paths)
        ).items():
            out[rel] = sorted(out.get(rel, []) + lines)
    return out


def _documents_superseded(
    root: Path,
    cache: MetaCache,
    rels: list[str],
    maybe_cited: set[str] | None = None,
    fresh: Fresh | None = None,
    *,
    every_file: bool = True,
) -> dict[str, list[tuple[int, int]]]:
    """The `## Superseded` ranges of the given files (with `every_file` False, of those that have some): fresh
    cache rows answer without parsing; other files get a light scan that skips YAML and token counting unless
    the text mentions the heading. Files a document may cite (consolidated notes: no row says otherwise) go to
    `maybe_cited`."""
    out: dict[str, list[tuple[int, int]]] = {}
    if fresh is not None:
        asked = set(rels)
        special = asked.intersection(fresh.special)
        if every_file:
            out = {rel: [] for rel in asked.intersection(fresh.known).difference(special)}  # plain rows
        unknown = asked.difference(fresh.known)  # no row, or (below) a racy one: looked at as below
        for rel in special:
            ranges, cited, racy = fresh.special[rel]
            if racy:
                unknown.add(rel)
                continue
            if ranges or every_file:
                out[rel] = ranges
            if cited and maybe_cited is not None:
                maybe_cited.add(rel)
        rels = [rel for rel in rels if rel in unknown] if unknown else []
        if not rels:
            return out

    # Many files (a grep's matches): a file whose stamp is a plain row's has no superseded line, and only the
    # other files' rows are decoded. Either way a row is taken only at its file's stamp: a file changed since
    # (a superseded section gained or lost, whatever its size), or not in the cache, is read below.
    plain_rows: set[tuple[str, int, int, int]] = set()
    other: dict[str, tuple[Stamp, str, bool]] | None = None
    if len(rels) > SCAN_FROM:
        plain_rows, other = cache.superseded_rows()
    statted: list[tuple[str, str, os.stat_result]] = []
    base = os.fspath(root) + os.sep
    for rel in rels:
        full = base + rel
        try:
            stat = os.stat(full)
        except OSError:
            continue
        if (rel, stat.st_mtime_ns, stat.st_size, stat.st_ino) in plain_rows:
            if every_file:
                out[rel] = []
        else:
            statted.append((rel, full, stat))
    known: dict[str, tuple[Stamp, list[tuple[int, int]], bool]] = {}
    if other is None:
        known = cache.superseded([rel for rel, _, _ in statted])
    else:
        for rel, _, _ in statted:
            stored = other.get(rel)
            parsed = decoded_ranges(stored[1]) if stored is not None else None
            if stored is not None and parsed is not None:
                known[rel] = (stored[0], parsed, stored[2])
    stale: list[tuple[str, str, os.stat_result]] = []
    for rel, full, stat in statted:
        row = known.get(rel)
        if row is not None and row[0] == (stat.st_mtime_ns, stat.st_size, stat.st_ino):
            if row[1] or every_file:
                out[rel] = row[1]
            if row[2] and maybe_cited is not None:
                maybe_cited.add(rel)
        else:
            stale.append((rel, full, stat))
    # Many unknown files (a cold cache): let rg find the few that have the heading at all.
    headed = _with_superseded_heading(root, [rel for rel, _, _ in stale]) if len(stale) > 64 else None
    for rel, full, stat in stale:
        ranges = superseded_of(Path(full), stat) if headed is None or rel in headed else []
        if ranges or every_file:
            out[rel] = ranges
        if maybe_cited is not None:
            maybe_cited.add(rel)  # no row says it never was
    return out


def _with_superseded_heading(root: Path, rels: list[str]) -> set[str]:
    """The files among `rels` with a line that may be a `## Superseded` heading (a superset)."""
    import subprocess

    from fsmem import format as fmt
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
    from fsmem import format as fmt
    from fsmem.store.meta import EXACT_COUNT_LIMIT

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
    from fsmem import format as fmt

    wanted = fmt.SUPERSEDED_HEADING.lower()
    return [(h.line, h.end_line) for h in headings if h.level == 2 and h.title.strip().lower() == wanted]
