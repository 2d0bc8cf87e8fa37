"""`grep`: ripgrep underneath, an honest total, and only as much parsing as the budget can show.

A small answer comes from one `rg --json` pass. For a large one, `rg --count`
counts the match lines of every file and `rg --json` runs only on the few
files that hold the page shown; either way only the match lines inside
`offset .. offset + budget` are decoded with `json.loads`. A pattern with a
million matches thus stays close to bare `rg` speed while the answer still
says exactly how many exist.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.errors import FsmemError, InvalidArgument, PatternTimeout
from fsmem.store.paths import ROOT_README, STATE_DIR, is_memory_path

_LINE_NUMBER = re.compile(rb'"line_number":(\d+)')
_MATCH_PREFIX = b'{"type":"match"'
_BEGIN_PREFIX = b'{"type":"begin"'
_CONTEXT_PREFIX = b'{"type":"context"'
_CHUNK = 1 << 20
# A first `rg --json` pass answers alone when its whole output is at most this long.
_SMALL_OUTPUT = 128 << 10
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
) -> list[str]:
    """The rg options every pass shares: which files, how to match."""
    args = [
        "--no-config",
        "--no-ignore",
        "--iglob",
        "*.md",
        "--iglob",
        "*.markdown",
        "--glob",
        f"!{STATE_DIR}/",
        "--text",  # memory files are text: a stray NUL byte must not make rg skip a whole file as binary
    ]
    if ignore_case:
        args.append("--ignore-case")
    if fixed_strings:
        args.append("--fixed-strings")
    if word:
        args.append("--word-regexp")
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
    superseded_hint: Callable[[], list[str]] | None = None,
    include_superseded: bool = False,
    timeout: float = 10.0,
) -> GrepResult:
    """Run rg over `targets` (memory-relative paths; None = the whole memory).

    A first `rg --json` pass answers alone when its output is small; its files
    are put in path order in Python (deterministic `--offset` paging without
    single-threaded `rg --sort path`). Past `_SMALL_OUTPUT` it is stopped for
    two passes, so that nothing the budget will never show is serialised as
    JSON or parsed: `rg --count` gives every file's number of match lines
    (multi-threaded, a few bytes per file), then `rg --json` runs only on the
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
    if offset < 0:
        raise InvalidArgument("--offset must be 0 or more")
    target_list = list(targets) if targets is not None else None
    if target_list is not None and not target_list:
        return GrepResult(pattern, [], 0, offset, 0, False)
    # rg walks folders itself: what it finds passes the containment rule here (names with control
    # characters or non-UTF-8 bytes are not memory), and the root README.md only when named.
    readme_named = target_list is not None and ROOT_README in target_list

    def keep(path: str) -> bool:
        return is_memory_path(path) and (readme_named or path != ROOT_README)

    rg = _Rg(
        root,
        [find_rg()] + build_args(pattern, ignore_case=ignore_case, fixed_strings=fixed_strings, word=word),
        pattern,
        timeout,
    )
    json_args = ["--json", "--max-columns", "2000", "--max-columns-preview"]
    if context:
        json_args += ["--context", str(context)]
    collect = functools.partial(
        _Collector,
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
        count_tokens=count_tokens,
        include_superseded=include_superseded,
        context=context,
    )
    if target_list is None or len(target_list) <= _ARGS_PER_CALL:
        # Most answers are small: one `rg --json` pass, given up once its output is large.
        small = rg.output(json_args + ["--"] + (target_list or ["./"]), limit=_SMALL_OUTPUT)
        if small is not None:
            segments = _segments(small)
            paths = sorted(filter(keep, segments), key=path_order)
            collector = collect(ranges=superseded_ranges(paths) if paths else {})
            for path in paths:
                for raw in segments[path]:
                    collector.feed(raw)
                collector.finish_pending()
            return _result(pattern, collector, collector.total, offset)

    counts = {path: n for path, n in _match_line_counts(rg, target_list).items() if keep(path)}
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
        rg.stream(json_args + ["--sort", "path", "--"] + batch, collector.feed, stop=lambda: collector.full)
        if collector.full:
            break
    collector.finish_pending()
    return _result(pattern, collector, total, offset)


def _result(pattern: str, collector: _Collector, total: int, offset: int) -> GrepResult:
    truncated = total > offset + len(collector.shown) or collector.line_cut
    return GrepResult(
        pattern=pattern,
        matches=collector.shown,
        total_matches=total,
        offset=offset,
        tokens=collector.tokens,
        truncated=truncated,
        # rg stops at the page's last file, so a page filled exactly never sees the match that overflows it
        cut_by=collector.cut_by or ("results" if truncated else None),
    )


