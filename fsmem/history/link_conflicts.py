"""A regular file of this host that a remote cannot make a link; and a path the two sides of a merge gave different
types (a file on one, a symbolic link on the other).

The rule is `host_keeps`: a regular file of this host that the incoming side makes a link stays this host's file,
byte for byte, so a remote never chooses where this host's next write to its own file lands. A link the incoming
side alone re-points is taken, as any change one side made. `fsmem.history.trust` applies the rule to what a fetch
brought, before anything is merged (`kept_note` says it). What git's merge still leaves, a path both sides changed
where one made a link, `keep_file` settles as the rule would: the side that is a file stays. git records such a path
by moving one side aside as `NAME~HEAD` (or `~` and the commit merged), a file no listing shows, and
`fold_renamed_sides` puts it back under its path first. `fsmem.history.sync` calls those two.
"""

from __future__ import annotations

import os

from fsmem.errors import SyncFailed
from fsmem.history.cat_file import CatFile
from fsmem.history.incoming import Tree, follow
from fsmem.history.repo import Repo
from fsmem.history.trees import BLOB_MODES, LINK_MODE, Entry
from fsmem.store import beneath
from fsmem.store.files import atomic_write
from fsmem.store.paths import shown


def host_keeps(ours: Entry | None, theirs: Entry | None) -> bool:
    """Whether this host's entry at a path stays where the incoming side puts `theirs`: it does where the incoming
    side makes this host's regular file a link, since where this host's own file leads is this host's to say. A
    remote may still add a link where this host has nothing, re-point one, remove one, make one a regular file
    again, or change a file's bytes: a link re-pointed by one side alone is taken, as any one-sided change (where
    both sides re-pointed it, the merge keeps this host's, as for any file both changed), so two hosts converge."""
    return theirs is not None and theirs[0] == LINK_MODE and ours is not None and ours[0] in BLOB_MODES


def kept_note(repo: Repo, path: str, incoming: Tree, label: str) -> str:
    """What a sync says, in one line, of a file `host_keeps` kept: where the link `incoming` holds there leads."""
    theirs = incoming.entry(path)
    where = _leads_to(repo, incoming, path, theirs[1]) if theirs is not None else "nothing"
    return f"kept {shown(repo.in_memory(path) or path)} as a file: {label} made it a link to {where}"


def _leads_to(repo: Repo, tree: Tree, path: str, oid: str) -> str:
    """Where the link `oid` at `path` leads in `tree`, as a memory path; else its target as it is written."""
    target = tree.link(oid)
    if target is None:
        return "a target that is not a plain path"
    where, _ = follow(tree, path, target)
    inside = repo.in_memory(where + "/") if where is not None else None
    return shown(inside.rstrip("/") if inside else target)


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
