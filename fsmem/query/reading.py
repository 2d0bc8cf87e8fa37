"""`read`: a line-numbered slice of one file whose cost grows with the budget, not the file.

The file is streamed line by line from the first line asked for and reading
stops as soon as the token budget is spent, so a 1 GB file costs what a small
one does. Over-long lines are shown cut (with their full length), so every
answer advances by at least one line and paging always terminates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.errors import InvalidArgument
from fsmem.store.paths import open_regular, read_regular
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
class ReadResult:
    """A slice of a file; `next_lines` is the exact range to ask for next when cut."""

    path: str
    lines: list[tuple[int, str]]
    start: int
    end: int | None
    tokens: int
    truncated: bool
    total_lines: int | None = None
    next_lines: str | None = None
    hidden_superseded: int = 0
    outline: list[OutlineEntry] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "total_lines": self.total_lines,
            "next_lines": self.next_lines,
            "hidden_superseded": self.hidden_superseded,
        }
        if self.outline is not None:
            data["outline"] = [vars(o) for o in self.outline]
        else:
            data["lines"] = [{"line": n, "text": t} for n, t in self.lines]
        return data

    def to_text(self) -> str:
        if self.outline is not None:
            rows = [f"{'#' * o.level} {o.title}  (lines {o.start}-{o.end}, {o.tokens} tok)" for o in self.outline]
            if not rows:
                rows = ["(no headings)"]
            total = f" of {self.total_lines} lines" if self.total_lines is not None else ""
            rows.append(f"[outline of {self.path}{total}; read a section with --section HEADING or --lines A:B]")
            return "\n".join(rows)
        out = [f"{number:>6}\t{text}" for number, text in self.lines]
        out.extend(self.notes)
        if not self.lines:
            out.append("(no lines in this range)")
        if self.truncated:
            total = f" of {self.total_lines}" if self.total_lines is not None else ""
            shown = f"lines {self.start}-{self.end}" if self.end is not None else "nothing"
            out.append(f"[{self.path}: {shown}{total} shown, cut by the token budget; next: --lines {self.next_lines}]")
        elif self.lines:
            total = f" of {self.total_lines}" if self.total_lines is not None else ""
            out.append(f"[{self.path}: lines {self.start}-{self.end}{total}]")
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
        raise InvalidArgument(f"--lines takes A:B, A: or A with whole line numbers, not {spec!r}") from None
    if start < 1 or (end is not None and end < start):
        raise InvalidArgument(f"--lines {spec!r} is not a valid range (lines count from 1, and B must be >= A)")
    return start, end


def _iter_lines(handle, max_line_bytes: int):
    """Yield (line bytes without EOL, full length) reading at most `max_line_bytes` per kept line."""
    while True:
        chunk = handle.readline(max_line_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield chunk.rstrip(b"\r\n"), len(chunk.rstrip(b"\r\n"))
            continue
        length = len(chunk)
        while True:  # skip the rest of an over-long line without keeping it
            rest = handle.readline(_READ_CHUNK)
            if not rest:
                break
            length += len(rest.rstrip(b"\r\n"))
            if rest.endswith(b"\n"):
                break
        yield chunk, length


def bounded_read(
    path: Path,
    rel: str,
    counter: TokenCounter,
    *,
    start: int = 1,
    end: int | None = None,
    max_tokens: int,
    max_line_chars: int = 2000,
    hide_ranges: list[tuple[int, int]] | None = None,
    total_lines: int | None = None,
) -> ReadResult:
    """Read lines `start..end` of `path` until `max_tokens` is spent."""
    hide_ranges = hide_ranges or []
    result = ReadResult(path=rel, lines=[], start=start, end=None, tokens=0, truncated=False, total_lines=total_lines)
    max_line_bytes = max_line_chars * 4 + 1
    with open_regular(path) as handle:
        number = 0
        for number, (raw, length) in enumerate(_iter_lines(handle, max_line_bytes), start=1):
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
                text = text[:max_line_chars] + f" … [line cut: {length} bytes in all]"
            cost = counter.count(f"{number:>6}\t{text}\n")
            if result.tokens + cost > max_tokens:
                if not result.lines:
                    # Even one line does not fit: show the part of it that does.
                    part, cost = _fit_line(counter, number, text, max_tokens)
                    if part:
                        result.lines.append((number, part))
                        result.tokens += cost
                        result.end = number
                        number += 1
                result.truncated = True
                result.next_lines = f"{number}:{end if end is not None else ''}"
                break
            result.tokens += cost
            result.lines.append((number, text))
            result.end = number
        else:
            if result.total_lines is None:
                result.total_lines = number
    if result.hidden_superseded:
        result.notes.append(
            f"[{result.hidden_superseded} superseded line(s) hidden; add --include-superseded to see them]"
        )
    return result


def _fit_line(counter: TokenCounter, number: int, text: str, max_tokens: int) -> tuple[str, int]:
    """The longest head of one line (marked with …) whose rendered cost fits `max_tokens`."""
    allowance = max_tokens
    while allowance > 0:
        part = counter.truncate(text, allowance) + " …"
        cost = counter.count(f"{number:>6}\t{part}\n")
        if cost <= max_tokens:
            return part, cost
        allowance -= max(1, cost - max_tokens)
    return "", 0


def outline(path: Path, rel: str, counter: TokenCounter, *, exact_limit: int) -> ReadResult:
    """Headings with their line ranges and token counts (estimated for very large files)."""
    size = path.stat().st_size
    entries: list[OutlineEntry] = []
    if size <= exact_limit:
        text, _ = fmt.decode(read_regular(path))
        lines = text.splitlines()
        for heading in fmt.headings(text):
            body = "\n".join(lines[heading.line - 1 : heading.end_line])
            entries.append(
                OutlineEntry(heading.level, heading.title, heading.line, heading.end_line, counter.count(body))
            )
        total = len(lines)
    else:
        # Stream: byte offsets per heading give a token estimate without holding the file.
        found: list[tuple[int, str, int, int]] = []
        offset = 0
        total = 0
        in_code = False
        with open_regular(path) as handle:
            for total, (raw, length) in enumerate(_iter_lines(handle, 8192), start=1):
                line = raw.decode("utf-8", "replace")
                if fmt.FENCED_CODE.match(line):
                    in_code = not in_code
                elif not in_code:
                    match = fmt.HEADING.match(line)
                    if match:
                        found.append((len(match.group(1)), match.group(2).strip(), total, offset))
                offset += length + 1
        for index, (level, title, line, start_offset) in enumerate(found):
            end_line, end_offset = total, offset
            for later in found[index + 1 :]:
                if later[0] <= level:
                    end_line, end_offset = later[2] - 1, later[3]
                    break
            entries.append(OutlineEntry(level, title, line, end_line, (end_offset - start_offset) // 4))
    return ReadResult(
        path=rel, lines=[], start=1, end=None, tokens=0, truncated=False, total_lines=total, outline=entries
    )


def find_section(path: Path, heading: str, *, exact_limit: int) -> tuple[int, int]:
    """The line range of the section whose heading matches `heading` (case-insensitive)."""
    if path.stat().st_size > exact_limit:
        raise InvalidArgument(
            "--section needs the outline of the whole file; on a file this large use --outline, then --lines"
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
            f"section {heading!r} is ambiguous; it matches {', '.join(repr(h.title) for h in partial)}"
        )
    raise InvalidArgument(f"no section {heading!r} in this file; its headings are: {names}")
