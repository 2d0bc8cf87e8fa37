"""Saving a Claude Code transcript as it grows: what the hook does each event, and what finishes an event cut short.

`save_transcript` brings a transcript's session note up to date from the note's own record of what it holds
(`fsmem.importers.notes.Held`: its lines and the transcript's bytes they come from), a part of at most `PART`
bytes a write, however long the transcript is. Given a `deadline` (the hook's time budget), it stops
between two parts once the deadline has passed, with the record saying where it stopped, and lists the
transcript as pending (`fsmem.hooks.claude_code.Pending`); the next command that meets it (the next event,
`fsmem import`, `fsmem consolidate` through `finish_pending`) goes on from there. `fsmem import` reads and
moves the same record (`fsmem.operations.importing`), so the hook and the import may follow each other in
either order, and the memory ends with each line once.

A line the secrets policy refuses is left out (and named) while the record counts it as read, so that it is
not met again; the other lines come in.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem.errors import FsmemError, NotFound, SecretFound
from fsmem.format import secrets
from fsmem.hooks.claude_code import one_line, session_name
from fsmem.importers import Conversation
from fsmem.importers.notes import Held, held_in
from fsmem.operations.core import Core
from fsmem.operations.transaction import Transaction, require_writable, transaction
from fsmem.store.note_folders import SESSIONS, NoteFolders

if TYPE_CHECKING:
    from fsmem.importers.transcripts import Identity, Part

PART = 1 << 20  # bytes of transcript read and written per write: a few hundred lines, one short transaction


@dataclass
class TranscriptSaved:
    """What saving one transcript did: the note it wrote, the lines it added, whether it reached the end."""

    transcript: str
    note: str | None = None
    lines: int = 0
    finished: bool = False
    problems: list[str] = field(default_factory=list)


def held_of(root: Path, front: Mapping[str, Any], key: str, session: str, transcript: str | None) -> Held | None:
    """The record of a session note's front matter, for conversation `key`; None when the note holds something else.

    A note the hook wrote before it kept this record has only its host-local byte offset: the lines up to that
    offset count as held, so that they are not saved twice.
    """
    held = held_in(front)
    if held is not None:
        return held if front.get("conversation") == key else None
    if transcript is None or front.get("session") != session or "conversation" in front:
        return None
    from fsmem.hooks.claude_code import legacy_offset
    from fsmem.importers.transcripts import read_part

    offset = legacy_offset(root, key, transcript)
    if offset is None:
        return None
    try:
        part = read_part(transcript, 0, offset)
    except (FsmemError, OSError):
        return None
    return Held().after(part.lines, part.end)


def _resumable(transcript: str, held: Held) -> Held | None:
    """`held` with the transcript's bytes it comes from (an import before fsmem kept them counted only its lines,
    and a transcript shorter than them was replaced) and a digest that extends; None when the transcript no longer
    starts with the lines held."""
    from fsmem.hooks.claude_code import read_line, records, summarise
    from fsmem.importers.notes import digest
    from fsmem.store import outside_files

    if held.bytes is not None and os.path.getsize(transcript) >= held.bytes:
        return held
    lines: list[str] = []
    end = 0
    fd, _ = outside_files.open_regular(transcript, what="the transcript")
    with os.fdopen(fd, "rb") as stream:
        while len(lines) < held.lines:
            line = read_line(stream)
            if not line.size:
                break
            end += line.size
            for _, record in records([line.raw] if line.raw is not None else []):
                lines.extend(summarise(record))
    if len(lines) != held.lines or not held.holds_start_of(lines):
        return None
    return Held(held.lines, digest(lines), end)


def save_transcript(
    memory: Core, transcript: str, *, session: str | None = None, deadline: float | None = None
) -> TranscriptSaved:
    """Save the lines of `transcript` that its session note does not hold yet, a part a write, until its end or
    until `deadline` (a `time.monotonic()` value) has passed; at least one part is saved either way. Lines
    written after this call began are left, listed as pending, for the next command once a part reaches the
    size the transcript had then: a transcript written faster than it is saved would hold the call for ever.

    `session` is the hook event's session id (the transcript's records name it otherwise).
    """
    from fsmem.hooks.claude_code import Pending
    from fsmem.importers.transcripts import identity

    require_writable(memory)
    transcript = os.path.abspath(transcript)
    who = identity(transcript, session)
    pending = Pending(memory.root)
    pending.add(transcript, who.session)  # first: an event killed while it writes leaves its transcript listed
    saved = TranscriptSaved(transcript)
    skip_to: int | None = None  # where a part that gave no line ended, while there is no note to record it
    size = _size(transcript)
    while True:
        with transaction(memory) as tx:
            end = _save_part(memory, tx, transcript, who, saved, skip_to)
        if end is None:
            saved.finished = True
            pending.done(transcript)
            return saved
        skip_to = end
        if (deadline is not None and time.monotonic() >= deadline) or end >= size:
            return saved


def _size(transcript: str) -> int:
    """The transcript's size now (a file that cannot be looked at is refused by the first part's read)."""
    try:
        return os.stat(transcript).st_size
    except OSError:
        return 0


def _save_part(
    memory: Core, tx: Transaction, transcript: str, who: Identity, saved: TranscriptSaved, skip_to: int | None
) -> int | None:
    """One part, under the write lock: the lines after the note's record, appended with the record moved on.

    Returns where the part ended, or None when the transcript is saved to its end (or cannot be saved).
    """
    from fsmem import format as fmt
    from fsmem.importers import notes
    from fsmem.importers.transcripts import read_part
    from fsmem.store.files import atomic_write
    from fsmem.store.paths import relative
    from fsmem.store.writing import Change, WriteResult, read_text

    name = session_name(who.key)
    folders = NoteFolders(memory.root, memory.config.consolidate.archive_dir)
    refused = folders.refusal(SESSIONS)
    note = folders.find(name) if refused is None else None
    refused = refused or (folders.write_problem(relative(memory.root, note)) if note is not None else None)
    if refused is not None:  # a note there would land where a link leads, not in a folder of notes
        saved.problems.append(f"{refused}; nothing saved")
        return None
    text = before = None
    front: Mapping[str, Any] = {}
    held = Held()
    if note is not None:
        before = note.read_bytes()
        text = read_text(note)
        front = fmt.split(text).front_matter
        found = held_of(memory.root, front, who.key, name, transcript)
        if found is None:
            saved.problems.append(f"{relative(memory.root, note)} holds other notes of this session; nothing saved")
            return None
        resumable = _resumable(transcript, found)
        if resumable is None:
            saved.problems.append(f"the transcript no longer starts as {relative(memory.root, note)} holds it")
            return None
        held = resumable
    start = held.bytes or 0
    if skip_to is not None and skip_to > start:
        start = skip_to
    part = read_part(transcript, start, PART)
    if part.bad:
        saved.problems.append(f"{len(part.bad)} transcript lines are not JSON; skipped")
    kept = []
    for number, line in enumerate(part.lines, start=held.lines + 1):
        try:
            kept.append(secrets.screen(line, memory.secrets_policy, f"transcript line {number}"))
        except SecretFound:
            kind = secrets.with_article(secrets.scan(line)[0].kind)
            saved.problems.append(
                f"transcript line {number} looks like {kind}; that line is left out and the rest saved "
                "(fsmem.yaml secrets.policy: refuse)"
            )
    if part.lines or (note is not None and part.end != held.bytes):
        conv = _conversation(memory, who, part, transcript, front.get("created"))
        record = held.after(part.lines, part.end)
        if note is None:
            if not kept:
                return None if part.at_end else part.end
            note = _note_path(memory, name, conv)
            refused = folders.write_problem(relative(memory.root, note))
            if refused is not None:
                saved.problems.append(f"{refused}; nothing saved")
                return None
            data = notes.new_note(conv, kept, record).encode("utf-8")
        else:
            assert text is not None
            data = notes.extended(text, conv, kept, record, front=front).encode("utf-8")
        rel = relative(memory.root, note)
        atomic_write(note, data, root=memory.root)  # through no link out (`fsmem.store.beneath`)
        tx.wrote(WriteResult("note", rel, created=before is None, changes=[Change(rel, before, data)]), f"save {rel}")
        saved.note, saved.lines = rel, saved.lines + len(kept)
    return None if part.at_end else part.end


def _conversation(memory: Core, who: Identity, part: Part, transcript: str, created: Any) -> Conversation:
    """The conversation as a note's front matter and headings name it: its title and times from its records."""
    from fsmem import format as fmt

    now = fmt.parse_timestamp(fmt.now_iso()) or fmt.wall_clock()
    title = part.title or one_line(who.key, 120)  # an id is the hook event's to give: one line, as a title is
    try:
        title = secrets.screen(title, memory.secrets_policy, "its title")
    except SecretFound:
        title = who.key
    started = part.started or now.astimezone(_dt.UTC)
    if created is not None:  # the note names its start already
        started = fmt.parse_timestamp(str(created)) or started
    return Conversation(
        "claude-code",
        who.key,
        title,
        started,
        part.ended or now,
        (),
        transcript,
        transcript,
        parent=who.parent,
        cwd=part.cwd,
    )


