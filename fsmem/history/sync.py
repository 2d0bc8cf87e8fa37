"""`fsmem sync`: fetch, merge, consolidate, push, until the push goes through; and setting up a clone for it.

Hosts that share one git remote converge: session notes never conflict (each
host names its own), documents merge through fsmem's merge driver
(`fsmem.history.merge`, named on every git call so a clone that was never set
up cannot fall back to raw conflict markers), INDEX.md is regenerated rather
than merged, and the merged memory is consolidated before it is pushed. A
push that loses the race to another host's is retried after a jittered
backoff, from a fresh fetch. Merges fast-forward when they can, so clones
agree on the same commit once the writing stops.

A sync holds its own lock (a second one exits at once), the commit lock while
it moves HEAD, and the write lock while `git merge` rewrites files, so a write
through fsmem waits for the merge rather than racing it. With no network to
the remote it fails with exit 2 after the local commits are made: nothing is
lost, the next sync sends it.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import faces
from fsmem.config import SyncSettings
from fsmem.errors import HistoryOff, LockTimeout, SyncFailed
from fsmem.history import (
    git_marker,
    host_rules,
    journal,
    link_conflicts,
    recovery,
    remote as remotes,
    trust,
    turn_on,
    worktree,
)
from fsmem.history.cat_file import CatFile
from fsmem.history.git import Git, driver_command, first_line, nul_separated, record_driver
from fsmem.history.health import edited_copy_name, edited_copy_problem
from fsmem.history.merge import GENERATED, merge_text
from fsmem.history.repo import Repo, discover
from fsmem.history.trees import BLOB_MODES
from fsmem.store import beneath
from fsmem.store.files import atomic_write, file_lock
from fsmem.store.paths import is_memory_path, shown

SYNC_LOCK = "sync"
RECOVERY_WAIT = 10.0  # seconds a sync waits for a live git holding a lock it needs


@dataclass
class SyncResult:
    """What one `fsmem sync` did."""

    remote: str
    branch: str = ""
    setup: bool = False
    found: str = ""  # what was found of the remote's branches, when it was not the obvious
    merged: str = ""  # "up to date", "fast-forward", "merged"
    pushed: bool = False
    attempts: int = 0
    rejected: int = 0
    kept_both: list[str] = field(default_factory=list)  # documents where two versions of lines were kept
    kept_ours: list[str] = field(default_factory=list)  # other files both sides changed: this clone's kept
    kept_beside: list[str] = field(default_factory=list)  # a document edited where the other side made a folder
    kept_file: list[str] = field(default_factory=list)  # a file changed where the other side made it a link
    consolidated: str | None = None
    boundary: list[str] = field(
        default_factory=list
    )  # what the trust boundary kept, took or repaired (fsmem.history.trust)
    seconds: dict[str, float] = field(default_factory=dict)  # time spent fetching, merging, consolidating, pushing

    def add_time(self, phase: str, started: float) -> None:
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.monotonic() - started, 3)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        found = [self.found] if self.found else []
        if self.setup:
            done = "history set up: .gitignore, .gitattributes (merge=fsmem) and the merge driver in .git/config"
            return "\n".join([*found, done, *self.boundary])
        where = f"{self.remote}/{self.branch}"
        lines = [*found, f"{where}: {self.merged or 'nothing to merge'}; pushed after {self.attempts} attempt(s)"]
        if self.rejected:
            lines[-1] += f" ({self.rejected} push(es) lost the race to another host and were retried)"
        lines.extend(self.boundary)
        if self.consolidated:
            lines.append(self.consolidated.splitlines()[-2] if "\n" in self.consolidated else self.consolidated)
        for path in self.kept_both:
            lines.append(
                f"{path}: both hosts changed the same lines; both versions kept, marked (see {faces.call('check')})"
            )
        for path in self.kept_ours:
            lines.append(f"{path}: both hosts changed it; this host's version kept (the other is in {where})")
        for path in self.kept_beside:
            lines.append(f"{path}: {edited_copy_problem(path)}")
        for path in self.kept_file:
            lines.append(
                f"{path}: one host made it a symbolic link while the other changed it; the changed file kept, "
                "the link left out (it stays in history)"
            )
        return "\n".join(lines)


def setup(
    root: Path, *, create: bool, host: str, agent: str | None, notes: list[str] | None = None
) -> tuple[Repo, str]:
    """Give a memory history: a repository if it has none (with `create`), `.fsmem/` ignored, `.gitattributes`
    naming the merge driver, the driver in the repository's config, and a commit of all that. On a clone,
    what `git clone` put on disk is checked and repaired first (`trust.repair_clone`), said in `notes`; a
    clone with no commit takes the remote's branch first. Returns the repository and what was found of the
    remote's branches."""
    notes = [] if notes is None else notes
    host_rules.remove_state_link(root, notes)  # before anything writes state (a lock) through it
    created = False
    repo = discover(root, host) if git_marker(root) is not None else None
    if repo is None:  # no work tree around it, or one that ignores it: the memory gets its own repository
        if not create:
            raise HistoryOff(f"{root} is not in a git work tree (or one that ignores it); " + turn_on(root))
        Git(root).run("init", "-q", "--initial-branch=main")
        for key, value in (("core.splitIndex", "true"), ("core.untrackedCache", "true")):
            Git(root).run("config", key, value)  # small index writes per commit, a fast git status
        created = True
        repo = discover(root, host)
    if repo is None:
        raise HistoryOff(f"{root}: git init did not make a work tree there")
    found = "" if created else remotes.setup_clone(repo)  # an empty clone takes the remote's branch first
    if found:
        host_rules.remove_state_link(root, notes)  # the branch just checked out may hold one
    host_rules.write_control_files(root, notes)
    record_driver(repo.git)
    host_rules.write_info_attributes(repo)
    with journal.commit_lock(repo):
        journal.drain_locked(repo)
        author = journal.author_of(agent)
        if created:
            worktree.commit_files(repo, worktree.changed_on_disk(repo), author, "init: a new fsmem memory with history")
        else:
            trust.repair_clone(repo, author, notes)
            kept = [repo.in_repo(name) for name in (".gitignore", ".gitattributes")]
            worktree.commit_files(repo, kept, author, "history set up: .gitignore, .gitattributes (merge=fsmem)")
            worktree.commit_outside(repo)
    return repo, found


