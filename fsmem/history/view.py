"""What of a memory's history an agent may see, decided in one place.

An agent without a scope sees all of it. A scoped agent (`Memory(root,
scope=...)`, `fsmem mcp --path`, a server token with paths) sees the history
of its scope and nothing else: the commits that changed a file in it, each
told only by what lies in it.

- A revision is resolved within that history: HEAD is the newest commit that
  changed the scope, HEAD~2 the one two before it there, a date the newest of
  them at or before it, a commit id only one of them. Walking HEAD~k, probing
  ids or dates thus never reaches a commit outside the scope, and no count of
  other commits shows through.
- A commit's message (the subject its author wrote, or fsmem wrote, which
  names the files changed) is shown only when every file the commit changed
  is in scope; otherwise it is withheld and the answer names the files in
  scope it changed.
- A version that is not there is one refusal, whether the commit or the file
  is missing; a symbolic link committed by hand is not a version (its text
  names a path, perhaps outside the scope).

`HistoryView.visible` is the one function that decides what an answer may say
of a commit; `log`, `show`, `diff` and `restore` all take their commits from a
view and pass every commit they name through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from fsmem import faces
from fsmem.errors import InvalidArgument, NotFound
from fsmem.history.git import from_nul_separated
from fsmem.history.repo import DATE, Repo, git_date
from fsmem.history.trees import BLOB_MODES
from fsmem.store.files import Stored
from fsmem.store.scope import Scope

# git log's format for one commit; with NAMES the changed paths follow, NUL-separated.
LOG_FORMAT = "--format=%x1e%H%x1f%P%x1f%an%x1f%aI%x1f%s"
NAMES = ("--name-only", "--no-renames", "-z")  # every path a commit changed, a rename as its two paths
MAX_LINKS = 1000  # symbolic links a scoped diff leaves out by name; past this the diff is refused
# What a scoped agent may name: HEAD or a commit id, then steps back (~N, ~, ^, ^1), or a date.
_SCOPED_REVISION = re.compile(r"^(HEAD|[0-9a-fA-F]{4,64})((?:~[0-9]{0,6}|\^1?)*)$")
_STEP = re.compile(r"~([0-9]*)|\^1?")
_NAMED = 3  # files in scope a withheld message names


@dataclass(frozen=True)
class Commit:
    """One commit: full id, author, date, subject, and every path it changed (memory-relative; None: outside)."""

    id: str
    agent: str
    date: str
    message: str
    paths: tuple[str | None, ...] = ()
    parents: tuple[str, ...] = ()

    def info(self) -> dict[str, Any]:
        return {"commit": self.id[:12], "agent": self.agent, "date": self.date, "message": self.message}


def parse_log(repo: Repo, out: bytes) -> list[Commit]:
    """The commits of `git log LOG_FORMAT --name-only -z` output, newest first."""
    commits = []
    for chunk in out.split(b"\x1e")[1:]:
        head, _, rest = chunk.partition(b"\0")
        full, parents, author, date, subject = (head.decode("utf-8", "replace").split("\x1f") + [""] * 4)[:5]
        names = [p.strip(b"\n").decode("utf-8", "surrogateescape") for p in rest.split(b"\0")]
        paths = tuple(repo.in_memory(name) for name in names if name)
        commits.append(Commit(full.strip(), author, date, subject, paths, tuple(parents.split())))
    return commits


class HistoryView:
    """A memory's history as one agent may see it: all of it (`scope` None) or that of its scope."""

    def __init__(self, repo: Repo, scope: Scope | None):
        self.repo = repo
        self.scope = scope

    @property
    def scoped(self) -> bool:
        return self.scope is not None

    # -- the one decision -------------------------------------------------------------------------
    def visible(self, commit: Commit) -> Commit:
        """What an answer may say of `commit`: the paths in scope it changed, and its message only when it
        changed nothing outside the scope (else the message is withheld and those paths are named)."""
        if self.scope is None:
            return replace(commit, paths=tuple(p for p in commit.paths if p is not None))
        if len(commit.parents) > 1:  # git lists no paths for a merge: those it brought in, then
            commit = replace(commit, paths=self._merged(commit))
        seen = tuple(p for p in commit.paths if p is not None and self.scope.contains(p))
        if len(seen) == len(commit.paths):
            return replace(commit, paths=seen)
        named = ", ".join(seen[:_NAMED]) + (f" and {len(seen) - _NAMED} more" if len(seen) > _NAMED else "")
        message = f"changed {named} (message withheld: the commit also changed files outside this agent's scope)"
        return replace(commit, message=message, paths=seen)

    def _merged(self, commit: Commit) -> tuple[str | None, ...]:
        """Every path a merge changed against its first parent (what it brought in)."""
        out = self.repo.git.run("diff-tree", "-r", "--no-commit-id", *NAMES, commit.parents[0], commit.id).stdout
        return tuple(self.repo.in_memory(name) for name in from_nul_separated(out))

    # -- commits ----------------------------------------------------------------------------------
    def describe(self, commit: str) -> Commit:
        """Commit `commit` (a full id) as this agent may see it."""
        names = NAMES if self.scope is not None else ("-z",)  # the paths decide only what a scope may see
        out = self.repo.git.run("log", "-1", "--no-color", LOG_FORMAT, *names, commit).stdout
        found = parse_log(self.repo, out)
        if not found:
            raise NotFound(f"no commit {commit[:12]} in this memory's history")
        return self.visible(found[0])

    def commit(self, at: str, rel: str, *, hint: str = "") -> str:
        """The full id of the commit `at` names (a revision or a date), for a question about `rel`.

        Scoped, it is one of the commits that changed the scope, or the refusal `absent(at, rel, hint=hint)`.
        """
        if self.scope is None:
            return self.repo.commit(at)
        if not isinstance(at, str) or not at.strip():
            raise InvalidArgument("give a revision (a commit id, HEAD~2) or a date such as 2026-11-30")
        text = at.strip()
        found: str | None
        if DATE.match(text):
            found = self._newest(f"--before={git_date(text, end_of_day=True)}", "HEAD")
        else:
            match = _SCOPED_REVISION.match(text)
            if match is None:
                raise InvalidArgument(
                    f"{at!r} is not a revision this agent may name: give a commit id from log or HEAD, either "
                    "followed by ~N (counted over the commits that changed this agent's scope), or a date "
                    "such as 2026-11-30"
                )
            base, steps = match.groups()
            back = sum(
                int(step.group(1) or 1) if step.group(0).startswith("~") else 1 for step in _STEP.finditer(steps)
            )
            start = "HEAD" if base == "HEAD" else self._own(base.lower())
            found = self._newest(f"--skip={back}", start) if start else None
        if not found:
            raise self.absent(at, rel, hint=hint)
        return found

    def _pathspec(self) -> list[str]:
        assert self.scope is not None
        return ["--", *(self.repo.in_repo(prefix) for prefix in self.scope.prefixes)]

    def _newest(self, *args: str) -> str | None:
        """The newest commit of the scope's history that `git rev-list args` reaches, or None."""
        proc = self.repo.git.run("rev-list", "-1", *args, *self._pathspec(), check=False)
        found = proc.stdout.decode("ascii", "replace").strip()
        return found if proc.returncode == 0 and found else None

    def _own(self, prefix: str) -> str | None:
        """The commit a (possibly short) id names when it is one that changed the scope, on HEAD's line."""
        found = self._newest(prefix)  # the commit itself when it changed the scope, else an older one
        if found is None or not found.startswith(prefix):
            return None
        ancestor = self.repo.git.run("merge-base", "--is-ancestor", found, "HEAD", check=False)
        return found if ancestor.returncode == 0 else None

    # -- versions ---------------------------------------------------------------------------------
    def blob(self, commit: str, rel: str) -> bytes | None:
        """The bytes of `rel` at `commit`; None when it was not there (scoped: nor was a regular file)."""
        repo = self.repo
        data = repo.blob(repo.reader, commit, rel)
        if data is None or self.scope is None:
            return data
        return data if repo.mode(repo.reader, commit, rel) in BLOB_MODES else None

    def stored(self, commit: str, rel: str) -> Stored | None:
        """`blob`, as a blob id and size (`Repo.stored`): the bytes are not read."""
        repo = self.repo
        found = repo.stored(commit, rel)
        if found is None or self.scope is None:
            return found
        return found if repo.mode(repo.reader, commit, rel) in BLOB_MODES else None

    def absent(self, at: str, rel: str, commit: str | None = None, *, hint: str = "") -> NotFound:
        """The refusal for a version of `rel` that is not there at `at`: scoped, one message for every reason."""
        if self.scope is not None:
            return NotFound(
                f"no version of {rel} at {at!r} in the history of this agent's scope{hint}; "
                f"{faces.call('log', path=rel)} lists the commits that changed it"
            )
        where = f" (commit {commit[:12]})" if commit else ""
        return NotFound(f"{rel} did not exist at {at}{where}{hint}; {faces.call('log', path=rel)} lists its changes")

    def links_left_out(self, sides: list[str], where: str) -> list[str]:
        """Pathspecs that keep a scoped diff from showing symbolic links (their text names a path)."""
        if self.scope is None:
            return []
        out = self.repo.git.run("diff", "--raw", "-z", "--no-renames", "--no-abbrev", *sides, "--", where).stdout
        fields = out.split(b"\0")
        links = []
        for status, name in zip(fields[0::2], fields[1::2], strict=False):
            modes = status.lstrip(b":").split(b" ")[:2]
            if any(mode not in (b"000000", b"100644", b"100755") for mode in modes):
                links.append(name.decode("utf-8", "surrogateescape"))
        if len(links) > MAX_LINKS:
            raise InvalidArgument(f"this diff holds {len(links)} symbolic links or submodules; narrow PATH")
        return [f":(exclude,literal){link}" for link in links]
