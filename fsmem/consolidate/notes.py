"""Session notes as consolidation reads them: their items, their date, and which items are already consolidated.

What a note contributed before comes from the note itself: its `consolidated:`
field holds the hash of the body that was consolidated. A note that only grew
at its end still starts with that body; one that grew in the middle (`fsmem
note --subject` adds under an existing heading) is recognised by the list of
items it held then, which the ledger keeps (`snapshots`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fsmem import format as fmt
from fsmem.consolidate import extractors as ex
from fsmem.consolidate.dates import SESSIONS, note_date


@dataclass(frozen=True)
class NoteItem:
    """One item of a note. `line` counts from the first body line (0-based), so front matter edits do not move it."""

    heading: str | None
    line: int
    index: int  # position among the note's items (orders items of one line)
    key: str | None
    value: str | None
    text: str | None
    as_of: str | None
    old: bool  # already consolidated: applied before, so only kept if a document still shows it

    @property
    def identity(self) -> str:
        return json.dumps([self.heading, self.key, self.value, self.text, self.as_of], ensure_ascii=False)


@dataclass
class NoteEntry:
    path: str  # where the file is now (sessions/… or the archive)
    source: str  # the name documents cite: sessions/YYYY/MM/DD/x.md
    date: str | None
    max_as_of: str | None
    digest: str
    mark: str | None
    problems: list[tuple[int, str]]
    items: list[NoteItem]
    text: str | None = None  # the text read this run, if it was read
    full: Path | None = None  # where it was read from (checked by the path rule), if it was read
    body_start_line: int = 1

    @property
    def readable(self) -> bool:
        """False for a note that is skipped (not text, broken front matter, no date); its problems say why."""
        return bool(self.digest) and self.date is not None

    @property
    def done(self) -> bool:
        """Everything in it is consolidated (its `consolidated:` hash is its body's)."""
        return self.readable and self.mark == self.digest

    @property
    def new_items(self) -> list[NoteItem]:
        return [item for item in self.items if not item.old]


def source_of(rel: str, archive_dir: str) -> str:
    """The session path a note is cited by, also once it has been moved to the archive."""
    prefix = archive_dir.strip("/") + "/"
    if rel.startswith(prefix):
        return SESSIONS + "/" + rel[len(prefix) :]
    return rel


def read_note(full: Path, rel: str, source: str, extractors: list, snapshots: dict[str, list[str]]) -> NoteEntry:
    """Read and extract one note; which of its items are already consolidated comes from its `consolidated:` mark."""
    entry = NoteEntry(rel, source, None, None, "", None, [], [])
    try:
        data = full.read_bytes()
    except OSError as exc:
        entry.problems.append((1, f"cannot be read ({exc.strerror}); note skipped"))
        return entry
    text, bad = fmt.decode(data)
    if bad:
        entry.problems.append((bad[0].line, bad[0].message + "; note skipped"))
        return entry
    doc = fmt.split(text)
    if doc.problems:
        entry.problems.append((doc.problems[0].line, doc.problems[0].message + "; note skipped"))
        return entry
    entry.text = text
    entry.full = full
    entry.body_start_line = doc.body_start_line
    entry.digest = "sha256-" + hashlib.sha256(doc.body.encode("utf-8")).hexdigest()[:16]  # = fmt.body_digest(text)
    mark = doc.front_matter.get(fmt.CONSOLIDATED_FIELD)
    entry.mark = str(mark) if mark else None
    entry.date = note_date(source, doc.front_matter)
    if entry.date is None:
        entry.problems.append(
            (1, "cannot date this note: not under sessions/YYYY/MM/DD/ and no valid 'created'; note skipped")
        )
        return entry
    extraction = ex.run(extractors, ex.SessionNote(source, entry.date, text, doc.body, doc.body_start_line))
    entry.problems.extend(extraction.problems)
    items = [
        NoteItem(i.subject, i.line - doc.body_start_line, n, i.key, i.value, i.text, i.as_of, False)
        for n, i in enumerate(extraction.items)
    ]
    entry.items = _with_old(items, entry, doc.body, snapshots)
    dates = [i.as_of for i in entry.items if i.as_of and not i.old]
    entry.max_as_of = max(dates)[:10] if dates else None  # the day: held back until then
    return entry


def _with_old(items: list[NoteItem], entry: NoteEntry, body: str, snapshots: dict[str, list[str]]) -> list[NoteItem]:
    """Flag the items that were already consolidated: all (mark matches), those in the snapshot, or those in the marked prefix."""
    if entry.mark is None:
        return items
    if entry.mark == entry.digest:
        return [as_old(item) for item in items]
    if entry.mark in snapshots:
        old = aligned(snapshots[entry.mark], [item.identity for item in items])
        return [as_old(item) if index in old else item for index, item in enumerate(items)]
    lines = marked_prefix_lines(body, entry.mark)
    return [as_old(item) if item.line < lines else item for item in items]


def aligned(before: list[str], after: list[str]) -> set[int]:
    """Positions in `after` of the items that were in `before`: a longest common subsequence, matched as early as possible.

    A note only grows by lines inserted somewhere (appended, or under an
    existing heading), so what it held before is a subsequence of what it holds
    now; an item repeated word for word is taken to be the earlier one.
    """
    head = 0
    while head < len(before) and head < len(after) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < len(before) - head and tail < len(after) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    a, b = before[head : len(before) - tail], after[head : len(after) - tail]
    # lcs[i][j]: longest common subsequence of a[i:] and b[j:]
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    matched = set(range(head)) | set(range(len(after) - tail, len(after)))
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j] and lcs[i][j] == lcs[i + 1][j + 1] + 1:
            matched.add(head + j)
            i, j = i + 1, j + 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            i += 1
        else:
            j += 1
    return matched