def sync(
    repo: Repo,
    remote: str | None,
    *,
    settings: SyncSettings,
    consolidate: Callable[[], Any],
    index: Callable[[], bool],
    threshold_of: Callable[[], float],
    accept_config: bool = False,
    repair: bool = False,
) -> SyncResult:
    git = repo.git
    local = remotes.local_branch(git)
    upstream = remotes.upstream_remote(git, local)
    remote = remote or settings.remote or upstream or remotes.DEFAULT_REMOTE
    if git.run("remote", "get-url", "--", remote, check=False).returncode:
        raise SyncFailed(f"no remote named {remote!r}; add one with: git -C {repo.root} remote add {remote} URL")
    attempts = settings.max_attempts
    threshold = float(threshold_of())
    timeout = settings.timeout_seconds
    try:
        lock = file_lock(repo.root, SYNC_LOCK, wait=False)
        lock.__enter__()
    except LockTimeout:
        raise LockTimeout("another 'fsmem sync' is running on this memory; this one changed nothing") from None
    try:
        with journal.commit_lock(repo):  # what a killed fsmem or git left, cleared first (writers keep writing)
            left = recovery.clear_locks(repo, wait=RECOVERY_WAIT)
            if not left:
                with file_lock(repo.root):
                    left = recovery.recover(repo)
        if left:
            raise SyncFailed(recovery.refusal(repo, left, "fsmem sync changed nothing"))
        target = remotes.resolve(repo, remote, local, upstream, timeout=timeout, repair=repair)
        branch = target.branch  # the remote's branch: fetched, merged and pushed to
        result = SyncResult(remote=remote, branch=branch, found=target.found, boundary=list(target.notes))
        moved = record_driver(git)
        if moved:  # the environment moved (or was rebuilt) since the set-up: a plain `git merge` needs the new one
            result.boundary.append(f"merge driver in .git/config recorded again for this Python (was: {moved})")
        theirs = target.ref
        for attempt in range(attempts):
            result.attempts = attempt + 1
            started = time.monotonic()
            with journal.commit_lock(repo):
                result.add_time("waiting", started)
                started = time.monotonic()
                fetched = git.run(
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    remote,
                    f"+refs/heads/{branch}:{theirs}",
                    check=False,
                    timeout=timeout,
                )
                result.add_time("fetch", started)
                if fetched.returncode and b"couldn't find remote ref" not in fetched.stderr:
                    _commit_local(repo)
                    raise SyncFailed(_offline(remote, "fetch from", fetched.stderr))
                started = time.monotonic()
                with file_lock(repo.root):  # no fsmem write between committing what is here and merging
                    _commit_local(repo)
                    if git.run("rev-parse", "--verify", "-q", theirs, check=False).returncode == 0:
                        label = f"{remote}/{branch}"
                        admitted = trust.admit(repo, theirs, label, accept_config=accept_config, repair=repair)
                        result.boundary += [note for note in admitted.notes if note not in result.boundary]
                        _merge(repo, admitted.tip, label, result, threshold)
                        if result.merged in ("fast-forward", "merged"):
                            index()
                result.add_time("merge", started)
            started = time.monotonic()
            try:
                report = consolidate()
                if not getattr(report, "empty", True):
                    result.consolidated = report.to_text()
            except LockTimeout:
                pass  # a consolidation is running already: it commits its own work; the next sync sends it
            journal.drain(repo, wait=True)
            result.add_time("consolidate", started)
            started = time.monotonic()
            pushed = git.run(
                "push", "--porcelain", "--quiet", remote, f"HEAD:refs/heads/{branch}", check=False, timeout=timeout
            )
            result.add_time("push", started)
            if pushed.returncode == 0:
                result.pushed = True
                remotes.remember(git, target)
                return result
            if not _rejected(pushed.stdout + pushed.stderr):
                raise SyncFailed(_offline(remote, "push to", pushed.stderr))
            result.rejected += 1
            time.sleep(random.uniform(0, min(2.0, 0.05 * 2**attempt)))
    finally:
        lock.__exit__(None, None, None)
    raise SyncFailed(
        f"the push to {remote} lost the race {attempts} times (other hosts pushed first); nothing is lost, "
        f"every change is committed here: run {faces.call('sync')} again"
    )


