"""Undo without rewriting history: restore a file as it was, or revert one commit, each as a new commit.

Both only plan: they return the changes (bytes before and after, per file) for
the caller to write under the write lock, which commits them like any write.
A revert of a file changed since the commit merges the undo into those later
changes line by line; when both touch the same lines it is refused, naming the
file, rather than guessing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fsmem.errors import ChangedOnDisk, EditConflict, HistoryError, InvalidArgument
from fsmem.history.merge import merge_text
from fsmem.history.repo import Repo
from fsmem.history.view import HistoryView
from fsmem.store.files import atomic_write, version_of
from fsmem.store.paths import is_memory_path, read_regular, relative
from fsmem.store.writing import Change, WriteResult


def _current(root: Path, rel: str) -> bytes | None:
    full = root / rel
    return read_regular(full) if full.is_file() else None


def plan_restore(view: HistoryView, root: Path, rel: str, at: str) -> tuple[list[Change], str]:
    """The change that puts `rel` back as it was at `at` (a revision or a date, as `view` resolves it), and its
    commit message."""
    hint = "; nothing was changed (fsmem rm removes it)"
    commit = view.commit(at, rel, hint=hint)
    old = view.blob(commit, rel)
    if old is None:
        raise view.absent(at, rel, commit, hint=hint)
    now = _current(root, rel)
    changes = [] if now == old else [Change(rel, now, old)]
    named = at if commit.startswith(at) else f"{commit[:12]} ({at})"
    return changes, f"restore {rel} as of {named}"


def plan_revert(repo: Repo, root: Path, rev: str, resolve: Callable[[str], Path]) -> tuple[list[Change], str, str]:
    """The changes that undo commit `rev` in the memory's files, its message, and a label of what it touched."""
    commit = repo.commit(rev)
    parents = repo.git.text("rev-list", "--parents", "-n", "1", commit).split()[1:]
    if len(parents) > 1:
        raise InvalidArgument(
            f"{commit[:12]} is a merge (of a sync); revert the commits it merged, or restore files with --at"
        )
    parent = parents[0] if parents else None
    listed = repo.git.run(
        "diff-tree",
        "-r",
        "--no-commit-id",
        "--name-only",
        "--no-renames",
        "-z",
        *(["--root"] if parent is None else []),
        *([parent] if parent else []),
        commit,
        "--",
        repo.prefix or ".",
    ).stdout
    subject = repo.describe(commit)["message"]
    changes: list[Change] = []
    refused: list[str] = []
    cat = repo.reader
    for raw in filter(None, listed.split(b"\0")):
        rel = repo.in_memory(raw.decode("utf-8", "surrogateescape"))
        if rel is None or not is_memory_path(rel):
            continue
        rel = relative(root, resolve(rel))  # the containment rule, for paths that come from history too
        before = repo.blob(cat, parent, rel) if parent else None
        after = repo.blob(cat, commit, rel)
        now = _current(root, rel)
        if now == after:
            target = before
        elif now == before:
            continue  # already as it was before that commit
        else:
            target = _merged(after, now, before, rel)
            if target is None:
                refused.append(rel)
                continue
        if target != now:
            changes.append(Change(rel, now, target))
    if refused:
        raise EditConflict(
            f"cannot revert {commit[:12]}: {', '.join(refused)} changed since on the same lines; nothing was changed. "
            f"Compare with fsmem diff {commit[:12]} and restore by hand"
        )
    if not changes:
        raise HistoryError(f"nothing to revert: the files {commit[:12]} changed are already as they were before it")
    label = changes[0].path if len(changes) == 1 else f"{len(changes)} files"
    return changes, f'revert {commit[:12]}: "{subject}"', label


def _merged(base: bytes | None, ours: bytes | None, theirs: bytes | None, rel: str) -> bytes | None:
    """Undo (base -> theirs) on top of ours, as sync merges (front matter by field: `updated` keeps the later
    time); None when both touch the same lines."""
    if base is None or ours is None or theirs is None:
        return None
    try:
        texts = [data.decode("utf-8") for data in (base, ours, theirs)]
    except UnicodeDecodeError:
        return None
    merged, kept = merge_text(*texts, path=rel)
    return None if kept else merged.encode("utf-8")


def apply(root: Path, action: str, path: str, changes: list[Change]) -> WriteResult:
    """Write each change's `after` bytes (None removes the file) where its `before` bytes still are.

    For restore and revert, which plan the changes from history: a file that no
    longer holds what the plan saw is not overwritten (nothing at all is written).
    """
    for change in changes:
        full = root / change.path
        current = read_regular(full) if full.is_file() else None
        if current != change.before:
            raise ChangedOnDisk(f"{change.path} changed while the {action} was planned; nothing was written, try again")
    for change in changes:
        full = root / change.path
        if change.after is None:
            os.unlink(full)
        else:
            atomic_write(full, change.after)
    if not changes:
        return WriteResult(action, path, changed=False)
    last = root / changes[-1].path
    version = version_of(changes[-1].after, last.stat()) if changes[-1].after is not None else None
    created = len(changes) == 1 and changes[0].before is None
    return WriteResult(action, path, created=created, version=version, changes=changes)
