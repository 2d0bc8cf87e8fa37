"""Writes: session notes, whole-file writes, exact edits, removal and moves.

Each one runs under the memory's write lock and replaces files atomically. Only
the bytes a change needs are touched: the `updated` field is set by rewriting
its own line, and everything else in the file stays as the human left it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.errors import AlreadyExists, EditConflict, InvalidArgument, NotFound
from fsmem.store.files import atomic_write
from fsmem.store.paths import check_text, read_regular, relative

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass
class WriteResult:
    """What a write did, for the CLI and for agents."""

    action: str
    path: str
    created: bool = False
    changed: bool = True
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        verb = {"note": "noted in", "write": "wrote", "edit": "edited", "rm": "removed", "mv": "moved to"}[self.action]
        where = f" at line {self.line}" if self.line else ""
        state = " (new file)" if self.created else ("" if self.changed else " (no change)")
        return f"{verb} {self.path}{where}{state}"


def read_text(path: Path) -> str:
    """Text of a file as stored (newlines untranslated); only a regular file is opened."""
    data = read_regular(path)
    text, problems = fmt.decode(data)
    if problems:
        problem = problems[0]
        raise InvalidArgument(
            f"{path.name} line {problem.line}: {problem.message.split(';')[0]}; "
            "fsmem edits only UTF-8 text, so it is left unchanged"
        )
    return text


def _encode(text: str) -> bytes:
    return text.encode("utf-8")


def _touch_updated(text: str) -> str:
    """Set `updated` only in a file that already has valid front matter: never add one, never rewrite broken YAML."""
    if not fmt.split(text).has_front_matter:
        return text
    return fmt.set_fields(text, {"updated": fmt.now_iso()})


def check_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Front matter fields to set; a name or value holding a NUL byte or non-text is refused at the door."""

    def visit(value: Any, where: str) -> None:
        if isinstance(value, str):
            check_text(value, where)
        elif isinstance(value, dict):
            for key, inner in value.items():
                visit(key, f"a field name in {where}")
                visit(inner, where)
        elif isinstance(value, (list, tuple)):
            for inner in value:
                visit(inner, where)

    for key, value in fields.items():
        visit(key, "a front matter field name")
        visit(value, f"the front matter field {key!r}")
    return fields


def _title_from_path(path: Path) -> str:
    return path.stem.replace("-", " ").replace("_", " ").strip().title() or path.stem


def session_note_path(root: Path, session: str, when: _dt.datetime) -> Path:
    if not _SESSION_ID.match(session):
        raise InvalidArgument(
            f"session id {session!r} may hold only letters, digits, '.', '_' and '-' (at most 100 characters)"
        )
    return root / "sessions" / f"{when:%Y}" / f"{when:%m}" / f"{when:%d}" / f"{session}.md"


def note(
    root: Path,
    text: str,
    *,
    session: str,
    subject: str | None = None,
    check_path: Callable[[Path], None] | None = None,
) -> WriteResult:
    """Append `text` to today's note of `session`, under `## subject` when given.

    `check_path(path)` may refuse the note's file (an agent's scope) before anything is written.
    """
    text = check_text(text, "the note text").strip("\n")
    if not text.strip():
        raise InvalidArgument("the note is empty")
    if subject is not None:
        check_text(subject, "the subject")
        if not subject.strip() or "\n" in subject or "\r" in subject:
            raise InvalidArgument("--subject must be a single line, such as 'people/Adam Smith' or 'topic/Billing'")
    stamp = fmt.now_iso()
    when = fmt.parse_timestamp(stamp) or _dt.datetime.now().astimezone()
    path = session_note_path(root, session, when)
    if check_path is not None:
        check_path(path)
    lines = text.splitlines()
    if len(lines) == 1 and not lines[0].lstrip().startswith(("- ", "* ", "#")):
        lines = [f"- {lines[0].strip()}"]
    block = "\n".join(lines) + "\n"
    created = not path.exists()
    if created:
        front = {
            "title": f"Session {session} {when:%Y-%m-%d}",
            "description": f"Session notes of {session} on {when:%Y-%m-%d}",
            "type": "episodic",
            "session": session,
            "created": stamp,
            "updated": stamp,
        }
        existing = fmt.render(front, "")
    else:
        existing = read_text(path)
    newline = "\r\n" if "\r\n" in existing[:4096] else "\n"
    new_text, line = _append_under(existing, block, subject)
    if newline != "\n":
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    if not created:
        new_text = _touch_updated(new_text)
    atomic_write(path, _encode(new_text))
    return WriteResult("note", relative(root, path), created=created, line=line)


