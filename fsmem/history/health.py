"""What `fsmem check` reports of a memory's history: what a killed git or fsmem left, and writes left uncommitted.

A write is done when its file is; its commit follows at once, from the
journal. When commits stop (a git lock nobody can tell is stale, say), writes
still succeed and pile up there unseen; `check` says so, with the reason
fsmem last logged, next to each leftover `fsmem.history.recovery` finds.
"""

from __future__ import annotations

import time
from pathlib import Path

from fsmem.history import journal, recovery
from fsmem.history.repo import Repo

JOURNAL_GRACE = 30.0  # seconds an entry may wait before it counts as stuck (its writer commits it at once)


def problems(repo: Repo) -> list[tuple[str, int, str]]:
    """(path, line, message) of each leftover, and of writes that wait in the journal for a commit."""
    out = [(left.shown(repo), 1, "history: " + recovery.remedy(repo, left)) for left in recovery.find(repo)]
    folder = journal.journal_dir(repo)
    now = time.time()
    waiting = [name for name in journal.pending(repo) if _age(folder / name, now) > JOURNAL_GRACE]
    if waiting and not journal.commit_lock_held(repo):
        out.append(
            (
                ".fsmem/history/journal",
                1,
                f"history: {len(waiting)} write(s) are not committed yet ({recovery.last_error(repo)}); the next "
                "fsmem write or sync commits them once that is fixed",
            )
        )
    return out


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0
