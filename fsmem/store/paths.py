"""THE containment rule: what a memory path is, checked in one place for every face.

Agents and commands that take a path reach only memory files: `*.md` (and
`*.markdown`) outside hidden folders, inside the root, and the folders that
hold them. Never `fsmem.yaml`, `.git/`, `.fsmem/` or any other path with a
component that starts with '.', in any letter case. A symbolic link is
followed to its real target, which must itself pass the same rule. Names hold
no control characters and are valid UTF-8; depth and length are checked
before the file system sees the path; and only regular files are opened.

This module is long because it is the one rule: split, a reader would have to hold several modules to
know what a path may be. Two halves, so that walkers stay fast: `is_memory_path` is the lexical
predicate (strings only) that the catalog walk, grep and watch share, and
`resolve` adds the physical checks (links, file types) for one given path.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

from fsmem import names
from fsmem.arguments import text_problem
from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.errors import ConfigError, InvalidArgument, PathEscape, quoted
from fsmem.format.portable import portable_problem, twin_key, twin_problem

MEMORY_SUFFIXES = (".md", ".markdown")
# The memory's own conventions file (from the template), for humans: listed and readable,
# but not grepped or ranked as memory unless named.
ROOT_README = "README.md"
MAX_DEPTH = names.MAX_DEPTH
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RESERVED = (STATE_DIR, CONFIG_FILE)


# -- text -------------------------------------------------------------------------------
def check_text(value: str, what: str) -> str:
    """`value` if it can be stored as UTF-8 text; InvalidArgument naming `what` otherwise."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, not {type(value).__name__}")
    problem = text_problem(value)
    if problem:
        raise InvalidArgument(f"{what} {problem}; nothing was stored")
    return value


def shown(text: str) -> str:
    """`text` as it may be printed on one line: quoted and escaped when it holds control characters or non-text."""
    return text if _CONTROL.search(text) is None and text_problem(text) is None else ascii(text)


# -- the lexical rule --------------------------------------------------------------------
def name_problem(name: str) -> str | None:
    """Why one component cannot be part of a memory path, or None."""
    if name.startswith("."):
        problem = stored_name_problem(name, length=False)
        if problem:
            return problem
        if name.lower() == STATE_DIR:
            return f"is inside {STATE_DIR}/, which holds machine state, not memory"
        return f"is hidden ({shown(name)} starts with '.'); hidden files and folders such as .git/ are not memory"
    if "\\" in name:  # a path given to fsmem reads it as a folder separator: this name could never be reached
        return "holds '\\', which fsmem reads as a folder separator and Windows cannot hold in a name; rename it outside fsmem"
    return stored_name_problem(name)


def stored_name_problem(name: str, *, length: bool = True) -> str | None:
    """Why a name cannot be stored at all, hidden or not: a control character, not UTF-8, longer than
    MAX_NAME_BYTES (with `length`). What `fsmem sync` refuses in a name a remote sends, too."""
    plain = name.isascii() and name.isprintable()  # the common case, checked at C speed: no control, valid text
    if not plain and _CONTROL.search(name):
        return "holds a control character (such as a newline or a tab)"
    if not plain and text_problem(name):
        return "is not valid text (not UTF-8)"
    if length and (len(name) > MAX_NAME_BYTES or (not plain and len(name.encode("utf-8")) > MAX_NAME_BYTES)):
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    return None


def is_memory_name(name: str) -> bool:
    """True for a file name that may be a memory file: `*.md` or `*.markdown`, not hidden, plain text."""
    return name.lower().endswith(MEMORY_SUFFIXES) and name_problem(name) is None


