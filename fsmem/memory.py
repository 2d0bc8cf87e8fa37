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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem import format as fmt
from fsmem.arguments import Door
from fsmem.budget import Budget, check_offset, echo
from fsmem.config import CONFIG_FILE, STATE_DIR, Config
from fsmem.deprecated import renamed, warn
from fsmem.errors import (
    AlreadyExists,
    ConfigError,
    FsmemError,
    InvalidArgument,
    NotAMemory,
    NotFound,
    ReadOnly,
    RootNotFound,
    StorageError,
)
from fsmem.format import secrets
from fsmem.query import grep as _grep, reading
from fsmem.query.listing import Listing, list_entries
from fsmem.store import paths as _paths, retrieval_log, writing
from fsmem.store.cache import timestamp_us
from fsmem.store.catalog import EXACT_COUNT_LIMIT, Catalog, FileMeta, walk
from fsmem.store.fields import check_fields
from fsmem.store.files import file_lock, file_version
from fsmem.store.paths import ROOT_README, check_text, relative, resolve
from fsmem.store.scope import Scope
from fsmem.store.selection import Selection
from fsmem.tokens import TokenCounter

if TYPE_CHECKING:
    import threading

    from fsmem.agents.memory_tool import MemoryTool
    from fsmem.consolidate.apply import ConsolidationReport
    from fsmem.consolidate.plan import Progress
    from fsmem.history.queries import DiffResult, LogResult, ShowResult
    from fsmem.history.repo import Repo
    from fsmem.history.sync import SyncResult
    from fsmem.history.view import HistoryView
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
            what = "is not a folder" if os.path.lexists(path) else "does not exist"
            raise RootNotFound(f"not an fsmem memory: {path} {what} ({_remedy(path)})")
        config = path / CONFIG_FILE
        if os.path.lexists(config) and not config.is_file():
            raise ConfigError(f"{config} is not a regular file; fsmem reads its settings from a plain YAML file")
        if not config.is_file():
            raise NotAMemory(f"not an fsmem memory: {path} holds no {CONFIG_FILE} ({_remedy(path)})")
        return path.resolve()
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / CONFIG_FILE).is_file():
            return folder
    raise RootNotFound(
        f"no memory found: no {CONFIG_FILE} in {here} or any folder above it. "
        "Create one with 'fsmem init DIR', or point to one with --root DIR or FSMEM_ROOT"
    )


def _refuse_state_link(root: Path) -> None:
    """A `.fsmem` that is a symbolic link (a clone checks out what a remote pushed) would put this host's cache,
    locks and retrieval log wherever it points: refused before anything is read or written there."""
    state = root / STATE_DIR
    if os.path.islink(state):
        raise StorageError(
            f"{state} is a symbolic link (to {_paths.quoted(os.readlink(state))}): fsmem keeps its machine state "
            f"only in a real folder of the memory, so nothing was read or written. Remove the link (rm {state}; "
            "fsmem sync --setup removes it too) and run the command again"
        )


def _remedy(path: Path) -> str:
    import shlex

    return f"create one with: fsmem init {shlex.quote(str(path))}"


def os_error_message(exc: OSError, root: Path | None = None) -> str:
    """One line for an operating-system error: the reason, and the file it concerns (relative to the root)."""
    where = ""
    if exc.filename is not None:
        name = os.fsdecode(exc.filename)
        if root is not None and name.startswith(str(root) + os.sep):
            name = name[len(str(root)) + 1 :]
        where = f" ({_paths.quoted(name)})"
    return f"{(exc.strerror or str(exc)).lower()}{where}"


