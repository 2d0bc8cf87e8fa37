"""Undo without rewriting history: restore a file as it was, or revert one commit, each as a new commit.

Both only plan: they return the changes (bytes before and after, per file) for
the caller to write under the write lock, which commits them like any write,
and `verify` checks, before either says it is done, that the files and HEAD
hold what was planned. A revert of a file changed since takes the undo out of
those later changes only when they touched none of its lines, fact keys or
front matter fields (`fsmem.history.footprint`); otherwise it is refused, naming
the later commit, and nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NoReturn

from fsmem import faces
from fsmem.errors import ChangedOnDisk, EditConflict, HistoryError, InvalidArgument
from fsmem.history import footprint, recovery
from fsmem.history.git import from_nul_separated
from fsmem.history.incoming import LINK, SUBMODULE
from fsmem.history.merge import GENERATED
from fsmem.history.repo import Repo
from fsmem.history.trees import BLOB_MODES, TREE_MODE
from fsmem.history.view import HistoryView
from fsmem.store import beneath
from fsmem.store.files import Stored, file_version, version_of
from fsmem.store.paths import is_memory_path, open_regular, read_regular, relative
from fsmem.store.writing import Change, WriteResult

COMPARED_BYTES = 1 << 20  # a version up to 1 MiB is held in memory to compare the file with at its rename


def _current(root: Path, rel: str) -> bytes | None:
    full = root / rel
    return read_regular(full) if full.is_file() else None


def _stored_now(repo: Repo, root: Path, rel: str) -> Stored | None:
    """The file `rel` as it is now, as a blob in the repository (what a restore's commit records before it),
    read a chunk at a time: hashed, and stored only when the repository lacks it (it mostly holds it: HEAD's);
    None when there is no file."""
    full = root / rel
    if not full.is_file():
        return None
    with open_regular(full) as handle:
        size = os.fstat(handle.fileno()).st_size
        oid = repo.store.id_of_stream("blob", handle, size)
        if repo.sizes.get(oid) is None:
            handle.seek(0)
            oid = repo.store.write_stream("blob", handle, size)
    return Stored(oid, size)


def _holds(repo: Repo, root: Path, rel: str, data: bytes | Stored | None) -> bool:
    """Whether the file `rel` holds `data` now (None: there is no file); a stored version is compared by its
    blob id, the file hashed a chunk at a time."""
    if not isinstance(data, Stored):
        return _current(root, rel) == data
    full = root / rel
    if not full.is_file():
        return False
    with open_regular(full) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size != data.size:
            return False
        try:
            return repo.store.id_of_stream("blob", handle, size) == data.oid
        except ChangedOnDisk:
            return False


def plan_restore(view: HistoryView, root: Path, rel: str, at: str) -> tuple[list[Change], str]:
    """The change that puts `rel` back as it was at `at` (a revision or a date, as `view` resolves it), and its
    commit message. Both versions are named by blob id (`Stored`), never held: the file now is stored as a
    blob, the old one is written from git to disk by `apply`, so a restore costs a chunk of memory, not the
    file."""
    hint = f"; nothing was changed ({faces.call('rm')} removes it)"
    commit = view.commit(at, rel, hint=hint)
    old = view.stored(commit, rel)
    if old is None:
        raise view.absent(at, rel, commit, hint=hint)
    named = at if commit.startswith(at) else f"{commit[:12]} ({at})"
    mode = view.repo.mode(view.repo.reader, commit, rel)
    if mode not in BLOB_MODES:
        raise InvalidArgument(
            f"{rel} was {_kind(mode)} at {named}, not a file: fsmem restores files only; nothing was changed"
        )
    now = _stored_now(view.repo, root, rel)
    changes = [] if now == old else [Change(rel, now, old)]
    return changes, f"restore {rel} as of {named}"


def _kind(mode: str | None) -> str:
    return {LINK: "a symbolic link", SUBMODULE: "a submodule", TREE_MODE: "a folder"}.get(mode or "", "no regular file")


def plan_revert(
    repo: Repo, root: Path, rev: str, resolve: Callable[[str], Path], *, archive_dir: str
) -> tuple[list[Change], str, str]:
    """The changes that undo commit `rev` in the memory's files, its message, and a label of what it touched.

    A file changed since is undone under the later changes only when they touched none of what `rev` touched
    (lines, fact keys, fields: `fsmem.history.footprint`); otherwise nothing is changed and the later commit is
    named. What a consolidation did to its notes (their `consolidated:` marks, their move to `archive_dir`)
    stays: reverting a consolidation undoes what it wrote into documents, and the next run does not redo it.
    INDEX.md is left out: it is regenerated from the documents, never reverted.
    """
    commit = repo.commit(rev)
    parents = repo.git.text("rev-list", "--parents", "-n", "1", commit).split()[1:]
    if len(parents) > 1:
        raise InvalidArgument(
            f"{commit[:12]} is a merge (of a sync); revert the commits it merged, or restore files with {faces.arg('at')}"
        )
    parent = parents[0] if parents else None
    cat = repo.reader
    versions: dict[str, tuple[bytes | None, bytes | None]] = {}
    for rel in _changed_paths(repo, parent, commit):
        if rel in GENERATED or not is_memory_path(rel):
            continue
        rel = relative(root, resolve(rel))  # the containment rule, for paths that come from history too
        for side, at in (("before it", parent), ("in it", commit)):
            mode = repo.mode(cat, at, rel) if at else None
            if mode is not None and mode not in BLOB_MODES:  # its bytes are a link's text, not a file's
                raise InvalidArgument(
                    f"cannot revert {commit[:12]}: {rel} was {_kind(mode)} {side}, not a file: fsmem reverts files "
                    "only; nothing was changed"
                )
        versions[rel] = (repo.blob(cat, parent, rel) if parent else None, repo.blob(cat, commit, rel))
    for rel in _archive_moves(versions, archive_dir):
        versions.pop(rel)
    subject = repo.describe(commit)["message"]
    changes: list[Change] = []
    for rel, (before, after) in versions.items():
        old, new = _text(before), _text(after)
        if old is not None and new is not None and footprint.bookkeeping_only(old, new):
            continue  # a consolidation's mark on a note: it stays, or the next run would redo the revert
        now = _current(root, rel)
        target = _undone(repo, commit, rel, before, after, now)
        if target != now:
            changes.append(Change(rel, now, target))
    if not changes:
        raise HistoryError(f"nothing to revert: the files {commit[:12]} changed are already as they were before it")
    label = changes[0].path if len(changes) == 1 else f"{len(changes)} files"
    return changes, f'revert {commit[:12]}: "{subject}"', label


def _changed_paths(repo: Repo, parent: str | None, commit: str) -> list[str]:
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
    found = []
    for name in from_nul_separated(listed):
        rel = repo.in_memory(name)
        if rel is not None:
            found.append(rel)
    return found


def _archive_moves(versions: dict[str, tuple[bytes | None, bytes | None]], archive_dir: str) -> list[str]:
    """Both sides of each note a consolidation moved to the archive (removed from sessions/, added there)."""
    prefix = archive_dir.strip("/") + "/"
    out = []
    for rel, (before, after) in versions.items():
        if rel.startswith("sessions/") and before is not None and after is None:
            archived = prefix + rel[len("sessions/") :]
            if archived in versions and versions[archived][0] is None:
                out += [rel, archived]
    return out


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _undone(
    repo: Repo, commit: str, rel: str, before: bytes | None, after: bytes | None, now: bytes | None
) -> bytes | None:
    """What `rel` becomes with the commit's change taken out of it; EditConflict when a later change touched
    the same lines, keys or fields (naming that later commit); what it is now when it is as before already."""
    if now == after or _same_note(rel, now, after):
        return before
    if now == before:
        return now
    b, a, n = _text(before), _text(after), _text(now)
    if b is None or a is None or n is None:  # created or removed by it (or not text), changed since
        _refuse(repo, commit, rel, before, after, "the same lines")
    what = footprint.overlap(b, a, n)
    if what:
        _refuse(repo, commit, rel, before, after, what)
    result = footprint.undo(b, a, n)
    wrong = footprint.facts_as_in(result, b, footprint.keys_changed(b, a))
    if wrong:  # never print "reverted" over a result that does not hold what was there before
        raise EditConflict(
            f"cannot revert {commit[:12]}: in {rel} the facts {', '.join(wrong)} would not come out as they were "
            f"before it; nothing was changed. Compare with {faces.call('diff', rev=commit[:12])} and restore by hand"
        )
    return result.encode("utf-8")


def _same_note(rel: str, one: bytes | None, two: bytes | None) -> bool:
    """A session note as the commit left it, but for the mark a consolidation added since."""
    if not rel.startswith("sessions/"):
        return False
    a, b = _text(one), _text(two)
    return a is not None and b is not None and footprint.without_mark(a) == footprint.without_mark(b)


def _refuse(repo: Repo, commit: str, rel: str, before: bytes | None, after: bytes | None, what: str) -> NoReturn:
    later = _first_later(repo, commit, rel, before, after)
    if later is None:
        by = f"by a change not committed yet ({faces.call('diff')} shows it)"
    else:
        info = repo.describe(later)
        by = f'by {info["commit"]} ({info["agent"]}, {info["date"][:10]}: "{info["message"]}")'
    place = f"{rel} changed since on the same lines" if what == "the same lines" else f"{what} in {rel} changed since"
    raise EditConflict(
        f"cannot revert {commit[:12]}: {place}, {by}; nothing was changed. Revert that commit first (the newest "
        f"first), or compare with {faces.call('diff', rev=commit[:12])} and restore by hand"
    )


def _first_later(repo: Repo, commit: str, rel: str, before: bytes | None, after: bytes | None) -> str | None:
    """The first commit after `commit` whose version of `rel` touches what `commit` changed."""
    listed = repo.git.text("rev-list", "--reverse", "--topo-order", f"{commit}..HEAD", "--", repo.in_repo(rel))
    b, a = _text(before), _text(after)
    for later in listed.split():
        data = repo.blob(repo.reader, later, rel)
        if data == after or _same_note(rel, data, after):
            continue
        text = _text(data)
        if b is None or a is None or text is None or footprint.overlap(b, a, text):
            return later
    return None


def verify(repo: Repo, root: Path, action: str, changes: list[Change]) -> None:
    """Before a restore or revert says it is done: the files hold what was planned, and HEAD holds them too."""
    for change in changes:
        if not _holds(repo, root, change.path, change.after):
            raise ChangedOnDisk(
                f"{change.path} changed while the {action} was written; run {faces.call('diff')} to see it"
            )
    missing = [change.path for change in changes if not _committed(repo, change.path, change.after)]
    if missing:
        raise HistoryError(
            f"the {action} is written to {', '.join(missing)} but not committed ({recovery.last_error(repo)}); "
            f"{faces.call('check')} says what stops the commit, and the next write or sync commits it"
        )


def _committed(repo: Repo, rel: str, data: bytes | Stored | None) -> bool:
    """Whether HEAD holds `data` at `rel` (a stored version: its blob id, its bytes not read)."""
    if isinstance(data, Stored):
        found = repo.stored("HEAD", rel)
        return found is not None and found.oid == data.oid
    return repo.blob(repo.reader, "HEAD", rel) == data


def apply(repo: Repo, root: Path, action: str, path: str, changes: list[Change]) -> WriteResult:
    """Write each change's `after` bytes (None removes the file) where its `before` bytes still are.

    For restore and revert, which plan the changes from history: a file that no
    longer holds what the plan saw is not overwritten (nothing at all is written).
    """
    for change in changes:
        if not _holds(repo, root, change.path, change.before):
            raise ChangedOnDisk(f"{change.path} changed while the {action} was planned; nothing was written, try again")
    _publish(repo, root, changes)
    if not changes:
        return WriteResult(action, path, changed=False)
    last, after = root / changes[-1].path, changes[-1].after
    if isinstance(after, Stored):
        version = file_version(last)
    else:
        version = version_of(after, last.stat()) if after is not None else None
    created = len(changes) == 1 and changes[0].before is None
    return WriteResult(action, path, created=created, version=version, changes=changes)


def _publish(repo: Repo, root: Path, changes: list[Change]) -> None:
    """Each change at the path history names, through no link at all (`fsmem.store.beneath`; a link there now
    is replaced by the file, never written through: its target is another file's history). Every file is
    placed and staged before any is published, so a path refused (a folder swapped for a link meanwhile)
    leaves every file as it was. A stored version is written by git straight into the staged file. Each file
    replaces only what was planned from (`Staged.publish_if`): a person's save made meanwhile is kept."""
    staged: list[beneath.Staged] = []
    befores: list[bytes | Stored | None] = []
    gone: list[beneath.Place] = []
    try:
        for change in changes:
            if change.after is None:
                gone.append(beneath.place(root, change.path, generated=True, follow=False, create=False, file=False))
                continue
            target = beneath.place(root, change.path, generated=True)
            try:
                staged.append(beneath.Staged(target, _bytes_of(repo, change.after)))
            except BaseException:
                target.folder.close()
                raise
            befores.append(change.before)
        for stage in staged:
            stage.sync()
        for stage, before in zip(staged, befores, strict=True):
            expect = _compared(repo, before)
            if expect is False or stage.place.link is not None:  # a large version, or a link the file replaces:
                stage.publish()  # compared by `_holds` before (its bytes not held whole)
            elif not stage.publish_if(expect):  # a person's save made meanwhile is kept; `verify` says so
                continue
            stage.place.folder.sync()
        for target in gone:
            beneath.remove_at(target)
    finally:
        for stage in staged:
            if stage.fd is not None:  # not published: an error came first
                stage.discard()
            stage.place.folder.close()
        for target in gone:
            target.folder.close()


def _compared(repo: Repo, before: bytes | Stored | None) -> bytes | None | Literal[False]:
    """The bytes a file must still hold when it is replaced (None: no file); False for a version too large to
    hold in memory (`COMPARED_BYTES`), which is replaced without that last look."""
    if not isinstance(before, Stored):
        return before
    if before.size > COMPARED_BYTES:
        return False
    found = repo.reader.get(before.oid)
    return found[2] if found is not None else False


def _bytes_of(repo: Repo, data: bytes | Stored) -> bytes | Callable[[int], None]:
    """What a staged file is filled with: the bytes, or for a stored version git writing its blob there."""
    if not isinstance(data, Stored):
        return data

    def stream(fd: int) -> None:
        repo.git.blob_to(data.oid, fd)
        if os.fstat(fd).st_size != data.size:
            raise HistoryError(f"git wrote {os.fstat(fd).st_size} bytes of blob {data.oid[:12]}, not {data.size}")

    return stream
