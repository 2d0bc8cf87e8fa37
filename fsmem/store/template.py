"""The memory template laid into a folder: only what is missing is added, nothing already there is changed.

`fsmem init DIR` on a folder of Markdown (an Obsidian vault, a notes folder)
makes it a memory this way. A name that is already taken (by a file, a folder
or a link) is left as it is, and nothing is written through a link, so the
files a human keeps there keep their bytes. `fsmem.yaml` comes last: a folder
holds it only once everything else is in place, and an interrupted init can
simply be run again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fsmem.config import CONFIG_FILE
from fsmem.store.files import atomic_write


def template_dir() -> Path:
    """The memory template that `init` copies (shipped inside the package)."""
    return Path(__file__).resolve().parents[1] / "memory_template"


def template_files(template: Path) -> list[str]:
    """The template's files, relative and sorted, fsmem.yaml last."""
    found = []
    for folder, dirs, files in os.walk(template):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            found.append(os.path.relpath(os.path.join(folder, name), template).replace(os.sep, "/"))
    return sorted(found, key=lambda rel: (rel == CONFIG_FILE, rel))


def _free(target: Path, rel: str) -> bool:
    """True when `rel` can be added under `target`: the name is unused and every folder on the way is a real folder."""
    parts = rel.split("/")
    here = target
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return True  # the folders from here on will be made
        if not stat.S_ISDIR(mode):
            return False  # a file, or a link: never written through
    return not os.path.lexists(here / parts[-1])


def missing(template: Path, target: Path) -> list[str]:
    """The template files `add_missing` would add to `target` (all of them for a new folder)."""
    return [rel for rel in template_files(template) if _free(target, rel)]


def add_missing(template: Path, target: Path) -> list[str]:
    """Copy the template files whose names are free in `target`; return what was added.

    Each file is published only if its name is still free when it is written
    (`atomic_write(exclusive=True)`), so a file made meanwhile is never overwritten.
    """
    target.mkdir(parents=True, exist_ok=True)
    added = []
    for rel in missing(template, target):
        source = template / rel
        try:
            atomic_write(target / rel, source.read_bytes(), exclusive=True, root=target)  # through no link out
        except FileExistsError:
            continue
        added.append(rel)
    return added
