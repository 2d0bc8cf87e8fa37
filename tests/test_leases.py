"""fsmem.store.leases: a file open for writing refuses a read lease; an open for writing breaks one taken, and the
signal that says so does not end the process (SIGIO, by default, would)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_human_editor import LEASES

from fsmem.store import leases

pytestmark = pytest.mark.skipif(not LEASES, reason="no read leases here")


def test_a_file_open_for_writing_gets_no_lease_and_a_missing_file_an_empty_one(tmp_path: Path):
    target = tmp_path / "x.md"
    target.write_bytes(b"# X\n")
    with target.open("r+b"):
        assert leases.take(str(target), None) is None
    lease = leases.take(str(target), None)
    assert lease is not None and lease.fd is not None and not lease.broken
    lease.release()
    missing = leases.take(str(tmp_path / "gone.md"), None)
    assert missing is not None and missing.fd is None and not missing.broken


def test_an_open_for_writing_breaks_the_lease_and_waits_for_its_release(tmp_path: Path):
    target = tmp_path / "x.md"
    target.write_bytes(b"# X\n")
    lease = leases.take(str(target), None)
    assert lease is not None
    opened = threading.Event()

    def editor() -> None:
        with target.open("r+b") as handle:  # waits until the lease is given up
            opened.set()
            handle.write(b"# Y\n")

    thread = threading.Thread(target=editor, daemon=True)
    thread.start()
    for _ in range(2000):
        if lease.broken:
            break
        threading.Event().wait(0.005)
    assert lease.broken and not opened.is_set()
    lease.release()
    thread.join(30)
    assert opened.is_set() and target.read_bytes() == b"# Y\n"
