"""The sync fuzzer: two honest hosts and a hostile one share a remote; the honest hosts' state is checked whole.

Used by tests/test_sync_fuzz.py (bounded: every hostile action once, 50+ syncs) and
benchmarks/bench_sync_fuzz.py (longer, with a report per action). Long because it is one
world and its one oracle, which read best together: the hostile host (`Hostile`, plain
git plumbing, so it can push any tree, names git's porcelain refuses included), its
actions (`ACTIONS`), the honest hosts (`Memory` in-process, the CLI for one sync in five),
and the invariants (`Oracle`), written here from the documented rules rather than by
calling fsmem's own checker:

- every link in the tree resolves, one component at a time and never through a link that
  leaves, inside the memory to a memory file or folder; never to a control or generated
  file (fsmem.yaml, INDEX.md, a history file, .git, .fsmem); a dangling link or a loop at
  least reported by `check`;
- every regular file is a control file, listed by `ls`, or reported by `check` with a
  remedy; a file that is not a memory file is one the hostile host pushed by that name;
- no name git refuses to check out, and no unportable name or twin, on disk or in HEAD;
- the folder beside the memories is byte for byte as planted, and its secret appears in no
  honest host's file, object or answer;
- every note an honest host wrote is in that host's history (its commit an ancestor of HEAD);
- `sync` succeeds, or fails with one line (exit 2) that names its remedy; `check` then reports
  a problem, and the remedy (`--repair`, `--accept-config`) gets the host syncing again.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import posixpath
import resource
import shutil
import subprocess
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sync_scenario as S

NOW = "2026-11-30T10:00:00+00:00"
SECRET = "SECRET-FUZZ-OUTSIDE-7f3a"
LINK, FILE, TREE, COMMIT = "120000", "100644", "040000", "160000"
CONTROL = {"fsmem.yaml", ".gitattributes", ".gitignore", "INDEX.md"}
MEMORY_SUFFIXES = (".md", ".markdown")
DEVICES = {"con", "prn", "aux", "nul", "conin$", "conout$"} | {
    f"{kind}{n}" for kind in ("com", "lpt") for n in [*"123456789", "\u00b9", "\u00b2", "\u00b3"]
}
HFS_IGNORED = {0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF}


def env() -> dict[str, str]:
    return {**S.env(), "FSMEM_NOW": NOW}


def run(cwd: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(args, cwd=cwd, input=data, capture_output=True, env=env())
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
    return done.stdout


# -- the hostile host: plain git, any tree -----------------------------------------------------------------
class Hostile:
    """A bare clone of the remote that pushes whatever tree it makes (mktree, commit-tree, push)."""

    def __init__(self, origin: Path, where: Path):
        self.repo = where
        run(where.parent, "git", "clone", "-q", "--bare", str(origin), str(where))
        self.pushed_names: set[str] = set()  # every path it ever pushed, as its tree names it
        self.pushes = 0

    def git(self, *args: str, data: bytes | None = None) -> bytes:
        return run(self.repo, "git", *args, data=data)

    def fetch(self) -> dict[str, tuple[str, str]]:
        """The remote's tree now: path -> (mode, object id)."""
        self.git("fetch", "-q", "origin", "+refs/heads/main:refs/hostile/base")
        out = self.git("ls-tree", "-r", "-z", "--full-tree", "refs/hostile/base")
        tree = {}
        for line in out.split(b"\0"):
            if line:
                head, name = line.split(b"\t", 1)
                mode, _, oid = head.decode().split(" ")
                tree[name.decode("utf-8", "surrogateescape")] = (mode, oid)
        return tree

    def blob(self, data: bytes) -> str:
        return self.git("hash-object", "-w", "--stdin", data=data).decode().strip()

    def push(self, tree: dict[str, tuple[str, str]], message: str) -> str:
        root = self._mktree(tree)
        env_author = ["-c", "user.name=mallory", "-c", "user.email=mallory@example.com"]
        commit = (
            self.git(*env_author, "commit-tree", root, "-p", "refs/hostile/base", "-m", message, data=b"")
            .decode()
            .strip()
        )
        self.git("push", "-q", "origin", f"{commit}:refs/heads/main")
        self.pushed_names.update(tree)
        self.pushes += 1
        return commit

    def _mktree(self, tree: dict[str, tuple[str, str]]) -> str:
        nested: dict = {}
        for path, entry in tree.items():
            *folders, name = path.split("/")
            node = nested
            for folder in folders:
                child = node.setdefault(folder, {})
                if not isinstance(child, dict):  # a file and a folder of one name: the folder wins
                    child = node[folder] = {}
                node = child
            if not isinstance(node.get(name), dict):
                node[name] = entry
        return self._write(nested)

    def _write(self, node: dict) -> str:
        lines = []
        for name, entry in node.items():
            if isinstance(entry, dict):
                lines.append(f"{TREE} tree {self._write(entry)}\t{name}")
            else:
                mode, oid = entry
                lines.append(f"{mode} {'commit' if mode == COMMIT else 'blob'} {oid}\t{name}")
        data = "".join(line + "\0" for line in lines).encode("utf-8", "surrogateescape")
        return self.git("mktree", "-z", "--missing", data=data).decode().strip()


