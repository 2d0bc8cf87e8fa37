"""Every change a commit: the journal of pending writes, and the committer that turns them into commits.

A write, still under the write lock, stores what the file held just before
and just after it as git blobs and adds one entry to
`.fsmem/history/journal/`: the agent, the time, a message and those blob ids.
Then, without waiting, the writer tries the commit lock. Whoever holds it
commits every pending entry, one commit per write (author: the agent, dated
when it wrote), on top of HEAD, moves the branch once for all of them with a
compare-and-swap (`git update-ref HEAD NEW OLD`, so a commit made meanwhile by
a human or a sync is never lost: the batch is rebuilt on it), points the index
at the committed blobs (or `git status` would lie; `fsmem.history.recovery`), and removes the entries. A
writer that finds the lock taken returns at once; the holder looks at the
journal again before it lets go. A burst of writes thus costs each writer one
journal entry, and the repository one branch update per batch.

This module is long because the journal's entries and the committer that consumes them share one
on-disk format and one lock protocol; split, each half would restate the other's.

Changes made outside fsmem are never folded into an agent's commit: when HEAD
does not hold, at a path, what the file held just before fsmem wrote it, that
difference is committed first, on its own, as made outside fsmem (by the
clone's git user). `commit_outside` does the same for files no fsmem write
touched, from `git status`, before consolidation and sync.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import os
import random
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fsmem import format as fmt
from fsmem.config import STATE_DIR
from fsmem.errors import FsmemError, HistoryError, LockTimeout
from fsmem.history import recovery
from fsmem.history.git_env import clean_env
from fsmem.history.repo import Repo
from fsmem.history.trees import LINK_MODE, TreeEditor
from fsmem.state_files import NOT_A_FILE, read_state
from fsmem.store.files import Stored, atomic_write, file_lock
from fsmem.store.paths import open_regular
from fsmem.store.rg_command import LEFT_OUT_LIMIT
from fsmem.store.writing import Change

COMMIT_LOCK = "commit"
BATCH = 500  # entries per branch update
MAX_ATTEMPTS = 40  # compare-and-swap attempts before giving up (the entries stay for the next writer)
GC_EVERY = 256  # commits between two `git gc --auto` runs (plumbing never triggers it)
DEFAULT_AGENT = "default"
_UNSAFE = re.compile(r"[<>\n\r\x00-\x1f\x7f]")
_sequence = itertools.count()
_PREPARED = re.compile(r"\.\d{20}-\d+-\d{6}")  # "." + an entry's name: prepared, not yet pending

Author = tuple[str, str]


@dataclass
class Entry:
    """One pending write: who, when (unix seconds and UTC offset in minutes), what, and its blobs per path."""

    name: str
    agent: str
    message: str
    time: int
    offset: int
    changes: list[tuple[str, str | None, str | None]]  # repository path, blob before, blob after
    links: list[str] = field(default_factory=list)  # the paths whose blobs (before, after) are a symbolic link's text


def journal_dir(repo: Repo) -> Path:
    return repo.state("journal")


def pending(repo: Repo) -> list[str]:
    """Names of the entries waiting to be committed, oldest first (an entry being prepared starts with '.').

    Looked up without making the folder: a read on a read-only mount asks this too."""
    try:
        return sorted(name for name in os.listdir(Path(repo.root, STATE_DIR, "history", "journal")) if name[0] != ".")
    except (FileNotFoundError, NotADirectoryError):
        return []


def author_of(agent: str | None) -> Author:
    """A git identity for an agent name: the name as given (made safe), and a mail address made from it."""
    name = _UNSAFE.sub(" ", agent or "").strip() or DEFAULT_AGENT
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or DEFAULT_AGENT
    return name, f"{slug}@fsmem"


def record(repo: Repo, agent: str | None, message: str, changes: Iterable[Change]) -> bool:
    """Store one write's before and after bytes as blobs and add its journal entry; False when nothing changed."""
    name = prepare(repo, agent, message, changes)
    if name is None:
        return False
    publish(repo, name)
    return True