def _commit_local(repo: Repo) -> None:
    """Everything here into HEAD: fsmem's pending writes, then what changed outside fsmem."""
    journal.drain_locked(repo)
    worktree.commit_outside(repo, whole=True)


def _offline(remote: str, what: str, stderr: bytes) -> str:
    return (
        f"cannot {what} {remote}: {first_line(stderr)}; nothing is lost: every change is committed here "
        "and goes out with the next fsmem sync"
    )


def _rejected(output: bytes) -> bool:
    text = output.decode("utf-8", "replace")
    return any(line.startswith("!") for line in text.splitlines()) or "[rejected]" in text or "cannot lock ref" in text


def _merge(repo: Repo, theirs: str, label: str, result: SyncResult, threshold: float) -> None:
    """Merge `theirs` into HEAD (fast-forward when possible) and settle, in this process, what git left.

    git is given a driver that defers every Markdown file both sides changed
    (`false`: git then leaves its three versions staged), and each is merged here
    with the driver's own function: one Python process for the whole merge, not
    one per file. (A `git pull` by hand runs the driver per file, to the same
    bytes; merges of several merge bases still use it for their inner merge.)
    """
    git = repo.git
    head, _ = repo.head(repo.reader)
    other = theirs  # a commit id: what trust.admit judged
    # one merge base answers both questions: it is theirs when HEAD holds it, HEAD when a fast-forward reaches it
    base = git.text("merge-base", head, other, check=False).strip() if head and head != other else head
    if base == other:
        result.merged = result.merged or "up to date"
        return
    fast = base == head if head else True
    identity = ("-c", "user.name=fsmem sync", "-c", f"user.email=fsmem@{repo.host}")
    deferred: tuple[str, ...] = ("-c", "merge.fsmem.driver=false", "-c", "merge.fsmem.recursive=fsmem-inner")
    deferred += ("-c", f"merge.fsmem-inner.driver={driver_command()}")
    message = f"fsmem sync: merge {label}"
    proc = git.run(*identity, *deferred, "merge", "--no-edit", "--no-stat", "-q", "-m", message, theirs, check=False)
    if proc.returncode:
        unmerged = _unmerged(git)
        if not unmerged:
            git.run("merge", "--abort", check=False)
            if b"unrelated histories" in proc.stderr:  # the remote's history was replaced since the last sync
                target = remotes.Target(result.remote, result.branch, remotes.local_branch(git), remembered=True)
                raise SyncFailed(remotes.unrelated(repo, target))
            raise SyncFailed(f"git merge of {label} failed: {first_line(proc.stderr or proc.stdout)}")
        settled: list[str] = []
        with CatFile(git) as cat:
            for path, stages in link_conflicts.fold_renamed_sides(repo, unmerged, theirs).items():
                settled += _settle(repo, cat, path, stages, result, threshold)
        if settled:  # one `git add` for every file settled on disk
            git.run("add", "--pathspec-from-file=-", "--pathspec-file-nul", input=nul_separated(settled))
        git.run(*identity, "commit", "--no-edit", "--no-verify", "-q")
    result.merged = "fast-forward" if fast else "merged"


