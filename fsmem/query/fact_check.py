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

import contextlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem import format as fmt
from fsmem.format import facts as F, secrets
from fsmem.format.valid_time import SESSIONS
from fsmem.query.as_of import read_text
from fsmem.state_files import read_state
from fsmem.store.cache import RACY_NS
from fsmem.store.files import atomic_write, state_dir
from fsmem.store.paths import STATE_DIR

FACT_SECTIONS = ("facts", fmt.SUPERSEDED_HEADING.lower())
_LABEL = re.compile(r"^[^:\s][^:]{0,59}:(?!//)")  # a fact's shape: a short label, then a colon (not a URL's)
_CITATION_START = re.compile(rf"(?:^| )\(\[?(?:\d{{4}}-\d{{2}}-\d{{2}}|{F.UNDATED})\b.*\)$")
_LINKED_PATH = re.compile(r"\]\(([^)\s]+)\)")  # a Markdown link's target
_SHOWN = 80  # characters of a line a message quotes
CACHE_FILE = "facts.json"
CACHE_VERSION = 3  # 2: values compared in one Unicode form (facts.normalize_value); 3: the notes linked


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


def body_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line, text) of the body's lines outside fenced code, without parsing the YAML: a check of every
    document in the memory reads each once, and the front matter says nothing about its facts."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].lstrip(fmt.BOM).rstrip() == fmt.FENCE:
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
    out = []
    in_code = False
    for index in range(start, len(lines)):
        line = lines[index]
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
        elif not in_code:
            out.append((index + 1, line))
    return out


Scan = tuple[list[tuple[int, str]], list[tuple[int, str, str | None, list[str]]], dict[str, list[int]]]


def scan(text: str) -> Scan:
    """One pass over a document: (line, message) of each fact line it cannot read (see the module's doc),
    (line, key, value, the notes it cites first and as last confirmation) of each cited keyed fact, and each
    path a bullet links (a citation's notes, of facts and observations) with its first line and how many link it."""
    unreadable: list[tuple[int, str]] = []
    cited: list[tuple[int, str, str | None, list[str]]] = []
    linked: dict[str, list[int]] = {}
    section = ""
    for number, line in body_lines(text):
        if line[:1] == "#":
            heading = fmt.HEADING.match(line)
            if heading and len(heading.group(1)) <= 2:
                section = heading.group(2).strip().lower() if len(heading.group(1)) == 2 else ""
            continue
        if not F.is_bullet(line):
            continue
        fact = F.parse_fact(line) if ":" in line else None
        if section in FACT_SECTIONS:
            message = _unreadable(line, section, fact)
            if message:
                unreadable.append((number, message))
        if "](" in line:  # a citation links its notes; their paths, with the first line and the count of each
            for target in _LINKED_PATH.findall(line):
                row = linked.setdefault(F.root_path(target), [number, 0])
                row[1] += 1
        if fact is None or fact.provenance is None:
            continue
        sources = [fact.provenance.sources[0]]
        confirmed = fact.provenance.confirmed
        if confirmed is not None and confirmed.source not in sources:
            sources.append(confirmed.source)
        value = fact.value
        if value is not None and secrets.scan(value):  # compared as the consolidator writes it, never kept as is
            value = secrets.redact(value)
        cited.append((number, fact.key, value, sources))
    return unreadable, cited, linked


def unreadable_lines(text: str) -> list[tuple[int, str]]:
    """(line, message) of each fact line of a document that the fact rule cannot read (see the module's doc)."""
    return scan(text)[0]


def _unreadable(line: str, section: str, fact: F.KeyedFact | None) -> str | None:
    if fact is None:
        if not _LABEL.match(line[2:].strip()):
            return None  # prose under the heading, not a fact gone wrong
        heading = "## " + ("Facts" if section == "facts" else fmt.SUPERSEDED_HEADING)
        return (
            f"{_quote(line)} under {heading} is not a keyed fact, so consolidation, timeline and as_of pass it by: "
            "a key is one to four lowercase words (letters, digits, _ or -) followed by ': ' and a value, "
            "such as '- phone: 555 0100'"
        )
    if fact.bad_date:
        return f"{_quote(line)}: '(as of {fact.bad_date})' is not a date, so the fact is read undated; write YYYY-MM-DD"
    if fact.provenance is None and fact.value is not None and _CITATION_START.search(fact.value):
        return (
            f"{_quote(line)}: its citation cannot be read (a date that is no calendar date, or a path with spaces), so "
            "it is read as part of the value; write it as ([YYYY-MM-DD](path of the note)) or (as of YYYY-MM-DD)"
        )
    return None


