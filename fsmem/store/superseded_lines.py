"""Superseded line ranges of memory files, for grep and read: from the metadata cache when its row is fresh.

A document's are its `## Superseded` sections; a session note's are its
keyed facts that a document has since superseded (`fsmem.store.note_status`
says which). A file the cache does not know yet gets a light scan
(`superseded_of`) that skips YAML and token counting unless its text
mentions the heading at all.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from fsmem.errors import InvalidArgument
from fsmem.store import paths
from fsmem.store.cache import SCAN_FROM, MetaCache, Stamp, chunks, decoded_ranges
from fsmem.store.walk import path_of

# A `Fresh` is made whole again past 2 sqrt(files) + this many paths changed since it last was.
WHOLE_AFTER = 64
Special = tuple[list[tuple[int, int]], bool, bool]  # a row's ranges, whether a document may cite it, racy


class Fresh:
    """What the metadata rows say of superseded ranges, taken once per state of the rows: the memory files they
    know, and those that are not simply 'none, never cited' (ranges, a note a document may cite, a racy row).

    Only for rows caught up with the files just now (a catalog on a trusted change feed): an answer then
    needs no stat per file. A grep of a common word matched 9,000 of 10,000 files, and checking each
    file's row against its stamp, decoding every row, cost more than rg's own pass.

    Never changed once made: a change of the rows makes another (`updated`), which shares this one's whole
    sets and keeps the paths changed since beside them, so that a write costs its own rows, not the memory's
    (at 100k files a rebuild took 0.5-0.9 s after every write). Past about 2 sqrt(files) such paths, the next
    one is made whole again: each change then costs about sqrt(files) set entries either way."""

    __slots__ = ("_known", "_special", "_added", "_removed", "_changed")  # a dataclass execs code at import

    def __init__(
        self,
        known: frozenset[str],
        special: dict[str, Special],
        added: frozenset[str] = frozenset(),
        removed: frozenset[str] = frozenset(),
        changed: dict[str, Special | None] | None = None,
    ):
        self._known, self._special = known, special
        self._added, self._removed = added, removed  # paths with a row that `known` lacks; in it without one
        self._changed = changed or {}  # path -> its `special` value now (None: plain or no row), where it differs

    def known_of(self, asked: set[str]) -> set[str]:
        """The paths among `asked` that have a row."""
        found = asked.intersection(self._known)
        if self._removed:
            found.difference_update(self._removed)
        if self._added:
            found.update(asked.intersection(self._added))
        return found

    def special_of(self, asked: set[str]) -> dict[str, Special]:
        """path -> (ranges, maybe cited, racy) of the paths among `asked` whose row is not plain."""
        changed, special = self._changed, self._special
        out = {rel: special[rel] for rel in asked.intersection(special) if rel not in changed}
        for rel in asked.intersection(changed) if changed else ():
            value = changed[rel]
            if value is not None:
                out[rel] = value
        return out

    def with_ranges(self) -> list[str]:
        """The paths whose row holds superseded ranges."""
        changed = self._changed
        found = [rel for rel, (ranges, _, _) in self._special.items() if ranges and rel not in changed]
        return found + [rel for rel, value in changed.items() if value is not None and value[0]]

    def whole(self) -> tuple[frozenset[str], dict[str, Special]]:
        """Every path with a row, and path -> `special` value: what a rebuild makes (costs the memory's size)."""
        return _whole(self._known, self._special, self._added, self._removed, self._changed)

    def updated(self, rows: dict[str, Special | None], gone: set[str]) -> Fresh:
        """This with the rows of some paths as they are now: `rows` (path -> its `special` value, None for a
        plain row) have one, `gone` have none."""
        known, special = self._known, self._special
        added, removed, changed = set(self._added), set(self._removed), dict(self._changed)
        for rel in rows:
            if rel in known:
                removed.discard(rel)
            else:
                added.add(rel)
        for rel in gone:
            if rel in known:
                removed.add(rel)
            else:
                added.discard(rel)
        for rel, value in [*rows.items(), *((rel, None) for rel in gone)]:
            if special.get(rel) == value:
                changed.pop(rel, None)
            else:
                changed[rel] = value
        if len(added) + len(removed) + len(changed) > 2 * math.isqrt(len(known)) + WHOLE_AFTER:
            return Fresh(*_whole(known, special, added, removed, changed))
        return Fresh(known, special, frozenset(added), frozenset(removed), changed)


def _whole(known, special, added, removed, changed) -> tuple[frozenset[str], dict[str, Special]]:
    merged = {rel: value for rel, value in special.items() if rel not in changed}
    merged.update((rel, value) for rel, value in changed.items() if value is not None)
    return (known - removed) | added, merged


_fresh: dict[str, tuple[tuple[str, int], Fresh]] = {}  # cache file -> ((rows id, files version), its Fresh)
_fresh_lock = threading.Lock()
_SPECIAL = "superseded != '[]' OR maybe_cited != 0 OR racy != 0"


def fresh_rows(cache: MetaCache) -> Fresh | None:
    """The `Fresh` of the cache's rows as they are now, made once per state of them for the whole process: from
    the one kept and the rows changed since (`MetaCache.changed_keys`), or from every row."""
    rows_id = cache.rows_id()
    if rows_id is None:
        return None
    name = os.fspath(cache.path)

    def read(conn):
        version = cache.files_version(conn)
        with _fresh_lock:
            kept = _fresh.get(name)
        if kept is not None and kept[0] == (rows_id, version):
            return kept[1]
        made = None
        if kept is not None and kept[0][0] == rows_id and kept[0][1] < version:
            keys = cache.changed_keys(conn, kept[0][1])
            if keys is not None:
                made = _updated(conn, kept[1], keys)
        if made is None:
            known = frozenset(path_of(k) for (k,) in conn.execute("SELECT key FROM files INDEXED BY files_list"))
            special = {rel: value for rel, value in _rows(conn, f"WHERE {_SPECIAL}", ()) if value is not None}
            made = Fresh(known, special)
        with _fresh_lock:
            now = _fresh.get(name)
            if now is None or now[0][0] != rows_id or now[0][1] < version:  # never a newer one replaced
                _fresh[name] = ((rows_id, version), made)
        return made

    return cache.reading(read, None)


def _updated(conn, kept: Fresh, keys: list[str]) -> Fresh:
    """`kept` with the rows of `keys` as they are now (one look at each key in the index)."""
    rows: dict[str, Special | None] = {}
    for chunk in chunks(keys, 500):
        rows.update(_rows(conn, f"WHERE key IN ({','.join('?' * len(chunk))})", chunk))
    return kept.updated(rows, {path_of(k) for k in keys}.difference(rows))


def _rows(conn, where: str, params) -> Iterator[tuple[str, Special | None]]:
    """(path, its `Fresh.special` value, None for a plain row) of the rows `where` selects."""
    for key, ranges, cited, racy, special in conn.execute(
        f"SELECT key, superseded, maybe_cited, racy, ({_SPECIAL}) FROM files INDEXED BY files_list {where}", params
    ):
        if not special:
            yield path_of(key), None
            continue
        parsed = decoded_ranges(ranges)
        if parsed is None:
            parsed, racy = [], 1  # a damaged row: the file is looked at
        yield path_of(key), (parsed, bool(cited), bool(racy))


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
        special = fresh.special_of(asked)
        with_rows = fresh.known_of(asked)
        if every_file:
            out = {rel: [] for rel in with_rows.difference(special)}  # plain rows
        unknown = asked.difference(with_rows)  # no row, or (below) a racy one: looked at as below
        for rel, (ranges, cited, racy) in special.items():
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
    plain_rows: set[tuple[str, int, int, int, int]] = set()
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
        if (rel, stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns) in plain_rows:
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
        if row is not None and row[0] == (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns):
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
