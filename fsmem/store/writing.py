"""Writes: session notes, whole-file writes and exact edits (removal and moves: `fsmem.store.moving`).

Each one runs under the memory's write lock and replaces files atomically, below the memory root one
component at a time (`fsmem.store.beneath`): never through a link that leaves the memory. Only the bytes
a change needs are touched: the `updated` field is set by rewriting its own line, and everything else in
the file stays as the human left it. `ahead`, when given, is entered around the change itself with what
it will do (its history is journalled first: a write and its history fail together).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import faces, format as fmt
from fsmem.budget import echo
from fsmem.errors import ChangedOnDisk, EditConflict, InvalidArgument, NotFound
from fsmem.format import notes as note_text
from fsmem.format.facts import utc_stamp
from fsmem.format.portable import portable_problem
from fsmem.store import beneath
from fsmem.store.fields import check_fields
from fsmem.store.files import Stored, atomic_write, same_version, version_of
from fsmem.store.paths import check_text, read_regular, relative

SESSION_ID_LENGTH = 100  # a session note is named after its id: room for the date folders within 255 bytes
SESSION_ID_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # what a session id may hold, of any length
SESSION_ID = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{SESSION_ID_LENGTH - 1}}}$")
Ahead = Callable[["WriteResult"], AbstractContextManager[None]]


def entered(ahead: Ahead | None, result: WriteResult) -> AbstractContextManager[None]:
    """What a write enters around its change: `ahead` with the result it will give, or nothing."""
    return contextlib.nullcontext() if ahead is None else ahead(result)


@dataclass(frozen=True)
class Change:
    """One file a write changed, with its exact bytes before and after (None: it did not exist / was removed).

    History records these (fsmem.history), so that a commit holds exactly what this write wrote (`Stored`: by id).
    """

    path: str  # relative to the memory root
    before: bytes | Stored | None
    after: bytes | Stored | None
    link: bool = False  # the bytes are a symbolic link's text (a link removed or moved as itself, as git holds it)


@dataclass
class WriteResult:
    """What a write did, for the CLI and for agents; `version` is the file's version after it."""

    action: str
    path: str
    created: bool = False
    changed: bool = True
    line: int | None = None
    version: str | None = None
    changes: list[Change] = field(default_factory=list, repr=False, compare=False)

    rows = 1
    truncated = False
    empty = False

    @property
    def cited(self) -> list[str]:
        return [f"{self.path}:{self.line}" if self.line else self.path]

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in vars(self).items() if key != "changes"}

    def to_text(self) -> str:
        verb = {
            "note": "noted in",
            "write": "wrote",
            "edit": "edited",
            "rm": "removed",
            "mv": "moved to",
            "restore": "restored",
            "revert": "reverted",
        }[self.action]
        where = f" at line {self.line}" if self.line else ""
        state = " (new file)" if self.created else ("" if self.changed else " (no change)")
        version = f"; version {self.version}" if self.version and self.action in ("write", "edit") else ""
        return f"{verb} {self.path}{where}{state}{version}"


def check_version(root: Path, path: Path, current: bytes | None, expected: str | None) -> None:
    """A guarded write: refuse (changing nothing) when the file is no longer at the version the caller read."""
    if expected is None:
        return
    check_text(expected, "the expected version")
    now = version_of(current, path.stat() if current is not None else None)
    if same_version(now, expected):
        return
    rel = relative(root, path)
    if now is None:
        raise ChangedOnDisk(
            f"{rel} has changed since version {expected.strip()}: it no longer exists; nothing was written. "
            "List or read again before writing"
        )
    raise ChangedOnDisk(
        f"{rel} has changed since version {expected.strip()}: its current version is {now}; nothing was written. "
        f"Read it again, then retry with version {now}"
    )


def read_text(path: Path) -> str:
    """Text of a file as stored (newlines untranslated); only a regular file is opened."""
    return _read(path)[1]


def _read(path: Path) -> tuple[bytes, str]:
    """Bytes and text of a file as stored; text that fsmem cannot edit (not UTF-8) is refused."""
    data = read_regular(path)
    text, problems = fmt.decode(data)
    if problems:
        problem = problems[0]
        raise InvalidArgument(
            f"{path.name} line {problem.line}: {problem.message.split(';')[0]}; "
            "fsmem edits only UTF-8 text, so it is left unchanged"
        )
    return data, text


def _encode(text: str) -> bytes:
    return text.encode("utf-8")


