"""Walking the memory: every memory file under a folder, by the containment rule, in a stable order.

The catalog, the search index, consolidation and watch all see the memory
through this walk, so what counts as a memory file (and what is skipped and
why) is decided in one place: `fsmem.store.paths` says which names are
memory; this module applies it to a folder tree without building a Path per
file (Path objects alone were a large part of a walk's time).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISDIR, S_ISLNK, S_ISREG

from fsmem.store import paths
from fsmem.store.paths import MEMORY_SUFFIXES, relative
from fsmem.store.scope import Scope


def walk(root: Path, start: Path | None = None) -> Iterator[Path]:
    """Memory files under `start` (default: the root), in a stable sorted order.

    Hidden files and folders (`.fsmem/`, `.git/`, editor swap files) are skipped;
    symlinked folders are not followed, and a symlinked file is listed only when
    its real target is itself a memory file inside the root (`walk_stats`).
    """
    for _rel, full, _stat in walk_stats(root, start):
        yield Path(full)


def walk_stats(
    root: Path,
    start: Path | None = None,
    skipped: list[tuple[str, str]] | None = None,
    *,
    scope: Scope | None = None,
) -> Iterator[tuple[str, str, os.stat_result]]:
    """(relative path, absolute path, stat) of every memory file, in `walk` order.

    The containment rule (`paths.is_memory_path`) on plain strings: at 10k
    files, Path objects alone cost a tenth of a second. Only regular files the
    process may read are yielded; a memory-named entry that cannot be (a link
    that leads out of the memory or into a hidden folder, a loop, a FIFO, an
    unreadable file or folder, a name with a control character) is left out
    and, when `skipped` is given, appended to it as (path shown, reason).

    With a `scope`, only what lies in it is walked, yielded or reported: folders
    that cannot lead into it are not entered, and a link counts only when its
    real target is in scope too.
    """
    for rel, full, stat, _link in walk_entries(root, start, skipped, scope=scope):
        yield rel, full, stat


def walk_entries(
    root: Path,
    start: Path | None = None,
    skipped: list[tuple[str, str]] | None = None,
    *,
    scope: Scope | None = None,
    names_only: bool = False,
    targets: dict[str, str] | None = None,
) -> Iterator[tuple[str, str, os.stat_result, str | None]]:
    """`walk_stats` with a fourth item: a symbolic link's real target relative to the root (None for a file).

    `names_only` applies the scope to names alone (a link is yielded whatever its target): what the
    metadata cache stores, so that one table serves every scope, which then checks targets itself
    (`targets` gets the target of each link reported as skipped for what it leads to).
    """
    start = start or root
    note = _notes(skipped)
    real_root = os.path.realpath(root)
    base_len = len(os.fspath(root).rstrip(os.sep)) + 1
    in_scope = None if names_only else scope
    if not os.path.isdir(start):
        rel = relative(root, Path(start))
        if scope is not None and not scope.contains(rel):
            return
        found = _memory_file(os.fspath(start), rel, real_root, note, in_scope, targets)
        if found is not None:
            yield rel, os.fspath(start), found[0], found[1]
        return
    top = relative(root, Path(start))
    stack = [(os.fspath(start), 0 if top == "." else top.count("/") + 1)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            note(folder[base_len:] or ".", f"folder skipped: {exc.strerror or exc}")
            continue
        subfolders = []
        for item in items:
            name = item.name
            if name.startswith("."):
                continue
            rel = item.path[base_len:]
            if os.sep != "/":
                rel = rel.replace(os.sep, "/")
            if scope is not None and not scope.reaches(rel):
                continue
            if item.is_dir(follow_symlinks=False):
                problem = folder_problem(name, depth + 1)
                if problem is not None:
                    note(rel, problem)
                else:
                    subfolders.append((item.path, depth + 1))
                continue
            if not name.lower().endswith(MEMORY_SUFFIXES) or (scope is not None and not scope.contains(rel)):
                continue
            if item.is_symlink():
                found = _memory_file(item.path, rel, real_root, note, in_scope, targets)
                if found is not None:
                    yield rel, item.path, found[0], found[1]
                continue
            if not paths.is_memory_name(name):
                note(rel, f"skipped: the name {paths.name_problem(name)}")
                continue
            stat = _regular_stat(item, rel, note)
            if stat is not None:
                yield rel, item.path, stat, None
        stack.extend(reversed(subfolders))


def folder_problem(name: str, depth: int) -> str | None:
    """Why the walk does not enter a folder `name` that is `depth` folders below the root, or None."""
    problem = paths.name_problem(name)
    if problem is not None:
        return f"folder skipped: it {problem}"
    if depth >= paths.MAX_DEPTH:
        return f"folder skipped: its files would be more than {paths.MAX_DEPTH} folders deep"
    return None


# What `probe` found at a path: a memory file (its stat and link target), a folder, or nothing.
FOLDER = "folder"


def probe(
    root: Path, rel: str, skipped: list[tuple[str, str]] | None = None, targets: dict[str, str] | None = None
) -> tuple[os.stat_result, str | None] | str | None:
    """What the walk would make of the one entry `rel` (in a folder it enters): the change feed's walk of one path.

    A memory file gives (stat, link target or None), a folder gives FOLDER, anything else None (with the
    reason appended to `skipped` when the walk would report one).
    """
    note = _notes(skipped)
    name = rel.rsplit("/", 1)[-1]
    if name.startswith("."):
        return None
    full = os.path.join(root, rel)
    try:
        found = os.lstat(full)
    except OSError:
        return None
    if S_ISDIR(found.st_mode):
        problem = folder_problem(name, rel.count("/") + 1)
        if problem is not None:
            note(rel, problem)
            return None
        return FOLDER
    if not name.lower().endswith(MEMORY_SUFFIXES):
        return None
    if S_ISLNK(found.st_mode):
        return _memory_file(full, rel, os.path.realpath(root), note, None, targets)
    if not paths.is_memory_name(name):
        note(rel, f"skipped: the name {paths.name_problem(name)}")
        return None
    stat = _usable(found, rel, note)
    return (stat, None) if stat is not None else None


def link_target(root: Path, rel: str) -> str | None:
    """Where the memory file `rel` really is, relative to the root, when that is elsewhere (a link), else None."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    if not real.startswith(real_root + os.sep):
        return None
    inside = real[len(real_root) + 1 :].replace(os.sep, "/")
    return inside if inside != rel else None


