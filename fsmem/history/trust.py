"""The trust boundary of `fsmem sync`: what a remote may change on this host, judged before anything is merged.

A remote is another host's word, and that host may be buggy or hostile. After the fetch, and before
`git merge` touches the work tree, the commits the fetch brought are read with plumbing (`git diff-tree`
from the merge base to the fetched tip: each path with its mode and object) and judged here, once:

- memory files, and the files the memory does not own (the rest of an enclosing repository,
  `.obsidian/`, attachments), pass as git would pass them;
- `.gitattributes` and `.gitignore` are fsmem's own: a remote's change to them is never taken (the
  merge takes a commit on top of the remote's that holds them as fsmem writes them);
- a regular file of this host that the remote makes a symbolic link stays this host's file in the commit
  on top, said in a line (`link_conflicts.host_keeps`); a link it re-points is taken, as any change;
- a change to fsmem.yaml is shown and held until a person accepts it (`fsmem.history.trust_config`);
- refused, naming the commit and the file: fsmem.yaml removed, anything under `.fsmem/`, a submodule, a
  name fsmem or git refuses (`fsmem.store.paths`, `incoming.git_refuses`), a name new to this host that a
  Windows or macOS copy cannot hold, a generated or control file as a link or a folder. `fsmem sync --repair` then merges
  without them: a commit on top keeps this host's version of each.

Then the tree the merge would make (this host's, with every incoming change in it) is judged whole
(`judge_whole`): every link in it, whichever commit last changed it, must lead inside the memory to
memory (`incoming.link_problem`, which `fsmem check` uses too), and no new name may be a twin of another.

This module is long because it is the one boundary: the judgement per path, the judgement of the whole
tree, and the repair of both read the same state, and a reader must see every rule a remote meets in one
place.

Whatever a tree says, `$GIT_DIR/info/attributes` (host-local, and above every `.gitattributes` in git's
precedence) keeps memory files and fsmem's own files byte for byte, unfiltered, on fsmem's merge driver.
`sync --setup` checks what `git clone` already put on disk the same way (`repair_clone`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from fsmem import faces
from fsmem.config import CONFIG_FILE, MAX_CONFIG_BYTES, STATE_DIR, Config, parse_config
from fsmem.config.parse import decoded
from fsmem.errors import ConfigError, ConfigHeld, HistoryError, PathEscape, SyncRefused
from fsmem.format.portable import portable_problem, twin_key, twin_problem
from fsmem.history import journal, link_conflicts, trust_config
from fsmem.history.host_rules import (
    CONTROL,
    canonical,
    canonical_id,
    is_fsmem_alone,
    with_fsmem_lines,
    write_info_attributes,
)
from fsmem.history.incoming import (
    GONE,
    LINK,
    SUBMODULE,
    Change,
    Tree,
    diff,
    git_refuses,
    is_control_name,
    is_generated,
    link_problem,
    links,
    name_problem,
    raw_entries,
    tree_id,
)
from fsmem.history.repo import Repo
from fsmem.history.trees import BLOB_MODES, FILE_MODE, TREE_MODE, Entry, TreeEditor
from fsmem.history.trust_record import clear, load, save
from fsmem.store import beneath
from fsmem.store.paths import shown

MAX_CONTROL_BYTES = 1 << 20  # a .gitignore or .gitattributes larger than this is no one's rules


@dataclass
class Refusal:
    """One path refused, and why. `status` is git's (A added, M changed) or WHOLE: the merged tree breaks an
    invariant there, whichever commit changed it; `drop`: the repair removes it rather than keep this host's."""

    path: str
    shown: str
    reason: str
    status: str
    commit: str = ""
    drop: bool = False

    def text(self) -> str:
        if self.status == WHOLE:
            return f"with commit {self.commit[:12]}, {self.shown} would be {self.reason}"
        verb = "adds" if self.status == "A" else "changes"
        return f"commit {self.commit[:12]} {verb} {self.shown}, {self.reason}"


WHOLE = "W"


@dataclass
class Admitted:
    """What a sync merges: the remote's tip, or a commit on top of it; and what the boundary did."""

    tip: str
    notes: list[str] = field(default_factory=list)


