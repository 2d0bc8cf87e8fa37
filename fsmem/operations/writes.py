"""The writes an agent or a person makes: note, write, edit, rm and mv, each one transaction.

Each checks that the agent may write and what it was given (the containment
rule, its scope, the secrets policy), then writes through the one write path
(`fsmem.operations.transaction`): under the write lock, journalled with its
exact bytes when the memory has history (before the file changes: a write and
its history fail together), committed, and the search index told.
The bytes themselves are written by `fsmem.store.writing` (removal and moves: `fsmem.store.moving`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.errors import ChangedOnDisk, InvalidArgument
from fsmem.operations.core import Core, in_scope
from fsmem.operations.transaction import require_writable, screen, screen_value, transaction
from fsmem.store import moving, paths as _paths, writing
from fsmem.store.fields import check_fields
from fsmem.store.note_folders import NoteFolders
from fsmem.store.note_status import consolidated_note_in, move_refused, remove_refused
from fsmem.store.paths import relative

SESSION_ENV = "FSMEM_SESSION"
NOTE_ATTEMPTS = 3  # a note is appended again to a session note saved by a person while it was written


def note(memory: Core, text: str, *, session: str | None = None, subject: str | None = None) -> writing.WriteResult:
    """Append to the current session note (today's file of `session`).

    The default session is the agent (or `notes.default_session`) and this
    host's id, so notes written on several hosts never share a file.
    """
    require_writable(memory)
    session = session or os.environ.get(SESSION_ENV)
    if not session:
        name = memory.agent or memory.config.notes.default_session
        session = f"{name}-{memory.host_id}"
        if not writing.SESSION_ID.match(session):  # else refused as a "session id" the caller never gave
            from fsmem import faces
            from fsmem.budget import echo

            instead = f"; name the note with {faces.arg('session')}" if faces.offers("session") else ""
            if writing.SESSION_ID_CHARS.fullmatch(session):
                room = writing.SESSION_ID_LENGTH - len(memory.host_id) - 1
                why = f"is longer than the {room} characters a session note's name leaves beside this host's id"
            else:
                why = "cannot name a session note, whose name may hold only letters, digits, '.', '_' and '-'"
            raise InvalidArgument(f"the agent {echo(name)} {why}{instead}")
    text = screen(memory, text, "the note")

    # where consolidation files lines without a subject (`consolidate.default_subject`)
    default = memory.config.consolidate.default_subject
    if subject is not None:
        subject = screen(memory, subject, "the subject")
    scope = memory.scope
    folders = NoteFolders(memory.root, memory.config.consolidate.archive_dir)

    def check(path: Path) -> None:
        """An agent's scope, and a note that is a link to a file that is no note, refuse it before any write."""
        rel = relative(memory.root, path)
        if scope is not None:
            scope.check(rel, rel, "file")
        refused = folders.write_problem(rel)
        if refused is not None:
            raise InvalidArgument(refused)

    with transaction(memory) as tx:
        attempts = NOTE_ATTEMPTS
        while True:
            try:
                result = writing.note(
                    memory.root,
                    text,
                    session=session,
                    subject=subject,
                    default_subject=default,
                    check_path=check,
                    agent=memory.agent,
                    ahead=tx.ahead,
                    archive_dir=memory.config.consolidate.archive_dir,
                )
            except ChangedOnDisk:  # a person saved the note meanwhile: the text is appended to what they saved
                attempts -= 1
                if not attempts:
                    raise
                continue
            return tx.wrote(result)


def write(
    memory: Core,
    path: str,
    body: str | None = None,
    *,
    set: dict[str, Any] | None = None,
    expected_version: str | None = None,
) -> writing.WriteResult:
    """Create or replace a file's body and set front-matter fields (`set`).

    With `expected_version` (the version read, ls or grep gave), nothing is
    written when the file changed since: ChangedOnDisk names its current version.
    """
    require_writable(memory)
    target = memory.path(path, want="file")
    if body is not None:
        body = screen(memory, body, "the body")
    plain = check_fields(set or {})  # before the screen walks the values: a cycle is refused, not followed
    _refuse_what_check_reports(plain)
    fields = {key: screen_value(memory, value, f"field {key!r}") for key, value in plain.items()}
    with transaction(memory) as tx:
        named = fields if body is None else {}
        result = writing.write(
            memory.root,
            target,
            body,
            fields,
            expected_version=expected_version,
            ahead=lambda made: tx.ahead(made, fields=named),
        )
        return tx.wrote(result, fields=named, paths=_both(memory, target, result))


def _refuse_what_check_reports(fields: dict[str, Any]) -> None:
    """A field set to a value `fsmem check` would report (`type: bogus`, `created: not-a-date`) is refused:
    an agent's write creates no problem for a person to find. The fields are read back as the file would hold
    them, through check's own rule (`fmt.validate`); a file a person wrote so is still read, and reported."""
    given = {key: value for key, value in fields.items() if value is not None}  # None removes a field
    if not given:
        return
    problems = fmt.validate(fmt.split(fmt.render(given, "")))
    if problems:
        raise InvalidArgument(f"cannot set that front matter: {problems[0].message}; nothing was written")


def edit(memory: Core, path: str, *, old: str, new: str, expected_version: str | None = None) -> writing.WriteResult:
    """Replace exactly one occurrence of `old` with `new` (guarded by `expected_version` like `write`)."""
    require_writable(memory)
    target = memory.path(path, want="file")
    new = screen(memory, new, "the new text")
    with transaction(memory) as tx:
        result = writing.edit(memory.root, target, old, new, expected_version=expected_version, ahead=tx.ahead)
        return tx.wrote(result, paths=_both(memory, target, result))


def rm(memory: Core, path: str) -> writing.WriteResult:
    """Remove a file or an empty folder; a session note that was consolidated is refused, as `mv` refuses it."""
    require_writable(memory)
    target = memory.path(path)
    in_scope(memory, target, path)
    _paths.check_folder_contents(memory.root, target, path)
    rel = relative(memory.root, target)
    with transaction(memory) as tx:
        cited = consolidated_note_in(memory.root, rel, memory.config.consolidate.archive_dir)
        if cited is not None:  # under the write lock, as mv's: consolidation marks notes under it too
            raise InvalidArgument(remove_refused(cited, rel))
        result = moving.remove(memory.root, target, record=tx.keeps_history, ahead=tx.ahead)
        return tx.wrote(result, paths=_both(memory, target, result))


def mv(memory: Core, source: str, target: str) -> writing.WriteResult:
    """Move a file or a folder, never over anything."""
    require_writable(memory)
    src = memory.path(source)
    in_scope(memory, src, source)
    dst = memory.path(target, want="any" if src.is_dir() else "file")
    in_scope(memory, dst, target)
    if src.is_dir() and dst != src and dst.is_relative_to(src):  # the rename's EINVAL said "invalid argument"
        from fsmem.budget import echo

        raise InvalidArgument(f"cannot move the folder {echo(source)} into itself ({echo(target)})")
    _paths.check_folder_contents(memory.root, src, source)
    src_rel = relative(memory.root, src)
    with transaction(memory) as tx:
        cited = consolidated_note_in(memory.root, src_rel, memory.config.consolidate.archive_dir)
        if cited is not None:  # under the write lock: consolidation marks notes under it too
            raise InvalidArgument(move_refused(cited, src_rel))
        result = moving.move(
            memory.root,
            src,
            dst,
            record=tx.keeps_history,
            ahead=lambda made: tx.ahead(made, f"mv {src_rel} -> {made.path}"),
        )
        return tx.wrote(result, f"mv {src_rel} -> {result.path}", paths=[src_rel, result.path])


def _both(memory: Core, given: Path, result: writing.WriteResult) -> list[str]:
    """The paths a write changed: the one given and, through an in-memory link, the file it really changed
    (`result.path`, what history records)."""
    return list(dict.fromkeys([relative(memory.root, given), result.path]))