class Skipped(list):
    """A `skipped` list that also keeps each entry's path as the walk had it (`rels`), for the cache's keys."""

    def __init__(self) -> None:
        super().__init__()
        self.rels: list[str] = []

    def add(self, rel: str, reason: str) -> None:
        self.append((paths.shown(rel), reason))
        self.rels.append(rel)


def _notes(skipped: list[tuple[str, str]] | None):
    """The walk's `note(rel, reason)`: (path shown, reason) appended to `skipped`, when given."""
    if skipped is None:
        return lambda rel, reason: None
    if isinstance(skipped, Skipped):
        return skipped.add
    return lambda rel, reason: skipped.append((paths.shown(rel), reason))


# -- walk-order keys: the metadata cache sorts and ranges on these ----------------------------------
# In a folder the walk yields its files (by name), then each subfolder's files (by name), depth first.
# The key of a path sorts the same way as text: each folder is FOLDER_MARK name END, the file FILE_MARK
# name. Names hold no control characters (the walk skips those), so END sorts below every name character.
_END, _FILE_MARK, _FOLDER_MARK, _AFTER = "\x01", "\x02", "\x03", "\x04"


def walk_key(rel: str) -> str:
    """The sort key of a memory path in walk order."""
    folder, _, name = rel.rpartition("/")
    return (folder_key(folder) if folder else "") + _FILE_MARK + name


