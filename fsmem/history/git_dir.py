"""The repository a memory's `.git` names, checked before fsmem runs git there.

A memory received from someone else brings its `.git`, and git believes it: a FIFO as `HEAD`, as a ref, as
`index` or as a file `[include] path` names made every git call wait for a writer that never comes (each
history command hung), and a `.git` *file* (`gitdir: /elsewhere`) points git at another repository of this
host (as does a `.git` that is a link out of its folder), which fsmem would then commit into. `check` refuses
both before any git process starts: each name git opens (loose objects and packs too, those of the object
folders `objects/info/alternates` names among them) must be a regular file or a folder (or absent), a `.git`
link must stay in its folder, `commondir` must name the repository of a linked work tree's git dir (and no
other), and a `.git` file must name a git dir that names it back (a linked work tree's `gitdir`) or lies in a
superproject's `.git/modules/` (a submodule).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from pathlib import Path

from fsmem.errors import HistoryError
from fsmem.store.rg_command import LEFT_OUT_LIMIT

# The files of a git dir that git reads (or appends to) before it answers; refs/ and logs/ are walked whole.
READ = (
    "HEAD",
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "index",
    "packed-refs",
    "shallow",
    "FETCH_HEAD",
    "ORIG_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "AUTO_MERGE",
)
FOLDERS = ("refs", "logs", "info", "objects/info")
MAX_POINTER = 4096  # bytes of a `.git` file or `commondir` read: a path, not a document
INCLUDE_DEPTH = 10  # git's own limit on nested includes
ALTERNATE_DEPTH = 5  # git's own limit on alternates of alternates
MAX_ALTERNATES = 1 << 16  # bytes of an `objects/info/alternates` read: a few paths
_FANOUT = re.compile(r"^[0-9a-f]{2}$")
_PATH_KEY = re.compile(rb"^\s*path\s*=\s*(.*?)\s*$", re.MULTILINE | re.IGNORECASE)


def check(marker: Path) -> None:
    """HistoryError unless git may be run on the repository the `.git` at `marker` names (see the module)."""
    git_dir = _git_dir(marker)
    folders = [git_dir]
    common = _pointer(git_dir / "commondir")
    if common is not None:  # a linked work tree's git dir, .git/worktrees/NAME: its repository is the .git above
        shared = Path(os.path.realpath(Path(git_dir, common)))
        if git_dir == marker or shared != Path(os.path.realpath(git_dir)).parent.parent:
            raise HistoryError(
                f"{git_dir / 'commondir'} points at the repository {shared}, which is not this folder's: history"
                " refuses to write into another repository; remove that file"
            )
        folders.append(shared)
    for folder in folders:
        for name in READ:
            _plain(folder / name)
            _not_hollow(folder / name)
        for sub in FOLDERS:
            for here, dirs, files in os.walk(folder / sub):
                for name in (*dirs, *files):
                    _plain(Path(here, name))
        _objects(folder / "objects")
        _alternates(folder / "objects", ALTERNATE_DEPTH)
        _includes(folder / "config", INCLUDE_DEPTH)


def _objects(objects: Path) -> None:
    """No loose object or pack is a FIFO, socket or device (`git cat-file` opened one and waited): the kind of
    each entry comes with its folder's listing (d_type), so only a link is looked at further. fsmem's commits
    write loose objects and `gc --auto` packs them past 6,700, so a listing is a few thousand names at most."""
    try:
        folders = [entry for entry in os.scandir(objects) if _FANOUT.match(entry.name) or entry.name == "pack"]
    except OSError:
        return
    for folder in folders:
        if folder.is_symlink() or not folder.is_dir(follow_symlinks=False):
            _plain(Path(folder.path))
            continue
        try:
            entries = list(os.scandir(folder.path))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink() or not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
                _plain(Path(entry.path))


def _alternates(objects: Path, depth: int) -> None:
    """Check each object folder `objects/info/alternates` names (a path a line, relative to `objects`), and the
    folders those name, to git's depth: git reads objects there as its own, so a FIFO among them (or in place of
    the alternates file of one) made `git cat-file` wait for ever as surely as one in `objects/`."""
    listing = objects / "info" / "alternates"
    _plain(listing)
    if depth == 0 or not stat.S_ISREG(_kind(listing) or 0):
        return
    try:
        with open(listing, "rb") as handle:
            text = handle.read(MAX_ALTERNATES)
    except OSError:
        return
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(b"#"):
            continue
        if line.startswith(b'"') and line.endswith(b'"'):  # C-quoted, as git writes a path with odd characters
            line = codecs.escape_decode(line[1:-1])[0]
        other = Path(objects, os.fsdecode(line))
        _plain(other)
        _objects(other)
        _alternates(other, depth - 1)


def _git_dir(marker: Path) -> Path:
    """The git dir of `marker`: itself, or what a `.git` file names when that git dir names it back."""
    if os.path.islink(marker) and not Path(os.path.realpath(marker)).is_relative_to(os.path.realpath(marker.parent)):
        raise HistoryError(
            f"{marker} is a link to {os.path.realpath(marker)}, another folder's repository: history refuses to"
            " write into it; remove the link, or make this folder a repository of its own with git init"
        )
    kind = _kind(marker)
    if kind is None or stat.S_ISDIR(kind):
        return marker
    pointer = _pointer(marker)
    if pointer is None or not pointer.startswith("gitdir:"):
        raise HistoryError(f"{marker} is neither a git folder nor a `gitdir:` file; history cannot use it")
    git_dir = Path(os.path.realpath(Path(marker.parent, pointer[len("gitdir:") :].strip())))
    back = _pointer(git_dir / "gitdir")  # a linked work tree's: the path of its `.git` file
    if back is not None and os.path.realpath(Path(git_dir, back)) == os.path.realpath(marker):
        return git_dir
    if any(git_dir.is_relative_to(Path(up, ".git", "modules")) for up in marker.parents):
        return git_dir  # a submodule's, kept in the superproject around this folder
    raise HistoryError(
        f"{marker} points at the repository {git_dir}, which is not this folder's (it does not name {marker}"
        " back): history refuses to write into another repository; remove the .git file, or make this folder"
        " a repository of its own with git init"
    )


def _kind(path: Path) -> int | None:
    """The file type bits of `path` (links followed), None when it is absent or unreadable."""
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # absent, a dangling link, a loop: git fails on these, it does not wait


def _plain(path: Path) -> None:
    """HistoryError when `path` is a FIFO, socket or device: git would open it and wait (or read a device)."""
    kind = _kind(path)
    if kind is not None and not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
        raise HistoryError(
            f"{path} is not a regular file (a FIFO, socket or device): git would wait on it for ever;"
            " history refuses this repository until it is removed"
        )


def _not_hollow(path: Path) -> None:
    """HistoryError when `path` is a sparse file past LEFT_OUT_LIMIT, mostly holes: git reads `index`,
    `packed-refs` and the like whole: a 4 GB sparse `packed-refs` made `fsmem log` take 2.8 s of CPU to find no
    commit. A large one that is not sparse (a monorepo's index) took its bytes of disk, and passes."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return
    if found.st_size > LEFT_OUT_LIMIT and found.st_blocks * 512 < found.st_size // 2:
        raise HistoryError(
            f"{path} is a sparse file of {found.st_size:,} bytes, mostly holes: git would read it whole;"
            " history refuses this repository until it is removed"
        )


def _pointer(path: Path) -> str | None:
    """The first line of the small regular file at `path` (`.git`, `commondir`, `gitdir`), None when absent."""
    _plain(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_POINTER)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "surrogateescape").split("\n", 1)[0].strip() or None


def _includes(config: Path, depth: int) -> None:
    """Check every file a `path = ...` line of `config` may include (any section's: an over-wide net is
    cheap), and what those include, to git's depth."""
    if depth == 0 or _kind(config) is None or not stat.S_ISREG(_kind(config) or 0):
        return
    try:
        with open(config, "rb") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return
    for found in _PATH_KEY.findall(text):
        value = found.strip(b'"').decode("utf-8", "surrogateescape")
        if not value:
            continue
        target = Path(os.path.expanduser(value)) if value.startswith("~") else Path(config.parent, value)
        _plain(target)
        _includes(target, depth - 1)
