"""Sync attacks: what a hostile second clone pushes with plain git, and whether the victim's `fsmem sync` holds.

    python benchmarks/hostile_sync.py [--time-limit 30]        (bench_hostile.py runs it too)
    python benchmarks/hostile_sync.py --cost 1000,10000        (what the boundary adds to a sync)

Each attack runs on a fresh copy of one world: a bare remote, the victim
(made with `fsmem init --git`, synced), a hostile clone that pushes with
plain git or git plumbing (tests/hostile_remote.py), and a folder outside the
memory holding a planted secret. The victim then runs `fsmem sync`. An attack
is held when that sync answered within the time limit, without a traceback,
as the trust boundary (fsmem/history/trust.py) promises: refused, or held
for a person, with exit 2 and one line naming the way on (`--repair`,
`--accept-config`); or merged with fsmem's own files kept as fsmem writes
them. And afterwards: the outside folder is as it was, the planted secret is
in no object of the remote, the victim's fsmem.yaml and `.fsmem/` are its
own, nothing refused is on its disk, its `git status` is clean, and the
attack's own check passes. A refused attack is then repaired with `fsmem
sync --repair`, which must succeed and leave the remote's tip without it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import OUT, REPO, table

sys.path.insert(0, str(REPO / "tests"))
import sync_scenario as S  # noqa: E402
from hostile import tree_state  # noqa: E402
from hostile_remote import FORGED, LAUGHS, World, git, objects_hold, push, push_entries, tree_names  # noqa: E402

SECRET = "SECRET-SYNC-OUTSIDE"


@dataclass
class Attack:
    """One push from the hostile clone: what it plants, what the victim's sync must answer, what else must hold."""

    finding: str  # the finding of issue 18 it repeats, or "" for a neighbour of one
    name: str
    plant: Callable[[World], None]
    answer: str  # "refused" | "held" | "merged" (fsmem's own files kept)
    path: str = ""  # what a refusal must name, and `--repair` must leave out of the remote's tip
    check: Callable[[World], str | None] | None = None  # anything else: a failure, or None


def _text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _link(world: World, at: str, target: str | Path) -> None:
    path = world.hostile / at
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    os.symlink(target, path)


def _config(world: World, old: str, new: str) -> None:
    config = world.hostile / "fsmem.yaml"
    text = config.read_text()
    assert old in text, old
    config.write_text(text.replace(old, new, 1))


def _pushed(plant: Callable[[World], object]) -> Callable[[World], None]:
    def run(world: World) -> None:
        plant(world)
        push(world.hostile)

    return run


def _entries(entries: dict[str, tuple[str, bytes]], folder: str = "") -> Callable[[World], None]:
    return lambda world: (push_entries(world.hostile, entries, folder), None)[1]


def _one_owner(world: World) -> str | None:
    """Both hosts set the same fact after the attack: one current value, merged by fsmem's driver."""
    from fsmem import Memory

    peer = world.victim.parent / "host1"

    Memory(world.victim).edit(S.SHARED, old="- owner: nobody", new="- owner: ann")
    Memory(peer).edit(S.SHARED, old="- owner: nobody", new="- owner: bo")
    for root in (world.victim, peer):
        if S.fsmem(root, "sync", check=False).returncode:
            return f"{root.name}: sync failed"
    facts = (peer / S.SHARED).read_text().split("## Facts\n")[1].split("\n## ")[0]
    owners = [line for line in facts.splitlines() if line.startswith("- owner:")]
    return None if len(owners) == 1 else f"{len(owners)} current owners"


def _stays_clean(world: World) -> str | None:
    """Edits and syncs after the attack: `git status` stays clean, the files byte for byte as committed."""
    from fsmem import Memory

    for number in range(2):
        Memory(world.victim).edit(
            S.SHARED, old=f"- owner: {'nobody' if number == 0 else number - 1}", new=f"- owner: {number}"
        )
        if S.fsmem(world.victim, "sync", check=False).returncode:
            return "sync failed"
        if git(world.victim, "status", "--porcelain"):
            return "git status dirty: " + git(world.victim, "status", "--porcelain").strip()
    return None