def _segments(output: bytes) -> dict[str, list[bytes]]:
    """rg's unsorted `--json` output cut into each file's lines (begin .. end), keyed by path."""
    segments: dict[str, list[bytes]] = {}
    current: list[bytes] | None = None
    for raw in output.splitlines(keepends=True):
        if raw.startswith(_BEGIN_PREFIX):
            current = segments.setdefault(_path_of(raw), [])
        if current is not None:
            current.append(raw)
    return segments


def _path_of(begin_line: bytes) -> str:
    data = json.loads(begin_line)["data"]["path"]
    path = data.get("text")
    if path is None:
        import base64

        path = base64.b64decode(data.get("bytes", "")).decode("utf-8", "surrogateescape")
    return path[2:] if path.startswith("./") else path


def _visible_counts(
    rg: _Rg,
    counts: dict[str, int],
    paths: list[str],
    superseded_ranges: Callable[[list[str]], dict[str, list[tuple[int, int]]]],
    superseded_hint: Callable[[], list[str]] | None,
) -> tuple[dict[str, int], dict[str, list[tuple[int, int]]]]:
    """Match lines per file less those inside superseded ranges, and the (verified) ranges."""
    hinted = set(superseded_hint()) if superseded_hint is not None else set()
    likely = [p for p in paths if p in hinted]
    numbering = _Job(lambda: _match_lines(rg, likely)) if likely else None
    try:
        ranges = superseded_ranges(paths)  # verified, while rg numbers the likely files' matches
    finally:
        blocks = numbering.outcome() if numbering is not None else {}
    missed = [p for p in paths if ranges.get(p) and p not in blocks]
    if missed:
        blocks.update(_match_lines(rg, missed))
    visible = dict(counts)
    for path, spans in ranges.items():
        if spans and path in visible and path in blocks:
            visible[path] = max(0, visible[path] - _superseded_hits(blocks[path], spans))
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


def _match_line_counts(rg: _Rg, targets: list[str] | None) -> dict[str, int]:
    """Files with matches -> their number of match lines (what `rg --json` would send as `match` messages)."""
    counts: dict[str, int] = {}
    for batch in [["./"]] if targets is None else _batches(targets):
        output = rg.output(["--count", "--with-filename", "--null", "--"] + batch) or b""
        for line in output.split(b"\n"):
            name, sep, number = line.rpartition(b"\0")
            if sep:
                path = _decode_path(name)
                counts[path] = counts.get(path, 0) + int(number)
    return counts


def _match_lines(rg: _Rg, paths: list[str]) -> dict[str, bytes]:
    """Per file with matches, the line numbers of its match lines as rg lists them (`12:...` lines)."""
    blocks: dict[str, bytes] = {}
    for batch in _batches(paths):
        output = (
            rg.output(["--heading", "--with-filename", "--line-number", "--null", "--max-columns", "1", "--"] + batch)
            or b""
        )
        for block in output.split(b"\n\n"):
            name, sep, lines = block.partition(b"\0")
            if sep:
                blocks[_decode_path(name)] = lines
    return blocks


def _superseded_hits(lines: bytes, ranges: list[tuple[int, int]]) -> int:
    """Match lines among `lines` (one file's `_match_lines`) inside `ranges`.

    Superseded sections sit late in a file, so the list is read backwards,
    down to the first range only.
    """
    lowest = min(start for start, _ in ranges)
    found = 0
    end = len(lines)
    while end > 0:
        start = lines.rfind(b"\n", 0, end - 1) + 1
        number, colon, _ = lines[start:end].partition(b":")
        if colon and number.isdigit():
            line = int(number)
            if line < lowest:
                break
            if _in(line, ranges):
                found += 1
        end = start
    return found


