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

WriteBatch = Callable[[list[tuple[Path, bytes, str]]], object]  # written atomically, and told to the run's report


def relink(root: Path, settings: Settings, report: ConsolidationReport, write: WriteBatch) -> None:
    """Rewrite `](…/sessions/…)` to `](…/ARCHIVE/…)` in every file outside sessions/ that links an archived note."""
    moved = {rel: f"{settings.archive_dir}/{rel[len(SESSIONS) + 1 :]}" for rel in report.notes_archived}
    if not moved:
        return
    batch = []
    with file_lock(root):
        for doc in sorted(lines_citing(root, moved)):
            try:
                full = resolve(root, doc)
                data = full.read_bytes()
            except (FsmemError, OSError):
                continue
            if os.path.islink(full):
                continue
            up = UP * doc.count("/")
            new = data
            for rel, archived in moved.items():
                new = new.replace(f"]({up}{rel})".encode(), f"]({up}{archived})".encode())
            if new != data:
                batch.append((full, new, doc))
        write(batch)
