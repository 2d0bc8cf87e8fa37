"""Which branch of the remote a clone syncs with, however the remote was made.

A plain `git init --bare` remote names `master` in its HEAD whatever branch the
first host pushed, so `git clone` of it gives an empty checkout on a branch
that does not exist. Left alone, that clone would push a second, unrelated
branch and the team would split in two without a word. Here the branch is
found once and then remembered as the clone's upstream (`branch.X.remote` and
`branch.X.merge` in `.git/config`, as `git clone` records it): the upstream if
there is one, else the remote's branch of the same name, else the branch the
remote's HEAD names, else the one branch the remote holds. A clone with no
commit takes that branch as its own; a history that shares nothing with the
remote's is refused, naming both, before anything is merged or pushed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fsmem import faces
from fsmem.config import SyncSettings
from fsmem.errors import SyncFailed
from fsmem.history import trust
from fsmem.history.git import Git, first_line
from fsmem.history.repo import Repo
from fsmem.store.files import file_lock

DEFAULT_REMOTE = "origin"


@dataclass
class Target:
    """The branch a sync fetches, merges and pushes: `branch` on `remote`; `local` is this clone's branch."""

    remote: str
    branch: str
    local: str
    remembered: bool  # the clone's upstream names it already (nothing to look up, nothing to record)
    found: str = ""  # what was found, said when it was not the obvious (a first contact, an adopted branch)
    notes: list[str] = field(default_factory=list)  # what the trust boundary said of an adopted branch

    @property
    def ref(self) -> str:
        return f"refs/remotes/{self.remote}/{self.branch}"

    @property
    def label(self) -> str:
        return f"{self.remote}/{self.branch}"


def local_branch(git: Git) -> str:
    branch = git.text("symbolic-ref", "--short", "-q", "HEAD", check=False).strip()
    if not branch:
        raise SyncFailed("HEAD is detached: check out a branch before fsmem sync")
    return branch


def upstream_remote(git: Git, branch: str) -> str:
    return git.text("config", "--get", f"branch.{branch}.remote", check=False).strip()


def has_commits(git: Git) -> bool:
    return git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False).returncode == 0


def resolve(repo: Repo, remote: str, local: str, upstream: str, *, timeout: float, repair: bool = False) -> Target:
    """The branch to sync with (see the module); `upstream` is `upstream_remote` of `local`, as the caller read it.
    On a first contact, a clone with no commit takes it as its own, and one whose history shares nothing with it
    is refused before anything is merged or pushed."""
    git = repo.git
    merge = git.text("config", "--get", f"branch.{local}.merge", check=False).strip()
    if merge.startswith("refs/heads/") and upstream == remote:
        known = Target(remote, merge[len("refs/heads/") :], local, remembered=True)
        # trusted once fetched: `git clone` of a remote whose HEAD names a missing branch records that branch too
        if git.run("rev-parse", "-q", "HEAD^{commit}", known.ref, check=False).returncode == 0:
            return known
    heads, head = _remote_heads(git, remote, timeout)
    if heads is None:  # no answer from the remote: the loop's fetch says so, with its own message
        return Target(remote, local, local, remembered=False)
    return _resolve_with(repo, remote, local, heads, head, timeout, repair)


def _resolve_with(
    repo: Repo, remote: str, local: str, heads: dict[str, str], head: str | None, timeout: float, repair: bool = False
) -> Target:
    git = repo.git
    target = Target(remote, _choose(repo, remote, local, heads, head), local, remembered=False)
    if target.branch not in heads:
        if heads:
            target.found = (
                f"{remote} holds no branch {target.branch} (only {', '.join(sorted(heads))}): this sync creates it"
            )
        return target
    if target.branch != local:
        target.found = _why(remote, target.branch, head)
    if has_commits(git):
        fetch(git, target, timeout)
        check_related(repo, target)
        return target
    adopt(repo, target, timeout=timeout, repair=repair)
    target.found = f"this clone had no commit: took {target.label} as its branch" + (
        f" ({target.found})" if target.found else ""
    )
    target.local, target.remembered = target.branch, True
    return target