def _append_under(text: str, block: str, subject: str | None) -> tuple[str, int]:
    """Insert `block` at the end of the `## subject` section (made if missing), or at the end."""
    if not text.endswith("\n") and text:
        text += "\n"
    doc = fmt.split(text)
    if subject is None:
        sep = "" if text.endswith("\n\n") or not doc.body.strip() else "\n"
        line = text.count("\n") + 1 + (1 if sep else 0)
        return text + sep + block, line
    wanted = subject.strip()
    for heading in fmt.headings(doc.body, doc.body_start_line):
        if heading.level == 2 and heading.title == wanted:
            lines = text.splitlines(keepends=True)
            end = heading.end_line
            while end > heading.line and not lines[end - 1].strip():
                end -= 1  # insert after the last non-blank line of the section
            lines[end:end] = [block]
            return "".join(lines), end + 1
    sep = "\n" if doc.body.strip() and not text.endswith("\n\n") else ""
    heading_line = text.count("\n") + 1 + (1 if sep else 0)
    return text + sep + f"## {wanted}\n" + block, heading_line + 1


def write(root: Path, path: Path, body: str | None, fields: dict[str, Any]) -> WriteResult:
    """Create or replace a file's body (None keeps it) and set front matter fields.

    A body that carries its own front matter is taken as the whole file.
    """
    if body is not None:
        check_text(body, "the body")
    check_fields(fields)
    created = not path.exists()
    if path.is_dir():
        raise InvalidArgument(f"{relative(root, path)} is a folder; give a file path ending in .md")
    if created:
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
        old = read_text(path)
        if body is None:
            text = old
        elif fmt.split(body).has_front_matter:
            text = body
        else:
            doc = fmt.split(old)
            if doc.has_front_matter:
                head = "".join(old.splitlines(keepends=True)[: doc.body_start_line - 1])
                text = head + body
            else:
                text = body
    if body is not None and text and not text.endswith("\n"):
        text += "\n"
    if fields:
        try:
            text = fmt.set_fields(text, fields)
        except ValueError as exc:
            raise InvalidArgument(f"{relative(root, path)}: {exc}") from None
    if old is not None and text == old:
        return WriteResult("write", relative(root, path), changed=False)
    if not created and "updated" not in fields:
        text = _touch_updated(text)
    atomic_write(path, _encode(text))
    return WriteResult("write", relative(root, path), created=created)


def edit(root: Path, path: Path, old: str, new: str) -> WriteResult:
    """Replace the one occurrence of `old` with `new`; zero or several matches is an error."""
    rel = relative(root, path)
    if not path.is_file():
        raise NotFound(f"{rel} does not exist; use write to create it")
    check_text(old, "the old text")
    check_text(new, "the new text")
    if not old:
        raise InvalidArgument("--old is empty; give the exact text to replace")
    text = read_text(path)
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
        return WriteResult("edit", rel, changed=False, line=line)
    atomic_write(path, _encode(_touch_updated(updated)))
    return WriteResult("edit", rel, line=line)


def remove(root: Path, path: Path) -> WriteResult:
    rel = relative(root, path)
    if path == root:
        raise InvalidArgument("refusing to remove the memory root")
    if path.is_dir() and not path.is_symlink():
        try:
            path.rmdir()
        except OSError:
            raise InvalidArgument(f"{rel} is a folder that is not empty; remove its files first") from None
    elif path.exists() or path.is_symlink():
        os.unlink(path)
    else:
        raise NotFound(f"{rel} does not exist")
    return WriteResult("rm", rel)


def move(root: Path, source: Path, target: Path) -> WriteResult:
    src_rel, dst_rel = relative(root, source), relative(root, target)
    if source == root or target == root:
        raise InvalidArgument("refusing to move the memory root")
    if not source.exists():
        raise NotFound(f"{src_rel} does not exist")
    if target.exists():
        raise AlreadyExists(f"{dst_rel} already exists; remove it first or choose another name")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)
    return WriteResult("mv", dst_rel)