def marked_prefix_lines(body: str, mark: str) -> int:
    """How many whole body lines the `consolidated:` hash covers, when the body only grew at its end (else 0)."""
    digest = hashlib.sha256()
    count = 0
    for line in body.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        probe = digest.copy()
        probe.update(content.encode("utf-8"))
        if "sha256-" + probe.hexdigest()[:16] == mark:
            return count + 1
        digest.update(line.encode("utf-8"))
        count += 1
        if "sha256-" + digest.hexdigest()[:16] == mark:
            return count
    return 0


def walk_notes(
    root: Path, archive_dir: str, refused: list[tuple[str, int, str]] | None = None
) -> Iterator[tuple[str, str, os.stat_result]]:
    """(path, absolute path, stat) of every session note, under `sessions/` and then the archive, in walk order.

    A note that is a symbolic link is never read as a note of its own, nor a folder of notes reached through a
    link (`fsmem.store.note_folders`). With `refused`, each entry left out that a person must fix is appended
    to it as (path, 1, message ending "; note skipped"): a link to a memory file that is not a note, and
    whatever the walk skips (a link out of the memory, a dangling link, a FIFO, an unreadable file); a folder
    left alone ends in "; notes skipped".
    """
    from fsmem.store.note_folders import NoteFolders
    from fsmem.store.walk import walk_entries

    folders = NoteFolders(root, archive_dir)
    if refused is not None:
        refused += folders.folder_problems("; notes skipped")
    for folder in folders.named:
        if not (root / folder).is_dir():
            continue
        skipped: list[tuple[str, str]] = []
        for rel, full, stat, target in walk_entries(root, root / folder, skipped):
            if target is None:
                yield rel, full, stat
                continue
            problem = folders.link_problem(target)
            if problem is not None and refused is not None:
                refused.append((rel, 1, problem + "; note skipped"))
        if refused is not None:
            refused += [
                (shown, 1, reason.removeprefix(_SKIPPED) + "; note skipped")
                for shown, reason in skipped
                if reason.startswith(_SKIPPED)
            ]


_SKIPPED = "skipped: "  # how the walk words a file it leaves out (a folder's reason says "folder skipped")


def as_old(item: NoteItem) -> NoteItem:
    return NoteItem(item.heading, item.line, item.index, item.key, item.value, item.text, item.as_of, True)
