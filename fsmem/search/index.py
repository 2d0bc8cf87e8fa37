"""The search index: every file's rows and their analysed terms, cached in `.fsmem/search/`.

Files are the truth and the index is derived. Each search stats every memory
file (cheap) and re-reads only those whose mtime or size changed, so the index is
never stale after a write through fsmem or a human edit. A missing, corrupt or
out-of-date cache is rebuilt from the files; deleting `.fsmem/` loses nothing.

The cache is flat numpy arrays (no pickle): per row its file, line, lengths and
JSON; per (row, term) the term frequency, plus a term directory (postings sorted
by term, each term's start) so a query reads only its own terms' postings. Each
file's rows are one contiguous span, so an edit re-reads one file and splices
its span in. The arrays are saved as a generation folder of .npy files with a
JSON manifest, published by replacing the `current` pointer, and memory-mapped
when read: a new process touches only the pages its query needs. BM25 is scored
from the postings at query time, three ways (rows with their context, each
row's neighbours in its section, whole documents), with bm25s's formula, so a
new process or an edit never rebuilds a model (see README, "Latency at 10k
files"). PyStemmer and bm25s's stop words are imported here only, on first search.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument, LockTimeout, MissingDependency
from fsmem.format.facts import split_provenance
from fsmem.format.frontmatter import decode, is_consolidated, split
from fsmem.format.rows import Row, split_rows
from fsmem.store.catalog import EXACT_COUNT_LIMIT, FileMeta, walk_stats
from fsmem.store.files import TEMP_PREFIX, atomic_write, file_lock
from fsmem.store.paths import ROOT_README, read_regular, relative

POINTER = "current"  # names the generation folder readers use; replaced atomically
GENERATIONS = "v6"
MANIFEST = "manifest.json"
LEGACY_FILES = ("index.json", "index.npz")  # caches of older versions, removed when the new one is written
GENERATED_INDEX = "INDEX.md"  # written by consolidate; a table of contents, not memory to rank
# Bump when rows, terms or the file layout change: an older cache is then rebuilt.
INDEX_VERSION = 6
BM25_K1, BM25_B = 1.5, 0.75  # bm25s's defaults, which the LoCoMo figures were measured with
_WORD = re.compile(r"\w+", re.UNICODE)
# Question words carry no topic; bm25s's English list keeps some of them.
_QUESTION_WORDS = frozenset("what when where who whom whose which why how".split())
_MARKER = re.compile(r"\[[A-Za-z]*\d+:\d+\]")  # dialog-id markers such as [D1:3] are ids, not words


def _install_hint(package: str) -> MissingDependency:
    return MissingDependency(f"search needs the {package!r} package; install it with: pip install 'fsmem[search]'")


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
    """One file as just read: its rows and their terms, before they become a span of the index's arrays."""

    path: str
    mtime_ns: int
    size: int
    meta: dict[str, Any]
    rows: list[Row]
    row_terms: list[list[str]]
    context_terms: list[list[str]]


def _meta_fields(front_matter: dict[str, Any]) -> dict[str, Any]:
    from fsmem.format.frontmatter import normalize_tags

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
    text, _problems = decode(read_regular(path))
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
class FileInfo:
    """A file of the index: its stamp, the front-matter fields search filters and weighs on, and its rows' span."""

    path: str
    mtime_ns: int
    size: int
    meta: dict[str, Any]

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


# Per-row arrays, per-posting arrays (text and context terms of each row), and the rows' JSON.
_ROW_ARRAYS = (
    "row_file",
    "row_line",
    "row_superseded",
    "row_source",
    "row_link",
    "text_len",
    "context_len",
    "row_offset",
)
_POSTING_ARRAYS = ("text_row", "text_term", "text_tf", "context_row", "context_term", "context_tf")


