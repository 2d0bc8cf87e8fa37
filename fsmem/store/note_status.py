"""Stale lines of session notes: keyed facts a document has since moved under `## Superseded`.

The consolidator copies a note's keyed facts into entity and topic documents
and leaves the note as it was. When a later fact replaces one, the document
moves the old line under `## Superseded`, citing the note it came from; the
note itself still says `- employer: US Navy`, unflagged. These lines are
superseded too, and grep, read and search hide them by default.

Contract of `superseded_note_lines` (the one place this rule lives, so a new
citation format needs one change here):

- in: note paths (relative, under `sessions/`) with their text, and a way to
  get the superseded line ranges of documents; only notes that carry a
  `consolidated:` field (the consolidator has read them) can be cited;
- a note line is superseded when it is a keyed fact `- key: value` (or `*`, `+`) and a line
  inside a document's superseded ranges is the same key with the same value
  (case, spacing and Unicode's canonical forms aside) and cites that note as a source (its first source,
  any further one, or its `confirmed` source);
- out: per note, the 1-based line ranges to hide (a note with none is left out);
- with `ended_by` (a stamp: an `as_of` answer), only the lines whose value the document says was replaced by
  then (its `to` at or before it) count.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from fsmem import format as fmt
from fsmem.format.facts import is_bullet, normalize_value, parse_fact

NOTES_FOLDER = "sessions/"
Ranges = list[tuple[int, int]]


def is_note(rel: str) -> bool:
    return rel.startswith(NOTES_FOLDER)


def was_consolidated(text: str) -> bool:
    """The note carries a `consolidated:` field: its facts went into documents at least once."""
    return f"\n{fmt.CONSOLIDATED_FIELD}:" in text[: text.find("\n---", 3) + 1] if text.startswith("---") else False


def may_be_consolidated(head: str) -> bool:
    """False only when `head`, a note's first bytes, holds its whole front matter and no `consolidated:` field.

    Most notes that match a grep were never consolidated; this spares reading the rest of them.
    """
    if not head.startswith("---"):
        return False
    end = head.find("\n---", 3)
    return end == -1 or f"\n{fmt.CONSOLIDATED_FIELD}:" in head[: end + 1]


def note_facts(text: str) -> list[tuple[int, str, str]]:
    """(line, key, normalised value) of every keyed fact in a consolidated note's body, outside fenced code."""
    if not was_consolidated(text):
        return []
    doc = fmt.split(text)
    found = []
    in_code = False
    for number, line in enumerate(doc.body.splitlines(), start=doc.body_start_line):
        if fmt.FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if in_code or not is_bullet(line) or ": " not in line:
            continue
        fact = parse_fact(line)
        if fact is not None and fact.value is not None:
            found.append((number, fact.key, normalize_value(fact.value)))
    return found


def superseded_note_lines(
    root: Path,
    notes: dict[str, str],
    document_ranges: Callable[[list[str]], dict[str, Ranges]],
    ended_by: str | None = None,
) -> dict[str, Ranges]:
    """Per note, the lines of its keyed facts that a document cites from it under `## Superseded`."""
    facts = {rel: note_facts(text) for rel, text in notes.items() if is_note(rel)}
    facts = {rel: found for rel, found in facts.items() if found}
    if not facts:
        return {}
    citing = lines_citing(root, facts)
    if not citing:
        return {}
    ranges = document_ranges(sorted(citing))
    cited: set[tuple[str, str, str]] = set()
    for doc, lines in citing.items():
        spans = ranges.get(doc) or []
        for number, text in lines:
            if not fmt.in_ranges(number, spans):
                continue
            fact = parse_fact(text)
            if fact is None or fact.value is None or fact.provenance is None:
                continue
            if ended_by is not None and not (fact.provenance.to and fact.provenance.to <= ended_by):
                continue
            sources = set(fact.provenance.sources)
            if fact.provenance.confirmed is not None:
                sources.add(fact.provenance.confirmed.source)
            for source in sources & facts.keys():
                cited.add((source, fact.key, normalize_value(fact.value)))
    out: dict[str, Ranges] = {}
    for rel, found in facts.items():
        hidden = [(number, number) for number, key, value in found if (rel, key, value) in cited]
        if hidden:
            out[rel] = hidden
    return out


