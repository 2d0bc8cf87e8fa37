"""One memory file as search sees it: its stamp, its rows and their analysed terms, its document's names.

Pure of the index: `parse_file` turns a file's text into what the index
stores (`Parsed`), `read_file` reads a file so that the stamp it records is
the one its bytes had, and with it their digest. The index
(`fsmem.search.index`) keeps these in SQLite; nothing here knows SQL.

This module is long because a file's analysis for search is one pass, from
its text to its rows, terms, names and documents (`parse_file` and its
helpers), beside the reading that feeds it; that reading (`read_file`,
`parse_files`, `ParsedTask`) is what moves to a module of its own when this
one grows again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format.facts import Provenance, split_provenance
from fsmem.format.rows import Row, document_rows, plain_columns, plain_sections, sections_rows, subject_of
from fsmem.format.valid_time import note_date
from fsmem.search import postings, raw_rows
from fsmem.search.analyzer import Analyzer, canonical
from fsmem.search.packed_rows import pack_rows, unpack_rows
from fsmem.store.catalog import EXACT_COUNT_LIMIT
from fsmem.store.note_status import is_note, was_consolidated
from fsmem.store.paths import ROOT_README, read_stamped

# C where built (tests/test_native.py)
ascii_sections = postings._native.plain_sections if postings._native else plain_sections

Stamp = tuple[int, int, int, int]  # mtime_ns, size, inode, ctime_ns
GENERATED_INDEX = "INDEX.md"  # written by consolidate; a table of contents, not memory to rank
ROW_BITS = 20  # row id = file id << ROW_BITS | ordinal (a file's first 1,048,576 rows are indexed)
MAX_ROWS = 1 << ROW_BITS
SUPERSEDED, LINKED = 1, 2  # row flags: hidden by default; same section and source as the next row
MONTHS = (
    "January February March April May June July August September October November December".split()
)  # English, as the analyzer's stemmer and stop words are


def stamp_of(stat: os.stat_result) -> Stamp:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns)


def source_of(provenance: Provenance | None) -> str | None:
    """The session note a consolidated row cites first, so rows from one session score as one document.

    A consolidated entity file gathers many sessions, and one session feeds many
    files; scored per file, every row of a speaker would share one document
    score. Rows citing the same note form one document, across files; rows
    without a citation form their file's.
    """
    return provenance.sources[0] if provenance and provenance.sources else None


def date_words(date: str | None, *, year: bool) -> str:
    """A row's date as a question names it: "in July", "on 8 May, 2023". Its citation writes 2023-07-15,
    whose year and day are terms already; a session note's rows have their note's date and no digits of it."""
    if not date or len(date) < 10 or not date[5:7].isdigit() or not 1 <= int(date[5:7]) <= 12:
        return ""
    month = MONTHS[int(date[5:7]) - 1]
    return f"{month} {int(date[8:10])} {date[:4]}" if year else month


def document_names(front_matter: dict[str, Any], title: str | None) -> list[str]:
    """What a document is called: its title, aliases and entity or topic name (without the kind)."""
    names = [title] if title else []
    aliases = front_matter.get("aliases")
    if isinstance(aliases, str):
        aliases = [a.strip() for a in aliases.split(",")]
    if isinstance(aliases, list):
        names.extend(str(a).strip() for a in aliases if a is not None and str(a).strip())
    for key in ("entity", "topic"):
        value = front_matter.get(key)
        if value:
            names.append(str(value).split("/", 1)[-1].strip())
    return names


def _meta_fields(front_matter: dict[str, Any]) -> tuple[Any, ...]:
    importance = front_matter.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        importance = None
    tags = fmt.normalize_tags(front_matter.get("tags"))
    return (
        str(front_matter["type"]) if front_matter.get("type") is not None else None,
        json.dumps(tags, ensure_ascii=False) if tags else None,
        str(front_matter["updated"]) if front_matter.get("updated") is not None else None,
        float(importance) if importance is not None else None,
    )


@dataclass
class Parsed:
    """One file as just read, ready to be written into the index: its rows as columns, their lines and flags
    packed as the index stores them (`pack_rows`), so that the command writing a cold build's files, one
    process for all the workers' output, takes each file's rows as they come rather than one tuple a row."""

    path: str
    stamp: Stamp
    meta: tuple[Any, ...]  # type, tags (JSON), updated, importance
    names: str  # the document's names, as terms
    texts: list[str]  # per row: its terms
    contexts: list[str]  # per row: its headings' terms
    lines: bytes  # per row: line << 2 | flags (`pack_rows`)
    groups: bytes | None  # per row: its cited note, 1-based in `sources` (0: none); None where no row cites one
    superseded: list[int]  # the ordinals of the rows flagged SUPERSEDED
    sources: list[str]  # the session notes its rows cite
    terms: str  # every distinct term of the file, space separated
    # per cited note (group 1, 2, ...): the terms of its rows without their citations; the uncited rows'
    # document is their text's terms (`documents`)
    docs: list[str] | None = None
    cited: bool = False
    # the documents with their terms counted (`postings.counted`), where the file was parsed: `parse_file` sets
    # it (and drops `docs`), so a cold build's workers count and the command writing their files adds up
    counted: list[postings.Counted] | None = None
    # of the bytes the rows were made from (`content_digest`), where the file was read (`read_file`): a file read
    # again with the same bytes keeps its rows (`fsmem.search.index`)
    digest: bytes | None = None
    # the rows' texts as the file has them, each after `raw_rows.RAW` (their terms not cut yet, `counted` None): the
    # writing connection cuts and counts them (`fsmem.search.raw_rows`); set only for a build that asked for it
    raw: bool = False

    @classmethod
    def of_rows(
        cls,
        path: str,
        stamp: Stamp,
        meta: tuple[Any, ...],
        names: str,
        rows: list[tuple[int, int, int, str, str]],
        sources: list[str],
        terms: str,
        docs: list[str] | None = None,
        cited: bool = False,
    ) -> Parsed:
        """A file from its rows, each (line, flags, group, terms, context)."""
        lines, flags, groups, texts, contexts = [list(column) for column in zip(*rows, strict=True)] or [[]] * 5
        packed, packed_groups = pack_rows(lines, flags, groups if sources or any(groups) else None)
        superseded = [n for n, flag in enumerate(flags) if flag & SUPERSEDED]
        return cls(
            path, stamp, meta, names, texts, contexts, packed, packed_groups, superseded, sources, terms, docs, cited
        )

    @property
    def rows(self) -> list[tuple[int, int, int, str, str]]:
        """The rows as (line, flags, group, terms, context), unpacked (for tests and readers; the index writes
        the columns)."""
        lines, groups = unpack_rows(self.lines or None, self.groups, len(self.texts))
        return [
            (value >> 2, value & 3, groups[n] if groups is not None else 0, text, context)
            for n, (value, text, context) in enumerate(zip(lines, self.texts, self.contexts, strict=True))
        ]

    def documents(self) -> list[str]:
        """Per group (0: the uncited rows): the terms of its document, "" where it has none."""
        texts = self.texts
        if self.groups is not None:
            groups = unpack_rows(self.lines, self.groups, len(texts))[1] or ()
            texts = [text for text, group in zip(texts, groups, strict=True) if group == 0]
        return [" ".join(filter(None, texts)), *(self.docs or [])]

    def counted_documents(self) -> list[postings.Counted]:
        """The documents that have terms, counted: as parsed, or counted now (a Parsed made by hand)."""
        if self.counted is None:
            return postings.counted([(n, body) for n, body in enumerate(self.documents()) if body])
        return self.counted


def is_ranked(rel: str, text: str) -> bool:
    """INDEX.md only points at documents, and a consolidated note's content now lives in its entity and
    topic documents: ranking them too would spend the budget on copies, except for its fenced blocks,
    which consolidation never files (a saved or imported conversation: `ranked_rows`). The memory's own
    README.md holds its conventions for humans, not memory."""
    if rel in (GENERATED_INDEX, ROOT_README):
        return False
    return not (consolidated_note(rel, text) and not _FENCE_LINE.search(text))


_FENCE_LINE = re.compile(r"^[ \t]{0,3}(```|~~~)", re.M)


def consolidated_note(rel: str, text: str) -> bool:
    # the field's text first, in the front matter `fmt.is_consolidated` reads it from: most notes have none, and a
    # cold build spares hashing their bodies, and looking for it through them (twice a file)
    if not rel.startswith("sessions/") or not text.startswith("---\n"):
        return False
    end = text.find("\n---\n", 3)
    return end != -1 and _CONSOLIDATED_MARK in text[3 : end + 1] and fmt.is_consolidated(text)


_CONSOLIDATED_MARK = f"\n{fmt.CONSOLIDATED_FIELD}: sha256-"  # what `fmt.is_consolidated` looks for, at least


def ranked_rows(rel: str, text: str, rows: list[Row]) -> list[Row]:
    """The rows of a ranked file that search ranks: all of them, but of a consolidated note only its fenced
    blocks, the part that lives nowhere else. parse_file and the rows read back agree on it, row for row."""
    if not consolidated_note(rel, text):
        return rows
    return [row for row in rows if fmt.FENCED_CODE.match(row.text)]


def parse_file(
    rel: str,
    text: str,
    stamp: Stamp,
    analyzer: Analyzer,
    vocabulary: set[str] | None = None,
    *,
    raw: bool = False,
) -> Parsed:
    """The rows, names and terms of one file's text; its terms are added to `vocabulary` too, if given. With
    `raw`, a file whose rows the writing connection can cut (`fsmem.search.raw_rows.raw_texts`) keeps them as
    they are (`Parsed.raw`): their terms, and its document's counts, are the command's to take."""
    doc = fmt.split(text)
    meta = _meta_fields(doc.front_matter)
    if not is_ranked(rel, text):
        return Parsed(rel, stamp, meta, "", [], [], b"", None, [], [], "")
    plain = None if consolidated_note(rel, text) else plain_columns(doc, ascii_sections)
    rows: list[Row] = []
    if plain is not None:  # most files: their rows in columns, without a Row each (fsmem.format.rows)
        plain_title, sections = plain
        texts = list(itertools.chain.from_iterable(section[4] for section in sections))
        # a row's text is a stripped run of the body's: no ")" in the body, no citation (most files)
        provenances: list[Provenance | None] = _provenances(texts) if ")" in doc.body else [None] * len(texts)
        if len(texts) > MAX_ROWS or any(provenances):  # Rows after all, whose texts are these
            rows = sections_rows(rel, plain_title, sections, classify=False)[:MAX_ROWS]
            texts, provenances, plain = texts[:MAX_ROWS], provenances[:MAX_ROWS], None
    else:
        rows = ranked_rows(rel, text, document_rows(rel, doc, classify=False))[:MAX_ROWS]
        texts = [row.text for row in rows]
        provenances = _provenances(texts)
    if texts:
        title = plain_title if plain is not None else rows[0].title
    else:
        title = doc.title or next((h.title for h in fmt.headings(doc.body) if h.level == 1), None)
    names = document_names(doc.front_matter, title)
    names_text = analyzer.text(" ".join(dict.fromkeys(names)))
    known_names = {canonical(n).lower() for n in names}
    row_sources: list[str | None] = (
        [source_of(p) for p in provenances] if any(provenances) else [None] * len(provenances)
    )
    dated_note = (
        note_date(rel, doc.front_matter if isinstance(doc.front_matter, dict) else {}) if is_note(rel) else None
    )
    group_of: dict[str | None, int] = {None: 0}
    bodies: list[list[str]] = [[]]
    terms: set[str] = set(names_text.split())
    # with their citations, as grep and read show them; `terms` takes every one of their terms. Where no row
    # cites a note (most files), the file's one document is its rows' terms and date words: counted here
    counts: Counter[str] | None = None if any(row_sources) else Counter()
    raw_texts = (
        raw_rows.raw_texts(texts, date_words(dated_note, year=True))
        if raw and plain is not None and counts is not None
        else None
    )
    row_terms = raw_texts if raw_texts is not None else analyzer.texts(texts, terms, counts)
    rows_dated: dict[str, int] = {}  # a row's date words -> the rows they are added to
    labels = _Labels(dated_note, known_names, analyzer)
    if plain is not None and counts is not None:  # no row cites a note: a section at a time (most files)
        when = labels.when((labels.note_date, True)) if texts else ""
        if when:
            rows_dated[when] = len(texts)
        if raw_texts is not None:  # each raw row holds its date's words already
            when = ""
        cut: list[tuple[list[int], str, bool, bool]] = []  # per section: lines, context, superseded, linked
        previous = None
        for heads, _subject, superseded_section, section_lines, _texts, _bullets in plain[1]:
            cut.append((section_lines, labels.context(heads), superseded_section, heads == previous))
            previous = heads
        row_texts, contexts, packed, flagged = _row_columns_of(row_terms, when, cut)
        packed_groups, sources = None, []
    else:
        if plain is not None:
            lines = list(itertools.chain.from_iterable(section[3] for section in plain[1]))
            each_row = itertools.repeat  # a section's headings and superseded flag, once per row of it
            row_heads = list(itertools.chain.from_iterable(each_row(s[0], len(s[3])) for s in plain[1]))
            superseded = list(itertools.chain.from_iterable(each_row(s[2], len(s[3])) for s in plain[1]))
        else:
            lines = [row.line for row in rows]
            row_heads = [row.headings for row in rows]
            superseded = [row.superseded for row in rows]
        columns = _Columns(lines, row_heads, superseded, texts, row_terms, provenances, row_sources)
        flags, groups, row_texts, contexts = _row_columns(columns, labels, group_of, bodies, rows_dated)
        flagged = list(itertools.compress(range(len(superseded)), superseded))
        sources = [s for s in group_of if s is not None]
        packed, packed_groups = pack_rows(lines, flags, groups if sources else None)
    # a row's date words and headings' words are its terms too
    terms.update(" ".join([*labels.dated.values(), *labels.contexts.values()]).split())
    docs = [" ".join(filter(None, body)) for body in bodies[1:]]
    cited = is_note(rel) and was_consolidated(text)
    row_fields = (row_texts, contexts, packed, packed_groups, flagged)  # Parsed's, in their order
    parsed = Parsed(rel, stamp, meta, names_text, *row_fields, sources, " ".join(terms), docs, cited)
    if vocabulary is not None:
        vocabulary |= terms
    if raw_texts is not None:
        parsed.raw, parsed.docs = True, None  # its document counted where its rows are cut (`fsmem.search.tables`)
        return parsed
    if counts is not None:
        for when, many in rows_dated.items():
            for term in when.split():
                counts[term] += many
        document = postings.counted_terms(0, counts) if counts else None
        parsed.counted = [document] if document else None if counts else []
    if parsed.counted is None:  # rows that cite notes, or a term FTS5 cuts
        parsed.counted = parsed.counted_documents()
    parsed.docs = None
    return parsed


@dataclass
class _Columns:
    """A file's rows as columns, one entry a row: what `_row_columns` reads of them."""

    lines: list[int]
    headings: list[list[str]]
    superseded: list[bool]
    texts: list[str]  # as the file has them, citations included
    terms: list[str]  # their analysed terms
    provenances: list[Provenance | None]
    sources: list[str | None]  # the session note each cites first


