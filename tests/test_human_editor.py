"""A person edits memory files in an editor while agents write and `fsmem consolidate` runs.

Editors save without fsmem's lock, each in its own way (`SAVES`: vim's rename with a backup and its `4913`
probe, vim's `backupcopy=yes` truncate-and-write, Emacs's lock link and backup, JetBrains' `___jb_tmp___`
and `___jb_old___`, an atomic save through `x.md.tmp`, nano's and Obsidian's writes in place). A save made in
place is written in chunks through a descriptor the editor holds (`SavingInPlace`): while it is open for
writing, fsmem replaces nothing of it. A save that lands while fsmem writes the same file
(after fsmem read it, before its rename) is kept: the agent is told its write was not made (ChangedOnDisk),
consolidation leaves the document and merges its notes again. The save is made at the one moment that
matters, while fsmem's new file is being synced (`Staged.sync`), so each case is the same every run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import write_file

from fsmem import Memory
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import ChangedOnDisk, InvalidArgument, MemoryToolError, StorageError
from fsmem.store import beneath, leases


def _leases_given() -> bool:
    """Whether this system gives read leases on a temporary file (Linux, leases on): a save in place is then kept."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder, "probe.md")
        probe.write_bytes(b"")  # closed: no descriptor holds it open for writing
        lease = leases.take(str(probe), None)
        given = lease is not None and lease.fd is not None
        if lease is not None:
            lease.release()
    return given


LEASES = _leases_given()
needs_leases = pytest.mark.skipif(not LEASES, reason="no read leases here: a save in place spanning a write is lost")


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


def _in_place(path: Path, data: bytes) -> None:
    """nano's, Obsidian's, `cp`'s and `echo >`'s save: the file itself truncated and written in chunks."""
    with path.open("wb") as handle:
        for start in range(0, len(data), 16):
            handle.write(data[start : start + 16])
            handle.flush()


SAVES: dict[str, Callable[[Path, bytes], None]] = {
    "vim": _vim,
    "vim-backupcopy": _vim_backupcopy,
    "emacs": _emacs,
    "jetbrains": _jetbrains,
    "atomic": _atomic,
    "in-place": _in_place,
}


class SavingInPlace:
    """A person's editor in the middle of a save made in place (nano, Obsidian, `cp`, vim's `backupcopy=yes`): the
    file truncated and its first part written through a descriptor the editor still holds; `finish` writes the
    rest. Until then a reader sees half a save."""

    def __init__(self, path: Path, data: bytes, written: int | None = None):
        self.data, self.written = data, len(data) // 2 if written is None else written
        self.handle = path.open("r+b")
        self.handle.truncate(0)
        self.handle.write(data[: self.written])
        self.handle.flush()

    def finish(self) -> None:
        self.handle.write(self.data[self.written :])
        self.handle.close()


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


@needs_leases
@pytest.mark.parametrize("kind", sorted(AGENT_WRITES))
def test_a_file_saved_in_place_in_chunks_is_not_replaced_between_two_chunks(memory, kind):
    """The editor has truncated the file and written half, and still holds it open: fsmem read that half and
    compared the file with it at its rename (equal), so it renamed its new file over, and the editor's next chunk
    went to the file taken out, which had no name any more: the save was lost, and the file kept half of it with
    the agent's change. Now a file open for writing is not replaced (a read lease is refused): the agent is told,
    and the save, once finished, is whole."""
    target = memory.root / DOC
    saving = SavingInPlace(target, HUMANS, written=len(ORIGINAL) - 1)  # `Mondays` written, its newline not yet
    with pytest.raises((ChangedOnDisk, MemoryToolError), match="changed on disk while this write was made"):
        AGENT_WRITES[kind](memory)
    saving.finish()
    assert target.read_bytes() == HUMANS
    assert not [p.name for p in target.parent.iterdir() if p.name.startswith(".fsmem-tmp")]


