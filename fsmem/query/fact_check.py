"""What `check` says of keyed facts, and what `timeline` needs to know of hand edits: fact lines that cannot be
read, and citations that no longer support their value.

A fact line that cannot be read: in a document (a memory file outside `sessions/` and the archive), under a
level-2 `## Facts` or `## Superseded` heading and outside fenced code, a top-level bullet (`-`, `*` or `+`)
that the fact rule (`fsmem.format.facts`) refuses although it has the shape of one, a label of at most 60
characters then a colon (`* Phone: 111`, `- phone:111`, `- home phone of ann lee: 1`; a URL's `://` is no
such colon); or a keyed fact whose `(as of …)` is not a date, or whose trailing citation starts like one
(`([2026-…` or `(2026-…`) but cannot be read. Consolidation, `timeline` and `as_of` pass such a line by
(or read it undated), so `check` names it.

A citation no longer supports its value when the note it names first (or as the last to confirm it) is there
and gives the line's key only other values: a person changed `Globex` to `Initech` and kept the citation. A
note that does not state the key at all says nothing either way (an extractor plugin may have read the fact
out of prose), so it is not reported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format import facts as F, secrets
from fsmem.format.valid_time import SESSIONS, file_facts
from fsmem.store import paths
from fsmem.store.meta import EXACT_COUNT_LIMIT

FACT_SECTIONS = ("facts", fmt.SUPERSEDED_HEADING.lower())
_LABEL = re.compile(r"^[^:\s][^:]{0,59}:(?!//)")  # a fact's shape: a short label, then a colon (not a URL's)
_CITATION_START = re.compile(rf"(?:^| )\(\[?(?:\d{{4}}-\d{{2}}-\d{{2}}|{F.UNDATED})\b.*\)$")
_SHOWN = 80  # characters of a line a message quotes


@dataclass(frozen=True)
class Contradiction:
    """A fact line whose cited note gives its key only other values."""

    line: int
    key: str
    value: str | None
    source: str  # the note it cites
    says: tuple[str, ...]  # the values that note gives the key

    @property
    def shown(self) -> str:
        return f"{self.key}: {F.RETRACTED if self.value is None else self.value}"


def unreadable_lines(text: str) -> list[tuple[int, str]]:
    """(line, message) of each fact line of a document that the fact rule cannot read (see the module's doc)."""
    doc = fmt.split(text)
    owner: dict[int, str] = {}
    for heading in fmt.headings(doc.body, doc.body_start_line):
        if heading.level == 2:
            for number in range(heading.line + 1, heading.end_line + 1):
                owner[number] = heading.title.strip().lower()
    found: list[tuple[int, str]] = []
    in_code = False
    for number, line in enumerate(doc.body.splitlines(), start=doc.body_start_line):
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
            continue
        section = owner.get(number)
        if in_code or section not in FACT_SECTIONS or not F.is_bullet(line):
            continue
        message = _unreadable(line, section)
        if message:
            found.append((number, message))
    return found


def _unreadable(line: str, section: str) -> str | None:
    quoted = _quote(line)
    heading = "## " + ("Facts" if section == "facts" else fmt.SUPERSEDED_HEADING)
    fact = F.parse_fact(line)
    if fact is None:
        if not _LABEL.match(line[2:].strip()):
            return None  # prose under the heading, not a fact gone wrong
        return (
            f"{quoted} under {heading} is not a keyed fact, so consolidation, timeline and as_of pass it by: "
            "a key is one to four lowercase words (letters, digits, _ or -) followed by ': ' and a value, "
            "such as '- phone: 555 0100'"
        )
    if fact.bad_date:
        return f"{quoted}: '(as of {fact.bad_date})' is not a date, so the fact is read undated; write YYYY-MM-DD"
    if fact.provenance is None and fact.value is not None and _CITATION_START.search(fact.value):
        return (
            f"{quoted}: its citation cannot be read (a date that is no calendar date, or a path with spaces), so "
            "it is read as part of the value; write it as ([YYYY-MM-DD](path of the note)) or (as of YYYY-MM-DD)"
        )
    return None


def _quote(line: str) -> str:
    line = line.rstrip("\r\n")
    return repr(line if len(line) <= _SHOWN else line[: _SHOWN - 1] + "…")


Said = dict[str, dict[str, str]]  # key -> normalised value -> the value as the note writes it


def contradictions(text: str, note_values: Callable[[str], Said | None]) -> list[Contradiction]:
    """The fact lines of a document whose cited note gives their key only other values.

    `note_values(source)` is what a cited note (`sessions/…`) says (None: no such note, or it cannot be read).
    """
    if "](" not in text and "sessions/" not in text:
        return []
    found: list[Contradiction] = []
    for fact in _cited_facts(text):
        number, key, value, sources = fact
        for source in sources:
            said = note_values(source) if source.startswith(SESSIONS + "/") else None
            if said is None or key not in said:
                continue
            wanted = F.RETRACTED if value is None else F.normalize_value(value)
            if wanted not in said[key]:
                found.append(Contradiction(number, key, value, source, tuple(sorted(said[key].values()))))
                break
    return found


def _cited_facts(text: str) -> list[tuple[int, str, str | None, list[str]]]:
    """(line, key, value, the notes it cites first and as last confirmation) of each cited keyed fact."""
    doc = fmt.split(text)
    out = []
    in_code = False
    for number, line in enumerate(doc.body.splitlines(), start=doc.body_start_line):
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code or not F.is_bullet(line):
            continue
        fact = F.parse_fact(line)
        if fact is None or fact.provenance is None:
            continue
        sources = [fact.provenance.sources[0]]
        confirmed = fact.provenance.confirmed
        if confirmed is not None and confirmed.source not in sources:
            sources.append(confirmed.source)
        out.append((number, fact.key, fact.value, sources))
    return out


def note_values(text: str, source: str) -> Said:
    """What a session note gives each key (a secret also as the consolidator redacts it)."""
    said: Said = {}
    for fact in file_facts(text, source if source.startswith(SESSIONS + "/") else f"{SESSIONS}/{source}"):
        values = said.setdefault(fact.key, {})
        if fact.value is None:
            values[F.RETRACTED] = F.RETRACTED
            continue
        shown = secrets.redact(fact.value) if secrets.scan(fact.value) else fact.value  # never quoted as it is
        values.setdefault(F.normalize_value(fact.value), shown)
        values.setdefault(F.normalize_value(shown), shown)
    return said


class Notes:
    """What the session notes a memory's documents cite say, each read once: at its `sessions/` path, else
    where the archive keeps it."""

    def __init__(self, root: Path, archive_dir: str):
        self.root = root
        self.archive = archive_dir.strip("/")
        self._said: dict[str, Said | None] = {}

    def __call__(self, source: str) -> Said | None:
        if source not in self._said:
            self._said[source] = self._read(source)
        return self._said[source]

    def _read(self, source: str) -> Said | None:
        for rel in (source, f"{self.archive}/{source[len(SESSIONS) + 1 :]}"):
            text = read_text(self.root, rel)
            if text is not None:
                return note_values(text, source)
        return None


def read_text(root: Path, rel: str) -> str | None:
    """A memory file's text through the path rule; None when it is missing, too large or unreadable."""
    try:
        path = paths.resolve(root, rel, want="file")
        if os.stat(path).st_size > EXACT_COUNT_LIMIT:
            return None
        return fmt.decode(paths.read_regular(path))[0]
    except (OSError, FsmemError):
        return None


def problems(root: Path, rels: list[str], archive_dir: str) -> list[tuple[str, int, str]]:
    """`check`'s problems of keyed facts in the documents among `rels`: unreadable lines, unsupported citations."""
    archive = archive_dir.strip("/") + "/"
    notes = Notes(root, archive_dir)
    found: list[tuple[str, int, str]] = []
    for rel in rels:
        if rel.startswith((SESSIONS + "/", archive)) or not rel.endswith((".md", ".markdown")):
            continue
        text = read_text(root, rel)
        if text is None or not ("- " in text or "* " in text or "+ " in text):
            continue
        found += [(rel, line, message) for line, message in unreadable_lines(text)]
        for c in contradictions(text, notes):
            says = ", ".join(f"{c.key}: {value}" for value in c.says)
            found.append(
                (
                    rel,
                    c.line,
                    f"'{c.shown}' cites {c.source}, which says {says} instead: the citation no longer supports "
                    "the value; if a person changed it, replace the citation with (as of YYYY-MM-DD), else restore "
                    "the value the note gives",
                )
            )
    return found
