"""`Memory`: the one public object. Every CLI command, agent tool and server is a thin adapter over it.

Methods carry the same names and parameters as the CLI commands and return
typed results with `to_dict()` (the `--json` form) and `to_text()` (what a
human or a model reads). Each method checks its arguments, narrows the
agent's budget, and hands the work to the module below that owns it.

This module is long because it is the whole public API in one place: one
method per command, each a few lines of checks and delegation.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem import format as fmt
from fsmem.budget import Budget, check_offset
from fsmem.config import CONFIG_FILE, Config
from fsmem.deprecated import renamed, warn
from fsmem.errors import (
    AlreadyExists,
    FsmemError,
    InvalidArgument,
    NotFound,
    ReadOnly,
    RootNotFound,
    StorageError,
)
from fsmem.query import grep as _grep, reading
from fsmem.query.listing import Listing, list_entries, within_depth
from fsmem.store import paths as _paths, retrieval_log, writing
from fsmem.store.catalog import EXACT_COUNT_LIMIT, Catalog, FileMeta, matches_filters, walk, walk_stats
from fsmem.store.files import file_lock
from fsmem.store.paths import ROOT_README, check_text, relative, resolve
from fsmem.store.scope import Scope
from fsmem.tokens import TokenCounter

if TYPE_CHECKING:
    import threading

    from fsmem.agents.memory_tool import MemoryTool
    from fsmem.consolidate.apply import ConsolidationReport
    from fsmem.consolidate.plan import Progress
    from fsmem.query.context import ContextBlock
    from fsmem.query.stats import StatsResult
    from fsmem.search.index import SearchIndex
    from fsmem.search.ranking import SearchResult, SearchSettings
    from fsmem.search.recall import RecallResult
    from fsmem.watch import WatchStats

Prefixes = str | Iterable[str] | Scope | None

ROOT_ENV = "FSMEM_ROOT"
SESSION_ENV = "FSMEM_SESSION"


def template_dir() -> Path:
    """The memory template that `init` copies (shipped inside the package)."""
    return Path(__file__).resolve().parent / "memory_template"


def discover_root(root: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """`root` if given, else $FSMEM_ROOT, else the nearest ancestor holding fsmem.yaml."""
    chosen = root or os.environ.get(ROOT_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir():
            raise RootNotFound(f"memory root {str(path)!r} is not a folder; create one with 'fsmem init {path}'")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise RootNotFound(
        f"no memory found: no {CONFIG_FILE} in {here} or any folder above it. "
        "Create one with 'fsmem init DIR', or point to one with --root DIR or FSMEM_ROOT"
    )


def os_error_message(exc: OSError, root: Path | None = None) -> str:
    """One line for an operating-system error: the reason, and the file it concerns (relative to the root)."""
    where = ""
    if exc.filename is not None:
        name = os.fsdecode(exc.filename)
        if root is not None and name.startswith(str(root) + os.sep):
            name = name[len(str(root)) + 1 :]
        where = f" ({_paths.quoted(name)})"
    return f"{(exc.strerror or str(exc)).lower()}{where}"


def _as_fsmem_error(method: Callable) -> Callable:
    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except FsmemError:
            raise
        except OSError as exc:
            owner = args[0] if args and isinstance(args[0], Memory) else None
            raise StorageError(os_error_message(exc, owner.root if owner else None)) from exc
        except UnicodeError as exc:
            raise InvalidArgument(f"text that is not valid Unicode ({getattr(exc, 'reason', exc)})") from exc
        except RecursionError:
            raise InvalidArgument("the input is nested too deeply to handle") from None

    return guarded


def fsmem_errors(cls: type) -> type:
    """Every public method of `cls` raises only FsmemError: OSError (ENAMETOOLONG, EACCES, ENOSPC…) and
    non-text become StorageError and InvalidArgument here, the API's one boundary."""
    for name, value in list(vars(cls).items()):
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(value, classmethod):
            setattr(cls, name, classmethod(_as_fsmem_error(value.__func__)))
        elif callable(value) and not isinstance(value, type):
            setattr(cls, name, _as_fsmem_error(value))
    return cls