@needs_leases
@pytest.mark.parametrize("how", ["rm", "memory tool delete"])
def test_a_file_saved_in_place_while_an_agent_removes_it_stays(memory, how):
    """Without history, rm and the memory tool's delete removed the file as it was: a person saving it in place
    wrote the rest of their save into a file with no name. Now what goes is what was read, as with history."""
    target = memory.root / DOC
    saving = SavingInPlace(target, HUMANS)
    with pytest.raises((ChangedOnDisk, MemoryToolError), match="changed on disk while it was being"):
        if how == "rm":
            memory.rm(DOC)
        else:
            MemoryTool(memory.root.parent).delete(f"/memories/{DOC}")
    saving.finish()
    assert target.read_bytes() == HUMANS


@needs_leases
def test_a_document_saved_in_place_while_consolidation_runs_keeps_the_save_and_the_notes_wait(memory):
    memory.note("- Billing: invoices go out on Mondays", subject="topic/Billing", session="s1")
    memory.consolidate()
    target = memory.root / DOC
    saved = target.read_bytes() + b"- HUMAN: a line typed while consolidate ran\n"
    memory.note(NOTE, subject="topic/Billing", session="s1")
    saving = SavingInPlace(target, saved)
    report = memory.consolidate()
    saving.finish()
    assert target.read_bytes() == saved and report.conflicts
    memory.consolidate()
    assert "HUMAN: a line typed" in target.read_text() and "refunds are paid within five days" in target.read_text()


@needs_leases
def test_a_session_note_half_saved_in_place_is_not_merged_until_it_is_whole(memory):
    """A person is saving a session note in place and has written up to the middle of a line: consolidation merged
    that cut line (`- Billing: refunds are paid withi`) into the document for good, and the whole line beside it
    on the next run. Now a note open for writing waits for the next run."""
    from fsmem.consolidate.gather import BEING_SAVED

    note = (
        memory.root / memory.note("- Billing: invoices go out on Mondays", subject="topic/Billing", session="s1").path
    )
    saved = note.read_bytes() + NOTE.encode() + b"\n"
    saving = SavingInPlace(note, saved, written=len(saved) - 12)
    report = memory.consolidate()
    saving.finish()
    assert (note.relative_to(memory.root).as_posix(), 1, BEING_SAVED) in report.problems
    memory.consolidate()
    text = (memory.root / DOC).read_text()
    assert "refunds are paid within five days" in text and "withi " not in text and "withi\n" not in text


@needs_leases
def test_a_session_note_saved_in_place_while_an_agent_notes_keeps_the_save(memory):
    note = memory.root / memory.note("- Billing: invoices go out on Mondays", session="s1").path
    saved = note.read_bytes() + b"- HUMAN: added by hand\n"
    saving = SavingInPlace(note, saved)
    with pytest.raises(ChangedOnDisk):
        memory.note("- Billing: refunds by card", session="s1")
    saving.finish()
    assert note.read_bytes() == saved
    memory.note("- Billing: refunds by card", session="s1")
    assert b"- HUMAN: added by hand\n" in note.read_bytes() and b"refunds by card" in note.read_bytes()


@needs_leases
def test_a_file_opened_for_writing_while_fsmem_swaps_it_is_swapped_back(memory, monkeypatch):
    """An editor that opened the file before fsmem's swap and writes after it: its open waits for fsmem's lease
    and marks it broken, so the file taken out is swapped back, and the editor's write lands in the named file
    (before, it went to the file fsmem took out and removed)."""
    import threading

    target, holds, opened = memory.root / DOC, beneath._holds, []

    def editor_opens(taken_out: Path) -> None:
        with taken_out.open("r+b") as handle:  # waits for fsmem's lease to be given up
            handle.truncate(0)
            handle.write(HUMANS)
        opened.append(True)

    def holds_while_an_editor_opens(folder, name, expect):
        threading.Thread(target=editor_opens, args=(Path(folder.path, name),), daemon=True).start()
        for _ in range(2000):  # until the kernel says the lease is being broken
            if "BREAKING" in Path("/proc/locks").read_text() or opened:
                break
            threading.Event().wait(0.005)
        return holds(folder, name, expect)

    monkeypatch.setattr(beneath, "_holds", holds_while_an_editor_opens)
    with pytest.raises(ChangedOnDisk):
        memory.edit(DOC, old="Mondays", new="Tuesdays")
    for _ in range(2000):
        if opened:
            break
        threading.Event().wait(0.005)
    assert opened and target.read_bytes() == HUMANS


