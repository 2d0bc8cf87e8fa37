"""`fsmem distill`: the operator's command turns each episode not yet distilled into keyed notes.

An episode is a session note `fsmem import` or the Claude Code hook wrote (its front matter keeps the record
of what it holds). Its lines not yet covered by any host's derived note go to the command, in parts of at
most `episode_tokens` tokens (the one budget mechanism, `fsmem.budget.Meter`), with fsmem's instructions
(`fsmem.format.distilled`). What the command answers must be `## subject` headings with keyed facts or
observation bullets; anything else, a timeout, a non-zero exit, too much output, or a secret the policy
refuses is an error for that episode, named, and nothing is written for it. Each part that passes becomes
one ordinary session note beside its episode, named after the episode, this host and the lines it covers,
so two hosts never write the same file and a sync merges them without conflict.

The command is the operator's alone: given here, or as this host's own setting `distill.command`
(`fsmem.history.host_settings`), never read from fsmem.yaml or anything a clone or remote brings. So this
operation is never a tool: no agent, MCP client or token of `fsmem serve` is offered it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem import faces, format as fmt
from fsmem.budget import TRAILER_RESERVE, Meter
from fsmem.errors import InvalidArgument, SecretFound
from fsmem.format import distilled, secrets
from fsmem.format.facts import utc_stamp
from fsmem.format.notes import stamp_facts
from fsmem.operations import command as cmd
from fsmem.operations.core import Core, Report, whole_memory
from fsmem.operations.transaction import require_writable, transaction
from fsmem.store.writing import Change, WriteResult

DEFAULT_EPISODE_TOKENS = 6000
SHOWN = 20


@dataclass
class DistillReport(Report):
    """What a run did: the derived notes it wrote, the episodes it skipped and why, how many had nothing new."""

    written: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (episode, why)
    episodes: int = 0
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not self.written and not self.skipped

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "unchanged": self.unchanged,
            "written": self.written,
            "skipped": [{"episode": episode, "reason": why} for episode, why in self.skipped],
        }

    def to_text(self) -> str:
        if self.empty:
            return f"nothing new to distill: every line of {self.episodes} episode(s) is distilled"
        lines = [
            f"distilled {len(self.written)} part(s) of {self.episodes} episode(s); {self.unchanged} had nothing new, "
            f"{len(self.skipped)} skipped"
        ]
        for done in self.written[:SHOWN]:
            cut = f" (lines {done['last'] + 1}-{done['total']} in later parts)" if done["last"] < done["total"] else ""
            lines.append(
                f"  {done['note']}: {done['facts']} fact(s), {done['observations']} observation(s) from "
                f"{done['episode']} lines {done['first']}-{done['last']} of {done['total']}{cut}"
            )
        if len(self.written) > SHOWN:
            lines.append(f"  … and {len(self.written) - SHOWN} more (--json lists them all)")
        lines += [f"  skipped {episode}: {why}; nothing was written for it" for episode, why in self.skipped]
        return "\n".join(lines)


@dataclass(frozen=True)
class Episode:
    path: str  # relative to the root
    title: str
    lines: list[str]
    stamp: str  # when its lines were said, as far as the note knows: the time its facts are dated


def distill(
    memory: Core, *, command: str | None = None, timeout: float | None = None, episode_tokens: int | None = None
) -> DistillReport:
    """Run the operator's `command` on each episode's lines that no derived note covers yet; write what it answers
    as session notes beside the episode."""
    require_writable(memory)
    whole_memory(memory, "distill")
    from fsmem.history import host_settings

    argv = cmd.argv_of(command if command is not None else _setting(memory.root, host_settings))
    if timeout is not None:
        seconds = _timeout(timeout, faces.arg("timeout"))
    else:
        seconds = _timeout(host_settings.get(memory.root, "distill.timeout"), "distill.timeout (fsmem config --local)")
    budget = episode_tokens if episode_tokens is not None else DEFAULT_EPISODE_TOKENS
    episodes, ranges = _survey(memory.root)
    report = DistillReport(episodes=len(episodes))
    for episode in episodes:
        start = distilled.first_new(ranges.get(episode.path, ()))
        if start > len(episode.lines):
            report.unchanged += 1
            continue
        while start <= len(episode.lines):
            part = _part(memory, episode.lines, start, budget)
            try:
                done = _one_part(memory, argv, seconds, episode, start, part)
            except (cmd.CommandFailed, SecretFound) as exc:
                why = str(exc).split(";")[0] if isinstance(exc, SecretFound) else str(exc)
                report.skipped.append((episode.path, f"lines {start}-{start + len(part) - 1}: {why}"))
                break
            report.written.append(done)
            start += len(part)
    return report


def pending_parts(memory: Core, max_tokens: int) -> tuple[list[dict[str, Any]], int, int]:
    """The parts of episodes not yet distilled that fit `max_tokens` (the MCP prompt's, its steps and trailer
    included), each with where an agent writes its derived note; and how many parts, and lines, were left out."""
    episodes, ranges = _survey(memory.root)
    reserve = memory.tokens.count(distilled.AGENT_STEPS) + TRAILER_RESERVE
    meter = Meter(memory.tokens.count, max_tokens=max_tokens, reserve=reserve)
    who = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{memory.agent or 'agent'}-{memory.host_id}")
    parts: list[dict[str, Any]] = []
    left = left_lines = 0
    for episode in episodes:
        start = distilled.first_new(ranges.get(episode.path, ()))
        if start > len(episode.lines):
            continue
        where = f"{Path(episode.path).parent.as_posix()}/{_session(Path(episode.path).stem, who, start, 10**9)}.md"
        taken: list[str] = []
        if meter.take_text(distilled.part_header(episode.path, episode.title, start, len(episode.lines), where, who)):
            for line in episode.lines[start - 1 :]:
                if not meter.take_text(line):
                    break
                taken.append(line)
        if taken:
            last = start + len(taken) - 1
            where = f"{Path(episode.path).parent.as_posix()}/{_session(Path(episode.path).stem, who, start, last)}.md"
            parts.append(
                {
                    "episode": episode.path,
                    "title": episode.title,
                    "first": start,
                    "last": last,
                    "total": len(episode.lines),
                    "path": where,
                    "who": who,
                    "lines": taken,
                }
            )
            start = last + 1
        if start <= len(episode.lines):
            left += 1
            left_lines += len(episode.lines) - start + 1
    return parts, left, left_lines


def _setting(root: Path, host_settings: Any) -> str:
    found = host_settings.sealed(root, "distill.command")
    if found is None:
        raise InvalidArgument(
            "give the command to run with --command CMD, or set this host's own with: "
            "fsmem config --local distill.command CMD (fsmem.yaml never names one)"
        )
    return str(found)


def _timeout(value: Any, named: str) -> float:
    """The seconds `value` says (None: the default); refused, naming where it was given (`named`), when none."""
    if value is None:
        return cmd.DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= cmd.MAX_TIMEOUT:
        raise InvalidArgument(f"{named} takes a number of seconds above 0 and at most {cmd.MAX_TIMEOUT:g}")
    return seconds


def _survey(root: Path) -> tuple[list[Episode], dict[str, list[tuple[int, int]]]]:
    """Every episode under sessions/ (in path order), and the ranges of each that derived notes cover."""
    from fsmem.hooks.claude_code import one_line
    from fsmem.store.paths import is_memory_path
    from fsmem.store.writing import read_text

    episodes: list[Episode] = []
    ranges: dict[str, list[tuple[int, int]]] = {}
    base = root / "sessions"
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if not is_memory_path(rel):  # a name with a control character: left out, as every walk leaves it
                continue
            try:
                text = read_text(path)
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            doc = fmt.split(text)
            front = doc.front_matter
            found = distilled.covered(front)
            if found is not None:
                ranges.setdefault(found[0], []).append(found[1:])
            elif distilled.is_episode(front):
                title = one_line(str(front.get("title") or name[:-3]), 120)  # the prompt's header is one line
                episodes.append(Episode(rel, title, distilled.episode_lines(doc.body), _stamp_of(front)))
    return episodes, ranges


def _stamp_of(front: dict[str, Any]) -> str:
    for name in ("updated", "created"):
        when = fmt.parse_timestamp(str(front.get(name) or ""))
        if when is not None:
            try:
                return utc_stamp(when)
            except OverflowError:  # an offset that takes it past year 1 or 9999 in UTC: no time
                continue
    return _now()


def _now() -> str:
    """Now as a UTC stamp (FSMEM_NOW when set), the form import writes."""
    return utc_stamp(fmt.parse_timestamp(fmt.now_iso()) or fmt.wall_clock())


def _part(memory: Core, lines: list[str], start: int, budget: int) -> list[str]:
    """The lines from `start` on that fit `budget` tokens (at least one, cut at the budget if it alone is over)."""
    meter = Meter(memory.tokens.count, max_tokens=budget)
    part: list[str] = []
    for line in lines[start - 1 :]:
        if not meter.take_text(line):
            break
        part.append(line)
    if not part:
        part = [memory.tokens.truncate(lines[start - 1], budget)]
    return part


def _one_part(
    memory: Core, argv: list[str], seconds: float, episode: Episode, start: int, part: list[str]
) -> dict[str, Any]:
    """Run the command on one part; write its derived note, or raise what is wrong with it."""
    last = start + len(part) - 1
    stdin = distilled.prompt(episode.path, episode.title, part, start, len(episode.lines))
    output = cmd.run(argv, stdin, timeout=seconds, cwd=os.fspath(memory.root))
    lines, problem = distilled.checked(output)
    if problem is not None:
        raise cmd.CommandFailed(f"its output is not keyed notes: {problem}")
    body = "\n".join(stamp_facts(lines, episode.stamp)) + ("\n" if lines else "")
    body = secrets.screen(body, memory.secrets_policy, "the command's output")
    host = memory.host_id
    session = _session(Path(episode.path).stem, host, start, last)
    rel = f"{Path(episode.path).parent.as_posix()}/{session}.md"
    stamp = _now()
    front = {
        "title": f"Distilled: {episode.title}",
        "description": f"Keyed notes distilled from {episode.path}, lines {start}-{last}",
        "type": "episodic",
        "session": session,
        distilled.FROM: episode.path,
        distilled.LINES: f"{start}-{last}",
        distilled.BY: host,
        "created": stamp,
        "updated": stamp,
    }
    data = fmt.render(front, body).encode("utf-8")
    target = memory.path(rel, want="file")
    with transaction(memory) as tx:
        if target.exists():
            raise cmd.CommandFailed(f"{rel} exists already (left as it is)")
        from fsmem.store.files import atomic_write

        atomic_write(target, data, root=memory.root)
        tx.wrote(WriteResult("note", rel, created=True, changes=[Change(rel, None, data)]), f"distill {rel}")
    facts, observations = distilled.counts(lines)
    return {
        "note": rel,
        "episode": episode.path,
        "first": start,
        "last": last,
        "total": len(episode.lines),
        "facts": facts,
        "observations": observations,
    }


def _session(stem: str, host: str, first: int, last: int) -> str:
    """The derived note's name: the episode's, this host's id and the lines (`chatgpt-1a2b.laptop.1-120`)."""
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", host).strip("-") or "host"
    tail = f".{host[:40]}.{first}-{last}"
    if len(stem) + len(tail) > 100:
        digest = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        stem = f"{stem[: 100 - len(tail) - 9]}-{digest}"
    return stem + tail


__all__ = ["DistillReport", "distill"]
