"""Commits of the files as they are: changes made outside fsmem, a consolidation run, the set-up of history.

The journal (`fsmem.history.journal`) commits what fsmem wrote, from the bytes
each write recorded. What no write recorded is found here with `git status`
and committed from the work tree: before a consolidation or a sync, what a
human changed is committed on its own, as made outside fsmem, so that it is
never folded into the next fsmem commit.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable

from fsmem.history.journal import Author, _load, author_of, commit_with, pending
from fsmem.history.repo import Repo
from fsmem.history.trees import TreeEditor
from fsmem.store.paths import is_memory_path

# Files beside the memory files that history keeps (setup writes them; humans edit fsmem.yaml).
KEPT_FILES = ("fsmem.yaml", ".gitattributes", ".gitignore")


def changed_on_disk(repo: Repo) -> list[str]:
    """Repository paths of the memory's files that differ from HEAD (`git status`): memory files and KEPT_FILES."""
    proc = repo.git.run(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", repo.prefix or "."
    )
    found = []
    for item in proc.stdout.split(b"\0"):
        if len(item) < 4:
            continue
        path = item[3:].decode("utf-8", "surrogateescape")
        rel = repo.in_memory(path)
        if rel is not None and (rel in KEPT_FILES or is_memory_path(rel)):
            found.append(path)
    return found


def on_disk(repo: Repo, path: str) -> bytes | None:
    full = repo.top / path
    if full.is_symlink() or not full.is_file():
        return None
    return full.read_bytes()


def commit_files(repo: Repo, paths: Iterable[str], author: Author, message: str) -> int:
    """One commit of `paths` (repository paths) as they are on disk; see `commit_blobs`."""
    blobs = {}
    for path in sorted(set(paths)):
        data = on_disk(repo, path)
        blobs[path] = repo.store.write("blob", data) if data is not None else None
    return commit_blobs(repo, blobs, author, message)


def commit_blobs(repo: Repo, blobs: dict[str, str | None], author: Author, message: str) -> int:
    """One commit setting each repository path to its blob (None: removed). Caller holds the commit lock.
    Returns 1, or 0 when HEAD already holds exactly that."""
    if not blobs:
        return 0
    now = _dt.datetime.now().astimezone()
    offset = int((now.utcoffset() or _dt.timedelta()).total_seconds() // 60)

    def build(editor: TreeEditor, parent: str | None, commit: Callable[..., str]) -> tuple[str | None, int]:
        if all(editor.get(path) == oid for path, oid in blobs.items()):
            return parent, 0
        for path, oid in blobs.items():
            editor.set(path, oid)
        return commit(editor, parent, author, int(now.timestamp()), offset, message), 1

    return commit_with(repo, build, list(blobs))


def commit_outside(repo: Repo) -> int:
    """Commit, as made outside fsmem, every change to the memory's files that no pending fsmem write explains.
    Caller holds the commit lock and has drained the journal."""
    waiting = {path for name in pending(repo) for entry in [_load(repo, name)] if entry for path, _, _ in entry.changes}
    paths = [path for path in changed_on_disk(repo) if path not in waiting]
    if not paths:
        return 0
    names = [repo.in_memory(path) or path for path in paths]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return commit_files(repo, paths, repo.outside_author(), f"outside fsmem: {shown}")


def before_pending(repo: Repo) -> dict[str, str | None]:
    """For each path a pending write touches, the blob it held just before the earliest of them."""
    found: dict[str, str | None] = {}
    for name in pending(repo):
        entry = _load(repo, name)
        for path, before, _ in entry.changes if entry else []:
            found.setdefault(path, before)
    return found


def commit_consolidation(repo: Repo, report: object, *, archive_dir: str, agent: str | None) -> int:
    """One commit of what a consolidation run changed, its report as the message. Caller holds the commit lock.

    The files are those the report names (documents and notes written, notes
    archived, INDEX.md) and the archive folder. A file an agent wrote again
    during the run is committed as the consolidator left it (the blob its
    pending write recorded as "before"), so that write stays its own commit.
    """
    names = [*getattr(report, "files_written", []), *getattr(report, "notes_archived", []), "INDEX.md"]
    paths = {repo.in_repo(name) for name in names}
    if getattr(report, "notes_archived", None):
        archive = repo.in_repo(archive_dir.strip("/") + "/")
        paths.update(path for path in changed_on_disk(repo) if path.startswith(archive))
    waiting = before_pending(repo)
    blobs: dict[str, str | None] = {}
    for path in sorted(paths):
        if path in waiting:
            blobs[path] = waiting[path]
        else:
            data = on_disk(repo, path)
            blobs[path] = repo.store.write("blob", data) if data is not None else None
    to_text = getattr(report, "to_text", None)
    message = to_text() if callable(to_text) else "consolidate"
    return commit_blobs(repo, blobs, author_of(agent), message)
