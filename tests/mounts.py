"""Real file systems for tests: a small tmpfs that fills up, and a read-only bind mount of a folder.

Both need the right to mount (root in a container that allows it): a test that cannot mount is skipped,
never faked. Every mount is undone when its context ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode})")


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@contextlib.contextmanager
def small_disk(where: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (created), unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    try:
        yield where
    finally:
        _umount(where)


def fill(disk: Path) -> Path:
    """Fill `disk` until a write of one byte more fails with ENOSPC; returns the filler file (remove it to free)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while os.write(fd, b"\0" * chunk):
                    pass
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    probe = disk / "probe"
    with pytest.raises(OSError) as refused:
        probe.write_bytes(b"x" * 4096)
    assert refused.value.errno == errno.ENOSPC
    probe.unlink(missing_ok=True)
    return filler


@contextlib.contextmanager
def read_only(folder: Path, where: Path) -> Iterator[Path]:
    """`folder` as a real read-only mount at `where` (a bind mount remounted read-only), undone at the end."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    where.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(folder), str(where))
    try:
        _mount("-o", "remount,bind,ro", str(where))
        with pytest.raises(OSError) as refused:
            (where / ".probe").write_bytes(b"x")
        assert refused.value.errno == errno.EROFS
        yield where
    finally:
        _umount(where)