def _touch_updated(text: str) -> str:
    """Set `updated` only in a file that already has valid front matter: never add one, never rewrite broken YAML."""
    if not fmt.split(text).has_front_matter:
        return text
    return fmt.set_fields(text, {"updated": fmt.now_iso()})


def _title_from_path(path: Path) -> str:
    return path.stem.replace("-", " ").replace("_", " ").strip().title() or path.stem


PART_MARK = "+"  # outside a session id's characters (`SESSION_ID`): a part's name is never another session's


def part_name(session: str, part: int) -> str:
    """The file name of a session's `part`-th note of one day: `NAME.md`, then `NAME+2.md`, `NAME+3.md`, … A
    session id never holds '+', so no two (session, part) pairs share a name (`NAME-2.md` was the note of
    session `NAME-2` too, and that session's lines went into the other's file)."""
    return f"{session}.md" if part == 1 else f"{session}{PART_MARK}{part}.md"


def unarchived_part(root: Path, path: Path, archive_dir: str | None) -> Path:
    """Today's note of a session, or when the archive holds a note of that name (its first part, archived by
    consolidation), the first `part_name` the archive does not hold: two notes of one name would be cited
    as one, their citations linking the archived part, which lacks the new part's lines."""
    if not archive_dir:
        return path
    archived = root / archive_dir.strip("/") / path.parent.relative_to(root / "sessions")
    part = 1
    while os.path.lexists(archived / part_name(path.stem, part)):
        part += 1
    return path.with_name(part_name(path.stem, part))


def session_note_path(root: Path, session: str, when: _dt.datetime) -> Path:
    if not SESSION_ID.match(session):
        raise InvalidArgument(
            f"session id {echo(session)} may hold only letters, digits, '.', '_' and '-' (at most {SESSION_ID_LENGTH} characters)"
        )
    unportable = portable_problem(f"{session}.md")
    if unportable:
        raise InvalidArgument(
            f"session id {echo(session)} {unportable}; choose another (the note file is named after it)"
        )
    return root / "sessions" / f"{when.year:04d}" / f"{when:%m}" / f"{when:%d}" / f"{session}.md"  # %Y: "1" for 0001


def note(
    root: Path,
    text: str,
    *,
    session: str,
    subject: str | None = None,
    default_subject: str | None = None,
    check_path: Callable[[Path], None] | None = None,
    agent: str | None = None,
    ahead: Ahead | None = None,
    archive_dir: str | None = None,
) -> WriteResult:
    """Append `text` to today's note of `session`, under `## subject` when given.

    Each keyed fact gets `(as of TIME)`, the UTC time of this write (`fsmem.format.notes.stamp_facts`); a new
    note records the `agent` that made it (timeline's "who wrote it").

    Each note is its own unit: text without a subject goes under
    `## default_subject` when an earlier note left a heading open at the end
    of the file (`fsmem.format.notes`). `check_path(path)` may refuse the
    note's file (an agent's scope) before anything is written.
    """
    text = check_text(text, "the note text").strip("\n")
    if not text.strip():
        raise InvalidArgument("the note is empty")
    if subject is not None:
        check_text(subject, "the subject")
        if not subject.strip() or "\n" in subject or "\r" in subject:
            raise InvalidArgument(
                f"{faces.arg('subject')} must be a single line, such as 'people/Adam Smith' or 'topic/Billing'"
            )
    stamp = fmt.now_iso()
    when = fmt.parse_timestamp(stamp) or fmt.wall_clock()
    path = unarchived_part(root, session_note_path(root, session, when), archive_dir)
    if check_path is not None:
        check_path(path)
    lines = text.splitlines()
    if len(lines) == 1 and not lines[0].lstrip().startswith(("- ", "* ", "+ ", "#")):
        lines = [f"- {lines[0].strip()}"]
    lines = note_text.stamp_facts(lines, utc_stamp(when))
    block = "\n".join(lines) + "\n"
    created = not path.exists()
    before = None
    if created:
        front = {
            "title": f"Session {session} {when.date().isoformat()}",
            "description": f"Session notes of {session} on {when.date().isoformat()}",
            "type": "episodic",
            "session": session,
            **({"agent": agent} if agent else {}),
            "created": stamp,
            "updated": stamp,
        }
        existing = fmt.render(front, "")
    else:
        before, existing = _read(path)
    newline = "\r\n" if "\r\n" in existing[:4096] else "\n"
    new_text, line = note_text.place(existing, block, subject, default_subject)
    if newline != "\n":
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    if not created:
        new_text = _touch_updated(new_text)
    data = _encode(new_text)
    rel = beneath.landing(root, relative(root, path))  # through an in-memory link: the file it leads to
    result = WriteResult("note", rel, created=created, line=line, changes=[Change(rel, before, data)])
    with entered(ahead, result):
        atomic_write(path, data, root=root, expect=before)
    return result


