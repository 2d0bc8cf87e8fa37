"""What history answers, bounded like every answer: log (a page of commits), show (an old version, a
bounded read), diff (cut at the budget with the next lines to ask for).

`log` pages as `ls` does (`offset`, `max_results`, `max_tokens`, an honest
total from `git rev-list --count`); `show` and `diff` read a stream line by
line through the same reader as `read`, so an old 1 GB file or a diff of the
whole memory costs what the budget costs.
"""

from __future__ import annotations

import io
import re
import subprocess
from dataclasses import dataclass, field
from typing import Any

from fsmem import faces
from fsmem.budget import Count, Meter, Metered, Page, Paged, ReadOff
from fsmem.history.git_env import clean_env
from fsmem.history.repo import git_date
from fsmem.history.view import LOG_FORMAT, NAMES, HistoryView, parse_log
from fsmem.query.reading import ReadResult, bounded_read
from fsmem.tokens import TokenCounter

MAX_PATHS = 10  # paths listed per commit in a log row's JSON


@dataclass
class LogEntry:
    commit: str
    date: str
    agent: str
    message: str
    files: int
    paths: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def log_row(entry: LogEntry) -> str:
    date = entry.date[:16].replace("T", " ")
    files = f"  [{entry.files} files]" if entry.files > 1 else ""
    return f"{entry.commit}  {date}  {entry.agent}  {entry.message}{files}"


@dataclass
class LogResult(Paged, Metered):
    """A page of commits, newest first, and where it stands among all that match (`page`)."""

    entries: list[LogEntry]
    page: Page
    meter: Meter | None = field(default=None, repr=False, compare=False)

    @property
    def cited(self) -> list[str]:
        return [entry.commit for entry in self.entries]

    def to_dict(self) -> dict[str, Any]:
        return {"commits": [e.to_dict() for e in self.entries], **self.page.to_dict(), "tokens": self.tokens}

    def to_text(self) -> str:
        lines = [log_row(e) for e in self.entries]
        if not self.entries and not self.total:
            lines.append("(no commits match)")
        lines.append(self.page.trailer("commits", narrow=faces.narrowing("log", ("path", "since", "agent"))))
        return "\n".join(lines)


def _author_pattern(agent: str) -> str:
    """A basic regular expression that matches exactly this author name (git matches `Name <email>`)."""
    return "^" + re.sub(r"([\\.\[\]*^$])", r"\\\1", agent) + " <"


def _under(path: str, rel: str | None) -> bool:
    return rel is None or path == rel or path.startswith(rel.rstrip("/") + "/")


def log(
    view: HistoryView,
    count: Count,
    rel: str | None,
    *,
    since: str | None,
    agent: str | None,
    offset: int,
    max_results: int,
    max_tokens: int,
) -> LogResult:
    """A page of the commits that changed the memory (or `rel`), newest first, each as `view` lets it be seen.

    Every path a commit changed is read (`--full-diff`), so that the view can tell whether its message may
    be shown; a row lists those under `rel`.
    """
    repo = view.repo
    filters = []
    if since:
        filters.append(f"--since={git_date(since)}")
    if agent:
        filters.append(f"--author={_author_pattern(agent)}")
    where = ["--", repo.in_repo(rel) if rel else (repo.prefix or ".")]
    counted = repo.git.run("rev-list", "--count", *filters, "HEAD", *where, check=False)
    total = int(counted.stdout or 0) if counted.returncode == 0 else 0
    entries: list[LogEntry] = []
    meter = Meter(count, max_tokens=max_tokens, max_results=max_results)
    if total > offset:
        out = repo.git.run(
            "log",
            "--no-color",
            LOG_FORMAT,
            *NAMES,
            "--full-diff",
            f"--skip={offset}",
            f"-n{max_results + 1}",  # one more than fits: the meter then says which cap stopped it
            *filters,
            "HEAD",
            *where,
        ).stdout
        for commit in parse_log(repo, out):
            seen = view.visible(commit)
            paths = [p for p in seen.paths if p is not None and _under(p, rel)]
            entry = LogEntry(seen.id[:12], seen.date, seen.agent, seen.message, len(paths), paths[:MAX_PATHS])
            if not meter.take_text(log_row(entry)):
                break
            entries.append(entry)
    page = Page(offset=offset, shown=len(entries), total=total, cut_by=meter.cut_by)
    return LogResult(entries, page, meter)


class OverRead:
    """An answer that is a bounded read of something else (a past version, a diff): its figures are the read's."""

    read: ReadResult

    truncated = ReadOff[bool]("read")
    tokens = ReadOff[int]("read")
    rows = ReadOff[int]("read")
    cited = ReadOff[list[str]]("read")
    next_arguments = ReadOff[dict[str, Any] | None]("read")
    cut_by = ReadOff[str | None]("read")