@dataclass
class _Labels:
    """What a row's date and headings become in its terms, each worked out once per file (`dated`,
    `contexts`: kept, since `parse_file` adds their terms to the file's)."""

    note_date: str | None  # a session note's own date, for its rows without a citation
    known_names: set[str]  # the document's names, indexed once for the whole file, not in each context
    analyzer: Analyzer
    # (date, with its year) -> its words' terms: a file's rows share a few dates (a session note's, one)
    dated: dict[tuple[str | None, bool], str] = field(default_factory=dict)
    contexts: dict[tuple[str, ...], str] = field(default_factory=dict)  # headings -> their words' terms

    def when(self, date: tuple[str | None, bool]) -> str:
        words = self.dated.get(date)
        if words is None:
            words = self.dated[date] = self.analyzer.text(date_words(date[0], year=date[1]))
        return words

    def context(self, headings: list[str]) -> str:
        # the level-1 heading and a session note's `## people/Adam Smith` say what the row is about
        key = tuple(headings)
        words = self.contexts.get(key)
        if words is None:
            heads = [h.split("/", 1)[-1] if subject_of(h) else h for h in headings]
            words = self.contexts[key] = self.analyzer.text(
                " ".join(h for h in heads if canonical(h).lower() not in self.known_names)
            )
        return words


