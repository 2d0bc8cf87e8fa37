"""`grep`: ripgrep underneath, an honest total, and only as much parsing as the budget can show.

Most answers come from one rg pass, counted a file at a time: a name in
half the files of a 100k-file memory prints some 10 MB, read once, where a
count pass would have read every file a second time. For a larger one,
`rg --count` counts the match lines of every file and a second pass runs only
on the few files that hold the page shown; either way only the match lines inside
`offset .. offset + budget` are decoded and counted in tokens. A pattern with a
million matches thus stays close to bare `rg` speed while the answer still
says exactly how many exist.

This module is long because the passes, the exact subtraction of superseded
lines and the collector that fills a page are one algorithm; running rg itself
lives in `fsmem.store.rg`.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import faces
from fsmem.budget import CUT_BY_RESULTS, CUT_BY_TOKENS, Meter, Metered, Page, Paged, long_path
from fsmem.config import GrepSettings, ReadSettings
from fsmem.errors import InvalidArgument
from fsmem.query import grep_cache
from fsmem.store import rg_command
from fsmem.store.paths import ROOT_README, all_memory_paths, is_memory_path
from fsmem.store.rg import Job, Rg, build_args, decode_path, find_rg

# rg's standard output with --null: `PATH\0NUMBER:TEXT` for a match line, `PATH\0NUMBER-TEXT` for context.
_NUMBERED = re.compile(rb"(\d+)([:-])")
_PREVIEW_MARK = " [... omitted end of long line]"
# A first rg pass answers alone when its whole output is at most this long (a name in 60% of 100k files:
# 7-14 MB; a word of 137,750 lines at 10k files, 17 MB; of 1.4M lines at 100k files, some 170 MB: stopped at
# a seventh of its pass, counted, then the page read). Past it, the pass so far is lost: the limit is not
# set just above a size that is common.
_SMALL_OUTPUT = 24 << 20
LEFT_OUT_SHOWN = 5  # files too large to search named in an answer; the rest counted
# Arguments per rg invocation when an explicit file list is passed.
_ARGS_PER_CALL = 2000


@dataclass
class GrepMatch:
    path: str
    line: int
    text: str
    superseded: bool = False
    before: list[tuple[int, str]] = field(default_factory=list)
    after: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "line": self.line, "text": self.text, "superseded": self.superseded}
        if self.before or self.after:
            data["before"] = [{"line": n, "text": t} for n, t in self.before]
            data["after"] = [{"line": n, "text": t} for n, t in self.after]
        return data


@dataclass
class GrepResult(Paged, Metered):
    """Matches shown, the honest count of all matches (`page.total`) and how to page on."""

    pattern: str
    matches: list[GrepMatch]
    page: Page
    meter: Meter | None = field(default=None, repr=False, compare=False)
    line_cut: bool = False  # the one match shown had to be cut to fit the budget
    versions: dict[str, str | None] = field(default_factory=dict)  # each file shown: its version (expected_version)
    unsearched: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes): over LEFT_OUT_LIMIT, not searched

    @property
    def truncated(self) -> bool:
        return self.page.truncated or self.line_cut

    @property
    def cited(self) -> list[str]:
        return [f"{m.path}:{m.line}" for m in self.matches]

    def to_dict(self) -> dict[str, Any]:
        data = {"matches": [m.to_dict() for m in self.matches], **self.page.to_dict(), "tokens": self.tokens}
        data["truncated"] = self.truncated
        data["versions"] = self.versions
        if self.unsearched:
            data["unsearched"] = [{"path": p, "bytes": n} for p, n in self.unsearched[:LEFT_OUT_SHOWN]]
        return data

    def to_text(self) -> str:
        out: list[str] = []
        current = None
        for match in self.matches:
            if match.path != current:
                if current is not None:
                    out.append("")
                out.append(f"{match.path}:")
                current = match.path
            for number, text in match.before:
                out.append(f"{number}-{text}")
            mark = " [superseded]" if match.superseded else ""
            out.append(f"{match.line}:{match.text}{mark}")
            for number, text in match.after:
                out.append(f"{number}-{text}")
        if not self.matches and not self.total:
            out.append("(no matches)")
        else:
            out.append(self.page.trailer("matches", narrow=f", or narrow the pattern or {faces.operand('paths')}"))
        if self.unsearched:
            shown = ", ".join(path for path, _ in self.unsearched[:LEFT_OUT_SHOWN])
            more = len(self.unsearched) - LEFT_OUT_SHOWN
            out.append(
                f"(not searched: {len(self.unsearched)} file(s) over {rg_command.LEFT_OUT_LIMIT:,} bytes, too large: {shown}"
                f"{f' and {more} more' if more > 0 else ''})"
            )
        return "\n".join(out)


def run(
    root: Path,
    pattern: str,
    targets: Iterable[str] | None,
    *,
    ignore_case: bool = False,
    fixed_strings: bool = False,
    word: bool = False,
    context: int = 0,
    offset: int = 0,
    max_results: int,
    max_tokens: int,
    count_tokens: Callable[[str], int],
    superseded_ranges: Callable[[list[str]], dict[str, list[tuple[int, int]]]],
    superseded_hint: Callable[[], list[str]] | None = None,
    include_superseded: bool = False,
    timeout: float = GrepSettings.timeout_seconds,
    max_line_chars: int = ReadSettings.max_line_chars,
    within: Callable[[str], bool] | None = None,
) -> GrepResult:
    """Run rg over `targets` (memory-relative paths; None = the whole memory).

    `within(path)` (an agent's scope) must hold for every file shown or counted.

    In a long-lived process on a trusted change feed, `fsmem.query.grep_words` may first narrow the files
    to those whose words can hold a match; rg then searches those alone, and the rest is the same.

    A first rg pass (`--heading`: each file's lines under its name) answers alone when its output is at
    most `_SMALL_OUTPUT`; its files are put in path order in Python (deterministic `--offset` paging without
    single-threaded `rg --sort path`), the page's lines are decoded and the other files' lines counted.
    Past `_SMALL_OUTPUT` it is stopped for
    two passes, so that nothing the budget will never show is printed or
    parsed: `rg --count` gives every file's number of match lines
    (multi-threaded, a few bytes per file), then rg prints only the
    few files, in path order, that hold the requested page.

    `superseded_ranges(paths)` maps files to the line ranges of superseded
    facts. Unless `include_superseded`, matches there are neither shown nor
    counted: the line numbers of matches are asked of rg only for the files
    that have matches and such ranges. `superseded_hint()` names the files
    likely to have them (the cache's last word, unverified), so that this pass
    runs while `superseded_ranges` verifies; files it missed get a pass of
    their own. If files change between the passes, the total is the count
    pass's.
    """
    if not pattern:
        raise InvalidArgument("the pattern is empty; give a word or a regular expression to look for")
    target_list = list(targets) if targets is not None else None
    if target_list is not None and not target_list:
        return GrepResult(pattern, [], Page(offset, 0, 0))
    # rg walks folders itself: what it finds passes the containment rule here (names with control
    # characters or non-UTF-8 bytes are not memory), and the root README.md only when named.
    readme_named = target_list is not None and ROOT_README in target_list

    def keep(path: str) -> bool:
        return is_memory_path(path) and (readme_named or path != ROOT_README) and (within is None or within(path))

    def kept(paths: list[str]) -> list[str]:
        """`paths` that `keep` keeps; where no scope is asked, the lexical rule is checked over all at once."""
        if within is None and all_memory_paths(paths):
            return paths if readme_named or ROOT_README not in paths else [p for p in paths if p != ROOT_README]
        return list(filter(keep, paths))

    command = [find_rg()] + build_args(pattern, ignore_case=ignore_case, fixed_strings=fixed_strings, word=word)
    if "fsmem.store.feed" in sys.modules:  # a long-lived process: only the files that can match are searched
        from fsmem.query import grep_words

        narrowed = grep_words.narrowed(root, pattern, target_list, fixed_strings=fixed_strings, word=word)
        if narrowed is not None:
            target_list = narrowed
    rg = grep_cache.Kept.of(Rg(root, command, pattern, timeout), root, command)  # outputs kept while no file changes
    line_args = rg_command.line_args(max_line_chars, context)
    collect = functools.partial(
        _Collector,
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
        count_tokens=count_tokens,
        include_superseded=include_superseded,
        context=context,
        max_line_chars=max_line_chars,
    )
    if target_list is None or len(target_list) <= _ARGS_PER_CALL:
        # Most answers are small: one pass, given up once its output is large.
        searched = ["./"] if target_list is None else target_list
        first = rg_command.line_args(max_line_chars, context, heading=True)
        streamed = _Blocks()
        small = rg.output(first + ["--"] + searched, limit=_SMALL_OUTPUT, each=streamed.take) if searched else b""
        if small is not None:
            found = streamed.of(small)
            paths = in_path_order(kept(list(found.blocks)))
            collector = collect(ranges=superseded_ranges(paths) if paths else {})
            fed = 0
            while fed < len(paths) and not collector.full:
                collector.feed_file(paths[fed], *found.head_and_lines(paths[fed]))
                fed += 1
            collector.count_files(found, paths, fed)  # the page is made
            return _result(pattern, collector, collector.total, offset)

    counted = _match_line_counts(rg, target_list)
    counts = {path: counted[path] for path in kept(list(counted))}
    paths = sorted(counts, key=path_order)
    ranges: dict[str, list[tuple[int, int]]] = {}
    visible = counts
    if paths and not include_superseded:
        visible, ranges = _visible_counts(rg, counts, paths, superseded_ranges, superseded_hint)
    total = sum(visible.values())
    before, page = _page_files(paths, visible, offset, offset + max_results)
    if include_superseded:
        ranges = superseded_ranges(page) if page else {}  # only to mark the shown superseded lines
    collector = collect(ranges=ranges)
    collector.total = before
    for batch in _batches(page):
        rg.stream(line_args + ["--sort", "path", "--"] + batch, collector.feed, stop=lambda: collector.full)
        if collector.full:
            break
    collector.finish_pending()
    return _result(pattern, collector, total, offset)


def _result(pattern: str, collector: _Collector, total: int, offset: int) -> GrepResult:
    shown = len(collector.shown)
    # rg stops at the page's last file, so a page filled exactly never sees the match that overflows it
    cut_by = collector.meter.cut_by or (CUT_BY_RESULTS if total > offset + shown else None)
    page = Page(offset=offset, shown=shown, total=total, cut_by=cut_by)
    return GrepResult(pattern, collector.shown, page, collector.meter, line_cut=collector.line_cut)


def _blocks(output: bytes) -> _Blocks:
    """rg's first pass (`--heading`), unsorted, cut a file at a time with bytes methods (`_Blocks`).

    Lines are cut at newlines only, as rg ends them and as the page pass reads them (`Rg.stream`): a
    carriage return inside a line is the line's text (cut there, the line was shown short, and what followed
    could pass for a match line of any file). No line is empty, so an empty line is the gap between files."""
    found = _Blocks()
    found.add(output[:-1].split(b"\n\n") if output.endswith(b"\n") else [output])
    return found


class _Blocks:
    """The files of a first pass: each one's block (its name, a NUL and its lines, `N:TEXT`, one a newline), keyed
    by path, and its number of lines; made while rg still prints (`take`), so that a long pass's cutting is done
    beside rg's run (a name in 60% of 100k files: 7-14 MB, 60,000 files), not after it. A file's lines are sliced
    out only where they are read (the page's files, and those with superseded lines); the others are counted
    where they are cut. Splitting what came so far at its gaps and carrying the last part over finds the gaps a
    split of the whole output finds (`bytes.split` scans from the left), and `of` makes the end as `_blocks`
    does, or leaves it all to `_blocks` where the output was not streamed or ends otherwise."""

    def __init__(self) -> None:
        self.blocks: dict[str, tuple[bytes, int]] = {}  # path -> (its block, where its lines start in it)
        self.lines: dict[str, int] = {}  # path -> its number of lines
        self.pending: list[bytes] = []  # what came after the last gap
        self.streamed = False

    def take(self, chunk: bytes) -> None:
        self.streamed = True
        if b"\n\n" not in chunk and not (chunk.startswith(b"\n") and self.pending and self.pending[-1].endswith(b"\n")):
            self.pending.append(chunk)  # no gap ends in it: one file's lines go on
            return
        parts = b"".join([*self.pending, chunk]).split(b"\n\n")
        self.pending = [parts.pop()]
        self.add(parts)

    def add(self, parts: list[bytes]) -> None:
        """Add each block of `parts` that names a file: a chunk's files at once, with list and string methods (a
        call per file cost more than the cutting), where every name is ASCII, no two are the same and none is
        known yet; else one by one."""
        ends = [block.find(b"\0") + 1 for block in parts]
        names = [block[: end - 1] for block, end in zip(parts, ends, strict=True)]
        joined = b"\n".join(names)
        if 0 not in ends and joined.isascii() and joined.count(b"\n") == len(names) - 1:
            # decode_path of each: no name holds a newline, so "./" starts a name only after one
            paths = ("\n" + joined.decode("ascii")).replace("\n./", "\n")[1:].split("\n")
            if len(set(paths)) == len(paths) and self.blocks.keys().isdisjoint(paths):
                self.blocks.update(zip(paths, zip(parts, ends, strict=True), strict=True))
                counts = [block.count(b"\n", end) + (end < len(block)) for block, end in zip(parts, ends, strict=True)]
                self.lines.update(zip(paths, counts, strict=True))
                return
        blocks, lines = self.blocks, self.lines
        for block in parts:
            end = block.find(b"\0") + 1
            if not end:
                continue  # no file's block
            path = decode_path(block[: end - 1])
            if path in blocks:  # two spellings of one path (never from one rg pass): one list, in rg's order
                first, at = blocks[path]
                block, end = first + b"\n" + block[end:], at
            blocks[path] = (block, end)
            lines[path] = block.count(b"\n", end) + 1 if end < len(block) else 0

    def head_and_lines(self, path: str) -> tuple[bytes, bytes]:
        """The file's name with its NUL, and its lines."""
        block, end = self.blocks[path]
        return block[:end], block[end:]

    def of(self, output: bytes) -> _Blocks:
        """The files of `output`, the whole of what `take` was given (or of an output kept, never streamed)."""
        if not self.streamed or not output.endswith(b"\n") or output.endswith(b"\n\n"):
            return _blocks(output)
        self.add([b"".join(self.pending)[:-1]])
        return self


def _visible_lines(lines: bytes, ranges: list[tuple[int, int]] | None, *, context_lines: bool) -> int:
    """grep's counting rule: how many of one file's lines as rg prints them (`N:TEXT` match lines and, with
    `context_lines`, `N-TEXT` context lines; one a newline, in the file's order) are matches it counts:
    the `N:` lines outside `ranges` (the superseded lines left out). Without context lines and ranges that is
    every line. A page's lines are counted by it one at a time (`_Collector.feed`), the other files' lines
    a file at a time, without decoding them."""
    if not lines:
        return 0
    if not ranges and not context_lines:
        return lines.count(b"\n") + 1
    if not context_lines:
        assert ranges is not None
        return lines.count(b"\n") + 1 - _hidden_lines(lines, 0, ranges)
    found = 0
    for line in lines.split(b"\n"):
        numbered = _NUMBERED.match(line)
        if numbered is not None and numbered.group(2) == b":" and not (ranges and _in(int(numbered.group(1)), ranges)):
            found += 1
    return found


def _hidden_lines(data: bytes, start: int, ranges: list[tuple[int, int]]) -> int:
    """How many of a file's lines (`data[start:]`, every one a match line, in the file's order) are inside `ranges`:
    read from the last, down to the first range, in place (a name in 60% of 100k files: 18,000 files with
    superseded lines, most of their matches above them)."""
    lowest = min(ranges)[0]
    hidden = 0
    stop = len(data)
    if stop <= start:
        return 0
    while True:
        begin = max(data.rfind(b"\n", start, stop) + 1, start)
        numbered = _NUMBERED.match(data, begin, stop)
        number = int(numbered.group(1)) if numbered is not None else 0
        if number < lowest:
            break
        for first, last in ranges:
            if first <= number <= last:
                hidden += 1
                break
        if begin == start:
            break
        stop = begin - 1
    return hidden


def _visible_counts(
    rg: Rg,
    counts: dict[str, int],
    paths: list[str],
    superseded_ranges: Callable[[list[str]], dict[str, list[tuple[int, int]]]],
    superseded_hint: Callable[[], list[str]] | None,
) -> tuple[dict[str, int], dict[str, list[tuple[int, int]]]]:
    """Match lines per file less those inside superseded ranges, and the (verified) ranges."""
    hinted = set(superseded_hint()) if superseded_hint is not None else set()
    likely = sorted(hinted.intersection(counts), key=path_order)
    numbering = Job(lambda: _match_lines(rg, likely)) if likely else None
    try:
        ranges = superseded_ranges(paths)  # verified, while rg numbers the likely files' matches
    finally:
        blocks = numbering.outcome() if numbering is not None else {}
    missed = sorted((p for p, spans in ranges.items() if spans and p in counts and p not in blocks), key=path_order)
    if missed:
        blocks.update(_match_lines(rg, missed))
    visible = dict(counts)
    for path, spans in ranges.items():
        if spans and path in visible and path in blocks:
            lines = blocks[path]
            hidden = lines.count(b"\n") + 1 - _visible_lines(lines, spans, context_lines=False)
            visible[path] = max(0, visible[path] - hidden)
    return visible, ranges


def _page_files(paths: list[str], visible: dict[str, int], offset: int, wanted: int) -> tuple[int, list[str]]:
    """The files (in path order) holding visible matches `offset` .. `wanted`, and the count before them."""
    before = reached = 0
    page: list[str] = []
    for path in paths:
        reached += visible[path]
        if not page and reached <= offset:
            before = reached
            continue
        page.append(path)
        if reached >= wanted:
            break
    return before, page


def _batches(paths: list[str]) -> list[list[str]]:
    return [paths[i : i + _ARGS_PER_CALL] for i in range(0, len(paths), _ARGS_PER_CALL)]


def _match_line_counts(rg: Rg, targets: list[str] | None) -> dict[str, int]:
    """Files with matches -> their number of match lines (what the page pass prints as `N:` lines)."""
    counts: dict[str, int] = {}
    for batch in [["./"]] if targets is None else _batches(targets):
        output = rg.output(["--count", "--with-filename", "--null", "--"] + batch) or b""
        for line in output.split(b"\n"):
            name, sep, number = line.rpartition(b"\0")
            if sep:
                path = decode_path(name)
                counts[path] = counts.get(path, 0) + int(number)
    return counts


def _match_lines(rg: Rg, paths: list[str]) -> dict[str, bytes]:
    """Per file with matches, the line numbers of its match lines as rg lists them (`12:...` lines, one a
    newline, as `_visible_lines` reads them)."""
    blocks: dict[str, bytes] = {}
    for batch in _batches(paths):
        output = (
            rg.output(["--heading", "--with-filename", "--line-number", "--null", "--max-columns", "1", "--"] + batch)
            or b""
        )
        for block in (output[:-1] if output.endswith(b"\n") else output).split(b"\n\n"):
            name, sep, lines = block.partition(b"\0")
            if sep and lines:
                blocks[decode_path(name)] = lines
    return blocks


def in_path_order(paths: list[str]) -> list[str]:
    """`paths` sorted by `path_order`, with string methods over all of them at once where none holds a newline
    or a NUL (a name in 60% of 100k files: 60,000 paths)."""
    joined = "\n".join(paths)
    if len(paths) < 2 or joined.count("\n") != len(paths) - 1 or "\0" in joined:
        return sorted(paths, key=path_order)
    return "\n".join(sorted(joined.replace("/", "\0").split("\n"))).replace("\0", "/").split("\n")


def path_order(path: str) -> str:
    """Paths compared folder by folder, as `rg --sort path` orders them: '/' made the lowest character
    orders them as their lists of names would, and sorting 9,000 paths makes no tuples."""
    return path.replace("/", "\0")


class _Collector:
    """Consumes rg's JSON lines; decodes only what may be shown, and fills the page through one `Meter`."""

    def __init__(
        self, *, offset, max_results, max_tokens, count_tokens, ranges, include_superseded, context, max_line_chars
    ):
        self.offset = offset
        self.meter = Meter(count_tokens, max_tokens=max_tokens, max_results=max_results)
        self.count_tokens = count_tokens
        self.ranges_of = ranges
        self.include_superseded = include_superseded
        self.context = context
        self.max_line_chars = max_line_chars
        self.total = 0
        self.shown: list[GrepMatch] = []
        self.path: str | None = None
        self.ranges: list[tuple[int, int]] = []  # the superseded ranges of the file being read
        self.hidden: list[tuple[int, int]] = []  # those of its lines left out (none with include_superseded)
        self.before: list[tuple[int, str]] = []
        self.pending: GrepMatch | None = None  # a shown match still collecting after-context
        self.line_cut = False  # the one match shown had to be cut to fit

    @property
    def full(self) -> bool:
        return self.meter.full

    def feed_file(self, path: str, head: bytes, lines: bytes) -> None:
        """One file of the first pass (`_blocks`): its lines are decoded only where the page may hold them;
        a file before the page, or past it, has its matches counted (`_visible_lines`) and is skipped."""
        hidden = None if self.include_superseded else self.ranges_of.get(path)
        counted = _visible_lines(lines, hidden, context_lines=self.context > 0)
        if self.full or self.total + counted <= self.offset:
            self.total += counted
            return
        for line in lines.split(b"\n"):
            self.feed(head + line)
        self.finish_pending()

    def count_files(self, found: _Blocks, paths: list[str], fed: int) -> None:
        """The files of the first pass past the page (`paths[fed:]`; `paths`, those kept, in path order), counted
        as `feed_file` counts them (a name in 60% of 100k files: 60,000 files): every file's lines, counted where
        they were cut (`_Blocks`), less those of the files fed to the page or not kept, less the superseded
        lines of the files that have some (18,000 of the 60,000); with context lines shown, file by file."""
        hidden = {} if self.include_superseded else self.ranges_of
        if self.context > 0:
            for path in paths[fed:]:
                self.total += _visible_lines(found.head_and_lines(path)[1], hidden.get(path), context_lines=True)
            return
        blocks, lines = found.blocks, found.lines
        left_out = set(paths[:fed])
        if len(paths) != len(blocks):
            left_out.update(blocks.keys() - set(paths))
        self.total += sum(lines.values()) - sum(map(lines.__getitem__, left_out))
        for path, spans in hidden.items():
            if spans and path not in left_out and path in blocks:
                self.total -= _hidden_lines(*blocks[path], spans)

    def feed(self, raw: bytes) -> None:
        name, sep, rest = raw.partition(b"\0")
        numbered = _NUMBERED.match(rest) if sep else None
        if numbered is None:
            return
        path = decode_path(name)
        if path != self.path:
            self.finish_pending()
            self.before = []
            self.path = path
            self.ranges = self.ranges_of.get(path, [])
            self.hidden = [] if self.include_superseded else self.ranges
        number = int(numbered.group(1))
        if numbered.group(2) == b":":
            line = rest[:-1] if rest.endswith(b"\n") else rest  # as `_blocks` cuts lines (the page pass's end in one)
            if not _visible_lines(line, self.hidden, context_lines=bool(self.context)):
                return
            self.total += 1
            if self.full or self.total <= self.offset:
                self.pending, self.before = None, []
                return
            self._take(number, _line_text(rest[numbered.end() :]))
        elif self.context and not self.full:
            item = (number, self._shorten(_line_text(rest[numbered.end() :])))
            if self.pending and item[0] - self.pending.line <= self.context:
                if self.meter.add_text_to_last(f"{item[0]}-{item[1]}"):
                    self.pending.after.append(item)
            else:
                self.before = (self.before + [item])[-self.context :]

    def _shorten(self, text: str) -> str:
        """A line longer than `max_line_chars` is shown cut, as `read` shows it, before any token is counted."""
        if text.endswith(_PREVIEW_MARK):
            text = text[: -len(_PREVIEW_MARK)]
        elif len(text) <= self.max_line_chars:
            return text
        return text[: self.max_line_chars] + f" … [line cut: longer than {self.max_line_chars} characters]"

    def _take(self, line: int, full: str) -> None:
        self.finish_pending()
        match = GrepMatch(
            path=self.path or "",
            line=line,
            text=self._shorten(full),
            superseded=_in(line, self.ranges),
            before=[b for b in self.before if b[0] < line],
        )
        self.before = []
        if self.meter.take_text(_render_lines(match)):
            self.shown.append(match)
            self.pending = match if self.context else None
            return
        if self.meter.cut_by == CUT_BY_TOKENS and not self.shown:
            cut = self._cut(match, full)  # a page that could never show its first match would never page on
            if cut is not None:
                self.shown.append(cut)
                self.meter.spend(_render_cost(cut))
                self.line_cut = True

    def _cut(self, match: GrepMatch, full: str) -> GrepMatch | None:
        """The match alone, its line cut to the budget and marked (None if not even the mark fits)."""
        if full.endswith(_PREVIEW_MARK):
            full = full[: -len(_PREVIEW_MARK)]
        whole = faces.call("read", path=match.path, lines=f"{match.line}:{match.line}")
        marker = f" … [line cut by the token budget; {whole}]"
        allowance = self.meter.room - self.count_tokens(f"{match.path}:{match.line}:{marker}")
        if allowance < 1:
            return self._cut_path(match) if long_path(match.path) else None
        text = full[: min(self.max_line_chars, max(0, allowance) * 4)]
        while text and self.count_tokens(text) > allowance:
            text = text[: len(text) * 3 // 4]
        return GrepMatch(path=match.path, line=match.line, text=text + marker, superseded=match.superseded)

    def _cut_path(self, match: GrepMatch) -> GrepMatch | None:
        """The match with its path cut too, when the path alone (4,096 bytes may be 4,000 tokens) leaves no room
        for the line: shown as the head of the path that fits, marked, so the page still moves past it (a file
        deep in folders of rare characters, first in path order, stopped every grep that matched it). None when
        not even the mark fits."""
        marker = " … [path and line cut by the token budget]"
        allowance = self.meter.room - self.count_tokens(f"…:{match.line}:{marker}")
        if allowance < 1:
            return None
        path = match.path[: allowance * 4]
        while path and self.count_tokens(path) > allowance:
            path = path[: len(path) * 3 // 4]
        return GrepMatch(path=path + "…", line=match.line, text=marker.lstrip(), superseded=match.superseded)

    def finish_pending(self) -> None:
        self.pending = None


def _line_text(raw: bytes) -> str:
    return raw.rstrip(b"\r\n").decode("utf-8", "replace")


def _render_lines(match: GrepMatch) -> list[str]:
    """What a match costs: its line with its path (a file header, counted once per match, is the bound) and its before-context."""
    return [f"{match.path}:{match.line}:{match.text}"] + [f"{n}-{t}" for n, t in match.before]


def _render_cost(match: GrepMatch) -> str:
    return "\n".join(_render_lines(match))


def _in(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)