# -- the boundary -----------------------------------------------------------------------------------------
def admit(repo: Repo, theirs: str, label: str, *, accept_config: bool = False, repair: bool = False) -> Admitted:
    """Judge what `theirs` brings (since the merge base with HEAD) and say what to merge: SyncRefused or
    ConfigHeld when it crosses the boundary, nothing merged or pushed; otherwise the tip to merge."""
    write_info_attributes(repo)
    found = repo.reader.get(theirs)
    if found is None or found[1] != "commit":
        raise HistoryError(f"{label} names no commit")
    other = found[0]
    head, head_tree = repo.head(repo.reader)
    base = (repo.git.text("merge-base", head, other, check=False).strip() or None) if head else None
    if head == other or base == other:
        clear(repo)
        return Admitted(other)  # nothing new from the remote
    judged = _Judgement(repo, label, (other, tree_id(found[2])), (head, head_tree), base)
    changes = diff(repo, judged.base_tree, judged.other_tree)
    for change in changes:
        judged.judge(change)
    judged.judge_whole(changes)
    judged.keep()
    if judged.refused and not repair:
        judged.name_commits()
        record: dict[str, object] = {"remote": label, "refused": [vars(item) for item in judged.refused]}
        held = judged.held_too(accept_config)
        if held:  # the refusal and the held fsmem.yaml in one message: one run of the repair takes both
            record["held"] = held
        save(repo, record)
        first = judged.refused[0].text()
        more = len(judged.refused) - 1
        them = "it" if not more else "them"
        checking = faces.call("check")
        also = (
            f"; it also changes {CONFIG_FILE} ({trust_config.listed(judged.config_changes)}), held until a person "
            "accepts it"
            if held
            else ""
        )
        call = faces.call("sync", repair=True, accept_config=True) if held else faces.call("sync", repair=True)
        raise SyncRefused(
            f"{label} is refused: {first}{f' and {more} more ({checking} lists them)' if more else ''}{also}; "
            f"nothing was merged or pushed. Repair: {call} merges {label} without {them}"
            f"{f' and takes its {CONFIG_FILE}' if held else ''} (a commit on top "
            f"keeps this host's version; its push repairs the remote for every host)"
        )
    if judged.refused:
        judged.repair()
    if judged.config is not None:
        judged.settle_config(accept_config)
    clear(repo)
    if not judged.edits:
        return Admitted(other, judged.notes)
    return Admitted(judged.commit_on_top(), judged.notes)


