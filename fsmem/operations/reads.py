"""The queries over the files: ls, grep and read, each within the agent's budget and scope, and file metadata.

Each checks its arguments, narrows the budget, and hands the work to the
module that owns it (`fsmem.query.listing`, `grep`, `reading`; the catalog
for what is known of each file without reading it again).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fsmem import faces
from fsmem.errors import FsmemError
from fsmem.operations.core import Core, existing, selection
from fsmem.query import grep as _grep
from fsmem.store.files import file_version, same_version
from fsmem.store.paths import ROOT_README, relative

if TYPE_CHECKING:  # each is imported by the operations that use it, so a grep loads neither links nor listings
    from fsmem.query import as_of as _as_of, links as _links, reading
    from fsmem.query.listing import Listing
    from fsmem.store.meta import FileMeta


def ls(
    memory: Core,
    path: str | None = None,
    *,
    depth: int | None = None,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> Listing:
    """One row per file (path, title, type, updated, tokens, description), within the budget; history files
    (`fsmem.format.history_file`) only with `include_superseded` or when `path` names one."""
    from fsmem.query.listing import list_entries

    budget = memory.budget.narrowed(max_tokens, max_results)
    chosen = selection(memory, path, depth=depth, type=type, tag=tag, updated_after=updated_after)
    chosen = dataclasses.replace(chosen, history_files=include_superseded)
    # one row past the cap, so the page can say the result limit cut it
    found = memory.catalog.listing(chosen, offset=offset, limit=budget.max_results + 1)
    listing = list_entries(
        found.metas,
        memory.tokens.count,
        offset=offset,
        max_results=budget.max_results,
        max_tokens=budget.max_tokens,
        total=found.total,
    )
    listing.skipped = [p for p, _ in found.skipped]
    return listing


def grep(
    memory: Core,
    pattern: str,
    paths: Iterable[str] | None = None,
    *,
    ignore_case: bool = False,
    fixed_strings: bool = False,
    word: bool = False,
    context_lines: int = 0,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    include_superseded: bool = False,
    as_of: str | None = None,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> _grep.GrepResult:
    """Lines matching `pattern` (ripgrep syntax), grouped by file, with an honest total.

    `context_lines` lines before and after each match are shown with it. With `as_of`, the keyed facts
    are those that held on that date (`fsmem.query.as_of`): every matched file is read to tell.
    """
    budget = memory.budget.narrowed(max_tokens, max_results)
    memory.catalog.count_call()  # a memory that greps again holds the change feed: kept outputs, the word index
    named = [relative(memory.root, existing(memory, p)) for p in paths or []]
    ranges: Callable[[list[str]], dict[str, list[tuple[int, int]]]]
    ranges = functools.partial(memory.catalog.superseded, every_file=False)  # grep reads no file's empty list
    hint: Callable[[], list[str]] | None = memory.catalog.superseded_hint
    superseded_too = include_superseded
    seen: dict[str, _as_of.Lines] = {}
    if as_of is not None:
        from fsmem.query import as_of as _as_of

        stamp = _as_of.bound(as_of)

        def ranges(rels: list[str]) -> dict[str, list[tuple[int, int]]]:
            wanted = [rel for rel in rels if rel not in seen]
            seen.update(_as_of.lines_as_of(memory.root, wanted, stamp, include_superseded=include_superseded))
            return {rel: seen[rel].hidden for rel in rels if rel in seen}

        hint, superseded_too = None, False  # what is left out is the view's; the marks are added below
    result = _grep.run(
        memory.root,
        pattern,
        grep_targets(memory, named, type=type, tag=tag, updated_after=updated_after),
        ignore_case=ignore_case,
        fixed_strings=fixed_strings,
        word=word,
        context=context_lines,
        offset=offset,
        max_results=budget.max_results,
        max_tokens=budget.max_tokens,
        count_tokens=memory.tokens.count,
        superseded_ranges=ranges,
        superseded_hint=hint,
        include_superseded=superseded_too,
        timeout=memory.config.grep.timeout_seconds,
        max_line_chars=memory.config.read.max_line_chars,
        within=memory.scope.contains if memory.scope is not None else None,
    )
    if as_of is not None:
        for match in result.matches:
            known = seen.get(match.path)
            match.superseded = known is not None and _as_of.in_ranges(match.line, known.superseded)
    for shown in dict.fromkeys(m.path for m in result.matches):
        try:
            result.versions[shown] = file_version(memory.root / shown)
        except (OSError, FsmemError):
            result.versions[shown] = None
    result.unsearched = too_large(memory, named, type=type, tag=tag, updated_after=updated_after)
    return result


def too_large(memory: Core, named: list[str], **filters: Any) -> list[tuple[str, int]]:
    """(path, bytes) of the files a grep over `named` (the whole memory when empty) did not open: rg skips those
    over LEFT_OUT_LIMIT (`fsmem.store.rg_command`), and the answer names them rather than pass them in silence.

    A file named is looked at; under a folder, the catalog's last walk tells (a walk of 10k files doubled a
    one-shot grep's CPU time, 0.17 s to 0.34 s; `ls`, `search` and `check` walk, and check names each one)."""
    from fsmem.store.rg_command import LEFT_OUT_LIMIT

    found: dict[str, int] = {}
    starts: list[str | None] = [*named] or [None]
    for start in starts:
        try:
            info = os.stat(memory.root / start) if start is not None else None
        except OSError:
            continue
        if start is not None and info is not None and stat.S_ISREG(info.st_mode):
            if info.st_size > LEFT_OUT_LIMIT and (memory.scope is None or memory.scope.contains(start)):
                found[start] = info.st_size
            continue
        chosen = selection(memory, start, **filters)
        for path, size in memory.catalog.too_large(chosen, limit=LEFT_OUT_LIMIT, fresh=False):
            if path != ROOT_README or start == ROOT_README:
                found[path] = size
    return sorted(found.items())


