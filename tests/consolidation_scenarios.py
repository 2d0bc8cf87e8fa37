"""Scenarios for the consolidation invariant: notes that arrive in batches, grow, and runs that crash.

A scenario is a set of session notes whose lines appear over a few steps (a
note arrives at some step; some of its lines appear later, at their final
place, so a note grows at its end or in the middle of a section). `evolve`
consolidates after every step, optionally crashing a run after its k-th file
write and leaving a stray temporary file; `reference` consolidates the final
notes once. The invariant: both trees hold the same bytes.

Used by tests/test_consolidate_invariant.py (hypothesis) and by
benchmarks/bench_consolidate_invariant.py (a larger seeded run).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from fsmem import Memory
from fsmem.consolidate import batch_writes

DATES = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
# times of writes as `fsmem note` stamps them: two seconds apart on one day, the day's last second
TIMES = ["2026-01-02T08:00:00Z", "2026-01-02T08:00:02Z", "2026-01-03T23:59:59Z"]
SESSIONS = ["a", "b"]
SUBJECTS = ["people/Ann Lee", "topic/Ops", None]  # None: lines before any heading (the default subject)
KEYS = ["status", "role", "city"]
VALUES = ["open", "closed", "escalated", "Open", "~"]
OBSERVATIONS = [
    "Prefers email over phone.",
    "prefers email over phone",
    "Prefers e-mail over phone!",
    "Prefers e-mail over the phone.",
    "Likes green tea.",
    "Likes tea.",
    "Moved to Berlin in March.",
    "Moved to Berlin in May.",
]


@dataclass
class Line:
    text: str
    step: int  # the step from which the line is in the note


@dataclass
class Note:
    date: str
    session: str
    arrive: int
    sections: list[tuple[str | None, list[Line]]]

    @property
    def rel(self) -> str:
        return f"sessions/{self.date.replace('-', '/')}/{self.session}.md"

    def body(self, step: int) -> str:
        parts = []
        preamble = [ln.text for subject, lines in self.sections if subject is None for ln in lines if ln.step <= step]
        if preamble:
            parts.append("\n".join(preamble) + "\n")
        for subject, lines in self.sections:
            shown = [ln.text for ln in lines if ln.step <= step]
            if subject is not None and shown:
                parts.append(f"## {subject}\n" + "\n".join(shown) + "\n")
        return "\n".join(parts)


HUMAN_DOCUMENT = """\
---
title: Ann Lee
entity: people/Ann Lee
created: 2025-06-01T09:00:00+00:00
updated: 2025-06-01T09:00:00+00:00
---
# Ann Lee

Ann runs the Berlin office.

## Facts
- status: written by hand
- Prefers tea in the morning.

## Contact
- city: Hamburg (as of 2025-12-01)

## Notes
- Prefers email over the phone
- Met at the offsite.
"""


@dataclass
class Scenario:
    notes: list[Note]
    steps: int
    crashes: dict[int, int] = field(default_factory=dict)  # step -> crash after this many writes
    strays: set[int] = field(default_factory=set)  # steps whose crash leaves a stray temporary file
    human: bool = False  # start from a document written by hand (HUMAN_DOCUMENT)
    kept: int | None = None  # consolidate.superseded_in_document (None: the default, 10)
    links: bool = False  # `evolve` plants LINKS among the notes first; they change no byte of the documents
    folder_links: bool = False  # `evolve` plants FOLDER_LINKS first; they change no byte either


# Notes that are symbolic links: to a topic the notes may make (no note: left alone, reported) and to a note
# (that note, consolidated once under its own path); each dangles until what it leads to is written.
LINKS = {
    "sessions/2026/01/02/z-topic.md": "../../../../topics/ops.md",
    "sessions/2026/01/04/z-note.md": "../01/a.md",
}


# Folders of notes that are symbolic links to folders of documents: the archive folder (left alone and
# reported: read as archived notes, every document with a `created:` would be marked) and a day folder (the
# notes walk enters no folder link).
FOLDER_LINKS = {
    "archive/sessions": "../topics",
    "sessions/2026/01/09": "../../../entities/people",
}


def session_note(root: Path, date: str, session: str, body: str) -> Path:
    """A hand-placed session note of `date` (YYYY-MM-DD) named `session`, created at 09:00 that day."""
    path = root / "sessions" / date.replace("-", "/") / f"{session}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: Session {session}\ncreated: {date}T09:00:00+00:00\n---\n{body}", encoding="utf-8")
    return path


def fact_line(key: str, value: str, as_of: str | None) -> str:
    return f"- {key}: {value}" + (f" (as of {as_of})" if as_of else "")


def random_scenario(rng: random.Random, notes: int = 6, steps: int = 3, lines: int = 4) -> Scenario:
    """A seeded scenario, for runs larger than the property test's."""
    made: dict[tuple[str, str], Note] = {}
    for _ in range(notes):
        date, session = rng.choice(DATES), rng.choice(SESSIONS + ["c", "d"])
        arrive = rng.randrange(steps)
        sections = []
        for _ in range(rng.randint(1, 3)):
            subject = rng.choice(SUBJECTS)
            body = []
            for _ in range(rng.randint(1, lines)):
                step = arrive if rng.random() < 0.7 else rng.randint(arrive, steps - 1)
                if rng.random() < 0.65:
                    as_of = rng.choice(DATES) if rng.random() < 0.2 else None
                    text = fact_line(rng.choice(KEYS), rng.choice(VALUES), as_of)
                else:
                    text = "- " + rng.choice(OBSERVATIONS)
                body.append(Line(text, step))
            sections.append((subject, body))
        made.setdefault((date, session), Note(date, session, arrive, sections))
    crashes = {s: rng.randint(1, 12) for s in range(steps) if rng.random() < 0.5}
    strays = {s for s in crashes if rng.random() < 0.5}
    kept = rng.choice([None, 0, 1])
    return Scenario(list(made.values()), steps, crashes, strays, human=rng.random() < 0.3, kept=kept)


