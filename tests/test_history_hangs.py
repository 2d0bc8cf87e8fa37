"""A hang the check of `.git` cannot see: fsmem's long-lived `git cat-file --batch` readers wait a bounded time.

`git_dir.check` refuses a FIFO git would open before git runs; one put there afterwards (the repository changed
under a long-lived process: the MCP server, the team server, the watcher) still made git wait, and fsmem with
it, for ever. Real git, a real FIFO, the reader's wait shortened for the test.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from test_hostile import NOW

from fsmem import Memory
from fsmem.errors import HistoryError
from fsmem.history import cat_file, repo as repo_module

BILLING = "---\ntitle: Billing\ntype: semantic\n---\n# Billing\n- proration: daily\n"


def test_a_reader_stuck_on_a_fifo_is_stopped_with_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    """A loose object replaced by a FIFO after the repository was opened made the reader's next request wait
    for ever; it now ends in a HistoryError after READ_WAIT, the stuck git is killed, and the next request, once
    the object is back, is answered by a new reader."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    root = Memory.init(tmp_path / "mem", git=True).root
    Memory(root).write("topics/billing.md", BILLING)
    repo = repo_module.discover(root, "test-host")
    assert repo is not None
    try:
        head = repo.reader.get("HEAD")
        assert head is not None and head[1] == "commit"  # the reader is running
        oid = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD:topics/billing.md"], capture_output=True, text=True, check=True
        ).stdout.strip()
        loose = root / ".git" / "objects" / oid[:2] / oid[2:]
        saved = loose.read_bytes()
        loose.unlink()
        os.mkfifo(loose)
        stuck = repo.reader.proc
        assert stuck is not None
        monkeypatch.setattr(cat_file, "READ_WAIT", 1.0)
        asked: list[object] = []
        request = threading.Thread(target=_ask, args=(repo.reader, oid, asked), daemon=True)
        request.start()
        request.join(10)
        if request.is_alive():  # still waiting: let git go (a writer opens and closes the FIFO), then fail
            os.close(os.open(loose, os.O_WRONLY | os.O_NONBLOCK))
            request.join(10)
        assert len(asked) == 1 and isinstance(asked[0], HistoryError), asked
        assert "gave no answer in 1 s" in str(asked[0])
        assert stuck.returncode is not None  # killed and reaped
        loose.unlink()
        loose.write_bytes(saved)
        found = repo.reader.get(oid)
        assert found is not None and b"proration: daily" in found[2]
    finally:
        repo.close()


def _ask(reader: cat_file.CatFile, spec: str, asked: list[object]) -> None:
    try:
        asked.append(reader.get(spec))
    except HistoryError as error:
        asked.append(error)
