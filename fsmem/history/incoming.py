"""What a fetch brought, read with git plumbing before anything is merged: changed paths, trees, links, names.

`diff` lists each path the fetched commits change (`git diff-tree -r`: files,
links and submodules, with mode and object); `Tree` reads one commit's
entries through the repository's cat-file; `follow` says where a link leads
within the same tree, as the kernel would walk it; `links` lists every link of
a tree; the name rules are `fsmem.store.paths`' own, with what git refuses to
check out besides (`git_refuses`: its protectNTFS and protectHFS rules, on
every platform). `fsmem.history.trust` judges with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.errors import HistoryError
from fsmem.format.history_file import is_history_path
from fsmem.history.host_rules import CONTROL
from fsmem.history.merge import GENERATED
from fsmem.history.repo import Repo
from fsmem.history.trees import TREE_MODE, Entry
from fsmem.store.paths import (
    MAX_DEPTH,
    MAX_PATH_BYTES,
    is_memory_path,
    is_visible_folder,
    shown,
    stored_name_problem,
    text_problem,
)

LINK, SUBMODULE, GONE = "120000", "160000", "000000"
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
        size = self.repo.sizes.size(oid)  # one long-lived process, not a `git cat-file -s` per blob
        if size is None:
            raise HistoryError(f"blob {oid} is missing from the repository")
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


def follow(tree: Tree, path: str, target: str) -> tuple[str | None, str | None]:
    """Where a link at `path` leads in the same tree, as the kernel would walk it (links followed, `..` taken
    only from a folder that is there): (repository path, None), or (None, why) when it leads out of the
    repository, is absolute, loops, or climbs out of a folder the tree does not hold (where the walk would
    depend on what a later change puts there)."""
    if target.startswith("/"):
        return None, "absolute"
    parts = path.split("/")[:-1]
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None, "out"
            here = tree.entry("/".join(parts), folders=True)
            if here is None or here[0] != TREE_MODE:
                return None, "/".join(parts)
            parts.pop()
            continue
        parts.append(part)
        entry = tree.entry("/".join(parts))
        if entry is not None and entry[0] == LINK:
            hops += 1
            inner = tree.link(entry[1])
            if hops > MAX_HOPS:
                return None, "loop"
            if inner is None or inner.startswith("/"):
                return None, "out"
            parts.pop()
            pending = inner.split("/") + pending
    return "/".join(parts), None


def links(repo: Repo, tree: str | None, refused: list[str] | None = None) -> list[tuple[str, str]]:
    """(path, object id) of every symbolic link in a tree, from one `git ls-tree -r`; with `refused`, the paths
    that hold a name git refuses to check out are added to it from the same listing."""
    if tree is None:
        return []
    out = repo.git.run("ls-tree", "-r", "-z", tree).stdout
    found = []
    for item in out.split(b"\0"):
        if refused is not None and item:
            header, _, raw = item.partition(b"\t")
            path = raw.decode("utf-8", "surrogateescape")
            parts = path.split("/")
            mode = header.split()[0].decode()
            if any(git_refuses(part, mode if n == len(parts) - 1 else TREE_MODE) for n, part in enumerate(parts)):
                refused.append(path)
        if item.startswith(LINK.encode()):
            header, _, path_bytes = item.partition(b"\t")
            found.append((path_bytes.decode("utf-8", "surrogateescape"), header.split()[2].decode()))
    return found


def link_problem(repo: Repo, tree: Tree, path: str, oid: str) -> str | None:
    """Why the link at `path` (a memory path) breaks the memory's invariant in `tree`, or None: it must lead,
    inside the memory, to a memory file or a folder of memory files (or, for now, to nothing), never to fsmem's,
    git's or a generated file, and never through a folder the tree does not hold."""
    target = tree.link(oid)
    if target is None:
        return "a symbolic link whose target is not a plain path"
    where, why = follow(tree, path, target)
    if why == "loop":
        return f"a symbolic link that loops (to {shown(target[:200])}, which leads back to itself)"
    if where is None and why not in (None, "out", "absolute"):
        climbed = shown(repo.in_memory(why or "") or why or "")
        return f"a symbolic link that climbs out of {climbed}, which is not a folder of the memory"
    inside = None if where is None else repo.in_memory(where + "/")
    if inside is None:
        return f"a symbolic link that leads outside the memory (to {shown(target[:200])})"
    inside = inside.rstrip("/")
    if not inside:
        return "a symbolic link to the memory's own folder"
    if is_control_target(inside):
        return f"a symbolic link that leads to {shown(inside)}, which is fsmem's or git's own"
    if is_generated(inside):
        return f"a symbolic link that leads to {shown(inside)}, which fsmem generates"
    found = tree.entry(where or "", folders=True) if where else None
    if found is None:
        return None  # leads to nothing (yet): judged again whenever something comes there
    if found[0] == TREE_MODE and not is_visible_folder(inside):
        return f"a symbolic link that leads to {shown(inside)}, a folder that holds no memory"
    if found[0] != TREE_MODE and not is_memory_path(inside):
        return f"a symbolic link that leads to {shown(inside)}, which is not a memory file"
    return None