@dataclass
class Columns:
    """The whole index as flat arrays, in file order then row order: what a generation folder of `.fsmem/search/v6/` holds.

    Each file's rows are one contiguous span (`file_start`), and so are their
    postings, so a changed file is spliced in without touching the others.
    """

    files: list[FileInfo]
    vocabulary: list[str]
    sources: list[str]
    arrays: dict[str, Any]

    @property
    def n_rows(self) -> int:
        return len(self.arrays["row_file"])


def _empty_arrays() -> dict[str, Any]:
    import numpy as np

    arrays = {name: np.zeros(0, dtype=np.int32) for name in _ROW_ARRAYS + _POSTING_ARRAYS}
    arrays["row_superseded"] = np.zeros(0, dtype=bool)
    arrays["row_link"] = np.zeros(0, dtype=bool)
    arrays["row_offset"] = np.zeros(1, dtype=np.int64)
    arrays["file_start"] = np.zeros(1, dtype=np.int64)
    arrays["rows_json"] = np.zeros(0, dtype=np.uint8)
    return arrays


def _entry_block(
    entry: FileEntry, terms: dict[str, int], vocabulary: list[str], sources: dict[str, int]
) -> dict[str, Any]:
    """One file's arrays, rows numbered from 0 (term and source ids are added to the shared tables)."""
    import numpy as np

    def term_id(term: str) -> int:
        found = terms.get(term)
        if found is None:
            found = terms[term] = len(vocabulary)
            vocabulary.append(term)
        return found

    def postings(docs: list[list[str]]):
        rows, ids, tfs = [], [], []
        for number, doc in enumerate(docs):
            counts: dict[int, int] = {}
            for term in doc:
                tid = term_id(term)
                counts[tid] = counts.get(tid, 0) + 1
            rows.extend([number] * len(counts))
            ids.extend(counts)
            tfs.extend(counts.values())
        return np.array(rows, dtype=np.int32), np.array(ids, dtype=np.int32), np.array(tfs, dtype=np.int32)

    row_sources = [source_of(row) for row in entry.rows]
    source_ids = [-1 if s is None else sources.setdefault(s, len(sources)) for s in row_sources]
    n = len(entry.rows)
    link = [
        i + 1 < n and entry.rows[i + 1].headings == entry.rows[i].headings and row_sources[i + 1] == row_sources[i]
        for i in range(n)
    ]
    encoded = [
        json.dumps(
            [r.line, r.end_line, r.text, r.kind, r.title, r.subject, r.headings, r.superseded],
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
        for r in entry.rows
    ]
    block = {
        "row_line": np.array([r.line for r in entry.rows], dtype=np.int32),
        "row_superseded": np.array([r.superseded for r in entry.rows], dtype=bool),
        "row_source": np.array(source_ids, dtype=np.int32),
        "row_link": np.array(link, dtype=bool),
        "text_len": np.array([len(t) for t in entry.row_terms], dtype=np.int32),
        "context_len": np.array([len(t) for t in entry.context_terms], dtype=np.int32),
        "row_size": np.array([len(e) for e in encoded], dtype=np.int64),
        "rows_json": np.frombuffer(b"".join(encoded), dtype=np.uint8),
    }
    block["text_row"], block["text_term"], block["text_tf"] = postings(entry.row_terms)
    block["context_row"], block["context_term"], block["context_tf"] = postings(entry.context_terms)
    return block


def _old_block(columns: Columns, first: int, last: int) -> dict[str, Any]:
    """Files `first`..`last` (inclusive) of `columns` as a block, rows numbered from 0."""
    import numpy as np

    a = columns.arrays
    start, end = int(a["file_start"][first]), int(a["file_start"][last + 1])
    block = {
        name: a[name][start:end]
        for name in ("row_line", "row_superseded", "row_source", "row_link", "text_len", "context_len")
    }
    block["row_size"] = np.diff(a["row_offset"][start : end + 1])
    block["rows_json"] = a["rows_json"][a["row_offset"][start] : a["row_offset"][end]]
    block["row_file_local"] = a["row_file"][start:end] - first
    for kind in ("text", "context"):
        lo, hi = np.searchsorted(a[f"{kind}_row"], [start, end])
        block[f"{kind}_row"] = a[f"{kind}_row"][lo:hi] - start
        block[f"{kind}_term"] = a[f"{kind}_term"][lo:hi]
        block[f"{kind}_tf"] = a[f"{kind}_tf"][lo:hi]
    return block


def _concat(blocks: list[dict[str, Any]], file_counts: list[int]) -> dict[str, Any]:
    """Blocks in order, each spanning `file_counts[i]` files, as one set of arrays."""
    import numpy as np

    if not blocks:
        return _empty_arrays()
    row_counts = np.array([len(b["row_line"]) for b in blocks], dtype=np.int64)
    row_base = np.concatenate([[0], np.cumsum(row_counts)[:-1]])
    file_base = np.concatenate([[0], np.cumsum(file_counts)[:-1]]).astype(np.int64)
    out = {
        name: np.concatenate([b[name] for b in blocks])
        for name in ("row_line", "row_superseded", "row_source", "row_link", "text_len", "context_len", "rows_json")
    }
    out["row_file"] = np.concatenate(
        [
            b["row_file_local"] + base if "row_file_local" in b else np.full(len(b["row_line"]), base, dtype=np.int32)
            for b, base in zip(blocks, file_base, strict=False)
        ]
    ).astype(np.int32)
    out["row_offset"] = np.concatenate([[0], np.cumsum(np.concatenate([b["row_size"] for b in blocks]))]).astype(
        np.int64
    )
    for kind in ("text", "context"):
        out[f"{kind}_row"] = np.concatenate(
            [b[f"{kind}_row"] + base for b, base in zip(blocks, row_base, strict=False)]
        ).astype(np.int32)
        out[f"{kind}_term"] = np.concatenate([b[f"{kind}_term"] for b in blocks]).astype(np.int32)
        out[f"{kind}_tf"] = np.concatenate([b[f"{kind}_tf"] for b in blocks]).astype(np.int32)
    out["file_start"] = np.searchsorted(out["row_file"], np.arange(sum(file_counts) + 1), side="left").astype(np.int64)
    return out


def splice(old: Columns | None, files: list[FileInfo], fresh: dict[str, FileEntry]) -> Columns:
    """New columns for `files` (sorted by path): entries of `fresh` are added, the rest copied from `old`."""
    vocabulary = list(old.vocabulary) if old else []
    terms = {t: i for i, t in enumerate(vocabulary)}
    sources_list = list(old.sources) if old else []
    sources = {s: i for i, s in enumerate(sources_list)}
    old_index = {f.path: i for i, f in enumerate(old.files)} if old else {}
    blocks: list[dict[str, Any]] = []
    counts: list[int] = []
    run: list[int] = []  # consecutive unchanged files, copied as one block

    def close_run() -> None:
        if run:
            blocks.append(_old_block(old, run[0], run[-1]))
            counts.append(len(run))
            run.clear()

    for info in files:
        entry = fresh.get(info.path)
        if entry is None:
            position = old_index[info.path]
            if run and position != run[-1] + 1:
                close_run()
            run.append(position)
            continue
        close_run()
        blocks.append(_entry_block(entry, terms, vocabulary, sources))
        counts.append(1)
    close_run()
    arrays = _concat(blocks, counts)
    sources_list = [s for s, _ in sorted(sources.items(), key=lambda item: item[1])]
    return Columns(files=files, vocabulary=vocabulary, sources=sources_list, arrays=arrays)


def _term_directory(term_ids, size: int):
    """(posting numbers sorted by term, each term's start in them): a term's postings are one slice."""
    import numpy as np

    order = np.argsort(term_ids, kind="stable").astype(np.int32)  # a radix sort for int32 ids
    starts = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_ids, minlength=size), out=starts[1:])
    return order, starts


