"""What a killed fsmem, or a killed git, leaves in a repository: found, and cleared when nothing alive holds it.

git guards each file it rewrites with a lock file beside it (`index.lock`,
`HEAD.lock`, `refs/heads/main.lock`…) and removes the lock when it is done; a
git killed on the way (fsmem and its git killed together by a timeout, systemd
or the OOM killer) leaves the lock, and from then on every git command that
needs that file fails. A sync killed between `git merge` and its commit
leaves a merge half done (MERGE_HEAD, an index with conflicts).

Nobody may remove a lock that a live process holds, and git's lock files do
not say who holds them. fsmem can tell: the caller holds fsmem's own commit
lock, so no fsmem process is in a step that takes the index, HEAD or branch
locks (they all run under it), and `/proc` shows whether any git process is
running in this repository: a human's `git commit` waiting for its editor,
the git child of a killed fsmem that is still finishing, and fsmem's own
steps that run outside the commit lock (a sync's push, its `git config`, the
background `git gc`). Only when neither is the case is a lock removed. Where that cannot be told (no `/proc`, a git process whose
folder cannot be read), nothing is removed and the message gives the command
to run once no git is running. A half-done merge is aborted only when it is
fsmem's own (its MERGE_MSG) and the caller also holds the write lock; one a
person started is never touched.

A commit fsmem made while a live git held `index.lock` leaves the index behind
HEAD at the paths it wrote (the commit needs no index; pointing the index does).
Those paths are kept in `.fsmem/history/index-behind` and pointed by the next
process that holds the commit lock, before anything reads the index: `git
status`, fsmem's own changes-outside-fsmem, and `git merge --abort`, which
refuses to abort a merge over a committed file the index does not hold.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from fsmem import faces
from fsmem.history.git import first_line, from_nul_separated, nul_separated
from fsmem.history.repo import Repo
from fsmem.history.trees import TreeEditor
from fsmem.state_files import read_state
from fsmem.store import logs
from fsmem.store.files import atomic_write

WORKTREE_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "MERGE_HEAD.lock", "AUTO_MERGE.lock")
COMMON_LOCKS = ("config.lock", "packed-refs.lock", "shallow.lock")
FSMEM_MERGE = "fsmem sync: merge "  # how fsmem's merge commits begin (fsmem.history.sync._merge)
PROC = Path("/proc")
# git commands that never take a lock: running, they hold none of the files above
READ_ONLY = frozenset(
    ("cat-file", "rev-parse", "rev-list", "log", "show", "diff-tree", "merge-base", "ls-remote", "ls-files", "ls-tree")
    + ("for-each-ref", "check-ignore", "symbolic-ref", "blame", "grep", "version", "help")
)
UNKNOWN = "?"
INDEX_BEHIND = "index-behind"  # in .fsmem/history: paths committed while the index was held, NUL-separated
POINT_ATTEMPTS = 5  # tries at the index (a person's git holds index.lock for a moment) before it is left behind


@dataclass
class Leftover:
    """A lock file, or a half-done merge (`path` is MERGE_HEAD), and who may still be using it."""

    path: Path
    holder: str | None  # a live git process in this repository ("git commit (pid 123)"), UNKNOWN, or None
    merge: bool = False
    ours: bool = False  # a merge fsmem's sync started
    refused: str = ""  # why `git merge --abort` of fsmem's own merge failed

    def shown(self, repo: Repo) -> str:
        try:
            return self.path.relative_to(repo.top).as_posix()
        except ValueError:
            return os.fspath(self.path)


def worktree_git_dir(repo: Repo) -> Path:
    """The git folder of this work tree (`.git`, or what a linked work tree's `.git` file names), no git run."""
    marker = repo.top / ".git"
    if marker.is_file():
        with contextlib.suppress(OSError, IndexError):
            line = marker.read_text(encoding="utf-8").splitlines()[0]
            if line.startswith("gitdir:"):
                named = Path(line[len("gitdir:") :].strip())
                return named if named.is_absolute() else (repo.top / named).resolve()
    return repo.git_dir


def find(repo: Repo) -> list[Leftover]:
    """Every git lock file and half-done merge in the repository (a few `stat` calls when there is none)."""
    here = worktree_git_dir(repo)
    paths = [here / name for name in WORKTREE_LOCKS] + [repo.git_dir / name for name in COMMON_LOCKS]
    found = [path for path in paths if os.path.lexists(path)]
    for folder, _, files in os.walk(repo.git_dir / "refs"):
        found += [Path(folder, name) for name in files if name.endswith(".lock")]
    merge = here / "MERGE_HEAD"
    leftovers = [Leftover(path, None) for path in found]
    if os.path.lexists(merge):
        leftovers.append(Leftover(merge, None, merge=True, ours=_fsmem_merge(here)))
    if leftovers:
        holder = live_git(repo)
        for leftover in leftovers:
            leftover.holder = holder
    return leftovers


def _fsmem_merge(here: Path) -> bool:
    try:
        return (here / "MERGE_MSG").read_text(encoding="utf-8", errors="replace").startswith(FSMEM_MERGE)
    except OSError:
        return False


def live_git(repo: Repo) -> str | None:
    """A git process running in this repository ("git commit (pid 123)"), UNKNOWN when that cannot be told, or
    None. A process counts when it works in the work tree or the git folder: its folder, `-C`, `--git-dir`."""
    if not (PROC / "self" / "cwd").exists():
        return UNKNOWN
    places = {os.path.realpath(p) for p in (repo.top, repo.git_dir, worktree_git_dir(repo))}
    me = os.getpid()
    try:
        folder = os.stat(repo.git_dir)
        owner = folder.st_uid if not folder.st_mode & 0o022 else None  # None: others may write there too
    except OSError:
        owner = None
    for entry in os.scandir(PROC):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            name = (PROC / entry.name / "comm").read_text().strip()
        except OSError:
            continue  # gone meanwhile
        if name != "git" and not name.startswith("git-"):
            continue
        try:
            cwd = os.readlink(PROC / entry.name / "cwd")
            argv = (PROC / entry.name / "cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        except OSError:  # another user's process: where it works cannot be read
            with contextlib.suppress(OSError):
                uid = os.stat(PROC / entry.name).st_uid
                if owner is not None and uid not in (owner, 0):
                    continue  # it cannot write in this git folder, so it holds none of its locks
            return UNKNOWN
        command = _subcommand(argv)
        if command in READ_ONLY:
            continue  # a reader (fsmem's own `cat-file --batch` among them) takes no lock
        if any(_inside(folder, places) for folder in _folders(cwd, argv)):
            return f"git {command or name} (pid {entry.name})"
    return None


def _subcommand(argv: list[bytes]) -> str:
    """git's subcommand in a command line: the first word after the options (`-C DIR`, `-c KEY=VALUE`)."""
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg in (b"-C", b"-c"):
            skip = True
        elif not arg.startswith(b"-"):
            return os.fsdecode(arg)
    return ""


def _folders(cwd: str, argv: list[bytes]) -> list[str]:
    out = [cwd]
    for index, arg in enumerate(argv):
        text = os.fsdecode(arg)
        if text == "-C" and index + 1 < len(argv):
            out.append(os.path.join(out[-1] if len(out) > 1 else cwd, os.fsdecode(argv[index + 1])))
        elif text.startswith(("--git-dir=", "--work-tree=")):
            out.append(os.path.join(cwd, text.split("=", 1)[1]))
    return out


def _inside(folder: str, places: set[str]) -> bool:
    real = os.path.realpath(folder)
    return any(real == place or real.startswith(place.rstrip("/") + "/") for place in places)


def clear_locks(repo: Repo, *, wait: float = 0.0) -> list[Leftover]:
    """Remove the git lock files no live process holds; the caller holds fsmem's commit lock. Waits up to
    `wait` seconds for a live git to finish. Returns the locks left in place (held, or who holds them unknown)."""
    deadline = time.monotonic() + wait
    while True:
        left = [leftover for leftover in find(repo) if not leftover.merge]
        if not left:
            return left
        if all(leftover.holder is None for leftover in left):
            for leftover in left:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover.path)
            return []
        if time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def point_index(repo: Repo, entries: dict[str, tuple[str, str] | None]) -> bool:
    """Set the index to these committed (mode, blob) entries (None: no file), so `git status` and `git diff`
    tell the truth; the caller holds the commit lock. Where a live git keeps the index, the paths are left to
    `catch_up_index` of the next commit-lock holder. Returns whether the index holds them now."""
    if not entries:
        return True
    lines = []
    for path, entry in entries.items():
        mode, oid = entry if entry is not None else ("0", repo.store.zero)
        lines.append(f"{mode} {oid}\t{path}\0".encode("utf-8", "surrogateescape"))
    data = b"".join(lines)
    for attempt in range(POINT_ATTEMPTS):
        if repo.git.run("update-index", "-z", "--index-info", input=data, check=False).returncode == 0:
            return True
        if attempt == 0:
            clear_locks(repo)
        time.sleep(0.01 * (attempt + 1))
    behind = set(index_behind(repo)) | set(entries)
    atomic_write(_behind_file(repo), nul_separated(sorted(behind)), root=repo.root, generated=True)
    return False


def index_behind(repo: Repo) -> list[str]:
    """The paths whose commit the index does not hold yet (a live git kept it when fsmem committed them)."""
    try:
        return from_nul_separated(read_state(_behind_file(repo)))
    except FileNotFoundError:
        return []


def catch_up_index(repo: Repo) -> bool:
    """Point the index at HEAD's entries for the paths left behind; the caller holds the commit lock. A stat
    when there are none. Returns whether none is left."""
    paths = index_behind(repo)
    if not paths:
        return True
    _, tree = repo.head(repo.reader)
    editor = TreeEditor(repo.read_tree, repo.write_tree, tree)
    if not point_index(repo, {path: editor.entry(path) for path in paths}):
        return False  # still held: they stay recorded
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_behind_file(repo))
    return True