def _log_not_forged(world: World) -> str | None:
    """`fsmem log --agent researcher` lists researcher's commits only, whatever the remote's .mailmap maps."""
    from fsmem import Memory

    Memory(world.victim, agent="researcher").write("topics/research.md", "# Research\n")
    out = S.fsmem(world.victim, "--agent", "researcher", "log", "--json", check=False)
    return "mallory's commit listed as researcher's" if "mallory" in out.stdout else None


def _no_forged_calls(world: World) -> str | None:
    stats = json.loads(S.fsmem(world.victim, "stats", "--json", check=False).stdout)
    return "forged calls in stats" if "forged" in json.dumps(stats) else None


def link(at: str, target: str) -> Callable[[World], None]:
    """Push a link at `at`; a target starting with 'OUT' is the outside folder's path, made absolute."""
    return _pushed(
        lambda w: _link(w, at, target.replace("OUT", str(w.outside)) if target.startswith("OUT") else target)
    )


def text(path: str, content: str) -> Callable[[World], None]:
    return _pushed(lambda w: _text(w.hostile / path, content))


def config(old: str, new: str) -> Callable[[World], None]:
    return _pushed(lambda w: _config(w, old, new))


def raw(name: str, data: bytes, folder: str = "", mode: str = "100644") -> Callable[[World], None]:
    return lambda w: (push_entries(w.hostile, {name: (mode, data)}, folder), None)[1]


def and_shared(plant: Callable[[World], None]) -> Callable[[World], None]:
    """Change topics/shared.md first (so the victim's sync checks it out under the attack's attributes)."""

    def run(world: World) -> None:
        shared = world.hostile / S.SHARED
        shared.write_text(shared.read_text().replace("- status: open", "- status: review"))
        push(world.hostile)
        plant(world)

    return run


def _escape_through_a_link(world: World) -> None:
    _link(world, "deep/er/up", "../../topics")  # inside the memory: allowed alone
    _link(world, "escape.md", "deep/er/up/../../outside/secret.txt")  # lexically inside, really out
    push(world.hostile)


def _folder_as_link_out(world: World) -> None:
    shutil.rmtree(world.hostile / "topics")
    _link(world, "topics", str(world.outside))
    push(world.hostile)


