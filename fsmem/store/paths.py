"""Paths inside the memory root: the one place where user- and agent-supplied paths are checked.

Every path that reaches the store goes through `resolve`, which refuses absolute
paths, `..` that leaves the root, symlinks whose target lies outside it, and the
machine-state folder `.fsmem/`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from fsmem.errors import InvalidArgument, PathEscape

STATE_DIR = ".fsmem"


def resolve(root: Path, user_path: str | os.PathLike[str] | None) -> Path:
    """The absolute path that `user_path` names inside `root`, or a PathEscape.

    The check is lexical first (no `..` above the root, nothing absolute) and
    then physical (the real path of the deepest existing ancestor must still be
    inside the real root), so a symlink planted inside the memory cannot lead out.
    """
    raw = "" if user_path is None else os.fspath(user_path)
    if "\x00" in raw:
        raise InvalidArgument("path contains a NUL byte")
    text = raw.replace("\\", "/").strip()
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise PathEscape(
            f"path {raw!r} is absolute; give a path relative to the memory root, such as 'topics/billing.md'"
        )
    parts = [part for part in PurePosixPath(text).parts if part not in ("", ".")]
    depth = 0
    for part in parts:
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            raise PathEscape(f"path {raw!r} escapes the memory root")
    normalized = os.path.normpath(os.path.join(root, *parts)) if parts else os.path.normpath(root)
    relative = os.path.relpath(normalized, root)
    if relative.split(os.sep)[0] == STATE_DIR:
        raise PathEscape(f"path {raw!r} is inside {STATE_DIR}/, which holds machine state, not memory")
    _check_physical(root, Path(normalized), raw)
    return Path(normalized)


def _check_physical(root: Path, path: Path, raw: str) -> None:
    real_root = os.path.realpath(root)
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    real = os.path.realpath(probe)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise PathEscape(f"path {raw!r} leads outside the memory root through a symbolic link")
    if os.path.relpath(real, real_root).split(os.sep)[0] == STATE_DIR:
        raise PathEscape(
            f"path {raw!r} leads into {STATE_DIR}/ through a symbolic link; that folder holds machine state, not memory"
        )
    if os.path.islink(path) and not os.path.exists(path):
        raise PathEscape(f"path {raw!r} is a dangling symbolic link")


def relative(root: Path, path: Path) -> str:
    """The memory-relative POSIX form of an absolute path, as shown to users and agents."""
    rel = os.path.relpath(path, root)
    return "." if rel == "." else PurePosixPath(*Path(rel).parts).as_posix()


def is_hidden_state(rel: str) -> bool:
    return rel == STATE_DIR or rel.startswith(STATE_DIR + "/")
