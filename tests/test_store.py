import multiprocessing
import os

import pytest

from fsmem.errors import LockTimeout
from fsmem.store.files import atomic_write, file_lock


def test_atomic_write_replaces_content_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "a" / "b.md"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.md"]


def test_atomic_write_keeps_the_file_mode(tmp_path):
    target = tmp_path / "x.md"
    target.write_bytes(b"x")
    os.chmod(target, 0o600)
    atomic_write(target, b"y")
    assert os.stat(target).st_mode & 0o777 == 0o600


def _hold_lock(root, ready, release):
    with file_lock(root, "consolidate"):
        ready.set()
        release.wait(10)


def test_lock_excludes_another_process(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(tmp_path, ready, release))
    holder.start()
    try:
        assert ready.wait(20)
        with pytest.raises(LockTimeout, match="another fsmem process"):
            with file_lock(tmp_path, "consolidate", wait=False):
                pass
        with pytest.raises(LockTimeout):
            with file_lock(tmp_path, "consolidate", timeout=0.2):
                pass
    finally:
        release.set()
        holder.join(20)
    with file_lock(tmp_path, "consolidate", wait=False):
        pass  # free again once the holder is gone


def test_a_lock_file_names_its_holder_and_is_written_only_when_another_named_it(tmp_path):
    lock = tmp_path / ".fsmem" / "locks" / "write.lock"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(b"4194304999")  # a longer pid, of a process gone
    with file_lock(tmp_path):
        pass
    assert lock.read_bytes() == str(os.getpid()).encode()
    os.utime(lock, ns=(10**9, 10**9))
    with file_lock(tmp_path):
        pass  # the file already names this process: not truncated and written again (a log's every record)
    assert lock.read_bytes() == str(os.getpid()).encode() and lock.stat().st_mtime_ns == 10**9


def test_lock_is_reentrant_in_one_thread(tmp_path):
    with file_lock(tmp_path):
        with file_lock(tmp_path, timeout=0.1):
            pass
    assert (tmp_path / ".fsmem" / "locks" / "write.lock").exists()
