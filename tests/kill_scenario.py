"""Kill fsmem at each of its git steps, then check that the memory converges on two hosts.

fsmem runs git by name, so a `git` first on PATH sees every step: this
wrapper (written by `install_wrapper`, a few lines of sh) logs each git
command fsmem starts and, at the chosen one, kills fsmem's whole process group
(fsmem and that git, as a timeout, systemd or the OOM killer would) in one of
two ways:

- `lock`: the git command's lock files are created first (`index.lock`,
  `HEAD.lock` and the branch's lock, a remote-tracking ref's lock,
  `config.lock`), as a git killed while it held them leaves them; for a git
  command that takes no lock this is a kill just before it;
- `after`: the git command runs to the end first (a `git merge` then leaves
  its half-finished merge behind: MERGE_HEAD, an index with conflicts).

Each fsmem command runs as a process of its own, forked from a parent that
imported fsmem once (tests/preloaded.py): the kill is a real SIGKILL of a
real process, without an interpreter start a kill.

fsmem has no test-only code path for this. `Hosts` builds two clones of one
bare remote with work on both sides (so a sync merges documents both hosts
changed); `converge` kills one command at one step on the first host, then
writes again, syncs both hosts and reports what does not hold: every
acknowledged write on both hosts, identical files at one commit, nothing left
of git's locks or merges, `git status` clean, `fsmem check` clean.

`converge_timed` kills at a moment instead (wherever fsmem then is, in a git
step or between two). Used by tests/test_history_kills.py and
benchmarks/hostile_kills.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import preloaded

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-11-30T09:00:00+00:00"
COMMANDS = {
    "write": ["note", "--subject", "people/Bo Chen", "- city: Rome (killed write)"],
    "consolidate": ["consolidate"],
    "sync": ["sync"],
}

WRAPPER = r"""#!/bin/sh
# fsmem's git, logged; at call $KILLGIT_AT its process group is killed ($KILLGIT_MODE: lock | after)
prev=; top=; sub=
for a in "$@"; do
  [ -n "$sub" ] && break
  case "$prev" in -C) top=$a; prev=; continue;; -c) prev=; continue;; esac
  case "$a" in -C|-c) prev=$a;; -*) ;; *) sub=$a;; esac
done
[ -z "$KILLGIT_LOG" ] && exec REAL "$@"
echo "$sub" >> "$KILLGIT_LOG"
n=0
while read -r _; do n=$((n + 1)); done < "$KILLGIT_LOG"  # counted by the shell: no process a git call
[ "$n" -ne "${KILLGIT_AT:-0}" ] && exec REAL "$@"
if [ "$KILLGIT_MODE" = after ]; then
  REAL "$@"
  kill -s KILL 0
fi
gd="${top:-.}/.git"
ref=$(sed -n 's/^ref: //p' "$gd/HEAD")
case "$sub" in
  update-ref) locks="HEAD.lock $ref.lock";;
  commit) locks="index.lock $ref.lock";;
  update-index|status|merge|checkout|read-tree|add|rm|reset) locks="index.lock";;
  fetch|push) locks="refs/remotes/origin/${ref#refs/heads/}.lock";;
  config) locks="config.lock";;
  *) locks="";;
esac
for lock in $locks; do mkdir -p "$(dirname "$gd/$lock")"; : > "$gd/$lock"; done
kill -s KILL 0
"""


def install_wrapper(folder: Path) -> Path:
    real = shutil.which("git")
    assert real, "git is not installed"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "git"
    path.write_text(WRAPPER.replace("REAL", real))
    path.chmod(0o755)
    return folder


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_", "KILLGIT_"))}
    out.update(FSMEM_NOW=NOW, **extra)
    return out


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env()).stdout


def fsmem(root: Path, *args: str, check: bool = True, **extra: str) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` as a process of its own (forked from a preloaded parent), leading a process group
    of its own: the wrapper kills that group, fsmem and its git, never the test."""
    proc = preloaded.run(["--root", str(root), *args], env=env(FSMEM_HOST_ID=root.name, **extra), timeout=300)
    if check and proc.returncode:
        raise AssertionError(f"fsmem {' '.join(args)} on {root.name}: exit {proc.returncode}: {proc.stderr}")
    return proc


@dataclass
class Hosts:
    """A bare origin and two clones, `a` and `b`, in one folder (remotes by relative path: the folder copies)."""

    base: Path
    acknowledged: list[str] = field(default_factory=list)  # text of every write a command confirmed

    @property
    def origin(self) -> Path:
        return self.base / "origin.git"

    @property
    def a(self) -> Path:
        return self.base / "a"

    @property
    def b(self) -> Path:
        return self.base / "b"

    def note(self, root: Path, subject: str, text: str, *, in_process: bool = False) -> None:
        """A write that must survive: through the CLI, or through `Memory` in this process (cheaper)."""
        if in_process:
            from fsmem import Memory

            with pinned_clock():
                Memory(root).note(text, subject=subject)
        else:
            fsmem(root, "note", "--subject", subject, text)
        self.acknowledged.append(text)

    def copy(self, to: Path) -> Hosts:
        """A copy of the folder (links as links, times kept: fsmem's caches stay valid), by `cp -a`, which copies
        the hosts' few hundred files and folders in a fraction of `shutil.copytree`'s CPU (a copy a kill)."""
        to.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(self.base), str(to)], check=True)
        return Hosts(to, list(self.acknowledged))


