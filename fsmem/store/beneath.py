"""Writes that never follow a link out: every path resolved one component at a time, below the root's descriptor.

`fsmem.store.paths.resolve` checks a path, then the writer uses it; a link swapped in between (by a sync, an
editor, another process) would redirect a path-based write. Here a write opens the memory root as a folder
descriptor and each folder below it with `O_NOFOLLOW` relative to the one before (`dir_fd`), so the folder a
file is replaced in is the one that was checked, whatever the tree holds by then. Where a platform has no
`O_NOFOLLOW` or no `dir_fd` (Windows), each component is checked with `lstat` instead, path by path.

Two kinds of file, two rules:
- a memory file: a link in memory to a memory file (or folder) is followed, by this walk and never by the
  system, and its target is written (the link stays, as documented); a link that leaves the root, leads to a
  control file (`fsmem.yaml`, anything hidden) or to a generated file, dangles or loops is refused;
- a generated file (INDEX.md, a document's history file, what lives under `.fsmem/`): no link is followed at
  all; a final component that is a link is replaced by a regular file (the caller reports it), and a folder on
  the way that is a link is refused.

This module is long because it is one walk: resolving a path, staging a file beside its target, publishing,
removing and moving all act on the open folder the walk checked; split, a reader would have to hold several
modules to know where a write lands.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fsmem.config import STATE_DIR
from fsmem.errors import ChangedOnDisk, InvalidArgument, PathEscape, StorageError, quoted
from fsmem.store.paths import is_memory_path, name_problem, shown

TEMP_PREFIX = ".fsmem-tmp-"  # a write's temporary file, beside its target
KEPT_SUFFIX = ".fsmem-kept"  # a file saved by a person while fsmem removed it, when another save took its name
INDEX_FILE = "INDEX.md"
HISTORY_SUFFIX = ".history.md"  # fsmem.format.history_file.SUFFIX
LINK_HOPS = 40  # links followed in one path, as the kernel allows (ELOOP after)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# descriptors relative to a folder: POSIX has them; elsewhere every component is checked with lstat by path
AT = bool(_NOFOLLOW and _DIRECTORY) and {os.open, os.stat, os.readlink, os.mkdir, os.rename, os.unlink} <= (
    os.supports_dir_fd
)


def is_generated(rel: str) -> bool:
    """Whether fsmem makes this file itself (never written through a link): INDEX.md, history files, `.fsmem/`."""
    return rel == INDEX_FILE or rel.endswith(HISTORY_SUFFIX) or rel == STATE_DIR or rel.startswith(STATE_DIR + "/")


def _refuse(rel: str, reason: str) -> PathEscape:
    error = PathEscape(f"path {quoted(rel)} {reason}; nothing was written")
    error.reason = reason  # type: ignore[attr-defined]
    return error


class Folder:
    """An open folder of the memory: a descriptor where the platform has `dir_fd`, else its path (lstat-checked)."""

    def __init__(self, path: str, fd: int | None):
        self.path = path
        self.fd = fd

    def at(self, name: str) -> tuple[str, int | None]:
        """(name, dir_fd) for a system call on `name` in this folder."""
        return (name, self.fd) if self.fd is not None else (os.path.join(self.path, name), None)

    def lstat(self, name: str) -> os.stat_result:
        where, fd = self.at(name)
        return os.stat(where, dir_fd=fd, follow_symlinks=False)

    def open(self, name: str, flags: int, mode: int = 0o777) -> int:
        where, fd = self.at(name)
        return os.open(where, flags | _CLOEXEC, mode, dir_fd=fd)

    def readlink(self, name: str) -> str:
        where, fd = self.at(name)
        return os.readlink(where, dir_fd=fd)

    def names(self) -> list[str]:
        """The names this folder holds, listed through its descriptor (what was opened, whatever its path is now)."""
        return os.listdir(self.fd if self.fd is not None else self.path)

    def stat(self) -> os.stat_result:
        """The folder's own stat, through its descriptor."""
        return os.fstat(self.fd) if self.fd is not None else os.stat(self.path, follow_symlinks=False)

    def child(self, name: str) -> Folder:
        """The folder `name` in this one, opened without following a link (OSError ELOOP/ENOTDIR when it is one)."""
        path = os.path.join(self.path, name)
        if self.fd is None:
            if stat.S_ISLNK(self.lstat(name).st_mode):
                raise OSError(errno.ELOOP, "is a symbolic link", path)
            if not os.path.isdir(path):
                raise OSError(errno.ENOTDIR, "Not a directory", path)
            return Folder(path, None)
        return Folder(path, self.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW))

    def sync(self) -> None:
        """Make a rename in this folder durable (best effort)."""
        try:
            fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            if self.fd is None:
                os.close(fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_root(root: str | os.PathLike[str]) -> Folder:
    """The memory root as a folder (the root itself may be reached through links: a human chose it)."""
    path = os.fspath(root)
    if not AT:
        return Folder(path, None)
    return Folder(path, os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC))


