"""`fsmem import FORMAT PATH`: history from outside the memory (chat exports, transcripts, notes) brought in.

The input is read twice: once to check all of it (a malformed file stops here, with its file and line,
and nothing is written), then again to write, so that a 1 GB export is never held in memory. The writes
are transactions of at most `HOLD` seconds each (others' writes wait no longer than that), one journal
entry per file. Each conversation, and each note of a folder, passes the secrets policy on its own: a
refused one is skipped and named, the rest come in. Importing the same input again changes nothing;
a conversation that grew adds only its new lines (`fsmem.importers.notes`).

Not a tool: it reads a path on the operator's machine, outside the memory, so it is declared with
`tool=False` and no agent, MCP client or token of `fsmem serve` is ever offered it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from fsmem.budget import named
from fsmem.errors import InvalidArgument, NotFound, SecretFound
from fsmem.format import secrets
from fsmem.importers import Conversation
from fsmem.operations.core import Core, Report, whole_memory
from fsmem.operations.transaction import Transaction, require_writable, transaction
from fsmem.store.note_folders import SESSIONS, NoteFolders
from fsmem.store.writing import Change, WriteResult

if TYPE_CHECKING:
    from fsmem.importers.notes import Held

HOLD = 2.0  # seconds one transaction of an import holds the write lock
SHOWN = 20  # items of each list that the text report shows
LISTED = 200  # items of each list that the JSON report carries


@dataclass
class ImportReport(Report):
    """What an import did: the notes it created and extended, how many were unchanged, and what it skipped, why."""

    format: str
    source: str
    created: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    other_files: int = 0  # markdown: files that are not Markdown, left where they are
    created_count: int = 0
    extended_count: int = 0
    skipped_count: int = 0

    @property
    def empty(self) -> bool:
        return False

    def add(self, kind: str, item: Any) -> None:
        """Count one outcome, keeping at most LISTED of each list."""
        counts = {"created": "created_count", "extended": "extended_count", "skipped": "skipped_count"}
        setattr(self, counts[kind], getattr(self, counts[kind]) + 1)
        kept = getattr(self, kind)
        if len(kept) < LISTED:
            kept.append(item)

    @property
    def noun(self) -> str:
        return "notes" if self.format == "markdown" else "conversations"

    def to_dict(self) -> dict[str, Any]:
        return {
            **named(self, "format", "source"),
            "created": self.created_count,
            "extended": self.extended_count,
            "unchanged": self.unchanged,
            "skipped": self.skipped_count,
            "other_files": self.other_files,
            "created_paths": self.created,
            "extended_paths": self.extended,
            "skipped_items": [{"item": what, "reason": why} for what, why in self.skipped],
            "left_out": {
                "created_paths": self.created_count - len(self.created),
                "extended_paths": self.extended_count - len(self.extended),
                "skipped_items": self.skipped_count - len(self.skipped),
            },
        }

    def to_text(self) -> str:
        head = (
            f"imported {self.format} from {self.source}: {self.created_count} new, {self.extended_count} extended, "
            f"{self.unchanged} unchanged, {self.skipped_count} skipped {self.noun}"
        )
        if self.other_files:
            head += f"; {self.other_files} files that are not Markdown left out"
        lines = [head]
        for label, items, total in (
            ("new", self.created, self.created_count),
            ("extended", self.extended, self.extended_count),
        ):
            lines += [f"  {label}: {item}" for item in items[:SHOWN]]
            if total > SHOWN:
                lines.append(f"  … and {total - SHOWN} more {label} (--json lists {LISTED})")
        lines += [f"  skipped: {what}: {why}" for what, why in self.skipped[:SHOWN]]
        if self.skipped_count > SHOWN:
            lines.append(f"  … and {self.skipped_count - SHOWN} more skipped (--json lists {LISTED})")
        return "\n".join(lines)


class Batches:
    """Transactions of at most HOLD seconds each, opened as writes come and closed at the end.

    Files are written without an fsync each (`write`) and made durable together when their transaction
    closes, before it commits: an fsync after each note made an import
    measurably slower (docs/performance.md, "Importing a large export").
    """

    def __init__(self, memory: Core):
        self.memory = memory
        self.stack: contextlib.ExitStack | None = None
        self.tx: Transaction | None = None
        self.since = 0.0
        self.unsynced: list[Path] = []

    def write(self, tx: Transaction, result: WriteResult, path: Path, data: bytes) -> None:
        """Write one file of the import, its history journalled before it (as every write's: a write killed
        before its entry became pending is still committed as the import's, `fsmem.history.journal.adopt`)."""
        from fsmem.store.files import atomic_write

        message = f"import {result.path}"
        with tx.ahead(result, message):
            atomic_write(path, data, durable=False, root=self.memory.root)  # through no link out (`beneath`)
        self.unsynced.append(path)
        tx.wrote(result, message)

    def _sync(self) -> None:
        paths, self.unsynced = self.unsynced, []
        if not paths:
            return
        # each file, then each folder, in a row: the first fsync's journal commit carries most of the others
        from fsmem.store.files import fsync_dir

        for path in [*paths, *dict.fromkeys(p.parent for p in paths)]:
            fsync_dir(path)

    def current(self) -> Transaction:
        if self.tx is not None and time.monotonic() - self.since > HOLD:
            self.close()
        if self.tx is None:
            self.stack = contextlib.ExitStack()
            self.tx = self.stack.enter_context(transaction(self.memory))
            self.since = time.monotonic()
        return self.tx

    def close(self) -> None:
        if self.stack is not None:
            stack, self.stack, self.tx = self.stack, None, None
            try:
                self._sync()
            finally:
                stack.close()


def import_from(memory: Core, format: str, path: str, *, into: str | None = None) -> ImportReport:
    """Bring a chat export, Claude Code transcripts or a folder of Markdown notes at `path` into the memory.

    Conversations (claude-code, chatgpt, claude) become episodic session notes dated by their own start;
    Markdown notes go under `into` (default `topics/<folder name>/`), keeping their relative paths.
    """
    require_writable(memory)
    whole_memory(memory, "import")
    if into is not None and format != "markdown":
        from fsmem import faces

        raise InvalidArgument(f"{faces.arg('into')} is for markdown: conversations always go to sessions/")
    source = _source(memory, path)
    if format == "markdown":
        return _markdown(memory, source, into)
    from fsmem.importers import chats, transcripts

    readers: dict[str, Callable[[Path], Iterator[Conversation]]] = {
        "claude-code": transcripts.read,
        "chatgpt": chats.chatgpt,
        "claude": chats.claude,
    }
    read = readers[format]
    for _ in read(source):  # the first reading: a fault anywhere stops the import before anything is written
        pass
    report = ImportReport(format, str(source))
    folders = NoteFolders(memory.root, memory.config.consolidate.archive_dir)
    refused = folders.refusal(SESSIONS)
    if refused is not None:  # not walked, not written: a note there would land where the link leads
        raise InvalidArgument(f"cannot import conversations: {refused}; nothing was written")
    sessions = _session_notes(memory.root, folders)
    batches = Batches(memory)
    try:
        for conversation in read(source):
            _one_conversation(memory, batches, folders, sessions, conversation, report)
    finally:
        batches.close()
    return report


def _source(memory: Core, path: str) -> Path:
    """The input, absolute; refused when it is inside the memory (an import would copy the memory into itself)."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise InvalidArgument("give the path of the export, transcript or folder to import")
    source = Path(os.path.abspath(Path(path).expanduser()))
    if not source.exists():
        raise NotFound(f"{source} does not exist; nothing was imported")
    real, root = os.path.realpath(source), os.path.realpath(memory.root)
    if real == root or real.startswith(root + os.sep) or root.startswith(real + os.sep):
        raise InvalidArgument(f"{source} is inside the memory (or holds it); import reads from outside it")
    return source


def _session_notes(root: Path, folders: NoteFolders) -> dict[str, list[Path]]:
    """Every session note by its session's name (its file name), wherever it is dated: under `sessions/`, then
    in the archive (a conversation whose note consolidation archived is that note's, never a second one)."""
    found: dict[str, list[Path]] = {}
    for base in folders.named:
        for folder, dirs, files in os.walk(root / base):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".md"):
                    found.setdefault(name[:-3], []).append(Path(folder) / name)
    return found


def _screened(memory: Core, lines: tuple[str, ...], first: int) -> tuple[str, ...]:
    """Lines as the secrets policy lets them in (SecretFound: the conversation stays out); `first` numbers them."""
    policy = memory.secrets_policy
    return tuple(secrets.screen(line, policy, f"its line {number}") for number, line in enumerate(lines, first))


def _one_conversation(
    memory: Core,
    batches: Batches,
    folders: NoteFolders,
    sessions: dict[str, list[Path]],
    conv: Conversation,
    report: ImportReport,
) -> None:
    """Bring one conversation into its note: a new note, or the lines after those its record holds."""
    from dataclasses import replace

    from fsmem import format as fmt
    from fsmem.importers import notes
    from fsmem.operations import transcripts as transcripts_op
    from fsmem.store.paths import relative
    from fsmem.store.writing import read_text, session_note_path

    named = f"{conv.title!r} ({conv.where})"
    if not conv.lines:
        report.add("skipped", (named, "nothing was said in it"))
        return
    session = notes.session_of(conv)
    found = [p for p in sessions.get(session, []) if p.is_file()]
    if conv.started is None and not found:  # a note is dated by its conversation's start
        report.add("skipped", (named, "it has no date"))
        return
    tx = batches.current()  # the lock is held from here: what is on disk is what this write sees
    target = found[0] if conv.started is None else session_note_path(memory.root, session, conv.started)
    existing = [p for p in found if p != target]
    if target.is_file():
        existing.insert(0, target)
    rel = relative(memory.root, target)
    refused = folders.write_problem(relative(memory.root, existing[0]) if existing else rel)
    if refused is not None:  # a note that is a link to a file that is no note
        report.add("skipped", (named, refused))
        return
    try:
        if not existing:
            title = secrets.screen(conv.title, memory.secrets_policy, "its title")
            lines = _screened(memory, conv.lines, 1)
        else:
            note = existing[0]
            note_rel = relative(memory.root, note)
            before = note.read_bytes()
            text = read_text(note)
            front = fmt.split(text).front_matter
            held = transcripts_op.held_of(memory.root, front, conv.key, session, conv.transcript)
            if held is None:
                why = f"{note_rel} holds other notes of this session, not saved by fsmem; left as it is"
                report.add("skipped", (named, why))
                return
            if not held.holds_start_of(conv.lines):
                report.add("skipped", (named, f"it changed since {note_rel} was imported (not only at its end)"))
                return
            lines = _screened(memory, conv.lines[held.lines :], held.lines + 1)
    except SecretFound as exc:
        report.add("skipped", (named, str(exc).split(";")[0]))
        return
    if not existing:
        data = notes.new_note(replace(conv, title=title), lines, _record(conv)).encode("utf-8")
        batches.write(tx, WriteResult("note", rel, created=True, changes=[Change(rel, None, data)]), target, data)
        sessions.setdefault(session, []).append(target)
        report.add("created", rel)
        _tell_the_hook(memory, conv)
        return
    assert held is not None
    kept_folder = conv.cwd is None or notes.CWD_FIELD in front  # a note saved before fsmem kept it gets it now
    if held.lines == len(conv.lines) and held.bytes in (None, conv.transcript_end) and kept_folder:
        report.unchanged += 1
        _tell_the_hook(memory, conv)
        return
    data = notes.extended(text, conv, lines, _record(conv), front=front).encode("utf-8")
    batches.write(tx, WriteResult("note", note_rel, changes=[Change(note_rel, before, data)]), note, data)
    if lines:
        report.add("extended", note_rel)
    else:
        report.unchanged += 1
    _tell_the_hook(memory, conv)


def _record(conv: Conversation) -> Held:
    """The record of a conversation whose every line the note now holds."""
    from fsmem.importers import notes

    end = conv.transcript_end if conv.transcript is not None else None
    return notes.Held(len(conv.lines), notes.digest(conv.lines), end)


def _tell_the_hook(memory: Core, conv: Conversation) -> None:
    """The transcript is in the memory to its end: no command need finish it any more."""
    if conv.transcript is None:
        return
    from fsmem.hooks.claude_code import Pending

    try:
        Pending(memory.root).done(conv.transcript)
    except OSError:
        pass  # the hook's own state: at worst the next command finds nothing more to save


def _markdown(memory: Core, source: Path, into: str | None) -> ImportReport:
    from fsmem.importers.markdown import Tally, walk
    from fsmem.store.paths import relative

    folder = into if into is not None else f"topics/{source.name}"
    folder = folder.strip().strip("/")
    if not folder:
        from fsmem import faces

        raise InvalidArgument(f"{faces.arg('into')} must name a folder of the memory, such as 'topics/vault'")
    memory.path(folder + "/x.md", want="file")  # the folder itself may hold memory files, or say why not
    for _ in walk(source, Tally()):  # the first reading: every file checked before anything is written
        pass
    tally = Tally()
    report = ImportReport("markdown", str(source))
    batches = Batches(memory)
    try:
        for note in walk(source, tally):
            shown = f"{source.name}/{note.relative}".encode("utf-8", "backslashreplace").decode("utf-8")
            if note.skipped:
                report.add("skipped", (shown, note.skipped))
                continue
            wanted = str(PurePosixPath(folder) / note.relative)
            try:
                text = secrets.screen(note.text, memory.secrets_policy, "the note")
                tx = batches.current()
                target = memory.path(wanted, want="file")
            except (InvalidArgument, SecretFound) as exc:
                report.add("skipped", (shown, str(exc).split(";")[0]))
                continue
            data = text.encode("utf-8")
            rel = relative(memory.root, target)
            if target.exists():
                if target.is_file() and target.read_bytes() == data:
                    report.unchanged += 1
                else:
                    report.add("skipped", (shown, f"{rel} is already in the memory, with other text; left as it is"))
                continue
            batches.write(tx, WriteResult("write", rel, created=True, changes=[Change(rel, None, data)]), target, data)
            report.add("created", rel)
    finally:
        batches.close()
    report.other_files = tally.other_files
    return report


__all__ = ["ImportReport", "import_from"]
