"""Running the project digest (`fsmem.consolidate.digest`): which episodes changed since the last run, the project
documents that change with them, and the host-local cache that tells.

An episode is read again when its size, time or inode differs from the cache's (`.fsmem/consolidate/digest.json`,
rebuilt when missing); every project with an episode that is new, grew or is gone has its whole `## Sessions` section
derived again from all of its episodes, so the section does not depend on the order the episodes came in.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fsmem import format as fmt
from fsmem.consolidate.digest import PREFIX, SECTION, Entry, SessionLine, episode_line, section_lines, with_section
from fsmem.consolidate.plan import Change, Plan, Settings, citation_paths
from fsmem.consolidate.report import ConsolidationReport
from fsmem.consolidate.subjects import DirectoryEntry
from fsmem.state_files import read_state
from fsmem.store.paths import bounded_walk

CACHE_VERSION = 2  # 2: each episode's inode


@dataclass
class Cache:
    """What this host last read of each episode: its stat and its line (None: not a digested session)."""

    path: Path
    notes: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Cache:
        from fsmem.names import STATE_DIR

        path = root / STATE_DIR / "consolidate" / "digest.json"
        cache = cls(path)
        try:
            data = json.loads(read_state(path).decode("utf-8"))
            if data.get("version") == CACHE_VERSION:
                cache.notes = {str(k): (int(v[0]), int(v[1]), v[2], int(v[3])) for k, v in data["notes"].items()}
                for entry in cache.notes.values():  # a line this version could not have written: start again
                    if entry[2] is not None:
                        SessionLine(**entry[2]).path.encode("utf-8")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            cache.notes = {}
        return cache

    def save(self, root: Path) -> None:
        from fsmem.store.files import atomic_write, state_dir

        state_dir(root, "consolidate")
        data = {"version": CACHE_VERSION, "notes": self.notes}
        payload = json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
        atomic_write(self.path, payload, durable=False, root=root, generated=True)


@dataclass
class DigestPlan:
    """The digest documents to write (path -> (old text or None, new text)), the sessions whose lines changed, and
    the cache as it stands once they are written (`pending`: the entries to keep only if their document is)."""

    changes: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    sessions_changed: int = 0
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    cache: Cache | None = None
    pending: dict[str, dict[str, Entry]] = field(default_factory=dict)  # document -> entries that wait on it


def plan_digest(root: Path, archive_dir: str, day: str, located: Callable[[str], str]) -> DigestPlan:
    """Which project documents change: those with an episode that is new, changed or gone since the cache."""
    from fsmem.errors import FsmemError
    from fsmem.store.paths import resolve

    result = DigestPlan()
    cache = result.cache = Cache.load(root)
    current: dict[str, Entry] = {}
    touched: set[str] = set()
    for rel, st in _episodes(root, archive_dir):
        old = cache.notes.get(rel)
        if old is not None and (old[0], old[1], old[3]) == (st.st_mtime_ns, st.st_size, st.st_ino):
            current[rel] = old
            continue
        line = _read_line(root, rel, archive_dir)
        if line is not None and line.date > day:  # held back, as consolidation holds back a note dated later
            continue
        current[rel] = (st.st_mtime_ns, st.st_size, asdict(line) if line is not None else None, st.st_ino)
        if line is not None:
            touched.add(line.path)
        if old is not None and old[2] is not None:
            touched.add(SessionLine(**old[2]).path)
    for rel, old in cache.notes.items():
        if rel not in current and old[2] is not None:
            touched.add(SessionLine(**old[2]).path)  # an episode gone, or moved to the archive
    by_document: dict[str, list[SessionLine]] = {}
    for _m, _s, data, _i in current.values():
        if data is not None:
            line = SessionLine(**data)
            by_document.setdefault(line.path, []).append(line)
    cache.notes = {rel: entry for rel, entry in current.items() if entry[2] is None or _path_of(entry) not in touched}
    for path in sorted(touched):
        lines = by_document.get(path, [])
        result.pending[path] = {
            rel: entry for rel, entry in current.items() if entry[2] is not None and _path_of(entry) == path
        }
        if not lines:
            continue  # every session of it is gone: its document keeps what it says
        try:
            full = resolve(root, path)
            old_text: str | None = full.read_bytes().decode("utf-8") if full.exists() else None  # as it is, \r\n kept
        except (FsmemError, OSError, UnicodeDecodeError) as exc:
            result.problems.append((path, 1, f"{exc}; document skipped"))
            continue
        if old_text is not None and fmt.split(old_text).problems:
            problem = fmt.split(old_text).problems[0]
            result.problems.append((path, problem.line, f"{problem.message}; document skipped"))
            continue
        project = sorted(lines, key=lambda s: (s.date, s.start, s.source))[0].project
        bullets = section_lines(lines, located)
        new_text = with_section(old_text, project, path, lines, bullets)
        if new_text != old_text:
            before = set(_section_of(old_text)) if old_text is not None else set()
            result.sessions_changed += sum(1 for bullet in bullets if bullet not in before)
            result.changes[path] = (old_text, new_text)
    return result


def _episodes(root: Path, archive_dir: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path, stat) of each Claude Code session note, in the sessions folder and the archive: only these are
    stat'ed (a memory of many notes is listed, not stat'ed, a second time). A link is no episode here, nor what
    a folder of notes reached through a link holds (`NoteFolders`)."""
    from fsmem.store.note_folders import NoteFolders

    for folder in NoteFolders(root, archive_dir).named:
        if not (root / folder).is_dir():
            continue
        for current, dirs, files in bounded_walk(root / folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith(PREFIX) and name.endswith(".md"):
                    full = os.path.join(current, name)
                    try:
                        st = os.lstat(full)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        yield Path(full).relative_to(root).as_posix(), st


def _path_of(entry: Entry) -> str:
    assert entry[2] is not None
    return SessionLine(**entry[2]).path


def _section_of(text: str) -> list[str]:
    found = [h for h in fmt.headings(text) if h.level == 2 and h.title.strip().lower() == SECTION.lower()]
    if not found:
        return []
    return text.splitlines()[found[0].line : found[0].end_line]


def _read_line(root: Path, rel: str, archive_dir: str) -> SessionLine | None:
    from fsmem.errors import FsmemError
    from fsmem.store.paths import resolve

    try:
        data = resolve(root, rel).read_bytes()
    except (FsmemError, OSError):
        return None
    text, bad = fmt.decode(data)
    if bad:
        return None
    return episode_line(rel, text, archive_dir)


def settle(root: Path, plan: DigestPlan, written: set[str]) -> None:
    """Save the cache with the entries of the documents written or left unchanged; those of a document that was
    not written (a conflict, a problem) are left out, so the next run reads their episodes again."""
    if plan.cache is None:
        return
    for path, episodes in plan.pending.items():
        if path in plan.changes and path not in written:
            continue
        if any(problem[0] == path for problem in plan.problems):
            continue
        plan.cache.notes.update(episodes)
    plan.cache.save(root)


def run(
    root: Path,
    settings: Settings,
    report: ConsolidationReport,
    write: Callable[[Plan], dict[str, DirectoryEntry]] | None,
    dry: Plan | None = None,
) -> dict[str, DirectoryEntry]:
    """The digest after the notes: its documents written by `write` (consolidation's `apply`, so with the same
    careful writes), or, on a dry run (`write` None), added to the plan `dry` whose diff is shown. Returns the
    directory entries of the documents written, for INDEX.md."""
    from fsmem.consolidate.dates import today

    located, _canonical = citation_paths(settings)
    found = plan_digest(root, settings.archive_dir, today(), located)
    report.problems += [p for p in found.problems if p not in report.problems]
    report.counts["sessions_digested"] += found.sessions_changed
    changes = [Change(path, old, new, "document") for path, (old, new) in sorted(found.changes.items())]
    if write is None:
        if dry is not None:
            dry.changes += changes
        return {}
    fronts = {c.path: (fmt.split(c.new).front_matter, c.new) for c in changes}
    before = len(report.files_written)
    fresh = write(Plan(changes=changes, fronts=fronts))
    settle(root, found, set(report.files_written[before:]))
    return fresh