def _row_columns(
    rows: _Columns,
    labels: _Labels,
    group_of: dict[str | None, int],
    bodies: list[list[str]],
    rows_dated: dict[str, int],
) -> tuple[list[int], list[int], list[str], list[str]]:
    """The index's rows of one file, a column at a time (flags, groups, terms, contexts): each row's terms with its date's words (its
    citation's date, else its note's), its group (the session note it cites: `group_of`, whose document
    `bodies` gathers the rows' terms without their citations), and its flags, linked to the next row when
    both share their headings and their note. A file whose rows cite nothing (most files) has one date and
    one group for all of them, taken once."""
    n = len(rows.lines)
    if any(rows.provenances):
        whens = [labels.when((p.first, False) if p else (labels.note_date, True)) for p in rows.provenances]
        for when in whens:
            if when:
                rows_dated[when] = rows_dated.get(when, 0) + 1
    else:  # one date for every row: its note's, or none
        when = labels.when((labels.note_date, True)) if n else ""
        whens = [when] * n
        if when:
            rows_dated[when] = n
    terms = [f"{text} {when}".strip() if when else text for text, when in zip(rows.terms, whens, strict=True)]
    groups = [0] * n
    if any(rows.sources):
        for index, (text, source, when) in enumerate(zip(rows.texts, rows.sources, whens, strict=True)):
            group = groups[index] = group_of.setdefault(source, len(group_of))
            if group == len(bodies):
                bodies.append([when] if when else [])
            if source:
                bodies[group].append(labels.analyzer.text(split_provenance(text)[0]))
    flags = [SUPERSEDED if x else 0 for x in rows.superseded]
    contexts: list[str] = []
    at = 0
    for (headings, _source), run in itertools.groupby(zip(rows.headings, rows.sources, strict=True)):
        many = len(list(run))
        contexts += [labels.context(headings)] * many
        flags[at : at + many - 1] = [flag | LINKED for flag in flags[at : at + many - 1]]
        at += many
    return flags, groups, terms, contexts


