"""Walking the memory: every memory file under a folder, by the containment rule, in a stable order.

The catalog, the search index, consolidation and watch all see the memory
through this walk, so what counts as a memory file (and what is skipped and
why) is decided in one place: `fsmem.store.paths` says which names are
memory; this module applies it to a folder tree without building a Path per
file (at 10k files, Path objects alone cost a tenth of a second).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISREG

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
    start = start or root
    note = skipped.append if skipped is not None else (lambda item: None)
    real_root = os.path.realpath(root)
    base_len = len(os.fspath(root).rstrip(os.sep)) + 1
    if not os.path.isdir(start):
        rel = relative(root, Path(start))
        if scope is not None and not scope.contains(rel):
            return
        found = _memory_file(os.fspath(start), rel, real_root, note, scope)
        if found is not None:
            yield rel, os.fspath(start), found
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
            note((paths.shown(folder[base_len:] or "."), f"folder skipped: {exc.strerror or exc}"))
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
                problem = paths.name_problem(name)
                if problem is not None:
                    note((paths.shown(rel), f"folder skipped: it {problem}"))
                elif depth + 1 >= paths.MAX_DEPTH:
                    note(
                        (
                            paths.shown(rel),
                            f"folder skipped: its files would be more than {paths.MAX_DEPTH} folders deep",
                        )
                    )
                else:
                    subfolders.append((item.path, depth + 1))
                continue
            if not name.lower().endswith(MEMORY_SUFFIXES) or (scope is not None and not scope.contains(rel)):
                continue
            if item.is_symlink():
                stat = _memory_file(item.path, rel, real_root, note, scope)
            elif not paths.is_memory_name(name):
                note((paths.shown(rel), f"skipped: the name {paths.name_problem(name)}"))
                continue
            else:
                stat = _regular_stat(item, rel, note)
            if stat is not None:
                yield rel, item.path, stat
        stack.extend(reversed(subfolders))


def _readable(stat: os.stat_result) -> bool:
    """Whether this process may read the file, from the mode bits alone (no extra system call)."""
    uid, groups = _identity()
    if uid == 0:
        return True
    if stat.st_uid == uid:
        return bool(stat.st_mode & 0o400)
    if stat.st_gid in groups:
        return bool(stat.st_mode & 0o040)
    return bool(stat.st_mode & 0o004)


@functools.cache
def _identity() -> tuple[int, frozenset[int]]:
    return os.geteuid(), frozenset([os.getegid(), *os.getgroups()])


def _regular_stat(item: os.DirEntry, rel: str, note) -> os.stat_result | None:
    try:
        stat = item.stat()
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):
            note((paths.shown(rel), f"skipped: {_reason(exc)}"))
        return None
    return _usable(stat, rel, note)


def _memory_file(full: str, rel: str, real_root: str, note, scope: Scope | None = None) -> os.stat_result | None:
    """The stat of `full` if it is a memory file by the whole rule (its real target included), else None.

    A link whose target lies outside `scope` is left out without a word (the note would name the target).
    """
    if not paths.is_memory_path(rel):
        if rel.lower().endswith(MEMORY_SUFFIXES):
            note((paths.shown(rel), "skipped: not a memory path (hidden, or a name with a control character)"))
        return None
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root + os.sep):
        note((paths.shown(rel), "skipped: a symbolic link that leads outside the memory root"))
        return None
    inside = real[len(real_root) + 1 :].replace(os.sep, "/")
    if scope is not None and not scope.contains(inside):
        return None
    if not paths.is_memory_path(inside):
        note((paths.shown(rel), "skipped: a symbolic link to a path that is not a memory file"))
        return None
    try:
        stat = os.stat(full)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError) or os.path.islink(full):
            note((paths.shown(rel), f"skipped: {_reason(exc)}"))
        return None
    return _usable(stat, rel, note)


def _usable(stat: os.stat_result, rel: str, note) -> os.stat_result | None:
    """`stat` if it is of a regular file this process may read; else None, and the reason noted."""
    if not S_ISREG(stat.st_mode):
        note((paths.shown(rel), "skipped: not a regular file (a FIFO, socket or device)"))
        return None
    if not _readable(stat):
        note((paths.shown(rel), "skipped: permission denied"))
        return None
    return stat


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    if isinstance(exc, FileNotFoundError):
        return "a dangling symbolic link"
    return str(exc.strerror or exc).lower()
