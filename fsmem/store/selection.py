"""Which memory files a listing asks for, said once as SQL over the metadata cache's columns.

`ls`, grep's front-matter filters, `check`, `context` and a scope's view of
the memory all select rows of `.fsmem/cache.sqlite` (`fsmem.store.cache`)
with the clauses built here: a folder or file is a range of walk-order keys
(`fsmem.store.walk.walk_key`), so rows come back in the walk's order and a
page is `LIMIT ... OFFSET ...` on an index; the other filters are columns.
What the clauses select is exactly what `fsmem.store.meta.matches_filters`
and a walk under the same folder and scope would keep (tests/test_selection.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from fsmem.store.beneath import HISTORY_SUFFIX  # fsmem.format.history_file's, without its imports (a grep's)
from fsmem.store.scope import Scope
from fsmem.store.walk import folder_range, walk_key

Clause = tuple[str, list]


@dataclass(frozen=True)
class Selection:
    """A listing's question: under `start` (a folder, or one file), at most `depth` folders down, and the
    front-matter filters (`type`, all of `tags` whatever their case, `updated` after `updated_after_us`)."""

    start: str | None = None
    start_is_file: bool = False
    depth: int | None = None
    type: str | None = None
    tags: tuple[str, ...] = ()
    updated_after_us: int | None = None
    history_files: bool = True  # False: leave out `*.history.md` (fsmem.format.history_file), unless start is one

    @classmethod
    def of(
        cls,
        start: str | None = None,
        *,
        start_is_file: bool = False,
        depth: int | None = None,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after_us: int | None = None,
        history_files: bool = True,
    ) -> Selection:
        tags = () if not tag else ((tag,) if isinstance(tag, str) else tuple(tag))
        top = None if start in (None, "", ".") else start
        return cls(top, start_is_file and top is not None, depth, type, tags, updated_after_us, history_files)


def where(selection: Selection, scope: Scope | None) -> Clause:
    """The WHERE clause (and its parameters) of the rows of `files` that `selection` and `scope` keep."""
    sql, params = region(selection.start, selection.start_is_file, scope)
    parts, values = [sql], list(params)
    if selection.depth is not None and not selection.start_is_file:
        base = 0 if selection.start is None else selection.start.count("/") + 1
        parts.append("depth < ?")
        values.append(base + selection.depth)
    if selection.type is not None:
        parts.append("type = ?")
        values.append(selection.type)
    for tag in selection.tags:
        wanted = tag.lower()
        # instr() rules most rows out at C speed; json_each() makes the match exact
        parts.append("instr(tags, ?) AND EXISTS (SELECT 1 FROM json_each(files.tags) WHERE value = ?)")
        values += [json.dumps(wanted, ensure_ascii=False), wanted]
    if selection.updated_after_us is not None:
        parts.append("updated_us > ?")
        values.append(selection.updated_after_us)
    if not selection.history_files and not selection.start_is_file:
        parts.append("substr(path, -?) != ?")  # exact and case-sensitive, as `is_history_path`
        values += [len(HISTORY_SUFFIX), HISTORY_SUFFIX]
    if scope is not None:
        link, link_values = _within("link", scope)
        parts.append(f"(link IS NULL OR {link})")
        values += link_values
    return " AND ".join(parts), values


def region(start: str | None, start_is_file: bool, scope: Scope | None) -> Clause:
    """The keys under `start` (a file or folder; None: the root) whose names lie in `scope`: what a walk of
    `start` with that scope visits, so what its freshness walk may add, refresh or prune."""
    parts: list[str] = []
    values: list = []
    if start_is_file and start is not None:
        parts.append("key = ?")
        values.append(walk_key(start))
    elif start is not None:
        low, high = folder_range(start)
        parts.append("key >= ? AND key < ?")
        values += [low, high]
    if scope is not None:
        names, name_values = _keys_within(scope)
        parts.append(names)
        values += name_values
    return (" AND ".join(parts) or "1"), values


def skipped_where(start: str | None, start_is_file: bool, scope: Scope | None) -> Clause:
    """The skipped entries a walk of `start` with `scope` reports (a link reported for its target needs
    that target in scope too, as the scoped walk says nothing of it otherwise)."""
    sql, values = region(start, start_is_file, scope)
    if scope is None:
        return sql, values
    link, link_values = _within("link", scope)
    return f"{sql} AND (link IS NULL OR {link})", values + link_values


def _keys_within(scope: Scope) -> Clause:
    """Keys of paths a scope prefix names: the prefix as a file, or anything under it as a folder."""
    parts: list[str] = []
    values: list = []
    for prefix in scope.prefixes:
        low, high = folder_range(prefix)
        parts.append("key = ? OR (key >= ? AND key < ?)")
        values += [walk_key(prefix), low, high]
    return "(" + " OR ".join(parts) + ")", values


def _within(column: str, scope: Scope) -> Clause:
    """`column` (a memory path) is a scope prefix or lies under one (`Scope.contains`)."""
    parts: list[str] = []
    values: list = []
    for prefix in scope.prefixes:
        parts.append(f"{column} = ? OR substr({column}, 1, ?) = ?")
        values += [prefix, len(prefix) + 1, prefix + "/"]
    return "(" + " OR ".join(parts) + ")", values
