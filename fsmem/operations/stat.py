"""stat: what a person asks of one file, in a few lines: its size in tokens, its keyed facts (current and
superseded), its last change and by whom, and how many links lead out of it and into it.

Each figure is the one another operation gives in full (ls's tokens, read's superseded lines, log's last
commit, links' rows): stat counts, and names the call that lists. Within the agent's budget and scope.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fsmem import faces
from fsmem.budget import Meter, named
from fsmem.format.facts import parse_fact
from fsmem.format.history_file import history_path
from fsmem.operations.core import Core, existing
from fsmem.store.meta import EXACT_COUNT_LIMIT
from fsmem.store.paths import relative


@dataclass
class StatResult:
    """The answer to `stat PATH`: the figures of one file, as lines cut at the token budget."""

    path: str
    tokens: int
    facts: dict[str, int] | None  # current and superseded keyed facts; None: the file is too large to parse
    last_change: dict[str, Any]  # date, agent, commit, message, and from where: "history" or "mtime"
    links: dict[str, int]  # how many links lead out of the file, and into it from files in scope
    lines: list[str] = field(default_factory=list)  # the lines shown, within the budget
    truncated: bool = False

    @property
    def rows(self) -> int:
        return len(self.lines)

    @property
    def cited(self) -> list[str]:
        return [self.path]

    @property
    def empty(self) -> bool:
        return False

    def to_dict(self) -> dict[str, Any]:
        return named(self, "path", "tokens", "facts", "last_change", "links", "truncated")

    def to_text(self) -> str:
        cut = [cut_note()] if self.truncated else []
        return "\n".join([*self.lines, *cut])


def cut_note() -> str:
    return f"[answer cut at the budget{faces.larger_budget()}]"


def stat(memory: Core, path: str, *, max_tokens: int | None = None) -> StatResult:
    """The figures of one file, each counted where the operation that lists it would find it."""
    target = existing(memory, path, "file")
    rel = relative(memory.root, target)
    budget = memory.budget.narrowed(max_tokens, None)
    meta = memory.catalog.get(target, full=True)
    facts = _facts(memory, rel, target.stat().st_size)
    change = _last_change(memory, rel, target.stat().st_mtime)
    links = _links(memory, rel, target)
    result = StatResult(rel, meta.tokens, facts, change, links)
    tokens = f"{'about ' if meta.tokens_estimated else ''}{meta.tokens} tokens"
    counted = (
        f"{facts['current']} current, {facts['superseded']} superseded"
        if facts is not None
        else f"not counted (over {EXACT_COUNT_LIMIT} bytes)"
    )
    if change["from"] == "history":
        changed = f"{change['date']} by {change['agent']}, commit {change['commit']}: {change['message']}"
    else:
        changed = f"{change['date']} (the file's modification time: no history)"
    lines = [
        rel,
        f"size: {tokens}",
        f"keyed facts: {counted}",
        f"last change: {changed}",
        f"links: {links['out']} out, {links['in']} in (see {faces.call('links', path=rel)})",
    ]
    reserve = memory.tokens.count(cut_note())  # room kept for the note that says the answer was cut
    meter = Meter(memory.tokens.count, max_tokens=budget.max_tokens, reserve=reserve)
    result.lines = [line for line in lines if meter.take_text(line)]
    result.truncated = meter.full
    return result


def _facts(memory: Core, rel: str, size: int) -> dict[str, int] | None:
    """Keyed facts of the file, superseded ones apart, and those its history file keeps (all superseded)."""
    if size > EXACT_COUNT_LIMIT:
        return None
    from fsmem.operations.reads import superseded_ranges

    hidden = superseded_ranges(memory, rel)
    current = superseded = 0
    text = (memory.root / rel).read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        if parse_fact(line.strip()) is None:
            continue
        if any(start <= number <= end for start, end in hidden):
            superseded += 1
        else:
            current += 1
    kept = memory.root / history_path(rel)
    if (
        kept.is_file()
        and kept.stat().st_size <= EXACT_COUNT_LIMIT
        and (memory.scope is None or memory.scope.contains(history_path(rel)))
    ):
        superseded += sum(
            parse_fact(line.strip()) is not None
            for line in kept.read_text(encoding="utf-8", errors="replace").splitlines()
        )
    return {"current": current, "superseded": superseded}


def _last_change(memory: Core, rel: str, mtime: float) -> dict[str, Any]:
    """The last commit that changed the file, where the memory has history; else its modification time."""
    if memory.history is not None:
        from fsmem.operations.history import log

        entries = log(memory, rel, max_results=1).entries
        if entries:
            entry = entries[0]
            return {
                "from": "history",
                "date": entry.date,
                "agent": entry.agent,
                "commit": entry.commit,
                "message": entry.message,
            }
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    return {"from": "mtime", "date": date, "agent": None, "commit": None, "message": None}


def _links(memory: Core, rel: str, target: Any) -> dict[str, int]:
    from fsmem.query import links as _links

    memory.catalog.get(target)  # its own row, whatever the walk's scope
    memory.catalog.sync()
    resolver = _links.Resolver(memory.catalog)
    return {"out": resolver.links_in(rel, 0, 0)[0], "in": resolver.links_to(rel, 0, 0)[0]}