# Characters HFS+ ignores in a name (git's `next_hfs_char`): `.g\u200cit` is `.git` on a Mac.
HFS_IGNORED = frozenset(
    chr(code) for code in (*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF)
)


def git_refuses(part: str, mode: str = "100644") -> bool:
    """Whether git refuses to check out a tree entry of this name (git's `verify_path`, with its protectNTFS and
    protectHFS rules on, as they are on Windows and macOS): '.', '..', '.git' in any case, in NTFS's spellings
    (`git~1`, `.git.`, `.git::$INDEX_ALLOCATION`, after a backslash) and with the characters HFS+ ignores;
    and, as a link, `.gitmodules` in any of its spellings."""
    if part in ("", ".", ".."):
        return True
    if _ntfs_dotgit(part) or (mode == LINK and _ntfs_dotgitmodules(part)):
        return True
    if "\\" in part and any(
        _ntfs_dotgit(rest) or (mode == LINK and _ntfs_dotgitmodules(rest)) for rest in part.split("\\")[1:]
    ):
        return True
    if part.isascii():
        plain = part.lower()
    else:
        plain = "".join(char for char in part if char not in HFS_IGNORED)
        plain = plain.lower() if plain.isascii() else ""
    return plain == ".git" or (mode == LINK and plain == ".gitmodules")


def _ntfs_dotgit(name: str) -> bool:
    """git's `is_ntfs_dotgit`: `.git` or `git~1` (any case), then only dots and spaces up to the end or a ':'."""
    head = name[:5]
    if head[:4].isascii() and head[:4].lower() == ".git":
        rest = name[4:]
    elif head.isascii() and head.lower() == "git~1":
        rest = name[5:]
    else:
        return False
    for char in rest:
        if char in "\\:":
            return True
        if char not in ". ":
            return False
    return True


def _ntfs_dotgitmodules(name: str) -> bool:
    """git's `is_ntfs_dotgitmodules`: `.gitmodules`, `gitmod~1`..`~4`, or an 8.3 fall-back name `gi7eba~N`, then
    only dots and spaces up to the end or a ':'."""
    if not name.isascii():
        return False
    lower = name.lower()

    def then_dots_and_spaces(at: int) -> bool:
        return all(char in ". " for char in lower[at:].split(":", 1)[0])

    if lower.startswith(".gitmodules"):
        return then_dots_and_spaces(11)
    if lower[:6] == "gitmod" and lower[6:7] == "~" and lower[7:8] in ("1", "2", "3", "4"):
        return then_dots_and_spaces(8)
    at, tilde = 0, False
    while at < 8:
        if at >= len(lower):
            return False
        char = lower[at]
        if tilde:
            if not "0" <= char <= "9":
                return False
        elif char == "~":
            at += 1
            if at >= len(lower) or not "1" <= lower[at] <= "9":
                return False
            tilde = True
        elif at >= 6 or char != "gi7eba"[at]:
            return False
        at += 1
    return then_dots_and_spaces(at)


def name_problem(rel: str, mode: str = "100644") -> str | None:
    """Why a memory-relative path from a remote cannot be stored here: what `fsmem.store.paths` refuses in a name
    (hidden names aside: a remote may send `.obsidian/`), and what git itself refuses to check out. Names a
    Windows or macOS copy cannot hold are judged by `fsmem.history.trust` (only those new to this host)."""
    parts = rel.split("/")
    if len(parts) > MAX_DEPTH or len(rel.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"a path deeper than {MAX_DEPTH} folders or longer than {MAX_PATH_BYTES} bytes, which fsmem refuses"
    for number, part in enumerate(parts):
        if part in ("", ".", ".."):
            return "a name no file can have ('.', '..' or empty)"
        if git_refuses(part, mode if number == len(parts) - 1 else TREE_MODE):
            return "a name git refuses to check out (.git in one of its spellings on Windows or macOS)"
        problem = stored_name_problem(part)
        if problem:
            return f"a name fsmem refuses (it {problem})"
    return None


def is_generated(rel: str) -> bool:
    """A file fsmem writes itself (INDEX.md at the root, a document's history file): never a link."""
    return rel in GENERATED or is_history_path(rel.casefold())


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