def _remote_heads(git: Git, remote: str, timeout: float) -> tuple[dict[str, str] | None, str | None]:
    """The remote's branches (name -> commit) and the branch its HEAD names (None: none, or it names none)."""
    proc = git.run("ls-remote", "--symref", remote, "HEAD", "refs/heads/*", check=False, timeout=timeout)
    if proc.returncode:
        return None, None
    heads: dict[str, str] = {}
    head = None
    for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
        fields = line.split("\t")
        if len(fields) != 2:
            continue
        value, name = fields
        if value.startswith("ref: refs/heads/") and name == "HEAD":
            head = value[len("ref: refs/heads/") :]
        elif name.startswith("refs/heads/"):
            heads[name[len("refs/heads/") :]] = value
    return heads, head


def _choose(repo: Repo, remote: str, local: str, heads: dict[str, str], head: str | None) -> str:
    if local in heads or not heads:
        return local
    if head in heads:
        return head
    if len(heads) == 1:
        return next(iter(heads))
    names = ", ".join(sorted(heads))
    pointed = f"its HEAD names {head}, which does not exist" if head else "it names no default branch"
    raise SyncFailed(
        f"{remote} holds several branches ({names}), none named {local}, and {pointed}; say which one this "
        f"clone syncs with: git -C {repo.root} fetch {remote} BRANCH && git -C {repo.root} branch "
        f"--set-upstream-to={remote}/BRANCH, then run {faces.call('sync')} again"
    )


def _why(remote: str, branch: str, head: str | None) -> str:
    if head == branch:
        return f"{remote}'s HEAD names {branch}"
    if head is None:  # a bare remote's HEAD that names a branch it does not hold is not even listed
        return f"{remote}'s HEAD names none of its branches; {branch} is the one branch it holds"
    return f"{remote}'s HEAD names {head}, which does not exist; {branch} is the one branch it holds"


def adopt(repo: Repo, target: Target, *, timeout: float, repair: bool = False) -> None:
    """Check the remote's branch out in a clone that has no commit: it becomes the clone's branch and upstream.
    What it brings crosses the trust boundary first (`repair`: without what the boundary refuses)."""
    git = repo.git
    with file_lock(repo.root, "commit"), file_lock(repo.root):  # no fsmem commit or write while files appear
        fetch(git, target, timeout)
        # judged before a file appears: a clone with no commit crosses the same boundary as a merge would
        admitted = trust.admit(repo, target.ref, target.label, repair=repair)
        target.notes = list(admitted.notes)
        tip = git.text("rev-parse", "--verify", "-q", target.ref, check=False).strip()
        start = (target.label,) if admitted.tip == tip else (admitted.tip,)
        proc = git.run("checkout", "-q", "--no-guess", "-b", target.branch, *start, check=False)
        if proc.returncode == 0:
            git.run("branch", "-q", f"--set-upstream-to={target.label}", target.branch, check=False)
        if proc.returncode:
            message = proc.stderr.decode("utf-8", "replace")
            blocked = [line.strip() for line in message.splitlines() if line.startswith(("\t", "        "))]
            what = f"these files are in the way: {', '.join(blocked)}" if blocked else first_line(proc.stderr)
            raise SyncFailed(
                f"this clone has no commit yet and {target.label} could not be checked out ({what}); nothing "
                f"was changed: move those files aside and run {faces.call('sync', setup=True)} again"
            )
    if target.local != target.branch:  # what `git clone` recorded for the branch that never existed
        git.run("config", "--remove-section", f"branch.{target.local}", check=False)


def fetch(git: Git, target: Target, timeout: float) -> None:
    proc = git.run(
        "fetch",
        "--quiet",
        "--no-tags",
        target.remote,
        f"+refs/heads/{target.branch}:{target.ref}",
        check=False,
        timeout=timeout,
    )
    if proc.returncode:
        raise SyncFailed(f"cannot fetch from {target.remote}: {first_line(proc.stderr)}; nothing was changed")


