"""The search index: every file's rows and their analysed terms, cached under `.fsmem/search/`.

Files are the truth and the index is derived. Each search stats every memory
file (cheap) and re-reads only those whose mtime or size changed, so the index is
never stale after a write through fsmem or a human edit. A missing, corrupt or
out-of-date cache is rebuilt from the files; deleting `.fsmem/` loses nothing.

The BM25 models (bm25s) are built in memory from the cached terms, three per
snapshot: rows with their context, each row's neighbours in its section, and
whole files. bm25s and PyStemmer are imported here only, on first search.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .catalog import EXACT_COUNT_LIMIT, FileMeta, walk
from .errors import MissingDependency
from .format import decode, is_consolidated, split
from .paths import relative
from .facts import split_provenance
from .rows import Row, split_rows
from .store import atomic_write, state_dir

INDEX_FILE = "index.json"
GENERATED_INDEX = "INDEX.md"  # written by consolidate; a table of contents, not memory to rank
# Bump when rows, terms or the file layout change: an older cache is then rebuilt.
INDEX_VERSION = 3
_WORD = re.compile(r"\w+", re.UNICODE)
# Question words carry no topic; bm25s's English list keeps some of them.
_QUESTION_WORDS = frozenset("what when where who whom whose which why how".split())
_MARKER = re.compile(r"\[[A-Za-z]*\d+:\d+\]")  # dialog-id markers such as [D1:3] are ids, not words


def _install_hint(package: str) -> MissingDependency:
    return MissingDependency(
        f"search needs the {package!r} package; install it with: pip install 'fsmem[search]'"
    )


class Analyzer:
    """Text to index terms: lowercase words, English stop words removed, Snowball-stemmed."""

    def __init__(self) -> None:
        try:
            import Stemmer
            from bm25s.stopwords import STOPWORDS_EN
        except ImportError as exc:
            raise _install_hint(exc.name or "bm25s") from None
        self._stemmer = Stemmer.Stemmer("english")
        self._stop = frozenset(STOPWORDS_EN) | _QUESTION_WORDS
        self._cache: dict[str, str] = {}

    def words(self, text: str) -> list[str]:
        """Lowercase words without stop words (not stemmed): what fuzzy matching compares."""
        return [w for w in _WORD.findall(_MARKER.sub(" ", text).lower()) if w not in self._stop and w != "_"]

    def stem(self, word: str) -> str:
        stemmed = self._cache.get(word)
        if stemmed is None:
            stemmed = self._cache[word] = self._stemmer.stemWord(word)
        return stemmed

    def terms(self, text: str) -> list[str]:
        return [self.stem(w) for w in self.words(text)]


@dataclass
class FileEntry:
    """One file's rows and the metadata search filters and weighs on."""

    path: str
    mtime_ns: int
    size: int
    meta: dict[str, Any]
    rows: list[Row]
    row_terms: list[list[str]]
    context_terms: list[list[str]]

    def file_meta(self) -> FileMeta:
        return FileMeta(
            path=self.path,
            size=self.size,
            mtime_ns=self.mtime_ns,
            type=self.meta.get("type"),
            tags=list(self.meta.get("tags") or []),
            updated=self.meta.get("updated"),
            importance=self.meta.get("importance"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "mtime_ns": self.mtime_ns,
            "size": self.size,
            "meta": self.meta,
            "rows": [r.to_dict() for r in self.rows],
            "row_terms": self.row_terms,
            "context_terms": self.context_terms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FileEntry":
        return cls(
            path=data["path"],
            mtime_ns=int(data["mtime_ns"]),
            size=int(data["size"]),
            meta=dict(data["meta"]),
            rows=[Row.from_dict(r) for r in data["rows"]],
            row_terms=data["row_terms"],
            context_terms=data["context_terms"],
        )


def _meta_fields(front_matter: dict[str, Any]) -> dict[str, Any]:
    from .format import normalize_tags

    importance = front_matter.get("importance")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)):
        importance = None
    return {
        "type": str(front_matter["type"]) if front_matter.get("type") is not None else None,
        "tags": normalize_tags(front_matter.get("tags")),
        "updated": str(front_matter["updated"]) if front_matter.get("updated") is not None else None,
        "importance": float(importance) if importance is not None else None,
    }


