"""What each change of the search tables did, so a long-lived process carries what it keeps across writes.

`changes` in search_meta counts every file indexed or removed; what ranking keeps (`documents.Kept`: the
decoded documents, the words' counts, the files read) is kept per state of the tables. A write moves the
state, and a process that made everything again after each write paid for it in the next question (100k
files: 0.6-1.5 s). The writer records here, in the same transaction as each file's rows, which file each
change added or removed, and for a file written alone (not a build's batch) how many rows hold each of its
terms and how often, per column, as fts5vocab counts them (`row_counts`). A reader at an earlier state of
the same `built` reads the changes after it (`since`) and patches what it keeps, or starts again from
nothing where they do not say enough (a build, a file whose counts were never recorded, too many changes).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from fsmem.search.postings import MAX_TOKEN_BYTES, token_key

KEEP_CHANGES = 256  # changes recorded; a reader further behind starts again from nothing
# Files whose terms' counts are kept: the latest written. The counts are some 0.4 times a file's Markdown, so
# kept for every file a memory grown note by note would hold, they would grow `.fsmem/` by that much; a file
# written before these is removed or rewritten without them, and a reader then counts its words again
KEEP_COUNTS = 512

SCHEMA = """
-- one row per change of `changes` (fsmem.search.changes): the file it added or removed (`gone`), its id and
-- rows; a removal holds the file's counts (`counts`) when they were recorded at its insertion
CREATE TABLE IF NOT EXISTS search_changes (
    change INTEGER PRIMARY KEY, fid INTEGER NOT NULL, path TEXT NOT NULL, rows INTEGER NOT NULL,
    gone INTEGER NOT NULL, counts TEXT
);
-- per file written alone, its terms' counts in its rows and names (`row_counts`), until it is removed or more
-- than KEEP_COUNTS files were indexed after it
CREATE TABLE IF NOT EXISTS search_counts (id INTEGER PRIMARY KEY, counts TEXT NOT NULL);
"""
TABLES = ("search_changes", "search_counts")


def _terms(text: str) -> list[str]:
    """A column's terms as FTS5's `ascii` tokenizer cuts them (the analyser's terms are lower-case words of
    letters, digits and non-ASCII characters, space separated: tests/test_changes.py), a term past FTS5's
    limit cut as FTS5 cuts it."""
    terms = text.split()
    if len(text) * 4 > MAX_TOKEN_BYTES and max(map(len, terms), default=0) * 4 > MAX_TOKEN_BYTES:
        terms = [token_key(t) for t in terms]
    return terms


def row_counts(texts: list[str], contexts: list[str], names: str) -> str:
    """A file's terms counted as fts5vocab counts them: per term of its rows, [rows holding it, rows holding
    it in `text`, its occurrences there, rows holding it in `context`, its occurrences there]; per term of
    its names, its occurrences; and whether it has a row of search_names. JSON, for `search_counts`."""
    words = [_terms(text) if text else [] for text in texts]
    text_cnt = Counter(chain.from_iterable(words))  # one count each: Counter.update costs microseconds a call
    own = [set(row) for row in words]
    text_doc = Counter(chain.from_iterable(own))
    context_cnt: Counter[str] = Counter()
    context_doc: Counter[str] = Counter()
    for context, many in Counter(contexts).items():  # a file's rows share a few headings
        if context:
            heads = _terms(context)
            for term, hits in Counter(heads).items():
                context_cnt[term] += hits * many
                context_doc[term] += many
    if context_doc:
        heads_of = {context: set(_terms(context)) for context in set(contexts)}
        own = [row | heads_of[context] for row, context in zip(own, contexts, strict=True)]
    row_doc = Counter(chain.from_iterable(own))
    rows = {t: [n, text_doc[t], text_cnt[t], context_doc[t], context_cnt[t]] for t, n in row_doc.items()}
    named = [Counter(_terms(names)), 1] if names else [{}, 0]  # a file with names has a row in search_names
    return json.dumps([rows, *named], ensure_ascii=False, separators=(",", ":"))


def inserted(conn, change: int, fid: int, path: str, rows: int, counts: str | None) -> None:
    """Record change `change`: file `fid` indexed at `path` with `rows` rows (and its counts, when given)."""
    conn.execute("INSERT INTO search_changes VALUES (?, ?, ?, ?, 0, NULL)", (change, fid, path, rows))
    if counts is not None:
        conn.execute("INSERT INTO search_counts VALUES (?, ?)", (fid, counts))


def removed(conn, change: int, fid: int, path: str, rows: int) -> None:
    """Record change `change`: file `fid` removed; its recorded counts move to the change."""
    found = conn.execute("DELETE FROM search_counts WHERE id = ? RETURNING counts", (fid,)).fetchone()
    conn.execute("INSERT INTO search_changes VALUES (?, ?, ?, ?, 1, ?)", (change, fid, path, rows, found and found[0]))


def prune(conn) -> None:
    """Forget the changes more than KEEP_CHANGES before the latest, and the counts of the files indexed before
    the latest KEEP_COUNTS (file ids only grow)."""
    conn.execute(
        "DELETE FROM search_changes WHERE change <= (SELECT value FROM search_meta WHERE key = 'changes') - ?",
        (KEEP_CHANGES,),
    )
    conn.execute(
        "DELETE FROM search_counts WHERE id < (SELECT value FROM search_meta WHERE key = 'next') - ?", (KEEP_COUNTS,)
    )


@dataclass
class Changes:
    """What changed between two states of the tables of one `built`: the files removed that the earlier
    state had (id -> rows), the files added that the later one has (ids, ascending, all above the removed
    ones' and any the earlier state had), their rows of search_files, the paths removed, and the terms' counts
    added (minus those removed) per fts5vocab table, or None where a file's counts were not recorded."""

    conn: Any
    removed: dict[int, int]
    added: list[int]
    paths_removed: set[str]
    rows: dict[str, list[int]] | None  # term -> deltas of row_counts' five counts
    names: dict[str, list[int]] | None  # term -> deltas of (rows holding it, occurrences) in search_names
    files: dict[int, tuple[Any, ...]] = field(
        default_factory=dict
    )  # added id -> (path, type, tags, updated, rows, size)
    named: int | None = None  # the change in the number of files with names, when known
    ranges: list[tuple[int, int]] | None = None  # the earlier documents' positions kept (`postings.kept_ranges`)


def since(conn, before: int, after: int) -> Changes | None:
    """The changes after state `before` up to `after` (of the same `built`), or None when they were not all
    recorded."""
    if not 0 <= before < after or after - before > KEEP_CHANGES:
        return None
    log = conn.execute(
        "SELECT change, fid, path, rows, gone, counts FROM search_changes WHERE change > ? AND change <= ?"
        " ORDER BY change",
        (before, after),
    ).fetchall()
    if [c for c, *_rest in log] != list(range(before + 1, after + 1)):
        return None
    added: dict[int, str] = {}
    removed: dict[int, int] = {}
    paths: set[str] = set()
    gone_counts: list[str | None] = []
    for _change, fid, path, n_rows, gone, counts in log:
        if not gone:
            added[fid] = path
        elif added.pop(fid, None) is None:  # a file the earlier state had (else: added and removed since)
            removed[fid] = n_rows
            paths.add(path)
            gone_counts.append(counts)
        else:
            paths.add(path)
    found = Changes(conn, removed, sorted(added), paths, None, None)
    if added:
        ids = json.dumps(found.added)
        found.files = {
            fid: tuple(rest)
            for fid, *rest in conn.execute(
                "SELECT id, path, type, tags, updated, rows, size FROM search_files"
                " WHERE id IN (SELECT value FROM json_each(?))",
                (ids,),
            )
        }
        if len(found.files) != len(added):
            return None  # not as recorded: start again
        added_counts = dict(
            conn.execute("SELECT id, counts FROM search_counts WHERE id IN (SELECT value FROM json_each(?))", (ids,))
        )
    else:
        added_counts = {}
    if None in gone_counts or len(added_counts) != len(added):
        return found
    rows: dict[str, list[int]] = {}
    names: dict[str, list[int]] = {}
    named = 0
    for sign, counts in [*((1, c) for c in added_counts.values()), *((-1, c) for c in gone_counts)]:
        row_part, name_part, has_names = json.loads(counts)
        for term, values in row_part.items():
            have = rows.setdefault(term, [0] * 5)
            for at, value in enumerate(values):
                have[at] += sign * value
        for term, hits in name_part.items():
            have = names.setdefault(term, [0, 0])
            have[0] += sign
            have[1] += sign * hits
        named += sign * has_names
    found.rows, found.names, found.named = rows, names, named
    return found