def attacks() -> list[Attack]:
    """Every attack: (finding, what it pushes, how it is planted, the answer it must get, the path named)."""
    bomb = _pushed(lambda w: _text(w.hostile / "fsmem.yaml", (w.hostile / "fsmem.yaml").read_text() + LAUGHS))
    forged = text(".fsmem/logs/retrieval.jsonl", FORGED * 20)
    mailmap = "researcher <mallory@example.com> mallory <mallory@example.com>\n"
    # fmt: off
    return [
        Attack("1", ".gitattributes: a link to a file outside", link(".gitattributes", "OUT/secret.txt"), "refused", ".gitattributes"),
        Attack("1", ".gitignore: a link to a file outside", link(".gitignore", "OUT/secret.txt"), "refused", ".gitignore"),
        Attack("2", ".fsmem: a link to a folder outside", link(".fsmem", "OUT"), "refused", ".fsmem"),
        Attack("3", ".fsmem/: a forged retrieval log", forged, "refused", ".fsmem/logs/retrieval.jsonl", _no_forged_calls),
        Attack("4", "fsmem.yaml: secrets.policy allow", config("policy: refuse", "policy: allow"), "held"),
        Attack("4", "fsmem.yaml: the read-only agent may write", config("read_only: true", "read_only: false"), "held"),
        Attack("4", "fsmem.yaml: history off", config("  enabled: true ", "  enabled: false"), "held"),
        Attack("4", "fsmem.yaml: budgets 100x", config("max_tokens: 2000", "max_tokens: 200000"), "held"),
        Attack("4", "fsmem.yaml: a new agent in the closed list", config("  agents:\n", "  agents:\n    mallory: {}\n"), "held"),
        Attack("4", "fsmem.yaml: removed", _pushed(lambda w: (w.hostile / "fsmem.yaml").unlink()), "held"),
        Attack("4", "fsmem.yaml: sync sends to another remote", config("  remote: null", "  remote: mallory"), "held"),
        Attack("5", "fsmem.yaml: a YAML alias bomb", bomb, "refused", "fsmem.yaml"),
        Attack("5", "fsmem.yaml: 1 MB", text("fsmem.yaml", "# x\n" * 250_000), "refused", "fsmem.yaml"),
        Attack("6", ".gitattributes: *.md merge=union", text(".gitattributes", "*.md merge=union\n"), "merged", "", _one_owner),
        Attack("6", ".gitattributes: *.md merge=binary", text(".gitattributes", "*.md merge=binary\n"), "merged", "", _one_owner),
        Attack("6", "topics/.gitattributes: merge=union", text("topics/.gitattributes", "*.md merge=union\n"), "merged", "", _one_owner),
        Attack("7", ".gitattributes: * text eol=crlf", and_shared(text(".gitattributes", "* text eol=crlf\n")), "merged", "", _stays_clean),
        Attack("7", ".gitattributes: working-tree-encoding", and_shared(raw(".gitattributes", b"*.md text working-tree-encoding=UTF-16\n")), "merged", "", _stays_clean),
        Attack("11", "a name .GIT", raw(".GIT", b"gitdir: /tmp\n"), "refused", ".GIT"),
        Attack("11", "a name ..", raw("..", b"x\n"), "refused", ".."),
        Attack("11", "topics/.git: a git file", raw(".git", b"gitdir: /tmp\n", "topics"), "refused", "topics/.git"),
        Attack("11", "a name with a newline", raw("a\nb.md", b"- owner: spoof\n", "topics"), "refused", "topics/a\nb.md"),
        Attack("11", "a name that is not UTF-8", _bad_utf8, "refused", "topics/\udcff.md"),
        Attack("11", "topics/.FSMEM: state in another spelling", raw(".FSMEM", b"x\n", "topics"), "refused", "topics/.FSMEM"),
        Attack("", "fsmem.yaml: a link to a file outside", link("fsmem.yaml", "OUT/secret.txt"), "refused", "fsmem.yaml"),
        Attack("", "FSMEM.YAML beside fsmem.yaml", text("FSMEM.YAML", "secrets: {policy: allow}\n"), "refused", "FSMEM.YAML"),
        Attack("", ".gitattributes: a filter and a diff driver", and_shared(text(".gitattributes", "*.md filter=evil diff=evil\n")), "merged", "", _stays_clean),
        Attack("", "topics/.gitignore: ignores every note", text("topics/.gitignore", "*\n"), "merged", "", _committed_though_ignored),
        Attack("", "a link out of the root (absolute)", link("topics/out.md", "OUT/secret.txt"), "refused", "topics/out.md"),
        Attack("", "a link out of the root (relative)", link("topics/out.md", "../../outside/secret.txt"), "refused", "topics/out.md"),
        Attack("", "a link to fsmem.yaml", link("topics/conf.md", "../fsmem.yaml"), "refused", "topics/conf.md"),
        Attack("", "a link into .git/", link("topics/git.md", "../.git/config"), "refused", "topics/git.md"),
        Attack("", "a link into .fsmem/", link("topics/state.md", "../.fsmem/logs/retrieval.jsonl"), "refused", "topics/state.md"),
        Attack("", "a link out through another link", _escape_through_a_link, "refused", "escape.md"),
        Attack("", "a folder replaced by a link out", _folder_as_link_out, "refused", "topics"),
        Attack("", "a submodule, with a .gitmodules URL", _submodule, "refused", "topics/vendored"),
        Attack("", ".mailmap: mallory as researcher", text(".mailmap", mailmap), "merged", "", _log_not_forged),
    ]
    # fmt: on