def row_columns(
    terms: list[str], when: str, sections: list[tuple[list[int], str, bool, bool]]
) -> tuple[list[str], list[str], bytes, list[int]]:
    """The index's columns of a plain body whose rows cite nothing, a section at a time (its rows share its
    context and superseded flag): each row's terms with `when` (its date's terms) after them, its context, the
    rows packed (`pack_rows`) and the ordinals of the superseded rows. `sections`: per section its rows'
    lines, its context, whether superseded, and whether it continues the run of rows before it (the same
    headings: the row before is linked to it). fsmem.search._native.row_columns is its twin, in C
    (tests/test_native.py)."""
    texts = [f"{text} {when}" if text else when for text in terms] if when else list(terms)
    flags: list[int] = []
    contexts: list[str] = []
    flagged: list[int] = []
    for lines, context, superseded, linked in sections:
        if not lines:
            continue
        if linked and flags:
            flags[-1] |= LINKED
        flag = SUPERSEDED if superseded else 0
        if superseded:
            flagged += range(len(flags), len(flags) + len(lines))
        flags += [flag | LINKED] * (len(lines) - 1)
        flags.append(flag)
        contexts += [context] * len(lines)
    if len(flags) != len(terms):
        raise ValueError("row_columns: the sections' lines are not one a row")
    packed, _groups = pack_rows(list(itertools.chain.from_iterable(s[0] for s in sections)), flags, None)
    return texts, contexts, packed, flagged


