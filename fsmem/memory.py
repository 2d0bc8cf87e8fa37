"""`Memory`: the one public object. Every CLI command, agent tool and server is a thin adapter over it.

Methods carry the same names and parameters as the CLI commands and return
typed results with `to_dict()` (the `--json` form) and `to_text()` (what a
human or a model reads).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.config import CONFIG_FILE, Budget, Config
from fsmem.errors import AlreadyExists, InvalidArgument, NotFound, ReadOnly, RootNotFound
from fsmem.query import grep as _grep, reading
from fsmem.query.listing import ListEntry, Listing, format_entry, within_depth
from fsmem.store import writing
from fsmem.store.catalog import EXACT_COUNT_LIMIT, Catalog, FileMeta, matches_filters, walk
from fsmem.store.files import file_lock
from fsmem.store.paths import relative, resolve
from fsmem.tokens import TokenCounter

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


class Memory:
    """A memory directory: list, grep, read, write and check it within a read budget.

    `agent` selects that agent's budget (and read-only flag) from fsmem.yaml;
    per-call `max_tokens` / `max_results` may narrow it, never widen it.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, *, agent: str | None = None):
        self.root = discover_root(root)
        self.config = Config.load(self.root)
        self.agent = agent
        self.budget: Budget = self.config.budget_for(agent)
        self.tokens = TokenCounter(self.config.tokenizer)
        self.catalog = Catalog(self.root, self.tokens)

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
    def path(self, user_path: str | os.PathLike[str] | None) -> Path:
        """Resolve an agent- or user-supplied path inside the root (or raise PathEscape)."""
        return resolve(self.root, user_path)

    def _budget(self, max_tokens: int | None, max_results: int | None) -> Budget:
        for name, value in (("max_tokens", max_tokens), ("max_results", max_results)):
            if value is not None and value < 1:
                raise InvalidArgument(f"{name} must be at least 1")
        return self.budget.narrowed(max_tokens, max_results)

    def _require_writable(self) -> None:
        if self.budget.read_only:
            raise ReadOnly(
                f"agent {self.agent!r} is read-only in {CONFIG_FILE}; it may list, grep, read and search, not write"
            )

    def _existing(self, user_path: str) -> Path:
        path = self.path(user_path)
        if not path.exists():
            raise NotFound(f"{relative(self.root, path)} does not exist; list files with ls")
        return path

    def meta(self, user_path: str) -> FileMeta:
        return self.catalog.get(self._existing(user_path))

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
    ) -> list[FileMeta]:
        """Metadata of the memory files under `path` that pass the front-matter filters."""
        start = self._existing(path) if path else None
        if updated_after is not None and fmt.parse_timestamp(updated_after) is None:
            raise InvalidArgument(f"--updated-after takes an ISO 8601 date such as 2024-05-01, not {updated_after!r}")
        return [
            meta
            for meta in self.catalog.entries(start)
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
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> Listing:
        """One row per file (path, title, type, updated, tokens, description), within the budget."""
        if depth is not None and depth < 1:
            raise InvalidArgument("--depth must be at least 1")
        budget = self._budget(max_tokens, max_results)
        base = relative(self.root, self.path(path)) if path else "."
        metas = [
            m
            for m in self.files(path, type=type, tag=tag, updated_after=updated_after)
            if within_depth(m.path, base, depth)
        ]
        shown: list[ListEntry] = []
        spent = 0
        for meta in metas:
            if len(shown) >= budget.max_results:
                break
            entry = ListEntry.from_meta(meta)
            cost = self.tokens.count(format_entry(entry))
            if spent + cost > budget.max_tokens:
                break
            spent += cost
            shown.append(entry)
        return Listing(entries=shown, total=len(metas), left_out=len(metas) - len(shown), tokens=spent)

    def grep(
        self,
        pattern: str,
        paths: Iterable[str] | None = None,
        *,
        ignore_case: bool = False,
        fixed_strings: bool = False,
        word: bool = False,
        context: int = 0,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after: str | None = None,
        include_superseded: bool = False,
        offset: int = 0,
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> _grep.GrepResult:
        """Lines matching `pattern` (ripgrep syntax), grouped by file, with an honest total."""
        if context < 0:
            raise InvalidArgument("--context must be 0 or more")
        budget = self._budget(max_tokens, max_results)
        paths = list(paths or [])
        filtered = type is not None or bool(tag) or updated_after is not None
        if filtered:
            targets: list[str] | None = []
            for p in paths or [None]:
                targets.extend(m.path for m in self.files(p, type=type, tag=tag, updated_after=updated_after))
        elif paths:
            targets = [relative(self.root, self._existing(p)) for p in paths]
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
            context=context,
            offset=offset,
            max_results=budget.max_results,
            max_tokens=budget.max_tokens,
            count_tokens=self.tokens.count,
            superseded_ranges=self.catalog.superseded,
            superseded_hint=self.catalog.superseded_hint,
            include_superseded=include_superseded,
            timeout=timeout,
        )

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
        target = self._existing(path)
        if target.is_dir():
            raise InvalidArgument(f"{path} is a folder; use ls to see its files")
        rel = relative(self.root, target)
        budget = self._budget(max_tokens, None)
        if outline:
            return reading.outline(target, rel, self.tokens, exact_limit=EXACT_COUNT_LIMIT)
        if lines and section:
            raise InvalidArgument("give --lines or --section, not both")
        start, end = reading.parse_range(lines) if lines else (1, None)
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
        """Every problem in every file, as (path, line, message)."""
        from fsmem.consolidate.dates import future_note_problem, today

        metas = self.catalog.entries(self._existing(path) if path else None)
        problems = [(m.path, line, message) for m in metas for line, message in m.problems]
        day = today()
        for meta in metas:  # a note dated in the future: consolidate holds it back, so say so
            message = future_note_problem(meta.path, meta.front_matter, day)
            if message:
                problems.append((meta.path, 1, message))
        return CheckResult(problems=problems, files=len(metas))

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
        with file_lock(self.root):
            return writing.note(self.root, text, session=session, subject=subject)

    def write(self, path: str, body: str | None = None, *, set: dict[str, Any] | None = None) -> writing.WriteResult:
        """Create or replace a file's body and set front-matter fields (`set`)."""
        self._require_writable()
        target = self.path(path)
        if not target.name.lower().endswith((".md", ".markdown")):
            raise InvalidArgument(f"{path!r}: memory files end in .md")
        with file_lock(self.root):
            return writing.write(self.root, target, body, dict(set or {}))

    def edit(self, path: str, *, old: str, new: str) -> writing.WriteResult:
        """Replace exactly one occurrence of `old` with `new`."""
        self._require_writable()
        target = self.path(path)
        with file_lock(self.root):
            return writing.edit(self.root, target, old, new)

    def rm(self, path: str) -> writing.WriteResult:
        self._require_writable()
        target = self.path(path)
        with file_lock(self.root):
            return writing.remove(self.root, target)

    def mv(self, source: str, target: str) -> writing.WriteResult:
        self._require_writable()
        src, dst = self.path(source), self.path(target)
        with file_lock(self.root):
            return writing.move(self.root, src, dst)

    # -- watch and cache (perf) ---------------------------------------------------
    def watch(
        self,
        *,
        quiet: float | None = None,
        log: Any = None,
        stop: Any = None,
        ready: Any = None,
        consolidate: bool = False,
        consolidate_after: float | None = None,
    ):
        """Keep the metadata cache and INDEX.md current as files change, until `stop` (a threading.Event) is set.

        `quiet` (seconds, default `watch.quiet_seconds` in fsmem.yaml, else 0.5)
        is how long the memory must be still before a burst of events is acted on.
        `consolidate` also consolidates once session notes have been still for
        `consolidate_after` seconds (default `watch.consolidate_after_seconds`, else 60).
        """
        from fsmem import watch as _watch

        section = self.config.section("watch")
        if quiet is None:
            quiet = float(section.get("quiet_seconds", _watch.DEFAULT_QUIET_SECONDS))
        if consolidate_after is None:
            consolidate_after = float(section.get("consolidate_after_seconds", _watch.DEFAULT_CONSOLIDATE_AFTER))
        if quiet < 0 or consolidate_after < 0:
            raise InvalidArgument("--quiet and --consolidate-after must be 0 or more seconds")
        return _watch.watch(
            self,
            quiet=quiet,
            log=log,
            stop=stop,
            ready=ready,
            consolidate=consolidate,
            consolidate_after=consolidate_after,
        )

    # -- agent surface: retrieval statistics and the pre-injected context (fsmem.stats, fsmem.context) --
    def stats(self, since: str | None = None, agent: str | None = None):
        """Per-tool figures from the retrieval log: calls, p50/p95 latency, mean tokens, shares."""
        from fsmem.query import stats as _stats

        return _stats.stats(self.root, since=since, agent=agent)

    def context(self, max_tokens: int | None = None):
        """The block to pre-inject at the start of a turn: profile/ first, then INDEX.md, within the budget."""
        from fsmem.query import context as _context

        return _context.build(self, max_tokens=max_tokens)

    # -- Claude's memory tool (memory_20250818) --------------------------------
    def memory_tool(self, *, max_tokens: int | None = None):
        """The `memory_20250818` commands with `/memories` mapped onto this memory's root.

        Answers are capped at this agent's budget; writes honour its read-only
        flag; every call is logged to `.fsmem/logs/retrieval.jsonl`.
        """
        from fsmem.agents.memory_tool import MemoryTool
        from fsmem.store.paths import STATE_DIR

        return MemoryTool(
            memory_root=self.root,
            agent=self.agent,
            max_tokens=self._budget(max_tokens, None).max_tokens,
            state_dir=self.root / STATE_DIR,
            create_root=False,
        )

    # -- consolidation (fsmem consolidate, INDEX.md) -------------------------
    def consolidate(self, dry_run: bool = False, *, progress=None):
        """Merge new session notes into entity and topic documents; `dry_run` returns the diff and writes nothing."""
        if not dry_run:
            self._require_writable()
        from fsmem.consolidate import apply as consolidate_apply

        section = self.config.section("consolidate")
        return consolidate_apply.run(self.root, section, self.tokens.count, dry_run=dry_run, progress=progress)

    def write_index(self) -> bool:
        """Regenerate INDEX.md (the table of contents of entities and topics); True if it changed."""
        self._require_writable()
        from fsmem.consolidate import index_md
        from fsmem.consolidate.plan import Settings

        settings = Settings.from_section(self.config.section("consolidate"))
        return index_md.write_index(self.root, settings.index_max_tokens, self.tokens.count)

    # -- search, recall and evaluation ----------------------------------------
    @property
    def search_index(self):
        """The row index under .fsmem/search/ (created on first use, kept in step with the files)."""
        if getattr(self, "_search_index", None) is None:
            from fsmem.search.index import shared_index

            self._search_index = shared_index(self.root)
        return self._search_index

    @property
    def search_settings(self):
        from fsmem.search.ranking import SearchSettings

        return SearchSettings.from_section(self.config.section("search"))

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        max_tokens: int | None = None,
        min_score: float | None = None,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after: str | None = None,
        include_superseded: bool = False,
    ):
        """Rows ranked for `query` (facts, bullets, paragraphs with their context), fitted to the budget."""
        from fsmem.search.ranking import logged_search

        return logged_search(
            self,
            query,
            k=k,
            max_tokens=max_tokens,
            min_score=min_score,
            type=type,
            tag=tag,
            updated_after=updated_after,
            include_superseded=include_superseded,
        )

    def recall(self, query: str, *, context: str | None = None, max_tokens: int | None = None):
        """Search for pre-injection, or skip cheaply (budget spent, already in context, nothing new)."""
        from fsmem.search.recall import recall

        return recall(self, query, context=context, max_tokens=max_tokens)

    def evaluate(self, evalset, *, ks: Iterable[int] | None = None, max_tokens: int | None = None):
        """Recall, tokens and latency per k, the knee, d' and the empty-gold share on an eval set."""
        from fsmem.evaluation.harness import evaluate

        return evaluate(self, evalset, ks=ks, max_tokens=max_tokens)


__all__ = ["Memory", "discover_root", "CheckResult", "walk"]