def _bad_utf8(world: World) -> None:
    """A name that is not UTF-8, which push_entries (text) cannot spell: git plumbing with bytes."""

    def run(*args: str, input: bytes | None = None) -> bytes:
        return subprocess.run(["git", *args], cwd=world.hostile, input=input, capture_output=True, check=True).stdout

    blob = run("hash-object", "-w", "--stdin", input=b"x\n").strip()
    folder = run("ls-tree", "-z", "HEAD:topics") + b"100644 blob " + blob + b"\t\xff.md\0"
    tree = run("mktree", "-z", input=folder).strip()
    top = [e for e in run("ls-tree", "-z", "HEAD^{tree}").split(b"\0") if e and not e.endswith(b"\ttopics")]
    root = run("mktree", "-z", input=b"\0".join([*top, b"040000 tree " + tree + b"\ttopics"]) + b"\0").strip()
    commit = run("commit-tree", root.decode(), "-p", "HEAD", "-m", "an innocent change").strip()
    run("push", "-q", "origin", commit.decode() + ":refs/heads/main")


def _committed_though_ignored(world: World) -> str | None:
    """A note a human adds in topics/ after the remote's `topics/.gitignore` (left out) is committed by sync."""
    (world.victim / "topics/by-hand.md").write_text("# By hand\n")
    if S.fsmem(world.victim, "sync", check=False).returncode:
        return "sync failed"
    return None if "topics/by-hand.md" in tree_names(world.victim, "HEAD") else "a note by hand was not committed"


def _submodule(world: World) -> None:
    _text(world.hostile / ".gitmodules", '[submodule "v"]\n\tpath = topics/vendored\n\turl = ../../outside\n')
    push(world.hostile)
    push_entries(world.hostile, {"vendored": ("160000", b"")}, "topics")


def _template(work: Path) -> Path:
    """One world, made once and copied for every attack: the origin, the victim, a peer and the hostile clone."""
    base = work / "template"
    origin, (victim, peer) = S.make_hosts(base, hosts=2, writers=1)
    for root in (victim, peer):
        git(root, "remote", "set-url", "origin", "../origin.git")
    hostile = base / "hostile"
    git(base, "clone", "-q", "origin.git", "hostile")
    git(hostile, "remote", "set-url", "origin", "../origin.git")
    git(hostile, "config", "user.name", "mallory")
    git(hostile, "config", "user.email", "mallory@example.com")
    for root in (victim, peer):  # fsmem keeps absolute paths in its state: a copy starts without it
        shutil.rmtree(root / ".fsmem", ignore_errors=True)
    return base