def read_entry(root: Path, path: Path, stat: os.stat_result, analyzer: Analyzer) -> FileEntry:
    """Parse one file into rows and terms (files above the exact-count limit are skipped as too large)."""
    rel = relative(root, path)
    if stat.st_size > EXACT_COUNT_LIMIT:
        return FileEntry(rel, stat.st_mtime_ns, stat.st_size, {}, [], [], [])
    with open(path, "rb") as handle:
        text, _problems = decode(handle.read())
    if rel == GENERATED_INDEX or (rel.startswith("sessions/") and is_consolidated(text)):
        # INDEX.md only points at documents, and a consolidated note's content now lives in
        # its entity and topic documents: ranking them too would spend the budget on copies.
        return FileEntry(rel, stat.st_mtime_ns, stat.st_size, _meta_fields(split(text).front_matter), [], [], [])
    rows = split_rows(rel, text)
    return FileEntry(
        path=rel,
        mtime_ns=stat.st_mtime_ns,
        size=stat.st_size,
        meta=_meta_fields(split(text).front_matter),
        rows=rows,
        row_terms=[analyzer.terms(r.text) for r in rows],
        context_terms=[analyzer.terms(r.context) for r in rows],
    )


@dataclass
class Snapshot:
    """The rows of the whole memory at one moment, with the three BM25 models over them."""

    rows: list[Row]
    files: list[FileEntry]
    file_of_row: list[int]  # index into `files`
    group_of_row: list[int] = field(default_factory=list)  # the row's document: its cited source, else its file
    models: dict[str, Any] = field(default_factory=dict)  # "rows" | "neighbours" | "files" -> (bm25, df, n)