NOTE = "- Billing: refunds are paid within five days"


@pytest.mark.parametrize("kind", sorted(AGENT_WRITES))
def test_a_file_a_person_made_read_only_is_left_as_it_is(memory, kind):
    """`chmod a-w`: fsmem replaces a file by a rename, which the file's mode does not stop, so every agent's write
    went through (and kept the mode). Now the agent is told the file is read-only, and nothing is written."""
    target = memory.root / DOC
    target.chmod(0o444)
    with pytest.raises((StorageError, MemoryToolError), match="read-only"):
        AGENT_WRITES[kind](memory)
    assert target.read_bytes() == ORIGINAL


def test_consolidation_leaves_a_read_only_document_and_its_notes_wait(memory):
    from fsmem.consolidate.apply import READ_ONLY

    memory.note(NOTE, subject="topic/Billing", session="s1")
    memory.consolidate()
    target = memory.root / DOC
    made = target.read_bytes()
    target.chmod(0o444)
    memory.note("- Billing: invoices go out on Tuesdays", subject="topic/Billing", session="s1")
    report = memory.consolidate()
    assert target.read_bytes() == made and (DOC, 1, READ_ONLY) in report.problems
    target.chmod(0o644)
    memory.consolidate()
    assert "invoices go out on Tuesdays" in target.read_text()


def test_a_folder_that_may_not_be_written_leaves_its_documents_and_the_run_goes_on(memory, monkeypatch):
    """A person made `topics/` read-only (`chmod a-w`, for a user other than root): the system refuses fsmem's
    temporary file there, and the whole run stopped (StorageError, exit 2), other folders' documents and every
    note mark unwritten. Now its documents are reported, their notes wait, and the rest is written. (The tests
    run as root, whom a folder's mode does not stop: the refusal is made as the system makes it.)"""
    import errno

    memory.note("- Billing: invoices go out on Mondays", subject="topic/Billing", session="s1")
    memory.note("- Ada: prefers email", subject="person/Ada", session="s1")
    init = beneath.Staged.__init__

    def refused_in_topics(staged, target, data, **kwargs):
        if target.inside.startswith("topics/"):
            raise PermissionError(errno.EACCES, "Permission denied", target.folder.path)
        init(staged, target, data, **kwargs)

    monkeypatch.setattr(beneath.Staged, "__init__", refused_in_topics)
    report = memory.consolidate()
    assert [p[0] for p in report.problems] == [DOC] and "Permission denied" in report.problems[0][2]
    assert "prefers email" in (memory.root / "entities/person/ada.md").read_text()
    assert (memory.root / DOC).read_bytes() == ORIGINAL
    monkeypatch.setattr(beneath.Staged, "__init__", init)
    memory.consolidate()
    assert "invoices go out on Mondays" in (memory.root / DOC).read_text()


@pytest.mark.parametrize("style", sorted(SAVES))
def test_a_document_saved_while_consolidation_writes_it_keeps_the_save_and_the_notes(memory, style):
    memory.note("- Billing: invoices go out on Mondays", subject="topic/Billing", session="s1")
    memory.consolidate()
    target = memory.root / DOC
    saved = target.read_bytes() + b"\n- HUMAN: a line typed while consolidate ran\n"
    memory.note(NOTE, subject="topic/Billing", session="s1")
    with saved_during_write(target, saved, SAVES[style]) as made:
        report = memory.consolidate()
    assert made
    text = target.read_text()
    assert "HUMAN: a line typed while consolidate ran" in text
    assert "refunds are paid within five days" in text  # merged again by the run's next attempt
    assert report.attempts == 2 and not report.conflicts