def is_memory_path(rel: str) -> bool:
    """The lexical rule for a memory-relative POSIX path (no `..`, no file system): a memory file.

    Shared by the catalog walk, grep's output filter and watch; `resolve` adds
    the physical checks for a path an agent or user gives.
    """
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH or len(rel) > MAX_PATH_BYTES:
        return False
    if rel.isascii() and rel.isprintable() and not rel.startswith(".") and "/." not in rel and "\\" not in rel:
        # the common case, at C speed: no control character, valid text, nothing hidden (what name_problem checks)
        return rel.lower().endswith(MEMORY_SUFFIXES) and max(map(len, parts)) <= MAX_NAME_BYTES
    return is_memory_name(parts[-1]) and all(name_problem(part) is None for part in parts[:-1])


_PRINTABLE_LINES = bytes(range(0x20, 0x7F)) + b"\n"  # printable ASCII, and the newline between paths


def all_memory_paths(rels: list[str]) -> bool:
    """True when `is_memory_path` holds for every one of `rels` by its common case, found over all of them at
    once with string methods (grep filters the tens of thousands of files a common word is in: one call
    each cost more than rg's pass); False says only that they must be looked at one by one."""
    if not rels:
        return True
    lines = "\n".join(rels)
    longest = max(map(len, rels))
    if longest > MAX_NAME_BYTES or not lines.isascii() or lines.count("\n") != len(rels) - 1:
        return False  # a long name, or one to be read as text; a path with a newline of its own
    lower = lines.lower()
    return (
        not lines.encode("ascii").translate(None, _PRINTABLE_LINES)  # no control character
        and not lines.startswith(".")
        and "\n." not in lines
        and "/." not in lines
        and "\\" not in lines
        and (longest < MAX_DEPTH or max(map(str.count, rels, itertools.repeat("/"))) < MAX_DEPTH)
        and lower.count(".md\n") + lower.count(".markdown\n") == len(rels) - 1  # each ends in a suffix
        and lower.endswith(MEMORY_SUFFIXES)
    )


def is_visible_folder(rel: str) -> bool:
    """True for a memory-relative folder path that may hold memory files ('.' is the root)."""
    if rel in ("", "."):
        return True
    parts = rel.split("/")
    return len(parts) <= MAX_DEPTH and all(name_problem(part) is None for part in parts)


def _refused(cls: type[Exception], raw: str, reason: str) -> Exception:
    error = cls(f"path {quoted(raw)} {reason}")
    error.reason = reason  # type: ignore[attr-defined]  # for faces that phrase the path their own way
    return error


def size_problem(raw: str) -> str | None:
    """Why a path is too long or too deep to hand to the file system, or None (checked before any system call)."""
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    given = [part for part in raw.replace("\\", "/").split("/") if part not in ("", ".")]
    if len(given) > MAX_DEPTH:
        return f"is deeper than {MAX_DEPTH} folders"
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in given):
        return f"has a name longer than {MAX_NAME_BYTES} bytes"
    return None


def lexical_parts(raw: str) -> list[str]:
    """The components of a user-given path after the lexical checks, with `.` and `..` folded.

    Refuses (before any file system call): non-text, control characters, more
    than MAX_DEPTH components or MAX_PATH_BYTES bytes, absolute paths, `..`
    above the root, and hidden components (`.git`, `.fsmem`, any '.' name).
    """
    if "\x00" in raw:
        raise _refused(InvalidArgument, raw, "contains a NUL byte")
    if text_problem(raw):
        raise _refused(InvalidArgument, raw, "is not valid text (a lone surrogate, or bytes that are not UTF-8)")
    if _CONTROL.search(raw):
        raise _refused(InvalidArgument, raw, "holds a control character (such as a newline or a tab)")
    too_big = size_problem(raw)
    if too_big:
        raise _refused(InvalidArgument, raw, too_big)
    text = raw.replace("\\", "/").strip()
    # `C:/x` or `C:` anywhere; on Windows also `C:x` (relative to that drive's own folder), and any ':' (a stream)
    drive = len(text) > 1 and text[1] == ":" and (os.name == "nt" or len(text) == 2 or text[2] == "/")
    if text.startswith("/") or drive or (os.name == "nt" and ":" in text):
        raise _refused(
            PathEscape, raw, "is absolute; give a path relative to the memory root, such as 'topics/billing.md'"
        )
    given = [part for part in text.split("/") if part not in ("", ".")]
    parts: list[str] = []
    for part in given:
        if part == "..":
            if not parts:
                raise _refused(PathEscape, raw, "escapes the memory root")
            parts.pop()
            continue
        problem = name_problem(part)
        if problem:
            raise _refused(PathEscape if part.startswith(".") else InvalidArgument, raw, problem)
        parts.append(part)
    if parts and parts[0].lower() == CONFIG_FILE:
        raise _refused(PathEscape, raw, f"is fsmem's configuration ({CONFIG_FILE}), not a memory file")
    return parts


