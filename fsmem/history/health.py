"""What `fsmem check` reports of a memory's history: what a killed git or fsmem left, and writes left uncommitted.

A write is done when its file is; its commit follows at once, from the
journal. When commits stop (a git lock nobody can tell is stale, say), writes
still succeed and pile up there unseen; `check` says so, with the reason
fsmem last logged, next to each leftover `fsmem.history.recovery` finds.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Iterable
from pathlib import Path

from fsmem.format.portable import UNPORTABLE_CHARACTERS, twin_key
from fsmem.history import journal, recovery
from fsmem.history.git import from_nul_separated
from fsmem.history.repo import Repo
from fsmem.store.paths import MEMORY_SUFFIXES, is_memory_path, shown

JOURNAL_GRACE = 30.0  # seconds an entry may wait before it counts as stuck (its writer commits it at once)


def problems(repo: Repo) -> list[tuple[str, int, str]]:
    """(path, line, message) of each leftover, and of writes that wait in the journal for a commit."""
    out = [(left.shown(repo), 1, "history: " + recovery.remedy(repo, left)) for left in recovery.find(repo)]
    behind = recovery.index_behind(repo)
    if behind:
        out.append(
            (
                ".git/index",
                1,
                f"history: git's index is behind HEAD at {len(behind)} path(s) fsmem committed while a git held it "
                "(git status shows them changed); the next fsmem write or sync points it",
            )
        )
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
    return out + other_edited_copies(repo) + merge_leftovers(repo)


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


# `topics/billing (edited on 3f9a2c1b).md`: a document edited on one host while another made a folder of its name
# a memory file's copy keeps its suffix; another file's (a file where the other side made a folder) has none
EDITED_COPY = re.compile(
    r"^(?P<stem>.+) \(edited on (?P<who>[^()/]+)\)(?: (?P<n>[0-9]+))?(?P<suffix>\.md|\.markdown)?$"
)


def edited_copy_name(document: str, who: str, taken: Iterable[str], *, memory: bool = True) -> str:
    """The name under which sync keeps `document`'s edited text beside the folder that took its name: portable
    (no character Windows refuses, whatever the host's id holds) and free in the folder; a memory file's keeps
    its suffix."""
    suffix = next((s for s in MEMORY_SUFFIXES if document.lower().endswith(s)), "") if memory else ""
    stem = document[: len(document) - len(suffix)]
    plain = "".join("-" if char in UNPORTABLE_CHARACTERS or char in "()/" or ord(char) < 32 else char for char in who)
    folded = {twin_key(name) for name in taken}
    name, number = f"{stem} (edited on {plain.strip(' .') or 'this host'}){suffix}", 1
    while twin_key(name) in folded:
        number += 1
        name = f"{stem} (edited on {plain.strip(' .') or 'this host'}) {number}{suffix}"
    return name


def edited_copy_problem(rel: str, root: Path | None = None) -> str:
    """What a copy sync kept beside a folder is, and what to do with it. A memory file's copy is removed with
    `fsmem rm`; another file's is no memory file, which fsmem neither lists nor removes: git removes it (run
    in the memory's folder, `root` when known)."""
    match = EDITED_COPY.match(rel.rsplit("/", 1)[-1])
    folder = rel.rpartition("/")[0]
    document = (f"{folder}/" if folder else "") + (match["stem"] + (match["suffix"] or "") if match else rel)
    who = match["who"] if match else "one host"
    if match is None or match["suffix"]:
        return (
            f"the text of {document} as edited on {who}, kept by fsmem sync when another host turned {document} "
            f"into a folder; merge what it holds into that folder's documents, then remove it (fsmem rm)"
        )
    where = f"git -C {shlex.quote(str(root))}" if root is not None else "git"
    folder_said = "" if root is not None else " in the memory's folder"
    return (
        f"the file {document} as {who} had it, kept by fsmem sync where the other side made {document} a folder; "
        f"it is no memory file (fsmem neither lists nor removes it): look at it, then remove it{folder_said}: "
        f"{where} rm -q -- {shlex.quote(rel)} && {where} commit -q -m {shlex.quote('remove ' + rel)}"
    )


def other_edited_copies(repo: Repo) -> list[tuple[str, int, str]]:
    """(path, line, message) of each file other than a memory file that sync kept beside the folder that took
    its name (in history: no listing of memory files holds it)."""
    found = []
    listed = repo.git.run("ls-files", "-z", "--", f"{repo.prefix}*(edited on *")
    for rel in filter(None, map(repo.in_memory, from_nul_separated(listed.stdout))):
        match = _kept_beside_its_folder(repo.root, rel)
        if match is not None and not match["suffix"]:  # a memory file's copy: with the memory's files
            found.append((rel, 1, edited_copy_problem(rel, repo.root)))
    return found


def edited_copies(root: Path, rels: Iterable[str]) -> list[tuple[str, int, str]]:
    """(path, line, message) of each document sync kept beside the folder that took its name."""
    found = []
    for rel in rels:
        if " (edited on " in rel and _kept_beside_its_folder(root, rel) is not None:
            found.append((rel, 1, edited_copy_problem(rel)))
    return found


def _kept_beside_its_folder(root: Path, rel: str) -> re.Match[str] | None:
    """The parts of `rel`'s name (`EDITED_COPY`) when it is a copy sync kept beside the folder that now has the
    name it had; else None."""
    match = EDITED_COPY.match(rel.rsplit("/", 1)[-1])
    folder = rel.rpartition("/")[0]
    if match and os.path.isdir(os.path.join(root, folder, match["stem"] + (match["suffix"] or ""))):
        return match
    return None


# `topics/billing.md~HEAD`, `topics/billing.md~origin_main`: one side of a conflict that `git merge` moved aside
MERGE_LEFTOVER = re.compile(r"^(?P<document>.+(?:\.md|\.markdown))~(?P<side>[^/~]+)$", re.IGNORECASE)


def merge_leftovers(repo: Repo) -> list[tuple[str, int, str]]:
    """(path, line, message) of each copy of a memory file that a git merge moved aside, committed or not: when
    two sides give a path different types (a file and a link, a file and a folder), git keeps one there and
    the other as `NAME~HEAD` (or `~` and the other branch), which is no memory file, so no listing shows it.
    `fsmem sync` never leaves one; a merge by hand may. One `git ls-files` of the index and the untracked."""
    asked = ("ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard", "--", f"{repo.prefix}*~*")
    tagged = {entry[2:]: entry[:1] for entry in from_nul_separated(repo.git.run(*asked).stdout)}
    found = []
    for path, tag in sorted(tagged.items()):
        rel = repo.in_memory(path)
        match = MERGE_LEFTOVER.match(rel.rsplit("/", 1)[-1]) if rel else None
        document = rel.rpartition("~")[0] if rel and match else ""
        if rel is None or match is None or not is_memory_path(document):
            continue
        where = f"git -C {shlex.quote(str(repo.root))}"
        if tag != "?":  # in the index: git removes it
            remove = f"{where} rm -q -- {shlex.quote(rel)} && {where} commit -q -m {shlex.quote('remove ' + rel)}"
        else:
            remove = f"rm -- {shlex.quote(str(repo.root / rel))}"
        found.append(
            (
                shown(rel),
                1,
                f"a copy of {shown(document)} that a git merge left ({match['side']}'s version, moved aside where the "
                f"other side made {shown(document)} a link or a folder); it is no memory file, so nothing lists it: "
                f"merge what it holds into {shown(document)}, then remove it: {remove}",
            )
        )
    return found


def link_problems(repo: Repo) -> list[tuple[str, int, str]]:
    """Each link in HEAD's tree of the memory that leads out of it, to fsmem's or git's own or a generated file,
    to something that is not memory, or to nothing; and each name git refuses to check out; with its remedy.
    One `git ls-tree -r`."""
    from fsmem.history.incoming import Tree, follow, link_problem, links

    _, tree = repo.head(repo.reader)
    found = []
    whole = Tree(repo, tree)
    refused: list[str] = []
    for path, oid in links(repo, tree, refused):
        rel = repo.in_memory(path)
        if rel is None:
            continue
        problem = link_problem(repo, whole, path, oid)
        if problem is None:
            where, _ = follow(whole, path, whole.link(oid) or "")
            if where is None or whole.entry(where, folders=True) is not None:
                continue
            problem = "a symbolic link that leads to nothing"
        found.append((shown(rel), 1, f"{problem}; remove the link or point it at a memory file"))
    for path in refused:
        rel = repo.in_memory(path)
        if rel is not None:
            found.append(
                (
                    shown(rel),
                    1,
                    "a name git refuses to check out on Windows and macOS (.git in one of its spellings): no clone "
                    f"there can hold this memory; rename it with: git mv {shlex.quote(rel)} NEW-NAME",
                )
            )
    return found