def _behind_file(repo: Repo) -> Path:
    return repo.state() / INDEX_BEHIND


def recover(repo: Repo, *, wait: float = 0.0) -> list[Leftover]:
    """`clear_locks`, then point the index where a held lock left it behind and abort a half-done merge of a
    killed `fsmem sync`; the caller holds the commit and write locks (and no sync of this process is merging).
    Returns what is left: each needs a person's remedy."""
    left = clear_locks(repo, wait=wait)
    if not left:
        catch_up_index(repo)
    merges = [leftover for leftover in find(repo) if leftover.merge]
    for merge in merges:
        if merge.ours and merge.holder is None and not left:
            aborted = repo.git.run("merge", "--abort", check=False)
            if aborted.returncode == 0:
                continue
            merge.refused = first_line(aborted.stderr)
        left.append(merge)
    return left


def remedy(repo: Repo, leftover: Leftover) -> str:
    """One sentence: what the leftover is and exactly what to do about it."""
    shown = leftover.shown(repo)
    top = repo.top
    if leftover.merge:
        if leftover.ours and leftover.refused:
            return (
                f"{shown}: a merge of a killed fsmem sync is half done and git would not abort it "
                f"({leftover.refused}); keep the files it names aside, then: git -C {top} merge --abort, and run "
                f"{faces.call('sync')} again"
            )
        if leftover.ours:
            running = "" if leftover.holder is None else f" once no git runs here ({_holder(leftover)})"
            return (
                f"{shown}: a merge of a killed fsmem sync is half done; the next fsmem sync or consolidate aborts it"
                f"{running}, and the next sync merges again"
            )
        return (
            f"{shown}: a merge someone started is not finished; fsmem sync waits for it: finish it "
            f"(git -C {top} commit) or abort it (git -C {top} merge --abort)"
        )
    if leftover.holder == UNKNOWN:
        return (
            f"{shown} exists: a git process holds it, or one was killed holding it (fsmem cannot tell here); "
            f"if no git is running in {top}, remove it: rm {leftover.path}"
        )
    if leftover.holder:
        return f"{shown} is held by {_holder(leftover)}; wait for it to finish, then try again"
    return f"{shown} is left by a killed git (no git runs in {top}); the next fsmem write or sync removes it"


def _holder(leftover: Leftover) -> str:
    return "a git process fsmem cannot see into" if leftover.holder == UNKNOWN else str(leftover.holder)


def refusal(repo: Repo, left: list[Leftover], what: str) -> str:
    """The one-line message of a command that cannot go on because of `left`."""
    return f"{what}: " + "; ".join(remedy(repo, leftover) for leftover in left)


def last_error(repo: Repo) -> str:
    """The last history problem fsmem logged (`.fsmem/logs/history.jsonl`), for a message."""
    return logs.last_history_problem(repo.root)