def lines_citing(root: Path, notes: Iterable[str]) -> dict[str, list[tuple[int, str]]]:
    """(line number, text) of the lines of documents (memory files outside sessions/) that name a note."""
    from fsmem.store.rg import find_rg

    patterns: list[str] = []
    for rel in notes:
        patterns += ["--regexp", rel]
    proc = subprocess.run(
        [
            find_rg(),
            "--no-config",
            "--no-ignore",
            "--fixed-strings",
            "--line-number",
            "--with-filename",
            "--null",
            "--no-heading",
            "--glob",
            "*.md",
            "--glob",
            "*.markdown",
            "--glob",
            f"!/{NOTES_FOLDER}",
            *patterns,
            "--",
            "./",
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    found: dict[str, list[tuple[int, str]]] = {}
    for raw in proc.stdout.decode("utf-8", "replace").splitlines():
        name, sep, rest = raw.partition("\0")
        number, colon, text = rest.partition(":")
        if not sep or not colon or not number.isdigit():
            continue
        rel = name[2:] if name.startswith("./") else name
        found.setdefault(rel, []).append((int(number), text))
    return found


def consolidated_note_in(root: Path, rel: str, archive_dir: str) -> str | None:
    """The first session note at or under memory path `rel` (in `sessions/` or the archive) that was consolidated,
    else None: documents cite such a note by its path, which also gives its date and its place among the notes
    (`fsmem.consolidate`), so a move would leave their citations linking nothing. A folder that neither lies in
    nor holds a folder of notes is not walked; the walk stops at the first consolidated note."""
    import os

    folders = (NOTES_FOLDER.rstrip("/"), archive_dir.strip("/"))
    rel = rel.strip("/")
    if not any(rel == f or rel.startswith(f + "/") or f.startswith(rel + "/") or not rel for f in folders):
        return None
    full = os.path.join(root, rel) if rel else os.fspath(root)
    if os.path.islink(full) or not os.path.isdir(full):
        return rel if _consolidated_file(full) and rel.startswith(tuple(f + "/" for f in folders)) else None
    for current, dirs, names in os.walk(full):  # a link to a folder is not entered, as a move takes it as itself
        dirs.sort()
        for name in sorted(names):
            inner = os.path.relpath(os.path.join(current, name), root).replace(os.sep, "/")
            if inner.startswith(tuple(f + "/" for f in folders)) and _consolidated_file(os.path.join(current, name)):
                return inner
    return None


def _consolidated_file(full: str) -> bool:
    """A regular Markdown file (never a link: it moves as itself) whose front matter holds `consolidated:`."""
    import os

    if not full.endswith((".md", ".markdown")) or os.path.islink(full):
        return False
    try:
        with open(full, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
            if may_be_consolidated(head) and head.find("\n---", 3) == -1:
                head += handle.read().decode("utf-8", "replace")
    except OSError:
        return False
    return was_consolidated(head)


def move_refused(note: str, moved: str) -> str:
    """Why `mv` (every face) refuses to move `moved`, which is or holds the consolidated note `note`."""
    return _cited(note, moved, "moving") + (
        "moved (consolidate.archive moves consolidated notes and rewrites the links to them)"
    )


def remove_refused(note: str, removed: str) -> str:
    """Why `rm` (every face) refuses to remove `removed`, which is or holds the consolidated note `note`, as
    `mv` refuses to move it: either would leave the documents' citations of it linking nothing."""
    return _cited(note, removed, "removing") + (
        "removed (edit the note to take a line out of it; history keeps every version either way)"
    )


def _cited(note: str, path: str, doing: str) -> str:
    held = "" if note == path else f" holds {note}, which"
    return (
        f"{path}{held} is a session note that was consolidated: documents cite it by its path, which also dates "
        f"it and orders it among the notes, so {doing} it would leave their citations linking nothing; nothing was "
    )