# -- what the hostile host does --------------------------------------------------------------------------
@dataclass
class Move:
    """One hostile push in the making: the tree it edits, the host's state, and a choice function."""

    hostile: Hostile
    tree: dict[str, tuple[str, str]]
    choose: Callable[[list], object]
    number: int
    later: list[Callable[[Move], None]]

    def text(self, path: str, text: str | bytes) -> None:
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        self.drop(path)
        self.tree[path] = (FILE, self.hostile.blob(data))

    def link(self, path: str, target: str) -> None:
        self.drop(path)
        self.tree[path] = (LINK, self.hostile.blob(target.encode("utf-8", "surrogateescape")))

    def drop(self, path: str) -> None:
        """Nothing at `path`: no file, link or folder of that name."""
        for name in [p for p in self.tree if p == path or p.startswith(path + "/")]:
            del self.tree[name]

    def read(self, path: str) -> str:
        return self.hostile.git("cat-file", "blob", self.tree[path][1]).decode("utf-8", "replace")

    def memory_files(self) -> list[str]:
        """The documents and notes (generated files are the forged_* actions' alone)."""
        found = sorted(
            p
            for p, (mode, _) in self.tree.items()
            if mode == FILE and is_memory_name(p) and p != "INDEX.md" and not p.endswith(".history.md")
        )
        return found or ["topics/shared.md"]

    def links(self) -> list[str]:
        return sorted(p for p, (mode, _) in self.tree.items() if mode == LINK)

    def folders(self) -> list[str]:
        found = {p.rsplit("/", 1)[0] for p in self.tree if "/" in p}
        return sorted(f for f in found if not f.startswith("."))

    def up(self, path: str) -> str:
        """The relative way from `path`'s folder to the memory root ('' at the root)."""
        return "../" * path.count("/")


def _n(move: Move) -> str:
    return str(move.number)


def link_in(m: Move) -> None:
    target = str(m.choose(m.memory_files()))
    at = f"topics/alias-{_n(m)}.md"
    m.link(at, posixpath.relpath(target, "topics"))


def link_in_folder(m: Move) -> None:
    m.link(f"topics/folder-{_n(m)}", str(m.choose(["../entities", "../sessions", "../profile", "."])))


def link_out(m: Move) -> None:
    at = str(m.choose([f"topics/out-{_n(m)}.md", f"out-{_n(m)}.md", f"entities/out-{_n(m)}"]))
    target = m.choose(["{up}../outside/secret.txt", "{abs}/secret.txt", "{up}../outside", "/etc/passwd"])
    m.link(at, str(target).format(up=m.up(at), abs=OUTSIDE_ABS.get("path", "/nonexistent")))


def link_out_in_two_pushes(m: Move) -> None:
    """Issue 31 finding 1: a link through a folder that does not exist yet (inside, so far), then the folder."""
    n = _n(m)
    m.link(f"topics/escape-{n}.md", f"d{n}/b/../../../outside/secret.txt")
    m.later.append(lambda second: second.link(f"topics/d{n}/b", "."))


def link_through_link(m: Move) -> None:
    """Each link lexically inside; followed, the second leaves through the first."""
    n = _n(m)
    m.link(f"deep-{n}/er/up", "../../topics")
    m.link(f"topics/via-{n}.md", f"../deep-{n}/er/up/../../outside/secret.txt")


def link_to_control(m: Move) -> None:
    target = str(m.choose(["fsmem.yaml", ".git/config", ".fsmem", ".gitattributes", ".git", ".fsmem/cache.sqlite"]))
    m.link(f"topics/control-{_n(m)}.md", "../" + target)


def link_to_generated(m: Move) -> None:
    """A link to INDEX.md or to a history file: generated files, which are never what a link may name."""
    if m.choose(["index", "history"]) == "index":
        m.link(f"topics/index-{_n(m)}.md", "../INDEX.md")
    else:
        m.text("topics/shared.history.md", "---\ntype: semantic\n---\n## Superseded\n")
        m.link(f"topics/hist-{_n(m)}.md", "shared.history.md")


def link_loop_or_dangling(m: Move) -> None:
    n = _n(m)
    if m.choose(["loop", "dangling"]) == "loop":
        m.link(f"topics/loop-{n}.md", f"loop-{n}.md")
    else:
        m.link(f"topics/dangling-{n}.md", f"missing-{n}.md")


def retarget_link(m: Move) -> None:
    links = m.links()
    if not links:
        link_in(m)
        links = m.links()
    at = str(m.choose(links))
    up = m.up(at)
    target = m.choose([".", "..", f"{up}../outside/victim.md", f"{up}README.md", f"{up}fsmem.yaml", f"{up}topics"])
    m.link(at, str(target))