# C where built (tests/test_native.py)
_row_columns_of = postings._native.row_columns if postings._native else row_columns


def _provenances(texts: list[str]) -> list[Provenance | None]:
    """Each row's citation, or None (only a text that ends with ")" can have one)."""
    return [split_provenance(t)[1] if t.endswith(")") else None for t in texts]


def read_file(
    root: Path,
    rel: str,
    full: str,
    analyzer: Analyzer,
    vocabulary: set[str] | None = None,
    racy_from: int | None = None,
    *,
    raw: bool = False,
) -> Parsed | None:
    """Parse one file, with the stamp taken before the read; None when it vanished or keeps changing. Its
    terms are added to `vocabulary`, if given. Its bytes are digested (`content_digest`) unless `racy_from`
    says the index cannot want them (`digest_wanted`). `raw`: as `parse_file` takes it."""
    for _attempt in range(5):
        try:
            before, data = read_stamped(full, EXACT_COUNT_LIMIT)  # a FIFO named *.md never blocks the build
            if data is None:
                return Parsed(rel, stamp_of(before), (None, None, None, None), "", [], [], b"", None, [], [], "")
            after = os.stat(full)
        except (OSError, FsmemError):
            return None
        if stamp_of(before) == stamp_of(after):
            text, _problems = fmt.decode(data)
            parsed = parse_file(rel, text, stamp_of(before), analyzer, vocabulary, raw=raw)
            if digest_wanted(stamp_of(before)[0], racy_from):
                parsed.digest = content_digest(data)
            return parsed
    return None