@dataclass
class Place:
    """Where a write lands: the open folder, the name in it, and the memory-relative path of that name."""

    folder: Folder
    name: str
    inside: str
    link: str | None = None  # the memory path of a link followed (memory) or found (generated) at the end


def place(
    root: str | os.PathLike[str],
    rel: str,
    *,
    generated: bool,
    follow: bool = True,
    create: bool = True,
    file: bool = True,
    folder: bool = False,
    folder_mode: int | None = None,
) -> Place:
    """Open the folder that holds `rel` (memory-relative, already checked lexically) below the root.

    A memory path (`generated=False`) follows links that stay in memory and lead to memory folders, and with
    `follow` its final link too, to a memory file that is not generated; a generated path follows none (a final
    link is left for the caller to replace). With `create`, missing folders are made on the way (with exactly
    `folder_mode`, whatever the umask, when given). The caller closes `Place.folder`.
    """
    top = open_root(root)
    entered: list[tuple[str, Folder]] = []
    pending = [part for part in rel.split("/") if part not in ("", ".")]
    if not pending:
        top.close()
        raise InvalidArgument("the memory root is not a file; nothing was written")
    hops = 0
    link: str | None = None
    ended_in_link = False  # the final name came from a link's target

    def here() -> Folder:
        return entered[-1][1] if entered else top

    def inside(name: str | None = None) -> str:
        return "/".join([part for part, _ in entered] + ([name] if name else []))

    def leave_all() -> None:
        while entered:
            entered.pop()[1].close()

    try:
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not entered:
                    raise _refuse(rel, "leads outside the memory root through a symbolic link")
                entered.pop()[1].close()
                continue
            last = not pending
            if not generated and name_problem(name) is not None:
                if link is not None:
                    raise _refuse(rel, f"leads to {shown(inside(name))} through a symbolic link, not a memory path")
                raise _refuse(rel, f"has {shown(name)}, which is not a memory path")
            try:
                info: os.stat_result | None = here().lstat(name)
            except FileNotFoundError:
                info = None
            except NotADirectoryError:
                raise InvalidArgument(f"path {quoted(rel)} goes through a file as if it were a folder") from None
            if info is not None and stat.S_ISLNK(info.st_mode):
                if last and (generated or not follow):
                    return Place(_keep(here(), top, entered), name, inside(name), inside(name))
                if generated:
                    raise _refuse(
                        rel,
                        f"goes through {shown(inside(name))}, a symbolic link; fsmem writes its own files in real folders only",
                    )
                hops += 1
                if hops > LINK_HOPS:
                    raise _refuse(rel, "is a symbolic link loop")
                link = link or inside(name)
                ended_in_link = ended_in_link or last
                target = here().readlink(name)
                if os.path.isabs(target):
                    real_root = os.path.realpath(root)
                    real_target = os.path.normpath(target)
                    if real_target != real_root and not real_target.startswith(real_root + os.sep):
                        raise _refuse(rel, "leads outside the memory root through a symbolic link")
                    leave_all()
                    target = os.path.relpath(real_target, real_root)
                pending = target.replace(os.sep, "/").split("/") + pending
                continue
            if last:
                if info is None and ended_in_link:
                    raise _refuse(rel, "is a dangling symbolic link")
                # a generated file's FIFO, socket or device is replaced as its link is (a cache's name in a copy)
                special = info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode)
                if file and info is not None and not stat.S_ISREG(info.st_mode) and not (generated and special):
                    if stat.S_ISDIR(info.st_mode):
                        raise InvalidArgument(f"path {quoted(rel)} is a folder; nothing was written")
                    raise InvalidArgument(f"path {quoted(rel)} is not a regular file; nothing was written")
                where = inside(name)
                if (
                    not generated
                    and not folder
                    and link is not None
                    and (not is_memory_path(where) or is_generated(where))
                ):
                    raise _refuse(
                        rel, f"leads to {shown(where)} through a symbolic link, not a memory file fsmem may write"
                    )
                return Place(_keep(here(), top, entered), name, where, link)
            if info is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.path.join(here().path, name))
                try:
                    mkdir_at(here(), name, folder_mode)
                except FileExistsError:
                    pass  # made meanwhile: looked at again
                pending.insert(0, name)
                continue
            try:
                entered.append((name, here().child(name)))
            except OSError as exc:
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(here(), name)):
                    pending.insert(0, name)  # swapped for a link meanwhile: looked at again, as a link
                    hops += 1
                    if hops > LINK_HOPS:
                        raise _refuse(rel, "is a symbolic link loop") from None
                    continue
                if exc.errno == errno.ENOTDIR:
                    raise InvalidArgument(f"path {quoted(rel)} goes through a file as if it were a folder") from None
                raise
        raise AssertionError("unreachable")
    except BaseException:
        leave_all()
        top.close()
        raise