class _Judgement:
    """The incoming changes judged one by one, and what follows: refusals, edits on top, a config change."""

    def __init__(
        self, repo: Repo, label: str, other: tuple[str, str], head: tuple[str | None, str | None], base: str | None
    ):
        self.repo, self.label, self.base = repo, label, base
        self.other, self.other_tree = other
        self.head = head[0]
        base_commit = repo.reader.get(base) if base else None
        self.base_tree = tree_id(base_commit[2]) if base_commit else None
        self.theirs = Tree(repo, self.other_tree)
        self.ours = Tree(repo, head[1])
        self.refused: list[Refusal] = []
        self.edits: dict[str, Entry | None] = {}
        self.kept: dict[str, Entry] = {}  # this host's files whose incoming link `host_keeps` does not take
        self.incoming = self.theirs  # this host's tree with every incoming change (judge_whole makes it)
        self.notes: list[str] = []
        self.config: Change | None = None
        self.config_changes: list[trust_config.SettingChange] = []
        self._alone: dict[str, bool] = {}

    def refuse(self, change: Change, rel: str | None, reason: str) -> None:
        self.refused.append(Refusal(change.path, shown(rel if rel is not None else change.path), reason, change.status))

    def judge(self, change: Change) -> None:
        repo = self.repo
        rel = repo.in_memory(change.path)
        if rel is None:  # the rest of an enclosing repository: as git would take it, but for what git refuses
            if change.mode != GONE and repo.prefix.startswith(change.path + "/"):
                self.refuse(change, None, "a file, link or submodule where the folder that holds the memory is")
            elif change.mode != GONE and any(git_refuses(part, change.mode) for part in change.path.split("/")):
                self.refuse(change, None, "a name git refuses to check out (.git in one of its spellings)")
            return
        top = rel.split("/")[0].casefold()
        if change.mode == GONE:
            if rel == CONFIG_FILE:
                self.read_config(change)
            elif rel in CONTROL:
                self.keep_control(rel, f"{rel}: {self.label} removes it; kept as fsmem makes it")
            return
        problem = name_problem(rel, change.mode) or self.portable_problem(change.path, rel)
        if problem:
            self.refuse(change, rel, problem)
        elif any(part.casefold() == STATE_DIR for part in rel.split("/")):
            self.refuse(change, rel, f"fsmem's machine state ({STATE_DIR}/ is never tracked)")
        elif change.mode == SUBMODULE:
            self.refuse(change, rel, "a submodule (a link to another repository), which a memory never holds")
        elif folder := next((f for f in _folders_of(rel) if is_generated(f) or f in CONTROL), None):
            self.refuse(change, rel, f"{shown(folder)} as a folder: fsmem writes that file itself")
        elif change.mode == LINK and (rel in CONTROL or is_generated(rel) or top == CONFIG_FILE):
            self.refuse(change, rel, "as a symbolic link: fsmem writes this file itself, and never through a link")
        elif change.mode == LINK and self.theirs.link(change.oid) is None:
            self.refuse(change, rel, "a symbolic link whose target is not a plain path")
        elif change.mode == LINK and (ours := self.ours.entry(change.path, folders=True)) and ours[0] == TREE_MODE:
            self.refuse(change, rel, "a symbolic link where this host has a folder (it would hide the files in it)")
        elif top == CONFIG_FILE and rel != CONFIG_FILE:
            self.refuse(change, rel, f"{CONFIG_FILE} in another spelling or as a folder, which fsmem never takes")
        elif rel == CONFIG_FILE:
            if change.mode not in BLOB_MODES:
                self.refuse(change, rel, f"{CONFIG_FILE} as something other than a plain file")
            else:
                self.read_config(change)
        elif rel in CONTROL:
            self.judge_control(change, rel)
        elif is_control_name(rel) and self.fsmem_alone(rel.rsplit("/", 1)[-1].lower()):
            self.edits[change.path] = None
            self.notes.append(f"{shown(rel)}: {self.label} adds it; left out (fsmem writes its own at the root only)")
        elif change.mode == LINK and (mine := self.ours.entry(change.path)) is not None:
            if link_conflicts.host_keeps(mine, (LINK, change.oid)):  # this host's file stays its file
                self.kept[change.path] = mine

    def judge_control(self, change: Change, rel: str) -> None:
        """A remote's `.gitattributes` or `.gitignore` at the root. Where this host's holds fsmem's lines alone
        (a memory of its own), a change is never taken: it stays as fsmem writes it, the same bytes on every
        host. Where it also holds a project's or a vault's lines, the remote's is taken as git takes it, with
        fsmem's lines added back if it dropped them. Either way host_rules' info/attributes decides how
        memory files are stored and merged."""
        if self.fsmem_alone(rel):
            if change.oid != canonical_id(self.repo, rel):
                self.keep_control(rel, f"{rel}: {self.label} changed it; kept as fsmem makes it (fsmem's own file)")
            return
        theirs = self.theirs.blob(change.oid, MAX_CONTROL_BYTES)
        if theirs is None:
            self.refuse(change, rel, f"larger than {MAX_CONTROL_BYTES // 1024} KiB, which fsmem does not take")
            return
        kept = with_fsmem_lines(rel, theirs)
        if kept != theirs:
            self.edits[change.path] = (FILE_MODE, self.repo.store.write("blob", kept))
            self.notes.append(f"{rel}: {self.label} dropped fsmem's lines from it; taken with them added back")

    def fsmem_alone(self, name: str) -> bool:
        """Whether this host's `name` at the root (HEAD's) holds fsmem's lines alone: a memory of its own."""
        if name not in self._alone:
            ours = self.ours.entry(self.repo.in_repo(name))
            mine = self.ours.blob(ours[1], MAX_CONTROL_BYTES) if ours and ours[0] in BLOB_MODES else None
            self._alone[name] = is_fsmem_alone(mine, name)
        return self._alone[name]

    def keep_control(self, rel: str, note: str) -> None:
        self.edits[self.repo.in_repo(rel)] = (FILE_MODE, self.repo.store.write("blob", canonical(rel)))
        self.notes.append(note)

    def portable_problem(self, path: str, rel: str) -> str | None:
        """Why a name new to this host cannot be held by a Windows or macOS copy (`fsmem.format.portable`); names
        already here pass (`fsmem check` reports them with their rename)."""
        parts, inside = path.split("/"), len(path.split("/")) - len(rel.split("/"))
        for number in range(inside, len(parts)):
            if self.ours.entry("/".join(parts[: number + 1]), folders=True) is not None:
                continue
            problem = portable_problem(parts[number])
            if problem:
                return f"a name a Windows or macOS copy cannot hold (it {problem})"
        return None

    def judge_whole(self, changes: list[Change]) -> None:
        """The invariants of the tree the merge would make (this host's, with every incoming change in it),
        checked whole: every link in the memory leads, inside it, to a memory file or folder; and no name new to
        this host is a twin of another in its folder. A link already wrong on this host is `check`'s to report.
        Where this host keeps its own file (`self.kept`), the tree with it is judged too: what the incoming
        changes alone would break is refused all the same."""
        editor = TreeEditor(self.repo.read_tree, self.repo.write_tree, self.ours.tree)
        for change in changes:
            editor.put(change.path, None if change.mode == GONE else (change.mode, change.oid))
        self.incoming = merged = Tree(self.repo, editor.write())
        trees = [merged]
        if self.kept:
            for path, entry in self.kept.items():
                editor.put(path, entry)
            trees.append(Tree(self.repo, editor.write()))
        judged = {item.path for item in self.refused}
        changed = {change.path for change in changes if change.mode != GONE}
        for number, tree in enumerate(trees):
            for path, oid in links(self.repo, tree.tree):
                rel = self.repo.in_memory(path)
                if rel is None or path in judged:
                    continue
                problem = self.link_problem(tree, path, oid)
                if problem is None:
                    continue
                ours = self.ours.entry(path)
                if self.head and ours == (LINK, oid) and self.link_problem(self.ours, path, oid) is not None:
                    continue  # as wrong before this sync: check reports it
                incoming = path in changed and not (number and path in self.kept)  # the incoming entry is there
                status = ("A" if ours is None else "M") if incoming else WHOLE
                drop = ours is not None and ours[0] == LINK  # this host's own version of it is a link: none kept
                self.refused.append(Refusal(path, shown(rel), problem, status, drop=drop))
                judged.add(path)
        for change in changes:
            if change.mode != GONE and self.repo.in_memory(change.path) is not None:
                self.twin_check(merged, change)

    def keep(self) -> None:
        """Each file `host_keeps` kept that is not refused: this host's file in the commit on top, said in a line."""
        refused = {item.path for item in self.refused}
        for path, ours in self.kept.items():
            if path not in refused:
                self.edits[path] = ours
                self.notes.append(link_conflicts.kept_note(self.repo, path, self.incoming, self.label))

    def twin_check(self, merged: Tree, change: Change) -> None:
        parts = change.path.split("/")
        rel_parts = (self.repo.in_memory(change.path) or "").split("/")
        for number in range(len(parts) - len(rel_parts), len(parts)):
            here = "/".join(parts[: number + 1])
            if any(item.path in (here, change.path) for item in self.refused):
                return  # said once, for the first name that breaks it
            if self.ours.entry(here, folders=True) is not None:
                continue
            folder = "/".join(parts[:number])
            entry = merged.entry(folder, folders=True) if folder else (TREE_MODE, merged.tree or "")
            if entry is None or entry[0] != TREE_MODE:
                return
            key = twin_key(parts[number])
            for name in self.repo.read_tree(entry[1]):
                if name != parts[number] and twin_key(name) == key:
                    where = self.repo.in_memory(f"{folder}/{name}" if folder else name) or name
                    reason = "a name a Windows or macOS copy cannot hold (it " + twin_problem(
                        parts[number], name, shown(where)
                    )
                    self.refused.append(Refusal(here, shown(self.repo.in_memory(here) or here), reason + ")", "A"))
                    return

    def link_problem(self, tree: Tree, path: str, oid: str) -> str | None:
        return link_problem(self.repo, tree, path, oid)

    def read_config(self, change: Change) -> None:
        """Parse the remote's fsmem.yaml (a refusal when it cannot be read) and list the settings it changes."""
        ours = self.ours.entry(change.path)
        theirs = change.oid if change.mode != GONE else None
        if self.head is None or theirs == (ours[1] if ours else None):
            return  # the first commits a clone takes are the ones a person chose to clone; or nothing changes here
        if theirs is None:  # no fsmem.yaml, no memory: every command would stop here, the sync that could undo it too
            self.refuse(change, CONFIG_FILE, "which it removes (without it this folder is no fsmem memory)")
            return
        where = f"{self.label}'s {CONFIG_FILE}"
        data = self.theirs.blob(theirs, MAX_CONFIG_BYTES)
        try:
            if data is None:
                raise ConfigError(f"{where} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
            new = parse_config(data, where)
        except ConfigError as exc:
            self.refuse(change, CONFIG_FILE, f"which cannot be read ({exc})")
            return
        try:  # a file this host would refuse to load would stop every command here once taken
            Config.checked(new, where, lambda: decoded(data or b"", where))
        except ConfigError as exc:
            self.refuse(change, CONFIG_FILE, f"which this host's fsmem does not take ({exc})")
            return
        old_tree = Tree(self.repo, self.base_tree) if self.base else self.ours
        old_entry = old_tree.entry(change.path)
        old_data = old_tree.blob(old_entry[1], MAX_CONFIG_BYTES) if old_entry else b""
        try:
            old = parse_config(old_data, CONFIG_FILE) if old_data else {}
        except ConfigError:
            old = {}
        self.config_changes = trust_config.changes(old, new)
        self.config = change if self.config_changes else None

    def held_too(self, accept_config: bool) -> dict[str, Any] | None:
        """The remote's fsmem.yaml change, as a held record, when it would be held too (beside a refusal)."""
        if self.config is None:
            return None
        found = self.config_changes
        shown_before = (load(self.repo).get("held") or {}).get("blob")
        policy = self.repo.git.text("config", "--get", trust_config.ACCEPT_KEY, check=False).strip().lower()
        accepted = accept_config and shown_before == self.config.oid
        if trust_config.decide(found, policy=policy, accepted=accepted).take:
            return None
        return {"blob": self.config.oid, "commit": self.other, "changes": [change.text() for change in found]}

    def settle_config(self, accept_config: bool) -> None:
        """Take the remote's fsmem.yaml (said in the notes) or hold it: ConfigHeld, recorded for `fsmem check`."""
        assert self.config is not None
        found, blob = self.config_changes, self.config.oid
        shown_before = (load(self.repo).get("held") or {}).get("blob")
        policy = self.repo.git.text("config", "--get", trust_config.ACCEPT_KEY, check=False).strip().lower()
        decision = trust_config.decide(found, policy=policy, accepted=accept_config and shown_before == blob)
        if decision.take:
            self.notes.append(
                f"{CONFIG_FILE}: took {self.label}'s change of {trust_config.listed(found)}, {decision.why}"
            )
            return
        texts = [change.text() for change in found]
        save(self.repo, {"remote": self.label, "held": {"blob": blob, "commit": self.other, "changes": texts}})
        again = accept_config and shown_before is not None
        raise ConfigHeld(trust_config.held_message(self.label, str(self.repo.root), found, decision, again=again))

    def name_commits(self) -> None:
        """Each refused path gets the newest incoming commit that set it, from one walk of those commits."""
        wanted = {item.path for item in self.refused}
        found: dict[str, str] = {}
        commits = self.repo.git.run("rev-list", self.other, *(["--not", self.head] if self.head else [])).stdout
        proc = self.repo.git.run(
            "diff-tree", "--stdin", "-r", "-z", "--raw", "--no-renames", "-m", "--root", input=commits
        )
        current = ""
        for header, path in raw_entries(proc.stdout):
            if path is None:
                current = header
            elif path in wanted and path not in found:
                found[path] = current
        for item in self.refused:
            item.commit = found.get(item.path, self.other)

    def repair(self) -> None:
        """--repair: each refused path as this host has it (gone when it has none), in the commit on top."""
        for item in self.refused:
            rel = self.repo.in_memory(item.path)
            if rel in CONTROL and self.fsmem_alone(rel):
                self.keep_control(rel, f"{rel}: kept as fsmem makes it")
            elif item.drop:
                self.edits[item.path] = None
            else:
                self.edits[item.path] = self.ours.entry(item.path, folders=True)
            if rel == CONFIG_FILE:
                self.config = None
        names = ", ".join(item.shown for item in self.refused[:5]) + (
            f" and {len(self.refused) - 5} more" if len(self.refused) > 5 else ""
        )
        self.notes.append(
            f"repaired {self.label}: {names} kept as this host has them, in a commit on top; the push sends it"
        )

    def commit_on_top(self) -> str:
        editor = TreeEditor(self.repo.read_tree, self.repo.write_tree, self.other_tree)
        done: list[str] = []
        for path in sorted(self.edits):
            if not any(path.startswith(folder + "/") for folder in done):
                editor.put(path, self.edits[path])
                done.append(path)
        tree = editor.write()
        now = journal.clock()
        stamp = f"{int(now.timestamp())} {now.strftime('%z') or '+0000'}"
        who = f"fsmem sync <fsmem@{self.repo.host}> {stamp}"
        message = f"fsmem sync: {self.label} as this host takes it\n\n" + "\n".join(self.notes)
        body = f"tree {tree}\nparent {self.other}\nauthor {who}\ncommitter {who}\n\n{message}\n"
        return self.repo.store.write("commit", body.encode("utf-8", "surrogateescape"))


def _folders_of(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[: number + 1]) for number in range(len(parts) - 1)]