# -- the physical rule -------------------------------------------------------------------
class ScopeCheck(Protocol):
    """What `resolve` asks of a scope (`fsmem.store.scope.Scope`): refuse a memory-relative path outside it."""

    def check(self, rel: str, raw: str, want: str = "file") -> None: ...


def resolve(
    root: Path, user_path: str | os.PathLike[str] | None, *, want: str = "any", scope: ScopeCheck | None = None
) -> Path:
    """The absolute path that `user_path` names inside `root`, or a PathEscape / InvalidArgument.

    `want` is "file" (a memory file: read, write, edit) or "any" (a memory
    file or a folder: ls, grep, rm, mv). The check is lexical first
    (`lexical_parts`), then physical: the real path, with every symbolic link
    followed, must lie inside the real root and pass the lexical rule itself;
    an existing file must be a regular memory file. The path returned is the
    lexical one (`root/topics/x.md`, even when that is a link).

    With a `scope`, the path and its real target must both lie in it; the
    refusal comes before the file system is asked whether anything is there.
    """
    raw = "" if user_path is None else os.fspath(user_path)
    if not isinstance(raw, str):
        raise InvalidArgument(f"path {raw!r} must be text, not bytes")
    parts = lexical_parts(raw)
    if scope is not None:
        scope.check("/".join(parts) or ".", raw, want)
    full = os.path.join(root, *parts) if parts else os.path.normpath(root)
    name = parts[-1] if parts else ""
    if want == "file" and not parts:
        raise _refused(InvalidArgument, raw, "is the memory root, not a file; give a path such as 'topics/billing.md'")
    _check_physical(root, full, raw, want, name, scope)
    return Path(full)