class SearchIndex:
    """Keeps `.fsmem/search/index.json` in step with the files; hands out snapshots to score."""

    def __init__(self, root: Path):
        self.root = root
        self._entries: dict[str, FileEntry] | None = None
        self._analyzer: Analyzer | None = None
        self._snapshot: Snapshot | None = None
        self._fingerprint: tuple | None = None
        self._cache_stat: tuple[int, int] | None = None  # (mtime_ns, size) of the cache we last read or wrote

    @property
    def analyzer(self) -> Analyzer:
        if self._analyzer is None:
            self._analyzer = Analyzer()
        return self._analyzer

    @property
    def cache_path(self) -> Path:
        return Path(self.root, ".fsmem", "search", INDEX_FILE)

    def _stat_cache(self) -> tuple[int, int] | None:
        try:
            st = self.cache_path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> dict[str, FileEntry]:
        self._cache_stat = self._stat_cache()
        try:
            with open(self.cache_path, encoding="utf-8") as handle:
                data = json.load(handle)
            if data.get("version") != INDEX_VERSION:
                return {}
            return {e["path"]: FileEntry.from_dict(e) for e in data["files"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # missing or corrupt: rebuilt from the files

    def _save(self, entries: dict[str, FileEntry]) -> None:
        state_dir(self.root, "search")
        payload = {"version": INDEX_VERSION, "files": [e.to_dict() for e in entries.values()]}
        atomic_write(self.cache_path, json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        self._cache_stat = self._stat_cache()

    def refresh(self) -> bool:
        """Bring the cache in step with the files; True when anything changed."""
        stat = self._stat_cache()
        if self._entries is None or stat is None or stat != self._cache_stat:
            # first use, deleted, or rewritten by another process (or damaged): read it again
            self._entries = self._load()
            if stat is not None and not self._entries:
                self._cache_stat = None  # unreadable: force a save below
            self._fingerprint = None
        entries = self._entries
        seen: set[str] = set()
        changed = False
        for path in walk(self.root):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            rel = relative(self.root, path)
            seen.add(rel)
            old = entries.get(rel)
            if old is not None and old.mtime_ns == stat.st_mtime_ns and old.size == stat.st_size:
                continue
            try:
                entries[rel] = read_entry(self.root, path, stat, self.analyzer)
            except FileNotFoundError:
                seen.discard(rel)
                continue
            changed = True
        for rel in [p for p in entries if p not in seen]:
            del entries[rel]
            changed = True
        if changed or self._cache_stat is None:
            self._save(dict(sorted(entries.items())))
        return changed

    def snapshot(self) -> Snapshot:
        """The current rows and models, rebuilt only when a file changed since the last call."""
        self.refresh()
        entries = self._entries or {}
        fingerprint = tuple((e.path, e.mtime_ns, e.size) for e in sorted(entries.values(), key=lambda e: e.path))
        if self._snapshot is not None and fingerprint == self._fingerprint:
            return self._snapshot
        files = [entries[p] for p in sorted(entries)]
        rows: list[Row] = []
        file_of_row: list[int] = []
        group_of_row: list[int] = []
        groups: dict[object, int] = {}  # a cited source, across files; else the file itself
        row_docs: list[list[str]] = []
        neighbour_docs: list[list[str]] = []
        group_docs: list[list[str]] = []
        for number, entry in enumerate(files):
            sources = [source_of(row) for row in entry.rows]
            for i, row in enumerate(entry.rows):
                rows.append(row)
                file_of_row.append(number)
                group = groups.setdefault(sources[i] or number, len(group_docs))
                if group == len(group_docs):
                    group_docs.append([])
                group_of_row.append(group)
                row_docs.append(entry.row_terms[i] + entry.context_terms[i])
                group_docs[group].extend(entry.row_terms[i])
                near: list[str] = []
                for j in (i - 1, i + 1):
                    if 0 <= j < len(entry.rows) and entry.rows[j].headings == row.headings and sources[j] == sources[i]:
                        near.extend(entry.row_terms[j])
                neighbour_docs.append(near)
        snapshot = Snapshot(rows=rows, files=files, file_of_row=file_of_row, group_of_row=group_of_row)
        snapshot.models = {
            "rows": _model(row_docs),
            "neighbours": _model(neighbour_docs),
            "files": _model(group_docs),
        }
        self._snapshot, self._fingerprint = snapshot, fingerprint
        return snapshot


def source_of(row: Row) -> str | None:
    """The session note a consolidated row cites first, so rows from one session score as one document.

    A consolidated entity file gathers many sessions, and one session feeds many
    files; scored per file, every row of a speaker would share one document
    score. Rows citing the same note form one document, across files; rows
    without a citation form their file's.
    """
    _text, provenance = split_provenance(row.text)
    return provenance.sources[0] if provenance and provenance.sources else None


_shared: dict[Path, SearchIndex] = {}


def shared_index(root: Path) -> SearchIndex:
    """One index per memory root and process, so a long-lived server builds its models once."""
    key = Path(root).resolve()
    if key not in _shared:
        _shared[key] = SearchIndex(key)
    return _shared[key]


@dataclass
class Model:
    """A bm25s index with the document frequencies needed to normalise its scores."""

    bm25: Any
    df: dict[str, int]
    n: int

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, terms: list[str]):
        """BM25 score of every document for these terms (unknown terms score nothing)."""
        import numpy as np

        known = [t for t in terms if t in self.df]
        if self.bm25 is None or not known:
            return np.zeros(self.n, dtype=np.float32)
        return self.bm25.get_scores(known)


def _model(docs: list[list[str]]) -> Model:
    try:
        import bm25s
    except ImportError:
        raise _install_hint("bm25s") from None
    df: dict[str, int] = {}
    for doc in docs:
        for term in set(doc):
            df[term] = df.get(term, 0) + 1
    if not df:
        return Model(None, df, len(docs))
    model = bm25s.BM25()
    model.index(docs, show_progress=False)
    return Model(model, df, len(docs))