def _quote(line: str) -> str:
    line = line.rstrip("\r\n")
    if secrets.scan(line):  # check reports the secret itself; its other messages never repeat it
        line = secrets.redact(line)
    return repr(line if len(line) <= _SHOWN else line[: _SHOWN - 1] + "…")


Said = dict[str, dict[str, str]]  # key -> normalised value -> the value as the note writes it


def contradictions(
    text: str, note_values: Callable[[str], Said | None], cited: list | None = None
) -> list[Contradiction]:
    """The fact lines of a document whose cited note gives their key only other values.

    `note_values(source)` is what a cited note (`sessions/…`) says (None: no such note, or it cannot be read);
    `cited` is the document's cited facts when `scan` has read them already.
    """
    if cited is None:
        if "](" not in text and SESSIONS + "/" not in text:
            return []
        cited = scan(text)[1]
    found: list[Contradiction] = []
    for number, key, value, sources in cited:
        for source in sources:
            said = note_values(source) if source.startswith(SESSIONS + "/") else None
            if said is None or key not in said:
                continue
            wanted = F.RETRACTED if value is None else F.normalize_value(value)
            if wanted not in said[key] and _digest(wanted) not in said[key]:
                found.append(Contradiction(number, key, value, source, tuple(sorted(said[key].values()))))
                break
    return found


def note_values(text: str, source: str) -> Said:
    """What a session note gives each key. A secret is kept as the consolidator redacts it, and as a digest of
    itself (never as it is): a document may show either, and this is cached on disk and quoted by `check`."""
    said: Said = {}
    for _number, line in body_lines(text):
        fact = F.parse_fact(line) if ": " in line and F.is_bullet(line) else None
        if fact is None:
            continue
        values = said.setdefault(fact.key, {})
        if fact.value is None:
            values[F.RETRACTED] = F.RETRACTED
        elif secrets.scan(fact.value):
            shown = secrets.redact(fact.value)
            values.setdefault(_digest(F.normalize_value(fact.value)), shown)
            values.setdefault(F.normalize_value(shown), shown)
        else:
            values.setdefault(F.normalize_value(fact.value), fact.value)
    return said


def _digest(value: str) -> str:
    import hashlib

    return "#" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Scanned:
    """Each file's scan (a document's `scan`, a note's `note_values`), kept in `.fsmem/cache/facts.json` by
    (mtime, size, inode, ctime), so that a check of a memory whose files did not change parses none of them: at
    5,000 documents and 2,000 notes the parse cost several times the rest of `check`."""

    def __init__(self, root: Path):
        self.root = root
        self.path = Path(root, STATE_DIR, "cache", CACHE_FILE)
        try:
            data = json.loads(read_state(self.path).decode("utf-8"))
        except (OSError, ValueError):
            data = {}
        rows = data.get("files") if isinstance(data, dict) and data.get("version") == CACHE_VERSION else None
        self.rows: dict[str, list] = rows if isinstance(rows, dict) else {}
        self.seen: dict[str, list] = {}
        self.changed = False

    def get(self, rel: str, make: Callable[[str], Any]) -> Any:
        """`make(text)` of file `rel`, from the cache while the file is unchanged; None when it cannot be read."""
        try:
            stat = os.lstat(os.path.join(self.root, rel))
        except OSError:
            return None
        stamp = [stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns]  # ctime: an mtime put back
        row = self.rows.get(rel)
        if isinstance(row, list) and len(row) == 2 and row[0] == stamp:
            self.seen[rel] = row
            return row[1]
        text = read_text(self.root, rel)
        if text is None:
            return None
        value = make(text)
        if time.time_ns() - stat.st_mtime_ns > RACY_NS:  # a file written just now may change within its tick
            self.seen[rel] = [stamp, value]
            self.changed = True
        return value

    def save(self, whole: bool) -> None:
        """Keep what was read; `whole` (every file was looked at) drops the rows of files gone since."""
        if not self.changed and not (whole and len(self.seen) < len(self.rows)):
            return
        rows = self.seen if whole else {**self.rows, **self.seen}
        payload = json.dumps({"version": CACHE_VERSION, "files": rows}, ensure_ascii=False)
        with contextlib.suppress(OSError):
            target = state_dir(self.root, "cache") / CACHE_FILE
            atomic_write(target, payload.encode("utf-8"), durable=False, root=self.root, generated=True)