def folder_key(rel: str) -> str:
    """The key every path under folder `rel` starts with ("" for the root)."""
    if rel in ("", "."):
        return ""
    return "".join(_FOLDER_MARK + part + _END for part in rel.split("/"))


def folder_range(rel: str) -> tuple[str, str]:
    """[low, high) of the keys of every path under folder `rel` (the root: every key)."""
    low = folder_key(rel)
    return low, low + _AFTER


def path_of(key: str) -> str:
    """The memory path a walk key stands for."""
    return key.replace(_END, "/").replace(_FILE_MARK, "").replace(_FOLDER_MARK, "")


def skipped_key(rel: str, reason: str) -> str:
    """The walk-order key of a skipped entry (its last name may hold anything: it is shown escaped)."""
    if rel in ("", "."):
        return ""
    parent, _, name = rel.rpartition("/")
    safe = name if paths.name_problem(name) is None else paths.shown(name)
    head = folder_key(parent) if parent else ""
    if reason.startswith("folder skipped"):
        return head + _FOLDER_MARK + safe + _END
    return head + _FILE_MARK + safe


def _readable(stat: os.stat_result) -> bool:
    """Whether this process may read the file, from the mode bits alone (no extra system call).

    Where there are no POSIX users (Windows: every file's mode shows it readable), the open that follows decides.
    """
    identity = _identity()
    if identity is None:
        return True
    uid, groups = identity
    if uid == 0:
        return True
    if stat.st_uid == uid:
        return bool(stat.st_mode & 0o400)
    if stat.st_gid in groups:
        return bool(stat.st_mode & 0o040)
    return bool(stat.st_mode & 0o004)


@functools.cache
def _identity() -> tuple[int, frozenset[int]] | None:
    if not hasattr(os, "geteuid"):
        return None
    return os.geteuid(), frozenset([os.getegid(), *os.getgroups()])


def _regular_stat(item: os.DirEntry, rel: str, note) -> os.stat_result | None:
    try:
        stat = item.stat()
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            note(rel, f"skipped: {_reason(exc)}")
        return None
    return _usable(stat, rel, note)


def _memory_file(
    full: str, rel: str, real_root: str, note, scope: Scope | None = None, targets: dict[str, str] | None = None
) -> tuple[os.stat_result, str | None] | None:
    """(stat, link target) of `full` if it is a memory file by the whole rule (its real target included), else None.

    The target is the real path relative to the root when it differs from `rel` (a link), else None. A link
    whose target lies outside `scope` is left out without a word (the note would name the target); a link
    reported for what its target is has that target recorded in `targets` (rel -> target), so that a
    scope can drop the report later.
    """
    if not paths.is_memory_path(rel):
        if rel.lower().endswith(MEMORY_SUFFIXES):
            note(rel, "skipped: not a memory path (hidden, or a name with a control character)")
        return None
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root + os.sep):
        note(rel, "skipped: a symbolic link that leads outside the memory root")
        return None
    inside = real[len(real_root) + 1 :].replace(os.sep, "/")
    if scope is not None and not scope.contains(inside):
        return None
    if not paths.is_memory_path(inside):
        note(rel, "skipped: a symbolic link to a path that is not a memory file")
        if targets is not None:
            targets[rel] = inside
        return None
    try:
        stat = os.stat(full)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError) or os.path.islink(full):
            note(rel, f"skipped: {_reason(exc)}")
        return None
    usable = _usable(stat, rel, note)
    return (usable, inside if inside != rel else None) if usable is not None else None


def _usable(stat: os.stat_result, rel: str, note) -> os.stat_result | None:
    """`stat` if it is of a regular file this process may read; else None, and the reason noted."""
    if not S_ISREG(stat.st_mode):
        note(rel, "skipped: not a regular file (a FIFO, socket or device)")
        return None
    if not _readable(stat):
        note(rel, "skipped: permission denied")
        return None
    return stat


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    if isinstance(exc, FileNotFoundError):
        return "a dangling symbolic link"
    return str(exc.strerror or exc).lower()