def test_a_session_note_saved_while_consolidation_marks_it_keeps_the_save(memory):
    """The note is marked (its `consolidated:` field) after the documents are written: a person adding a line to
    it at that moment keeps the line, and the note stays unmarked, so the next run merges it."""
    result = memory.note(NOTE, subject="topic/Billing", session="s1")
    note = memory.root / result.path
    memory.consolidate()  # a first run: the document exists, so the next run's first staged file is the note
    memory.note("- Billing: invoices go out on Tuesdays", subject="topic/Billing", session="s1")
    added = note.read_bytes() + b"- Billing: HUMAN added this by hand\n"
    sync = beneath.Staged.sync

    def sync_while_saving(staged: beneath.Staged) -> None:
        if staged.place.name == note.name:
            _vim(note, added)
        sync(staged)

    beneath.Staged.sync = sync_while_saving  # type: ignore[method-assign]
    try:
        memory.consolidate()
    finally:
        beneath.Staged.sync = sync  # type: ignore[method-assign]
    assert note.read_bytes() == added
    memory.consolidate()
    assert "HUMAN added this by hand" in (memory.root / DOC).read_text()


@pytest.mark.parametrize("style", sorted(SAVES))
def test_where_names_cannot_be_swapped_the_file_is_compared_before_the_rename(memory, monkeypatch, style):
    """macOS, Windows, a file system without RENAME_EXCHANGE: the same answer, the file compared, then renamed."""
    from fsmem.store import exchange

    monkeypatch.setattr(exchange, "exchange", lambda *args: False)
    target = memory.root / DOC
    with saved_during_write(target, HUMANS, SAVES[style]), pytest.raises(ChangedOnDisk):
        memory.edit(DOC, old="Mondays", new="Tuesdays")
    assert target.read_bytes() == HUMANS
    memory.edit(DOC, old="Mondays", new="Tuesdays")  # nothing saved meanwhile: written
    assert b"Tuesdays" in target.read_bytes() and b"HUMAN" in target.read_bytes()


