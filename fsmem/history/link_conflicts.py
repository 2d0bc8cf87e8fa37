"""A path the two sides of a sync's merge gave different types: a file on one, a symbolic link on the other.

git's merge records such a path by moving one side aside as `NAME~HEAD` (or `~` and the commit merged),
a file no listing shows; `fold_renamed_sides` puts it back under its path and `keep_file` settles it: the
changed file stays, byte for byte, whichever side made the link. `fsmem.history.sync` calls both.
"""

from __future__ import annotations

import os

from fsmem.errors import SyncFailed
from fsmem.history.git import CatFile
from fsmem.history.repo import Repo
from fsmem.history.trees import BLOB_MODES
from fsmem.store import beneath
from fsmem.store.files import atomic_write
from fsmem.store.paths import shown


def fold_renamed_sides(
    repo: Repo, unmerged: dict[str, dict[str, tuple[str, str]]], theirs: str
) -> dict[str, dict[str, tuple[str, str]]]:
    """`unmerged` with each side git moved aside put back under its path. When the two sides give a path
    different types (a file and a symbolic link), git keeps one at the path and moves the other's stages to
    `topics/billing.md~HEAD` (or `~` and the commit merged, `theirs`): a file no listing shows. Its stages are
    folded into the path's, and the moved file is taken off the index and the disk (its bytes are in the
    stages). A file of that name that is no such side (its stages overlap the path's) is left as it is."""
    folded = {path: dict(stages) for path, stages in unmerged.items()}
    for path, stages in unmerged.items():
        document, tilde, side = path.rpartition("~")
        moved = {"HEAD": "2", theirs: "3"}.get(side) if tilde else None
        if moved is None or document not in folded or os.path.isdir(repo.top / document):
            continue
        if set(stages) - {"1", moved} or moved in folded[document] or ("1" in stages and "1" in folded[document]):
            continue
        for stage, entry in stages.items():
            folded[document].setdefault(stage, entry)
        del folded[path]
        repo.git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", path, check=False)
        if os.path.lexists(repo.top / path):
            beneath.remove(repo.top, path, generated=True)
    return folded


def keep_file(
    repo: Repo, cat: CatFile, path: str, entries: dict[str, tuple[str, str]], kept_file: list[str], kept_ours: list[str]
) -> list[str]:
    """A path both sides changed where one side made it a symbolic link (or a submodule): the side that is
    a file is kept, byte for byte, and the link is left out (it stays in history), whichever side made it,
    so this host's write is never hidden behind a remote's link and every host merging the two writes the
    same file (said in `kept_file`). Two links: this clone's stays (said in `kept_ours`), as for any other file
    both sides changed."""
    sides = [entries[stage] for stage in ("2", "3") if entries[stage][0] in BLOB_MODES]
    rel = repo.in_memory(path) or path
    if not sides:
        repo.git.run("checkout", "--ours", "--", path)
        kept_ours.append(rel)
        return [path]
    mode, oid = sides[0]
    found = cat.get(oid)
    if found is None:
        raise SyncFailed(f"git merge left {shown(rel)} with a version whose object {oid} is missing")
    mode_bits = 0o755 if mode == "100755" else None
    atomic_write(repo.top / path, found[2], mode=mode_bits, root=repo.top, generated=True)  # replaces the link
    kept_file.append(rel)
    return [path]