@dataclass
class CheckResult:
    problems: list[tuple[str, int, str]]
    files: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "problems": [{"path": p, "line": n, "message": m} for p, n, m in self.problems],
        }

    def to_text(self) -> str:
        lines = [f"{p}:{n}: {m}" for p, n, m in self.problems]
        lines.append(f"[{len(self.problems)} problem(s) in {self.files} files]")
        return "\n".join(lines)

    @property
    def empty(self) -> bool:
        return not self.problems


@fsmem_errors
class Memory:
    """A memory directory: list, grep, read, write and check it within a read budget.

    `agent` selects that agent's budget (and read-only flag) from fsmem.yaml;
    per-call `max_tokens` / `max_results` may narrow it, never widen it.
    `scope` (path prefixes such as `["topics/"]`) is the part of the memory
    this agent reaches: everything outside behaves as if it did not exist, in
    every answer, listing, total, search and context (`fsmem.store.scope`).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, agent: str | None = None, scope: Prefixes = None):
        self.root = discover_root(root)
        self.config = Config.load(self.root)
        self.agent = agent
        self.budget: Budget = self.config.budget_for(agent)
        self.scope: Scope | None = Scope.of(scope)
        self.tokens = TokenCounter(self.config.tokenizer)
        self.catalog = Catalog(self.root, self.tokens, scope=self.scope)

    # -- creation ---------------------------------------------------------
    @classmethod
    def init(cls, directory: str | os.PathLike[str]) -> Memory:
        """Create a new memory from the template; refuse to touch an existing one."""
        target = Path(directory).expanduser()
        if (target / CONFIG_FILE).exists():
            raise AlreadyExists(f"{target} already holds a memory ({CONFIG_FILE}); nothing was changed")
        if target.exists() and not target.is_dir():
            raise AlreadyExists(f"{target} exists and is not a folder")
        if target.exists() and any(p for p in target.iterdir() if p.name not in (".git",)):
            raise AlreadyExists(f"{target} is not empty; choose an empty or new folder")
        shutil.copytree(template_dir(), target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        return cls(target)

    # -- helpers ------------------------------------------------------------
    def path(self, user_path: str | os.PathLike[str] | None, *, want: str = "any") -> Path:
        """Resolve an agent- or user-supplied path by the containment rule (`fsmem.store.paths.resolve`) and the scope.

        `want="any"` lets a folder above the scope pass (it is listed filtered); `want="file"` does not.
        """
        return resolve(self.root, user_path, want=want, scope=self.scope)

    def _in_scope(self, target: Path, raw: str) -> None:
        """Refuse a folder that is not wholly in scope (for rm and mv, which act on everything in it)."""
        if self.scope is not None:
            self.scope.check(relative(self.root, target), raw, "file")

    def _whole_memory(self, what: str) -> None:
        if self.scope is not None:
            raise InvalidArgument(
                f"{what} works on the whole memory; this agent's scope is {self.scope.describe()}. "
                "Run it without a scope"
            )

    def visible(self) -> Callable[[str], bool] | None:
        """For a scoped memory, the test a file path must pass to be seen (its link target in scope too); else None.

        The set is one walk of the scope, taken when called.
        """
        if self.scope is None:
            return None
        seen = {rel for rel, _full, _stat in walk_stats(self.root, scope=self.scope)}
        return seen.__contains__

    def _require_writable(self) -> None:
        if self.budget.read_only:
            raise ReadOnly(
                f"agent {self.agent!r} is read-only in {CONFIG_FILE}; it may list, grep, read and search, not write"
            )

    def _existing(self, user_path: str, want: str = "any") -> Path:
        path = self.path(user_path, want=want)
        if not path.exists():
            raise NotFound(f"{relative(self.root, path)} does not exist; list files with ls")
        return path

    def meta(self, user_path: str) -> FileMeta:
        return self.catalog.get(self._existing(user_path, "file"))

    def superseded_ranges(self, rel: str) -> list[tuple[int, int]]:
        """Line ranges of superseded facts in one file (empty for files too large to parse)."""
        path = self.root / rel
        try:
            if path.stat().st_size > EXACT_COUNT_LIMIT:
                return []
            return self.catalog.get(path).superseded
        except FileNotFoundError:
            return []

    def files(
        self,
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
        start = self._existing(path) if path else None
        if updated_after is not None and fmt.parse_timestamp(updated_after) is None:
            raise InvalidArgument(f"--updated-after takes an ISO 8601 date such as 2024-05-01, not {updated_after!r}")
        return [
            meta
            for meta in self.catalog.entries(start, skipped)
            if matches_filters(meta, type=type, tag=tag, updated_after=updated_after)
        ]

    # -- queries ------------------------------------------------------------
    def ls(
        self,
        path: str | None = None,
        *,
        depth: int | None = None,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after: str | None = None,
        offset: int = 0,
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> Listing:
        """One row per file (path, title, type, updated, tokens, description), within the budget."""
        if depth is not None and depth < 1:
            raise InvalidArgument("--depth must be at least 1")
        check_offset(offset)
        budget = self.budget.narrowed(max_tokens, max_results)
        base = relative(self.root, self.path(path)) if path else "."
        skipped: list[tuple[str, str]] = []
        metas = [
            m
            for m in self.files(path, type=type, tag=tag, updated_after=updated_after, skipped=skipped)
            if within_depth(m.path, base, depth)
        ]
        listing = list_entries(
            metas, self.tokens.count, offset=offset, max_results=budget.max_results, max_tokens=budget.max_tokens
        )
        listing.skipped = [p for p, _ in skipped]
        return listing

    def grep(
        self,
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
        offset: int = 0,
        max_results: int | None = None,
        max_tokens: int | None = None,
        context: int | None = None,
    ) -> _grep.GrepResult:
        """Lines matching `pattern` (ripgrep syntax), grouped by file, with an honest total.

        `context_lines` lines before and after each match are shown with it;
        `context` is its deprecated name.
        """
        check_text(pattern, "the pattern")
        context_lines = renamed("context", context, "context_lines", context_lines or None) or 0
        if context_lines < 0:
            raise InvalidArgument("--context-lines must be 0 or more")
        budget = self.budget.narrowed(max_tokens, max_results)
        paths = list(paths or [])
        named = [relative(self.root, self._existing(p)) for p in paths]
        filtered = type is not None or bool(tag) or updated_after is not None
        targets: list[str] | None
        if self.scope is not None:
            named = self._scope_roots(named or ["."])
        if self.scope is not None and not named:
            targets = []  # nothing in scope exists: no matches, rather than the whole memory
        elif filtered:
            targets = []
            starts: list[str | None] = list(named) or [None]
            for p in starts:
                targets.extend(
                    m.path
                    for m in self.files(p, type=type, tag=tag, updated_after=updated_after)
                    if m.path != ROOT_README or p == ROOT_README
                )
        elif named:
            targets = named
        else:
            targets = None
        timeout = float(self.config.section("grep").get("timeout_seconds", 10.0))
        return _grep.run(
            self.root,
            pattern,
            targets,
            ignore_case=ignore_case,
            fixed_strings=fixed_strings,
            word=word,
            context=context_lines,
            offset=offset,
            max_results=budget.max_results,
            max_tokens=budget.max_tokens,
            count_tokens=self.tokens.count,
            superseded_ranges=self.catalog.superseded,
            superseded_hint=self.catalog.superseded_hint,
            include_superseded=include_superseded,
            timeout=timeout,
            max_line_chars=int(self.config.section("read").get("max_line_chars", 2000)),
            within=self.scope.contains if self.scope is not None else None,
        )

    def _scope_roots(self, named: list[str]) -> list[str]:
        """The paths in scope under each named path, that exist and resolve in scope (links included)."""
        assert self.scope is not None
        roots: list[str] = []
        for rel in named:
            for inner in self.scope.roots_under(rel):
                try:
                    target = self.path(inner)
                except FsmemError:
                    continue  # a prefix that is a link out of scope, or no longer a memory path
                if target.exists() and inner not in roots:
                    roots.append(inner)
        return roots

    def read(
        self,
        path: str,
        *,
        lines: str | None = None,
        section: str | None = None,
        outline: bool = False,
        include_superseded: bool = False,
        max_tokens: int | None = None,
    ) -> reading.ReadResult:
        """A line-numbered slice of one file, cut at the token budget with the next range named."""
        target = self._existing(path, "file")
        rel = relative(self.root, target)
        budget = self.budget.narrowed(max_tokens, None)
        if lines and section:
            raise InvalidArgument("give --lines or --section, not both")
        start, end = reading.parse_range(lines) if lines else (1, None)
        if outline:
            if section:
                start, end = reading.find_section(target, section, exact_limit=EXACT_COUNT_LIMIT)
            return reading.outline(
                target,
                rel,
                self.tokens,
                exact_limit=EXACT_COUNT_LIMIT,
                max_tokens=budget.max_tokens,
                start=start,
                end=end,
            )
        if section:
            start, end = reading.find_section(target, section, exact_limit=EXACT_COUNT_LIMIT)
        hide = [] if include_superseded else self.superseded_ranges(rel)
        max_line_chars = int(self.config.section("read").get("max_line_chars", 2000))
        return reading.bounded_read(
            target,
            rel,
            self.tokens,
            start=start,
            end=end,
            max_tokens=budget.max_tokens,
            max_line_chars=max_line_chars,
            hide_ranges=hide,
        )

    def check(self, path: str | None = None) -> CheckResult:
        """Every problem in every file, as (path, line, message); files that cannot be read are problems too."""
        skipped: list[tuple[str, str]] = []
        metas = self.catalog.entries(self._existing(path) if path else None, skipped)
        problems = [(m.path, line, message) for m in metas for line, message in m.problems]
        problems += [(shown, 1, reason) for shown, reason in skipped]
        problems.sort(key=lambda p: (p[0], p[1]))
        return CheckResult(problems=problems, files=len(metas) + len(skipped))

    # -- writes -------------------------------------------------------------
    def note(self, text: str, *, session: str | None = None, subject: str | None = None) -> writing.WriteResult:
        """Append to the current session note (today's file of `session`)."""
        self._require_writable()
        session = (
            session
            or os.environ.get(SESSION_ENV)
            or self.agent
            or str(self.config.section("notes").get("default_session", "default"))
        )
        check = None
        if self.scope is not None:
            scope = self.scope

            def check(path: Path) -> None:
                rel = relative(self.root, path)
                scope.check(rel, rel, "file")

        with file_lock(self.root):
            return writing.note(self.root, text, session=session, subject=subject, check_path=check)

    def write(self, path: str, body: str | None = None, *, set: dict[str, Any] | None = None) -> writing.WriteResult:
        """Create or replace a file's body and set front-matter fields (`set`)."""
        self._require_writable()
        target = self.path(path, want="file")
        with file_lock(self.root):
            return writing.write(self.root, target, body, dict(set or {}))

    def edit(self, path: str, *, old: str, new: str) -> writing.WriteResult:
        """Replace exactly one occurrence of `old` with `new`."""
        self._require_writable()
        target = self.path(path, want="file")
        with file_lock(self.root):
            return writing.edit(self.root, target, old, new)

    def rm(self, path: str) -> writing.WriteResult:
        self._require_writable()
        target = self.path(path)
        self._in_scope(target, path)
        _paths.check_folder_contents(self.root, target, path)
        with file_lock(self.root):
            return writing.remove(self.root, target)

    def mv(self, source: str, target: str) -> writing.WriteResult:
        self._require_writable()
        src = self.path(source)
        self._in_scope(src, source)
        dst = self.path(target, want="any" if src.is_dir() else "file")
        self._in_scope(dst, target)
        _paths.check_folder_contents(self.root, src, source)
        with file_lock(self.root):
            return writing.move(self.root, src, dst)

    # -- watch and cache (perf) ---------------------------------------------------
    def watch(
        self,
        *,
        settle: float | None = None,
        log: Callable[[str], None] | None = None,
        stop: threading.Event | None = None,
        ready: threading.Event | None = None,
        consolidate: bool = False,
        consolidate_after: float | None = None,
        quiet: float | None = None,
    ) -> WatchStats:
        """Keep the metadata cache and INDEX.md current as files change, until `stop` (a threading.Event) is set.

        `settle` (seconds, default `watch.settle_seconds` in fsmem.yaml, else
        0.5) is how long the memory must be still before a burst of events is
        acted on. `consolidate` also consolidates once session notes have been
        still for `consolidate_after` seconds (default
        `watch.consolidate_after_seconds`, else 60). `quiet` is the deprecated
        name of `settle`.
        """
        from fsmem import watch as _watch

        settle = renamed("quiet", quiet, "settle", settle)
        section = self.config.section("watch")
        if settle is None:
            settle = float(section.get("settle_seconds", section.get("quiet_seconds", _watch.DEFAULT_SETTLE_SECONDS)))
        if consolidate_after is None:
            consolidate_after = float(section.get("consolidate_after_seconds", _watch.DEFAULT_CONSOLIDATE_AFTER))
        if settle < 0 or consolidate_after < 0:
            raise InvalidArgument("--settle and --consolidate-after must be 0 or more seconds")
        self._whole_memory("watch")
        writable = not self.budget.read_only
        return _watch.watch(
            self.root,
            self.catalog,
            settle=settle,
            log=log,
            stop=stop,
            ready=ready,
            write_index=(lambda: self.index().changed) if writable else None,
            consolidate=self.consolidate if writable and consolidate else None,
            consolidate_after=consolidate_after,
        )

    # -- what agents get beyond files: statistics and the pre-injected context ---
    def stats(self, since: str | None = None, agent: str | None = None) -> StatsResult:
        """Per-tool figures from the retrieval log: calls, p50/p95 latency, mean tokens, shares."""
        from fsmem.query import stats as _stats

        return _stats.stats(self.root, since=since, agent=agent)

    def context(self, max_tokens: int | None = None) -> ContextBlock:
        """The block to pre-inject at the start of a turn: profile/ first, then INDEX.md, within the budget."""
        from fsmem.query import context as _context

        budget = self.budget.narrowed(max_tokens)
        return _context.build(self.root, self.catalog, self.tokens, max_tokens=budget.max_tokens, within=self.visible())

    def memory_tool(self, *, max_tokens: int | None = None) -> MemoryTool:
        """Deprecated (0.2): use `fsmem.agents.memory_tool.MemoryTool.over(memory)`; goes away in 0.3."""
        from fsmem.agents.memory_tool import MemoryTool  # deprecated shim: the one import that points up

        warn("Memory.memory_tool()", "fsmem.agents.memory_tool.MemoryTool.over(memory)")
        self._whole_memory("the memory tool")
        return MemoryTool.over(self, max_tokens=max_tokens)

    # -- consolidation (fsmem consolidate, INDEX.md) -------------------------
    def consolidate(self, dry_run: bool = False, *, progress: Progress | None = None) -> ConsolidationReport:
        """Merge new session notes into entity and topic documents; `dry_run` returns the diff and writes nothing."""
        self._whole_memory("consolidate")
        if not dry_run:
            self._require_writable()
        from fsmem.consolidate import apply as consolidate_apply
        from fsmem.consolidate.plan import DEFAULTS

        section = self.config.section("consolidate")
        _paths.config_dir(section.get("archive_dir", DEFAULTS["archive_dir"]), "consolidate.archive_dir", self.root)

        return consolidate_apply.run(self, dry_run=dry_run, progress=progress)

    def index(self) -> IndexResult:
        """Regenerate INDEX.md (the table of contents of entities and topics); says whether it changed."""
        self._whole_memory("index")
        self._require_writable()
        from fsmem.consolidate import index_md

        return IndexResult(changed=index_md.write_index(self))

    def write_index(self) -> bool:
        """Deprecated (0.2): use `index()`; goes away in 0.3."""
        warn("Memory.write_index()", "Memory.index()")
        return self.index().changed

    # -- search and recall ----------------------------------------------------
    @property
    def search_index(self) -> SearchIndex:
        """The row index under .fsmem/ (created on first use, kept in step with the files)."""
        if getattr(self, "_search_index", None) is None:
            from fsmem.search.index import shared_index

            self._search_index = shared_index(self.root)
        return self._search_index

    @property
    def search_settings(self) -> SearchSettings:
        from fsmem.search.ranking import SearchSettings

        return SearchSettings.from_section(self.config.section("search"))

    def search(
        self,
        query: str,
        *,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after: str | None = None,
        include_superseded: bool = False,
        min_score: float | None = None,
        offset: int = 0,
        max_results: int | None = None,
        max_tokens: int | None = None,
        k: int | None = None,
    ) -> SearchResult:
        """Rows ranked for `query` (facts, bullets, paragraphs with their context), fitted to the budget.

        `min_score` is the threshold below which a row is not relevant (an
        empty answer says "no relevant memory"). `k` is the deprecated name of
        `max_results`.
        """
        from fsmem.search.ranking import log_fields, search, usage_counts

        check_text(query, "the query")

        max_results = renamed("k", k, "max_results", max_results)
        budget = self.budget.narrowed(max_tokens, max_results)
        arguments = {
            "query": query,
            "type": type,
            "tag": tag,
            "updated_after": updated_after,
            "include_superseded": include_superseded or None,
            "min_score": min_score,
            "offset": offset or None,
            "max_results": max_results,
            "max_tokens": max_tokens,
        }
        given = {key: value for key, value in arguments.items() if value is not None}
        with retrieval_log.LoggedCall(self.root, agent=self.agent, tool="search", arguments=given) as logged:
            result, _snapshot, _ranking = search(
                self.search_index,
                self.tokens,
                self.search_settings,
                query,
                k=budget.max_results,
                max_tokens=budget.max_tokens,
                min_score=min_score,
                type=type,
                tag=tag,
                updated_after=updated_after,
                include_superseded=include_superseded,
                usage=usage_counts(self.root),
                offset=offset,
                within=self.visible(),
            )
            logged.done(**log_fields(result))
        return result

    def recall(
        self,
        query: str,
        *,
        seen: str | None = None,
        max_tokens: int | None = None,
        context: str | None = None,
    ) -> RecallResult:
        """Search for pre-injection, or skip cheaply (budget spent, already `seen` in the agent's context, nothing new).

        `context` is the deprecated name of `seen`.
        """
        from fsmem.search import recall as _recall
        from fsmem.search.ranking import log_fields

        seen = renamed("context", context, "seen", seen)
        check_text(query, "the query")
        if seen is not None:
            check_text(seen, "the text already seen")
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 0):
            raise InvalidArgument("max_tokens must be 0 or more (0 means the turn's budget is spent)")
        left = self.budget.max_tokens if max_tokens is None else min(max_tokens, self.budget.max_tokens)
        arguments = {"query": query, "max_tokens": max_tokens, "seen_chars": len(seen or "")}
        with retrieval_log.LoggedCall(self.root, agent=self.agent, tool="recall", arguments=arguments) as logged:
            outcome = _recall.recall(
                query,
                seen=seen,
                tokens_left=left,
                settings=_recall.RecallSettings.from_section(self.config.section("search")),
                root=self.root,
                search=lambda budget_tokens: self.search(query, max_tokens=budget_tokens),
                scope=self.scope,
            )
            logged.done(**log_fields(outcome.result), skipped=outcome.skipped, reason=outcome.reason)
        return outcome

    def evaluate(
        self, evalset: Any, *, sweep: Iterable[int] | None = None, max_tokens: int | None = None, ks: Any = None
    ) -> Any:
        """Deprecated (0.2): use `fsmem.evaluation.evaluate(memory, evalset)`; goes away in 0.3."""
        from fsmem.evaluation.harness import evaluate  # deprecated shim: the one import that points up

        warn("Memory.evaluate()", "fsmem.evaluation.evaluate(memory, evalset)")
        return evaluate(self, evalset, sweep=renamed("ks", ks, "sweep", sweep), max_tokens=max_tokens)


@dataclass
class IndexResult:
    """What `fsmem index` did: whether INDEX.md changed."""

    changed: bool
    path: str = "INDEX.md"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "changed": self.changed}

    def to_text(self) -> str:
        return f"{self.path} {'updated' if self.changed else 'unchanged'}"


__all__ = ["Memory", "discover_root", "CheckResult", "IndexResult", "walk"]