class _Job(threading.Thread):
    """Work run beside the main thread (rg passes that wait on a pipe); `outcome()` joins it."""

    def __init__(self, work: Callable[[], Any]):
        super().__init__(daemon=True)
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as exc:  # handed to the caller by outcome()
            self.error = exc

    def outcome(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.result


def _decode_path(raw: bytes) -> str:
    """A path as rg prints it, memory-relative (bytes that are not UTF-8 survive the round trip to rg)."""
    if raw.startswith(b"\n"):
        raw = raw[1:]
    return (raw[2:] if raw.startswith(b"./") else raw).decode("utf-8", "surrogateescape")


class _Rg:
    """ripgrep with the options every pass shares, run in the memory root under one deadline."""

    def __init__(self, root: Path, base: list[str], pattern: str, timeout: float):
        self.root = root
        self.base = base
        self.pattern = pattern
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def output(self, args: list[str], *, limit: int | None = None) -> bytes | None:
        """rg's whole output; None (and rg stopped) once it grows past `limit` bytes."""
        chunks: list[bytes] = []
        size = 0

        def keep(chunk: bytes) -> None:
            nonlocal size
            chunks.append(chunk)
            size += len(chunk)

        too_long = (lambda: size > limit) if limit is not None else None
        return None if self._run(args, keep, chunked=True, stop=too_long) else b"".join(chunks)

    def stream(self, args: list[str], feed: Callable[[bytes], None], *, stop: Callable[[], bool]) -> None:
        """Hand rg's output to `feed` line by line; stop rg as soon as `stop()` says so."""
        self._run(args, feed, chunked=False, stop=stop)

    def _run(self, args, feed, *, chunked: bool, stop: Callable[[], bool] | None = None) -> bool:
        """Run rg, handing its output to `feed` in large chunks or line by line; True when `stop()` ended it."""
        import tempfile

        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(self.base + args, cwd=self.root, stdout=subprocess.PIPE, stderr=errors)
            timed_out = threading.Event()

            def kill_on_deadline() -> None:
                timed_out.set()
                process.kill()

            timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), kill_on_deadline)
            timer.start()
            stopped = False
            try:
                assert process.stdout is not None
                if chunked:
                    fd = process.stdout.fileno()
                    while chunk := os.read(fd, _CHUNK):
                        feed(chunk)
                        if stop is not None and stop():
                            stopped = True
                            break
                else:
                    for raw in process.stdout:
                        feed(raw)
                        if stop is not None and stop():
                            stopped = True
                            break
                code = process.wait() if not stopped else 0
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
                f"grep stopped after {self.timeout:g} s: the pattern {self.pattern!r} is too slow on this memory; "
                "use a simpler pattern, -F for a fixed string, or a narrower PATH"
            )
        if code == 2:
            _raise_rg_error(stderr, self.pattern)
        return stopped


def _raise_rg_error(stderr: bytes, pattern: str) -> None:
    message = stderr.decode("utf-8", "replace").strip()
    if "regex" in message.lower() or "parse error" in message.lower():
        first = " ".join(message.split())
        raise InvalidArgument(f"invalid regular expression {pattern!r}: {first}; use -F to search for the text as is")
    lines = [ln for ln in message.splitlines() if ln.strip()]
    if lines and not all("Permission denied" in ln or "No such file" in ln for ln in lines):
        # Unreadable (or since vanished) files are reported by rg but do not make the search fail.
        raise FsmemError(f"ripgrep failed: {lines[0]}")


def path_order(path: str) -> tuple[str, ...]:
    """Paths compared folder by folder, as `rg --sort path` orders them."""
    return tuple(path.split("/"))


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
        self.line_cut = False  # the one match shown had to be cut to fit

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
                    self.before = (self.before + [item])[-self.context :]
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
            cut = None if self.shown else self._cut(match)
            if cut is not None:  # a page that could never show its first match would never page on
                self.shown.append(cut)
                self.tokens += self.count_tokens(_render_cost(cut))
                self.line_cut = True
            return
        self.tokens += cost
        self.shown.append(match)
        self.pending = match if self.context else None

    def _cut(self, match: GrepMatch) -> GrepMatch | None:
        """The match alone, its line cut to the budget and marked (None if not even the mark fits)."""
        marker = f" … [line cut by the token budget: {len(match.text)} characters; read {match.path} --lines {match.line}:{match.line}]"
        allowance = self.max_tokens - self.count_tokens(f"{match.path}:{match.line}:{marker}")
        if allowance < 1:
            return None
        text = match.text[: max(0, allowance) * 4]
        while text and self.count_tokens(text) > allowance:
            text = text[: len(text) * 3 // 4]
        return GrepMatch(path=match.path, line=match.line, text=text + marker, superseded=match.superseded)

    def finish_pending(self) -> None:
        self.pending = None


def _render_cost(match: GrepMatch) -> str:
    parts = [f"{match.path}:{match.line}:{match.text}"]
    parts += [f"{n}-{t}" for n, t in match.before]
    return "\n".join(parts)


def _in(line: int, ranges: list[tuple[int, int]]) -> bool:
    return any(start <= line <= end for start, end in ranges)