def with_term_directory(columns: Columns) -> Columns:
    """`columns` with the term-sorted views (`text_by_term`, `text_term_start`, likewise context) for its vocabulary."""
    size = len(columns.vocabulary)
    for kind in ("text", "context"):
        a = columns.arrays
        if len(a.get(f"{kind}_term_start", ())) != size + 1:
            a[f"{kind}_by_term"], a[f"{kind}_term_start"] = _term_directory(a[f"{kind}_term"], size)
    return columns


def save_columns(folder: Path, columns: Columns) -> Path:
    """Write the columns as a new generation folder of .npy files and a manifest, then point `current` at it.

    Readers open the generation `current` names and map its arrays, so they see a
    whole old or a whole new index, never half a write; superseded generations
    are removed (a reader that loses the race reads `current` again).
    """
    import shutil
    import tempfile

    import numpy as np

    manifest = {
        "version": INDEX_VERSION,
        "files": [[f.path, f.mtime_ns, f.size, f.meta] for f in columns.files],
        "vocabulary": columns.vocabulary,
        "sources": columns.sources,
        "arrays": sorted(columns.arrays),
    }
    generations = folder / GENERATIONS
    generations.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=generations))
    try:
        for name, array in columns.arrays.items():
            np.save(temp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        (temp / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        final = generations / f"g{os.getpid()}-{os.urandom(6).hex()}"
        # One writer at a time publishes and cleans up, so no writer removes a generation another just published.
        with file_lock(folder.parent.parent, "search-index"):
            os.rename(temp, final)
            atomic_write(folder / POINTER, f"{GENERATIONS}/{final.name}\n".encode("ascii"))
            for old in generations.iterdir():
                if old.name.startswith(TEMP_PREFIX) and _age(old) < 3600:
                    continue  # another writer's generation, still being written
                if old.name != final.name:
                    shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    for name in LEGACY_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / name)
    return final


def _age(path: Path) -> float:
    import time

    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def load_columns(folder: Path) -> Columns | None:
    """The columns `folder/current` points at, memory-mapped, or None when missing, of another version or inconsistent."""
    for _attempt in range(3):
        try:
            generation = (folder / POINTER).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        try:
            return _load_generation(folder / generation)
        except FileNotFoundError:
            continue  # replaced by another process between reading `current` and opening its files
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, UnicodeDecodeError):
            return None  # damaged: rebuilt from the files
    return None