def file_to_folder(m: Move) -> None:
    path = str(m.choose(m.memory_files()))
    m.drop(path)
    m.text(f"{path}/inner.md", "# Inner\n\nA folder where a document was.\n")


def folder_to_file(m: Move) -> None:
    folder = str(m.choose(m.folders() or ["topics"]))
    m.drop(folder)
    m.text(folder, "a file where a folder was\n")


def file_to_link(m: Move) -> None:
    path = str(m.choose(m.memory_files()))
    target = m.choose(["{up}../outside/victim.md", "{up}topics/shared.md", "{up}profile/identity.md"])
    m.link(path, str(target).format(up=m.up(path)))


def link_to_file_or_folder(m: Move) -> None:
    links = m.links()
    if not links:
        file_to_link(m)
        return
    at = str(m.choose(links))
    if m.choose(["file", "folder"]) == "file":
        m.text(at, "# Was a link\n")
    else:
        m.drop(at)
        m.text(f"{at}/inside.md", "# A folder where a link was\n")


def folder_to_link(m: Move) -> None:
    folder = str(m.choose(m.folders() or ["topics"]))
    m.drop(folder)
    m.link(folder, str(m.choose([m.up(folder) + "../outside", ".", m.up(folder) + "entities"])))


def unicode_twins(m: Move) -> None:
    n = _n(m)
    m.text(unicodedata.normalize("NFC", f"topics/café-{n}.md"), "# Café (NFC)\n")
    m.text(unicodedata.normalize("NFD", f"topics/café-{n}.md"), "# Café (NFD)\n")


def case_twins(m: Move) -> None:
    path = str(m.choose(m.memory_files()))
    folder, _, name = path.rpartition("/")
    twin = name[:1].swapcase() + name[1:] if name[:1].isalpha() else name.upper()
    m.text(f"{folder}/{twin}" if folder else twin, "# A twin by letter case\n")


def device_names(m: Move) -> None:
    name = m.choose(["CON.md", "aux.md", "com1.md", "LPT\u00b9.md", "COM\u00b2.md", "CONIN$.md", "conout$.md", "nul"])
    m.text(f"topics/{name}", "# A device\n")


def trailing_dot_or_space(m: Move) -> None:
    m.text(str(m.choose(["topics/trail.md.", "topics/trail.md ", "topics/dir./x.md", "topics/dir /x.md"])), "# x\n")


def git_refused_names(m: Move) -> None:
    """Names git refuses on checkout (protectNTFS, protectHFS) or at all; issue 31 finding 3."""
    path = m.choose(
        [
            "topics/GIT~1/config",
            "topics/git~1",
            "topics/.git::$INDEX_ALLOCATION/x.md",
            "topics/.g\u200cit/config",
            "topics/.git ./x.md",
            ".GIT",
            "topics/..",
        ]
    )
    m.text(str(path), "[core]\n\tfsmonitor = touch /tmp/owned\n")


def backslash_and_reserved_characters(m: Move) -> None:
    m.text(
        str(m.choose(["topics/x\\y.md", "topics/a:b.md", "topics/q?.md", 'topics/"quoted".md', "topics/p|q.md"])), "#\n"
    )


def control_characters_in_names(m: Move) -> None:
    m.text(str(m.choose(["topics/line\nbreak.md", "topics/bell\x07.md", "topics/esc\x1b[31m.md"])), "# x\n")


def forged_index(m: Move) -> None:
    if m.choose(["file", "link"]) == "file":
        m.text("INDEX.md", f"# Index\n\nForged by the remote {_n(m)}.\n")
    else:
        m.link("INDEX.md", str(m.choose(m.memory_files() + ["../outside/victim.md"])))


def forged_history_file(m: Move) -> None:
    document = str(m.choose(m.memory_files()))
    history = document[: -len(".md")] + ".history.md"
    kind = m.choose(["text", "link out", "link in"])
    if kind == "text":
        m.text(history, "---\ntype: semantic\n---\n## Superseded\n- owner: mallory (as of 2026-01-01)\n")
    elif kind == "link out":
        m.link(history, m.up(history) + "../outside/victim.md")
    else:
        m.link(history, posixpath.relpath("topics/shared.md", posixpath.dirname(history) or "."))


def forged_state(m: Move) -> None:
    kind = m.choose(["retrieval log", "cache", "trust record", "link", "link in a folder"])
    if kind == "retrieval log":
        m.text(".fsmem/logs/retrieval.jsonl", '{"agent": "forged"}\n')
    elif kind == "cache":
        m.text(".fsmem/cache.sqlite", b"SQLite format 3\0forged")
    elif kind == "trust record":
        m.text(".fsmem/history/trust.json", "{}")
    elif kind == "link":
        m.link(".fsmem", "../outside")
    else:
        m.link("topics/.fsmem", "../../outside")


def forged_control_files(m: Move) -> None:
    name = str(m.choose([".gitattributes", ".gitignore"]))
    if m.choose(["text", "link"]) == "text":
        m.text(name, "*.md merge=union\n" if name == ".gitattributes" else "*.md\n")
    else:
        m.link(name, "../outside/secret.txt")


