"""Distilled notes: the keyed notes a command made of an episode, and the record of which lines they cover. Pure.

An episode (a session note that `fsmem import` or the Claude Code hook wrote) holds what was said in fenced
`text` blocks; its *lines* are the lines of those blocks, numbered from 1 in order, which only grow at the
end as the conversation does. A derived note is an ordinary session note whose front matter names the
episode (`distilled_from`), the lines it covers (`distilled_lines: A-B`) and the host that made it
(`distilled_by`); its body is what the command wrote, in the grammar consolidation reads: `## subject`
headings, each with keyed facts (`- key: value`) or observation bullets. A range counts as distilled once
any host's derived note for it is in the memory, so after a sync every host agrees on what is left.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fsmem.format.facts import is_bullet, parse_fact
from fsmem.format.markdown import HEADING

FROM, LINES, BY = "distilled_from", "distilled_lines", "distilled_by"
_RANGE = re.compile(r"^(\d{1,9})-(\d{1,9})$")
_OPEN, _CLOSE = "```text", "```"

INSTRUCTIONS = """\
You are distilling an episode of an fsmem memory (a saved conversation) into keyed notes.
Write only what is worth remembering beyond this conversation: facts about people, projects,
organisations, decisions, preferences. Answer with Markdown in exactly this form and nothing else:

## people/Adam Smith
- employer: Globex
- Prefers email over calls.

## project/Billing
- status: migrating to Stripe

Each subject is a `## kind/Name` heading; under it, one bullet per line: `- key: value` for a fact
that can change (a key of one to four lowercase words), or `- A sentence.` for an observation.
No other lines: no prose, no code, no quotes of the conversation, no secrets. Write nothing at all
if nothing is worth keeping.
"""


def episode_lines(body: str) -> list[str]:
    """The lines of an episode: those of its fenced `text` blocks, in order."""
    out: list[str] = []
    inside = False
    for line in body.splitlines():
        if not inside and line.rstrip() == _OPEN:
            inside = True
        elif inside and line.rstrip() == _CLOSE:
            inside = False
        elif inside:
            out.append(line)
    return out


def is_episode(front: Mapping[str, Any]) -> bool:
    """Whether a session note is an episode: fsmem import or the hook wrote it, with its record of what it holds."""
    lines, digest = front.get("imported_lines"), front.get("imported_digest")
    return isinstance(lines, int) and not isinstance(lines, bool) and isinstance(digest, str)


def covered(front: Mapping[str, Any]) -> tuple[str, int, int] | None:
    """(episode, first line, last line) a derived note's front matter names, or None for any other note."""
    episode, lines = front.get(FROM), front.get(LINES)
    if not isinstance(episode, str) or not isinstance(lines, str):
        return None
    match = _RANGE.match(lines.strip())
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    return (episode, first, last) if 1 <= first <= last else None


def first_new(ranges: Iterable[tuple[int, int]]) -> int:
    """The first line of an episode that no range covers, counting from line 1 (ranges from any host)."""
    start = 1
    for first, last in sorted(ranges):
        if first <= start <= last:
            start = last + 1
    return start


def checked(output: str) -> tuple[list[str], str | None]:
    """The command's output as note lines, or (nothing, what is wrong with it, naming its line).

    Only blank lines, `## subject` headings and bullets under a heading are taken; a heading needs at least
    one bullet. Empty output is an answer too: nothing in that part was worth keeping.
    """
    lines = output.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    subject: str | None = None
    bullets = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line:
            kept.append("")
            continue
        heading = HEADING.match(line)
        if heading is not None:
            if len(heading.group(1)) != 2:
                return [], f"line {number} is a heading that is not `## subject`"
            if subject is not None and not bullets:
                return [], f"the subject {subject!r} has no bullet under it"
            subject, bullets = heading.group(2).strip(), 0
            kept.append(f"## {subject}")
            continue
        if line.startswith((" ", "\t")) or not is_bullet(line):
            return [], f"line {number} is neither a `## subject` heading nor a `- key: value` or `- observation` bullet"
        if subject is None:
            return [], f"line {number} is a bullet before any `## subject` heading"
        kept.append(line)
        bullets += 1
    if subject is not None and not bullets:
        return [], f"the subject {subject!r} has no bullet under it"
    while kept and not kept[-1]:
        kept.pop()
    while kept and not kept[0]:
        kept.pop(0)
    return kept, None


def counts(lines: Sequence[str]) -> tuple[int, int]:
    """(keyed facts, observations) among a derived note's lines."""
    facts = sum(1 for line in lines if is_bullet(line) and parse_fact(line) is not None)
    bullets = sum(1 for line in lines if is_bullet(line))
    return facts, bullets - facts


def prompt(episode: str, title: str, lines: Sequence[str], first: int, total: int) -> str:
    """What the command reads on stdin: the instructions, then which lines of which episode follow, then them."""
    last = first + len(lines) - 1
    left = f"; lines {last + 1}-{total} come in a later part" if last < total else ""
    head = f"Episode {episode} ({title}): lines {first}-{last} of {total}{left}."
    return "\n".join([INSTRUCTIONS, head, "", _OPEN, *lines, _CLOSE, ""])


AGENT_STEPS = """\
These episodes of the memory (saved conversations) are not distilled yet. For each part below, save what is
worth remembering beyond the conversation as keyed notes, then mark the part as distilled, in one call of
the write tool per part:

    write(path=PATH, body=NOTES, set={"type": "episodic", "distilled_from": EPISODE, "distilled_lines": "A-B",
          "distilled_by": WHO})

with the PATH, EPISODE, A-B and WHO each part names. NOTES are `## kind/Name` subject headings, each with one
bullet a line: `- key: value` for a fact that can change (a key of one to four lowercase words), or
`- A sentence.` for an observation; nothing else (no prose, no quotes, no secrets). Write an empty body for a
part with nothing worth keeping: it is marked distilled all the same. Consolidation files these notes into
entity and topic documents, each citing the note, which names its episode.
"""


def part_header(episode: str, title: str, first: int, total: int, path: str, who: str, last: int | None = None) -> str:
    """The line that opens one part of the MCP prompt: which lines of which episode, where they go, and who."""
    shown = last if last is not None else total
    return f"Part: EPISODE={episode} ({title}), lines A-B={first}-{shown} of {total}; PATH={path}; WHO={who}"


def agent_prompt(parts: Sequence[Mapping[str, Any]], left: int, left_lines: int) -> str:
    """The MCP prompt's text: the steps, then each part (where to write it, then its lines), then what was left out."""
    if not parts and not left:
        return "Every episode of the memory is distilled: nothing to do."
    out = [AGENT_STEPS]
    for part in parts:
        out += [
            part_header(
                part["episode"],
                part["title"],
                part["first"],
                part["total"],
                part["path"],
                part["who"],
                last=part["last"],
            ),
            _OPEN,
            *part["lines"],
            _CLOSE,
            "",
        ]
    if left:
        out.append(
            f"[{left} more part(s) of episodes ({left_lines} line(s)) left out at the token budget: "
            "ask for this prompt again once these are written]"
        )
    return "\n".join(out).rstrip("\n") + "\n"