def _note_path(memory: Core, name: str, conv: Conversation) -> Path:
    from fsmem.store import beneath
    from fsmem.store.paths import relative
    from fsmem.store.writing import session_note_path

    assert conv.started is not None
    path = session_note_path(memory.root, name, conv.started)
    memory.path(relative(memory.root, path), want="file")  # an agent's scope may refuse it
    beneath.make_folder(memory.root, relative(memory.root, path.parent), generated=False)  # through no link out
    return path


def finish_pending(memory: Core, *, deadline: float | None = None) -> list[TranscriptSaved]:
    """Finish the transcripts that events left unfinished on this host (a transcript gone is forgotten, and one
    whose save failed MAX_FAILURES times is dropped, said once in the answer: no event retries it again)."""
    from fsmem.hooks.claude_code import MAX_FAILURES, Pending

    pending = Pending(memory.root)
    done = []
    for transcript, session in pending.entries():
        if deadline is not None and time.monotonic() >= deadline:
            break
        try:
            done.append(save_transcript(memory, transcript, session=session, deadline=deadline))
        except NotFound:
            pending.done(transcript)
        except (FsmemError, OSError) as exc:
            problem = str(exc)
            if pending.failed(transcript, session):
                problem = (
                    f"{transcript}: saving it failed {MAX_FAILURES} times ({exc}); it is no longer retried, "
                    "`fsmem import claude-code` of it saves it once that is mended"
                )
            done.append(TranscriptSaved(transcript, problems=[problem]))
    return done