def landing(root: str | os.PathLike[str], rel: str, *, follow: bool = True) -> str:
    """The memory path a write of the memory file `rel` lands on: `rel` itself, or the file its in-memory links
    lead to (what history must record; the links stay as they are). Refused as the write would be. Without
    `follow`, a final link is not followed (a removal or a move acts on the link itself, or on a folder)."""
    parts = [part for part in rel.split("/") if part not in ("", ".")]
    for end in range(len(parts), 0, -1):  # the longest part of the path that exists (a write makes the rest)
        head = "/".join(parts[:end])
        try:
            whole = end == len(parts) and follow
            target = place(root, head, generated=False, follow=follow, create=False, file=whole, folder=not whole)
        except (FileNotFoundError, NotADirectoryError):
            continue
        target.folder.close()
        return "/".join([target.inside, *parts[end:]])
    return "/".join(parts)


def _keep(folder: Folder, top: Folder, entered: list[tuple[str, Folder]]) -> Folder:
    """Close every folder opened on the way but `folder`, which the caller keeps."""
    for _, other in entered:
        if other is not folder:
            other.close()
    if top is not folder:
        top.close()
    return folder


def _exists(target: Place) -> bool:
    try:
        target.folder.lstat(target.name)
    except FileNotFoundError:
        return False
    return True


def _is_link(folder: Folder, name: str) -> bool:
    try:
        return stat.S_ISLNK(folder.lstat(name).st_mode)
    except OSError:
        return False


def mkdir_at(folder: Folder, name: str, mode: int | None = None) -> None:
    """Make the folder `name` in `folder`: with the umask's mode, or with exactly `mode` (set on the folder made,
    opened without following a link, so a link swapped in meanwhile is never changed)."""
    where, fd = folder.at(name)
    os.mkdir(where, 0o777 if mode is None else mode, dir_fd=fd)
    if mode is None:
        return
    try:
        made = folder.child(name)
    except OSError:
        return  # swapped meanwhile: the walk meets it as it is now
    try:
        if made.fd is not None:
            os.fchmod(made.fd, mode)
        else:  # pragma: no cover - no dir_fd (Windows): the lstat-checked path
            os.chmod(made.path, mode)
    finally:
        made.close()


def read_only(info: os.stat_result) -> bool:
    """Whether a person made this file read-only (a regular file no one may write: `chmod a-w`, mode 0444). fsmem
    replaces a file by a rename, which its mode does not stop, so it asks: agents and consolidation leave it be."""
    return stat.S_ISREG(info.st_mode) and not info.st_mode & 0o222


def refuse_read_only(target: Place, rel: str) -> None:
    """StorageError when the memory file at `target` is read-only (`read_only`): nothing is written to it."""
    try:
        info = target.folder.lstat(target.name)
    except OSError:
        return
    if read_only(info):
        raise StorageError(
            f"{shown(rel)} is read-only (mode {stat.S_IMODE(info.st_mode):04o}: no one may write it); nothing was "
            "written. A person made it so; make it writable (chmod u+w) to let agents change it"
        )