def grep_targets(
    memory: Core,
    named: list[str],
    *,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
) -> list[str] | None:
    """What ripgrep searches: the named paths (None: the whole memory), narrowed to the agent's scope and, with
    front-matter filters, to the files that pass them (the memory's README only when it is named)."""
    if memory.scope is not None:
        named = _scope_roots(memory, named or ["."])
        if not named:
            return []  # nothing in scope exists: no matches, rather than the whole memory
    if type is None and not tag and updated_after is None:
        return named or None
    targets: list[str] = []
    starts: list[str | None] = [*named] or [None]
    for start in starts:
        chosen = selection(memory, start, type=type, tag=tag, updated_after=updated_after)
        targets.extend(rel for rel in memory.catalog.paths(chosen) if rel != ROOT_README or start == ROOT_README)
    return targets


def _scope_roots(memory: Core, named: list[str]) -> list[str]:
    """The paths in scope under each named path, that exist and resolve in scope (links included)."""
    assert memory.scope is not None
    roots: list[str] = []
    for rel in named:
        for inner in memory.scope.roots_under(rel):
            try:
                target = memory.path(inner)
            except FsmemError:
                continue  # a prefix that is a link out of scope, or no longer a memory path
            if target.exists() and inner not in roots:
                roots.append(inner)
    return roots


def read(
    memory: Core,
    path: str,
    *,
    lines: str | None = None,
    section: str | None = None,
    outline: bool = False,
    include_superseded: bool = False,
    as_of: str | None = None,
    expected_version: str | None = None,
    max_tokens: int | None = None,
) -> reading.ReadResult:
    """A line-numbered slice of one file, cut at the token budget with the next range named.

    With `as_of`, the file as the memory stood on that date: the keyed facts recorded later are left out,
    the value that held then is shown where it stands (`fsmem.query.as_of`). With `expected_version` (what
    a cut read's next range carries), nothing is shown if the file changed since: its lines may have moved,
    and a page of the new file after a page of the old one would read as one file.
    """
    from fsmem.query import as_of as _as_of, reading
    from fsmem.store.meta import EXACT_COUNT_LIMIT

    target = existing(memory, path, "file")
    rel = relative(memory.root, target)
    budget = memory.budget.narrowed(max_tokens, None)
    start, end = reading.parse_range(lines) if lines else (1, None)
    version = file_version(target)  # before reading: a file that changes meanwhile fails a guarded write
    if expected_version is not None:
        unchanged_since(rel, version, expected_version)
    if section:
        span = reading.find_section(target, section, exact_limit=EXACT_COUNT_LIMIT)
        start, end = reading.within_section(section, span, (start, end)) if lines else span
    if outline:
        shown = reading.outline(
            target,
            rel,
            memory.tokens,
            exact_limit=EXACT_COUNT_LIMIT,
            max_tokens=budget.max_tokens,
            start=start,
            end=end,
        )
        shown.version = version
        return shown
    if as_of is not None:
        stamp = _as_of.bound(as_of)
        at = _as_of.lines_as_of(memory.root, [rel], stamp, include_superseded=include_superseded).get(rel)
        hide = at.hidden if at is not None else []
    else:
        hide = [] if include_superseded else superseded_ranges(memory, rel)
    result = reading.bounded_read(
        target,
        rel,
        memory.tokens,
        start=start,
        end=end,
        max_tokens=budget.max_tokens,
        max_line_chars=memory.config.read.max_line_chars,
        hide_ranges=hide,
    )
    if as_of is not None and result.hidden_superseded:  # not only superseded lines: values recorded later too
        said = "recorded later" if include_superseded else "recorded later or replaced by then"
        result.notes = [
            f"[{result.hidden_superseded} line(s) hidden as of {as_of}: {said}]"
            if "superseded line(s) hidden" in n
            else n
            for n in result.notes
        ]
    if as_of is not None:
        elsewhere = _as_of.kept_in_history(memory.root, rel, stamp, memory.scope)
        if elsewhere:
            from fsmem.format.history_file import history_path

            named = ", ".join(elsewhere[:5]) + (f" and {len(elsewhere) - 5} more" if len(elsewhere) > 5 else "")
            result.notes.append(
                f"[the value that held on {as_of} of {named} is kept in {history_path(rel)}:"
                f" read it with {faces.arg('as_of')}]"
            )
    result.version = version
    if any("[[" in text for _, text in result.lines):  # a read without links asks nothing more
        numbers = {number for number, _ in result.lines}
        memory.catalog.get(target)
        memory.catalog.sync()
        from fsmem.query import links as _links

        rows = _links.Resolver(memory.catalog).links_in(rel, lines=(min(numbers), max(numbers)))[1]
        result.links = [{k: v for k, v in row.to_dict().items() if k != "path"} for row in rows if row.line in numbers]
    return result


