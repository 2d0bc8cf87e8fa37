"""A person edits memory files in an editor while agents write and `fsmem consolidate` runs.

Editors save without fsmem's lock, each in its own way (`SAVES`: vim's rename with a backup and its `4913`
probe, vim's `backupcopy=yes` truncate-and-write, Emacs's lock link and backup, JetBrains' `___jb_tmp___`
and `___jb_old___`, an atomic save through `x.md.tmp`). A save that lands while fsmem writes the same file
(after fsmem read it, before its rename) is kept: the agent is told its write was not made (ChangedOnDisk).
The save is made at the one moment that matters, while fsmem's new file is being synced (`Staged.sync`), so
each case is the same every run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import write_file

from fsmem import Memory
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import ChangedOnDisk, MemoryToolError
from fsmem.store import beneath


def _vim(path: Path, data: bytes) -> None:
    """vim's default: a probe file `4913`, the original renamed to `x.md~`, a new file written, the backup removed."""
    probe = path.with_name("4913")
    probe.write_bytes(b"")
    probe.unlink()
    backup = path.with_name(path.name + "~")
    os.replace(path, backup)
    path.write_bytes(data)
    backup.unlink()


def _vim_backupcopy(path: Path, data: bytes) -> None:
    """vim with `:set backupcopy=yes`: the backup is a copy, the file itself truncated and written in place."""
    path.with_name(path.name + "~").write_bytes(path.read_bytes())
    with path.open("r+b") as handle:
        handle.truncate(0)
        handle.write(data)
    path.with_name(path.name + "~").unlink()


def _emacs(path: Path, data: bytes) -> None:
    """Emacs: a lock link `.#x.md` (dangling: it names user@host.pid), the original renamed to `x.md~`, written."""
    lock = path.with_name(".#" + path.name)
    os.symlink("human@desk.4242:1700000000", lock)
    os.replace(path, path.with_name(path.name + "~"))
    path.write_bytes(data)
    lock.unlink()


def _jetbrains(path: Path, data: bytes) -> None:
    """JetBrains' safe write: `x.md___jb_tmp___` written, the original moved to `x.md___jb_old___`, then removed."""
    temp, old = path.with_name(path.name + "___jb_tmp___"), path.with_name(path.name + "___jb_old___")
    temp.write_bytes(data)
    os.replace(path, old)
    os.replace(temp, path)
    old.unlink()


def _atomic(path: Path, data: bytes) -> None:
    """VS Code's and most tools' atomic save: `x.md.tmp` renamed over the file."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


SAVES: dict[str, Callable[[Path, bytes], None]] = {
    "vim": _vim,
    "vim-backupcopy": _vim_backupcopy,
    "emacs": _emacs,
    "jetbrains": _jetbrains,
    "atomic": _atomic,
}


@contextlib.contextmanager
def saved_during_write(path: Path, data: bytes, save: Callable[[Path, bytes], None]) -> Iterator[list[bool]]:
    """Within the block, the first file fsmem stages gets `path` saved with `data` while it is synced: after fsmem
    read the file, before its rename. Yields a list that holds True once the save was made."""
    made: list[bool] = []
    sync = beneath.Staged.sync

    def sync_while_saving(staged: beneath.Staged) -> None:
        if not made:
            made.append(True)
            save(path, data)
        sync(staged)

    beneath.Staged.sync = sync_while_saving  # type: ignore[method-assign]
    try:
        yield made
    finally:
        beneath.Staged.sync = sync  # type: ignore[method-assign]


DOC = "topics/billing.md"
ORIGINAL = b"---\ntitle: Billing\n---\n# Billing\n\n- invoices go out on Mondays\n"
HUMANS = ORIGINAL + b"- HUMAN: refunds need two approvals\n"


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    memory = Memory.init(tmp_path / "base" / "memories")  # where the memory tool's `/memories` is
    write_file(memory.root, DOC, ORIGINAL.decode())
    return memory


AGENT_WRITES: dict[str, Callable[[Memory], object]] = {
    "edit": lambda m: m.edit(DOC, old="Mondays", new="Tuesdays"),
    "write": lambda m: m.write(DOC, "# Billing\n\n- AGENT: rewritten\n"),
    "set": lambda m: m.write(DOC, set={"tags": ["money"]}),
    "memory tool str_replace": lambda m: MemoryTool(m.root.parent).str_replace(
        f"/memories/{DOC}", "Mondays", "Tuesdays"
    ),
    "memory tool insert": lambda m: MemoryTool(m.root.parent).insert(f"/memories/{DOC}", 1, "AGENT"),
}


@pytest.mark.parametrize("style", sorted(SAVES))
@pytest.mark.parametrize("kind", sorted(AGENT_WRITES))
def test_a_save_made_while_an_agent_writes_the_file_is_kept_and_the_agent_told(memory, kind, style):
    target = memory.root / DOC
    with (
        saved_during_write(target, HUMANS, SAVES[style]) as made,
        pytest.raises((ChangedOnDisk, MemoryToolError)) as err,
    ):
        AGENT_WRITES[kind](memory)
    assert made and "changed on disk while this write was made" in str(err.value)
    assert target.read_bytes() == HUMANS
    assert not [p.name for p in target.parent.iterdir() if p.name.startswith(".fsmem-tmp")]


def test_a_save_half_made_when_an_agent_writes_is_finished_over_nothing_of_the_agents(memory):
    """vim has renamed the file to its backup and not yet written the new one; vim with `backupcopy=yes` has
    truncated it and written half. Either way the agent's write is refused, and the save, once finished, is whole
    (before, the agent was told it wrote, and vim's write then replaced it; or the rename left vim writing into a
    file that no longer had a name)."""
    target, backup = memory.root / DOC, memory.root / (DOC + "~")

    def renamed_away(path: Path, data: bytes) -> None:
        os.replace(path, backup)

    with saved_during_write(target, b"", renamed_away), pytest.raises(ChangedOnDisk):
        memory.edit(DOC, old="Mondays", new="Tuesdays")
    target.write_bytes(HUMANS)
    backup.unlink()
    assert target.read_bytes() == HUMANS

    handle = target.open("r+b")
    half = len(HUMANS) // 2

    def truncated_and_half_written(path: Path, data: bytes) -> None:
        handle.truncate(0)
        handle.write(HUMANS[:half])
        handle.flush()

    with saved_during_write(target, b"", truncated_and_half_written), pytest.raises(ChangedOnDisk):
        memory.edit(DOC, old="Mondays", new="Tuesdays")
    handle.write(HUMANS[half:] + b"- HUMAN: and a third line\n")
    handle.close()
    assert target.read_bytes() == HUMANS + b"- HUMAN: and a third line\n"


@pytest.mark.parametrize("style", sorted(SAVES))
def test_where_names_cannot_be_swapped_the_file_is_compared_before_the_rename(memory, monkeypatch, style):
    """macOS, Windows, a file system without RENAME_EXCHANGE: the same answer, the file compared, then renamed."""
    monkeypatch.setattr(beneath.exchange, "exchange", lambda *args: False)
    target = memory.root / DOC
    with saved_during_write(target, HUMANS, SAVES[style]), pytest.raises(ChangedOnDisk):
        memory.edit(DOC, old="Mondays", new="Tuesdays")
    assert target.read_bytes() == HUMANS
    memory.edit(DOC, old="Mondays", new="Tuesdays")  # nothing saved meanwhile: written
    assert b"Tuesdays" in target.read_bytes() and b"HUMAN" in target.read_bytes()