def config_edit(m: Move) -> None:
    """fsmem.yaml: a comment, a plain setting, a security setting, a misspelt one, an alias bomb, a link."""
    text = m.read("fsmem.yaml") if "fsmem.yaml" in m.tree and m.tree["fsmem.yaml"][0] == FILE else ""
    kind = m.choose(["comment", "setting", "security", "misspelt", "bomb", "link", "host id"])
    if kind == "comment":
        m.text("fsmem.yaml", f"# edited on the remote {_n(m)}\n" + text)
    elif kind == "setting" and "timeout_seconds: 10 " in text:
        m.text("fsmem.yaml", text.replace("timeout_seconds: 10 ", "timeout_seconds: 11 ", 1))
    elif kind == "security" and "policy: refuse" in text:
        m.text("fsmem.yaml", text.replace("policy: refuse", "policy: redact", 1))
    elif kind == "misspelt" and "timeout_seconds:" in text:
        m.text("fsmem.yaml", text.replace("timeout_seconds:", "timeout_secnds:", 1))
    elif kind == "bomb":
        m.text("fsmem.yaml", text + 'l0: &l0 ["lol","lol"]\nl1: [*l0,*l0]\n')
    elif kind == "link":
        m.link("fsmem.yaml", "topics/shared.md")
    elif kind == "host id" and "host_id:" in text:
        m.text("fsmem.yaml", text.replace("host_id: null", "host_id: mallory", 1))
    else:
        m.text("fsmem.yaml", text + f"# another edit {_n(m)}\n")


def edit_honest_files(m: Move) -> None:
    """Ordinary hostile content: a shared fact changed, an honest note deleted or rewritten."""
    kind = m.choose(["fact", "delete", "rewrite"])
    files = m.memory_files()
    if kind == "fact" and "topics/shared.md" in m.tree and m.tree["topics/shared.md"][0] == FILE:
        m.text("topics/shared.md", m.read("topics/shared.md").replace("- status:", f"- status: mallory-{_n(m)}", 1))
        return
    path = str(m.choose(files))
    if kind == "delete":
        m.drop(path)
    else:
        m.text(path, f"# Rewritten by the remote {_n(m)}\n")


def submodule(m: Move) -> None:
    m.tree[f"topics/vendored-{_n(m)}"] = (COMMIT, "1" * 40)


def files_the_memory_does_not_own(m: Move) -> None:
    m.text(f"attachments/diagram-{_n(m)}.png", b"\x89PNG\r\n\x1a\n")
    m.text(".obsidian/app.json", '{"theme": "dark"}\n')


ACTIONS: dict[str, Callable[[Move], None]] = {
    f.__name__: f
    for f in (
        link_in,
        link_in_folder,
        link_out,
        link_out_in_two_pushes,
        link_through_link,
        link_to_control,
        link_to_generated,
        link_loop_or_dangling,
        retarget_link,
        file_to_folder,
        folder_to_file,
        file_to_link,
        link_to_file_or_folder,
        folder_to_link,
        unicode_twins,
        case_twins,
        device_names,
        trailing_dot_or_space,
        git_refused_names,
        backslash_and_reserved_characters,
        control_characters_in_names,
        forged_index,
        forged_history_file,
        forged_state,
        forged_control_files,
        config_edit,
        edit_honest_files,
        submodule,
        files_the_memory_does_not_own,
    )
}
OUTSIDE_ABS: dict[str, str] = {}  # the outside folder's absolute path, once the world is made


# -- the oracle: the invariants, from the documented rules -----------------------------------------------
def tree_hash(folder: Path) -> str:
    """Names, kinds, bytes and link targets of everything under `folder` (never its times)."""
    digest = hashlib.sha256()
    for where, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(where, name)
            info = os.lstat(path)
            digest.update(f"{os.path.relpath(path, folder)}\0{info.st_mode:o}\0".encode("utf-8", "surrogateescape"))
            if os.path.islink(path):
                digest.update(os.readlink(path).encode("utf-8", "surrogateescape"))
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
    return digest.hexdigest()


def name_problem(name: str) -> str | None:
    """Why git (protectNTFS, protectHFS) or a Windows or macOS copy would not hold this name, or None."""
    if name in ("", ".", ".."):
        return "a name no file can have"
    plain = "".join(c for c in name if ord(c) not in HFS_IGNORED).casefold()
    if plain.rstrip(". ") == ".git" or plain.rstrip(". ") == "git~1" or plain.startswith((".git:", "git~1:")):
        return "a name git refuses to check out"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "a control character"
    if any(c in name for c in '<>:"|?*\\'):
        return "a character Windows refuses"
    if name.endswith((".", " ")):
        return "ends in a dot or a space"
    if name.split(".", 1)[0].rstrip(" ").casefold() in DEVICES:
        return "a Windows device name"
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        return "longer than 255 bytes"
    return None