def prepare(
    repo: Repo, agent: str | None, message: str, changes: Iterable[Change], *, name: str | None = None
) -> str | None:
    """`record`, before the write it records: the entry is stored under a name the committer passes over,
    and becomes pending only when `publish`ed after the write (`withdraw`n if the write fails). Returns that
    name, or None when nothing changes. Raises what the disk refused (blobs or entry): then the write must not
    be made, so that a write and its history fail together. Given the `name` of an entry prepared already, it is
    replaced (a write that learnt of one more change while it wrote: an undo's INDEX.md)."""
    items: list[list[str | None]] = []
    links: list[str] = []
    for change in changes:
        before, after = _blob(repo, change.before), _blob(repo, change.after)
        if before != after:
            items.append([repo.in_repo(change.path), before, after])
            if change.link:
                links.append(repo.in_repo(change.path))
    if not items:
        return None
    now = clock()
    offset = int((now.utcoffset() or _dt.timedelta()).total_seconds() // 60)
    entry = {"agent": author_of(agent)[0], "message": message, "time": int(now.timestamp()), "offset": offset}
    entry["changes"] = items
    if links:  # a link moved or removed: committed as a link (git's mode 120000), not as a file holding its text
        entry["links"] = links
    name = name or f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence):06d}"
    # not fsynced, as git fsyncs none of its objects or refs by default: atomic for readers and for a killed
    # process; a power cut may lose it, and then the change is committed as one made outside fsmem
    journal_dir(repo)
    data = json.dumps(entry, ensure_ascii=False).encode("utf-8")
    atomic_write(journal_dir(repo) / ("." + name), data, durable=False, root=repo.root, generated=True)
    return name


def _blob(repo: Repo, data: bytes | Stored | None) -> str | None:
    """The blob id of one side of a change: stored now from its bytes, or already stored (a restore's)."""
    if data is None or isinstance(data, Stored):
        return None if data is None else data.oid
    return repo.store.write("blob", data)


def publish(repo: Repo, name: str) -> None:
    """Make a prepared entry pending: the write it records is done (a rename: it needs no room on the disk)."""
    os.replace(journal_dir(repo) / ("." + name), journal_dir(repo) / name)


