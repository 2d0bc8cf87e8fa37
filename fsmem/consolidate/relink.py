"""Citations that link a note the archive has just moved, rewritten to link where it is now.

A document consolidated with `archive` on links its notes where the archive puts them
(`fsmem.consolidate.plan.citation_paths`); this keeps the links of documents written
before (archive off then, or citations a human copied) resolving too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fsmem.consolidate.dates import SESSIONS
from fsmem.consolidate.report import ConsolidationReport
from fsmem.consolidate.settings import Settings
from fsmem.errors import FsmemError
from fsmem.format.facts import UP
from fsmem.store.files import file_lock
from fsmem.store.note_status import lines_citing
from fsmem.store.paths import resolve

# written atomically (each file only if it still holds the bytes read: else named in the list), and reported
RELINK_ATTEMPTS = 3
WriteBatch = Callable[[list[tuple[Path, bytes, str, bytes | None]], list[str]], object]


def relink(root: Path, settings: Settings, report: ConsolidationReport, write: WriteBatch) -> None:
    """Rewrite `](…/sessions/…)` to `](…/ARCHIVE/…)` in every file outside sessions/ that links an archived note."""
    moved = {rel: f"{settings.archive_dir}/{rel[len(SESSIONS) + 1 :]}" for rel in report.notes_archived}
    if not moved:
        return
    with file_lock(root):
        documents = sorted(lines_citing(root, moved))
        for _attempt in range(RELINK_ATTEMPTS):  # a document saved by a person meanwhile is read and rewritten again
            batch = [item for item in (_relinked(root, doc, moved) for doc in documents) if item is not None]
            changed: list[str] = []
            write(batch, changed)
            documents = changed
            if not changed:
                return
        report.problems += [
            (doc, 1, "links to archived notes not rewritten: it was saved again while they were") for doc in changed
        ]


def _relinked(root: Path, doc: str, moved: dict[str, str]) -> tuple[Path, bytes, str, bytes | None] | None:
    """(where, new bytes, doc, bytes read) of `doc` with its links to the notes `moved` rewritten; None: unchanged."""
    try:
        full = resolve(root, doc)
        data = full.read_bytes()
    except (FsmemError, OSError):
        return None
    if os.path.islink(full):
        return None
    up = UP * doc.count("/")
    new = data
    for rel, archived in moved.items():
        new = new.replace(f"]({up}{rel})".encode(), f"]({up}{archived})".encode())
    return (full, new, doc, data) if new != data else None
