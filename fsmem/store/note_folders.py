"""Which files are session notes: the files under `sessions/` and the archive folder, where they really are.

Consolidation reads these as notes, marks them and archives them; `fsmem note`, a saved transcript and an
import write them. A note that is a symbolic link to a memory file that is no note
(`sessions/2026/01/01/x.md -> ../../../../topics/billing.md`) would have that file's lines filed as if a
session had said them, and the file marked, archived and written into: each of them asks `NoteFolders`, and
`fsmem check` reports what it refuses.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsmem.format.valid_time import SESSIONS


class NoteFolders:
    """The folders that hold session notes: `sessions/` and the archive, as named and where they really are."""

    def __init__(self, root: Path, archive_dir: str):
        self.root = root
        self.named = [folder for folder in (SESSIONS, archive_dir.strip("/")) if folder]
        self.real_root = os.path.realpath(root)
        real = [os.path.realpath(root / folder) for folder in self.named]
        self.real = tuple(self._inside(path) + "/" for path in real if path.startswith(self.real_root + os.sep))

    def holds(self, rel: str) -> bool:
        """Whether the memory path `rel` is in one of the folders (as named, or where it really is)."""
        return rel.startswith(tuple(folder + "/" for folder in self.named) + self.real)

    def link_problem(self, target: str) -> str | None:
        """Why a note that is a symbolic link to `target` (its real path from the root) is no note, else None.

        A link to a note is that note, which consolidation takes once, under its own path (its walk gives it
        there too), so the link says nothing more. A link to any other memory file is left as it is, and said.
        """
        if target.startswith(self.real):
            return None
        return (
            f"a symbolic link to {target}, which is not a session note: remove the link, "
            "or put the session note itself in its place"
        )

    def write_problem(self, rel: str) -> str | None:
        """Why the session note `rel` may not be written (a link on its way leads to no note), else None.

        A path that leads out of the memory is not judged here: the path rule refuses it, in its own words."""
        real = os.path.realpath(os.path.join(self.root, rel))
        if not real.startswith(self.real_root + os.sep):
            return None
        target = self._inside(real)
        problem = None if target == rel else self.link_problem(target)
        return None if problem is None else f"{rel} is {problem}; nothing was written"

    def _inside(self, real: str) -> str:
        return real[len(self.real_root) + 1 :].replace(os.sep, "/")