def start(root: Path, scenario: Scenario) -> Memory:
    memory = Memory.init(root)
    if scenario.kept is not None:  # a small bound, so that history files take lines in every run
        config = root / "fsmem.yaml"
        text = config.read_text(encoding="utf-8")
        wanted = text.replace("  superseded_in_document: 10 ", f"  superseded_in_document: {scenario.kept}  ", 1)
        assert wanted != text
        config.write_text(wanted, encoding="utf-8")
        memory = Memory(root)
    if scenario.human:
        path = root / "entities/people/ann-lee.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HUMAN_DOCUMENT, encoding="utf-8")
    return memory


def write_notes(root: Path, scenario: Scenario, step: int) -> None:
    """Every note as it is at `step`; a note already there keeps its front matter (the consolidator's mark too)."""
    for note in scenario.notes:
        if note.arrive > step:
            continue
        path = root / note.rel
        body = note.body(step)
        if path.exists():
            text = path.read_text(encoding="utf-8")
            head = text[: text.index("\n---\n", 3) + 5]
            if text != head + body:
                path.write_text(head + body, encoding="utf-8")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        head = f"---\ntitle: Session {note.session} {note.date}\ntype: episodic\ncreated: {note.date}T09:00:00+00:00\n---\n"
        path.write_text(head + body, encoding="utf-8")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the memory except machine state (.fsmem/) and symbolic links, stray temporary files included."""
    found = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".fsmem"]
        for name in files:
            path = Path(current, name)
            if not path.is_symlink():
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return dict(sorted(found.items()))


def reference(root: Path, scenario: Scenario) -> dict[str, bytes]:
    memory = start(root, scenario)
    write_notes(root, scenario, scenario.steps)
    memory.consolidate()
    return snapshot(root)


def evolve(root: Path, scenario: Scenario) -> tuple[dict[str, bytes], int, int]:
    """Consolidate after every step (crashing where the scenario says), then once more uninterrupted.

    Returns the final tree, the number of crashes that happened, and how many were asked for.
    """
    memory = start(root, scenario)
    planted = {**(LINKS if scenario.links else {}), **(FOLDER_LINKS if scenario.folder_links else {})}
    for link, text in planted.items():
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        if link in FOLDER_LINKS:  # a folder link that dangles is refused whole (a dangling archive: exit 2)
            (root / link).parent.joinpath(text).mkdir(parents=True, exist_ok=True)
        os.symlink(text, root / link)
    crashed = 0
    for step in range(scenario.steps):
        write_notes(root, scenario, step)
        limit = scenario.crashes.get(step)
        try:
            with batch_writes.crash_after(limit):
                memory.consolidate()
        except batch_writes.SimulatedCrash:
            crashed += 1
            if step in scenario.strays:
                folder = root / "entities" / "people"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / ".fsmem-tmp-killed").write_bytes(b"half a docu")
    write_notes(root, scenario, scenario.steps)
    memory.consolidate()
    return snapshot(root), crashed, len(scenario.crashes)
