"""Commits of the files as they are: changes made outside fsmem, a consolidation run, the set-up of history.

The journal (`fsmem.history.journal`) commits what fsmem wrote, from the bytes
each write recorded. What no write recorded is found here with `git status`
and committed from the work tree: before a consolidation or a sync, what a
human changed is committed on its own, as made outside fsmem, so that it is
never folded into the next fsmem commit.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from fsmem.errors import ConsolidationRunning, HistoryError, LockTimeout
from fsmem.format import now_iso
from fsmem.history import journal, recovery
from fsmem.history.journal import Author, author_of, commit_with
from fsmem.history.repo import Repo
from fsmem.history.trees import BLOB_MODES, EXEC_MODE, FILE_MODE, LINK_MODE, TreeEditor
from fsmem.store.files import file_lock
from fsmem.store.meta import LEFT_OUT_LIMIT
from fsmem.store.paths import is_memory_path

T = TypeVar("T")

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


def on_disk(repo: Repo, path: str, modes: bool = True) -> tuple[str | None, str | None]:
    """The blob of `path` as `git add` stores it, and its mode: a link's blob is its text (wherever it leads, if
    anywhere; what it leads to is never read), LINK_MODE; a file's its bytes, EXEC_MODE when its owner may run it
    and FILE_MODE when not, or None without `modes` (git's `core.fileMode false`: the mode history holds stays).
    (None, None): neither is there."""
    full = repo.top / path
    if full.is_symlink():
        return repo.store.write("blob", os.fsencode(os.readlink(full))), LINK_MODE
    if not full.is_file():
        return None, None
    with open(full, "rb") as handle:
        data = handle.read(LEFT_OUT_LIMIT + 1)  # at most: it may have grown since `too_large` looked
        found = os.fstat(handle.fileno())
    if len(data) > LEFT_OUT_LIMIT:
        raise TooLarge(path)
    oid = repo.store.write("blob", data)
    if not modes:
        return oid, None
    return oid, EXEC_MODE if found.st_mode & stat.S_IXUSR else FILE_MODE


class TooLarge(Exception):
    """A file `on_disk` found past LEFT_OUT_LIMIT when it read it: left out as `too_large` would have left it."""


def keeps_modes(repo: Repo) -> bool:
    """Whether the clone records executable bits (`core.fileMode`, which git sets false where the file system
    keeps none, and which `git status` obeys)."""
    found = repo.git.text("config", "--type=bool", "--get", "core.fileMode", check=False).strip()
    return found != "false"


def commit_files(repo: Repo, paths: Iterable[str], author: Author, message: str) -> int:
    """One commit of `paths` (repository paths) as they are on disk, links as links and each file with its
    executable bit, as `git add` would take them; see `commit_blobs`."""
    blobs: dict[str, str | None] = {}
    modes: dict[str, str] = {}
    with_modes = keeps_modes(repo)
    large = []
    for path in sorted(set(paths)):
        if too_large(repo, path):
            large.append(path)  # history keeps what it held; the file stays on disk as it is
            continue
        try:
            blobs[path], mode = on_disk(repo, path, with_modes)
        except TooLarge:
            large.append(path)  # it grew past the limit since it was measured
            continue
        if mode is not None:
            modes[path] = mode
    if large and blobs:
        message += f"\n\nleft out (over {LEFT_OUT_LIMIT:,} bytes, kept on disk only): " + ", ".join(large)
    return commit_blobs(repo, blobs, author, message, modes=modes)


def too_large(repo: Repo, path: str) -> bool:
    """Whether `path` is a file (not a link) over LEFT_OUT_LIMIT: history never reads it (a sparse 4 GB file took
    64 s and 4.2 GB of memory to commit, and put a 4 GB blob in every clone's history)."""
    try:
        found = os.lstat(repo.top / path)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size > LEFT_OUT_LIMIT


def commit_blobs(
    repo: Repo, blobs: dict[str, str | None], author: Author, message: str, *, modes: Mapping[str, str] = {}
) -> int:
    """One commit setting each repository path to its blob (None: removed), with its mode in `modes` (a symbolic
    link's LINK_MODE, the blob its text; a file's EXEC_MODE or FILE_MODE); a path not in `modes` is a file that
    keeps the mode HEAD gives it. Caller holds the commit lock. Returns 1, or 0 when HEAD already holds exactly
    that."""
    if not blobs:
        return 0
    now = journal.clock()
    offset = int((now.utcoffset() or _dt.timedelta()).total_seconds() // 60)

    def held(editor: TreeEditor, path: str, oid: str | None) -> bool:
        entry = editor.entry(path)
        if entry is None or oid is None:
            return entry is None and oid is None
        wanted = modes.get(path)
        return entry[1] == oid and (entry[0] == wanted if wanted else entry[0] in BLOB_MODES)

    def build(editor: TreeEditor, parent: str | None, commit: Callable[..., str]) -> tuple[str | None, int]:
        if all(held(editor, path, oid) for path, oid in blobs.items()):
            return parent, 0
        for path, oid in blobs.items():
            if oid is not None and path in modes:
                editor.put(path, (modes[path], oid))
            else:
                editor.set(path, oid)
        return commit(editor, parent, author, int(now.timestamp()), offset, message), 1

    return commit_with(repo, build, list(blobs))


def commit_outside(repo: Repo, *, whole: bool = False) -> int:
    """Commit, as made outside fsmem, every change to the memory's files that no fsmem write explains. Caller
    holds the commit lock; the write lock is taken here, so that no fsmem write is half done (its file
    written, its journal entry not yet) while `git status` looks. With `whole` (a merge comes next), nothing
    is committed while one of those files is open for writing (`ChangedOnDisk`): an editor saving it in place
    has written part of it, and a merge would replace it under the editor."""
    with file_lock(repo.root):
        # what a killed fsmem left (git locks, its half-done merge) is cleared when nothing holds it; a merge a
        # person started is theirs to finish: its conflicted files are never committed as changes made here
        merges = [left for left in recovery.recover(repo) if left.merge]
        if merges:
            raise HistoryError(recovery.refusal(repo, merges, "nothing was committed or changed"))
        journal.drain_locked(repo)
        paths = changed_on_disk(repo)
        if not paths:
            return 0
        if whole:
            _refuse_saving(repo, paths)
        names = [repo.in_memory(path) or path for path in paths]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return commit_files(repo, paths, repo.outside_author(), f"outside fsmem: {shown}")


def _refuse_saving(repo: Repo, paths: list[str]) -> None:
    """ChangedOnDisk naming the first of `paths` (the repository's) that is open for writing now (`fsmem.store.leases`)."""
    from fsmem.errors import ChangedOnDisk
    from fsmem.store import leases

    for path in paths:
        lease = leases.take(os.path.join(repo.top, path), None)
        if lease is None:
            raise ChangedOnDisk(
                f"{repo.in_memory(path) or path} is being saved (open for writing by an editor or another program); "
                "nothing was committed or merged. Sync again once it is saved"
            )
        lease.release()


def commit_consolidation(repo: Repo, report: object, *, archive_dir: str, agent: str | None) -> int:
    """Commit what a consolidation run changed, its report as the message. Caller holds the commit lock.

    The files are those the report names (documents and notes written, each
    where it landed: through an in-memory link, the file it leads to, the link
    left as it is; notes archived, INDEX.md) and the archive folder. Writes
    agents made meanwhile are committed first, each on its own; where the run
    wrote a file between two of them (a note marked while its agent kept
    appending), that change is a commit of the consolidation, by the same
    author, rather than "outside fsmem". The rest is then one commit.
    """
    names = [*getattr(report, "landed", []), *getattr(report, "notes_archived", []), "INDEX.md"]
    paths = {repo.in_repo(name) for name in names}
    if getattr(report, "notes_archived", None):
        archive = repo.in_repo(archive_dir.strip("/") + "/")
        paths.update(path for path in changed_on_disk(repo) if path.startswith(archive))
    to_text = getattr(report, "to_text", None)
    lines = (to_text() if callable(to_text) else "consolidate").splitlines()
    # The subject is the summary, which names no file; problems and held-back notes, which do, go in the
    # body: `fsmem log PATH` shows subjects, and a scoped agent must not learn other files' names from them.
    first = next((line for line in lines if line.startswith("consolidated")), "consolidate")
    rest = [line for line in lines if line != first]
    message = first + ("\n\n" + "\n".join(rest) if rest else "")
    author = author_of(agent)
    with file_lock(repo.root):  # no fsmem write half done (file written, entry not yet) while files are read
        journal.drain_locked(repo, journal.Gaps(paths, author, f"consolidate (between two writes): {first}"))
        return commit_files(repo, paths, author, message)


def consolidation(repo: Repo, run: Callable[[], T], *, archive_dir: str, agent: str | None) -> T:
    """One consolidation run as one commit: what fsmem and humans wrote before it is committed first; writers
    keep writing during the run (their writes wait in the journal). An overlapping run is refused at once,
    before it waits for the commit lock."""
    with contextlib.ExitStack() as alone:
        try:
            alone.enter_context(file_lock(repo.root, "consolidate", wait=False))
        except LockTimeout:
            raise ConsolidationRunning(
                f"at {now_iso()} another 'fsmem consolidate' was running on this memory; this run changed nothing "
                "(notes written meanwhile are consolidated by the next run)"
            ) from None
        with journal.commit_lock(repo):
            commit_outside(repo)
            report = run()
            commit_consolidation(repo, report, archive_dir=archive_dir, agent=agent)
            journal.drain_locked(repo)
    return report