def _as_fsmem_error(method: Callable, where: str) -> Callable:
    door = Door(method, where)

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = door(args, kwargs)  # arguments of the annotated types, or InvalidArgument
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
        where = f"{cls.__name__}()" if name == "__init__" else f"{cls.__name__}.{name}()"
        if isinstance(value, classmethod):
            setattr(cls, name, classmethod(_as_fsmem_error(value.__func__, where)))
        elif callable(value) and not isinstance(value, type):
            setattr(cls, name, _as_fsmem_error(value, where))
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
        _refuse_state_link(self.root)
        self.config = Config.load(self.root)
        self.agent = agent
        self.budget: Budget = self.config.budget_for(agent)
        self.scope: Scope | None = Scope.of(scope)
        self.tokens = TokenCounter(self.config.tokenizer)
        self.catalog = Catalog(self.root, self.tokens, scope=self.scope)

    def close(self) -> None:
        """Give back this object's share of the change feed and close its cache connection (a later call
        opens it again). A `Memory` that is dropped does the same when it is collected."""
        self.catalog.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creation ---------------------------------------------------------
    @classmethod
    def init(cls, directory: str | os.PathLike[str], *, git: bool = False) -> Memory:
        """Make `directory` a memory: a new folder gets the template; a folder that already holds files (an
        Obsidian vault, a folder of notes) gets only the template files it lacks, and no file already there
        changes. A folder that is already a memory is refused, unless `git` is asked for.

        With `git`, the memory gets history: a git repository (unless it already
        lies in a git work tree, which is then used as it is), `.fsmem/` ignored,
        fsmem's merge driver set up, and a first commit. An existing memory is
        given history the same way, its files untouched.
        """
        from fsmem.store import template

        target = Path(directory).expanduser()
        if git and (target / CONFIG_FILE).is_file():
            memory = cls(target)
            memory._setup_history(create=True)
            return memory
        if os.path.lexists(target / CONFIG_FILE):
            raise AlreadyExists(f"{target} already holds a memory ({CONFIG_FILE}); nothing was changed")
        if os.path.lexists(target) and not target.is_dir():
            raise AlreadyExists(f"{target} exists and is not a folder")
        template.add_missing(template_dir(), target)
        memory = cls(target)
        if git:
            memory._setup_history(create=True)
        return memory

    @classmethod
    def setup_clone(
        cls, directory: str | os.PathLike[str] | None = None, *, agent: str | None = None, remote: str | None = None
    ) -> SyncResult:
        """`fsmem sync --setup` of a git clone: `sync(setup=True)`, and the one way a folder without fsmem.yaml
        becomes a memory by sync. A clone of a bare remote whose HEAD names a branch it does not hold has no
        commit and no file yet; it takes the remote's branch first, through the trust boundary, and must then
        hold fsmem.yaml. `directory` defaults to $FSMEM_ROOT, else the current folder."""
        from fsmem.history import host_rules, remote as remotes

        target = Path(directory or os.environ.get(ROOT_ENV) or ".").expanduser()
        notes: list[str] = []
        if target.is_dir():
            host_rules.remove_state_link(target, notes)  # what the clone checked out, before fsmem writes state
        found = ""
        if target.is_dir() and not os.path.lexists(target / CONFIG_FILE):
            found = remotes.take_remote_branch(target.resolve(), writing.host_id(target.resolve()))
            if not (target / CONFIG_FILE).is_file():
                raise NotAMemory(
                    f"not an fsmem memory: {target} holds no {CONFIG_FILE}, and neither does the branch of its "
                    f"remote{' it took' if found else ''} ({_remedy(target)})"
                )
        result = cls(target, agent=agent).sync(remote, setup=True)
        result.found = "\n".join(line for line in (found, result.found) if line)
        result.boundary[:0] = notes
        return result

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

        The set is the catalog's rows in scope (`fsmem.store.selection`), brought up to date when called.
        """
        if self.scope is None:
            return None
        return self.catalog.visible().__contains__

    def _require_writable(self) -> None:
        if self.budget.read_only:
            raise ReadOnly(
                f"agent {self.agent!r} is read-only in {CONFIG_FILE}; it may list, grep, read and search, not write"
            )

    @property
    def secrets_policy(self) -> str:
        """What happens to text that looks like a secret: refuse, redact or allow (fsmem.yaml `secrets.policy`)."""
        return secrets.policy_of(self.config.section("secrets"))

    def _screen(self, text: str, what: str) -> str:
        """Text about to be stored, under the secrets policy (refused, redacted, or as it is)."""
        if not isinstance(text, str):
            return text
        return secrets.screen(text, self.secrets_policy, what)

    def _screen_value(self, value: Any, what: str) -> Any:
        if isinstance(value, str):
            return self._screen(value, what)
        if isinstance(value, list):
            return [self._screen_value(item, what) for item in value]
        return value

    def _existing(self, user_path: str, want: str = "any") -> Path:
        path = self.path(user_path, want=want)
        if not path.exists():
            raise NotFound(f"{relative(self.root, path)} does not exist; list files with ls")
        return path

    def meta(self, user_path: str) -> FileMeta:
        return self.catalog.get(self._existing(user_path, "file"), full=True)

    def superseded_ranges(self, rel: str) -> list[tuple[int, int]]:
        """Line ranges of superseded facts in one file (empty for files too large to parse)."""
        path = self.path(rel, want="file")  # the containment rule: a public method, whoever calls it
        rel = relative(self.root, path)
        try:
            if path.stat().st_size > EXACT_COUNT_LIMIT:
                return []
        except FileNotFoundError:
            return []
        return self.catalog.superseded([rel]).get(rel, [])

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
        found = self.catalog.listing(self._selection(path, type=type, tag=tag, updated_after=updated_after))
        if skipped is not None:
            skipped.extend(found.skipped)
        return list(found.metas)

    def _selection(
        self,
        path: str | None,
        *,
        depth: int | None = None,
        type: str | None = None,
        tag: str | Iterable[str] | None = None,
        updated_after: str | None = None,
    ) -> Selection:
        """What a listing under `path` with these filters asks the catalog (`fsmem.store.selection`)."""
        start = self._existing(path) if path else None
        if updated_after is not None and fmt.parse_timestamp(updated_after) is None:
            raise InvalidArgument(
                f"--updated-after takes an ISO 8601 date such as 2024-05-01, not {echo(updated_after)}"
            )
        rel = relative(self.root, start) if start is not None else None
        return Selection.of(
            rel,
            start_is_file=start is not None and not start.is_dir(),
            depth=depth,
            type=type,
            tag=tag,
            updated_after_us=timestamp_us(updated_after),
        )

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
        selection = self._selection(path, depth=depth, type=type, tag=tag, updated_after=updated_after)
        # one row past the cap, so the page can say the result limit cut it
        found = self.catalog.listing(selection, offset=offset, limit=budget.max_results + 1)
        listing = list_entries(
            found.metas,
            self.tokens.count,
            offset=offset,
            max_results=budget.max_results,
            max_tokens=budget.max_tokens,
            total=found.total,
        )
        listing.skipped = [p for p, _ in found.skipped]
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
                    rel
                    for rel in self.catalog.paths(self._selection(p, type=type, tag=tag, updated_after=updated_after))
                    if rel != ROOT_README or p == ROOT_README
                )
        elif named:
            targets = named
        else:
            targets = None
        timeout = float(self.config.section("grep").get("timeout_seconds", 10.0))
        result = _grep.run(
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
        for shown in dict.fromkeys(m.path for m in result.matches):
            try:
                result.versions[shown] = file_version(self.root / shown)
            except (OSError, FsmemError):
                result.versions[shown] = None
        return result

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
        version = file_version(target)  # before reading: a file that changes meanwhile fails a guarded write
        if outline:
            if section:
                start, end = reading.find_section(target, section, exact_limit=EXACT_COUNT_LIMIT)
            shown = reading.outline(
                target,
                rel,
                self.tokens,
                exact_limit=EXACT_COUNT_LIMIT,
                max_tokens=budget.max_tokens,
                start=start,
                end=end,
            )
            shown.version = version
            return shown
        if section:
            start, end = reading.find_section(target, section, exact_limit=EXACT_COUNT_LIMIT)
        hide = [] if include_superseded else self.superseded_ranges(rel)
        max_line_chars = int(self.config.section("read").get("max_line_chars", 2000))
        result = reading.bounded_read(
            target,
            rel,
            self.tokens,
            start=start,
            end=end,
            max_tokens=budget.max_tokens,
            max_line_chars=max_line_chars,
            hide_ranges=hide,
        )
        result.version = version
        return result

    def check(self, path: str | None = None) -> CheckResult:
        """Every problem in every file, as (path, line, message); files that cannot be read are problems too."""
        from fsmem.consolidate.dates import future_note_problem, today

        found = self.catalog.problems(self._selection(path))
        problems = [(m.path, line, message) for m in found.metas for line, message in m.problems]
        problems += [(shown, 1, reason) for shown, reason in found.skipped]
        day = today()
        for rel, created in found.created:  # a note dated in the future: consolidate holds it back, so say so
            message = future_note_problem(rel, {"created": created}, day)
            if message:
                problems.append((rel, 1, message))
        if path is None and os.path.exists(os.path.join(self.root, STATE_DIR, "history", "trust.json")):
            from fsmem.history.trust_record import recorded_problems  # what the last sync held or refused

            problems += recorded_problems(self.root)
        if path is None and self.scope is None and self.history is not None:  # what a killed git or fsmem left
            from fsmem.history import health

            problems += health.problems(self.history)
        problems.sort(key=lambda p: (p[0], p[1]))
        return CheckResult(problems=problems, files=found.total + len(found.skipped))

    # -- writes -------------------------------------------------------------
    # Each write runs under the write lock; with history on it records its exact bytes in the journal
    # there, and commits once the lock is released (fsmem.history.journal).
    @property
    def host_id(self) -> str:
        """This copy's id: default session notes are named after the agent and it (`researcher-1a2b3c4d`)."""
        configured = self.config.section("notes").get("host_id")
        return writing.host_id(self.root, str(configured) if configured else None)

    def note(self, text: str, *, session: str | None = None, subject: str | None = None) -> writing.WriteResult:
        """Append to the current session note (today's file of `session`).

        The default session is the agent (or `notes.default_session`) and this
        host's id, so notes written on several hosts never share a file.
        """
        self._require_writable()
        session = session or os.environ.get(SESSION_ENV)
        if not session:
            name = self.agent or str(self.config.section("notes").get("default_session", "default"))
            session = f"{name}-{self.host_id}"
        text = self._screen(text, "the note")
        default = self._default_subject()
        if subject is not None:
            subject = self._screen(subject, "the subject")
        check = None
        if self.scope is not None:
            scope = self.scope

            def check(path: Path) -> None:
                rel = relative(self.root, path)
                scope.check(rel, rel, "file")

        repo = self.history
        with file_lock(self.root):
            result = writing.note(
                self.root, text, session=session, subject=subject, default_subject=default, check_path=check
            )
            self._record(repo, result)
        self._after_write(repo, [result.path])
        return result

    def _default_subject(self) -> str:
        """Where consolidation files lines without a subject (`consolidate.default_subject`)."""
        from fsmem.consolidate.settings import DEFAULTS

        return str(self.config.section("consolidate").get("default_subject") or DEFAULTS["default_subject"])

    def write(
        self,
        path: str,
        body: str | None = None,
        *,
        set: dict[str, Any] | None = None,
        expected_version: str | None = None,
    ) -> writing.WriteResult:
        """Create or replace a file's body and set front-matter fields (`set`).

        With `expected_version` (the version read, ls or grep gave), nothing is
        written when the file changed since: ChangedOnDisk names its current version.
        """
        self._require_writable()
        target = self.path(path, want="file")
        if body is not None:
            body = self._screen(body, "the body")
        plain = check_fields(set or {})  # before the screen walks the values: a cycle is refused, not followed
        fields = {key: self._screen_value(value, f"field {key!r}") for key, value in plain.items()}
        repo = self.history
        with file_lock(self.root):
            result = writing.write(self.root, target, body, fields, expected_version=expected_version)
            named = fields if body is None else {}
            self._record(
                repo, result, _journal().describe("write", result.path, [], created=result.created, fields=named)
            )
        self._after_write(repo, [result.path])
        return result

    def edit(self, path: str, *, old: str, new: str, expected_version: str | None = None) -> writing.WriteResult:
        """Replace exactly one occurrence of `old` with `new` (guarded by `expected_version` like `write`)."""
        self._require_writable()
        target = self.path(path, want="file")
        new = self._screen(new, "the new text")
        repo = self.history
        with file_lock(self.root):
            result = writing.edit(self.root, target, old, new, expected_version=expected_version)
            self._record(repo, result)
        self._after_write(repo, [result.path])
        return result

    def rm(self, path: str) -> writing.WriteResult:
        self._require_writable()
        target = self.path(path)
        self._in_scope(target, path)
        _paths.check_folder_contents(self.root, target, path)
        repo = self.history
        with file_lock(self.root):
            result = writing.remove(self.root, target, record=repo is not None)
            self._record(repo, result)
        self._after_write(repo, [result.path])
        return result

    def mv(self, source: str, target: str) -> writing.WriteResult:
        self._require_writable()
        src = self.path(source)
        self._in_scope(src, source)
        dst = self.path(target, want="any" if src.is_dir() else "file")
        self._in_scope(dst, target)
        _paths.check_folder_contents(self.root, src, source)
        src_rel = relative(self.root, src)
        repo = self.history
        with file_lock(self.root):
            result = writing.move(self.root, src, dst, record=repo is not None)
            self._record(repo, result, f"mv {src_rel} -> {result.path}")
        self._after_write(repo, [src_rel, result.path])
        return result

    def _after_write(self, repo: Repo | None, paths: list[str]) -> None:
        """What follows every write, outside the write lock: its commit (with history) and the search update."""
        self._commit(repo)
        self._search_changed(paths)

    def _record(self, repo: Repo | None, result: writing.WriteResult, message: str | None = None) -> None:
        """Journal what a write changed (caller holds the write lock); a failure is logged, never raised: the
        write itself is done, and the change will be committed as made outside fsmem."""
        if repo is None or not result.changes:
            return
        journal = _journal()
        text = message or journal.describe(result.action, result.path, result.changes, created=result.created)
        try:
            journal.record(repo, self.agent, text, result.changes)
        except (FsmemError, OSError) as exc:
            self._history_problem("record", exc)

    def _commit(self, repo: Repo | None) -> None:
        """Commit what is pending, unless another process is already doing it (it will take ours too)."""
        if repo is None:
            return
        try:
            _journal().drain(repo)
        except (FsmemError, OSError) as exc:
            self._history_problem("commit", exc)

    def _history_problem(self, stage: str, exc: BaseException) -> None:
        import json
        import time

        try:
            folder = self.root / ".fsmem" / "logs"
            folder.mkdir(parents=True, exist_ok=True)
            line = {"time": time.time(), "stage": stage, "agent": self.agent, "error": str(exc)}
            with open(folder / "history.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
        except OSError:
            pass

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
            on_change=lambda files: self._search_changed(None if files is None else sorted(files), mark=False),
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
        within = self.catalog.visible_test() if self.scope is not None else None
        return _context.build(self.root, self.catalog, self.tokens, max_tokens=budget.max_tokens, within=within)

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
        archive_dir = section.get("archive_dir", DEFAULTS["archive_dir"])
        _paths.config_dir(archive_dir, "consolidate.archive_dir", self.root)

        def run() -> ConsolidationReport:
            return consolidate_apply.run(self.root, section, self.tokens.count, dry_run=dry_run, progress=progress)

        repo = None if dry_run else self.history
        report = run() if repo is None else self._consolidate_with_history(repo, run, str(archive_dir))
        if not dry_run:
            self._search_changed(list(report.files_written))
        return report

    def _consolidate_with_history(
        self, repo: Repo, run: Callable[[], ConsolidationReport], archive_dir: str
    ) -> ConsolidationReport:
        """One consolidation as one commit (fsmem.history.worktree): what fsmem and humans wrote before it is
        committed first; writers keep writing during the run (their writes wait in the journal)."""
        from fsmem.errors import LockTimeout
        from fsmem.history import worktree

        journal = _journal()
        try:  # an overlapping run is refused at once, before waiting for the commit lock
            overlap = file_lock(self.root, "consolidate", wait=False)
            overlap.__enter__()
        except LockTimeout:
            raise LockTimeout(
                "another 'fsmem consolidate' is running on this memory; this run changed nothing "
                "(notes written meanwhile are consolidated by the next run)"
            ) from None
        try:
            with journal.commit_lock(repo):
                worktree.commit_outside(repo)
                report = run()
                worktree.commit_consolidation(repo, report, archive_dir=archive_dir, agent=self.agent)
                journal.drain_locked(repo)
        finally:
            overlap.__exit__(None, None, None)
        return report

    def index(self) -> IndexResult:
        """Regenerate INDEX.md (the table of contents of entities and topics); says whether it changed."""
        self._whole_memory("index")
        self._require_writable()
        from fsmem.consolidate import index_md
        from fsmem.consolidate.plan import Settings

        settings = Settings.from_section(self.config.section("consolidate"))
        repo = self.history
        index_path = self.root / "INDEX.md"
        before = index_path.read_bytes() if repo is not None and index_path.is_file() else None
        changed = index_md.write_index(self.root, settings.index_max_tokens, self.tokens.count)
        if repo is not None and changed:
            after = index_path.read_bytes() if index_path.is_file() else None
            change = writing.Change("INDEX.md", before, after)
            self._record(repo, writing.WriteResult("index", "INDEX.md", changes=[change]), "index INDEX.md")
            self._commit(repo)
        if changed:
            self._search_changed(["INDEX.md"])
        return IndexResult(changed=changed)

    def write_index(self) -> bool:
        """Deprecated (0.2): use `index()`; goes away in 0.3."""
        warn("Memory.write_index()", "Memory.index()")
        return self.index().changed

    # -- history (git): fsmem.history -------------------------------------------
    @property
    def history(self) -> Repo | None:
        """The git repository that versions this memory, or None: not in a git work tree, ignored by the one
        it is in, or `history: {enabled: false}` in fsmem.yaml. Found once per object; no git process runs
        for a memory without a `.git` above it."""
        if not hasattr(self, "_repo"):
            from fsmem.history import may_have_history

            section = self.config.section("history")
            self._repo: Repo | None = None
            if may_have_history(self.root, section):
                from fsmem.errors import HistoryError
                from fsmem.history.repo import discover

                try:
                    self._repo = discover(self.root, self.host_id, section)
                except HistoryError as exc:  # no git command: the memory works, without history
                    self._history_problem("discover", exc)
        return self._repo

    def _require_history(self) -> Repo:
        repo = self.history
        if repo is None:
            from fsmem.errors import HistoryOff
            from fsmem.history import TURN_ON

            raise HistoryOff(
                f"this memory has no history (it is not in a git work tree, or history is off in {CONFIG_FILE}); "
                + TURN_ON.format(root=self.root)
            )
        _journal().drain(repo, wait=True)  # what fsmem wrote is in the history before it is asked about
        return repo

    def _setup_history(self, *, create: bool, notes: list[str] | None = None) -> str:
        """Set history up (fsmem.history.sync.setup); returns what was found of the remote's branches."""
        from fsmem.history import sync as _sync

        self.__dict__.pop("_repo", None)
        _, found = _sync.setup(self.root, create=create, host=self.host_id, agent=self.agent, notes=notes)
        self.__dict__.pop("_repo", None)
        if self.history is None:
            raise StorageError(f"{self.root}: history could not be turned on (is the folder ignored by git?)")
        return found

    def _history_view(self, repo: Repo | None = None) -> HistoryView:
        """The history as this agent may see it (`fsmem.history.view`); every history answer goes through it."""
        from fsmem.history.view import HistoryView

        return HistoryView(repo or self._require_history(), self.scope)

    def _history_path(self, path: str | None, what: str) -> str | None:
        """The memory path a history query narrows to; a scoped agent must name one wholly in its scope."""
        if path is None:
            self._whole_memory(f"{what} without a path")
            return None
        target = self.path(path)
        self._in_scope(target, path)
        return relative(self.root, target)

    def log(
        self,
        path: str | None = None,
        *,
        since: str | None = None,
        agent: str | None = None,
        offset: int = 0,
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> LogResult:
        """Who changed what, when, with what message: one row per commit, newest first, within the budget.

        `path` narrows to one file or folder, `since` to commits at or after a
        date, `agent` to that agent's commits.
        """
        from fsmem.history import queries

        check_offset(offset)
        budget = self.budget.narrowed(max_tokens, max_results)
        rel = self._history_path(path, "history log")
        if since is not None and fmt.parse_timestamp(since) is None:
            raise InvalidArgument(f"--since takes an ISO 8601 date such as 2026-11-01, not {echo(since)}")
        if agent is not None:
            check_text(agent, "the agent")
        return queries.log(
            self._history_view(),
            self.tokens.count,
            rel,
            since=since,
            agent=agent,
            offset=offset,
            max_results=budget.max_results,
            max_tokens=budget.max_tokens,
        )

    def show(self, path: str, *, at: str, lines: str | None = None, max_tokens: int | None = None) -> ShowResult:
        """The file as it was at a revision or date (`at`), line-numbered and cut at the budget like `read`."""
        from fsmem.history import queries

        check_text(at, "--at")
        rel = relative(self.root, self.path(path, want="file"))
        start, end = reading.parse_range(lines) if lines else (1, None)
        return queries.show(
            self._history_view(),
            self.tokens,
            rel,
            at,
            start=start,
            end=end,
            max_tokens=self.budget.narrowed(max_tokens).max_tokens,
            max_line_chars=int(self.config.section("read").get("max_line_chars", 2000)),
        )

    def diff(
        self,
        rev: str | None = None,
        path: str | None = None,
        *,
        lines: str | None = None,
        max_tokens: int | None = None,
    ) -> DiffResult:
        """What changed since `rev` (a revision, a date, or `A..B`; default: what is not committed yet), as a
        unified diff cut at the budget, with the next `lines` to ask for."""
        from fsmem.history import queries

        if rev is not None:
            check_text(rev, "the revision")
        rel = self._history_path(path, "history diff")
        start, end = reading.parse_range(lines) if lines else (1, None)
        return queries.diff(
            self._history_view(),
            self.tokens,
            rev,
            rel,
            start=start,
            end=end,
            max_tokens=self.budget.narrowed(max_tokens).max_tokens,
            max_line_chars=int(self.config.section("read").get("max_line_chars", 2000)),
        )

    def restore(self, path: str, *, at: str) -> writing.WriteResult:
        """Put a file back as it was at a revision or date (`at`), as a new commit; nothing is rewritten."""
        from fsmem.history import undo

        self._require_writable()
        check_text(at, "--at")
        target = self.path(path, want="file")
        repo = self._require_history()
        with file_lock(self.root):
            changes, message = undo.plan_restore(self._history_view(repo), self.root, relative(self.root, target), at)
            result = undo.apply(self.root, "restore", relative(self.root, target), changes)
            self._index_after_undo(result)
            self._record(repo, result, message)
        self._after_write(repo, [change.path for change in result.changes])
        undo.verify(repo, self.root, "restore", result.changes)
        return result

    def revert(self, rev: str) -> writing.WriteResult:
        """Undo what one commit changed, as a new commit (a file changed since is merged, or the revert refused)."""
        from fsmem.history import undo

        self._require_writable()
        self._whole_memory("history revert")
        check_text(rev, "the revision")
        repo = self._require_history()
        from fsmem.consolidate.plan import DEFAULTS

        archive = str(self.config.section("consolidate").get("archive_dir", DEFAULTS["archive_dir"]))
        with file_lock(self.root):
            changes, message, label = undo.plan_revert(
                repo, self.root, rev, lambda rel: self.path(rel, want="file"), archive_dir=archive
            )
            result = undo.apply(self.root, "revert", label, changes)
            self._index_after_undo(result)
            self._record(repo, result, message)
        self._after_write(repo, [change.path for change in result.changes])
        undo.verify(repo, self.root, "revert", result.changes)
        return result

    def _index_after_undo(self, result: writing.WriteResult) -> None:
        """Regenerate an existing INDEX.md after a restore or revert, as part of its commit (caller holds the lock).

        Undoing can bring documents back, take them away or change their
        descriptions wholesale, as a sync's merge can; INDEX.md follows at once,
        as it does after consolidate, index and sync. A scoped memory writes only
        inside its scope, and an undo of INDEX.md alone is left as asked.
        """
        index_path = self.root / "INDEX.md"
        if self.scope is not None or not index_path.is_file():
            return
        if all(change.path == "INDEX.md" for change in result.changes):
            return
        from fsmem.consolidate import index_md
        from fsmem.consolidate.plan import Settings

        before: bytes | None = index_path.read_bytes()
        settings = Settings.from_section(self.config.section("consolidate"))
        if not index_md.write_index(self.root, settings.index_max_tokens, self.tokens.count):
            return
        after = index_path.read_bytes()
        earlier = [change for change in result.changes if change.path == "INDEX.md"]
        if earlier:  # the undo itself rewrote INDEX.md (a revert of a consolidation): one change from the first bytes
            before = earlier[0].before
            result.changes.remove(earlier[0])
        if after != before:
            result.changes.append(writing.Change("INDEX.md", before, after))

    def sync(
        self, remote: str | None = None, *, setup: bool = False, accept_config: bool = False, repair: bool = False
    ) -> SyncResult:
        """Fetch, merge, consolidate and push, until the push goes through (bounded); `setup` only sets up this
        clone (merge driver, .gitattributes, .gitignore; what `git clone` put there checked and repaired) and
        commits that. What the remote sends crosses fsmem.history.trust first: `accept_config` takes the
        fsmem.yaml change the last sync held; `repair` merges without what it refused."""
        from fsmem.history import sync as _sync

        self._require_writable()
        self._whole_memory("history sync")
        if remote is not None:
            check_text(remote, "the remote")
        if setup:
            notes: list[str] = []
            found = self._setup_history(create=False, notes=notes)
            return _sync.SyncResult(remote=remote or "", setup=True, found=found, boundary=notes)
        repo = self._require_history()
        return _sync.sync(
            repo,
            remote,
            settings=self.config.section("sync"),
            consolidate=lambda: self.consolidate(),
            index=lambda: self.index().changed,
            threshold_of=lambda: float(self.config.section("consolidate").get("near_duplicate_threshold", 90)),
            accept_config=accept_config,
            repair=repair,
        )

    # -- search and recall ----------------------------------------------------
    @property
    def search_index(self) -> SearchIndex:
        """The row index under .fsmem/ (created on first use, kept in step with the files)."""
        if getattr(self, "_search_index", None) is None:
            from fsmem.search.index import shared_index

            self._search_index = shared_index(self.root)
        return self._search_index

    def _search_changed(self, paths: list[str] | None, *, mark: bool = True) -> None:
        """Update the search index for files this process changed (None: any file may have changed), and
        (`mark`) tell the change feed, if one runs, that the metadata cache must look at them: `fsmem watch`,
        which learnt of them from the feed, does not tell it again.

        Only an index that exists is updated (a memory never searched pays
        nothing), and a failure here never fails the write: every search stats
        the files and re-reads what changed anyway.
        """
        from fsmem.store.cache import cache_path

        if paths is not None and mark:
            self.catalog.changed(paths)
        if not cache_path(self.root).exists():
            return
        from fsmem.store.cache import DatabaseError

        try:
            if paths is None or any(os.path.isdir(self.root / p) for p in paths):
                self.search_index.refresh()
            else:
                self.search_index.update(paths)
        except (OSError, DatabaseError, FsmemError):
            pass

    @property
    def search_settings(self) -> SearchSettings:
        from fsmem.search.settings import SearchSettings

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
        self.catalog.count_call()  # a Memory asked again holds the change feed: the index refreshes from it
        with retrieval_log.LoggedCall(self.root, agent=self.agent, tool="search", arguments=given) as logged:
            result, _ranking = search(
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
        from fsmem.search.scoring import first_terms

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
                search=lambda budget_tokens: self.search(
                    first_terms(self.search_index.analyzer, query), max_tokens=budget_tokens
                ),
                scope=self.scope,
                written_since=self.catalog.written_since,
            )
            logged.done(**log_fields(outcome.result), skipped=outcome.skipped, reason=outcome.reason)
        return outcome

    def evaluate(
        self,
        evalset: str | Path | list[Any],
        *,
        sweep: Iterable[int] | None = None,
        max_tokens: int | None = None,
        ks: Iterable[int] | None = None,
    ) -> Any:
        """Deprecated (0.2): use `fsmem.evaluation.evaluate(memory, evalset)`; goes away in 0.3."""
        from fsmem.evaluation.harness import evaluate  # deprecated shim: the one import that points up

        warn("Memory.evaluate()", "fsmem.evaluation.evaluate(memory, evalset)")
        return evaluate(self, evalset, sweep=renamed("ks", ks, "sweep", sweep), max_tokens=max_tokens)


def _journal() -> Any:
    """fsmem.history.journal, imported when a memory has history (never at start-up)."""
    from fsmem.history import journal

    return journal


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
