"""`fsmem context`: the block a harness pre-injects at the start of a turn.

The `profile/` core comes first (who the agents work for, standing rules),
then the `INDEX.md` table of contents, so the agent knows what is worth asking
for. When INDEX.md does not exist yet, the block says so and lists the entity
and topic files from the catalog instead. The block is trimmed to the agent's
token budget in whole lines, and ends with a note naming what was cut and how
to read it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem import faces, format as fmt
from fsmem.budget import Meter
from fsmem.errors import FsmemError
from fsmem.format import secrets
from fsmem.store.cache import RACY_NS
from fsmem.store.paths import lexical_parts, read_regular, resolve

if TYPE_CHECKING:
    from fsmem.store.catalog import Catalog
    from fsmem.tokens import TokenCounter

INDEX_FILE = "INDEX.md"
PROFILE_DIR = "profile"
CATALOG_FOLDERS = ("entities/", "topics/")
HEADER = "# Memory\nShared memory files. Look things up with ls, grep, read and search; save what you learn with note."


@dataclass
class Part:
    """One source of the block: its heading and its lines (file line numbers where it has them)."""

    source: str
    heading: str
    lines: Any  # a list of (line number or None, text), or the catalog's rows (_CatalogRows)
    shown: int = 0
    readable: bool = True  # the agent may read the source itself (INDEX.md is out of a scope's reach)


@dataclass
class ContextBlock:
    text: str
    tokens: int
    max_tokens: int
    index_exists: bool
    sources: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return bool(self.cut)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "truncated": self.truncated}

    def to_text(self) -> str:
        return self.text


def _body_lines(root: Path, rel: str, as_of: str | None = None) -> list[tuple[int | None, str]]:
    """A file's body lines with their file line numbers; superseded facts and edge blank lines left out
    (with `as_of`, a stamp: the facts that did not hold then, `fsmem.query.as_of`).

    A file that cannot be read (vanished, denied, not regular, a link out) gives no lines. The lines of
    each version of a file are kept (`_SUMMARIES`): a turn's context reads INDEX.md and the profile again
    only when they changed.
    """
    try:
        path = resolve(root, rel, want="file")
        stat = os.stat(path)
    except (OSError, FsmemError):
        return []
    key = (os.fspath(path), stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns, as_of)
    with _SUMMARIES_LOCK:
        kept = _SUMMARIES.get(key)
        if kept is not None:
            _SUMMARIES.move_to_end(key)
            return kept
    try:
        text, _ = fmt.decode(read_regular(path))
    except (OSError, FsmemError):
        return []
    doc = fmt.split(text)
    if as_of is None:
        hidden = fmt.superseded_ranges(doc)
    else:
        from fsmem.query.as_of import lines_as_of

        at = lines_as_of(root, [rel], as_of, include_superseded=False).get(rel)
        hidden = at.hidden if at is not None else fmt.superseded_ranges(doc)
    # A secret in a file is never pre-injected, whatever the policy let into the file.
    lines: list[tuple[int | None, str]] = [
        (number, secrets.redact(line) if secrets.scan(line) else line)
        for number, line in enumerate(doc.body.splitlines(), start=doc.body_start_line)
        if not fmt.in_ranges(number, hidden)
    ]
    while lines and not lines[0][1].strip():
        lines.pop(0)
    while lines and not lines[-1][1].strip():
        lines.pop()
    if stat.st_mtime_ns < time.time_ns() - RACY_NS:  # a file written this very second may change unseen
        with _SUMMARIES_LOCK:
            _SUMMARIES[key] = lines
            while len(_SUMMARIES) > SUMMARIES_KEPT:
                _SUMMARIES.popitem(last=False)
    return lines


SUMMARIES_KEPT = 64
_SUMMARIES: OrderedDict[tuple[str, int, int, int, int, str | None], list[tuple[int | None, str]]] = OrderedDict()
_SUMMARIES_LOCK = threading.Lock()


# What an INDEX.md line names: the target of a Markdown link, or a bare path ending in .md. Possessive: a
# start that finds no `)` fails at once (backtracking, a line of 15,000 characters of `](a` took 200 s)
_LINK = re.compile(r"\]\(\s*+<?([^)>\s]++)>?[^)]*+\)")
_BARE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.(?:md|markdown))(?![\w/])", re.IGNORECASE)


def _named_paths(line: str) -> list[str | None]:
    """The memory paths a line names (None for a reference that is no memory path, such as a URL)."""
    found: list[str | None] = []
    # no link starts after the last `)`: each start there would scan to the end of the line, in vain
    closed = line.rfind(")") + 1
    links, rest = _LINK.findall(line, 0, closed), _LINK.sub("]", line[:closed]) + line[closed:]
    for target in links + _BARE.findall(rest):
        target = target.split("#", 1)[0].split("?", 1)[0]
        try:
            found.append("/".join(lexical_parts(target)) if target and "://" not in target else None)
        except FsmemError:
            found.append(None)
    return found


def scoped_lines(lines: list[tuple[int | None, str]], within: Callable[[str], bool]) -> list[tuple[int | None, str]]:
    """The lines of INDEX.md an agent with a scope may see: those naming only files `within` it.

    A line that names nothing (generated prose, a count of documents) or names
    any file out of scope is left out; a heading stays only when a kept line
    follows it, so not even a group name speaks of what is out of scope.
    """
    kept: list[tuple[int | None, str]] = []
    for number, line in lines:
        if line.lstrip().startswith("#") or not line.strip():
            kept.append((number, line))
            continue
        named = _named_paths(line)
        if named and all(path is not None and within(path) for path in named):
            kept.append((number, line))
    out: list[tuple[int | None, str]] = []
    for index, (number, line) in enumerate(kept):
        level = _heading_level(line)
        if level:
            body = False
            for _, after in kept[index + 1 :]:
                after_level = _heading_level(after)
                if after_level and after_level <= level:
                    break
                if after.strip() and not after_level:
                    body = True
                    break
            if not body:
                continue
        elif not line.strip() and (not out or not out[-1][1].strip()):
            continue
        out.append((number, line))
    while out and not out[-1][1].strip():
        out.pop()
    return out


def _heading_level(line: str) -> int:
    stripped = line.lstrip()
    level = len(stripped) - len(stripped.lstrip("#"))
    return level if level and stripped[level : level + 1] in (" ", "\t", "") else 0


def gather(
    root: Path, catalog: Catalog, within: Callable[[str], bool] | None = None, as_of: str | None = None
) -> tuple[list[Part], bool]:
    """The parts of the block in order (profile first), and whether INDEX.md exists.

    With `as_of` (a stamp), the profile's keyed facts are those that held then; INDEX.md is shown as it is.

    With `within` (an agent's scope; the catalog is scoped too), INDEX.md shows
    only its lines that name files in scope (`scoped_lines`). Without INDEX.md,
    the entity and topic rows come from the catalog's SQL listing, decoded only
    as far as the budget takes them.
    """
    from fsmem.store.selection import Selection

    parts: list[Part] = []
    if (root / PROFILE_DIR).is_dir():
        for meta in catalog.listing(Selection.of(PROFILE_DIR)).metas:
            title = f" ({meta.title})" if meta.title else ""
            parts.append(Part(meta.path, f"## {meta.path}{title}", _body_lines(root, meta.path, as_of)))
    if _readable_index(root):
        lines = _body_lines(root, INDEX_FILE)
        if within is not None:
            lines = scoped_lines(lines, within)
        parts.append(Part(INDEX_FILE, f"## {INDEX_FILE}", lines, readable=within is None))
        return parts, True
    found = [
        catalog.listing(Selection.of(folder.rstrip("/"), history_files=False))
        for folder in CATALOG_FOLDERS
        if (root / folder).is_dir()
    ]
    heading = f"## Entities and topics ({INDEX_FILE} does not exist yet; `fsmem consolidate` writes it)"
    parts.append(Part("catalog", heading, _CatalogRows(found)))
    return parts, False


class _CatalogRows:
    """The fallback list's lines, made from the catalog's rows as the block takes them; its length is the
    rows' total, known without decoding them."""

    def __init__(self, found: list[Any]):
        self.found = found

    def __len__(self) -> int:
        return sum(each.total for each in self.found)

    def __iter__(self) -> Iterator[tuple[int | None, str]]:
        for each in self.found:
            for meta in each.metas:
                about = f": {meta.description}" if meta.description else ""
                yield None, f"- {meta.path} — {meta.title or meta.path}{about}"


def _readable_index(root: Path) -> bool:
    try:
        return resolve(root, INDEX_FILE, want="file").is_file()
    except FsmemError:
        return False  # a link out of the memory, a FIFO…: as if there were none


def _cut_note(parts: list[Part]) -> list[str]:
    cut = []
    for part in parts:
        left = len(part.lines) - part.shown
        if not left:
            continue
        if part.source == "catalog":
            cut.append(f"{left} of {len(part.lines)} entity/topic rows (list entities and topics to see them)")
        elif not part.readable:
            cut.append(f"{left} of {len(part.lines)} lines of {part.source} (list files with ls)")
        elif part.shown == 0:
            cut.append(f"{part.source} (read it)")
        else:
            first = part.lines[part.shown][0]
            cut.append(f"{part.source} from line {first} (read it with {faces.ask(lines=f'{first}:')})")
    return cut


def _render(entries: list[tuple[Part | None, str]], cut: list[str], budget: int) -> str:
    lines = [line for _, line in entries]
    if cut:
        lines.append(f"[context cut at the {budget}-token budget; left out: {'; '.join(cut)}]")
    return "\n".join(lines)


def build(
    root: Path,
    catalog: Catalog,
    tokens: TokenCounter,
    *,
    max_tokens: int,
    within: Callable[[str], bool] | None = None,
    as_of: str | None = None,
) -> ContextBlock:
    """The pre-injection block of the memory at `root`, at most `max_tokens` (the agent's budget, already narrowed).

    `within` is the agent's scope (with a catalog scoped alike): see `gather`. A block is made once per
    state of the memory's rows (`Catalog.version`: INDEX.md and profile/ are memory files too), budget,
    scope and face (its cut note names the read that goes on in the face's words), and given again while none of them changed: a turn's context costs a lookup.
    """
    key = (os.fspath(root), max_tokens, catalog.scope, as_of, faces.current().kind, catalog.version())
    with _BLOCKS_LOCK:
        kept = _BLOCKS.get(key) if key[-1] >= 0 else None
    if kept is not None:
        return dataclasses.replace(kept, sources=list(kept.sources), cut=list(kept.cut))
    block = _fill(*gather(root, catalog, within, as_of), tokens.count, max_tokens)
    if key[-1] >= 0 and key[-1] == catalog.version():  # nothing changed while it was made
        with _BLOCKS_LOCK:
            _BLOCKS[key] = block
            while len(_BLOCKS) > BLOCKS_KEPT:
                _BLOCKS.popitem(last=False)
    return dataclasses.replace(block, sources=list(block.sources), cut=list(block.cut))


BLOCKS_KEPT = 32
_BLOCKS: OrderedDict[tuple, ContextBlock] = OrderedDict()
_BLOCKS_LOCK = threading.Lock()


def _fill(parts: list[Part], index_exists: bool, count: Callable[[str], int], budget: int) -> ContextBlock:
    """The block of `parts` within `budget` tokens, with a note naming what was cut."""
    # Fill greedily, keeping room for a note that names every part as cut ...
    meter = Meter(count, max_tokens=budget, reserve=count(_render([], _cut_note(parts), budget)))
    entries: list[tuple[Part | None, str]] = []  # (the part a content line belongs to, the line)

    def lines() -> Iterator[tuple[Part | None, str]]:
        yield None, HEADER
        for each in parts:
            yield None, ""
            yield None, each.heading
            for _, text in each.lines:
                yield each, text

    for part, line in lines():
        if not meter.take_text(line):
            break
        entries.append((part, line))
        if part is not None:
            part.shown += 1
    # ... then give back whole lines until the block with its real note fits.
    while True:
        _drop_bare_headings(entries, parts)
        cut = _cut_note(parts)
        text = _render(entries, cut, budget)
        if count(text) <= budget or not entries:
            break
        part, _ = entries.pop()
        if part is not None:
            part.shown -= 1
    if count(text) > budget:
        text = ""  # a budget smaller than the note itself: nothing fits
    sources = [p.source for p in parts if p.shown]
    return ContextBlock(text, count(text), budget, index_exists, sources, cut)


def _drop_bare_headings(entries: list[tuple[Part | None, str]], parts: list[Part]) -> None:
    """A heading (or blank line) at the end of a cut block, with nothing under it, says nothing."""
    while len(entries) > 1 and (not entries[-1][1].strip() or entries[-1][1].lstrip().startswith("#")):
        part, _ = entries.pop()
        if part is not None:
            part.shown -= 1
