"""Claude's memory tool (`memory_20250818`) over a folder: view, create, str_replace, insert, delete, rename.

The model names files as `/memories/...`; `MemoryTool` maps that prefix onto a
folder (`base_path/memories`, like the Anthropic SDK's reference backend, or any
`memory_root`, such as an fsmem memory) and answers with the reference's exact
result strings and error messages, so a model trained on the reference sees no
difference. It does not import `anthropic`: fsmem's own dispatcher uses it
directly, and `fsmem.integrations.anthropic` wraps it for the SDK's tool runner.

Over a plain folder, what fsmem adds is opt-in: a token cap on `view`
(`max_tokens`) that cuts a huge answer and names the next `view_range`; a
retrieval log of every call and a write lock when a `state_dir` is given;
atomic writes. Without those arguments nothing but what the commands create
appears under the folder. Over an fsmem memory (the folder holds fsmem.yaml)
the tool is one more face of `fsmem.Memory` (`fsmem()`): the agent's budget
applies, every path obeys the containment rule, and every command that changes
a file writes through the memory's own write path
(`fsmem.operations.transaction`: its lock, the secrets policy, the history
journal and commit, the search index and the change feed, the same logging).

This module is long because each of the six commands reproduces the reference's
exact strings and errors, over a plain folder and over an fsmem memory alike;
how a view looks and is cut lives in `memory_view`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from fsmem.agents.memory_view import MAX_LINES, CommandAnswer, ViewCap, folder_entries, format_size, numbered_line
from fsmem.budget import Budget
from fsmem.config import CONFIG_FILE, Config
from fsmem.errors import (
    FsmemError,
    InvalidArgument,
    MemoryToolError,
    PathEscape,
    RootNotFound,
    SecretFound,
    os_error_message,
    translated,
)
from fsmem.memory import Memory
from fsmem.operations.transaction import Transaction, screen, transaction
from fsmem.store import beneath, retrieval_log
from fsmem.store.catalog import walk_stats
from fsmem.store.files import atomic_write, content_version, file_lock, fsync_dir
from fsmem.store.moving import into_itself
from fsmem.store.note_status import consolidated_note_in, move_refused, remove_refused
from fsmem.store.paths import (
    STATE_DIR,
    bounded_walk,
    check_folder_contents,
    check_portable,
    is_visible_folder,
    lexical_parts,
    quoted,
    resolve,
    shown,
    size_problem,
    text_problem,
)
from fsmem.store.template import template_dir
from fsmem.store.writing import Change, WriteResult
from fsmem.tokens import TokenCounter

PREFIX = "/memories"
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
DIR_MODE = 0o700  # memories are private: owner only, whatever the umask
FILE_MODE = 0o600
MAX_LISTED = 100  # line numbers listed when str_replace's old_str occurs more than once
MAX_ECHOED = 200  # characters of an old_str an error repeats (the reference repeats it whole)
NAMED_RANGES = 256  # cut views whose next view_range the tool remembers, to refuse it once if the file changed


T = TypeVar("T")


class _Missing(MemoryToolError):
    """The path names nothing: logged as an empty answer."""


def make_private_dirs(path: Path) -> None:
    """Create `path` and its missing parents, each with mode 0o700 whatever the umask; existing ones are left alone."""
    missing: list[Path] = []
    current = Path(path)
    while not current.exists() and current.parent != current:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # mkdir is subject to the umask, chmod is not


class MemoryTool:
    """The six `memory_20250818` commands over `memory_root`, which the model calls `/memories`.

    `MemoryTool(base_path)` maps `/memories` onto `base_path/memories` (the
    reference's layout, created at once with mode 0o700, or before each command
    with `create_root="lazy"`); `memory_root=` maps it onto any folder instead.
    Optional: `agent` (its budget and read-only flag from the folder's
    fsmem.yaml, and its name in the log), `max_tokens` (a cap on `view`
    answers), `state_dir` (where the retrieval log goes, and over a plain
    folder the write lock; nothing is logged without it, and a plain folder is
    not locked). Over an fsmem memory, writes take the memory's own lock and
    write path whatever `state_dir` says. Every command returns the answer
    text or raises `MemoryToolError` with the message the model should read.
    """

    def __init__(
        self,
        base_path: str | os.PathLike[str] = "./memory",
        *,
        memory_root: str | os.PathLike[str] | None = None,
        agent: str | None = None,
        max_tokens: int | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        create_root: bool | str = True,
        read_only: bool = False,
    ):
        if max_tokens is not None and max_tokens < 1:
            raise InvalidArgument("max_tokens must be at least 1")
        self.base_path = Path(base_path)
        self.memory_root = Path(memory_root) if memory_root is not None else self.base_path / "memories"
        self.agent = agent
        self.read_only = read_only
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._lazy_root = create_root == "lazy"
        if create_root is True:
            make_private_dirs(self.memory_root)
        self._asked_max_tokens = max_tokens
        self.budget: Budget | None = None
        self.max_tokens: int | None = max_tokens
        self._load_budget()
        self._tokens: TokenCounter | None = None
        self._memory: Memory | None = None
        # the version each file was at when a cut view of it named its next view_range: (path, range) -> version,
        # the latest NAMED_RANGES of them (a long-lived tool must not grow with views whose range is never followed)
        self._named_ranges: dict[tuple[str, int, int], str] = {}

    @classmethod
    def over(cls, memory: Memory, *, max_tokens: int | None = None) -> MemoryTool:
        """The commands with `/memories` mapped onto `memory`'s root.

        Answers are capped at its agent's budget (or less, with `max_tokens`);
        writes honour its read-only flag; every call is logged to
        `.fsmem/logs/retrieval.jsonl`; writes go through `memory`'s own write
        path. A memory with a scope is refused: the tool's commands reach the
        whole folder.
        """
        if memory.scope is not None:
            raise InvalidArgument(
                f"Claude's memory tool reaches the whole memory; this agent's scope is {memory.scope.describe()}"
            )
        tool = cls(
            memory_root=memory.root,
            agent=memory.agent,
            max_tokens=memory.budget.narrowed(max_tokens).max_tokens,
            state_dir=memory.root / STATE_DIR,
            create_root=False,
            read_only=memory.budget.read_only,
        )
        tool._memory = memory
        return tool

    def _load_budget(self) -> None:
        """The agent's budget from the folder's fsmem.yaml (none without an agent or a config); max_tokens may narrow it."""
        if self.agent is not None and self.is_fsmem:
            self.budget = Config.load(self.memory_root).budget_for(self.agent)
        caps = [cap for cap in (self._asked_max_tokens, self.budget.max_tokens if self.budget else None) if cap]
        self.max_tokens = min(caps) if caps else None

    # -- fsmem over the same folder ------------------------------------------
    def _screen(self, text: str, what: str) -> str:
        """Over an fsmem memory, text to be stored obeys its secrets policy (a plain folder keeps the reference's)."""
        if not self.is_fsmem:
            return text
        try:
            return screen(self.fsmem(), text, what)
        except SecretFound as exc:
            raise MemoryToolError(str(exc)) from None

    @property
    def is_fsmem(self) -> bool:
        """True when the folder behind `/memories` is an fsmem memory (it holds fsmem.yaml)."""
        return (self.memory_root / CONFIG_FILE).is_file()

    def fsmem(self, *, init: bool = False) -> Memory:
        """`fsmem.Memory` over the folder behind `/memories`, for grep, search, consolidate and the rest.

        The folder must hold fsmem.yaml; `init=True` adds the template's
        fsmem.yaml when it does not (the only file added; the model will see it
        in `view /memories`; from then on the agent's budget in it applies to
        this tool as well). The agent must be known to fsmem.yaml. The same
        object is returned on later calls.
        """
        if not self.is_fsmem:
            if not init:
                raise RootNotFound(
                    f"{self.memory_root} is not an fsmem memory (no {CONFIG_FILE}); "
                    "call fsmem(init=True) to add one, or run 'fsmem init' on an empty folder"
                )
            make_private_dirs(self.memory_root)
            with self._plain_lock():
                target = self.memory_root / CONFIG_FILE
                if not target.exists():
                    data = (template_dir() / CONFIG_FILE).read_bytes()
                    atomic_write(target, data, mode=FILE_MODE, root=self.memory_root, generated=True)
            self._memory = None
            self._tokens = None
            self._load_budget()  # from now on the agent's budget in fsmem.yaml applies here too
        if self._memory is None:
            self._memory = Memory(self.memory_root, agent=self.agent)
        return self._memory

    # -- the commands ------------------------------------------------------------
    def execute(self, arguments: Mapping[str, Any]) -> str:
        """Run one command given as the model sends it: `{"command": "view", "path": "/memories", ...}`."""
        if not isinstance(arguments, Mapping):
            raise MemoryToolError("The memory tool takes an object of arguments with a `command` field")
        command = arguments.get("command")
        if command not in COMMANDS:
            raise MemoryToolError(f"Unknown command: {command}. Use one of: {', '.join(COMMANDS)}")
        required = {
            "view": ("path",),
            "create": ("path", "file_text"),
            "str_replace": ("path", "old_str", "new_str"),
            "insert": ("path", "insert_line", "insert_text"),
            "delete": ("path",),
            "rename": ("old_path", "new_path"),
        }[command]
        optional = ("view_range",) if command == "view" else ()
        for name in required:
            if name not in arguments:
                raise MemoryToolError(f"Missing required parameter `{name}` for command `{command}`")
        kwargs = {name: arguments[name] for name in required + optional if name in arguments}
        return getattr(self, command)(**kwargs)

    def view(self, path: str, view_range: Sequence[int] | None = None) -> str:
        """A directory two levels deep (sizes, hidden items left out) or a file with line numbers."""
        return self._run("view", {"path": path, "view_range": view_range}, lambda: self._view(path, view_range))

    def create(self, path: str, file_text: str) -> str:
        """A new file (parents created with mode 0o700); an existing path is never overwritten."""
        return self._run("create", {"path": path, "file_text": file_text}, lambda: self._create(path, file_text))

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace text that occurs exactly once; the answer shows the changed lines."""
        arguments = {"path": path, "old_str": old_str, "new_str": new_str}
        return self._run("str_replace", arguments, lambda: self._str_replace(path, old_str, new_str))

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        """Insert a line after line `insert_line` (0 = at the top)."""
        arguments = {"path": path, "insert_line": insert_line, "insert_text": insert_text}
        return self._run("insert", arguments, lambda: self._insert(path, insert_line, insert_text))

    def delete(self, path: str) -> str:
        """Delete a file or a whole directory; `/memories` itself is refused."""
        return self._run("delete", {"path": path}, lambda: self._delete(path))

    def rename(self, old_path: str, new_path: str) -> str:
        """Move a file or directory; an existing destination is never overwritten."""
        arguments = {"old_path": old_path, "new_path": new_path}
        return self._run("rename", arguments, lambda: self._rename(old_path, new_path))

    def clear_all_memory(self) -> str:
        """Delete everything under `/memories` (fsmem's state folder `.fsmem/` is kept)."""
        return self._run("clear_all_memory", {}, self._clear_all)

    def ensure_root(self) -> None:
        make_private_dirs(self.memory_root)

    def validate_path(self, path: str, *, want: str = "any") -> Path:
        """The real path that `path` (`/memories/...`) names inside the memory root, or a MemoryToolError.

        Symbolic links are resolved first and the result must lie inside the
        real root, so `..` and links that lead out are refused; the result is
        the resolved path, and each command then reads or changes it below the
        real root through no link (`_beneath`), so a link swapped in after the
        check cannot redirect the operation. Over an fsmem memory (the folder holds fsmem.yaml) the
        containment rule (`paths.resolve`) applies as well: only memory files
        (`want="file"`) and visible folders, never fsmem.yaml, `.git/`,
        `.fsmem/` or any hidden path.
        """
        if not isinstance(path, str):
            raise MemoryToolError(f"Path must be a string starting with /memories, got: {path!r}")
        if not path.startswith(PREFIX):
            raise MemoryToolError(f"Path must start with /memories, got: {shown(path)}")
        if "\x00" in path:
            raise MemoryToolError(f"Path {path!r} contains a NUL byte")
        relative = path[len(PREFIX) :].lstrip("/")
        problem = size_problem(relative) or (
            "is not valid text (a lone surrogate, or bytes that are not UTF-8)" if text_problem(relative) else None
        )
        if problem:
            raise MemoryToolError(f"Path {quoted(path)} {problem}")
        full = self.memory_root / relative if relative else self.memory_root
        real_root = os.path.realpath(self.memory_root)
        real = os.path.realpath(full)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise MemoryToolError(f"Path {shown(path)} would escape /memories directory")
        inside = os.path.relpath(real, real_root)
        if inside.split(os.sep)[0].lower() == STATE_DIR:
            raise MemoryToolError(
                f"Path {shown(path)} is inside /memories/{STATE_DIR}/, which holds fsmem's machine state"
            )
        if self.is_fsmem:
            if relative != relative.strip():  # the rule trims it: `x.md ` would write x.md and answer `x.md `
                raise MemoryToolError(
                    f"Path {quoted(path)} begins or ends with white space, which no memory file name does; "
                    "give the path without it"
                )
            try:  # the path acted on is the one the rule checked, '\' a folder separator as on every face:
                # read literally, `a\b/../fsmem.yaml` named fsmem.yaml while the rule checked a/fsmem.yaml
                real = os.path.realpath(resolve(self.memory_root, relative, want=want))
            except (PathEscape, InvalidArgument) as exc:
                reason = getattr(exc, "reason", str(exc))
                if getattr(exc, "portable", False):
                    raise MemoryToolError(f"Path {shown(path)} {reason}") from None
                raise MemoryToolError(
                    f"Path {shown(path)} {reason}; this memory tool reaches only memory files"
                ) from None
        elif not os.path.lexists(real):  # a plain folder: still no name that a Windows or macOS copy cannot hold
            try:
                check_portable(real_root, inside.replace(os.sep, "/"), relative)
            except InvalidArgument as exc:
                raise MemoryToolError(f"Path {shown(path)} {getattr(exc, 'reason', exc)}") from None
        return Path(real)

    # -- how each command works -----------------------------------------------------
    def _view(self, path: str, view_range: Sequence[int] | None) -> CommandAnswer:
        full = self.validate_path(path)
        relative = self._relative(full)
        with self._beneath(path, undone="nothing was read") as root:
            try:  # through no link, as every command: a folder swapped for a link since the check is refused
                folder = beneath.open_folder(root, relative, create=False)
            except (FileNotFoundError, InvalidArgument):  # nothing there, or a path through a file
                raise _Missing(f"The path {path} does not exist. Please provide a valid path.") from None
            except NotADirectoryError:
                folder = None
        if view_range and not (
            isinstance(view_range, (list, tuple))
            and all(isinstance(bound, int) and not isinstance(bound, bool) for bound in view_range)
        ):
            raise MemoryToolError(
                f"Invalid `view_range` parameter: {view_range!r}. It should be two line numbers [start, end]."
            )
        if folder is None:
            return self._view_file(path, full, view_range)
        with folder:
            return self._view_directory(path, folder, relative, view_range)

    def _named(self, path: str) -> str:
        """`path` as a view's header names it: as the reference does, or, under a cap, a long one by its start and
        size (`fsmem.query.reading.named`), which repeated whole left no room for a line of the file."""
        from fsmem.query.reading import named

        return named(path) if self.max_tokens is not None else path

    def _view_directory(
        self, path: str, folder: beneath.Folder, relative: str, view_range: Sequence[int] | None
    ) -> CommandAnswer:
        """The folder's entries; `view_range` picks entries by number (1 is the first under the folder), as a
        cut view's trailer names them: the reference ignores it for a folder, so nothing reached the entries a
        cut left out but the subfolders."""
        root = os.path.realpath(self.memory_root)
        items = folder_entries(root, folder, relative, memory_only=self.is_fsmem)
        total = len(items)
        items, first = _in_range(items, view_range)
        header = (
            f"Here're the files and directories up to 2 levels deep in {self._named(path)}, excluding hidden items:"
        )
        rows = [f"{format_size(folder.stat().st_size)}\t{path}"] + [f"{size}\t{path}/{name}" for size, name in items]
        text = header + "\n" + "\n".join(rows)
        listed = [f"{relative}/{name}" if relative != "." else name for _, name in items]
        answer = CommandAnswer(text, paths=listed, rows=len(items))
        if self.max_tokens is not None:
            ViewCap(self.max_tokens, self.tokens).cut_directory(answer, header, rows, first, total)
        return answer

    def _view_file(self, path: str, full: Path, view_range: Sequence[int] | None) -> CommandAnswer:
        relative = self._relative(full)
        content = self._read_text(full, path, not_regular=f"Unsupported file type for {path}")
        self._unchanged_since_named(path, relative, view_range, content)
        lines = content.split("\n")
        if self.max_tokens is None and len(lines) > MAX_LINES:
            raise MemoryToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
        shown, first = _in_range(lines, view_range)
        header = f"Here's the content of {self._named(path)} with line numbers:\n"
        numbered = [numbered_line(first + offset, line) for offset, line in enumerate(shown)]
        answer = CommandAnswer(
            header + "\n".join(numbered),
            paths=[self._relative(full)],
            rows=len(shown),
            lines=[first, first + len(shown) - 1] if shown else None,
        )
        if self.max_tokens is not None:
            ViewCap(self.max_tokens, self.tokens).cut_file(answer, header, numbered, first, total=len(lines))
        if answer.next_range is not None:
            self._named_ranges[(relative, *answer.next_range)] = _version_of(content)
            if len(self._named_ranges) > NAMED_RANGES:  # a range never followed: the oldest is forgotten
                del self._named_ranges[next(iter(self._named_ranges))]
        return answer

    def _unchanged_since_named(self, path: str, relative: str, view_range: Sequence[int] | None, text: str) -> None:
        """Refuse, once, the view_range a cut view named when the file changed since, by another hand than this
        tool's: its lines may have moved, and the next page of the new file after a page of the old one would
        read as one file. `read` checks the version its continuation carries (`expected_version`); the memory
        tool's view has no such argument (the schema is Anthropic's), so the tool remembers what it named."""
        if not view_range or len(view_range) != 2:
            return
        named = (relative, view_range[0], view_range[1])
        if named in self._named_ranges and self._named_ranges.pop(named) != _version_of(text):
            raise MemoryToolError(
                f"The file {path} has changed since the view that named view_range [{named[1]}, {named[2]}]: its "
                "lines may have moved. View it again from its start (this view_range asked again is shown as it "
                "is now)."
            )

    def _create(self, path: str, file_text: str) -> CommandAnswer:
        self._require_writable("create")
        full = self.validate_path(path, want="file")
        data = self._screen(self._text_argument("file_text", file_text), "file_text").encode("utf-8")
        relative = self._relative(full)
        if relative == ".":
            raise MemoryToolError(f"File {path} already exists")
        with self._beneath(path) as root:
            self._make_folders(root, relative)
            with self._writing() as tx:
                try:
                    with self._journalled(tx, "create", [Change(relative, None, data)]):
                        atomic_write(full, data, mode=FILE_MODE, exclusive=True, root=root, generated=True)
                except FileExistsError:
                    raise MemoryToolError(f"File {path} already exists") from None
        return CommandAnswer(f"File created successfully at: {path}", paths=[self._relative(full)], rows=1)

    def _existing_file(self, path: str) -> Path:
        full = self.validate_path(path, want="file")
        if not full.exists():
            raise _Missing(f"The path {path} does not exist. Please provide a valid path.")
        if not full.is_file():
            raise MemoryToolError(f"The path {path} is not a file.")
        return full

    def _str_replace(self, path: str, old_str: str, new_str: str) -> CommandAnswer:
        self._require_writable("str_replace")
        full = self._existing_file(path)
        old_str = self._text_argument("old_str", old_str)
        new_str = self._screen(self._text_argument("new_str", new_str), "new_str")
        with self._writing() as tx:
            content = self._read_text(full, path)
            count = content.count(old_str)
            if count == 0:
                raise MemoryToolError(
                    f"No replacement was performed, old_str `{_echoed(old_str)}` did not appear verbatim in {path}."
                )
            if count > 1:
                raise MemoryToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{_echoed(old_str)}` in lines: "
                    f"{_occurrence_lines(content, old_str, count)}. Please ensure it is unique"
                )
            changed = content[: content.find(old_str)].count("\n")
            updated = content.replace(old_str, new_str)
            with self._journalled(
                tx, "str_replace", [Change(self._relative(full), content.encode(), updated.encode())]
            ):
                self._rewrite(full, path, updated.encode("utf-8"), content.encode("utf-8"))
        new_lines = updated.split("\n")
        start, end = max(0, changed - 2), min(len(new_lines), changed + 3)
        snippet = [numbered_line(number, new_lines[number - 1]) for number in range(start + 1, end + 1)]
        text = "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        return CommandAnswer(text + "\n".join(snippet), paths=[self._relative(full)], rows=1, lines=[start + 1, end])

    def _insert(self, path: str, insert_line: int, insert_text: str) -> CommandAnswer:
        self._require_writable("insert")
        full = self._existing_file(path)
        insert_text = self._screen(self._text_argument("insert_text", insert_text), "insert_text")
        with self._writing() as tx:
            content = self._read_text(full, path)
            lines = content.split("\n")  # split on LF only: a CR stays with its line
            if lines[-1] == "":
                lines.pop()
            if isinstance(insert_line, bool) or not isinstance(insert_line, int) or not 0 <= insert_line <= len(lines):
                raise MemoryToolError(
                    f"Invalid `insert_line` parameter: {insert_line}. It should be within the range [0, {len(lines)}]."
                )
            lines.insert(insert_line, insert_text.rstrip("\n"))
            updated = "\n".join(lines)
            if not updated.endswith("\n"):
                updated += "\n"
            with self._journalled(tx, "insert", [Change(self._relative(full), content.encode(), updated.encode())]):
                self._rewrite(full, path, updated.encode("utf-8"), content.encode("utf-8"))
        return CommandAnswer(f"The file {path} has been edited.", paths=[self._relative(full)], rows=1)

    @staticmethod
    def _remove_if(root: Path, relative: str, read: bytes | None, path: str) -> None:
        """Remove the file only if it holds `read` (None: is not being saved; `beneath.remove_if`); else it is left
        as saved, and the model told."""
        if not beneath.remove_if(root, relative, read, generated=True):
            raise MemoryToolError(
                f"The file {path} was changed on disk while it was being deleted (saved by an "
                "editor or another program); it was left as saved. Read it again, then retry"
            )

    def _delete(self, path: str) -> CommandAnswer:
        self._require_writable("delete")
        full = self.validate_path(path)
        if str(full) == os.path.realpath(self.memory_root):
            raise MemoryToolError("Cannot delete the /memories directory itself")
        link = self._link_named(path)
        if link is not None:
            return self._delete_link(path, link)
        self._check_folder(full, path)
        relative = self._relative(full)
        with self._writing() as tx:
            self._keep_cited(relative, f"Cannot delete {path}", remove_refused)
            gone = self._contents(full) if tx is not None and tx.keeps_history else []
            try:
                kind = os.lstat(full).st_mode
                if not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
                    raise FileNotFoundError(errno.ENOENT, "not a file or a folder", os.fspath(full))
                with self._beneath(path) as root:
                    if stat.S_ISREG(kind) and len(gone) == 1:  # its history holds these bytes: nothing else may go
                        with self._journalled(tx, "delete", [Change(gone[0][0], gone[0][1], None)]):
                            self._remove_if(root, relative, gone[0][1], path)
                    elif stat.S_ISREG(kind) and not gone:  # no history kept: a save under way in place stays
                        with self._journalled(tx, "delete", [], paths=[relative]):
                            self._remove_if(root, relative, None, path)
                    else:
                        removed = [Change(rel, data, None) for rel, data in gone]
                        try:
                            with self._journalled(tx, "delete", removed, paths=[relative]):
                                beneath.remove(root, relative, generated=True, tree=True)
                        except BaseException:
                            self._record_removed(tx, gone, root, relative)
                            raise
            except FileNotFoundError:
                raise _Missing(f"The path {path} does not exist") from None
            if stat.S_ISDIR(kind) and tx is not None:
                tx.changed_folder()
            fsync_dir(full.parent)
        return CommandAnswer(f"Successfully deleted {path}", paths=[relative], rows=1)

    def _keep_cited(self, rel: str, cannot: str, refused: Callable[[str, str], str]) -> None:
        """Over an fsmem memory, a session note that was consolidated (or a folder holding one) at `rel` is
        refused, as `fsmem mv` and `fsmem rm` refuse it: documents cite it by its path."""
        if self.is_fsmem:
            archive = Config.load(self.memory_root).consolidate.archive_dir
            cited = consolidated_note_in(self.memory_root, rel, archive)
            if cited is not None:
                raise MemoryToolError(f"{cannot}: {refused(cited, rel)}")

    def _link_named(self, path: str) -> str | None:
        """Over an fsmem memory, the link `path` (validated) names itself, memory-relative, or None: `delete` removes
        it as `rm` does, not the file or folder it leads to (the reference's unlink of the resolved path)."""
        if not self.is_fsmem:
            return None
        parts = lexical_parts(path[len(PREFIX) :].lstrip("/"))  # as validate_path's rule read it, a link kept
        named = self.memory_root.joinpath(*parts)
        if not parts or not os.path.islink(named):
            return None
        link = self._relative(Path(os.path.realpath(named.parent), named.name))
        return None if link.startswith("../") else link  # a folder swapped for a link since: refused below

    def _delete_link(self, path: str, link: str) -> CommandAnswer:
        with self._writing() as tx:
            root = Path(os.path.realpath(self.memory_root))
            try:
                text = os.fsencode(os.readlink(root / link))
                with self._beneath(path), self._journalled(tx, "delete", [Change(link, text, None, True)]):
                    beneath.remove(root, link, generated=True)
            except FileNotFoundError:
                raise _Missing(f"The path {path} does not exist") from None
            fsync_dir((root / link).parent)
        return CommandAnswer(f"Successfully deleted {path}", paths=[link], rows=1)

    def _rename_link(self, old_path: str, new_path: str, link: str, new: Path) -> CommandAnswer:
        """Move the link `link` itself, as `mv` does (the reference moves what it leads to, leaving it dangling)."""
        target = self._relative(new)
        with self._writing() as tx:
            if os.path.lexists(new):
                raise MemoryToolError(f"The destination {new_path} already exists")
            root = Path(os.path.realpath(self.memory_root))
            text = os.readlink(root / link)
            if beneath.leads_out(target, text):
                raise MemoryToolError(
                    f"Path {shown(new_path)} would hold a symbolic link to {shown(text)}, which leads outside "
                    "/memories from there"
                )
            data = os.fsencode(text)
            changes = [Change(link, data, None, True), Change(target, None, data, True)]
            with self._beneath(new_path):
                self._make_folders(root, target)
                with self._journalled(tx, "rename", changes, f"memory.rename {link} -> {target}"):
                    beneath.rename(root, link, target, generated=True, folder_mode=DIR_MODE)
            fsync_dir(new.parent)
        return CommandAnswer(f"Successfully renamed {old_path} to {new_path}", paths=[link, target], rows=1)

    def _rename(self, old_path: str, new_path: str) -> CommandAnswer:
        self._require_writable("rename")
        old = self.validate_path(old_path)
        new = self.validate_path(new_path, want="any" if old.is_dir() or not old.exists() else "file")
        if str(old) == os.path.realpath(self.memory_root):
            raise MemoryToolError("Cannot rename the /memories directory itself")
        link = self._link_named(old_path)
        if link is not None:
            return self._rename_link(old_path, new_path, link, new)
        self._check_folder(old, old_path)
        with self._writing() as tx:
            if new.exists():
                raise MemoryToolError(f"The destination {new_path} already exists")
            moved = self._contents(old) if tx is not None and tx.keeps_history else []
            if not os.path.lexists(old):  # checked before any folder is made, so a failed move leaves nothing
                raise _Missing(f"The path {old_path} does not exist")
            base, target = self._relative(old), self._relative(new)
            if into_itself(base, target):
                raise MemoryToolError(f"Cannot rename {old_path} into itself: {new_path} lies inside it")
            self._keep_cited(base, f"Cannot rename {old_path}", move_refused)
            changes = []
            for rel, data in moved:
                changes += [Change(rel, data, None), Change(target + rel[len(base) :], None, data)]
            journalled = self._journalled(
                tx, "rename", changes, f"memory.rename {base} -> {target}", paths=[base, target]
            )
            with self._beneath(new_path) as root:
                self._make_folders(root, target)
                try:
                    with journalled:
                        beneath.rename(root, base, target, generated=True, folder_mode=DIR_MODE)
                except FileNotFoundError:
                    raise _Missing(f"The path {old_path} does not exist") from None
                except FileExistsError:
                    raise MemoryToolError(f"The destination {new_path} already exists") from None
                except OSError as exc:  # named by its whole path, as every face names a file (`os_error_message`)
                    exc.filename = os.fspath(old)
                    raise
            fsync_dir(new.parent)
            fsync_dir(old.parent)
        return CommandAnswer(
            f"Successfully renamed {old_path} to {new_path}", paths=[self._relative(old), self._relative(new)], rows=1
        )

    def _clear_all(self) -> CommandAnswer:
        self._require_writable("clear_all_memory")
        make_private_dirs(self.memory_root)
        with self._writing() as tx:
            if tx is not None:  # an fsmem memory: only its memory files go; fsmem.yaml, .git/, .fsmem/ and others stay
                gone = []
                root = Path(os.path.realpath(self.memory_root))  # once: every file is removed below it
                # the walk enters no link, so each real file comes once, by its real path; links where folders
                # would be are found before anything goes (a link to a folder emptied here would dangle)
                found = [(rel, full) for rel, full, _stat in walk_stats(self.memory_root)]
                found += [(rel, os.path.join(root, rel)) for rel in _folder_links(root)]
                for rel, full in found:
                    link = os.path.islink(full)  # a link goes as itself (its text), as `rm` removes it
                    data = None
                    if tx.keeps_history:
                        data = os.fsencode(os.readlink(full)) if link else Path(full).read_bytes()
                    gone.append(Change(rel, data, None, link))
                tx.changed_folder()
                try:
                    with self._journalled(tx, "clear_all_memory", gone, "memory.clear_all_memory"):
                        for change in gone:
                            with self._swapped(PREFIX + "/" + change.path):
                                beneath.remove(root, change.path, generated=True)
                except BaseException:  # stopped part way: what went is still this command's
                    removed = [change for change in gone if not os.path.lexists(root / change.path)]
                    with contextlib.suppress(FsmemError, OSError):
                        self._record(tx, "clear_all_memory", removed, "memory.clear_all_memory")
                    raise
                _remove_empty_folders(root)
            else:
                with self._beneath(PREFIX) as root:
                    for child in sorted(os.listdir(root)):
                        if child != STATE_DIR:
                            beneath.remove(root, child, generated=True, tree=True)
        return CommandAnswer("All memory cleared")

    # -- plumbing -----------------------------------------------------------------
    def _run(self, command: str, arguments: dict[str, Any], action: Callable[[], CommandAnswer]) -> str:
        logged = None
        if self.state_dir is not None:  # nothing is logged without a state folder
            logged = retrieval_log.LoggedCall(
                self.memory_root,
                agent=self.agent,
                tool=f"memory.{command}",
                arguments={name: value for name, value in arguments.items() if value is not None},
                state=self.state_dir,
            )
        with logged if logged is not None else contextlib.nullcontext():
            try:
                if self._lazy_root:
                    self.ensure_root()
                answer = action()
            except MemoryToolError as exc:
                self._log(logged, command, error=exc)
                raise
            except FsmemError as exc:  # a lock timeout or a config problem: still one message for the model
                error = MemoryToolError(str(exc))
                self._log(logged, command, error=error)
                raise error from exc
            except (OSError, UnicodeError) as exc:
                error = MemoryToolError(self._failure(command, arguments, exc))
                self._log(logged, command, error=error)
                raise error from exc
            self._log(logged, command, answer=answer)
        if command != "view":  # a file this tool changed: the model knows its lines moved
            self._named_ranges = {key: v for key, v in self._named_ranges.items() if key[0] not in answer.paths}
        return answer.text

    # -- where a write lands: below the real root, through no link (fsmem.store.beneath) -------------
    @contextlib.contextmanager
    def _beneath(self, path: str, *, undone: str = "nothing was written") -> Iterator[Path]:
        """The real memory root, for a change made below it one folder at a time (`fsmem.store.beneath`, as a
        generated file is: no link followed). `validate_path` resolved every link already, so a link met now
        was swapped in since the check: the change is refused, naming the path the model gave."""
        with self._swapped(path, undone=undone):
            yield Path(os.path.realpath(self.memory_root))

    @staticmethod
    @contextlib.contextmanager
    def _swapped(path: str, *, undone: str = "nothing was written") -> Iterator[None]:
        """A change below a real root taken already (`_beneath`'s refusal, for a command that changes many paths)."""
        try:
            yield
        except PathEscape:
            raise MemoryToolError(
                f"Path {shown(path)} went through a symbolic link that appeared after it was checked; {undone}"
            ) from None

    @staticmethod
    def _make_folders(root: Path, relative: str) -> None:
        """The folders that hold `relative` (a path below the real root), made with mode 0o700 through no link."""
        folder = relative.rpartition("/")[0]
        if folder:
            beneath.make_folder(root, folder, generated=True, mode=DIR_MODE)

    def _rewrite(self, full: Path, path: str, data: bytes, read: bytes) -> None:
        """Replace the existing file `full` (validated) with `data`, below the real root, only if it still holds
        the bytes `read` (ChangedOnDisk otherwise: a person's editor saved it meanwhile, and that is kept)."""
        with self._beneath(path) as root:
            atomic_write(full, data, root=root, generated=True, expect=read)

    # -- the write path: over an fsmem memory, its own (fsmem.operations.transaction) ----------------
    @contextlib.contextmanager
    def _writing(self) -> Iterator[Transaction | None]:
        """The lock of one command that changes files, and over an fsmem memory its whole write path: the
        memory's write lock, then its journal and commit, the search index and the change feed (`Memory`'s
        transaction, with its logging). Over a plain folder: the state folder's lock, if any; None."""
        if not self.is_fsmem:
            with self._plain_lock():
                yield None
            return
        with transaction(self.fsmem()) as tx:
            yield tx

    def _plain_lock(self) -> contextlib.AbstractContextManager[None]:
        return (
            file_lock(self.memory_root, state=self.state_dir)
            if self.state_dir is not None
            else contextlib.nullcontext()
        )

    @staticmethod
    @contextlib.contextmanager
    def _journalled(
        tx: Transaction | None,
        command: str,
        changes: list[Change],
        message: str | None = None,
        *,
        paths: list[str] | None = None,
    ) -> Iterator[None]:
        """The write in the body, its history journalled before it (`Transaction.ahead`): an entry that cannot be
        stored fails the command with nothing written, and a command killed after its write (or part way through
        a folder's) is still committed as its own (`fsmem.history.journal.adopt`). Nothing over a plain folder."""
        if tx is None:
            yield
            return
        message, paths = _entry(command, changes, message, paths)
        result = WriteResult("write", changes[0].path if changes else "", changes=changes)
        with tx.ahead(result, message):
            yield
        tx.wrote(result, message, paths=paths)

    @staticmethod
    def _record(
        tx: Transaction | None,
        command: str,
        changes: list[Change],
        message: str | None = None,
        *,
        paths: list[str] | None = None,
    ) -> None:
        """What the command changed, for the memory's history and index (nothing over a plain folder)."""
        if tx is not None:
            message, paths = _entry(command, changes, message, paths)
            tx.record(message, changes, paths)

    def _record_removed(self, tx: Transaction | None, gone: list[tuple[str, bytes]], root: Path, relative: str) -> None:
        """A folder's removal that stopped half way (a file the system would not remove): the files it did
        remove are committed as this delete, so that a write and its history still go together."""
        removed = [Change(rel, data, None) for rel, data in gone if not os.path.lexists(root / rel)]
        if removed:
            with contextlib.suppress(FsmemError, OSError):
                self._record(tx, "delete", removed, paths=[relative])

    def _failure(self, command: str, arguments: Mapping[str, Any], exc: OSError | UnicodeError) -> str:
        """The message of a command the system refused, worded as every face words it (`fsmem.errors`)."""
        target = arguments.get("path") or arguments.get("old_path") or PREFIX
        if isinstance(exc, OSError):
            reason = os_error_message(exc, os.path.realpath(self.memory_root), prefix=PREFIX + "/")
        else:
            reason = str(translated(exc))
        return f"The {command} of {target} failed: {reason}"

    def _contents(self, full: Path) -> list[tuple[str, bytes]]:
        """(memory-relative path, bytes) of the regular files at or under `full`, before a delete or rename."""
        if full.is_file() and not full.is_symlink():
            return [(self._relative(full), full.read_bytes())]
        found = []
        for current, _folders, names in bounded_walk(full):  # check_folder_contents refuses a deeper folder
            for name in sorted(names):
                item = Path(current, name)
                if item.is_file() and not item.is_symlink():
                    found.append((self._relative(item), item.read_bytes()))
        return found

    def _check_folder(self, full: Path, path: str) -> None:
        """Over an fsmem memory, refuse to delete or move a folder holding anything but memory files."""
        if not self.is_fsmem:
            return
        try:
            check_folder_contents(self.memory_root, full, path)
        except InvalidArgument as exc:
            raise MemoryToolError(f"Path {shown(path)} {getattr(exc, 'reason', exc)}") from None

    def _require_writable(self, command: str) -> None:
        if self.read_only or (self.budget is not None and self.budget.read_only):
            raise MemoryToolError(
                f"The memory is read-only for agent {self.agent!r} ({CONFIG_FILE}); {command} was not performed."
            )

    def _text_argument(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise MemoryToolError(f"Invalid `{name}` parameter: it should be a string, got {type(value).__name__}")
        problem = text_problem(value)
        if problem and (self.is_fsmem or "NUL" not in problem):  # a plain folder takes NUL bytes, as the reference does
            raise MemoryToolError(f"Invalid `{name}` parameter: it {problem}; nothing was written")
        return value

    def _read_text(self, full: Path, path: str, *, not_regular: str | None = None) -> str:
        """The text of the file `full` (validated), opened below the real root through no link; `not_regular` is
        the message when it is no regular file (view words it as the reference does)."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            with self._beneath(path, undone="nothing was read") as root:
                target = beneath.place(root, self._relative(full), generated=True, create=False, file=False)
            try:
                fd = target.folder.open(target.name, flags)
            finally:
                target.folder.close()
        except FileNotFoundError:
            raise _Missing(
                f"The file {path} no longer exists (may have been deleted or renamed concurrently)."
            ) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise MemoryToolError(f"path {path!r} is a symlink") from None
            raise
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise MemoryToolError(not_regular or f"path {path!r} is not a regular file")
            data = handle.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise MemoryToolError(f"The file {path} is not a valid UTF-8 text file.") from None

    def _relative(self, full: Path) -> str:
        rel = os.path.relpath(full, os.path.realpath(self.memory_root))
        return "." if rel == "." else Path(rel).as_posix()

    @property
    def tokens(self) -> TokenCounter:
        """The token counter of the memory's tokenizer (fsmem.yaml's, or fsmem's default)."""
        if self._memory is not None:
            return self._memory.tokens
        if self._tokens is None:
            config = Config.load(self.memory_root) if self.is_fsmem else Config()
            self._tokens = TokenCounter(config.tokenizer)
        return self._tokens

    def _log(
        self,
        logged: retrieval_log.LoggedCall | None,
        command: str,
        *,
        answer: CommandAnswer | None = None,
        error: MemoryToolError | None = None,
    ) -> None:
        if logged is None:
            return
        text = answer.text if answer is not None else str(error)
        extra: dict[str, Any] = {"lines": answer.lines} if answer is not None and answer.lines is not None else {}
        logged.done(
            paths=answer.paths if answer is not None else [],
            rows=answer.rows if answer is not None else 0,
            tokens=self.tokens.count(text),
            truncated=answer.truncated if answer is not None else False,
            empty=isinstance(error, _Missing) or (answer is not None and command == "view" and answer.rows == 0),
            error=str(error) if error is not None else None,
            **extra,
        )


def _folder_links(root: Path) -> list[str]:
    """The symbolic links in the memory's visible folders that stand where a folder would: to a folder, inside
    the memory or out of it, or in a loop. None is followed (the walk enters real folders only); a link to a
    file is the walk's (a memory file) or stays (any other file)."""
    found = []
    for current, folders, files in bounded_walk(root):
        inside = os.path.relpath(current, root).replace(os.sep, "/")
        for name in [*folders, *files]:
            rel = name if inside == "." else f"{inside}/{name}"
            full = os.path.join(current, name)
            if is_visible_folder(rel) and os.path.islink(full) and (name in folders or _loops(full)):
                found.append(rel)
        folders[:] = [name for name in folders if is_visible_folder(name if inside == "." else f"{inside}/{name}")]
    return sorted(found)


def _loops(full: str) -> bool:
    try:
        os.stat(full)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _remove_empty_folders(root: Path) -> None:
    """Remove the visible folders left empty under `root` (deepest first); hidden ones are never touched."""
    for current, _folders, _files in reversed(list(bounded_walk(root))):  # deepest first
        if current == os.fspath(root):
            continue
        relative = os.path.relpath(current, root).replace(os.sep, "/")
        if is_visible_folder(relative):
            with contextlib.suppress(OSError, FsmemError):  # not empty, or swapped for a link: left alone
                beneath.remove(root, relative, generated=True)


def _echoed(text: str) -> str:
    """`text` as an error repeats it: whole up to MAX_ECHOED characters, as the reference does, else its start and
    its length (an agent's old_str of 100,000 characters came back whole in the error: an answer of 100 KB)."""
    if len(text) <= MAX_ECHOED:
        return text
    return f"{text[: MAX_ECHOED // 2]}… ({len(text):,} characters)"


def _occurrence_lines(content: str, needle: str, count: int, shown: int = MAX_LISTED) -> str:
    """The line of every position where `needle` starts, overlapping ones included, as the reference lists them;
    past the first `shown`, how many do not overlap (`count`, str.count's). The reference looked for every
    one, each line counted from the top: an empty or one-letter old_str in a 200 KB file took 11 s and filled
    1.4 MB, a 100,000-letter one in a 2 MB file of that letter (found at each of its 1.9 million starts) minutes."""
    lines: list[int] = []
    line, counted = 1, 0
    at = content.find(needle)
    while at != -1 and len(lines) <= shown:
        line += content.count("\n", counted, at)
        counted = at
        lines.append(line)
        at = content.find(needle, at + 1)
    if len(lines) <= shown:
        return ", ".join(map(str, lines))
    return f"{', '.join(map(str, lines[:shown]))} and more; {count:,} that do not overlap"


__all__ = ["MemoryTool", "MemoryToolError", "make_private_dirs", "format_size", "COMMANDS", "PREFIX"]


def _entry(command: str, changes: list[Change], message: str | None, paths: list[str] | None) -> tuple[str, list[str]]:
    """A history entry's message (`memory.COMMAND PATH` unless given) and paths (the changes' unless given)."""
    message = message or f"memory.{command} {changes[0].path if changes else ''}".rstrip()
    return message, [change.path for change in changes] if paths is None else paths


def _version_of(text: str) -> str:
    """The version of the text a view read: the first digits of the git blob id of its bytes."""
    return content_version(text.encode("utf-8", "surrogateescape"))


def _in_range(items: list[T], view_range: Sequence[int] | None) -> tuple[list[T], int]:
    """The items `view_range` names ([start, end], 1-based, an end of -1 the last, else a slice bound, as the
    reference reads it for lines) and the number of the first; all of them without a range of two."""
    if not view_range or len(view_range) != 2:
        return items, 1
    start = max(1, view_range[0]) - 1
    end = len(items) if view_range[1] == -1 else view_range[1]
    return items[start:end], start + 1