def names_problems(paths: list[str]) -> list[str]:
    """Each unportable name, and each pair of names one folder cannot hold apart (case, NFC/NFD)."""
    found = []
    folders: dict[str, dict[str, str]] = {}
    for path in paths:
        parent = ""
        for name in path.split("/"):
            problem = name_problem(name)
            if problem:
                found.append(f"{path!r}: {name!r} is {problem}")
            key = unicodedata.normalize("NFC", name).casefold()
            seen = folders.setdefault(parent, {}).setdefault(key, name)
            if seen != name:
                found.append(f"{path!r}: {name!r} and {seen!r} are one name on Windows or macOS")
            parent = f"{parent}/{name}"
    return sorted(set(found))


@dataclass
class Resolved:
    rel: str | None  # where the link leads, relative to the root; None when it leaves
    how: str  # "ok", "leaves", "loop", "dangling"


def resolve(root: Path, rel: str) -> Resolved:
    """Follow `rel` one component at a time, as the kernel does, without ever leaving `root`."""
    real_root = os.path.realpath(root)
    pending = rel.split("/")
    here: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not here:
                return Resolved(None, "leaves")
            here.pop()
            continue
        path = os.path.join(real_root, *here, part)
        if os.path.islink(path):
            hops += 1
            if hops > 40:
                return Resolved("/".join(here + [part]), "loop")
            target = os.readlink(path)
            if target.startswith("/"):
                inside = os.path.relpath(os.path.normpath(target), real_root)
                if inside == ".." or inside.startswith("../"):
                    return Resolved(None, "leaves")
                here = []
                pending = inside.split("/") + pending
            else:
                pending = target.split("/") + pending
            continue
        if not os.path.lexists(path):
            return Resolved("/".join(here + [part] + pending), "dangling")
        here.append(part)
    return Resolved("/".join(here), "ok")


def generated_or_control(rel: str) -> bool:
    parts = rel.split("/")
    return (
        rel in CONTROL
        or rel == ""
        or any(p.startswith(".") for p in parts)
        or rel.endswith(".history.md")
        or parts[0].casefold() in (".git", ".fsmem", "fsmem.yaml")
    )


def is_memory_name(rel: str) -> bool:
    return rel.lower().endswith(MEMORY_SUFFIXES) and not any(p.startswith(".") for p in rel.split("/"))


REMEDY_WORDS = ("fsmem ", "rename", "remove", "delete", "repair", "run ", "move", "replace", "keep")


@dataclass
class Tally:
    """What a run tried and what it found, shared by every example hypothesis runs."""

    tried: Counter = field(default_factory=Counter)
    outcomes: dict[str, Counter] = field(default_factory=dict)
    syncs: int = 0
    repairs: int = 0
    cli_syncs: int = 0
    honest: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    seconds: Counter = field(default_factory=Counter)  # where the time went: hostile, write, sync, verify


class Violation(AssertionError):
    pass


