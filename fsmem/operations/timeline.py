"""`timeline`: every value of a subject's keys in time order, with its date, its source and who wrote it.

The subject is named as a note heading names it (`people/Nadia Okafor`, `topic/Build`), by
a title or alias of an existing document, or by the document's path. The values are the
lines of the document and of its history file (`fsmem.format.history_file`, which holds
every superseded value the document no longer shows), so the answer needs no git, and a
value whose source note is outside the caller's scope is left out. A value its cited note
no longer supports was edited by hand: git blame, where there is history, says who and when.
"""

from __future__ import annotations

from pathlib import Path

from fsmem import format as fmt
from fsmem.budget import echo
from fsmem.errors import FsmemError, InvalidArgument, NotFound
from fsmem.format import facts as F
from fsmem.format.history_file import history_path
from fsmem.format.valid_time import file_facts
from fsmem.operations.core import Core, existing
from fsmem.query.timeline import TimelineResult, entries_of, page_of
from fsmem.store import paths
from fsmem.store.catalog import EXACT_COUNT_LIMIT
from fsmem.store.paths import relative


def timeline(
    memory: Core,
    subject: str,
    key: str | None = None,
    *,
    offset: int = 0,
    max_results: int | None = None,
    max_tokens: int | None = None,
) -> TimelineResult:
    """Every value each key (or `key` alone) of `subject`'s document has had, oldest first, within the budget."""
    if key is not None and not F.is_key(key):
        raise InvalidArgument(f"{echo(key)} is not a key: one to four lowercase words, such as 'employer'")
    budget = memory.budget.narrowed(max_tokens, max_results)
    target = _document(memory, subject)
    rel = relative(memory.root, target)
    if target.stat().st_size > EXACT_COUNT_LIMIT:
        raise InvalidArgument(f"{rel} is too large to read its facts; read it in parts with read")
    text = fmt.decode(paths.read_regular(target))[0]
    scope = memory.scope
    facts = [(rel, fact) for fact in file_facts(text, rel)]
    older, older_text = _history_facts(memory, rel)
    facts += [(history_path(rel), fact) for fact in older]
    edits = _edits(memory, {rel: text, history_path(rel): older_text})
    writers: dict[str, str | None] = {}

    def writer(source: str) -> str | None:
        if source not in writers:
            writers[source] = _writer(memory, source)
        return writers[source]

    shown = (lambda source: scope.contains(source)) if scope is not None else _always
    entries = entries_of(facts, key, writer, shown, edits)
    return page_of(
        subject,
        rel,
        entries,
        memory.tokens.count,
        offset=offset,
        max_results=budget.max_results,
        max_tokens=budget.max_tokens,
    )


def _history_facts(memory: Core, rel: str) -> tuple[list, str]:
    """The keyed facts of the document's history file and its text (none when there is none, or it lies outside
    the scope)."""
    where = history_path(rel)
    if rel == where or (memory.scope is not None and not memory.scope.contains(where)):
        return [], ""
    try:
        path = paths.resolve(memory.root, where, want="file")
        if path.stat().st_size > EXACT_COUNT_LIMIT:
            raise InvalidArgument(f"{where} is too large to read its facts; read it in parts with read")
        text = fmt.decode(paths.read_regular(path))[0]
    except (FileNotFoundError, NotFound):
        return [], ""
    return file_facts(text, where), text


def _edits(memory: Core, texts: dict[str, str]) -> dict[tuple[str, int], tuple[str | None, str | None]]:
    """(file, line) -> (who, when) of each fact line a person changed after its cited note; (None, None)
    without history, or for an edit not committed yet. A cited note outside the scope is not read."""
    from fsmem.query.fact_check import Notes, contradictions

    scope = memory.scope
    notes = Notes(memory.root, memory.config.consolidate.archive_dir, contains=scope.contains if scope else None)
    edits: dict[tuple[str, int], tuple[str | None, str | None]] = {}
    for rel, text in texts.items():
        lines = [c.line for c in contradictions(text, notes)] if text else []
        if not lines:
            continue
        authors = {}
        if memory.history is not None:
            from fsmem.history.queries import line_authors
            from fsmem.history.view import HistoryView

            authors = line_authors(HistoryView(memory.history, scope), rel, lines)
        for line in lines:
            found = authors.get(line)
            edits[(rel, line)] = (found.agent, found.date) if found is not None else (None, None)
    return edits


def _always(_source: str) -> bool:
    return True


def _document(memory: Core, subject: str) -> Path:
    """The document `subject` names: a heading's `kind/Name`, a path, or a title or alias it matches.

    A name (not a path) of a document outside the scope is answered as the name of no document.
    """
    from fsmem.consolidate import subjects

    named = subject.strip()
    if not named:
        raise InvalidArgument("the subject is empty; name it as a note heading does, such as 'people/Ann Lee'")
    if named.endswith((".md", ".markdown")):
        return existing(memory, named, "file")
    kinded = subjects.kinded(named)
    if kinded is not None:
        try:
            return existing(memory, kinded.path, "file")
        except NotFound:  # OutOfScope too: a kinded name is a name, not a path
            raise NotFound(
                f"no document for {echo(named)} ({kinded.path} does not exist); list files with ls"
            ) from None
    threshold = memory.config.consolidate.subject_match_threshold
    documents = subjects.directory(memory.root)
    if memory.scope is not None:  # outside its scope nothing exists: no title or alias there is a match
        documents = [entry for entry in documents if memory.scope.contains(entry.path)]
    found = subjects.match(named, documents, threshold)
    if found is None:
        raise NotFound(f"no entity or topic document is named {echo(named)}; list files with ls")
    return existing(memory, found.path, "file")


def _writer(memory: Core, source: str) -> str | None:
    """Who wrote a note: its `agent` field, else its `session` (the note as archived too); None for a document."""
    if not source.startswith("sessions/"):
        return None
    archive = memory.config.consolidate.archive_dir.strip("/")
    for rel in (source, f"{archive}/{source[len('sessions/') :]}"):
        try:
            path = paths.resolve(memory.root, rel, want="file")
            with open(path, "rb") as handle:
                head = fmt.decode(handle.read(16384))[0]
        except (OSError, FsmemError):
            continue
        front = fmt.split(head).front_matter
        for name in ("agent", "session"):
            value = front.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None
    return None
