"""Links between memories: what a file's `[[wikilinks]]` lead to, what links to it, and the links to nothing.

Resolution follows `fsmem.format.links` (path, entity or topic name, title or alias,
file name, then the end of a path; a name several files answer to is ambiguous).
It is answered in SQL over the rows of the metadata cache, which keep each
file's links and names with its row (`fsmem.store.cache`): after the catalog
caught up with the files, an answer costs the links it shows and the names it
resolves, never a walk and parse of the whole memory. Within a scope, only the
files in it exist: a link to a file outside leads to nothing, and a backlink
from one is neither shown nor counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fsmem.budget import Count, Meter, Metered, Page, Paged, named
from fsmem.format.links import (
    AMBIGUOUS,
    FILE_NAME,
    MD_TWIN,
    PATH_END,
    RESOLVED,
    UNRESOLVED,
    answered_names,
    asked_names,
    choose,
    ends_path,
    path_ends,
)
from fsmem.store.catalog import Catalog
from fsmem.store.selection import Selection, where
from fsmem.store.walk import walk_key

CHUNK = 400  # names per IN (...) query
SHOWN_CANDIDATES = 5  # an ambiguous link's answer names this many of the files it fits


@dataclass(frozen=True)
class Outcome:
    """Where a name leads: `status` RESOLVED with its one path, AMBIGUOUS with the paths it fits, or UNRESOLVED."""

    status: str
    paths: tuple[str, ...] = ()

    @property
    def path(self) -> str | None:
        return self.paths[0] if self.status == RESOLVED else None


@dataclass
class LinkRow:
    """One link: the file it is in, its line, its target and label as written, and where it leads."""

    path: str
    line: int
    target: str
    label: str | None
    outcome: Outcome

    @property
    def written(self) -> str:
        return f"[[{self.target}|{self.label}]]" if self.label is not None else f"[[{self.target}]]"

    def to_dict(self) -> dict[str, Any]:
        return {
            **named(self, "path", "line", "target", "label"),
            "status": self.outcome.status,
            "to": self.outcome.path,
            "candidates": list(self.outcome.paths) if self.outcome.status == AMBIGUOUS else [],
        }

    def leads(self) -> str:
        """Where it leads, as a text answer says it."""
        if self.outcome.status == RESOLVED:
            return f"-> {self.outcome.path}"
        if self.outcome.status == UNRESOLVED:
            return "-> nothing (no memory file answers to this name)"
        shown = list(self.outcome.paths[:SHOWN_CANDIDATES])
        more = len(self.outcome.paths) - len(shown)
        return (
            f"-> ambiguous, {len(self.outcome.paths)} files: "
            + ", ".join(shown)
            + (f" and {more} more" if more else "")
        )


@dataclass
class LinksResult(Paged, Metered):
    """The answer to `links PATH`: the links in the file, then the links to it (backlinks), as one page."""

    path: str
    links: list[LinkRow]
    backlinks: list[LinkRow]
    page: Page
    meter: Meter | None = field(default=None, repr=False, compare=False)

    @property
    def rows(self) -> int:
        return len(self.links) + len(self.backlinks)

    @property
    def cited(self) -> list[str]:
        return [self.path, *(r.outcome.path for r in self.links if r.outcome.path)] + [
            f"{r.path}:{r.line}" for r in self.backlinks
        ]

    def to_dict(self) -> dict[str, Any]:
        out = [{k: v for k, v in r.to_dict().items() if k != "path"} for r in self.links]
        back = [{k: r.to_dict()[k] for k in ("path", "line", "target", "label")} for r in self.backlinks]
        return {"path": self.path, "links": out, "backlinks": back, **self.page.to_dict(), "tokens": self.tokens}

    def to_text(self) -> str:
        lines: list[str] = []
        if self.links:
            lines.append(out_header(self.path))
            lines += [out_line(r) for r in self.links]
        if self.backlinks:
            lines.append(in_header(self.path))
            lines += [in_line(r) for r in self.backlinks]
        if not self.total:
            lines.append(f"({self.path} holds no [[links]], and no file links to it)")
        lines.append(self.page.trailer("links"))
        return "\n".join(lines)


def out_header(path: str) -> str:
    return f"links in {path}:"


def in_header(path: str) -> str:
    return f"links to {path}:"


def out_line(row: LinkRow) -> str:
    return f"{row.line}: {row.written} {row.leads()}"


def in_line(row: LinkRow) -> str:
    return f"{row.path}:{row.line}: {row.written}"


class Resolver:
    """Resolves names over one catalog's rows, within its scope (the catalog brought up to date first)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.sql, self.params = where(Selection(), catalog.scope)
        self._known: dict[str, Outcome] = {}

    def _files(self, columns: str) -> str:
        """The files in scope, as a subquery (its WHERE names the columns of `files` alone)."""
        return f"(SELECT key AS file_key, id AS file_id, {columns} FROM files WHERE {self.sql})"

    def resolve(self, names: Iterable[str]) -> dict[str, Outcome]:
        """Folded name -> where it leads, for every name given (each asked of SQLite once per resolver)."""
        names = list(names)
        wanted = sorted({n for n in names if n not in self._known})
        for at in range(0, len(wanted), CHUNK):
            chunk = wanted[at : at + CHUNK]
            asked = asked_names(chunk)
            rows = self.catalog.cache.select(
                f"SELECT n.name, n.tier, f.path, f.link FROM names n JOIN {self._files('path, link')} f"
                f" ON f.file_id = n.file WHERE n.name IN ({','.join('?' * len(asked))})",
                [*self.params, *asked],
                [],
            )
            in_chunk = set(chunk)
            found: dict[str, list[tuple[int, str, str | None]]] = {}
            for stored, code, path, link in rows:
                for tier, name in answered_names(code, stored):
                    if name in in_chunk:
                        found.setdefault(name, []).append((tier, path, link))
            for name, candidates in self._path_ends([n for n in chunk if n not in found]).items():
                found[name] = candidates
            for name in chunk:
                self._known[name] = _outcome(found.get(name, []))
        return {n: self._known[n] for n in names}

    def _path_ends(self, names: list[str]) -> dict[str, list[tuple[int, str, str | None]]]:
        """The files whose path ends with a name that no other tier answered (`[[People/Bob]]`): among the
        files whose file name is the name's last part, those whose path ends with the whole name."""
        ends = [n for n in names if "/" in n]
        last = sorted({n.rsplit("/", 1)[-1] for n in ends})
        if not last:
            return {}
        asked = asked_names(last)
        stored = self.catalog.cache.select(
            f"SELECT n.name, n.tier, f.path, f.link FROM names n JOIN {self._files('path, link')} f"
            f" ON f.file_id = n.file WHERE n.tier IN (?, ?) AND n.name IN ({','.join('?' * len(asked))})",
            [*self.params, FILE_NAME, FILE_NAME | MD_TWIN, *asked],
            [],
        )
        rows = [(name, path, link) for stem, code, path, link in stored for _tier, name in answered_names(code, stem)]
        found: dict[str, list[tuple[int, str, str | None]]] = {}
        for name in ends:
            for file_name, path, link in rows:
                if file_name == name.rsplit("/", 1)[-1] and ends_path(name, path):
                    found.setdefault(name, []).append((PATH_END, path, link))
        return found

    def links_in(
        self, rel: str, offset: int = 0, limit: int | None = None, *, lines: tuple[int, int] = (1, 2**62)
    ) -> tuple[int, list[LinkRow]]:
        """How many links `rel` holds (on `lines`, first and last), and those from `offset` (at most `limit`),
        resolved, in line order."""
        among = "FROM wikilinks WHERE key = ? AND line BETWEEN ? AND ?"
        params = [walk_key(rel), *lines]
        total = self.catalog.cache.select(f"SELECT count(*) {among}", params, [(0,)])[0][0]
        rows = self.catalog.cache.select(
            f"SELECT line, target, label, name {among} ORDER BY line, rowid LIMIT ? OFFSET ?",
            [*params, -1 if limit is None else limit, offset],
            [],
        )
        outcomes = self.resolve(row[3] for row in rows)
        return total, [LinkRow(rel, line, target, label, outcomes[name]) for line, target, label, name in rows]

    def names_to(self, rel: str) -> list[str]:
        """The names of `rel` that lead to it (not to another file, nor ambiguously)."""
        names = [
            name
            for stored, code in self.catalog.cache.select(
                "SELECT name, tier FROM names WHERE file IN (SELECT id FROM files WHERE key = ?)", [walk_key(rel)], []
            )
            for _tier, name in answered_names(code, stored)
        ]
        names += path_ends(rel)  # asked, not stored: a link `[[People/Bob]]` names no stored name of it
        return [name for name, outcome in self.resolve(names).items() if outcome.path == rel]

    def links_to(self, rel: str, offset: int = 0, limit: int | None = None) -> tuple[int, list[LinkRow]]:
        """How many links in scope lead to `rel`, and those from `offset` (at most `limit`), by file and line."""
        names = self.names_to(rel)
        if not names:
            return 0, []
        marks = ",".join("?" * len(names))
        source = f"FROM wikilinks w JOIN {self._files('path')} f ON f.file_key = w.key WHERE w.name IN ({marks})"
        total = self.catalog.cache.select(f"SELECT count(*) {source}", [*self.params, *names], [(0,)])[0][0]
        rows = self.catalog.cache.select(
            f"SELECT f.path, w.line, w.target, w.label {source} ORDER BY w.key, w.line, w.rowid LIMIT ? OFFSET ?",
            [*self.params, *names, -1 if limit is None else limit, offset],
            [],
        )
        here = Outcome(RESOLVED, (rel,))
        return total, [LinkRow(path, line, target, label, here) for path, line, target, label in rows]

    def broken(self, selection: Selection) -> list[LinkRow]:
        """The links of the files `selection` keeps (in scope) that lead to nothing or are ambiguous."""
        sql, params = where(selection, self.catalog.scope)
        rows = self.catalog.cache.select(
            "SELECT f.path, w.line, w.target, w.label, w.name FROM wikilinks w JOIN"
            f" (SELECT key AS file_key, path FROM files WHERE {sql}) f ON f.file_key = w.key ORDER BY w.key, w.line",
            params,
            [],
        )
        outcomes = self.resolve(row[4] for row in rows)
        found = []
        for path, line, target, label, name in rows:
            if outcomes[name].status != RESOLVED:
                found.append(LinkRow(path, line, target, label, outcomes[name]))
        return found