def check_related(repo: Repo, target: Target) -> None:
    git = repo.git
    if git.run("merge-base", "HEAD", target.ref, check=False).returncode == 0:
        return
    raise SyncFailed(unrelated(repo, target))


def unrelated(repo: Repo, target: Target) -> str:
    git = repo.git

    def said(rev: str) -> str:
        count = git.text("rev-list", "--count", rev, check=False).strip() or "?"
        last = git.text("log", "-1", "--format=%h %s", rev, check=False).strip()
        return f"{count} commit(s), the last {last}"

    keep = f"{target.local}-unrelated"
    root = repo.root
    return (
        f"{target.local} here ({said('HEAD')}) and {target.label} ({said(target.ref)}) share no history; "
        f"nothing was merged or pushed. To take {target.label} and keep this clone's commits on {keep}: "
        f"git -C {root} branch {keep} && git -C {root} checkout -B {target.branch} {target.label}; to join the "
        f"two instead: git -C {root} merge --allow-unrelated-histories {target.label}; then run {faces.call('sync')} again"
    )


def remember(git: Git, target: Target) -> None:
    """Record the branch as the clone's upstream (as `git clone` does), so later syncs need not look it up."""
    if target.remembered:
        return
    git.run("config", f"branch.{target.local}.remote", target.remote, check=False)
    git.run("config", f"branch.{target.local}.merge", f"refs/heads/{target.branch}", check=False)


def setup_clone(repo: Repo, *, timeout: float = SyncSettings.timeout_seconds) -> str:
    """For `fsmem sync --setup`: on a clone with no commit, take the remote's branch first (before set-up writes
    anything that would be in its way), and say what was found; '' when the clone has commits or no remote."""
    git = repo.git
    if has_commits(git):
        return ""
    branch = git.text("symbolic-ref", "--short", "-q", "HEAD", check=False).strip()
    remotes = git.text("remote", check=False).split()
    remote = upstream_remote(git, branch) if branch else ""
    remote = remote or (DEFAULT_REMOTE if DEFAULT_REMOTE in remotes else (remotes[0] if len(remotes) == 1 else ""))
    if not branch or not remote:
        return ""
    heads, head = _remote_heads(git, remote, timeout)
    if heads is None:
        raise SyncFailed(
            f"this clone has no commit yet and {remote} does not answer; nothing was changed: run "
            f"{faces.call('sync', setup=True)} again once it does"
        )
    if not heads:
        return f"{remote} holds no branch yet: the first fsmem sync pushes {branch}"
    # set-up repairs what a clone brought (as trust.repair_clone does for a clone with commits): a commit on top
    target = _resolve_with(repo, remote, branch, heads, head, timeout, repair=True)
    return "\n".join(line for line in (target.found, *target.notes) if line)


def take_remote_branch(root: Path, host: str) -> str:
    """A git clone without fsmem.yaml on disk, made a memory for `fsmem sync --setup`: one with no commit yet takes
    its remote's branch, as `setup_clone` does; one whose checkout stopped (at a name git refuses) gets its
    fsmem.yaml, a plain file in HEAD, so that set-up can judge and check out the rest (`trust.repair_clone`).
    '' when `root` is no such clone."""
    from fsmem.config import CONFIG_FILE
    from fsmem.history import git_marker
    from fsmem.history.repo import discover

    repo = discover(root, host) if git_marker(root) is not None else None
    if repo is None or repo.top != root:
        return ""
    if not has_commits(repo.git):
        return setup_clone(repo)
    entry = repo.git.text("ls-tree", "-z", "HEAD", "--", CONFIG_FILE, check=False).split("\t", 1)[0].split()
    if entry[:2] in (["100644", "blob"], ["100755", "blob"]):  # never a link: it would be read where it points
        repo.git.run("checkout", "-q", "HEAD", "--", CONFIG_FILE, check=False)
    return ""
