"""The hostile host of the sync fuzzer (tests/sync_fuzz.py): a bare clone that pushes any tree, and its actions.

It speaks git plumbing alone (ls-tree, hash-object, mktree, commit-tree, push), so it can push
what git's porcelain would refuse to make or check out: `GIT~1`, `..`, a backslash, a name with a
newline, a submodule. Each action edits the remote's tree as one push; `Move.choose` is how the
state machine's draws reach an action's own choices.
"""

from __future__ import annotations

import posixpath
import subprocess
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sync_scenario as S

NOW = "2026-11-30T10:00:00+00:00"
LINK, FILE, TREE, COMMIT = "120000", "100644", "040000", "160000"
MEMORY_SUFFIXES = (".md", ".markdown")
OUTSIDE_ABS: dict[str, str] = {}  # the outside folder's absolute path, once the world is made


def env() -> dict[str, str]:
    return {**S.env(), "FSMEM_NOW": NOW}


def run(cwd: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(args, cwd=cwd, input=data, capture_output=True, env=env())
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
    return done.stdout


def is_memory_name(rel: str) -> bool:
    return rel.lower().endswith(MEMORY_SUFFIXES) and not any(p.startswith(".") for p in rel.split("/"))


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
    """A document made a link to another one."""
    path = str(m.choose(m.memory_files()))
    others = [p for p in ("topics/shared.md", "profile/identity.md", "README.md") if p != path]
    m.link(path, posixpath.relpath(str(m.choose(others)), posixpath.dirname(path) or "."))


def file_to_link_out(m: Move) -> None:
    """A document made a link out of the memory, or to itself: refused, and --repair keeps this host's document."""
    path = str(m.choose(m.memory_files()))
    target = m.choose(["../outside/victim.md", "../outside/secret.txt", path])
    m.link(path, m.up(path) + str(target))


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


def notes_folder_to_link(m: Move) -> None:
    """A folder every honest note or consolidation writes through, made a link: to a folder of documents, to
    git's or fsmem's own folder, out of the memory."""
    folder = str(m.choose(["sessions", "sessions/2026", "archive", "archive/sessions", "entities", "entities/people"]))
    m.drop(folder)
    up = m.up(folder)
    m.link(folder, str(m.choose([up + "topics", up + "profile", up + ".git", up + ".fsmem", up + "../outside"])))


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


def config_edit_with_a_refused_file(m: Move) -> None:
    """A held fsmem.yaml change and a refused link in one push: both remedies needed at once (FUZZ-FINDINGS F3)."""
    text = m.read("fsmem.yaml") if m.tree.get("fsmem.yaml", ("", ""))[0] == FILE else ""
    m.text(
        "fsmem.yaml",
        text.replace("policy: refuse", "policy: redact", 1) if "policy: refuse" in text else text + "# x\n",
    )
    m.link(f"topics/out-{_n(m)}.md", "../../outside/secret.txt")


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
        file_to_link_out,
        link_to_file_or_folder,
        folder_to_link,
        notes_folder_to_link,
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
        config_edit_with_a_refused_file,
        edit_honest_files,
        submodule,
        files_the_memory_does_not_own,
    )
}