def _everything(root: Path) -> str:
    """Every byte of the memory's files (not `.fsmem/`, not `.git/`), as text, to look for a word in."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".fsmem", ".git")]
        found += [Path(folder, name).read_bytes().decode("utf-8", "replace") for name in files]
    return "\n".join(found)


def _without_updated(data: bytes) -> list[bytes]:
    return [line for line in data.splitlines(keepends=True) if not line.startswith(b"updated:")]


HEADS = {  # how a person's file may begin and end its lines: fsmem keeps every byte it did not change
    "plain": (b"", b"\n", b"title: T\n"),
    "crlf": (b"", b"\r\n", b"title: T\r\n"),
    "bom": (b"\xef\xbb\xbf", b"\n", b"title: T\n"),
    "tabs": (b"", b"\n", b"title:\tT\ntags:\t[a]\n"),
    "mixed": (b"", b"\r\n", b"title: T\n"),
}


def test_no_save_is_lost_whoever_writes_and_whenever(tmp_path_factory, monkeypatch):
    """A hypothesis state machine: people save files in each editor's way (CRLF, a BOM, tabs in front matter),
    agents edit them (fsmem's edit, the memory tool), write notes and run consolidation, and a person saves the
    same file while fsmem writes it. After every step each word a person saved, and each word an agent was told
    it wrote, is in the memory's files; an agent's edit changed only its own bytes."""
    from hypothesis import HealthCheck, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

    monkeypatch.setenv("FSMEM_NOW", "2026-03-01T12:00:00+00:00")
    names = st.sampled_from(["topics/a.md", "topics/b.md", "people/c.md"])
    styles = st.sampled_from(sorted(SAVES))
    during = st.one_of(st.none(), styles)

    class People(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.memory = Memory.init(tmp_path_factory.mktemp("people") / "base" / "memories")
            self.root = self.memory.root
            self.words: set[str] = set()  # on disk, and must stay there
            self.count = 0

        def word(self, who: str) -> str:
            self.count += 1
            return f"{who}{self.count}x"

        def files(self) -> list[str]:
            return [n for n in ("topics/a.md", "topics/b.md", "people/c.md") if (self.root / n).is_file()]

        def save(self, rel: str, style: str) -> None:
            """A person adds a line to `rel` in their editor, ending it as the file ends its lines."""
            path = self.root / rel
            data = path.read_bytes()
            newline = b"\r\n" if data.endswith(b"\r\n") else b"\n"
            word = self.word("human")
            SAVES[style](path, data + f"- {word}".encode() + newline)
            self.words.add(word)

        @rule(rel=names, head=st.sampled_from(sorted(HEADS)), style=styles)
        def person_writes_a_file(self, rel, head, style):
            bom, newline, front = HEADS[head]
            word = self.word("human")
            data = bom + b"---" + newline + front + b"---" + newline + f"# {word}".encode() + newline
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                replaced = path.read_bytes().decode("utf-8")
                self.words = {w for w in self.words if w not in replaced}  # theirs to drop
                SAVES[style](path, data)
            else:
                path.write_bytes(data)
            self.words.add(word)

        @precondition(lambda self: self.files())
        @rule(data=st.data(), style=styles)
        def person_saves(self, data, style):
            self.save(data.draw(st.sampled_from(self.files())), style)

        @precondition(lambda self: self.files())
        @rule(data=st.data(), tool=st.booleans(), style=during)
        def agent_edits(self, data, tool, style):
            rel = data.draw(st.sampled_from(self.files()))
            path = self.root / rel
            before = path.read_bytes()
            anchor = before.decode("utf-8").split("# ", 1)[1].split("\n", 1)[0].rstrip("\r")
            word = self.word("agent")
            context = saved_during_write(path, b"", lambda p, _d: self.save(rel, style)) if style else None
            with context or contextlib.nullcontext():
                try:
                    if tool:
                        MemoryTool(self.root.parent).str_replace(f"/memories/{rel}", anchor, f"{anchor} {word}")
                    else:
                        self.memory.edit(rel, old=anchor, new=f"{anchor} {word}")
                except (ChangedOnDisk, MemoryToolError) as exc:
                    assert style is not None and "changed on disk" in str(exc)
                    return
            assert style is None
            self.words.add(word)
            expected = before.replace(anchor.encode(), f"{anchor} {word}".encode(), 1)
            assert _without_updated(path.read_bytes()) == _without_updated(expected)

        @precondition(lambda self: LEASES and self.files())
        @rule(data=st.data(), what=st.sampled_from(["set", "memory tool insert", "consolidation", "rm"]))
        def agent_writes_while_a_person_saves_in_place(self, data, what):
            """The person's editor has written part of its save in place and holds the file open: whatever fsmem
            does then, the save, once finished, is the file's bytes."""
            documents = sorted(
                p.relative_to(self.root).as_posix()
                for p in [*(self.root / "topics").glob("*.md"), *(self.root / "sessions").rglob("*.md")]
            )
            rel = data.draw(st.sampled_from(sorted(set(self.files() + documents))))
            path = self.root / rel
            word = self.word("human")
            saved = path.read_bytes() + f"- {word}\n".encode()
            saving = SavingInPlace(path, saved, data.draw(st.integers(0, len(saved))))
            try:
                if what == "set":
                    self.memory.write(rel, set={"tags": [self.word("agent")]})
                elif what == "memory tool insert":
                    MemoryTool(self.root.parent).insert(f"/memories/{rel}", 1, self.word("agent"))
                elif what == "rm":
                    self.memory.rm(rel)
                else:
                    self.memory.consolidate()
            except (ChangedOnDisk, MemoryToolError, InvalidArgument):
                pass
            saving.finish()
            assert path.read_bytes() == saved
            self.words.add(word)

        @rule(subject=st.sampled_from(["topic/Billing", "topic/Travel", "person/Ada"]))
        def agent_notes(self, subject):
            word = self.word("agent")
            self.memory.note(f"- {subject.split('/')[1]}: fact {word}", subject=subject, session="s1")
            self.words.add(word)

        @rule(style=during)
        def consolidation(self, style):
            documents = [p for p in (self.root / "topics").glob("*.md") if p.name not in ("a.md", "b.md")]
            if style and documents:
                rel = documents[0].relative_to(self.root).as_posix()
                with saved_during_write(documents[0], b"", lambda p, _d: self.save(rel, style)):
                    self.memory.consolidate()
            else:
                self.memory.consolidate()

        @invariant()
        def every_word_is_kept(self):
            everything = _everything(self.root)
            assert not [word for word in self.words if word not in everything]

    People.TestCase.settings = settings(
        max_examples=6 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1")),
        stateful_step_count=15,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    People.TestCase().runTest()


def test_a_document_saved_while_its_links_to_archived_notes_are_rewritten_keeps_both(memory):
    """With `consolidate.archive`, a run moves the notes it consolidated and rewrites the links to them in files
    written by hand: a save of such a file at that moment is kept, and the links are rewritten in what was saved."""
    from conftest import configure

    configure(memory.root, {"consolidate": {"archive": True}})
    note = memory.note(NOTE, subject="topic/Billing", session="s1").path
    target = memory.root / "people/ada.md"
    write_file(memory.root, "people/ada.md", f"# Ada\n\n- asked about refunds ([then](../{note}))\n")
    syncs: list[beneath.Staged] = []
    sync = beneath.Staged.sync

    def sync_while_saving(staged: beneath.Staged) -> None:
        if staged.place.name == target.name:
            syncs.append(staged)
            if len(syncs) == 1:
                _vim(target, target.read_bytes() + b"- HUMAN: typed while links were rewritten\n")
        sync(staged)

    beneath.Staged.sync = sync_while_saving  # type: ignore[method-assign]
    try:
        report = Memory(memory.root).consolidate()
    finally:
        beneath.Staged.sync = sync  # type: ignore[method-assign]
    text = target.read_text()
    assert len(syncs) == 2 and report.notes_archived == [note] and not report.problems
    assert "HUMAN: typed while links were rewritten" in text
    assert "](../archive/sessions/" in text and "](../sessions/" not in text


@pytest.mark.slow
def test_after_each_editors_save_the_watchers_answers_are_the_walks(tmp_path):
    """`fsmem watch` answers one-shot reads: after every editor's save (and halfway through one made in place),
    with what a crashed editor leaves beside the file (swap, backup, autosave, lock link, `___jb_old___`, `.tmp`,
    vim's `4913`), a file made a folder of the same name and a rename that changes only case, each read asked of
    the watcher is the walk's answer, and no editor file is listed as a memory file."""
    from test_rendezvous import Watcher, both

    memory = Memory.init(tmp_path / "mem")
    root = memory.root
    write_file(root, DOC, ORIGINAL.decode())
    watcher = Watcher(root)
    try:
        for number, (style, save) in enumerate(sorted(SAVES.items())):
            target = root / DOC
            save(target, target.read_bytes() + f"- zephyr{number} saved by {style}\n".encode())
            both(root, "grep", f"zephyr{number}")
        for number in range(3):  # asked halfway through a save in place, then once it is whole
            saving = SavingInPlace(target, target.read_bytes() + f"- zephyr-whole{number}\n".encode())
            both(root, "grep", "zephyr")
            saving.finish()
            both(root, "grep", f"zephyr-whole{number}")
            both(root, "read", DOC)
        leftovers = [
            ".billing.md.swp",
            "billing.md~",
            "#billing.md#",
            "billing.md___jb_old___",
            "billing.md.tmp",
            "4913",
        ]
        for name in leftovers:
            (root / "topics" / name).write_bytes(b"- zephyr left by an editor\n")
        os.symlink("human@desk.4242:1700000000", root / "topics/.#billing.md")
        listed = both(root, "ls", "topics", "--json")[1].decode()
        assert "billing.md" in listed and not [name for name in leftovers if f"topics/{name}" in listed]
        both(root, "grep", "zephyr")
        (root / "topics/billing.md").unlink()
        write_file(root, "topics/billing.md/inside.md", "# Inside\n\n- zephyr in a folder named like a file\n")
        both(root, "ls", "--json")
        both(root, "grep", "zephyr")
        os.replace(root / "topics/billing.md/inside.md", root / "topics/billing.md/Inside.md")
        both(root, "ls", "--json")
        both(root, "read", "topics/billing.md/Inside.md")
    finally:
        watcher.stop()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_new_body_under_front_matter_alone_without_a_last_newline_keeps_the_front_matter(memory, newline):
    """A person saved a file of front matter alone, the closing `---` without a newline (editors that do not
    add one). A new body went straight after it (`---# New body`): the front matter was no longer closed, so
    its title and every field became body text."""
    from fsmem import format as fmt

    target = memory.root / "topics/only-front.md"
    target.write_bytes(f"---{newline}title: Only front{newline}tags: [kept]{newline}---".encode())
    memory.write("topics/only-front.md", "# New body\n")
    data = target.read_bytes().decode()
    assert data.startswith(f"---{newline}title: Only front{newline}tags: [kept]{newline}")
    assert f"{newline}---{newline}# New body\n" in data
    assert fmt.split(data).front_matter["tags"] == ["kept"] and not fmt.split(data).problems


def test_a_document_made_a_folder_while_consolidation_plans_is_left_and_the_run_ends(memory, monkeypatch):
    """A person replaces a document with a folder of the same name after the run read it: the run failed whole
    (StorageError `is a directory`, exit 2); now the document is a conflict, the retry reports it skipped, and
    the folder and what it holds are left as they are."""
    from fsmem.consolidate import plan

    memory.note(NOTE, subject="topic/Billing", session="s1")
    memory.consolidate()
    memory.note("- Billing: invoices go out on Tuesdays", subject="topic/Billing", session="s1")
    target, planned = memory.root / DOC, plan.plan

    def plan_then_a_folder(*args, **kwargs):
        made = planned(*args, **kwargs)
        if target.is_file():
            saved = target.read_bytes()
            target.unlink()
            target.mkdir()
            (target / "saved.md").write_bytes(saved)
        return made

    monkeypatch.setattr(plan, "plan", plan_then_a_folder)
    report = memory.consolidate()
    assert (target / "saved.md").read_bytes().startswith(b"---\ntitle: Billing")
    assert [p[0] for p in report.problems] == [DOC] and "Is a directory" in report.problems[0][2]


@pytest.mark.parametrize("style", sorted(SAVES))
def test_a_note_written_while_a_person_saves_the_session_note_is_appended_to_their_save(memory, style):
    """A note is an append: one that finds its session note saved by a person while it was written is made again
    on what they saved, where an edit or a write is refused (ChangedOnDisk) for the agent to read again."""
    first = memory.note("- Billing: invoices go out on Mondays", session="s1")
    note = memory.root / first.path
    saved = note.read_bytes() + b"- HUMAN: added by hand\n"
    with saved_during_write(note, saved, SAVES[style]) as made:
        memory.note("- Billing: refunds by card", session="s1")
    data = note.read_bytes()
    assert made and data.startswith(saved.split(b"updated:")[0])
    assert b"- HUMAN: added by hand\n" in data and b"refunds by card" in data


@pytest.mark.parametrize("style", sorted(SAVES))
def test_a_file_saved_while_an_agent_removes_it_stays_and_history_loses_nothing(tmp_path, monkeypatch, style):
    """With history, rm reads the file (its last version, for the commit), journals, then removes it: a save made
    in between was removed with it, and history held only the version before (the person's lines nowhere).
    Now the file is taken aside, read, and removed only if it is what was read; else it is put back."""
    from fsmem.history import journal

    memory = Memory.init(tmp_path / "mem", git=True)
    write_file(memory.root, DOC, ORIGINAL.decode())
    target, prepare = memory.root / DOC, journal.prepare

    def prepare_while_saving(*args, **kwargs):
        SAVES[style](target, HUMANS)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(journal, "prepare", prepare_while_saving)
    with pytest.raises(ChangedOnDisk, match="changed on disk while it was being removed"):
        memory.rm(DOC)
    monkeypatch.setattr(journal, "prepare", prepare)
    assert target.read_bytes() == HUMANS
    assert not [p.name for p in target.parent.iterdir() if p.name.startswith(".fsmem-tmp")]
    memory.rm(DOC)  # nothing saved meanwhile: removed, and its last version is history's
    assert not target.exists()
    logged = subprocess.run(
        ["git", "-C", str(memory.root), "log", "-p", "--", DOC], capture_output=True, text=True, check=True
    ).stdout
    assert "-- HUMAN: refunds need two approvals" in logged  # the removal's diff takes the person's line away


def test_a_file_saved_twice_while_it_is_removed_keeps_both_saves(memory, monkeypatch):
    """The first save is taken aside with the file; a second one takes the name before the first is put back:
    the first is kept beside it as `x.md.fsmem-kept`, which the agent's error names."""
    target, holds = memory.root / DOC, beneath._holds

    def holds_while_saving_again(folder, name, expect):
        target.write_bytes(HUMANS + b"- HUMAN: the second save\n")
        return holds(folder, name, expect)

    monkeypatch.setattr(beneath, "_holds", holds_while_saving_again)
    assert not beneath.remove_if(memory.root, DOC, b"what the agent read")
    assert target.read_bytes().endswith(b"- HUMAN: the second save\n")
    assert (memory.root / (DOC + beneath.KEPT_SUFFIX)).read_bytes() == ORIGINAL


def test_a_file_saved_while_the_memory_tool_deletes_it_stays(tmp_path, monkeypatch):
    """The memory tool's delete over a memory with history reads the file (for the commit), then removes it: a
    save right after that read was removed with it and in no commit. Now it is put back and the model told."""
    memory = Memory.init(tmp_path / "base" / "memories", git=True)
    write_file(memory.root, DOC, ORIGINAL.decode())
    target, contents = memory.root / DOC, MemoryTool._contents

    def read_then_saved(tool: MemoryTool, full: Path) -> list[tuple[str, bytes]]:
        found = contents(tool, full)
        _vim(target, HUMANS)
        return found

    monkeypatch.setattr(MemoryTool, "_contents", read_then_saved)
    tool = MemoryTool(memory.root.parent)
    with pytest.raises(MemoryToolError, match="changed on disk while it was being deleted"):
        tool.delete(f"/memories/{DOC}")
    monkeypatch.setattr(MemoryTool, "_contents", contents)
    assert target.read_bytes() == HUMANS
    tool.delete(f"/memories/{DOC}")
    assert not target.exists()


@pytest.mark.parametrize("style", sorted(SAVES))
def test_a_file_saved_while_a_restore_writes_it_keeps_the_save(tmp_path, style):
    """restore and revert compared the file with their plan, then renamed the version from history over it: a
    save made in between was replaced, and in no commit (lost). Now the file is replaced only if it still holds
    what was planned from: the save stays, and the agent is told the file changed while the restore was written."""
    memory = Memory.init(tmp_path / "mem", git=True)
    memory.write("topics/plan.md", "# Plan\n\n- one\n")
    memory.edit("topics/plan.md", old="- one", new="- two")
    target = memory.root / "topics/plan.md"
    saved = target.read_bytes() + b"- HUMAN: typed while the restore ran\n"
    with saved_during_write(target, saved, SAVES[style]) as made, pytest.raises(ChangedOnDisk, match="restore"):
        memory.restore("topics/plan.md", at="HEAD~1")
    assert made and target.read_bytes() == saved