class World:
    """A bare remote, two honest hosts (made by fsmem init --git and sync --setup), the hostile host, the
    folder beside them with the planted secret."""

    def __init__(self, base: Path, tally: Tally, skip: frozenset[str] = frozenset()):
        self.base, self.tally, self.skip = base, tally, skip
        origin, roots = S.make_hosts(base, hosts=2, writers=1)
        self.origin, self.roots = origin, roots
        self.outside = base / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.outside / "victim.md").write_text(f"# Outside\n\n{SECRET}\n")
        (self.outside / "topics").mkdir()
        (self.outside / "topics" / "shared.md").write_text(f"# Not the memory's\n{SECRET}\n")
        OUTSIDE_ABS["path"] = str(self.outside)
        self.outside_hash = tree_hash(self.outside)
        self.hostile = Hostile(origin, base / "hostile.git")
        self.notes: list[list[tuple[str, str, str]]] = [[], []]  # per host: (path, text, commit)
        self.owned: list[list[str]] = [[], []]  # per host: the topics it wrote itself
        self.later: list[Callable[[Move], None]] = []
        self.pending: list[list[str]] = [[], []]  # hostile actions each host has not yet synced
        self.trail: list[str] = []
        self.tried: Counter = Counter()  # this world's own (hypothesis may replay an example in a new one)
        self.step = 0

    # -- hostile ---------------------------------------------------------------------------------------
    def hostile_push(self, action: str, choose: Callable[[list], object]) -> None:
        with self.timed("hostile"):
            self._hostile_push(action, choose)

    def _hostile_push(self, action: str, choose: Callable[[list], object]) -> None:
        self.step += 1
        tree = self.hostile.fetch()
        move = Move(self.hostile, tree, choose, self.step, [])
        for follow_up in self.later:
            follow_up(move)
        self.later = []
        ACTIONS[action](move)
        self.later = move.later
        self.hostile.push(tree, f"an innocent change {self.step}")
        self.tried[action] += 1
        self.tally.tried[action] += 1
        for pending in self.pending:
            pending.append(action)
        self.trail.append(f"hostile {action}")

    # -- honest ----------------------------------------------------------------------------------------
    def memory(self, host: int):
        from fsmem import Memory

        return Memory(self.roots[host], agent="w1")

    def honest_write(self, host: int, kind: str, choose: Callable[[list], object]) -> None:
        with self.timed("write"):
            self._honest_write(host, kind, choose)

    def _honest_write(self, host: int, kind: str, choose: Callable[[list], object]) -> None:
        from fsmem.errors import FsmemError

        self.step += 1
        root = self.roots[host]
        mark = f"h{host}-{self.step}"
        self.trail.append(f"host{host} {kind}")
        try:
            memory = self.memory(host)
            if kind == "note":
                text = f"- employer: e-{mark}"
                done = memory.note(text, subject=f"people/{choose(list(S.PEOPLE))}")
                self._noted(host, done.path, text)
            elif kind == "write":
                path = f"topics/{mark}.md"
                memory.write(path, f"# {mark}\n\n- latest: {mark}\n")
                self.owned[host].append(path)
                self._noted(host, path, f"- latest: {mark}")
            elif kind == "edit":
                page = memory.read(S.SHARED)
                owner = next((t for _, t in page.lines if t.startswith("- owner: ")), None)
                if owner is not None:
                    memory.edit(S.SHARED, old=owner, new=f"- owner: o-{mark}", expected_version=page.version)
            elif kind == "mv" and self.owned[host]:
                old = str(choose(self.owned[host]))
                new = f"topics/{mark}-moved.md"
                memory.mv(old, new)
                self.owned[host] = [new if p == old else p for p in self.owned[host]]
            elif kind == "rm" and self.owned[host]:
                old = str(choose(self.owned[host]))
                memory.rm(old)
                self.owned[host].remove(old)
            elif kind == "consolidate":
                memory.consolidate()
            self.tally.honest[kind] += 1
        except FsmemError as refused:
            self.tally.honest[f"{kind} refused"] += 1
            self.trail.append(f"  refused: {refused}")
        except Exception as crash:  # anything else is a crash on a face that promises FsmemError alone
            self.fail("write", host, f"{kind} raised {type(crash).__name__}: {crash}")
        if tree_hash(self.outside) != self.outside_hash:
            self.fail("outside", host, f"the folder beside the memory changed after {kind}")
        del root

    def _noted(self, host: int, path: str, text: str) -> None:
        repo = self.roots[host]
        head = run(repo, "git", "rev-parse", "HEAD").decode().strip()
        shown = subprocess.run(["git", "show", f"{head}:{path}"], cwd=repo, capture_output=True, env=env())
        if text.encode() not in shown.stdout:
            self.fail("notes", host, f"{path}: its write is not in the commit at HEAD ({head[:12]})")
        self.notes[host].append((path, text, head))

    # -- sync and its remedies -------------------------------------------------------------------------
    def sync(self, host: int, cli: bool) -> None:
        with self.timed("sync"):
            outputs = self._sync_and_remedy(host, cli)
        with self.timed("verify"):
            self.verify(host, outputs)

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[None]:
        started = time.perf_counter(), _cpu()
        try:
            yield
        finally:
            self.tally.seconds[what] += time.perf_counter() - started[0]
            self.tally.seconds[what + " cpu"] += _cpu() - started[1]

    def _sync_and_remedy(self, host: int, cli: bool) -> list[str]:
        self.step += 1
        self.tally.syncs += 1
        actions, self.pending[host] = self.pending[host], []
        code, message, out = self._sync(host, cli)
        self.trail.append(f"host{host} sync{' (cli)' if cli else ''}: {'ok' if code == 0 else message}")
        outcome = "merged" if code == 0 else ("held" if "accept" in message else "refused")
        for action in actions:
            self.tally.outcomes.setdefault(action, Counter())[outcome] += 1
        outputs = [out, message]
        remedy: dict[str, bool] = {}  # the remedies named so far, together (a refusal and a held fsmem.yaml)
        while code != 0:
            if code != 2 or message.count("\n") > 0 or "Traceback" in message or not message:
                self.fail("sync", host, f"sync failed without one line and exit 2 (exit {code}): {message!r}")
            check = self.memory(host).check()
            outputs.append(check.to_text())
            if check.empty:
                self.fail("stuck", host, f"sync failed ({message}) and check reports nothing")
            named = dict(remedy)
            if "--accept-config" in message or "accept_config=True" in message:
                named["accept_config"] = True
            if "--repair" in message or "repair=True" in message:
                named["repair"] = True
            if named == remedy:
                status = run(self.roots[host], "git", "status", "--porcelain", "--untracked-files=all").decode()
                self.fail(
                    "stuck",
                    host,
                    f"sync{self._flags(remedy)} failed naming no other remedy: {message} (git status: {status!r})",
                )
            remedy = named
            self.tally.repairs += 1
            code, message, out = self._sync(host, cli, **remedy)
            outputs += [out, message]
            self.trail.append(f"host{host} sync{self._flags(remedy)}: {'ok' if code == 0 else message}")
        return outputs

    @staticmethod
    def _flags(remedy: dict[str, bool]) -> str:
        return "".join(f" --{name.replace('_', '-')}" for name in remedy)

    def _sync(self, host: int, cli: bool, **remedy: bool) -> tuple[int, str, str]:
        from fsmem.errors import FsmemError

        if cli:
            self.tally.cli_syncs += 1
            flags = [f"--{name.replace('_', '-')}" for name in remedy]
            done = subprocess.run(
                [S.FSMEM, "--root", str(self.roots[host]), "sync", *flags],
                capture_output=True,
                text=True,
                env=env(),
                timeout=300,
            )
            return done.returncode, done.stderr.removeprefix("fsmem: error: ").rstrip("\n"), done.stdout
        try:
            return 0, "", self.memory(host).sync(**remedy).to_text()
        except FsmemError as error:
            return 2, str(error), ""
        except Exception as crash:
            return 1, f"{type(crash).__name__}: {crash}", ""

    # -- the invariants --------------------------------------------------------------------------------
    def fail(self, invariant: str, host: int, detail: str) -> None:
        text = f"[{invariant}] host{host}: {detail}"
        trail = "\n  ".join(self.trail[-12:])
        if not any(seen.startswith(text) for seen in self.tally.violations):
            self.tally.violations.append(f"{text}\n  the last steps:\n  {trail}")
        raise Violation(f"{text}\n  the last steps:\n  {trail}")

    def verify(self, host: int, outputs: list[str]) -> None:
        root = self.roots[host]
        if tree_hash(self.outside) != self.outside_hash:
            self.fail("outside", host, "the folder beside the memory changed")
        memory = self.memory(host)
        listed = self._listed(memory)
        check = memory.check()
        reported: dict[str, list[str]] = {}
        for path, _, message in check.problems:
            reported.setdefault(path, []).append(message)
        outputs = [*outputs, check.to_text()]
        on_disk: list[str] = []
        for where, dirs, files in os.walk(root):
            rel_dir = os.path.relpath(where, root)
            rel_dir = "" if rel_dir == "." else rel_dir
            if rel_dir == "":
                if os.path.islink(root / ".fsmem"):
                    self.fail("links", host, ".fsmem is a link")
                dirs[:] = [d for d in dirs if d not in (".git", ".fsmem")]
                files = [f for f in files if f not in (".git", ".fsmem")]
            for name in sorted(dirs + files):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                on_disk.append(rel)
                path = root / rel
                if path.is_symlink():
                    self._judge_link(host, root, rel, reported)
                elif path.is_file():
                    data = path.read_bytes()
                    if SECRET.encode() in data:
                        self.fail("secret", host, f"{rel} holds the secret planted outside")
                    self._judge_file(host, rel, listed, reported)
        problems = names_problems(on_disk + self._head_names(root))
        if problems:
            self.fail("names", host, "; ".join(problems[:4]))
        for text in outputs:
            if SECRET in text:
                self.fail("secret", host, "an answer holds the secret planted outside")
        objects = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=root, capture_output=True, env=env()
        ).stdout
        if SECRET.encode() in objects:
            self.fail("secret", host, "an object of the repository holds the secret planted outside")
        history = set(run(root, "git", "rev-list", "HEAD").decode().split())
        for path, text, commit in self.notes[host]:
            if commit not in history:
                self.fail("notes", host, f"{path}: the commit of {text!r} ({commit[:12]}) left this host's history")

    def _listed(self, memory) -> set[str]:
        listed: set[str] = set()
        offset = 0
        while True:
            page = memory.ls(include_superseded=True, offset=offset)
            listed.update(e.path for e in page.entries)
            listed.update(page.skipped)
            offset += len(page.entries)
            if not page.entries or offset >= page.total:
                return listed

    def _judge_link(self, host: int, root: Path, rel: str, reported: dict[str, list[str]]) -> None:
        top = rel.split("/")[0].casefold()
        if rel in CONTROL or rel.endswith(".history.md") or top in (".git", ".fsmem", "fsmem.yaml"):
            self.fail("links", host, f"{rel} -> {os.readlink(root / rel)}: a link where a control or generated file is")
        found = resolve(root, rel)
        if found.how == "leaves":
            self.fail("links", host, f"{rel} -> {os.readlink(root / rel)} leads out of the memory")
        if found.how in ("loop", "dangling"):
            if rel not in reported:
                self.fail(
                    "links", host, f"{rel} -> {os.readlink(root / rel)}: a {found.how} link check does not report"
                )
            return
        assert found.rel is not None
        target = root / found.rel
        if generated_or_control(found.rel):
            self.fail(
                "links", host, f"{rel} -> {os.readlink(root / rel)} leads to {found.rel}, a control or generated file"
            )
        if target.is_dir():
            return  # a link to a memory folder inside the root (documented)
        if not (target.is_file() and is_memory_name(found.rel)) and rel not in reported:
            self.fail("links", host, f"{rel} leads to {found.rel}, not a memory file, and check does not report it")

    def _judge_file(self, host: int, rel: str, listed: set[str], reported: dict[str, list[str]]) -> None:
        if rel in CONTROL or rel in listed:
            return
        if rel in reported:
            if not any(word in m for m in reported[rel] for word in REMEDY_WORDS):
                self.fail("files", host, f"{rel}: check reports it without a remedy: {reported[rel]}")
            return
        if is_memory_name(rel):
            if rel.endswith(".history.md") and rel[: -len(".history.md")] + ".md" in listed:
                return
            self.fail("files", host, f"{rel}: a memory file neither listed by ls nor reported by check")
        if rel not in self.hostile.pushed_names:
            self.fail("files", host, f"{rel}: a file no host made (not listed, not reported, never pushed)")

    def _head_names(self, root: Path) -> list[str]:
        out = subprocess.run(
            ["git", "ls-tree", "-r", "-z", "--name-only", "HEAD"], cwd=root, capture_output=True, env=env()
        ).stdout
        return [n.decode("utf-8", "surrogateescape") for n in out.split(b"\0") if n]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def make_world(base: Path, tally: Tally, skip: frozenset[str] = frozenset()) -> World:
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    return World(base, tally, skip)