class Notes:
    """What the session notes a memory's documents cite say, each read once: at its `sessions/` path, else
    where the archive keeps it. A note `contains` refuses (outside the caller's scope) is not read."""

    def __init__(
        self,
        root: Path,
        archive_dir: str,
        scanned: Scanned | None = None,
        contains: Callable[[str], bool] | None = None,
    ):
        self.root = root
        self.archive = archive_dir.strip("/")
        self.scanned = scanned
        self.contains = contains
        self._said: dict[str, Said | None] = {}
        self._there: dict[str, bool] = {}

    def missing(self, linked: dict[str, list[int]]) -> list[tuple[int, str]]:
        """(line, message) per session note a document links (`scan`: path -> [first line, lines]) that is
        neither at its `sessions/` path nor where the archive keeps it: a dangling citation. One lstat per note
        of the memory at most, each looked at once."""
        found = []
        for path, (line, count) in linked.items():
            if path.startswith(self.archive + "/"):
                source = f"{SESSIONS}/{path[len(self.archive) + 1 :]}"
            elif path.startswith(SESSIONS + "/"):
                source = path
            else:
                continue
            places = (source, f"{self.archive}/{source[len(SESSIONS) + 1 :]}")
            if source not in self._there:
                if self.contains is not None and not all(self.contains(rel) for rel in places):
                    self._there[source] = True  # outside the caller's scope: not said either way
                else:
                    self._there[source] = any(os.path.lexists(os.path.join(self.root, rel)) for rel in places)
            if not self._there[source]:
                more = f" (and {count - 1} more line(s) below)" if count > 1 else ""
                found.append(
                    (
                        line,
                        f"its citation links {path}{more}, a session note that is not there (nor at "
                        f"{places[1] if path == source else source}): the line has lost its source; if the note "
                        f"was moved, move it back with: fsmem mv NEW-PATH {path}; if it was removed, bring it back "
                        f"with: fsmem restore {path} --at REV (a commit from fsmem log {path})",
                    )
                )
        return found

    def __call__(self, source: str) -> Said | None:
        if source not in self._said:
            self._said[source] = self._read(source)
        return self._said[source]

    def _read(self, source: str) -> Said | None:
        for rel in (source, f"{self.archive}/{source[len(SESSIONS) + 1 :]}"):
            if self.contains is not None and not self.contains(rel):
                continue
            if self.scanned is not None:
                said = self.scanned.get(rel, lambda text: note_values(text, source))
            else:
                text = read_text(self.root, rel)
                said = None if text is None else note_values(text, source)
            if said is not None:
                return said
        return None


def problems(
    root: Path,
    rels: list[str],
    archive_dir: str,
    *,
    contains: Callable[[str], bool] | None = None,
    whole: bool = False,
) -> list[tuple[str, int, str]]:
    """`check`'s problems of keyed facts in the documents among `rels`: unreadable lines, unsupported citations.
    `contains` is the caller's scope (a note outside it is not read); `whole`: `rels` are every file."""
    archive = archive_dir.strip("/") + "/"
    scanned = Scanned(root)
    notes = Notes(root, archive_dir, scanned, contains)
    found: list[tuple[str, int, str]] = []
    for rel in rels:
        if rel.startswith((SESSIONS + "/", archive)) or not rel.endswith((".md", ".markdown")):
            continue
        result = scanned.get(rel, lambda text: list(scan(text)) if _may_hold_facts(text) else [[], [], {}])
        if not result:
            continue
        unreadable, cited, linked = result
        found += [(rel, line, message) for line, message in unreadable]
        found += [(rel, *missing) for missing in notes.missing(linked)]
        for c in contradictions("", notes, cited):
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
    scanned.save(whole)
    return found


def _may_hold_facts(text: str) -> bool:
    return "- " in text or "* " in text or "+ " in text


def twin_notes(root: Path, rels: list[str], archive_dir: str) -> list[tuple[str, int, str]]:
    """A problem per note under `sessions/` whose name the archive holds too: both are cited by one path, and
    the citations link the archived one, which lacks the other's lines. Found from the paths alone; only such
    a note is read (a look at its front matter), to say whether `mv` may still rename it."""
    from fsmem.store.note_status import consolidated_note_in
    from fsmem.store.writing import PART_MARK

    archive = archive_dir.strip("/")
    listed = set(rels)
    found = []
    for rel in rels:
        if not rel.startswith(SESSIONS + "/"):
            continue
        archived = f"{archive}/{rel[len(SESSIONS) + 1 :]}"
        if archived not in listed:
            continue
        if consolidated_note_in(root, rel, archive_dir) is None:
            fix = f"name it apart before the next consolidate: fsmem mv {rel} {rel[: -len('.md')]}{PART_MARK}2.md"
        else:
            fix = f"its lines are in the documents, cited as {archived}: leave both notes as they are"
        found.append(
            (
                rel,
                1,
                f"the archive holds a note of the same name ({archived}): both are cited by one path, and "
                f"citations link the archived one, which lacks this note's lines; {fix}",
            )
        )
    return found