def withdraw(repo: Repo, name: str) -> None:
    """Drop a prepared entry whose write was not made."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal_dir(repo) / ("." + name))


def _prepared(repo: Repo) -> list[str]:
    """Names of the entries prepared and neither published nor withdrawn (without their '.'), oldest first."""
    try:
        found = os.listdir(Path(repo.root, STATE_DIR, "history", "journal"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(name[1:] for name in found if _PREPARED.fullmatch(name))


def adopt(repo: Repo) -> None:
    """Entries a writer killed between `prepare` and `publish` left: each is made pending when every file it names
    holds the bytes it records after the write (the write was made: it is committed as its writer's, not later as
    a change made outside fsmem). A write of many files killed part way (a folder's delete, clear_all_memory), each
    file holding its bytes before or after, is committed as what it did: the entry keeps the files it changed.
    Otherwise it is withdrawn (the write was not made, or a file changed since: a change the next commit finds).
    Only under the write lock, taken without waiting: every entry is prepared and published under it, so none
    found then is a live writer's. Best effort: what cannot be done now is left for the next."""
    names = [name for name in _prepared(repo) if name.split("-")[1] != str(os.getpid())]
    if not names:
        return
    with contextlib.suppress(LockTimeout, OSError, FsmemError), file_lock(repo.root, wait=False):
        for name in names:
            entry = _load(repo, "." + name)
            if entry is None:
                continue
            done = [change for change in entry.changes if _holds(repo, change[0], change[2], change[0] in entry.links)]
            undone = [c for c in entry.changes if c not in done and _holds(repo, c[0], c[1], c[0] in entry.links)]
            if done and len(done) + len(undone) == len(entry.changes):
                if undone:
                    _narrow(repo, entry, done)
                publish(repo, name)
            else:
                withdraw(repo, name)


def _narrow(repo: Repo, entry: Entry, changes: list[tuple[str, str | None, str | None]]) -> None:
    """A prepared entry rewritten to hold only `changes` (those its killed writer made)."""
    data = {"agent": entry.agent, "message": entry.message, "time": entry.time, "offset": entry.offset}
    data["changes"] = [list(change) for change in changes]
    links = [change[0] for change in changes if change[0] in entry.links]
    if links:
        data["links"] = links
    text = json.dumps(data, ensure_ascii=False).encode("utf-8")
    atomic_write(journal_dir(repo) / entry.name, text, durable=False, root=repo.root, generated=True)


def _adopted(repo: Repo) -> bool:
    """`adopt` for a caller that holds no lock (a read asking history): True when an entry became pending."""
    with contextlib.suppress(LockTimeout, OSError, FsmemError), commit_lock(repo, wait=False):
        adopt(repo)
    return bool(pending(repo))


def _holds(repo: Repo, path: str, oid: str | None, link: bool) -> bool:
    """Whether the file at repository path `path` is now the blob `oid` (None: no file there)."""
    rel = repo.in_memory(path)
    if rel is None:
        return False
    full = Path(repo.root, rel)
    try:
        if link or os.path.islink(full):
            data = os.fsencode(os.readlink(full))
            return link and oid is not None and repo.store.id_of("blob", data) == oid
        with open_regular(full) as handle:
            size = os.fstat(handle.fileno()).st_size
            return oid is not None and size <= LEFT_OUT_LIMIT and repo.store.id_of_stream("blob", handle, size) == oid
    except FileNotFoundError:
        return oid is None
    except (OSError, FsmemError):
        return False


def _load(repo: Repo, name: str) -> Entry | None:
    try:
        data = json.loads(read_state(journal_dir(repo) / name))
        return Entry(
            name,
            str(data["agent"]),
            str(data["message"]),
            int(data["time"]),
            int(data.get("offset", 0)),
            [(str(p), b, a) for p, b, a in data["changes"]],
            [str(p) for p in data.get("links", [])],
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in NOT_A_FILE:
            raise
        _aside(repo, name)  # a FIFO or link at an entry's name (read_state): kept aside too
    except (ValueError, KeyError, TypeError):  # a damaged entry: kept aside, never committed half-read
        _aside(repo, name)
    return None


def _aside(repo: Repo, name: str) -> None:
    aside = repo.state("journal-damaged")
    with contextlib.suppress(OSError):
        os.replace(journal_dir(repo) / name, aside / name)


@contextlib.contextmanager
def commit_lock(repo: Repo, wait: bool = True, timeout: float = 120.0):
    with file_lock(repo.root, COMMIT_LOCK, wait=wait, timeout=timeout):
        yield


def commit_lock_held(repo: Repo) -> bool:
    """Whether an fsmem process is committing (holds the commit lock) right now."""
    try:
        with commit_lock(repo, wait=False):
            return False
    except LockTimeout:
        return True


def drain(repo: Repo, *, wait: bool = False) -> int:
    """Commit every pending write; returns the commits made.

    Without `wait`, a caller that finds the commit lock taken returns 0 at
    once (the holder commits its entry); with it, the caller waits its turn.
    """
    made = 0
    if not pending(repo) and not (_prepared(repo) and _adopted(repo)):
        return 0  # nothing to commit: no lock taken, so a read on a read-only mount works
    while True:
        try:
            with commit_lock(repo, wait=wait):
                made += drain_locked(repo)
        except LockTimeout:
            if wait:
                raise
            return made
        if not pending(repo):  # an entry may have come while we held the lock, from a writer that left it to us
            return made
        wait = False


@dataclass
class Gaps:
    """Who made the changes found between two writes to these paths (say, a consolidation run that marked a
    note an agent kept appending to), instead of "outside fsmem"."""

    paths: set[str]
    author: Author
    message: str


def drain_locked(repo: Repo, gaps: Gaps | None = None) -> int:
    """`drain` for a caller that holds the commit lock."""
    recovery.catch_up_index(repo)
    adopt(repo)
    made = 0
    while True:
        names = pending(repo)[:BATCH]
        if not names:
            return made
        entries = [entry for entry in (_load(repo, name) for name in names) if entry is not None]
        entries = [entry for entry in entries if _whole(repo, entry)]
        made += _commit_entries(repo, entries, gaps)
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal_dir(repo) / name)


def _whole(repo: Repo, entry: Entry) -> bool:
    """Every blob the entry names is in the repository; an entry whose blobs a power cut lost is set aside
    (its change is then committed from the file, as made outside fsmem), never committed half."""
    for _, before, after in entry.changes:
        for oid in (before, after):
            if oid is None or repo.store.has_loose(oid):
                continue
            found = repo.sizes.get(oid)  # its type, not its bytes (a restored version may be large)
            if found is None or found[1] != "blob":
                with contextlib.suppress(OSError):
                    os.replace(journal_dir(repo) / entry.name, repo.state("journal-damaged") / entry.name)
                return False
    return True


def _commit_entries(repo: Repo, entries: list[Entry], gaps: Gaps | None = None) -> int:
    outside: list[Author] = []

    def build(editor: TreeEditor, parent: str | None, commit: Callable[..., str]) -> tuple[str | None, int]:
        count = 0
        head = parent
        for entry in entries:
            now = {path: editor.get(path) for path, _, _ in entry.changes}
            if all(now[path] == after for path, _, after in entry.changes) and (
                all(before == after for _, before, after in entry.changes)
                or _committed(repo, head, entry, 3 * len(entries) + 16)
            ):
                continue  # already in HEAD (committed before a crash)
            changed = [(path, before) for path, before, _ in entry.changes if now[path] != before]
            known = [(path, before) for path, before in changed if gaps is not None and path in gaps.paths]
            if known and gaps is not None:
                for path, before in known:
                    _put(editor, path, before, path in entry.links)
                parent = commit(editor, parent, gaps.author, entry.time, entry.offset, gaps.message)
                count += 1
            changed = [item for item in changed if item not in known]
            if changed:
                if not outside:
                    outside.append(repo.outside_author())
                for path, before in changed:
                    _put(editor, path, before, path in entry.links)
                names = ", ".join(repo.in_memory(path) or path for path, _ in changed)
                parent = commit(editor, parent, outside[0], entry.time, entry.offset, f"outside fsmem: {names}")
                count += 1
            for path, _, after in entry.changes:
                _put(editor, path, after, path in entry.links)
            parent = commit(editor, parent, author_of(entry.agent), entry.time, entry.offset, entry.message)
            count += 1
        return parent, count

    paths = sorted({path for entry in entries for path, _, _ in entry.changes})
    return commit_with(repo, build, paths)


def _put(editor: TreeEditor, path: str, oid: str | None, link: bool) -> None:
    """One side of a change into the tree: a link's text as a link (mode 120000), a file's bytes as a file."""
    if oid is not None and link:
        editor.put(path, (LINK_MODE, oid))
    else:
        editor.set(path, oid)


def _committed(repo: Repo, head: str | None, entry: Entry, depth: int) -> bool:
    """Whether `entry`'s own commit is among HEAD's last `depth` (a drain killed after it moved HEAD, before it
    removed the entry), told by the author, time and message `_commit` wrote. HEAD may hold an entry's bytes
    without it: a write that put back what HEAD holds over a hand edit, whose bytes are then committed first."""
    name, mail = author_of(entry.agent)
    author = f"author {name} <{mail}> {entry.time} {_zone(entry.offset)}".encode()
    message = entry.message.rstrip("\n").encode("utf-8")
    commit = head
    for _ in range(depth):
        found = repo.reader.get(commit) if commit else None
        if found is None or found[1] != "commit":
            return False
        header, _, body = found[2].partition(b"\n\n")
        lines = header.split(b"\n")
        if author in lines and body.rstrip(b"\n") == message:
            return True
        commit = next((line[7:].decode() for line in lines if line.startswith(b"parent ")), None)
    return False


def commit_with(
    repo: Repo, build: Callable[[TreeEditor, str | None, Callable[..., str]], tuple[str | None, int]], paths: list[str]
) -> int:
    """Build commits on HEAD with `build` and move the branch to the last one (compare-and-swap, retried on a
    HEAD that moved); then point the index at what was committed for `paths`. Returns the commits made."""
    for attempt in range(MAX_ATTEMPTS):
        head, tree = repo.head(repo.reader)
        editor = TreeEditor(repo.read_tree, repo.write_tree, tree)
        last, count = build(editor, head, lambda *args: _commit(repo, *args))
        if last == head or count == 0:
            # HEAD holds it already: committed by a run killed before it pointed the index (or git status lies)
            recovery.point_index(repo, {path: editor.entry(path) for path in paths})
            return 0
        moved = repo.git.run(
            "update-ref", "-m", f"fsmem: {count} commit(s)", "HEAD", str(last), head or repo.store.zero, check=False
        )
        if moved.returncode == 0:
            recovery.point_index(repo, {path: editor.entry(path) for path in paths})
            _count_commits(repo, count)
            return count
        if b".lock': File exists" in moved.stderr and _locked_for_good(repo):
            raise HistoryError(
                recovery.refusal(repo, recovery.clear_locks(repo), "the writes stay pending, not committed")
            )
        time.sleep(random.uniform(0, min(0.5, 0.005 * 2**attempt)))
    raise HistoryError(f"HEAD kept moving while fsmem committed ({MAX_ATTEMPTS} attempts); the writes stay pending")


def _locked_for_good(repo: Repo) -> bool:
    """A git lock stopped an update: remove it if it is stale (the caller holds the commit lock); True when it
    cannot be removed because who holds it cannot be told (a live holder is waited for, by the retries)."""
    return any(leftover.holder == recovery.UNKNOWN for leftover in recovery.clear_locks(repo))


def _commit(
    repo: Repo, editor: TreeEditor, parent: str | None, author: Author, when: int, offset: int, message: str
) -> str:
    tree = editor.write()
    lines = [f"tree {tree}"]
    if parent:
        lines.append(f"parent {parent}")
    # committed when written: log --since and show --at DATE find a write by the time it was made
    lines.append(f"author {author[0]} <{author[1]}> {when} {_zone(offset)}")
    lines.append(f"committer fsmem <fsmem@{repo.host}> {when} {_zone(offset)}")
    body = "\n".join(lines) + "\n\n" + message.rstrip("\n") + "\n"
    return repo.store.write("commit", body.encode("utf-8"))


def clock() -> _dt.datetime:
    """Now, with its UTC offset; FSMEM_NOW fixes it (as for `updated`), for tests and reproducible runs."""
    return fmt.parse_timestamp(fmt.now_iso()) or fmt.wall_clock()


def _zone(minutes: int) -> str:
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"


def _count_commits(repo: Repo, count: int) -> None:
    """Run `git gc --auto` (and write the commit graph that path-limited log needs) every GC_EVERY commits."""
    counter = repo.state() / "commits"
    try:
        before = int(read_state(counter) or 0)
    except (OSError, ValueError):
        before = 0
    after = before + count
    with contextlib.suppress(OSError, FsmemError):
        atomic_write(counter, str(after).encode(), durable=False, root=repo.root, generated=True)
    if before // GC_EVERY != after // GC_EVERY:
        maintain(repo)


def maintain(repo: Repo) -> None:
    """`git gc --auto` and a commit graph with changed-path filters, in the background (never waited for).

    Each word is quoted for the shell: fsmem's settings hold spaces and parentheses, and the memory's path is
    whatever the folder is named."""
    script = " && ".join(
        shlex.join(repo.git.command(*args))
        for args in (("gc", "--auto", "--quiet"), ("commit-graph", "write", "--reachable", "--changed-paths"))
    )
    with contextlib.suppress(OSError):
        subprocess.Popen(
            ["sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=clean_env(),
            start_new_session=True,
        )


def describe(
    action: str, path: str, changes: list[Change], *, created: bool = False, fields: Iterable[str] = ()
) -> str:
    """A commit message that says what a write did: `note sessions/…/x.md: +3 lines`, `edit topics/billing.md`."""
    before, after = (changes[0].before, changes[0].after or b"") if changes else (None, None)
    if action == "note" and isinstance(after, bytes) and not isinstance(before, Stored):  # a note holds its bytes
        if before is None:  # a new note: its front matter does not count
            body = fmt.split(after.decode("utf-8", "replace")).body
            added = body.count("\n") - body.startswith("\n")
            return f"note {path}: +{added} line{'s' if added != 1 else ''} (new file)"
        added = after.count(b"\n") - before.count(b"\n")
        return f"note {path}: +{added} line{'s' if added != 1 else ''}"
    if action == "write":
        named = sorted(fields)
        if created:
            return f"write {path} (new file)"
        return f"write {path}: set {', '.join(named)}" if named else f"write {path}"
    if action == "mv" and changes:
        return f"mv {changes[0].path} -> {path}"
    return f"{action} {path}"