# -- the state machine ---------------------------------------------------------------------------------------
WRITES = ("note", "write", "edit", "mv", "rm", "consolidate")
CLI_EVERY = 8  # one sync in so many runs as `fsmem sync` (exit code, one line on stderr); the others in-process


def machine(base: Path, tally: Tally, rounds: int, skip: frozenset[str], keep_going: bool) -> type:
    """The state machine class of one run: every example makes its own world under `base`. One rule, whose
    arguments hypothesis draws, rather than one rule per action: hypothesis' first example is its simplest,
    which would take the first rule every time; here every choice is rotated by the step, so even that
    example walks every action, and the actions not yet tried come first, as many a round as it takes to
    try them all in `rounds` rounds. `keep_going` records a violation and carries on (to see them all)."""
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule

    def guarded(call: Callable[..., None], *args: object, **kwargs: object) -> None:
        try:
            call(*args, **kwargs)
        except Violation:
            if not keep_going:
                raise

    class SyncFuzz(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            base.mkdir(parents=True, exist_ok=True)
            self.where = Path(tempfile.mkdtemp(dir=base))
            self.world = make_world(self.where / "w", tally, skip)
            self.turn = 0
            self.rounds = 0

        def pick(self, drawn: int, options: list) -> object:
            self.turn += 1
            return options[(drawn + self.turn) % len(options)]

        def chooser(self, picks: list[int]) -> Callable[[list], object]:
            queue = list(picks)
            return lambda options: self.pick(queue.pop(0) if queue else 0, options)

        @rule(
            pushes=st.lists(st.integers(0, 63), min_size=1, max_size=3),
            picks=st.lists(st.integers(0, 63), max_size=6),
            writes=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 63)), min_size=1, max_size=3),
            first=st.integers(0, 1),
            cli=st.integers(0, 7),
        )
        def round(self, pushes: list[int], picks: list[int], writes: list[tuple[int, int]], first: int, cli: int):
            """The hostile host pushes, each honest host writes, then both sync (one sync in five on the CLI)."""
            self.rounds += 1
            world = self.world
            allowed = [name for name in ACTIONS if name not in skip]
            untried = [name for name in allowed if not world.tried[name]]
            needed = math.ceil(len(untried) / max(1, rounds - self.rounds + 1))
            for number in range(max(len(pushes), needed)):
                untried = [name for name in allowed if not world.tried[name]]
                drawn = pushes[number] if number < len(pushes) else 0
                action = str(self.pick(drawn, untried or allowed))
                guarded(world.hostile_push, action, self.chooser(picks))
            for drawn_host, kind in writes:
                host, chosen = int(self.pick(drawn_host, [0, 1])), str(self.pick(kind, list(WRITES)))
                guarded(world.honest_write, host, chosen, self.chooser(picks))
            for host in (first, 1 - first):
                on_cli = (cli + self.turn + host) % CLI_EVERY == 0
                guarded(world.sync, host, cli=on_cli)

        def teardown(self) -> None:
            if not os.environ.get("FSMEM_FUZZ_KEEP"):  # keep the world to look at, by hand
                shutil.rmtree(self.where, ignore_errors=True)

    return SyncFuzz


def fuzz(
    base: Path,
    *,
    rounds: int,
    examples: int = 1,
    skip: frozenset[str] = frozenset(),
    shrink: bool = False,
    explore: bool = False,
    keep_going: bool = False,
) -> Tally:
    """Run the fuzzer (FSMEM_NOW set to NOW by the caller); the Tally says what it tried and found (a
    Violation raised says what broke first)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    tally = Tally()
    phases = [Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])]
    run_state_machine_as_test(
        machine(base, tally, rounds, skip, keep_going),
        settings=settings(
            max_examples=examples,
            stateful_step_count=rounds,
            deadline=None,
            phases=phases,
            derandomize=not explore,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    return tally