# -- setup: what `git clone` put on disk ------------------------------------------------------------------------
def repair_clone(repo: Repo, author: journal.Author, notes: list[str]) -> None:
    """HEAD as `git clone` made it, judged as a remote's commits are; what is refused is removed from the history
    (one commit) and from disk where it is as the clone wrote it. Caller holds the commit lock."""
    from fsmem.history import worktree

    head, tree = repo.head(repo.reader)
    if head is None or tree is None:
        return
    judged = _Judgement(repo, "this clone", (head, tree), (None, tree), None)
    changes = diff(repo, None, tree)
    for change in changes:
        judged.judge(change)
    judged.judge_whole(changes)
    if not judged.refused:
        return
    blobs: dict[str, str | None] = {}
    for item in judged.refused:
        if repo.in_memory(item.path) in CONTROL:
            continue  # rewritten on disk and committed by setup as fsmem's own
        blobs[item.path] = None
        full = repo.top / item.path
        entry = judged.theirs.entry(item.path)
        as_cloned = os.path.islink(full) or (
            full.is_file() and entry is not None and repo.store.id_of("blob", full.read_bytes()) == entry[1]
        )
        if name_problem(repo.in_memory(item.path) or item.path) is None and as_cloned:
            # what git clone wrote, removed below the clone's top through no link; a file this host has changed
            # since stays, untracked, and so does one a folder swapped for a link now leads to
            with contextlib.suppress(PathEscape, FileNotFoundError):
                beneath.remove(repo.top, item.path, generated=True)
        notes.append(f"{item.shown}: {item.reason}; removed from this clone's history and disk")
    if not blobs:
        return
    removed = ", ".join(sorted(repo.in_memory(path) or path for path in blobs))
    worktree.commit_blobs(
        repo, blobs, author, f"history set up: removed what fsmem never takes from a remote: {removed}"
    )
    # the clone's checkout stopped at a name git refuses: its index lacks what HEAD holds (fsmem.yaml aside, which
    # Memory.setup_clone checked out so that the clone could be opened at all)
    if repo.git.run("diff-index", "--cached", "--quiet", "HEAD", "--", check=False).returncode:
        repo.git.run("read-tree", "--reset", "-u", "HEAD")
        notes.append("checked out the files the clone could not (its checkout had stopped at a refused name)")