def write(
    root: Path,
    path: Path,
    body: str | None,
    fields: dict[str, Any],
    *,
    expected_version: str | None = None,
    ahead: Ahead | None = None,
) -> WriteResult:
    """Create or replace a file's body (None keeps it) and set front matter fields.

    A body that carries its own front matter is taken as the whole file. With
    `expected_version`, nothing is written unless the file is still at that version.
    """
    if body is not None:
        check_text(body, "the body")
    fields = check_fields(fields)
    created = not path.exists()
    if path.is_dir():
        raise InvalidArgument(f"{relative(root, path)} is a folder; give a file path ending in .md")
    before = None
    if created:
        check_version(root, path, None, expected_version)
        if body is None:
            body = ""
        if fmt.split(body).has_front_matter:
            text = body
        else:
            stamp = fmt.now_iso()
            front = {"title": _title_from_path(path), "created": stamp, "updated": stamp}
            text = fmt.render(front, body)
        old = None
    else:
        before, old = _read(path)
        check_version(root, path, before, expected_version)
        if body is None:
            text = old
        elif fmt.split(body).has_front_matter:
            text = body
        else:
            doc = fmt.split(old)
            if doc.problems and not doc.has_front_matter:  # a head it cannot read is body to it: it would go too
                why = f"cannot replace the body: {doc.problems[0].message}; write the whole file or change it with edit"
                raise InvalidArgument(f"{relative(root, path)}: {why}")
            head = "".join(old.splitlines(keepends=True)[: doc.body_start_line - 1])  # its head, if any
            if head and not head.endswith(("\n", "\r")):  # a file of front matter alone, its `---` unended
                head += "\r\n" if "\r\n" in head else "\n"
            text = head + body
    if body is not None and text and not text.endswith("\n"):
        text += "\n"
    if fields:
        try:
            text = fmt.set_fields(text, fields)
        except ValueError as exc:
            raise InvalidArgument(f"{relative(root, path)}: {exc}") from None
    rel = beneath.landing(root, relative(root, path))  # through an in-memory link: the file it leads to
    if old is not None and text == old:
        return WriteResult("write", rel, changed=False, version=version_of(before, path.stat()))
    if not created and "updated" not in fields:
        text = _touch_updated(text)
    data = _encode(text)
    result = WriteResult("write", rel, created=created, changes=[Change(rel, before, data)])
    with entered(ahead, result):
        atomic_write(path, data, root=root, expect=before)
    result.version = version_of(data, path.stat())
    return result


def edit(
    root: Path, path: Path, old: str, new: str, *, expected_version: str | None = None, ahead: Ahead | None = None
) -> WriteResult:
    """Replace the one occurrence of `old` with `new`; zero or several matches is an error.

    With `expected_version`, nothing is changed unless the file is still at that version.
    """
    rel = relative(root, path)
    if not path.is_file():
        raise NotFound(f"{rel} does not exist; use write to create it")
    check_text(old, "the old text")
    check_text(new, "the new text")
    if not old:
        raise InvalidArgument(f"{faces.arg('old')} is empty; give the exact text to replace")
    before, text = _read(path)
    check_version(root, path, before, expected_version)
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old:
        old = old.replace("\r\n", "\n").replace("\n", "\r\n")
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise EditConflict(f"the old text was not found in {rel}; read the file and copy the text exactly")
    if count > 1:
        raise EditConflict(
            f"the old text matches {count} times in {rel}; include more surrounding text so it matches once"
        )
    index = text.index(old)
    line = text.count("\n", 0, index) + 1
    updated = text[:index] + new + text[index + len(old) :]
    if updated == text:
        return WriteResult("edit", rel, changed=False, line=line, version=version_of(before, path.stat()))
    data = _encode(_touch_updated(updated))
    rel = beneath.landing(root, rel)  # through an in-memory link: the file it leads to
    result = WriteResult("edit", rel, line=line, changes=[Change(rel, before, data)])
    with entered(ahead, result):
        atomic_write(path, data, root=root, expect=before)
    result.version = version_of(data, path.stat())
    return result
