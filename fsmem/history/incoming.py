"""What a fetch brought, read with git plumbing before anything is merged: changed paths, trees, links, names.

`diff` lists each path the fetched commits change (`git diff-tree -r`: files,
links and submodules, with mode and object); `Tree` reads one commit's
entries through the repository's cat-file; `follow` says where a link leads
within the same tree; the name rules are `fsmem.store.paths`' own, with what
git refuses besides. `fsmem.history.trust` judges with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.history.host_rules import CONTROL
from fsmem.history.repo import Repo
from fsmem.history.trees import TREE_MODE, Entry
from fsmem.store.paths import MAX_DEPTH, MAX_PATH_BYTES, stored_name_problem, text_problem

LINK, SUBMODULE, GONE = "120000", "160000", "000000"
BLOB_MODES = ("100644", "100755")
MAX_LINK_BYTES = 4096
MAX_HOPS = 40  # links followed in one target, as the kernel does


@dataclass(frozen=True)
class Change:
    """One path the incoming commits change: its new mode ('000000' when removed) and object."""

    path: str
    mode: str
    oid: str
    status: str


class Tree:
    """Entries of one commit's tree by path, read through the repository's cat-file (trees cached by id)."""

    def __init__(self, repo: Repo, tree: str | None):
        self.repo, self.tree = repo, tree

    def entry(self, path: str, folders: bool = False) -> Entry | None:
        if self.tree is None:
            return None
        current: Entry = (TREE_MODE, self.tree)
        for part in path.split("/"):
            if current[0] != TREE_MODE:
                return None
            found = self.repo.read_tree(current[1]).get(part)
            if found is None:
                return None
            current = found
        return current if folders or current[0] != TREE_MODE else None

    def blob(self, oid: str, limit: int) -> bytes | None:
        """A blob's bytes, or None when it is larger than `limit` (asked first: a remote's blob may be huge)."""
        size = int(self.repo.git.text("cat-file", "-s", oid).strip() or 0)
        if size > limit:
            return None
        found = self.repo.reader.get(oid)
        return found[2] if found is not None else b""

    def link(self, oid: str) -> str | None:
        """A link's target, when it is a plain path (text, no control character, at most MAX_LINK_BYTES)."""
        data = self.blob(oid, MAX_LINK_BYTES)
        if not data:
            return None
        target = data.decode("utf-8", "surrogateescape")
        if text_problem(target) or any(ord(char) < 32 or ord(char) == 127 for char in target):
            return None
        return target


def follow(tree: Tree, path: str, target: str) -> str | None:
    """The repository path a link at `path` leads to, following links in the same tree; None when it leads out
    of the repository, is absolute, or loops."""
    if target.startswith("/"):
        return None
    parts = path.split("/")[:-1]
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
        entry = tree.entry("/".join(parts))
        if entry is not None and entry[0] == LINK:
            hops += 1
            inner = tree.link(entry[1])
            if hops > MAX_HOPS or inner is None or inner.startswith("/"):
                return None
            parts.pop()
            pending = inner.split("/") + pending
    return "/".join(parts)


def git_refuses(part: str) -> bool:
    return part in ("", ".", "..") or part.casefold().rstrip(". ") == ".git"


def name_problem(rel: str) -> str | None:
    """Why a memory-relative path from a remote cannot be stored here: what `fsmem.store.paths` refuses in a name
    (hidden names aside: a remote may send `.obsidian/`), and what git itself refuses. A name that only Windows
    or macOS cannot hold (`con.md`, `a:b.md`, two names that differ by case) is taken: it is already in the
    memory on the host that sent it, and `fsmem check` reports it with its rename; a sync never stops for it."""
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH or len(rel.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"a path deeper than {MAX_DEPTH} folders or longer than {MAX_PATH_BYTES} bytes, which fsmem refuses"
    for part in parts:
        if part in ("", ".", ".."):
            return "a name no file can have ('.', '..' or empty)"
        if part.casefold().rstrip(". ") == ".git":
            return "a name fsmem refuses (.git, in any spelling, is git's own folder)"
        problem = stored_name_problem(part)
        if problem:
            return f"a name fsmem refuses (it {problem})"
    return None


def is_control_name(rel: str) -> bool:
    """A `.gitattributes` or `.gitignore` other than fsmem's own (another spelling, or in a folder of memory files)."""
    parts = rel.split("/")
    return parts[-1].casefold() in CONTROL and all(not part.startswith(".") for part in parts[:-1])


def is_control_target(inside: str) -> bool:
    parts = [part.casefold() for part in inside.split("/")]
    return parts[0] == CONFIG_FILE or any(
        part.rstrip(". ") == ".git" or part == STATE_DIR or part in CONTROL for part in parts
    )


def tree_id(commit_body: bytes) -> str:
    return commit_body.split(b"\n", 1)[0].split()[1].decode()


def diff(repo: Repo, old_tree: str | None, new_tree: str) -> list[Change]:
    """Every path that differs between two trees (git diff-tree -r: files, links and submodules; not folders)."""
    empty = repo.store.id_of("tree", b"")
    proc = repo.git.run("diff-tree", "-r", "-z", "--raw", "--no-renames", old_tree or empty, new_tree)
    changes = []
    for header, path in raw_entries(proc.stdout):
        if path is not None:
            fields = header.split()
            changes.append(Change(path, fields[1], fields[3], fields[4][:1]))
    return changes


def raw_entries(output: bytes) -> list[tuple[str, str | None]]:
    """`git diff-tree -z --raw` output as (':modes ids status', path) pairs, and (commit id, None) where
    `--stdin` names the commit that follows; read in order, so a path that looks like either is a path."""
    items = output.split(b"\0")
    out: list[tuple[str, str | None]] = []
    index = 0
    while index < len(items):
        item = items[index]
        if item.startswith(b":") and index + 1 < len(items):
            out.append((item[1:].decode(), items[index + 1].decode("utf-8", "surrogateescape")))
            index += 2
            continue
        if item:
            out.append((item.decode("ascii", "replace").strip(), None))
        index += 1
    return out
