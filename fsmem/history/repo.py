"""The git repository behind a memory: where it is, where the memory sits in it, and revisions by name or date.

`discover` runs one `git rev-parse` (and, for a memory in a subfolder of a
larger repository, one `git check-ignore`): a memory that repository ignores
has no history, so a scratch memory inside a project's checkout is never
committed into the project.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import faces
from fsmem.budget import echo
from fsmem.errors import HistoryError, InvalidArgument, NotFound
from fsmem.format.timestamps import parse_timestamp
from fsmem.history import git_marker
from fsmem.history.cat_file import CatFile, give_back, readers
from fsmem.history.git import Git, ObjectStore
from fsmem.history.git_dir import check as git_dir_check
from fsmem.history.trees import parse_tree, tree_body
from fsmem.store.files import Stored

TREE_CACHE = 4096  # trees kept parsed in memory (the folders on recent paths)

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:?\d{2})?)?$")
# What a revision may look like: no option (no leading '-'), no whitespace or control characters.
_REVISION = re.compile(r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]{0,255}$")


@dataclass
class Repo:
    """A memory's repository: `prefix` is the memory root's path in it ('' or 'folder/')."""

    root: Path
    top: Path
    git_dir: Path
    prefix: str
    algo: str
    host: str
    git: Git = field(init=False)
    store: ObjectStore = field(init=False)

    def __post_init__(self) -> None:
        self.git = Git(self.top)
        self.store = ObjectStore(self.git_dir / "objects", self.algo)
        shared = readers(self.top, self.git_dir)  # the process's `cat-file --batch` and `--batch-check` of this
        self.reader, self.sizes = shared.reader, shared.sizes  # work tree, each started when first asked
        self._give_back = weakref.finalize(self, give_back, shared)  # at `close`, or when this object goes
        self._trees: dict[str, dict[str, tuple[str, str]]] = {}

    def close(self) -> None:
        """Give the readers back (the last user ends their processes). A read through this object afterwards (a
        request still holding it) starts a reader again, then ended when the object is collected."""
        found = self._give_back.detach()  # called here, not through the finalizer: at exit those no longer run
        if found is not None:
            give_back(*found[2])

    # -- trees, cached by id (an id names the same tree forever) -----------------------
    def read_tree(self, oid: str) -> dict[str, tuple[str, str]]:
        """A tree's entries (name -> (mode, id)), a fresh dict the caller may change."""
        entries = self._trees.get(oid)
        if entries is None:
            found = self.reader.get(oid)
            if found is None or found[1] != "tree":
                raise HistoryError(f"tree {oid} is missing from the repository")
            entries = self._remember(oid, parse_tree(found[2], self.id_bytes))
        return dict(entries)

    def write_tree(self, entries: dict[str, tuple[str, str]]) -> str:
        oid = self.store.write("tree", tree_body(entries))
        self._remember(oid, dict(entries))
        return oid

    def _remember(self, oid: str, entries: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
        if len(self._trees) >= TREE_CACHE:
            self._trees.clear()
        self._trees[oid] = entries
        return entries

    @property
    def id_bytes(self) -> int:
        return 32 if self.algo == "sha256" else 20

    def in_repo(self, rel: str) -> str:
        """A memory-relative path as the repository names it."""
        return self.prefix + rel

    def in_memory(self, path: str) -> str | None:
        """A repository path relative to the memory root, or None when it lies outside the memory."""
        return path[len(self.prefix) :] if path.startswith(self.prefix) else None

    def state(self, *parts: str) -> Path:
        folder = Path(self.root, ".fsmem", "history", *parts)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # -- revisions ------------------------------------------------------------------
    def head(self, cat: CatFile) -> tuple[str | None, str | None]:
        """(HEAD's commit id, its tree id); (None, None) on a branch with no commit yet."""
        found = cat.get("HEAD")
        if found is None:
            return None, None
        oid, kind, body = found
        if kind != "commit":
            raise HistoryError(f"HEAD names a {kind}, not a commit")
        return oid, body.split(b"\n", 1)[0].split()[1].decode()

    def commit(self, at: str) -> str:
        """The commit `at` names: a revision (id, branch, HEAD~3, tag) or a date (the last commit at or before it)."""
        if not isinstance(at, str) or not at.strip():
            raise InvalidArgument("give a revision (a commit id, HEAD~2, a branch) or a date such as 2026-11-30")
        at = at.strip()
        if DATE.match(at):
            found = self.git.text("rev-list", "-1", f"--before={git_date(at, end_of_day=True)}", "HEAD", check=False)
            found = found.strip()
            if not found:
                raise NotFound(f"no commit at or before {at}; the history starts later (see {faces.call('log')})")
            return found
        if not _REVISION.match(at):
            raise InvalidArgument(f"{echo(at)} is neither a revision nor a date such as 2026-11-30")
        proc = self.git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{at}^{{commit}}", check=False)
        if proc.returncode:
            raise NotFound(f"no commit {echo(at)} in this memory's history; {faces.call('log')} lists them")
        return proc.stdout.decode().strip()

    def blob(self, cat: CatFile, commit: str, rel: str) -> bytes | None:
        found = cat.get(f"{commit}:{self.in_repo(rel)}")
        if found is None or found[1] != "blob":
            return None
        return found[2]

    def stored(self, commit: str, rel: str) -> Stored | None:
        """`rel` at `commit` as a blob id and size (asked of the `sizes` reader: its bytes are never read)."""
        found = self.sizes.get(f"{commit}:{self.in_repo(rel)}")
        if found is None or found[1] != "blob":
            return None
        return Stored(found[0], int(found[2]))

    def mode(self, cat: CatFile, commit: str, rel: str) -> str | None:
        """The tree mode of `rel` at `commit` (100644 or 100755 a file, 120000 a link, 040000 a folder, 160000 a
        submodule), None when it was not there."""
        folder, _, name = self.in_repo(rel).rpartition("/")
        tree = cat.get(f"{commit}:{folder}")
        if tree is None or tree[1] != "tree":
            return None
        return parse_tree(tree[2], self.id_bytes).get(name, ("", ""))[0] or None

    def describe(self, commit: str) -> dict[str, Any]:
        """A commit's short id, author, date and subject."""
        out = self.git.text("show", "-s", "--format=%H%x1f%an%x1f%aI%x1f%s", commit)
        full, author, date, subject = (out.rstrip("\n").split("\x1f") + ["", "", "", ""])[:4]
        return {"commit": full[:12], "agent": author, "date": date, "message": subject}

    def outside_author(self) -> tuple[str, str]:
        """Who a change made outside fsmem is attributed to: this clone's git user, else 'outside fsmem'."""
        name = self.git.text("config", "--get", "user.name", check=False).strip()
        email = self.git.text("config", "--get", "user.email", check=False).strip()
        return (name or "outside fsmem", email or "outside@fsmem")


def git_date(text: str, *, end_of_day: bool = False) -> str:
    """A date or time (`DATE`) as git reads it on every host: `@SECONDS`. Given as typed, git reads it in the
    host's time zone, and a date alone at the clock's time of day; fsmem reads a time without a zone as UTC and a
    date as its day in UTC, from its start, or to its last second with `end_of_day`."""
    when = parse_timestamp(text)
    if when is None:
        raise InvalidArgument(f"{echo(text)} is no date or time (give one such as 2026-11-30 or 2026-11-30T12:00Z)")
    if end_of_day and len(text.strip()) == 10:
        when += _dt.timedelta(days=1, seconds=-1)
    return f"@{int(when.timestamp())}"


def discover(root: Path, host: str, *, enabled: bool = True) -> Repo | None:
    """The repository a memory lives in, or None when it has no history (no git, ignored, switched off with
    `history.enabled`)."""
    marker = git_marker(root) if enabled else None
    if marker is None:
        return None
    git_dir_check(marker)  # no FIFO git would wait on, no other repository's git dir
    git = Git(root)
    asked = ("rev-parse", "--is-inside-work-tree", "--show-toplevel", "--git-common-dir", "--show-prefix")
    proc = git.run(*asked, "--show-object-format", check=False)
    if proc.returncode:  # a git older than 2.28 has no --show-object-format: sha1 then
        proc = git.run(*asked, check=False)
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    if proc.returncode or len(lines) < 4 or lines[0] != "true":
        return None
    top = Path(lines[1])
    common = Path(lines[2])
    git_dir = common if common.is_absolute() else Path(root, common)
    prefix = lines[3]
    algo = "sha256" if len(lines) > 4 and lines[4] == "sha256" else "sha1"
    if prefix and git.ignored("fsmem.yaml"):
        return None  # the enclosing repository ignores this memory: leave it alone
    return Repo(root=Path(os.path.realpath(root)), top=top, git_dir=git_dir, prefix=prefix, algo=algo, host=host)


def parse_git_date(value: str) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