def _one(base: Path, attack: Attack, limit: float) -> str | None:
    """Run one attack on a copy of the template; None when it was held, else what went wrong."""
    shutil.copytree(base / "template", base / "run", symlinks=True)
    run = base / "run"
    outside = run / "outside"  # beside the clones: a relative link out of the memory finds it
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    world = World(run / "origin.git", run / "host0", run / "hostile", outside, run)
    try:
        state = tree_state(outside)
        config = (world.victim / "fsmem.yaml").read_bytes()
        attack.plant(world)
        started = time.monotonic()
        try:
            out = subprocess.run(
                [S.FSMEM, "--root", str(world.victim), "sync"],
                capture_output=True,
                text=True,
                env=S.env(),
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            return f"no answer within {limit:g} s"
        took = time.monotonic() - started
        problems = _answer(out, attack)
        if attack.answer == "merged":
            peer = run / "host1"
            if S.fsmem(peer, "sync", check=False).returncode:
                problems.append("the peer's sync failed")
        if attack.check is not None and not problems:
            found = attack.check(world)
            if found:
                problems.append(found)
        problems += _after(world, state, config if attack.answer != "merged" else None, outside)
        if attack.answer == "refused" and not problems:
            repaired = S.fsmem(world.victim, "sync", "--repair", check=False)
            if repaired.returncode:
                problems.append(f"--repair: exit {repaired.returncode}: {repaired.stderr.strip()[:200]}")
            elif _entry(world.origin, "main", attack.path) != _entry(world.victim, "HEAD", attack.path):
                problems.append(f"--repair left the remote's tip with another {attack.path!r} than the victim's")
            problems += _after(world, state, config, outside)
        if took > limit:
            problems.append(f"took {took:.1f} s")
        return "; ".join(problems) or None
    finally:
        shutil.rmtree(run, ignore_errors=True)


def _answer(out: subprocess.CompletedProcess, attack: Attack) -> list[str]:
    if "Traceback" in out.stderr:
        return ["a traceback"]
    if attack.answer == "merged":
        return [] if out.returncode == 0 else [f"exit {out.returncode}: {out.stderr.strip()[:200]}"]
    one_line = out.returncode == 2 and out.stderr.count("\n") == 1
    remedy = "fsmem sync --repair" if attack.answer == "refused" else "fsmem sync --accept-config"
    if not one_line or remedy not in out.stderr or "nothing was merged or pushed" not in out.stderr:
        return [f"not {attack.answer}: exit {out.returncode}: {(out.stdout + out.stderr).strip()[:200]!r}"]
    if attack.path and repr(attack.path)[1:-1] not in out.stderr and attack.path not in out.stderr:
        return [f"the refusal does not name {attack.path!r}"]
    return []


def _after(world: World, outside_state: object, config: bytes | None, outside: Path) -> list[str]:
    """What must hold on the victim and the remote whatever the attack: nothing outside touched or published."""
    problems = []
    if tree_state(outside) != outside_state:
        problems.append("the folder outside the memory changed")
    if objects_hold(world.origin, SECRET):
        problems.append("the secret reached the remote")
    if config is not None and (world.victim / "fsmem.yaml").read_bytes() != config:
        problems.append("the victim's fsmem.yaml changed")
    state = world.victim / ".fsmem"
    if state.is_symlink() or (state.exists() and not state.is_dir()):
        problems.append(".fsmem is not the victim's own folder")
    escaping = [str(p.relative_to(world.victim)) for p in world.victim.rglob("*") if _leads_out(world.victim, p)]
    if escaping:
        problems.append(f"links out of the memory or into its own files on the victim's disk: {escaping[:3]}")
    if git(world.victim, "status", "--porcelain"):
        problems.append("git status dirty: " + git(world.victim, "status", "--porcelain").strip()[:200])
    return problems


def _leads_out(root: Path, path: Path) -> bool:
    """A link on the victim's disk that leads out of the memory, or to fsmem's or git's own files."""
    if not path.is_symlink() or ".git" in path.relative_to(root).parts:
        return False
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root.resolve()):
        return True
    first = real.relative_to(root.resolve()).parts[:1]
    return first in ((".git",), (".fsmem",), ("fsmem.yaml",), (".gitattributes",), (".gitignore",))


def _entry(repo: Path, rev: str, path: str) -> str:
    """The object id at `path` in `rev` ('' when there is none), as git names it."""
    spec = f"{rev}:{path}".encode("utf-8", "surrogateescape")
    out = subprocess.run([b"git", b"rev-parse", b"-q", b"--verify", spec], cwd=repo, capture_output=True, env=S.env())
    return out.stdout.decode().strip()


