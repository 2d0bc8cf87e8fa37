"""Removal and moves: a file or an empty folder removed, a file or folder moved, never over anything.

Like every write (`fsmem.store.writing`), each runs under the memory's write lock, below the memory root one
component at a time (`fsmem.store.beneath`), and a link is removed or moved as itself, never its target. With
`record`, the result lists the bytes each file had and has (`Change`), for history.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsmem.errors import AlreadyExists, ChangedOnDisk, InvalidArgument, NotFound
from fsmem.store import beneath
from fsmem.store.paths import read_regular, relative
from fsmem.store.writing import Ahead, Change, WriteResult, entered


def remove(root: Path, path: Path, *, record: bool = False, ahead: Ahead | None = None) -> WriteResult:
    """Remove a file or an empty folder; with `record`, the result lists the removed bytes (for history)."""
    rel = relative(root, path)
    if path == root:
        raise InvalidArgument("refusing to remove the memory root")
    if path.is_dir() and not path.is_symlink():
        try:
            beneath.remove(root, rel)
        except OSError:
            raise InvalidArgument(f"{rel} is a folder that is not empty; remove its files first") from None
    elif path.exists() or path.is_symlink():
        link = path.is_symlink()  # the link itself goes, as `rm` removes it, never its target
        if record and link:
            before: bytes | None = os.fsencode(os.readlink(path))
        else:
            before = read_regular(path) if record and path.is_file() else None
        real = beneath.landing(root, rel, follow=False)  # through an in-memory folder link: where it really is
        result = WriteResult("rm", real, changes=[Change(real, before, None, link)] if before is not None else [])
        with entered(ahead, result):
            if link or not path.is_file():
                beneath.remove(root, rel)
            elif not beneath.remove_if(root, rel, before):  # its history holds `before`: nothing else may go; a
                # save under way in place is kept either way
                raise ChangedOnDisk(
                    f"{rel} was changed on disk while it was being removed (saved by an editor or another "
                    f"program); it was left as saved (as {rel}{beneath.KEPT_SUFFIX} if saved twice). "
                    "Read it again, then retry"
                )
        return result
    else:
        raise NotFound(f"{rel} does not exist")
    return WriteResult("rm", rel)


def move(root: Path, source: Path, target: Path, *, record: bool = False, ahead: Ahead | None = None) -> WriteResult:
    """Move a file or folder, never over anything; with `record`, the result lists the files moved (for history)."""
    src_rel, dst_rel = relative(root, source), relative(root, target)
    if source == root or target == root:
        raise InvalidArgument("refusing to move the memory root")
    if not source.exists() and not source.is_symlink():
        raise NotFound(f"{src_rel} does not exist")
    if target.exists() or target.is_symlink():
        raise AlreadyExists(f"{dst_rel} already exists; remove it first or choose another name")
    # through in-memory folder links: where the files really are, and where they land
    src_real, dst_real = beneath.landing(root, src_rel, follow=False), beneath.landing(root, dst_rel, follow=False)
    if into_itself(src_real, dst_real):
        raise InvalidArgument(f"{src_rel} cannot move into itself ({dst_rel} lies inside it); nothing was moved")
    moved = _files_under(source) if record else []
    changes: list[Change] = []
    for inner, link in moved:
        full = source / inner if inner else source
        data = os.fsencode(os.readlink(full)) if link else read_regular(full)
        old_rel = f"{src_real}/{inner}" if inner else src_real
        new_rel = f"{dst_real}/{inner}" if inner else dst_real
        changes += [Change(old_rel, data, None, link), Change(new_rel, None, data, link)]
    result = WriteResult("mv", dst_rel, changes=changes)
    with entered(ahead, result):
        try:
            beneath.rename(root, src_rel, dst_rel)
        except FileExistsError:
            raise AlreadyExists(f"{dst_rel} already exists; remove it first or choose another name") from None
    return result


def into_itself(source: str, target: str) -> bool:
    """Whether memory-relative `target` lies inside the folder `source`: the system refuses that move only after
    the folders that hold `target` were made, with a bare "invalid argument"."""
    return target.startswith(source.rstrip("/") + "/")


def _files_under(source: Path) -> list[tuple[str, bool]]:
    """The files and links a move takes along, each with whether it is a link (moved as itself, as `mv` does):
    '' for the file or link itself, else their paths inside the folder (a link to a folder is not entered)."""
    if source.is_symlink() or not source.is_dir():
        return [("", source.is_symlink())] if source.is_symlink() or source.is_file() else []
    found = []
    for current, folders, names in os.walk(source):
        for name in names + [name for name in folders if Path(current, name).is_symlink()]:
            full = Path(current, name)
            if full.is_symlink() or full.is_file():
                found.append((full.relative_to(source).as_posix(), full.is_symlink()))
    return sorted(found)