def _unmerged(git: Git) -> dict[str, dict[str, tuple[str, str]]]:
    """What git left unmerged, from one `git ls-files -u`: path -> stage ("1" base, "2" ours, "3" theirs) ->
    (mode, blob id)."""
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for entry in git.run("ls-files", "-u", "-z").stdout.split(b"\0"):
        info, tab, name = entry.partition(b"\t")
        fields = info.decode("ascii", "replace").split()
        if tab and len(fields) == 3:
            mode, oid, stage = fields
            found.setdefault(name.decode("utf-8", "surrogateescape"), {})[stage] = (mode, oid)
    return found


def _settle(
    repo: Repo, cat: CatFile, path: str, entries: dict[str, tuple[str, str]], result: SyncResult, threshold: float
) -> list[str]:
    """A path git left unmerged (`entries`: its stages). A memory file both sides changed: merged by
    fsmem.history.merge. A file one side changed and the other made a link: `link_conflicts.keep_file`. Changed on one
    side, deleted on the other: the changed file stays. Any other file (fsmem.yaml, a link both sides
    changed): this clone's version stays. The path when it is to be added (the caller adds them all at once)."""
    git = repo.git
    stages = {stage: oid for stage, (_, oid) in entries.items()}
    full = repo.top / path
    rel = repo.in_memory(path) or path
    if _keep_beside_folder(repo, cat, path, entries, result):
        return []
    if "2" in entries and "3" in entries and {entries["2"][0], entries["3"][0]} - set(BLOB_MODES):
        return link_conflicts.keep_file(repo, cat, path, entries, result.kept_file, result.kept_ours)
    markdown = is_memory_path(rel)
    if markdown and "2" in stages and "3" in stages:
        texts = []
        for stage in ("1", "2", "3"):
            found = cat.get(stages[stage]) if stage in stages else None
            texts.append(found[2].decode("utf-8", "surrogateescape") if found else "")
        merged, kept = (texts[1], 0) if rel in GENERATED else merge_text(*texts, path=rel, threshold=threshold)
        # at the path git names, through no link (fsmem.store.beneath): a merge never writes a link's target
        atomic_write(full, merged.encode("utf-8", "surrogateescape"), root=repo.top, generated=True)
        if kept:
            result.kept_both.append(rel)
    elif not markdown and "2" in stages:
        git.run("checkout", "--ours", "--", path)
        result.kept_ours.append(rel)
    elif not os.path.lexists(full) and ("2" in stages or "3" in stages):
        git.run("checkout", "--ours" if "2" in stages else "--theirs", "--", path)
    if os.path.lexists(full):
        return [path]
    git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", path, check=False)
    return []


def _keep_beside_folder(
    repo: Repo, cat: CatFile, path: str, entries: dict[str, tuple[str, str]], result: SyncResult
) -> bool:
    """A file one side changed while the other made a folder of its name: git leaves the file as
    `topics/billing.md~HEAD` (or `~` and the other commit), which is no memory file. A document is kept as
    `topics/billing (edited on HOST).md` beside the folder, listed and searched like any, and reported by
    `fsmem check` until a person merges it; another file likewise without the suffix; a link is dropped."""
    document, tilde, side = path.rpartition("~")
    ours_or_theirs = side == "HEAD" or (len(side) >= 7 and all(char in "0123456789abcdef" for char in side))
    rel = repo.in_memory(document) if tilde and ours_or_theirs else None
    if rel is None or not (repo.top / document).is_dir() or os.path.islink(repo.top / document):
        return False
    stage = "2" if "2" in entries else "3" if "3" in entries else None
    mode = entries[min(entries)][0] if entries else ""  # the first entry `git ls-files -s` shows
    found = cat.get(entries[stage][1]) if stage else None
    repo.git.run("rm", "-q", "--cached", "--ignore-unmatch", "--", path, check=False)
    if os.path.lexists(repo.top / path):
        beneath.remove(repo.top, path, generated=True)
    if found is None or mode != "100644" and mode != "100755":
        result.boundary.append(f"{shown(rel)}: a link where the other side made a folder; dropped")
        return True
    who = repo.host if stage == "2" else result.remote
    taken = [p.name for p in (repo.top / document).parent.iterdir()]
    name = edited_copy_name(document.rsplit("/", 1)[-1], who, taken, memory=is_memory_path(rel))
    kept = f"{document.rpartition('/')[0]}/{name}" if "/" in document else name
    atomic_write(repo.top / kept, found[2], root=repo.top, generated=True)
    repo.git.run("add", "--", kept)
    result.kept_beside.append(repo.in_memory(kept) or kept)
    return True
