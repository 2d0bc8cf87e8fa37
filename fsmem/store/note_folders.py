"""Which files are session notes: the files under `sessions/` and the archive folder, where they really are.

Consolidation reads these as notes, marks them and archives them; `fsmem note`, a saved transcript and an
import write them. A note that is a symbolic link to a memory file that is no note
(`sessions/2026/01/01/x.md -> ../../../../topics/billing.md`) would have that file's lines filed as if a
session had said them, and the file marked, archived and written into: each of them asks `NoteFolders`, and
`fsmem check` reports what it refuses. A folder of notes reached through a link (`sessions -> topics`) would do
the same to a whole folder of documents: only a folder that is where it is named holds notes.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from fsmem.format.valid_time import SESSIONS


class NoteFolders:
    """The folders that hold session notes: `sessions/` and the archive, each where it is named (`named`), or
    left alone and said when a link on its way leads elsewhere (`refused`)."""

    def __init__(self, root: Path, archive_dir: str):
        self.root = root
        self.real_root = os.path.realpath(root)
        self.named: list[str] = []  # the folders that are where they are named: notes are read and written there
        self.refused: list[tuple[str, str]] = []  # (folder, why): a folder reached through a link, left alone
        for folder in (SESSIONS, archive_dir.strip("/")):
            if not folder:
                continue
            problem = self._place_problem(folder)
            if problem is None:
                self.named.append(folder)
            else:
                self.refused.append((folder, problem))
        self.real = tuple(folder + "/" for folder in self.named)

    def _place_problem(self, folder: str) -> str | None:
        """Why `folder` cannot hold session notes (a symbolic link on its way leads elsewhere), else None.

        `sessions -> topics` would have every topic read as a note, marked and archived out of `topics/`, and
        every note written into `topics/`: a folder of notes is one that is where it is named, as a note is.
        """
        real = os.path.realpath(os.path.join(self.root, folder))
        if real == os.path.join(self.real_root, *folder.split("/")):
            return None
        if real == self.real_root:
            where = "the memory root"
        elif real.startswith(self.real_root + os.sep):
            where = self._inside(real)
        else:
            where = "a folder outside the memory"
        return (
            f"a symbolic link on the way of {folder}/ leads to {where}, which is not a folder of session notes: "
            f"make {folder}/ a real folder"
        )

    def find(self, name: str) -> Path | None:
        """The session note named `name` (its file name without `.md`), wherever it is dated: under `sessions/`,
        else in the archive, where consolidation moved it. A note looked for in `sessions/` alone was not found
        once archived, and a second note of the same session was made beside it."""
        for folder in self.named:
            found = sorted((self.root / folder).glob(f"*/*/*/{glob.escape(name)}.md"))
            if found:
                return found[0]
        return None

    def refusal(self, folder: str) -> str | None:
        """Why the folder of notes `folder` is left alone, or None."""
        return dict(self.refused).get(folder)

    def folder_problems(self, ending: str) -> list[tuple[str, int, str]]:
        """A problem (folder, 1, why + `ending`) per folder of notes left alone, as consolidate and check say it."""
        return [(folder, 1, problem + ending) for folder, problem in self.refused]

    def holds(self, rel: str) -> bool:
        """Whether the memory path `rel` is in one of the folders that hold notes."""
        return rel.startswith(self.real)

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
        for folder, why in self.refused:
            if rel.startswith(folder + "/"):
                return f"{rel} cannot be written: {why}; nothing was written"
        real = os.path.realpath(os.path.join(self.root, rel))
        if not real.startswith(self.real_root + os.sep):
            return None
        target = self._inside(real)
        problem = None if target == rel else self.link_problem(target)
        return None if problem is None else f"{rel} is {problem}; nothing was written"

    def _inside(self, real: str) -> str:
        return real[len(self.real_root) + 1 :].replace(os.sep, "/")
