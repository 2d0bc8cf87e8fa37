"""A folder of Markdown notes (an Obsidian vault, a Basic Memory project, Claude Code's memory files), file by file.

Every `.md` file below the folder is read with its path relative to it; hidden files and folders
(`.obsidian/`, `.trash/`, `.git/`) are not, symlinks are not followed, and other files are counted. A file
that is not UTF-8 text or whose front matter does not parse stops the import, naming the file and line.
The text is kept as it is, wikilinks and all: a file with front matter byte for byte, one without it
given a front matter of its title (its name), so that it lists like any memory file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fsmem import format as fmt
from fsmem.importers import fault

FILE_LIMIT = 8 << 20  # a note larger than this is not a note; it is skipped and named


@dataclass(frozen=True)
class NoteFile:
    """One Markdown file of the folder: its path relative to it (POSIX), and its text as the memory will hold it.

    `skipped` says why it is not imported (a symlink, too large); then `text` is empty.
    """

    relative: str
    text: str = ""
    skipped: str | None = None


@dataclass
class Tally:
    """What the walk passed over without reading: files that are not Markdown."""

    other_files: int = 0


def walk(folder: Path, tally: Tally) -> Iterator[NoteFile]:
    """Each Markdown file below `folder`, in a stable order."""
    if not folder.is_dir():
        raise fault(str(folder), "not a folder of Markdown notes")
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(parent, d)))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(parent) / name
            rel = PurePosixPath(*path.relative_to(folder).parts).as_posix()  # may hold surrogates: memory refuses
            if not name.lower().endswith(".md"):
                tally.other_files += 1
                continue
            kind = os.lstat(path).st_mode
            if stat.S_ISLNK(kind):
                yield NoteFile(rel, skipped="a symlink; not followed")
            elif not stat.S_ISREG(kind):
                yield NoteFile(rel, skipped="not a regular file (a FIFO or a device is never opened)")
            else:
                yield _read(path, rel)


def _read(path: Path, rel: str) -> NoteFile:
    try:
        size = path.stat().st_size
        if size > FILE_LIMIT:
            return NoteFile(rel, skipped=f"larger than {FILE_LIMIT >> 20} MiB")
        with open(path, "rb") as handle:
            data = handle.read(FILE_LIMIT + 1)
    except OSError as exc:
        raise fault(str(path), f"cannot be read ({exc.strerror or exc})") from None
    text, problems = fmt.decode(data)
    if problems:
        raise fault(f"{path} line {problems[0].line}", problems[0].message.split(";")[0])
    doc = fmt.split(text)
    if doc.problems:
        raise fault(f"{path} line {doc.problems[0].line}", doc.problems[0].message)
    if not doc.has_front_matter:
        text = fmt.render({"title": Path(rel).stem}, text.removeprefix(fmt.BOM))
    if text and not text.endswith("\n"):
        text += "\n"
    return NoteFile(rel, text)