def build(base: Path) -> Hosts:
    """Both hosts hold the same start; then each wrote and consolidated facts about one person, `b` pushed,
    and `a` holds a consolidated and an unconsolidated note of its own, not synced yet."""
    hosts = Hosts(base)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hosts.origin)], check=True, env=env())
    fsmem(hosts.a, "init", "--git", str(hosts.a))
    git(hosts.a, "remote", "add", "origin", "../origin.git")
    hosts.note(hosts.a, "people/Ann Lee", "- city: Oslo")
    fsmem(hosts.a, "sync")
    subprocess.run(["git", "clone", "-q", "origin.git", "b"], cwd=base, check=True, env=env())
    git(hosts.b, "remote", "set-url", "origin", "../origin.git")
    fsmem(hosts.b, "sync", "--setup")
    fsmem(hosts.b, "sync")
    hosts.note(hosts.b, "people/Ann Lee", "- role: cfo")
    fsmem(hosts.b, "sync")
    hosts.note(hosts.a, "people/Ann Lee", "- employer: Acme")
    fsmem(hosts.a, "consolidate")
    hosts.note(hosts.a, "people/Cy Diaz", "- city: Lima")
    for repo in (hosts.origin, hosts.a, hosts.b):  # git's objects in a pack, as `git gc --auto` leaves them: a copy
        git(repo, "repack", "-a", "-d", "-q")  # a kill made ~40 object folders a host, most of the copy's cost
    return hosts


def steps(template: Hosts, work: Path, command: str, wrapper: Path) -> list[str]:
    """The git commands `command` runs on host a from the template's state, in order."""
    hosts = template.copy(work)
    log = work / "git.log"
    path = f"{wrapper}{os.pathsep}{os.environ.get('PATH', '')}"
    fsmem(hosts.a, *COMMANDS[command], PATH=path, KILLGIT_LOG=str(log))
    return log.read_text().split()


@dataclass
class Outcome:
    command: str
    step: int
    git: str
    mode: str
    problems: list[str]
    same_as: int | None = None  # the earlier step whose kill left this very state (not recovered from again)

    @property
    def converged(self) -> bool:
        return not self.problems


def converge(
    template: Hosts, work: Path, command: str, step: int, mode: str, wrapper: Path, seen: dict[str, int] | None = None
) -> Outcome:
    """Kill `command` on host a at git step `step`, then recover as a user would (write, sync both hosts).

    With `seen` (state fingerprint -> step), a kill that leaves exactly the state an earlier kill left (two
    kills before two read-only git steps in a row) is not recovered from again: its outcome is that one's.
    """
    hosts = template.copy(work)
    log = work / "git.log"
    path = f"{wrapper}{os.pathsep}{os.environ.get('PATH', '')}"
    killed = fsmem(
        hosts.a,
        *COMMANDS[command],
        check=False,
        PATH=path,
        KILLGIT_LOG=str(log),
        KILLGIT_AT=str(step),
        KILLGIT_MODE=mode,
    )
    calls = log.read_text().split()
    outcome = Outcome(command, step, calls[step - 1] if len(calls) >= step else "?", mode, [])
    if killed.returncode != -signal.SIGKILL:
        outcome.problems.append(f"not killed: exit {killed.returncode} {killed.stderr.strip()[:300]}")
    if seen is not None:
        left = fingerprint(hosts.a)
        if left in seen and not outcome.problems:
            outcome.same_as = seen[left]
            return outcome
        seen[left] = step
    return _recover(hosts, outcome)


@contextlib.contextmanager
def pinned_clock() -> Iterator[None]:
    """This process's fsmem on the scenario's clock, as the CLI runs it."""
    before = os.environ.get("FSMEM_NOW")
    os.environ["FSMEM_NOW"] = NOW
    try:
        yield
    finally:
        if before is None:
            del os.environ["FSMEM_NOW"]
        else:
            os.environ["FSMEM_NOW"] = before


def converge_timed(template: Hosts, work: Path, command: str, delay: float) -> Outcome:
    """Kill `command` on host a `delay` seconds after it started (its process group, wherever it is: in a git
    step or between two), then recover as `converge` does; a command that finished first is no kill."""
    hosts = template.copy(work)
    child = preloaded.start(["--root", str(hosts.a), *COMMANDS[command]], env=env(FSMEM_HOST_ID="a"))
    time.sleep(delay)  # the kill lands at a time, wherever the command is: the time is what is tested
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    outcome = Outcome(command, 0, f"{delay:.3f}s", "timed", [])
    if child.returncode != -signal.SIGKILL:
        outcome.problems.append("finished before the kill")
        return outcome
    return _recover(hosts, outcome)