def bench_sync_attacks(work: Path, limit: float) -> tuple[dict[str, list[int]], list[str]]:
    """Per finding of issue 18 (and 'other' for their neighbours): [attacks tried, held]; and the failures."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _template(work)
    counts: dict[str, list[int]] = {}
    failures: list[str] = []
    for attack in attacks():
        group = f"finding {attack.finding}" if attack.finding else "other"
        counts.setdefault(group, [0, 0])[0] += 1
        try:
            problem = _one(work, attack, limit)
        except Exception as exc:  # an attack the harness could not even run counts as not held
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            counts[group][1] += 1
        else:
            failures.append(f"sync attack {attack.name!r}: {problem}")
    return counts, failures


def report(counts: dict[str, list[int]], seconds: float) -> str:
    rows = [[group, str(tried), str(held)] for group, (tried, held) in counts.items()]
    tried, held = sum(t for t, _ in counts.values()), sum(h for _, h in counts.values())
    rows.append(["all sync attacks", str(tried), f"{held} ({100 * held / tried:.1f}%)"])
    return table(f"sync attacks from a hostile clone ({seconds:.0f} s)", ["", "tried", "held"], rows)


def boundary_cost(files: int, notes: int = 100, runs: int = 15) -> list[str]:
    """What the boundary adds to a sync that brings `notes` new notes into a memory of `files` files: the
    median of `runs` calls of `trust.admit` on the fetched commits, beside one whole `fsmem sync` of them."""
    import statistics

    from common import corpus

    from fsmem import Memory
    from fsmem.history import trust

    base = OUT / f"trust-cost-{files}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    victim = base / "victim"
    shutil.copytree(corpus(files), victim, symlinks=True)
    Memory.init(victim, git=True)
    git(victim, "gc", "-q")
    git(base, "init", "-q", "--bare", "--initial-branch=main", "origin.git")
    git(victim, "remote", "add", "origin", "../origin.git")
    S.fsmem(victim, "sync")
    git(base, "clone", "-q", "origin.git", "hostile")
    hostile = base / "hostile"
    for number in range(notes):
        _text(
            hostile / "sessions" / "incoming" / f"note-{number}.md", f"## people/Person {number % 10}\n- k: {number}\n"
        )
    git(hostile, "config", "user.name", "bob")
    git(hostile, "config", "user.email", "bob@example.com")
    push(hostile)
    git(victim, "fetch", "-q", "origin", "+refs/heads/main:refs/remotes/origin/main")
    repo = Memory(victim).history
    assert repo is not None
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        trust.admit(repo, "refs/remotes/origin/main", "origin/main")
        seconds.append(time.perf_counter() - started)
    started = time.perf_counter()
    S.fsmem(victim, "sync")
    whole = time.perf_counter() - started
    idle = []
    for _ in range(runs):  # nothing new: the boundary's cost on a sync that brings nothing
        started = time.perf_counter()
        trust.admit(repo, "refs/remotes/origin/main", "origin/main")
        idle.append(time.perf_counter() - started)
    admit, nothing = statistics.median(seconds), statistics.median(idle)
    return [
        f"{files:,} files",
        f"{admit * 1000:.1f} ms",
        f"{whole * 1000:.0f} ms",
        f"{100 * admit / whole:.1f}%",
        f"{nothing * 1000:.1f} ms",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds a sync may take")
    parser.add_argument("--cost", metavar="SIZES", help="instead: what the boundary adds to a sync, e.g. 1000,10000")
    args, _ = parser.parse_known_args()
    if args.cost:
        header = ["memory", "boundary, 100 notes in", "whole fsmem sync", "share", "boundary, nothing new"]
        rows = [boundary_cost(int(size)) for size in args.cost.split(",")]
        print(table("what the trust boundary adds to a sync (median of 15)", header, rows))
        return
    started = time.monotonic()
    counts, failures = bench_sync_attacks(OUT / "hostile-sync", args.time_limit)
    print(report(counts, time.monotonic() - started))
    for failure in failures:
        print("FAILED " + failure.replace("\n", "\\n"))
    tried, held = sum(t for t, _ in counts.values()), sum(h for _, h in counts.values())
    print(json.dumps({"sync_attacks_tried": tried, "sync_attacks_held": held}))
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