def default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class Staged:
    """A new file's bytes written to a temporary file beside its target, not yet given its name.

    `publish` renames it over the target (relative to the folder that was checked); `discard` removes it.
    Several can be staged and fsynced together before any is published (consolidation's batches). `data` is
    the bytes, or a function that writes them to the temporary file's descriptor (a large file streamed into
    it, never held whole).
    """

    def __init__(self, target: Place, data: bytes | Callable[[int], None], *, mode: int | None = None):
        self.place = target
        folder = target.folder
        if mode is None:
            try:
                info = folder.lstat(target.name)
                mode = info.st_mode & 0o777 if stat.S_ISREG(info.st_mode) else default_mode()
            except FileNotFoundError:
                mode = default_mode()
        while True:
            self.temp = TEMP_PREFIX + os.urandom(6).hex()
            try:
                self.fd: int | None = folder.open(
                    self.temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0), 0o600
                )
                break
            except FileExistsError:
                continue
        try:
            if callable(data):
                data(self.fd)
            else:
                _write_all(self.fd, data)
            if hasattr(os, "fchmod"):
                os.fchmod(self.fd, mode)
            else:  # pragma: no cover - Windows
                os.chmod(os.path.join(folder.path, self.temp), mode)
        except BaseException:
            self.discard()
            raise

    def sync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)

    def publish(self, *, exclusive: bool = False) -> None:
        """Give the temporary file the target's name (only if it is free, with `exclusive`)."""
        folder, name = self.place.folder, self.place.name
        self._close()
        try:
            if exclusive:
                _publish_new(folder, self.temp, name)
            else:
                src, fd = folder.at(self.temp)
                dst, _ = folder.at(name)
                os.replace(src, dst, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            self.discard()
            raise

    def publish_if(self, expect: bytes | None) -> bool:
        """Give the temporary file the target's name only if the target still holds `expect` (None: it does not
        exist); False, with nothing changed and the temporary file gone, when it does not.

        A person's editor saves without fsmem's lock, so a file read under the lock may be saved over before
        the rename: where the system can swap two names (`fsmem.store.exchange`), the new file is swapped in
        and the one taken out is read; it is dropped only when it held `expect`, else swapped back, so a save
        that landed up to the swap itself is kept. Elsewhere the target is compared, then renamed over.
        A file open for writing (an editor saving in place, between two chunks) is not replaced either, nor one
        opened for writing while this ran (`fsmem.store.leases`): its later chunks would go to a file with no name.
        """
        if expect is None:
            try:
                self.publish(exclusive=True)
            except FileExistsError:
                return False
            return True
        from fsmem.store import exchange, leases  # a write's modules: reads (a lean grep) import this one without

        folder, name = self.place.folder, self.place.name
        self._close()
        src, fd = folder.at(self.temp)
        dst, _ = folder.at(name)
        lease = leases.take(dst, fd)
        if lease is None:  # open for writing: an editor is saving it in place, and what was read may be half
            self.discard()
            return False
        try:
            try:
                swapped = exchange.exchange(src, dst, fd)
            except BaseException:
                self.discard()
                raise
            if swapped:  # the file taken out is at the temporary name now
                if _holds(folder, self.temp, expect) and not lease.broken:
                    self.discard()
                    return True
                exchange.exchange(src, dst, fd)  # theirs back; ours at the temporary name again
                self.discard()
                return False
            if swapped is None or not _holds(folder, name, expect) or lease.broken:
                self.discard()
                return False
            try:
                os.replace(src, dst, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                self.discard()
                raise
            return True
        finally:
            lease.release()

    def discard(self) -> None:
        self._close()
        where, fd = self.place.folder.at(self.temp)
        try:
            os.unlink(where, dir_fd=fd)
        except OSError:
            pass

    def _close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _holds(folder: Folder, name: str, expect: bytes) -> bool:
    """Whether `name` in `folder` is a regular file of exactly the bytes `expect` (a link or folder is not)."""
    try:
        fd = folder.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = bytearray()
        while len(data) <= len(expect):
            chunk = os.read(fd, len(expect) + 1 - len(data))
            if not chunk:
                break
            data += chunk
        return data == expect
    except OSError:
        return False
    finally:
        os.close(fd)


def _publish_new(folder: Folder, temp: str, name: str) -> None:
    """link() never overwrites: the name is given only if it is free, even against a writer racing outside fsmem."""
    src, fd = folder.at(temp)
    dst, _ = folder.at(name)
    try:
        os.link(src, dst, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except (OSError, NotImplementedError) as exc:
        if isinstance(exc, OSError) and exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EMLINK,
            errno.EXDEV,
        ):
            raise
        try:
            folder.lstat(name)
        except FileNotFoundError:
            os.replace(src, dst, src_dir_fd=fd, dst_dir_fd=fd)  # a filesystem without hard links: check, then rename
            return
        raise FileExistsError(errno.EEXIST, "File exists", os.path.join(folder.path, name)) from None
    os.unlink(src, dir_fd=fd)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte: `os.write` may write fewer than asked (signals, pipes, some filesystems)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "os.write wrote nothing")
        view = view[written:]


def write_file(
    root: str | os.PathLike[str],
    rel: str,
    data: bytes,
    *,
    generated: bool | None = None,
    mode: int | None = None,
    exclusive: bool = False,
    durable: bool = True,
    expect: bytes | None | Literal[False] = False,
) -> str | None:
    """Replace the file `rel` below `root` with `data`, atomically, through no link that leaves the memory.

    `generated` (by default: what `is_generated` says of `rel`) writes the file itself, never a link's target;
    returns the memory path of a link it replaced by a regular file, for the caller to report (None otherwise).
    With `expect` (the bytes the change was made from, None for a file that did not exist), nothing is written
    and ChangedOnDisk raised when the file holds anything else at the rename (`Staged.publish_if`).
    """
    if generated is None:
        generated = is_generated(rel)
    target = place(root, rel, generated=generated, file=not exclusive)
    try:
        if expect is not False:  # a file changed from what was read: a person may have made it read-only
            refuse_read_only(target, rel)
        if exclusive and _exists(target):
            raise FileExistsError(errno.EEXIST, "File exists", os.path.join(target.folder.path, target.name))
        replaced = target.link if generated and target.link is not None else None
        staged = Staged(target, data, mode=mode)
        if durable:
            try:
                staged.sync()
            except BaseException:
                staged.discard()
                raise
        if expect is False:
            staged.publish(exclusive=exclusive)
        elif not staged.publish_if(expect):
            raise ChangedOnDisk(
                f"{shown(rel)} was changed on disk while this write was made (saved by an editor or another "
                "program); nothing was written. Read it again, then retry"
            )
        if durable:
            target.folder.sync()
        return replaced
    finally:
        target.folder.close()


def remove(root: str | os.PathLike[str], rel: str, *, generated: bool = False, tree: bool = False) -> None:
    """Remove the file, link or empty folder `rel` (a final link is removed, never followed); with `tree`, a
    folder and all it holds (`shutil.rmtree` below the open folder, which follows no link inside it either).
    `generated` follows no link on the way (a path already resolved: a link found there was swapped in)."""
    target = place(root, rel, generated=generated, follow=False, create=False, file=False)
    try:
        remove_at(target, tree=tree)
    finally:
        target.folder.close()


def remove_if(root: str | os.PathLike[str], rel: str, expect: bytes | None, *, generated: bool = False) -> bool:
    """Remove the regular file `rel` only if it holds `expect` (None: whatever the file there holds, if it is not
    being saved); False, with what is there left, when it does not.

    A person's editor saves without fsmem's lock: the file is first renamed aside (whatever is there then goes
    along) and read, removed only when it held `expect` and was not opened for writing meanwhile (a save made
    in place: `fsmem.store.leases`), else given its name back (never over a file saved
    there since: then it keeps the name `rel` + `.fsmem-kept`, told in the caller's message). `generated` follows
    no link on the way (as `remove`)."""
    target = place(root, rel, generated=generated, follow=False, create=False, file=False)
    from fsmem.store import leases

    folder, name = target.folder, target.name
    lease: leases.Lease | None = None
    try:
        aside = TEMP_PREFIX + os.urandom(6).hex()
        src, fd = folder.at(name)
        dst, _ = folder.at(aside)
        lease = leases.take(src, fd)
        if lease is None:  # open for writing: an editor is saving it in place
            return False
        try:
            os.rename(src, dst, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:  # gone meanwhile, as an editor's save renames it to its backup
            return False
        taken = lease.is_of(folder.lstat(aside)) if expect is None else _holds(folder, aside, expect)
        if taken and not lease.broken:
            try:
                os.unlink(dst, dir_fd=fd)
            except OSError:  # an I/O error: the file is not removed, so it goes back to its name
                with contextlib.suppress(OSError):
                    _put_back(folder, aside, name)
                raise
            return True
        _put_back(folder, aside, name)
        return False
    finally:
        if lease is not None:
            lease.release()
        folder.close()


def _put_back(folder: Folder, aside: str, name: str) -> None:
    """Give the file taken `aside` its name back, never over a file saved there since (then it keeps the name
    `name` + `.fsmem-kept`)."""
    try:
        _publish_new(folder, aside, name)
    except FileExistsError:
        src, fd = folder.at(aside)
        kept, _ = folder.at(name + KEPT_SUFFIX)
        os.rename(src, kept, src_dir_fd=fd, dst_dir_fd=fd)


def remove_at(target: Place, *, tree: bool = False) -> None:
    """Remove what `target` names in its open folder (a place made with `follow=False`), as `remove` does."""
    where, fd = target.folder.at(target.name)
    info = target.folder.lstat(target.name)
    if stat.S_ISDIR(info.st_mode) and tree:
        shutil.rmtree(where, dir_fd=fd)
    elif stat.S_ISDIR(info.st_mode):
        os.rmdir(where, dir_fd=fd)
    else:
        os.unlink(where, dir_fd=fd)


def rename(
    root: str | os.PathLike[str],
    source: str,
    target: str,
    *,
    generated: bool = False,
    folder_mode: int | None = None,
) -> None:
    """Move `source` to `target` (both memory-relative; a final link moves as a link), never over anything.
    `generated` follows no link on the way of either; `folder_mode` is the exact mode of folders made for it."""
    src = place(root, source, generated=generated, follow=False, create=False, file=False)
    try:
        dst = place(root, target, generated=generated, follow=False, create=True, file=False, folder_mode=folder_mode)
        try:
            try:
                dst.folder.lstat(dst.name)
            except FileNotFoundError:
                pass
            else:
                raise FileExistsError(errno.EEXIST, "File exists", target)
            _check_moved_link(src, dst, target)
            old, old_fd = src.folder.at(src.name)
            new, new_fd = dst.folder.at(dst.name)
            os.rename(old, new, src_dir_fd=old_fd, dst_dir_fd=new_fd)
        finally:
            dst.folder.close()
    finally:
        src.folder.close()


def _check_moved_link(src: Place, dst: Place, target: str) -> None:
    """A link keeps its text when moved: refuse a move after which a relative link would lead out of the memory."""
    if src.link is None or not _is_link(src.folder, src.name):
        return  # no link moved (one on the way, a folder link, stays where it is)
    text = src.folder.readlink(src.name)
    if leads_out(dst.inside, text):
        raise _refuse(target, f"would hold a symbolic link to {shown(text)}, which leads outside the memory from there")


def leads_out(rel: str, text: str) -> bool:
    """Whether a link at memory-relative `rel` holding the relative `text` leads out of the memory (an absolute
    one is judged where it is followed, not here)."""
    if os.path.isabs(text):
        return False
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    landed = os.path.normpath(os.path.join(folder, text)).replace(os.sep, "/")
    return landed == ".." or landed.startswith("../")


def make_folder(root: str | os.PathLike[str], rel: str, *, generated: bool = True, mode: int | None = None) -> Path:
    """Make the folder `rel` (and those above it) below the root, through no link; returns its path. Folders
    made get exactly `mode` when it is given (those that exist keep theirs)."""
    folder = open_folder(root, rel, generated=generated, create=True, mode=mode)
    folder.close()
    return Path(root, rel)


def open_folder(
    root: str | os.PathLike[str], rel: str, *, generated: bool = True, create: bool = True, mode: int | None = None
) -> Folder:
    """The folder `rel` below the root, opened through no link (generated) or only links in memory."""
    parts = [part for part in rel.split("/") if part not in ("", ".")]
    if not parts:
        return open_root(root)
    holder = place(root, rel, generated=generated, follow=False, create=create, file=False, folder_mode=mode)
    try:
        try:
            return holder.folder.child(holder.name)
        except FileNotFoundError:
            if not create:
                raise
            try:
                mkdir_at(holder.folder, holder.name, mode)
            except FileExistsError:
                pass
            return holder.folder.child(holder.name)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(holder.folder, holder.name):
                raise _refuse(rel, "is a symbolic link; fsmem keeps its own files in real folders only") from None
            raise
    finally:
        holder.folder.close()