def _check_physical(root: Path, full: str, raw: str, want: str, name: str, scope: ScopeCheck | None = None) -> None:
    real_root = os.path.realpath(root)
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise _refused(PathEscape, raw, "leads outside the memory root through a symbolic link")
    inside = os.path.relpath(real, real_root).replace(os.sep, "/")
    if scope is not None:
        scope.check(inside, raw, want)  # where links lead, before any message could name it
    if not is_visible_folder(inside.rsplit("/", 1)[0] if "/" in inside else "."):
        raise _link_refusal(raw, inside)
    try:
        info = os.stat(full)
    except FileNotFoundError:
        if os.path.islink(full):
            raise _refused(PathEscape, raw, "is a dangling symbolic link") from None
        check_portable(real_root, inside, raw)
        _check_new(raw, want, name, inside)
        return
    except NotADirectoryError:
        raise _refused(InvalidArgument, raw, "goes through a file as if it were a folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(InvalidArgument, raw, "is a symbolic link loop") from None
        raise _refused(InvalidArgument, raw, f"cannot be looked up: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        if want == "file":
            raise _refused(InvalidArgument, raw, "is a folder; give the path of a file in it (ls lists them)")
        if not is_visible_folder(inside):
            raise _link_refusal(raw, inside)
        return
    if not stat.S_ISREG(info.st_mode):
        raise _refused(InvalidArgument, raw, "is not a regular file (a FIFO, socket or device); fsmem opens only files")
    if not is_memory_name(name):
        raise _refused(InvalidArgument, raw, "is not a memory file; memory files end in .md")
    if not is_memory_path(inside):
        raise _link_refusal(raw, inside)


def case_twin(folder: str | os.PathLike[str], name: str) -> str | None:
    """Another entry of `folder` whose name differs from `name` only by letter case or Unicode normalisation, or None.

    A case-insensitive file system (macOS, Windows) holds one of the two: the other is lost on checkout.
    """
    folded = twin_key(name)
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name != name and twin_key(entry.name) == folded:
                    return entry.name
    except OSError:
        return None
    return None


def check_portable(real_root: str, inside: str, raw: str) -> None:
    """Refuse a path that does not exist yet if a name it would create is one Windows or macOS cannot hold.

    Only the names it would create are checked (from the first that does not exist on): what is already
    stored stays reachable, so that `fsmem mv` can rename it.
    """
    folder: str | None = real_root  # the existing folder that the next name goes into; None once under a new one
    parts = inside.split("/")
    for number, part in enumerate(parts):
        if folder is not None:
            here = os.path.join(folder, part)
            if os.path.lexists(here):
                folder = here
                continue
        problem = portable_problem(part)
        if problem is None and folder is not None:
            twin = case_twin(folder, part)
            if twin is not None:
                where = shown("/".join([*parts[:number], twin]))
                problem = twin_problem(part, twin, where, "copy of this memory") + "; use that name, or another"
        if problem is not None:
            where = f"has a folder {quoted(part)} that " if number < len(parts) - 1 else ""
            error = _refused(InvalidArgument, raw, where + problem)
            error.portable = True  # type: ignore[attr-defined]  # a name, not a place: faces need not add where to go
            raise error
        folder = None


def _check_new(raw: str, want: str, name: str, inside: str) -> None:
    """A path that does not exist yet: a file to create must be named as a memory file, there and at its real place."""
    if want != "file":
        return
    if not is_memory_name(name):
        raise _refused(InvalidArgument, raw, "is not a memory file; memory files end in .md")
    if not is_memory_path(inside):
        raise _link_refusal(raw, inside)


def _link_refusal(raw: str, inside: str) -> Exception:
    first = inside.split("/")[0]
    if first.lower() == STATE_DIR:
        return _refused(
            PathEscape,
            raw,
            f"leads into {STATE_DIR}/ through a symbolic link; that folder holds machine state, not memory",
        )
    return _refused(PathEscape, raw, f"leads to {shown(inside)} through a symbolic link, which is not a memory path")


def _regular_fd(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """A descriptor of `path` opened for reading only if it is a regular file, and its stat; the caller closes it.

    O_NONBLOCK makes the open of a FIFO return at once; fstat then refuses it
    (InvalidArgument) before anything is read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise InvalidArgument(f"{shown(os.fspath(path))} is not a regular file (a FIFO, socket or device)")
        return fd, found
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file for reading only if it is a regular file: a FIFO or device named `*.md` never blocks."""
    fd, _found = _regular_fd(path)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of a regular file (at most `limit` of them), through `open_regular`."""
    with open_regular(path) as handle:
        return handle.read(limit)


def read_stamped(path: str, limit: int) -> tuple[os.stat_result, bytes | None]:
    """The stat of a regular file as opened (`_regular_fd`, as `open_regular`) and its bytes, or None for them when
    the file is larger than `limit`: the stat is of the very file read, taken before the read, with one open and no
    buffered reader (a cold build reads every file: 10k files, a stat and a file object each spared)."""
    fd, found = _regular_fd(path)
    try:
        if found.st_size > limit:
            return found, None
        data = os.read(fd, found.st_size + 1)
        if len(data) != found.st_size:  # it grew or shrank since, or the read fell short: read on to the end
            parts = [data]
            while part := os.read(fd, 1 << 16):
                parts.append(part)
            data = b"".join(parts)
        return found, data
    finally:
        os.close(fd)


def check_folder_contents(root: Path, folder: Path, raw: str) -> None:
    """Refuse to remove or move a folder that holds anything but memory files and visible folders.

    Removing or moving such a folder would reach files that are not memory
    (a nested `.git/`, a private `.env`, a link that leads elsewhere).
    """
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    base = len(os.fspath(folder).rstrip(os.sep)) + 1
    for current, folders, files in os.walk(folder):
        if current[base:].count(os.sep) >= MAX_DEPTH:  # os.walk recurses once a folder: 2,000 nested ones ended
            raise _refused(  # the removal in a RecursionError; no memory file lies this deep
                InvalidArgument,
                raw,
                f"holds folders more than {MAX_DEPTH} deep, which hold no memory file; fsmem moves and removes"
                " only folders of memory files (a human can move or remove it by hand)",
            )
        for name in folders + files:
            full = os.path.join(current, name)
            inner = full[base:].replace(os.sep, "/")
            plain_folder = name in folders and not os.path.islink(full)
            plain_file = name in files and not os.path.islink(full) and is_memory_name(name)
            if name_problem(name) is not None or not (plain_folder or plain_file):
                raise _refused(
                    InvalidArgument,
                    raw,
                    f"holds {shown(inner)}, which is not a memory file; fsmem moves and removes only folders "
                    "of memory files (a human can move or remove it by hand)",
                )


# -- configuration paths -------------------------------------------------------------------
def config_dir(value: object, setting: str, root: Path | None = None) -> str:
    """A folder named in fsmem.yaml (such as `consolidate.archive_dir`): relative, inside the root, not hidden.

    Lexical without `root`; with it, the folder's real path (links followed)
    must also stay inside the root and visible. ConfigError otherwise.
    """
    if not isinstance(value, str) or not value.strip().strip("/"):
        raise ConfigError(f"{CONFIG_FILE}: {setting} must be a folder inside the memory, such as 'archive/sessions'")
    try:
        parts = lexical_parts(value.strip().rstrip("/"))
        if not parts:
            raise InvalidArgument("is the memory root itself")
        if root is not None:
            _check_physical(root, os.path.join(root, *parts), value, "any", parts[-1])
    except (PathEscape, InvalidArgument) as exc:
        reason = getattr(exc, "reason", str(exc))
        raise ConfigError(
            f"{CONFIG_FILE}: {setting} {value!r} {reason}; it must be a folder inside the memory that is not hidden"
        ) from None
    return "/".join(parts)


def relative(root: Path, path: Path) -> str:
    """The memory-relative POSIX form of an absolute path, as shown to users and agents."""
    rel = os.path.relpath(path, root)
    return "." if rel == "." else PurePosixPath(*Path(rel).parts).as_posix()


def bounded_walk(folder: str | os.PathLike[str]) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(folder)` top down, no deeper than MAX_DEPTH folders below `folder` (no memory file lies deeper):
    os.walk recurses once a folder, and 2,042 nested folders ended `fsmem consolidate` in a RecursionError."""
    base = os.fspath(folder).rstrip(os.sep).count(os.sep)
    for current, folders, files in os.walk(folder):
        if current.count(os.sep) - base >= MAX_DEPTH:
            folders[:] = []  # what the caller keeps of them it takes from this list: none
        yield current, folders, files


def is_hidden_state(rel: str) -> bool:
    return rel == STATE_DIR or rel.startswith(STATE_DIR + "/")


__all__ = [
    "MAX_DEPTH",
    "bounded_walk",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MEMORY_SUFFIXES",
    "ROOT_README",
    "STATE_DIR",
    "ScopeCheck",
    "case_twin",
    "check_folder_contents",
    "check_portable",
    "check_text",
    "config_dir",
    "is_memory_name",
    "is_memory_path",
    "is_visible_folder",
    "lexical_parts",
    "name_problem",
    "open_regular",
    "quoted",
    "read_regular",
    "relative",
    "resolve",
    "shown",
    "size_problem",
    "stored_name_problem",
    "text_problem",
]