def digest_wanted(mtime_ns: int, racy_from: int | None) -> bool:
    """Whether the index may want a file's digest: always where `racy_from` is None; else (a task of files the
    index holds none of: a first build, a rebuild, the rest of a killed build) only where the file's mtime is `racy_from` or later, no
    later than the mtime from which the writing command judges a file racy (`SearchIndex._apply`). A digest is
    kept only beside a racy file's row, or compared with one stored beside the file's row (`_same_bytes`): 10k
    files copied with their mtimes, 45 MB not digested, some 60 ms of the workers' CPU."""
    return racy_from is None or mtime_ns >= racy_from


def content_digest(data: bytes) -> bytes:
    """A file's bytes digested (BLAKE2b, 128 bits): what its rows are a function of, with its path. The 45 MB of
    the 10k corpus take 80 ms of CPU, against some 10 s for the build that reads and parses them."""
    return hashlib.blake2b(data, digest_size=16).digest()


_worker_analyzer: list[Analyzer] = []  # a worker process's analyzer, made by its first task


class ParsedTask(NamedTuple):
    """The files of one worker task, and every distinct term of them all (space separated; None where not
    gathered): the command writing a task's files takes its terms once, not each file's again (10k files:
    some 100 terms a file, a few hundred a task)."""

    files: list[Parsed]
    terms: str | None


def parse_files(task: tuple) -> ParsedTask:
    """`read_file` of each (rel, full path) under a root, in a worker process (`fsmem.store.workers`); a task's
    third item, where it has one, is `read_file`'s `racy_from`, its fourth whether the command cuts raw rows
    (`parse_file`'s `raw`)."""
    root, files = task[0], task[1]
    racy_from = task[2] if len(task) > 2 else None
    raw = len(task) > 3 and bool(task[3])
    if not _worker_analyzer:
        _worker_analyzer.append(Analyzer())
    analyzer = _worker_analyzer[0]
    at = Path(root)
    vocabulary: set[str] = set()
    parsed = [
        p for p in (read_file(at, rel, full, analyzer, vocabulary, racy_from, raw=raw) for rel, full in files) if p
    ]
    return ParsedTask(parsed, " ".join(vocabulary))