def _mapped(path: Path, columns: Columns) -> Columns:
    """`columns` with its arrays memory-mapped from generation `path`, which was just written from them."""
    import numpy as np

    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in columns.arrays}
    return Columns(columns.files, columns.vocabulary, columns.sources, arrays)


def _load_generation(path: Path) -> Columns | None:
    import numpy as np

    header = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    if header.get("version") != INDEX_VERSION:
        return None
    arrays = {str(name): np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in header["arrays"]}
    files = [FileInfo(str(p), int(m), int(s), dict(meta)) for p, m, s, meta in header["files"]]
    columns = Columns(files, list(header["vocabulary"]), list(header["sources"]), arrays)
    _check(columns)
    return columns


def _check(columns: Columns) -> None:
    """Raise ValueError unless every array has the length and range the others imply."""
    import numpy as np

    a = columns.arrays
    n = len(a["row_file"])
    if any(len(a[name]) != n for name in _ROW_ARRAYS if name != "row_offset"):
        raise ValueError("row arrays differ in length")
    if len(a["row_offset"]) != n + 1 or int(a["row_offset"][-1]) != len(a["rows_json"]):
        raise ValueError("row offsets do not match the rows")
    if len(a["file_start"]) != len(columns.files) + 1 or int(a["file_start"][-1]) != n:
        raise ValueError("file spans do not match the rows")
    for kind in ("text", "context"):
        rows, term_ids = a[f"{kind}_row"], a[f"{kind}_term"]
        if not (len(rows) == len(term_ids) == len(a[f"{kind}_tf"])):
            raise ValueError("posting arrays differ in length")
        if len(rows) and (
            rows.min() < 0
            or rows.max() >= n
            or np.any(np.diff(rows) < 0)
            or term_ids.min() < 0
            or term_ids.max() >= len(columns.vocabulary)
        ):
            raise ValueError("postings out of range")
        order, starts = a[f"{kind}_by_term"], a[f"{kind}_term_start"]
        if len(order) != len(rows) or len(starts) != len(columns.vocabulary) + 1:
            raise ValueError("term directory does not match the postings")
        if starts[0] != 0 or starts[-1] != len(rows) or np.any(np.diff(starts) < 0):
            raise ValueError("term directory out of order")
        if len(order) and (order.min() < 0 or order.max() >= len(rows)):
            raise ValueError("term directory out of range")
    if n and (
        a["row_file"].min() < 0
        or a["row_file"].max() >= len(columns.files)
        or a["row_source"].max() >= len(columns.sources)
    ):
        raise ValueError("row references out of range")


