"""`grep`: ripgrep underneath, an honest total, and only as much parsing as the budget can show.

ripgrep's `--json` stream is read line by line. Match lines that will be shown
(those inside `offset .. offset + budget`) are decoded with `json.loads`; the
rest are only counted, which keeps a pattern with hundreds of thousands of
matches close to bare `rg` speed while the answer still says how many exist.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import FsmemError, InvalidArgument, PatternTimeout
from .paths import STATE_DIR

_LINE_NUMBER = re.compile(rb'"line_number":(\d+)')
_MATCH_PREFIX = b'{"type":"match"'
_BEGIN_PREFIX = b'{"type":"begin"'
_CONTEXT_PREFIX = b'{"type":"context"'
_END_PREFIX = b'{"type":"end"'
_LINE_NUMBER_KEY = b'"line_number":'
_DIGITS = re.compile(rb"\d+")
_MATCHED_LINES = re.compile(rb'"matched_lines":(\d+)')
_CHUNK = 1 << 20
# Bytes of rg output kept for decoding later; past this only the first files in path order are kept.
_KEEP_BYTES = 64 << 20
# Arguments per rg invocation when an explicit file list is passed.
_ARGS_PER_CALL = 2000


def find_rg() -> str:
    """The `rg` binary: the one the `ripgrep` wheel installed beside this Python, else PATH."""
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), "rg"),
        os.path.join(os.path.dirname(sys.executable), "rg"),
    ]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("rg")
    if found:
        return found
    raise FsmemError("ripgrep (rg) is not installed; install fsmem with pip, which brings the 'ripgrep' package")


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
class GrepResult:
    """Matches shown, plus the honest count of all matches and how to page on."""

    pattern: str
    matches: list[GrepMatch]
    total_matches: int
    offset: int
    tokens: int
    truncated: bool
    cut_by: str | None = None  # "tokens" or "results" when truncated

    @property
    def left_out(self) -> int:
        return max(0, self.total_matches - self.offset - len(self.matches))

    @property
    def next_offset(self) -> int | None:
        return self.offset + len(self.matches) if self.left_out else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "matches": [m.to_dict() for m in self.matches],
            "total_matches": self.total_matches,
            "offset": self.offset,
            "left_out": self.left_out,
            "next_offset": self.next_offset,
            "truncated": self.truncated,
            "tokens": self.tokens,
        }

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
        if not self.matches:
            if self.total_matches:
                out.append(f"(no matches at offset {self.offset}; there are {self.total_matches} in all)")
            else:
                out.append("(no matches)")
        first = self.offset + 1
        last = self.offset + len(self.matches)
        if self.left_out:
            reason = "token budget" if self.cut_by == "tokens" else "result limit"
            out.append(
                f"[matches {first}-{last} of {self.total_matches}; {self.left_out} left out by the {reason}. "
                f"Continue with --offset {self.next_offset}, or narrow the pattern or PATH]"
            )
        elif self.matches:
            out.append(f"[matches {first}-{last} of {self.total_matches}]")
        return "\n".join(out)


def build_args(
    pattern: str,
    *,
    ignore_case: bool = False,
    fixed_strings: bool = False,
    word: bool = False,
    context: int = 0,
) -> list[str]:
    args = [
        "--json",
        "--no-config",
        "--no-ignore",
        "--glob", "*.md",
        "--glob", "*.markdown",
        "--glob", f"!{STATE_DIR}/",
        "--max-columns", "2000",
        "--max-columns-preview",
    ]
    if ignore_case:
        args.append("--ignore-case")
    if fixed_strings:
        args.append("--fixed-strings")
    if word:
        args.append("--word-regexp")
    if context:
        args.extend(["--context", str(context)])
    args.extend(["--regexp", pattern])
    return args


def _text_of(data: dict[str, Any]) -> str:
    value = data.get("lines", {})
    if "text" in value:
        return value["text"].rstrip("\r\n")
    import base64

    return base64.b64decode(value.get("bytes", "")).decode("utf-8", "replace").rstrip("\r\n")


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
    include_superseded: bool = False,
    timeout: float = 10.0,
) -> GrepResult:
    """Run rg over `targets` (memory-relative paths; None = the whole memory).

    rg runs multi-threaded and unsorted; its output is cut into per-file
    segments, counted from each file's `end` statistics, then ordered by path
    in Python, so paging is deterministic without `--sort path` (which makes rg
    single-threaded). Only the segments that fall inside the page are decoded.

    `superseded_ranges(paths)` maps files to the line ranges of superseded
    facts; matches there are dropped (and not counted) unless
    `include_superseded`. It is consulted only for files that have matches.
    """
    if not pattern:
        raise InvalidArgument("the pattern is empty; give a word or a regular expression to look for")
    if offset < 0:
        raise InvalidArgument("--offset must be 0 or more")
    target_list = list(targets) if targets is not None else None
    if target_list is not None and not target_list:
        return GrepResult(pattern, [], 0, offset, 0, False)
    base = [find_rg()] + build_args(
        pattern, ignore_case=ignore_case, fixed_strings=fixed_strings, word=word, context=context
    )
    batches = [["./"]] if target_list is None else [
        target_list[i:i + _ARGS_PER_CALL] for i in range(0, len(target_list), _ARGS_PER_CALL)
    ]
    deadline = time.monotonic() + timeout
    store = _Segments(need=offset + max_results, superseded_ranges=superseded_ranges, include_superseded=include_superseded)
    for batch in batches:
        _run_batch(root, base + ["--"] + batch, store.feed, deadline, timeout, pattern, chunked=True)
        store.end_of_stream()
    paths = sorted(store.counts, key=path_order)
    ranges = store.resolve_ranges(paths) if paths else {}
    collector = _Collector(
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
        count_tokens=count_tokens,
        ranges=ranges,
        include_superseded=include_superseded,
        context=context,
    )
    for path in paths:
        count = store.visible_count(path)
        if count is not None and (collector.full or collector.total + count <= offset):
            collector.total += count  # wholly before or after the page: counted, never decoded
            continue
        segment = store.segments.get(path)
        if segment is not None:
            for raw in segment.splitlines(keepends=True):
                collector.feed(raw)
        else:  # dropped to bound memory, or superseded lines not known: stream this one file again
            _run_batch(root, base + ["--", path], collector.feed, deadline, timeout, pattern)
        collector.finish_pending()
    return GrepResult(
        pattern=pattern,
        matches=collector.shown,
        total_matches=collector.total,
        offset=offset,
        tokens=collector.tokens,
        truncated=collector.total > offset + len(collector.shown),
        cut_by=collector.cut_by,
    )


def _run_batch(
    root: Path,
    argv: list[str],
    feed: Callable[[bytes], None],
    deadline: float,
    timeout: float,
    pattern: str,
    *,
    chunked: bool = False,
) -> None:
    """Run rg, handing its stdout to `feed` in large chunks (`chunked`) or line by line."""
    import tempfile

    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=errors)
        timed_out = threading.Event()

        def kill_on_deadline() -> None:
            timed_out.set()
            process.kill()

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), kill_on_deadline)
        timer.start()
        try:
            assert process.stdout is not None
            if chunked:
                fd = process.stdout.fileno()
                while True:
                    chunk = os.read(fd, _CHUNK)
                    if not chunk:
                        break
                    feed(chunk)
            else:
                for raw in process.stdout:
                    feed(raw)
            code = process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        errors.seek(0)
        stderr = errors.read()
    if timed_out.is_set():
        raise PatternTimeout(
            f"grep stopped after {timeout:g} s: the pattern {pattern!r} is too slow on this memory; "
            "use a simpler pattern, -F for a fixed string, or a narrower PATH"
        )
    if code == 2:
        message = stderr.decode("utf-8", "replace").strip()
        if "regex" in message.lower() or "parse error" in message.lower():
            first = " ".join(message.split())
            raise InvalidArgument(f"invalid regular expression {pattern!r}: {first}; use -F to search for the text as is")
        lines = [ln for ln in message.splitlines() if ln.strip()]
        if lines and not all("Permission denied" in ln or "No such file" in ln for ln in lines):
            # Unreadable files are reported by rg but do not make the search fail.
            raise FsmemError(f"ripgrep failed: {lines[0]}")


def _path_of(begin_line: bytes) -> str:
    data = json.loads(begin_line)["data"]["path"]
    path = data.get("text")
    if path is None:
        import base64

        path = base64.b64decode(data.get("bytes", "")).decode("utf-8", "replace")
    return path[2:] if path.startswith("./") else path


class _Segments:
    """rg's unsorted output cut into per-file segments (begin .. end), with match counts.

    Segments are kept for decoding later, but only up to `_KEEP_BYTES`: past
    that, only the segments of the first files in path order that can hold the
    page (`need` matches) are kept; the others keep just their count, reduced
    by their superseded matches (looked up at that moment).
    """

    def __init__(self, *, need: int, superseded_ranges, include_superseded: bool):
        self.need = need
        self.superseded_ranges = superseded_ranges
        self.include_superseded = include_superseded
        self.counts: dict[str, int] = {}
        self.visible: dict[str, int] = {}  # exact visible counts of dropped segments
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        self.segments: dict[str, bytes] = {}
        self.kept = 0
        self._rest = b""
        self._open: str | None = None  # path of a segment too large to hold, being skipped

    def feed(self, chunk: bytes) -> None:
        data = self._rest + chunk if self._rest else chunk
        pos = 0
        while True:
            end = data.find(_END_PREFIX, pos)
            newline = data.find(b"\n", end) if end >= 0 else -1
            if newline < 0:
                break
            self._close(data[pos:newline + 1])
            pos = newline + 1
        self._rest = data[pos:]
        if len(self._rest) > _CHUNK * 4:
            # One very large file: keep only its count (from its end line); it is streamed if shown.
            if self._open is None and self._rest.startswith(_BEGIN_PREFIX):
                self._open = _path_of(self._rest[: self._rest.find(b"\n") + 1])
            self._rest = self._rest[self._rest.rfind(b"\n") + 1:]

    def _close(self, segment: bytes) -> None:
        end = segment.rfind(_END_PREFIX)
        found = _MATCHED_LINES.search(segment, end)
        if self._open is not None:
            path, self._open = self._open, None
            self.counts[path] = int(found.group(1)) if found else 0
            return
        if not segment.startswith(_BEGIN_PREFIX):
            return
        path = _path_of(segment[: segment.find(b"\n") + 1])
        self.counts[path] = int(found.group(1)) if found else segment.count(b"\n" + _MATCH_PREFIX)
        self.segments[path] = segment
        self.kept += len(segment)
        if self.kept > _KEEP_BYTES:
            self._prune()

    def _prune(self) -> None:
        total = 0
        keep: set[str] = set()
        for path in sorted(self.segments, key=path_order):
            if total >= self.need:
                break
            keep.add(path)
            total += self.counts[path]
        dropped = [p for p in self.segments if p not in keep]
        if not self.include_superseded:
            self.ranges.update(self.superseded_ranges(dropped))
        for path in dropped:
            segment = self.segments.pop(path)
            self.kept -= len(segment)
            ranges = self.ranges.get(path)
            if ranges:
                self.visible[path] = self.counts[path] - _superseded_hits(segment, ranges)

    def end_of_stream(self) -> None:
        self._rest = b""
        self._open = None

    def resolve_ranges(self, paths: list[str]) -> dict[str, list[tuple[int, int]]]:
        missing = [p for p in paths if p not in self.ranges]
        if missing:
            self.ranges.update(self.superseded_ranges(missing))
        return self.ranges

    def visible_count(self, path: str) -> int | None:
        """Matches in `path` outside superseded ranges; None when only streaming the file again can tell."""
        count = self.counts[path]
        ranges = self.ranges.get(path)
        if self.include_superseded or not ranges:
            return count
        if path in self.visible:
            return self.visible[path]
        if path in self.segments:
            return count - _superseded_hits(self.segments[path], ranges)
        return None


def path_order(path: str) -> tuple[str, ...]:
    """Paths compared folder by folder, as `rg --sort path` orders them."""
    return tuple(path.split("/"))


def _superseded_hits(segment: bytes, ranges: list[tuple[int, int]]) -> int:
    """Match lines of one file segment that fall inside `ranges`.

    Line numbers rise through a segment and superseded sections sit late in a
    file, so the segment is read backwards and only down to the first range.
    """
    lowest = min(start for start, _ in ranges)
    hits = 0
    pos = len(segment)
    while True:
        pos = segment.rfind(_LINE_NUMBER_KEY, 0, pos)
        if pos < 0:
            return hits
        line_start = segment.rfind(b"\n", 0, pos) + 1
        digits = _DIGITS.match(segment, pos + len(_LINE_NUMBER_KEY))
        if digits:
            number = int(digits.group(0))
            if number < lowest:
                return hits
            if segment.startswith(_MATCH_PREFIX, line_start) and _in(number, ranges):
                hits += 1
        pos = line_start

class _Collector:
    """Consumes rg's JSON lines; decodes only what may be shown."""

    def __init__(self, *, offset, max_results, max_tokens, count_tokens, ranges, include_superseded, context):
        self.offset = offset
        self.max_results = max_results
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        self.ranges_of = ranges
        self.include_superseded = include_superseded
        self.context = context
        self.total = 0
        self.shown: list[GrepMatch] = []
        self.tokens = 0
        self.full = False
        self.cut_by: str | None = None
        self.path: str | None = None
        self.ranges: list[tuple[int, int]] = []
        self.before: list[tuple[int, str]] = []
        self.pending: GrepMatch | None = None  # a shown match still collecting after-context

    def feed(self, raw: bytes) -> None:
        if raw.startswith(_MATCH_PREFIX):
            if self.ranges and not self.include_superseded:
                number = _LINE_NUMBER.search(raw)
                if number and _in(int(number.group(1)), self.ranges):
                    return
            self.total += 1
            if self.full or self.total <= self.offset:
                self.pending, self.before = None, []
                return
            self._take(json.loads(raw)["data"])
        elif raw.startswith(_CONTEXT_PREFIX):
            if self.context and not self.full:
                data = json.loads(raw)["data"]
                item = (data["line_number"], _text_of(data))
                if self.pending and item[0] - self.pending.line <= self.context:
                    cost = self.count_tokens(f"{item[0]}-{item[1]}")
                    if self.tokens + cost <= self.max_tokens:
                        self.pending.after.append(item)
                        self.tokens += cost
                else:
                    self.before = (self.before + [item])[-self.context:]
        elif raw.startswith(_BEGIN_PREFIX):
            self.finish_pending()
            self.before = []
            data = json.loads(raw)["data"]
            path = data["path"].get("text") or ""
            self.path = path[2:] if path.startswith("./") else path
            self.ranges = self.ranges_of.get(self.path, [])

    def _take(self, data: dict[str, Any]) -> None:
        self.finish_pending()
        line = data["line_number"]
        match = GrepMatch(
            path=self.path or "",
            line=line,
            text=_text_of(data),
            superseded=_in(line, self.ranges),
            before=[b for b in self.before if b[0] < line],
        )
        self.before = []
        cost = self.count_tokens(_render_cost(match))
        if len(self.shown) >= self.max_results:
            self.full, self.cut_by = True, "results"
            return
        if self.tokens + cost > self.max_tokens:
            self.full, self.cut_by = True, "tokens"
            return
        self.tokens += cost
        self.shown.append(match)
        self.pending = match if self.context else None

    def finish_pending(self) -> None:
        self.pending = None


def _render_cost(match: GrepMatch) -> str:
    parts = [f"{match.path}:{match.line}:{match.text}"]
    parts += [f"{n}-{t}" for n, t in match.before]
    return "\n".join(parts)


def _in(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)
