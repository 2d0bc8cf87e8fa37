"""`read`: a line-numbered slice of one file whose cost grows with the budget, not the file.

The file is streamed line by line from the first line asked for and reading
stops as soon as the token budget is spent, so a 1 GB file costs what a small
one does. Over-long lines are shown cut (with their full length), so every
answer advances by at least one line and paging always terminates.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fsmem import faces, format as fmt
from fsmem.budget import CUT_BY_READ_LIMIT, CUT_BY_TOKENS, Meter, Metered, echo, long_path
from fsmem.config import ReadSettings
from fsmem.errors import InvalidArgument
from fsmem.store.paths import open_regular, read_regular
from fsmem.store.rg_command import LEFT_OUT_LIMIT
from fsmem.tokens import TokenCounter

_READ_CHUNK = 1 << 16


@dataclass
class OutlineEntry:
    level: int
    title: str
    start: int
    end: int
    tokens: int


@dataclass
class ReadResult(Metered):
    """A slice of a file; `next_lines` is the exact range to ask for next when cut, `notes` the lines the text
    answer adds to say why (a budget too small for one line, the read limit, hidden lines): the JSON holds
    them too, so a cut answer in any face says why and how to go on."""

    path: str
    lines: list[tuple[int, str]]
    start: int
    end: int | None
    truncated: bool
    total_lines: int | None = None
    next_lines: str | None = None
    hidden_superseded: int = 0
    outline: list[OutlineEntry] | None = None
    notes: list[str] = field(default_factory=list)
    meter: Meter | None = field(default=None, repr=False, compare=False)
    version: str | None = None  # the file's version when read (pass it back as expected_version)
    links: list[dict[str, Any]] = field(default_factory=list)  # the [[links]] on the lines shown, resolved
    cut_by: str | None = None  # what cut it, when truncated: the token budget, or the read limit

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "total_lines": self.total_lines,
            "next_lines": self.next_lines,
            "cut_by": self.cut_by if self.truncated else None,
            "notes": self.notes,
            "hidden_superseded": self.hidden_superseded,
        }
        if self.version is not None:
            data["version"] = self.version
        if self.outline is not None:
            data["outline"] = [vars(o) for o in self.outline]
        else:
            data["lines"] = [{"line": n, "text": t} for n, t in self.lines]
            data["links"] = self.links
        return data

    @property
    def next_arguments(self) -> dict[str, Any] | None:
        """What to send again (with the rest of the call unchanged) for the next part, or None: the next range,
        and the version it belongs to, so that the next part of a file changed meanwhile is refused, not mixed."""
        if not (self.truncated and self.next_lines):
            return None
        return {"lines": self.next_lines, **self.carried_version()}

    def carried_version(self) -> dict[str, str]:
        """`expected_version` for a continuation, where the caller can send it."""
        return {"expected_version": self.version} if self.version and faces.offers("expected_version") else {}

    @property
    def empty(self) -> bool:
        """Nothing to show (a range past the end, an empty file, no headings): the CLI's exit 1, like grep's."""
        return not self.truncated and not (self.outline if self.outline is not None else self.lines)

    @property
    def rows(self) -> int:
        return len(self.outline) if self.outline is not None else len(self.lines)

    @property
    def cited(self) -> list[str]:
        return [self.path]

    def nothing(self) -> str:
        """Why there is nothing to show, with what the file holds, so the next call can ask for what is there."""
        if self.total_lines == 0:
            return f"({named(self.path)} is empty)"
        if self.total_lines is not None and self.start > self.total_lines:
            return f"(no lines in this range: {named(self.path)} has {self.total_lines} line{'s' if self.total_lines != 1 else ''})"
        return "(no lines in this range)"

    def to_text(self) -> str:
        if self.outline is not None:
            rows = [outline_row(o) for o in self.outline]
            if not rows and not self.truncated:
                rows = ["(no headings)"]
            rows.extend(self.notes)
            total = f" of {self.total_lines} lines" if self.total_lines is not None else ""
            if self.truncated and self.next_lines:
                rows.append(
                    f"[outline of {named(self.path)}{total}: {len(self.outline)} headings shown, cut by the token budget; "
                    f"next: {faces.ask(outline=True, **(self.next_arguments or {}))}]"
                )
            elif not self.truncated:
                how = f"{faces.ask(section='HEADING')} or {faces.ask(lines='A:B')}"
                rows.append(f"[outline of {named(self.path)}{total}; read a section with {how}]")
            return "\n".join(rows)
        out = [f"{number:>6}\t{text}" for number, text in self.lines]
        out.extend(self.notes)
        if not self.lines and not self.truncated:
            out.append(self.nothing())
        version = f"; version {self.version}" if self.version else ""
        following = self.next_arguments
        if following:
            total = f" of {self.total_lines}" if self.total_lines is not None else ""
            carried = "" if "expected_version" in following else version  # the version is named once
            out.append(
                f"[{named(self.path)}: lines {self.start}-{self.end}{total} shown, cut by the token budget; "
                f"next: {faces.ask(**following)}{carried}]"
            )
        elif self.lines:
            total = f" of {self.total_lines}" if self.total_lines is not None else ""
            out.append(f"[{named(self.path)}: lines {self.start}-{self.end}{total}{version}]")
        return "\n".join(out)


def parse_range(spec: str) -> tuple[int, int | None]:
    """`A:B`, `A:` or `A` (one line) to a 1-based inclusive range."""
    text = spec.strip()
    try:
        if ":" in text:
            left, right = text.split(":", 1)
            start = int(left) if left.strip() else 1
            end = int(right) if right.strip() else None
        else:
            start = end = int(text)
    except ValueError:
        raise InvalidArgument(
            f"{faces.arg('lines')} takes A:B, A: or A with whole line numbers, not {echo(spec)}"
        ) from None
    if start < 1 or (end is not None and end < start):
        raise InvalidArgument(
            f"{faces.arg('lines')} {echo(spec)} is not a valid range (lines count from 1, and B must be >= A)"
        )
    return start, end


def within_section(heading: str, span: tuple[int, int], asked: tuple[int, int | None]) -> tuple[int, int]:
    """The lines of `asked` that lie in the section `span` (first, last line) of `heading`: a cut section read
    names its next lines, and following it keeps the section asked for."""
    start, end = max(span[0], asked[0]), span[1] if asked[1] is None else min(span[1], asked[1])
    if start > end:
        lines, where = f"{asked[0]}:{'' if asked[1] is None else asked[1]}", f"(lines {span[0]}-{span[1]})"
        raise InvalidArgument(f"{faces.arg('lines')} {lines} lies outside section {echo(heading)} {where}")
    return start, end


def _iter_lines(handle, max_line_bytes: int, stopped: list[int] | None = None):
    """Yield (line bytes without EOL, full length) reading at most `max_line_bytes` per kept line, and no more
    than LEFT_OUT_LIMIT bytes in all (a sparse 4 GB file of one line took 18 s to show its first 2,000
    characters): where bytes are left past that, LEFT_OUT_LIMIT is put in `stopped`."""
    left = LEFT_OUT_LIMIT
    while left > 0:
        chunk = handle.readline(min(max_line_bytes, left))
        if not chunk:
            return
        left -= len(chunk)
        if chunk.endswith(b"\n"):
            yield chunk.rstrip(b"\r\n"), len(chunk.rstrip(b"\r\n"))
            continue
        length = len(chunk)
        while left > 0:  # skip the rest of an over-long line without keeping it
            rest = handle.readline(min(_READ_CHUNK, left))
            if not rest:
                break
            left -= len(rest)
            length += len(rest.rstrip(b"\r\n"))
            if rest.endswith(b"\n"):
                break
        if stopped is not None and left <= 0 and not stopped and handle.read(1):
            stopped.append(LEFT_OUT_LIMIT)  # before the line: its length is then a floor
        yield chunk, length
    if stopped is not None and not stopped and handle.read(1):
        stopped.append(LEFT_OUT_LIMIT)


def bounded_read(
    source: Path | IO[bytes],
    rel: str,
    counter: TokenCounter,
    *,
    start: int = 1,
    end: int | None = None,
    max_tokens: int,
    max_line_chars: int = ReadSettings.max_line_chars,
    hide_ranges: list[tuple[int, int]] | None = None,
    total_lines: int | None = None,
) -> ReadResult:
    """Read lines `start..end` of `source` (a memory file, or any binary stream: an old version of a file, a
    diff being produced) until `max_tokens` is spent.

    The first line shown is cut to fit when even it is too long, so the next
    range always starts past it; when not even a cut line fits, the answer
    says the budget is too small and names no next range.
    """
    opened = open_regular(source) if isinstance(source, Path) else contextlib.nullcontext(source)
    with opened as handle:
        hide_ranges = hide_ranges or []
        result = ReadResult(path=rel, lines=[], start=start, end=None, truncated=False, total_lines=total_lines)
        meter = Meter(counter.count, max_tokens=max_tokens)
        max_line_bytes = max_line_chars * 4 + 1
        number = 0
        stopped: list[int] = []
        for number, (raw, length) in enumerate(_iter_lines(handle, max_line_bytes, stopped), start=1):
            if number < start:
                continue
            if end is not None and number > end:
                number -= 1
                break
            if fmt.in_ranges(number, hide_ranges):
                result.hidden_superseded += 1
                continue
            text = raw.decode("utf-8", "replace")
            if number == 1 and text.startswith(fmt.BOM):
                text = text[1:]
            if len(text) > max_line_chars or length > len(raw):
                whole = f"over {length} bytes, not read to its end" if stopped else f"{length} bytes in all"
                text = text[:max_line_chars] + f" … [line cut: {whole}]"
            if meter.take_text(numbered(number, text)):
                result.lines.append((number, text))
                result.end = number
                continue
            result.truncated, result.cut_by = True, CUT_BY_TOKENS
            if not result.lines:  # even one line does not fit: show the part of it that does
                line = meter.head_that_fits(text, functools.partial(_numbered_cut, number), truncate=counter.truncate)
                if line is None:
                    result.notes.append(
                        f"[the token budget is too small to show line {number} of {named(rel)}{faces.larger_budget()}]"
                    )
                    break
                meter.take_text(line)
                result.lines.append((number, line.split("\t", 1)[1]))
                result.end = number
                number += 1
            result.next_lines = f"{number}:{end if end is not None else ''}"
            if end is not None and number > end:
                result.truncated, result.next_lines = False, None
            break
        else:
            if stopped:
                result.truncated, result.cut_by = True, CUT_BY_READ_LIMIT
                result.notes.append(
                    f"[{named(rel)} is read no further than its first {LEFT_OUT_LIMIT:,} bytes; the rest is not shown]"
                )
            elif result.total_lines is None:
                result.total_lines = number
        result.meter = meter
        if result.hidden_superseded:
            see = (
                f"; add {faces.ask(include_superseded=True)} to see them" if faces.offers("include_superseded") else ""
            )
            result.notes.append(f"[{result.hidden_superseded} superseded line(s) hidden{see}]")
        return result


def named(path: str) -> str:
    """`path` as a read's notes and trailer name it: whole, or a long one (`long_path`) by its start and its
    size. The caller gave it; a path of 4,096 bytes may be 4,000 tokens, and repeated it took every line."""
    return f"{path[:48]}… ({len(path.encode('utf-8', 'surrogatepass')):,} bytes)" if long_path(path) else path


def numbered(number: int, text: str) -> str:
    """A line as `read` shows it: its number, a tab, its text."""
    return f"{number:>6}\t{text}"


def _numbered_cut(number: int, head: str) -> str:
    return numbered(number, head + " …")


def outline_row(entry: OutlineEntry) -> str:
    return f"{'#' * entry.level} {entry.title}  (lines {entry.start}-{entry.end}, {entry.tokens} tok)"


def outline(
    path: Path,
    rel: str,
    counter: TokenCounter,
    *,
    exact_limit: int,
    max_tokens: int,
    start: int = 1,
    end: int | None = None,
) -> ReadResult:
    """Headings (from line `start` to `end`) with their line ranges and token counts, within the budget.

    Counts are estimated (bytes / 4) for very large files. A cut outline names
    the line of the first heading it left out, so asking again with `lines="N:"` goes on.
    """
    found, total, size_of = _headings_of(path, counter, exact_limit)
    result = ReadResult(path=rel, lines=[], start=start, end=end, truncated=False, total_lines=total, outline=[])
    assert result.outline is not None
    trailer = (
        f"[outline of {named(rel)} of {total} lines: {len(found)} headings shown, cut by the token budget; "
        f"next: {faces.ask(outline=True, lines=f'{total}:')}]"
    )
    meter = Meter(counter.count, max_tokens=max_tokens, reserve=counter.count(trailer))
    for level, title, first, last in found:
        if first < start or (end is not None and first > end):
            continue
        entry = OutlineEntry(level, title, first, last, size_of(first, last))
        if not meter.take_text(outline_row(entry)):
            result.truncated, result.cut_by = True, CUT_BY_TOKENS
            if result.outline:
                result.next_lines = f"{first}:{end if end is not None else ''}"
            else:
                result.notes.append(
                    f"[the token budget is too small to show one heading of {named(rel)}{faces.larger_budget()}]"
                )
            break
        result.outline.append(entry)
    result.meter = meter
    return result


def _headings_of(
    path: Path, counter: TokenCounter, exact_limit: int
) -> tuple[list[tuple[int, str, int, int]], int, Callable[[int, int], int]]:
    """Every heading (level, title, first line, last line of its section), the file's line count, and
    a function giving a section's tokens: counted exactly, or estimated from bytes for a very large file."""
    if path.stat().st_size <= exact_limit:
        text, _ = fmt.decode(read_regular(path))
        lines = text.splitlines()
        found = [(h.level, h.title, h.line, h.end_line) for h in fmt.headings(text)]
        return found, len(lines), lambda first, last: counter.count("\n".join(lines[first - 1 : last]))
    # Stream: byte offsets per line give a token estimate without holding the file.
    starts: list[tuple[int, str, int]] = []
    offsets = [0]
    in_code = False
    with open_regular(path) as handle:
        for number, (raw, length) in enumerate(_iter_lines(handle, 8192), start=1):
            line = raw.decode("utf-8", "replace")
            if fmt.FENCED_CODE.match(line):
                in_code = not in_code
            elif not in_code:
                match = fmt.HEADING.match(line)
                if match:
                    starts.append((len(match.group(1)), match.group(2).strip(), number))
            offsets.append(offsets[-1] + length + 1)
    total = len(offsets) - 1
    ends = fmt.section_ends([(level, first) for level, _, first in starts], total)
    found = [(level, title, first, last) for (level, title, first), last in zip(starts, ends, strict=True)]
    return found, total, lambda first, last: (offsets[last] - offsets[first - 1]) // 4


def find_section(path: Path, heading: str, *, exact_limit: int) -> tuple[int, int]:
    """The line range of the section whose heading matches `heading` (case-insensitive)."""
    if path.stat().st_size > exact_limit:
        raise InvalidArgument(
            f"{faces.arg('section')} needs the outline of the whole file; on a file this large use "
            f"{faces.ask(outline=True)}, then {faces.arg('lines')}"
        )
    text, _ = fmt.decode(read_regular(path))
    wanted = heading.strip().lstrip("#").strip().lower()
    all_headings = fmt.headings(text)
    for h in all_headings:
        if h.title.lower() == wanted:
            return h.line, h.end_line
    partial = [h for h in all_headings if wanted in h.title.lower()]
    if len(partial) == 1:
        return partial[0].line, partial[0].end_line
    names = ", ".join(repr(h.title) for h in all_headings[:20]) or "none"
    if partial:
        raise InvalidArgument(
            f"section {echo(heading)} is ambiguous; it matches {', '.join(repr(h.title) for h in partial)}"
        )
    raise InvalidArgument(f"no section {echo(heading)} in this file; its headings are: {names}")