@dataclass
class ShowResult(OverRead):
    """A file as it was at a commit: a bounded read of that version, and which commit it is."""

    at: dict[str, Any]
    read: ReadResult

    @property
    def empty(self) -> bool:
        return self.read.empty

    def header(self) -> str:
        at = self.at
        return f"[{self.read.path} as of commit {at['commit']} ({at['date'][:16].replace('T', ' ')}, {at['agent']}: {at['message']})]"

    def to_dict(self) -> dict[str, Any]:
        return {**self.read.to_dict(), "at": self.at}

    def to_text(self) -> str:
        return self.header() + "\n" + self.read.to_text()


def show(
    view: HistoryView,
    tokens: TokenCounter,
    rel: str,
    at: str,
    *,
    start: int,
    end: int | None,
    max_tokens: int,
    max_line_chars: int,
) -> ShowResult:
    """`rel` as it was at `at`, under a header naming the commit as `view` lets it be seen."""
    commit = view.commit(at, rel)
    data = view.blob(commit, rel)
    if data is None:
        raise view.absent(at, rel, commit)
    info = view.describe(commit).info()
    result = ShowResult(info, ReadResult(rel, [], start, None, False))
    room = max(1, max_tokens - tokens.count(result.header() + "\n"))
    result.read = bounded_read(
        io.BytesIO(data), rel, tokens, start=start, end=end, max_tokens=room, max_line_chars=max_line_chars
    )
    return result


@dataclass
class DiffResult(OverRead):
    """Part of a unified diff: its lines numbered, and the next lines to ask for when cut."""

    label: str
    read: ReadResult

    @property
    def empty(self) -> bool:
        return not self.read.lines and self.read.start == 1 and not self.read.truncated

    def to_dict(self) -> dict[str, Any]:
        data = self.read.to_dict()
        data["path"] = None
        data["diff"] = self.label
        return data

    def to_text(self) -> str:
        if self.empty:
            return f"[diff {self.label}: no differences]"
        return self.read.to_text()


def diff(
    view: HistoryView,
    tokens: TokenCounter,
    rev: str | None,
    rel: str | None,
    *,
    start: int,
    end: int | None,
    max_tokens: int,
    max_line_chars: int,
) -> DiffResult:
    """A unified diff: `rev` to the files now (default HEAD: what is not committed), or `A..B` between two."""
    repo = view.repo
    about = rel or "the memory"
    if rev and ".." in rev:
        left, right = rev.split("..", 1)
        old, new = view.commit(left or "HEAD", about), view.commit(right or "HEAD", about)
        sides, label = [old, new], f"{old[:12]}..{new[:12]}"
    else:
        old = view.commit(rev or "HEAD", about)
        sides, label = [old], f"{old[:12]}..now"
    args = ["diff", "--no-color", "--no-ext-diff", "--no-renames"]
    if repo.prefix:
        args.append(f"--relative={repo.prefix}")
    where = repo.in_repo(rel) if rel else (repo.prefix or ".")
    args += [*sides, "--", where, *view.links_left_out(sides, where)]
    if rel:
        label += f", {rel}"
    proc = subprocess.Popen(repo.git.command(*args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=clean_env())
    assert proc.stdout is not None
    try:
        read = bounded_read(
            proc.stdout,
            f"diff {label}",
            tokens,
            start=start,
            end=end,
            max_tokens=max_tokens,
            max_line_chars=max_line_chars,
        )
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    return DiffResult(label, read)


@dataclass(frozen=True)
class LineAuthor:
    """Who last changed one line of a file, and when (a UTC date); both None when no commit holds the change yet."""

    agent: str | None
    date: str | None


def line_authors(view: HistoryView, rel: str, lines: list[int]) -> dict[int, LineAuthor]:
    """Who last changed each of `lines` (1-based) of `rel` as it is on disk: one `git blame`. A line changed
    since the last commit (an edit not yet committed) has no author; the answer is empty when blame fails."""
    import datetime as _dt

    if not lines:
        return {}
    repo = view.repo
    ranges = [arg for line in sorted(set(lines)) for arg in ("-L", f"{line},{line}")]
    proc = repo.git.run("blame", "--porcelain", *ranges, "--", repo.in_repo(rel), check=False)
    if proc.returncode:
        return {}
    known: dict[str, dict[str, str]] = {}
    found: dict[int, LineAuthor] = {}
    commit = ""
    final = 0
    for raw in proc.stdout.decode("utf-8", "replace").splitlines():
        head = raw.split(" ")
        if len(head) >= 3 and len(head[0]) in (40, 64) and all(c in "0123456789abcdef" for c in head[0]):
            commit, final = head[0], int(head[2])
            known.setdefault(commit, {})
        elif raw.startswith("\t"):
            info = known.get(commit, {})
            if commit.strip("0") and "author" in info:
                stamp = int(info.get("author-time", "0"))
                day = _dt.datetime.fromtimestamp(stamp, _dt.UTC).date().isoformat()
                found[final] = LineAuthor(info["author"], day)
            else:
                found[final] = LineAuthor(None, None)
        elif " " in raw and commit:
            name, _, value = raw.partition(" ")
            known[commit].setdefault(name, value)
    return found
