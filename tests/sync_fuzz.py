"""The sync fuzzer: two honest hosts and a hostile one share a remote; the honest hosts' state is checked whole.

Used by tests/test_sync_fuzz.py (bounded: every hostile action at least once, 50+ syncs) and
benchmarks/bench_sync_fuzz.py (longer, with a report per action). The hostile host and its
actions are tests/sync_fuzz_hostile.py; here are the honest hosts (`Memory` in-process, one
sync in CLI_EVERY through `fsmem sync`), the state machine, and the oracle. This module is long
because the oracle is one piece: the invariants, written from the documented rules (docs/history.md,
docs/safety.md, issue 31) rather than by calling fsmem's own checker, checked on each honest
host after every sync and every write:

- no document outside the folders of notes carries consolidation's mark of a note taken (`consolidated:`);
- every link in the tree resolves, one component at a time and never through a link that
  leaves, inside the memory to a memory file or folder; never to a control or generated
  file (fsmem.yaml, INDEX.md, a history file, .git, .fsmem); a dangling link or a loop at
  least reported by `check`;
- no write reaches the folder beside the memories or a control or generated file;
- every regular file is a control file, listed by `ls`, or reported by `check` with a
  remedy; a file that is not a memory file is one the hostile host pushed by that name;
  a file git does not track is listed or reported, whatever its name;
- every honest write's mark that HEAD still holds is in a file `ls` lists (or a listed
  document's history file) or `check` names: a merge never keeps a host's bytes only where
  nothing shows them (a side git moved aside as `NAME~HEAD`, a file behind a link);
- no name git refuses to check out, and no unportable name or twin, on disk or in HEAD;
- a regular file in an honest host's HEAD before a sync is no link after it, in HEAD or on disk, nor behind a
  folder that became a link: a remote cannot make a file of this host a link (the honest hosts make none);
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

import cli_runner
import sync_scenario as S
from sync_fuzz_hostile import ACTIONS, LINK, OUTSIDE_ABS, Hostile, Move, env, is_memory_name, run

SECRET = "SECRET-FUZZ-OUTSIDE-7f3a"
WRITES_THROUGH_LINKS = "honest writes through links"  # a name `skip` may hold: honest writes avoid links
CONTROL = {"fsmem.yaml", ".gitattributes", ".gitignore", "INDEX.md"}
DEVICES = {"con", "prn", "aux", "nul", "conin$", "conout$"} | {
    f"{kind}{n}" for kind in ("com", "lpt") for n in [*"123456789", "\u00b9", "\u00b2", "\u00b3"]
}
HFS_IGNORED = {0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF}


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


REMEDY_WORDS = ("fsmem ", "rename", "remove", "delete", "repair", "run ", "move", "replace", "keep")


@dataclass
class Tally:
    """What a run tried and what it found, shared by every example hypothesis runs."""

    tried: Counter = field(default_factory=Counter)
    outcomes: dict[str, Counter] = field(default_factory=dict)
    syncs: int = 0
    repairs: int = 0
    cli_syncs: int = 0
    kept: int = 0  # files a sync kept as this host had them where the remote made them a link ('kept ...' lines)
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
        for number, root in enumerate(roots):  # note names fixed, so the same draws pick the same files every run
            run(root, "git", "config", "fsmem.hostId", f"fuzz{number}")
        self.outside = base / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET + "\n")
        (self.outside / "victim.md").write_text(f"# Outside\n\n{SECRET}\n")
        (self.outside / "topics").mkdir()
        (self.outside / "topics" / "shared.md").write_text(f"# Not the memory's\n{SECRET}\n")
        (self.outside / ".fsmem-tmp-planted").write_text("named as fsmem names a temporary file, not fsmem's\n")
        OUTSIDE_ABS["path"] = str(self.outside)
        self.outside_hash = tree_hash(self.outside)
        self.hostile = Hostile(origin, base / "hostile.git")
        self.notes: list[list[tuple[str, str, str]]] = [[], []]  # per host: (path, text, commit)
        self.marks: dict[str, int] = {}  # the mark of each honest write (`h0-7`), and the host that wrote it
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
        owned = self.owned[host]
        if WRITES_THROUGH_LINKS in self.skip:  # an exclusion of tests/test_sync_fuzz.py, while its finding is open
            owned = [p for p in owned if not self._through_link(root, p)]
            if kind in ("edit", "rewrite", "mv", "rm") and (self._through_link(root, S.SHARED) or not owned):
                self.tally.honest[f"{kind} left out"] += 1
                return
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
            elif kind == "rewrite":  # an existing path, which the hostile host may have made a link or a folder
                links = [] if WRITES_THROUGH_LINKS in self.skip else self._links(root)
                path = str(choose(owned + [S.SHARED] + links))
                memory.write(path, f"# {mark}\n\n- rewritten: {mark}\n")
                if path in self.owned[host]:  # through a link the remote made of it: where the write really went
                    self._noted(host, resolve(root, path).rel or path, f"- rewritten: {mark}")
            elif kind == "edit":
                page = memory.read(S.SHARED)
                owner = next((t for _, t in page.lines if t.startswith("- owner: ")), None)
                if owner is not None:
                    memory.edit(S.SHARED, old=owner, new=f"- owner: o-{mark}", expected_version=page.version)
            elif kind == "mv" and owned:
                old = str(choose(owned))
                new = f"topics/{mark}-moved.md"
                memory.mv(old, new)
                self.owned[host] = [new if p == old else p for p in self.owned[host]]
            elif kind == "rm" and owned:
                old = str(choose(owned))
                memory.rm(old)
                self.owned[host].remove(old)
            elif kind == "consolidate":
                memory.consolidate()
            self.tally.honest[kind] += 1
            if kind in ("note", "write", "rewrite", "edit"):
                self.marks[mark] = host
            changed = run(root, "git", "status", "--porcelain", "--untracked-files=no").decode()
            if changed:  # a write and its commit are one: history names the file the write really changed
                self.fail("write", host, f"{kind} left the tree and HEAD apart (git status: {changed!r})")
        except FsmemError as refused:
            self.tally.honest[f"{kind} refused"] += 1
            self.trail.append(f"  refused: {refused}")
        except Exception as crash:  # anything else is a crash on a face that promises FsmemError alone
            self.fail("write", host, f"{kind} raised {type(crash).__name__}: {crash}")
        if tree_hash(self.outside) != self.outside_hash:
            self.fail("outside", host, f"the folder beside the memory changed after {kind}")
        for name in CONTROL:
            path = root / name
            if path.is_file() and not path.is_symlink() and mark.encode() in path.read_bytes():
                self.fail("write", host, f"{kind} wrote into {name}, a control or generated file")

    @staticmethod
    def _through_link(root: Path, rel: str) -> bool:
        """Whether a link stands anywhere on the way to `rel` (or at it)."""
        parts = rel.split("/")
        return any(os.path.islink(root.joinpath(*parts[: n + 1])) for n in range(len(parts)))

    @staticmethod
    def _links(root: Path) -> list[str]:
        """The links under topics/ named like memory files (a write's way out, if any)."""
        folder = root / "topics"
        if not folder.is_dir() or folder.is_symlink():
            return []
        return sorted(f"topics/{p.name}" for p in folder.iterdir() if p.is_symlink() and is_memory_name(p.name))

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
        before = self._tree(host, "HEAD")  # this host's tree before the sync: every write of it is committed
        code, message, out = self._sync(host, cli)
        self.trail.append(f"host{host} sync{' (cli)' if cli else ''}: {'ok' if code == 0 else message}")
        outcome = "merged" if code == 0 else ("held" if "accept" in message else "refused")
        for action in actions:
            self.tally.outcomes.setdefault(action, Counter())[outcome] += 1
        outputs = [out, message]
        remedy: dict[str, bool] = {}  # the remedies named so far, together (a refusal and a held fsmem.yaml)
        ours: dict[str, tuple[str, str]] = {}
        theirs: dict[str, tuple[str, str]] = {}
        if code != 0:  # what this host held, and what the remote's tip holds, before any remedy
            ours, theirs = self._tree(host, "HEAD"), self._tree(host, "refs/remotes/origin/main")
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
        now = self._tree(host, "HEAD")
        if remedy.get("repair"):
            for path, (mode, _) in ours.items():
                if mode == "100644" and path in theirs and path not in now and is_memory_name(path):
                    self.fail("repair", host, f"--repair deleted {path}, which this host held and the remote changed")
        self._judge_where_paths_lead(host, before, now)
        self.tally.kept += sum(line.startswith("kept ") for text in outputs for line in text.splitlines())
        return outputs

    def _judge_where_paths_lead(
        self, host: int, before: dict[str, tuple[str, str]], now: dict[str, tuple[str, str]]
    ) -> None:
        """A remote cannot make a file of this host a link (the honest hosts make no links): a regular file in this
        host's HEAD before the sync is no link after it, in HEAD or on disk, and no folder on its way became a link.
        A link a remote re-points is taken, as any one-sided change: not judged here."""
        root = self.roots[host]
        for path, (mode, _) in before.items():
            if not mode.startswith("100"):
                continue
            after = now.get(path)
            if after is not None and after[0] == LINK:
                target = self._target(host, after[1])
                self.fail("leads", host, f"{path} was a file; the sync made it a link to {target}")
            full = root / path
            if full.is_symlink():
                self.fail("leads", host, f"{path} was a file; on disk it is a link to {os.readlink(full)}")
            folder = path.rpartition("/")[0]
            if folder and self._through_link(root, folder):
                self.fail("leads", host, f"{path} was a file; a folder on its way is a link after the sync")

    def _target(self, host: int, oid: str) -> str:
        return run(self.roots[host], "git", "cat-file", "blob", oid).decode("utf-8", "surrogateescape")

    def _tree(self, host: int, rev: str) -> dict[str, tuple[str, str]]:
        """path -> (mode, object id) of every entry of `rev` in this host's repository (empty when there is no
        such rev)."""
        done = subprocess.run(
            ["git", "ls-tree", "-r", "-z", "--full-tree", rev], cwd=self.roots[host], capture_output=True, env=env()
        )
        found = {}
        for line in done.stdout.split(b"\0"):
            if line:
                head, name = line.split(b"\t", 1)
                mode, _, oid = head.decode().split(" ")
                found[name.decode("utf-8", "surrogateescape")] = (mode, oid)
        return found

    @staticmethod
    def _flags(remedy: dict[str, bool]) -> str:
        return "".join(f" --{name.replace('_', '-')}" for name in remedy)

    def _sync(self, host: int, cli: bool, **remedy: bool) -> tuple[int, str, str]:
        from fsmem.errors import FsmemError

        if cli:
            # the CLI's entry point and its one error boundary (exit code, one line on stderr): the run's first
            # as a process, the others in this process (tests/cli_runner.py: the same bytes, a second less each)
            self.tally.cli_syncs += 1
            flags = [f"--{name.replace('_', '-')}" for name in remedy]
            face = cli_runner.real if self.tally.cli_syncs == 1 else cli_runner.run
            done = face(["--root", str(self.roots[host]), "sync", *flags], text=True, env=env(), timeout=300)
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
        trail = "\n  ".join(self.trail[-24:])
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
                    head = data[: data.find(b"\n---", 3)] if data.startswith(b"---") else b""
                    if b"\nconsolidated: sha256-" in head and not rel.startswith(("sessions/", "archive/")):
                        self.fail("notes", host, f"{rel}: a document consolidation marked as a note it took")
                    self._judge_file(host, rel, listed, reported)
        self._judge_untracked(host, root, listed, reported)
        self._judge_marks(host, root, listed, reported)
        problems = names_problems(on_disk + self._head_names(root))
        if problems:
            self.fail("names", host, "; ".join(problems[:4]))
        outputs += self._reads(memory, root)
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

    def _reads(self, memory, root: Path) -> list[str]:
        """What fsmem answers when asked for the secret, and through every link named like a memory file."""
        from fsmem.errors import FsmemError

        answers = [memory.grep(SECRET, fixed_strings=True).to_text()]
        for rel in self._links(root):
            try:
                answers.append(memory.read(rel).to_text())
            except FsmemError as refused:
                answers.append(str(refused))
        return answers

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

    def _visible(self, rel: str, listed: set[str], reported: dict[str, list[str]]) -> bool:
        document = rel[: -len(".history.md")] + ".md" if rel.endswith(".history.md") else None
        return rel in listed or rel in reported or document in listed

    def _judge_untracked(self, host: int, root: Path, listed: set[str], reported: dict[str, list[str]]) -> None:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--others", "--exclude-standard"], cwd=root, capture_output=True, env=env()
        ).stdout
        for name in out.split(b"\0"):
            rel = name.decode("utf-8", "surrogateescape")
            if rel and not self._visible(rel, listed, reported):
                self.fail(
                    "files", host, f"{rel}: a file git does not track, neither listed by ls nor reported by check"
                )

    def _judge_marks(self, host: int, root: Path, listed: set[str], reported: dict[str, list[str]]) -> None:
        """Every honest write's mark that HEAD holds is in some file ls lists or check names (INDEX.md aside)."""
        if not self.marks:
            return
        patterns = [arg for mark in self.marks for arg in ("-e", mark)]
        out = subprocess.run(
            ["git", "grep", "-z", "-o", "-I", "-F", "-w", *patterns, "HEAD", "--", ".", ":(exclude)INDEX.md"],
            cwd=root,
            capture_output=True,
            env=env(),
        ).stdout
        holders: dict[str, set[str]] = {}
        at = 0
        while at < len(out):  # `HEAD:PATH\0MARK\n`, a path that may hold a newline
            name_end = out.index(b"\0", at)
            line_end = out.index(b"\n", name_end)
            rel = out[at:name_end].decode("utf-8", "surrogateescape").removeprefix("HEAD:")
            holders.setdefault(out[name_end + 1 : line_end].decode(), set()).add(rel)
            at = line_end + 1
        for mark, paths in sorted(holders.items()):
            if not any(self._visible(rel, listed, reported) for rel in paths):
                self.fail(
                    "hidden",
                    host,
                    f"host{self.marks[mark]}'s write {mark} is in HEAD only in {sorted(paths)}, which ls does not "
                    "list and check does not report",
                )

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
WRITES = ("note", "write", "rewrite", "edit", "mv", "rm", "consolidate")
CLI_EVERY = 10  # one sync in so many runs as `fsmem sync` (exit code, one line on stderr); the others in-process


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
            cli=st.integers(0, CLI_EVERY - 1),
        )
        def round(self, pushes: list[int], picks: list[int], writes: list[tuple[int, int]], first: int, cli: int):
            """The hostile host pushes, each honest host writes, then both sync (one in CLI_EVERY on the CLI)."""
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