class RowTable(Sequence):
    """The snapshot's rows, decoded from their JSON one at a time when asked for (a search reads a few dozen)."""

    def __init__(self, columns: Columns):
        self._paths = [f.path for f in columns.files]
        self._file = columns.arrays["row_file"]
        self._offset = columns.arrays["row_offset"]
        self._json = columns.arrays["rows_json"]

    def __len__(self) -> int:
        return len(self._file)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = int(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        raw = self._json[self._offset[index] : self._offset[index + 1]].tobytes()
        line, end_line, text, kind, title, subject, headings, superseded = json.loads(raw)
        return Row(
            self._paths[int(self._file[index])], line, end_line, text, kind, title, subject, list(headings), superseded
        )


class Snapshot:
    """The rows of the whole memory at one moment, with the three BM25 models over them."""

    def __init__(self, columns: Columns):
        import numpy as np

        a = columns.arrays
        self.columns = columns
        self.files = columns.files
        self.rows = RowTable(columns)
        self.file_of_row = a["row_file"]
        self.superseded = a["row_superseded"]
        self.lines = a["row_line"]
        n_sources = len(columns.sources)
        # a row's document: the session note it cites first (across files), else its file; numbered by first use
        keys = np.where(a["row_source"] >= 0, a["row_source"], n_sources + a["row_file"].astype(np.int64))
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        order = np.empty(len(unique), dtype=np.int64)
        order[np.argsort(first, kind="stable")] = np.arange(len(unique))
        self.group_of_row = order[inverse] if len(keys) else np.zeros(0, dtype=np.int64)
        self.models = {
            "rows": Model(self, "rows", len(a["row_file"])),
            "neighbours": Model(self, "neighbours", len(a["row_file"])),
            "files": Model(self, "files", len(unique)),
        }
        self._term_ids = {t: i for i, t in enumerate(columns.vocabulary)}

    def term_id(self, term: str) -> int | None:
        return self._term_ids.get(term)

    def usage_per_row(self, usage: dict[str, int]):
        """Each row's count in `usage` (keyed `path:line`, as the retrieval log writes locations)."""
        import numpy as np

        used = np.zeros(len(self.file_of_row), dtype=np.float64)
        file_number = {f.path: i for i, f in enumerate(self.files)}
        starts = self.columns.arrays["file_start"]
        for location, count in usage.items():
            path, _, line = location.rpartition(":")
            number = file_number.get(path)
            if number is None or not line.isdigit():
                continue
            start, end = int(starts[number]), int(starts[number + 1])
            used[start + np.flatnonzero(self.lines[start:end] == int(line))] += count
        return used


class SearchIndex:
    """Keeps `.fsmem/search/` in step with the files; hands out snapshots to score."""

    def __init__(self, root: Path):
        self.root = root
        self._columns: Columns | None = None
        self._analyzer: Analyzer | None = None
        self._snapshot: Snapshot | None = None
        self._cache_stat: tuple[int, int, int] | None = None  # the cache file we last read or wrote
        self._lock = threading.Lock()
        self._fresh_since: int | None = None  # when the last refresh began (time.monotonic_ns)

    @property
    def analyzer(self) -> Analyzer:
        if self._analyzer is None:
            self._analyzer = Analyzer()
        return self._analyzer

    @property
    def cache_dir(self) -> Path:
        return Path(self.root, ".fsmem", "search")

    def _stat_cache(self) -> tuple[int, int, int] | None:
        try:
            st = (self.cache_dir / POINTER).stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def refresh(self) -> bool:
        """Bring the cache in step with the files; True when anything changed."""
        stat = self._stat_cache()
        if self._columns is None or stat is None or stat != self._cache_stat:
            # first use, deleted, or rewritten by another process (or damaged): read it again
            self._columns = load_columns(self.cache_dir) if stat is not None else None
            self._cache_stat = stat if self._columns is not None else None
        old = self._columns
        known = {f.path: f for f in old.files} if old else {}
        files: list[FileInfo] = []
        fresh: dict[str, FileEntry] = {}
        for rel, full, st in walk_stats(self.root):
            if rel == ROOT_README:
                continue  # the memory's conventions for humans, not memory to rank
            info = known.get(rel)
            if info is None or info.mtime_ns != st.st_mtime_ns or info.size != st.st_size:
                try:
                    entry = read_entry(self.root, Path(full), st, self.analyzer)
                except (OSError, InvalidArgument):
                    continue  # vanished, or cannot be read: the rest of the memory is still searched; check reports it
                fresh[rel] = entry
                info = FileInfo(rel, entry.mtime_ns, entry.size, entry.meta)
            files.append(info)
        files.sort(key=lambda f: f.path)
        changed = bool(fresh) or old is None or len(files) != len(old.files)
        if changed:
            self._columns = with_term_directory(splice(old, files, fresh))
        if changed or self._cache_stat is None:
            try:
                saved = save_columns(self.cache_dir, self._columns)
                self._cache_stat = self._stat_cache()
                with contextlib.suppress(OSError, ValueError):
                    # the same arrays, memory-mapped from the files just written: the copy in memory is
                    # freed, so a long-lived process does not hold one per generation
                    self._columns = _mapped(saved, self._columns)
            except (OSError, LockTimeout):
                self._cache_stat = None  # a read-only .fsmem/: search still works from memory
        return changed

    def snapshot(self) -> Snapshot:
        """The current rows and models, rebuilt only when a file changed since the last call.

        One thread at a time brings the index up to date (threads of a server share it). A thread
        that waited while another one's refresh ran takes that result when the refresh began after
        this call did: its walk saw every write finished before the call, so the answer is as fresh
        as a refresh of its own, and many searches at once cost one splice of the arrays, not one each.
        """
        asked = time.monotonic_ns()
        with self._lock:
            if self._fresh_since is None or self._fresh_since <= asked:  # only a refresh begun after the call will do
                began = time.monotonic_ns()
                self.refresh()
                self._fresh_since = began
            if self._snapshot is None or self._snapshot.columns is not self._columns:
                self._snapshot = Snapshot(self._columns)
            return self._snapshot


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
    found = _shared.get(key)
    if found is None:
        found = _shared.setdefault(key, SearchIndex(key))  # two threads asking at once still share one
    return found


class Model:
    """BM25 (Lucene variant, k1=1.5, b=0.75, as bm25s computes it) over one kind of document, scored from the postings.

    Nothing is precomputed per document: a query term's postings are gathered
    and scored when asked for, so an edit costs no model rebuild and a new
    process loads arrays, not models. Scores equal bm25s's up to float32 rounding
    (about 1e-7; the same rows in the same order on the 1k benchmark corpus).
    """

    def __init__(self, snapshot: Snapshot, kind: str, n: int):
        import numpy as np

        a = snapshot.columns.arrays
        self.snapshot, self.kind, self.n = snapshot, kind, n
        text_len = a["text_len"].astype(np.int64)
        if kind == "rows":
            lengths = text_len + a["context_len"]
        elif kind == "neighbours":
            link = a["row_link"]
            lengths = np.zeros(n, dtype=np.int64)
            lengths[1:] += np.where(link[:-1], text_len[:-1], 0)  # the row above, when in the same section
            lengths[:-1] += np.where(link[:-1], text_len[1:], 0)  # the row below
        else:
            lengths = np.bincount(snapshot.group_of_row, weights=text_len, minlength=n).astype(np.int64)
        self.lengths = lengths
        self.avgdl = lengths.mean() if n else 0.0
        self._postings: dict[str, tuple[Any, Any]] = {}
        self._vocabulary: list[str] | None = None

    def postings(self, term: str):
        """(documents, term frequencies) of `term` in this model, documents ascending."""
        import numpy as np

        cached = self._postings.get(term)
        if cached is not None:
            return cached
        a = self.snapshot.columns.arrays
        tid = self.snapshot.term_id(term)
        if tid is None:
            found = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        else:
            hits = _term_postings(a, "text", tid)
            rows, tf = a["text_row"][hits].astype(np.int64), a["text_tf"][hits].astype(np.int64)
            if self.kind == "rows":
                more = _term_postings(a, "context", tid)
                rows = np.concatenate([rows, a["context_row"][more]])
                tf = np.concatenate([tf, a["context_tf"][more]])
            elif self.kind == "neighbours":
                link = a["row_link"]
                down = link[rows]  # row r+1 sees row r
                up = rows > 0
                up[up] = link[rows[up] - 1]  # row r-1 sees row r
                rows, tf = np.concatenate([rows[down] + 1, rows[up] - 1]), np.concatenate([tf[down], tf[up]])
            else:
                rows = self.snapshot.group_of_row[rows]
            found = _sum_by(rows, tf)
        self._postings[term] = found
        return found

    def df(self, term: str) -> int:
        return len(self.postings(term)[0])

    def knows(self, term: str) -> bool:
        return self.df(term) > 0

    def vocabulary(self) -> list[str]:
        """Every term of at least one document."""
        import numpy as np

        if self._vocabulary is None:
            a = self.snapshot.columns.arrays
            used = np.diff(a["text_term_start"]) + np.diff(a["context_term_start"])
            self._vocabulary = sorted(t for t, c in zip(self.snapshot.columns.vocabulary, used, strict=False) if c)
        return self._vocabulary

    def idf(self, term: str) -> float:
        df = self.df(term)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, terms: list[str]):
        """BM25 score of every document for these terms (unknown terms score nothing)."""
        import numpy as np

        total = np.zeros(self.n, dtype=np.float32)
        for term in terms:
            docs, tf = self.postings(term)
            if not len(docs):
                continue
            idf = np.float32(self.idf(term))
            tf = tf.astype(np.float64)
            tfc = tf / (BM25_K1 * ((1 - BM25_B) + BM25_B * self.lengths[docs] / self.avgdl) + tf)
            total[docs] += (np.float64(idf) * tfc).astype(np.float32)
        return total


def _term_postings(arrays: dict[str, Any], kind: str, tid: int):
    """The posting numbers of term `tid` (ascending), from the term directory."""
    return arrays[f"{kind}_by_term"][arrays[f"{kind}_term_start"][tid] : arrays[f"{kind}_term_start"][tid + 1]]


def _sum_by(keys, values):
    """Unique keys ascending, with the sum of their values."""
    import numpy as np

    if not len(keys):
        return keys.astype(np.int64), values.astype(np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, np.bincount(inverse, weights=values, minlength=len(unique)).astype(np.int64)