def unchanged_since(rel: str, version: str | None, expected: str) -> None:
    """Refuse to go on reading a file that changed since the page that named `expected`."""
    from fsmem.budget import echo
    from fsmem.errors import ChangedOnDisk
    from fsmem.query.reading import named
    from fsmem.store.paths import check_text

    check_text(expected, "the expected version")
    if version is not None and same_version(version, expected):
        return
    wanted = expected.strip()
    shown = wanted if len(wanted) <= 40 and wanted.isalnum() else echo(wanted)
    raise ChangedOnDisk(
        f"{named(rel)} has changed since version {shown}: its current version is "
        f"{version}, and its lines may have moved, so none are shown. Read it again from its start, "
        f"without {faces.arg('expected_version')}"
    )


def links(
    memory: Core,
    path: str,
    *,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> _links.LinksResult:
    """What a file's [[wikilinks]] lead to (resolved, to nothing, or ambiguous), then what links to it, each
    with its line: one page within the budget and the scope (`fsmem.query.links`)."""
    from fsmem.query import links as _links

    target = existing(memory, path, "file")
    rel = relative(memory.root, target)
    budget = memory.budget.narrowed(max_tokens, max_results)
    memory.catalog.get(target)  # its own row, whatever the walk's scope
    memory.catalog.sync()
    return _links.page_of(
        _links.Resolver(memory.catalog),
        rel,
        offset=offset,
        max_results=budget.max_results,
        max_tokens=budget.max_tokens,
        count=memory.tokens.count,
    )


def files(
    memory: Core,
    path: str | None = None,
    *,
    type: str | None = None,
    tag: str | Iterable[str] | None = None,
    updated_after: str | None = None,
    skipped: list[tuple[str, str]] | None = None,
) -> list[FileMeta]:
    """Metadata of the memory files under `path` that pass the front-matter filters.

    Files that cannot be read are left out and, given `skipped`, listed there as (path, reason).
    """
    found = memory.catalog.listing(selection(memory, path, type=type, tag=tag, updated_after=updated_after))
    if skipped is not None:
        skipped.extend(found.skipped)
    return list(found.metas)


def meta(memory: Core, user_path: str) -> FileMeta:
    """What the catalog knows of one file (title, type, tags, tokens, problems…)."""
    return memory.catalog.get(existing(memory, user_path, "file"), full=True)


def superseded_ranges(memory: Core, rel: str) -> list[tuple[int, int]]:
    """Line ranges of superseded facts in one file (empty for files too large to parse)."""
    from fsmem.store.meta import EXACT_COUNT_LIMIT

    path = memory.path(rel, want="file")  # the containment rule: a public method, whoever calls it
    rel = relative(memory.root, path)
    try:
        if path.stat().st_size > EXACT_COUNT_LIMIT:
            return []
    except FileNotFoundError:
        return []
    return memory.catalog.superseded([rel]).get(rel, [])