def _recover(hosts: Hosts, outcome: Outcome) -> Outcome:
    """Write again, sync both hosts until they and origin hold one commit, and say what does not hold."""
    try:
        hosts.note(hosts.a, "people/Bo Chen", "- role: after the kill", in_process=True)
        for root in (hosts.a, hosts.b, hosts.a, hosts.b):  # a, which recovers, through the CLI (its path and error
            # boundary, run in this process: the process killed was a real one); b through Memory
            if root == hosts.a:
                _in_this_process(root, "sync")
            else:
                _sync_here(root)
            if _heads(hosts) == 1:
                break
    except Exception as exc:  # a write or a sync that failed: the memory did not converge
        outcome.problems.append(f"{type(exc).__name__}: {str(exc)[:600]}")
        return outcome
    outcome.problems += problems(hosts)
    return outcome


def _in_this_process(root: Path, *args: str) -> None:
    """`fsmem --root ROOT ARGS` as `fsmem` runs it (FSMEM_HOST_ID the host's name, the scenario's clock), in this
    process through the CLI's entry point (tests/cli_runner.py)."""
    import cli_runner

    code, _, err = cli_runner.fsmem_here(root, *args, now=NOW, FSMEM_HOST_ID=root.name)
    if code:
        raise AssertionError(f"fsmem {' '.join(args)} on {root.name}: exit {code}: {err}")


def _sync_here(root: Path) -> None:
    from fsmem import Memory

    with pinned_clock():
        Memory(root).sync()


def _heads(hosts: Hosts) -> int:
    return len(
        {git(root, "rev-parse", "HEAD") for root in (hosts.a, hosts.b)} | {git(hosts.origin, "rev-parse", "main")}
    )


LEFTOVERS = (
    "index.lock",
    "HEAD.lock",
    "config.lock",
    "MERGE_HEAD",
    "refs/heads/main.lock",
    "refs/remotes/origin/main.lock",
)


def problems(hosts: Hosts) -> list[str]:
    """What does not hold once both hosts synced (empty: converged)."""
    found = []
    if _heads(hosts) != 1:
        found.append("the hosts and origin are not at one commit")
    from fsmem import Memory

    files = {root: files_of(root) for root in (hosts.a, hosts.b)}
    a, b = files.values()
    if a != b:
        differ = sorted(rel for rel in a.keys() | b.keys() if a.get(rel) != b.get(rel))
        found.append(f"the hosts' files differ: {differ}")
    for root in (hosts.a, hosts.b):
        text = "".join(data.decode("utf-8", "replace") for data in files[root].values())
        found += [f"{root.name}: acknowledged write missing: {w!r}" for w in hosts.acknowledged if w not in text]
        status = git(root, "status", "--porcelain")
        if status:
            found.append(f"{root.name}: git status not clean: {status.strip()[:200]}")
        found += [f"{root.name}: .git/{name} left" for name in LEFTOVERS if (root / ".git" / name).exists()]
        found += [f"{root.name}: fsmem check: {p}:{n}: {m}" for p, n, m in Memory(root).check().problems]
        journal = root / ".fsmem" / "history" / "journal"
        if journal.is_dir() and any(not n.startswith(".") for n in os.listdir(journal)):
            found.append(f"{root.name}: journal entries left uncommitted")
    return found


def fingerprint(root: Path) -> str:
    """What a kill left on a host, less what differs between two runs to the same point (stat data in the
    index, reflog times, pids, caches): the files, the index's entries, the refs, git's leftovers, the journal."""
    import hashlib
    import json

    digest = hashlib.sha256()
    for rel, data in files_of(root).items():
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    for args in (("ls-files", "-s"), ("status", "--porcelain"), ("for-each-ref",), ("symbolic-ref", "-q", "HEAD")):
        digest.update(subprocess.run(["git", "-C", str(root), *args], capture_output=True, env=env()).stdout)
    gd = root / ".git"
    for name in (*LEFTOVERS, "MERGE_MSG", "MERGE_MODE", "config"):
        if (gd / name).exists():
            digest.update(name.encode() + (gd / name).read_bytes())
    journal = root / ".fsmem" / "history" / "journal"
    entries = sorted(json.dumps(json.loads(p.read_bytes()), sort_keys=True) for p in journal.glob("[!.]*"))
    digest.update(json.dumps(entries).encode())
    return digest.hexdigest()


def files_of(root: Path) -> dict[str, bytes]:
    """Every file of a host but git's and fsmem's machine state (whose folders are not walked), by path."""
    found = {}
    for current, dirs, files in os.walk(root):
        if current == str(root):
            dirs[:] = [name for name in dirs if name not in (".git", ".fsmem")]
        for name in files:
            path = Path(current, name)
            if path.is_file():
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return dict(sorted(found.items()))
