"""A hostile second clone of a memory's remote, shared by tests/test_sync_trust.py and benchmarks/hostile_sync.py.

The hostile host is plain git: `push` commits whatever it has on disk and
pushes it; `push_entries` adds raw tree entries with git plumbing, for what
git's porcelain would refuse to make (`.GIT`, `..`, a name with a newline, a
submodule). `objects_hold` looks for a planted secret in every object of a
repository, whatever commit, tree or blob it hides in. `build_world` makes
the attacks' start once per module (the victim set up by fsmem, the hostile
clone, a folder outside the memory) and `copy_world` gives each test its own
copy, its remotes pointed at its own origin.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import sync_scenario as S

FORGED = (
    '{"time":"2026-11-30T10:00:00+00:00","agent":"forged","tool":"read","arguments":{"path":"x.md"},'
    '"paths":["x.md"],"rows":1,"tokens":9,"latency_ms":1.0,"truncated":false,"empty":false}\n'
)
LAUGHS = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]\n" for n in range(1, 10)
)


SECRET = "PRIVATE-KEY-MATERIAL"


@dataclass
class World:
    origin: Path
    victim: Path
    hostile: Path
    outside: Path
    base: Path


def build_world(base: Path) -> World:
    """A bare remote, the victim (made with `fsmem init --git`, synced), a hostile clone, a secret outside."""
    origin, (victim,) = S.make_hosts(base, hosts=1, writers=1)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    return World(origin, victim, clone(origin, base / "hostile"), outside, base)


def copy_world(template: World, base: Path) -> World:
    """A copy of `template` under `base` (the same names), each clone's remote pointed at the copy's origin."""
    for path in (template.origin, template.victim, template.hostile, template.outside):
        shutil.copytree(path, base / path.name, symlinks=True)
    world = World(
        *(base / path.name for path in (template.origin, template.victim, template.hostile)), base / "outside", base
    )
    for clone_root in (world.victim, world.hostile):
        git(clone_root, "remote", "set-url", "origin", str(world.origin))
    return world


def git(root: Path, *args: str, input: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=S.env(), input=input
    ).stdout


def clone(origin: Path, where: Path, user: str = "mallory") -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(where))
    git(where, "config", "user.name", user)
    git(where, "config", "user.email", f"{user}@example.com")
    return where


def push(hostile: Path, message: str = "an innocent change") -> str:
    """What the hostile clone has on disk, committed and pushed with plain git; the commit's id."""
    git(hostile, "add", "-A", "-f")
    git(hostile, "commit", "-q", "-m", message)
    git(hostile, "push", "-q", "origin", "HEAD:main")
    return git(hostile, "rev-parse", "HEAD").strip()


def push_entries(hostile: Path, entries: dict[str, tuple[str, bytes]], folder: str = "") -> str:
    """A commit whose tree (or `folder` in it) gains raw entries (name -> (mode, bytes)), which git's porcelain
    would refuse to make ('.GIT', '..', names with a newline, submodules); pushed with plain git."""
    git(hostile, "fetch", "-q", "origin")
    git(hostile, "reset", "-q", "--hard", "origin/main")
    spec = f"HEAD:{folder}" if folder else "HEAD^{tree}"
    lines = [line for line in git(hostile, "ls-tree", "-z", spec).split("\0") if line]
    lines = [line for line in lines if line.split("\t", 1)[1] not in entries]  # an entry given replaces one there
    for name, (mode, data) in entries.items():
        if mode == "160000":  # a submodule: the commit it names lives in another repository
            lines.append(f"{mode} commit {'1' * 40}\t{name}")
            continue
        blob = (
            subprocess.run(
                ["git", "hash-object", "-w", "--stdin"], cwd=hostile, input=data, capture_output=True, check=True
            )
            .stdout.decode()
            .strip()
        )
        lines.append(f"{mode} blob {blob}\t{name}")
    tree = git(hostile, "mktree", "-z", "--missing", input="\0".join(lines) + "\0").strip()
    if folder:
        top = [line for line in git(hostile, "ls-tree", "-z", "HEAD^{tree}").split("\0") if line]
        top = [line for line in top if line.split("\t", 1)[1] != folder] + [f"040000 tree {tree}\t{folder}"]
        tree = git(hostile, "mktree", "-z", input="\0".join(top) + "\0").strip()
    commit = git(hostile, "commit-tree", tree, "-p", "HEAD", "-m", "an innocent change").strip()
    git(hostile, "push", "-q", "origin", f"{commit}:refs/heads/main")
    return commit


def objects_hold(repo: Path, text: str) -> bool:
    """True when any object in the repository (any commit, any tree, any blob) holds `text`."""
    out = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True, env=S.env()
    )
    return text.encode() in out.stdout


def tree_names(repo: Path, rev: str = "main") -> list[str]:
    """Every path in a commit's tree, names that are not UTF-8 with surrogate escapes."""
    out = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--name-only", rev], cwd=repo, capture_output=True, check=True, env=S.env()
    ).stdout
    return [name.decode("utf-8", "surrogateescape") for name in out.split(b"\0") if name]