def _outcome(candidates: list[tuple[int, str, str | None]]) -> Outcome:
    """`choose` over the candidates, a symbolic link counted as the memory file it leads to when that is one too."""
    paths = {path for _tier, path, _link in candidates}
    kept = [(tier, path) for tier, path, link in candidates if link is None or link not in paths]
    status, chosen = choose(kept)
    return Outcome(status, tuple(chosen))


def page_of(
    resolver: Resolver, rel: str, *, offset: int, max_results: int, max_tokens: int, count: Count
) -> LinksResult:
    """The links in `rel`, then the links to it, from `offset`, whole rows within the row and token caps."""
    n_out = resolver.links_in(rel, 0, 0)[0]
    out: list[LinkRow] = []
    back: list[LinkRow] = []
    if offset < n_out:
        out = resolver.links_in(rel, offset, max_results)[1]
    n_in, back = resolver.links_to(rel, max(0, offset - n_out), max(0, max_results - len(out)))
    meter = Meter(count, max_tokens=max_tokens, max_results=max_results)
    shown_out: list[LinkRow] = []
    for row in out:
        if not meter.take_text([out_header(rel), out_line(row)] if not shown_out else [out_line(row)]):
            break
        shown_out.append(row)
    shown_in: list[LinkRow] = []
    if len(shown_out) == len(out):
        for row in back:
            if not meter.take_text([in_header(rel), in_line(row)] if not shown_in else [in_line(row)]):
                break
            shown_in.append(row)
    shown = len(shown_out) + len(shown_in)
    page = Page(offset=offset, shown=shown, total=n_out + n_in, cut_by=meter.cut_by)
    return LinksResult(rel, shown_out, shown_in, page, meter)
