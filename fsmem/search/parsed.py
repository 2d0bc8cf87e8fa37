"""The rows of the files answers are read back from, parsed once per version of each file and kept.

The index stores no text: an answer reads the rows it shows from their files.
A server answers the same files again and again, and reading and cutting one
(its front matter, its Markdown) costs 0.1-0.2 ms within a search; 64 files were kept, fewer than one
busy minute of searches touches, so most answers parsed most of their files
again. Here the files are kept by the bytes of their text (`MAX_BYTES`), the
least recently used given back first; parsing runs outside the lock, so
searches on many threads read back their rows side by side, and never wait for
a refresh of the index.

A file is kept as tuples of strings, numbers and None, its rows in columns
(`KeptFile`), which Python's cyclic garbage collector stops walking: kept as
Row objects, the 8 MB of a busy server's files were some 100,000 objects that
every full collection walked, inside whichever question it fell in. A Row is
made only for a row an answer shows, and only then is a bullet told from a
keyed fact (`bullet_kind`): the rest of a file's rows cost their cut alone.
"""

from __future__ import annotations

import os
import sys
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from itertools import accumulate, groupby
from pathlib import Path
from typing import overload

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format.rows import Row, Section, bullet_kind, document_rows, plain_columns
from fsmem.search.parsing import Stamp, ascii_sections, consolidated_note, is_ranked, ranked_rows, stamp_of
from fsmem.store.paths import read_stamped

MAX_BYTES = 8 << 20  # of the files' text kept parsed (their rows take about 2.4 times as much memory)

# A run of a file's rows under the same headings, in columns: a `fsmem.format.rows.Section` in tuples, and each
# row's last line, or None where each row's is its first line plus its line breaks (`sections_rows`).
KeptSection = tuple[
    tuple[str, ...], str | None, bool, tuple[int, ...], tuple[str, ...], tuple[bool, ...], tuple[int, ...] | None
]
# a file's title, where each of its sections starts among its rows, and its sections
KeptFile = tuple[str | None, tuple[int, ...], tuple[KeptSection, ...]]


def ranked_cut(rel: str, text: str) -> tuple[str | None, list[Section]] | list[Row]:
    """The rows `ranked_rows` gives of a file's text, cut as `parse_file` cuts them: where `plain_columns` cuts
    the file, its title and sections, else Rows whose bullets are not told from keyed facts (`classify=False`)."""
    if not is_ranked(rel, text):
        return []
    doc = fmt.split(text)
    plain = None if consolidated_note(rel, text) else plain_columns(doc, ascii_sections)
    if plain is not None:
        return plain
    return ranked_rows(rel, text, document_rows(rel, doc, classify=False))


def kept_file(cut: tuple[str | None, list[Section]] | list[Row]) -> KeptFile:
    """A file's rows (`ranked_cut`) as tuples of strings, numbers and None, which the collector stops walking."""
    kept: list[KeptSection]
    if isinstance(cut, tuple):
        title, sections = cut
        kept = [
            (tuple(h), s, sup, tuple(lines), tuple(texts), tuple(bullets), None)
            for h, s, sup, lines, texts, bullets in sections
        ]
    else:
        title = cut[0].title if cut else None
        kept = []
        for (_h, subject, superseded), run in groupby(cut, lambda r: (id(r.headings), r.subject, r.superseded)):
            rows = list(run)
            kept.append(
                (
                    tuple(rows[0].headings),
                    subject,
                    superseded,
                    tuple(r.line for r in rows),
                    tuple(r.text for r in rows),
                    tuple(r.kind == "bullet" for r in rows),
                    tuple(r.end_line for r in rows),
                )
            )
    starts = tuple(accumulate((len(section[3]) for section in kept[:-1]), initial=0))
    return title, starts, tuple(kept)


class FileRows(Sequence[Row]):
    """The rows of one file as Rows, each made when it is asked for (a new Row at each ask), and only then a
    bullet told from a keyed fact."""

    __slots__ = ("path", "title", "starts", "sections", "size")

    def __init__(self, path: str, kept: KeptFile):
        self.path = path
        self.title, self.starts, self.sections = kept
        self.size = self.starts[-1] + len(self.sections[-1][3]) if self.sections else 0

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[n] for n in range(*index.indices(self.size))]
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError("row index out of range")
        at = bisect_right(self.starts, index) - 1
        heads, subject, superseded, lines, texts, bullets, ends = self.sections[at]
        n = index - self.starts[at]
        line, text = lines[n], texts[n]
        end = ends[n] if ends is not None else line + text.count("\n")
        kind = bullet_kind(text.partition("\n")[0]) if bullets[n] else "paragraph"
        return Row(self.path, line, end, text, kind, self.title, subject, list(heads), superseded)

    def __iter__(self) -> Iterator[Row]:
        return map(self.__getitem__, range(self.size))


class ParsedRows:
    """One memory's parsed files, keyed by (path, stamp): a file that changed is parsed again."""

    def __init__(self, root: Path, max_bytes: int = MAX_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.kept_bytes = 0
        self.parses = 0  # files parsed (for tests and benchmarks)
        self._lock = threading.Lock()
        self._files: OrderedDict[tuple[str, Stamp], KeptFile] = OrderedDict()

    def rows_of(self, rel: str, expected: Stamp | None = None) -> tuple[Stamp, FileRows] | None:
        """The rows of one file as it is now, or None when it is gone or cannot be read.

        `expected`: the stamp the caller holds for it (the index's). When no parse of that version is kept, the
        file is read at once, without the stat that only looks a kept parse up (most files a new question shows:
        its stamp comes from the read's own fstat); a file that moved on since is still read as it is now."""
        full = os.path.join(self.root, rel)
        if expected is not None:
            with self._lock:
                kept_expected = (rel, expected) in self._files
        if expected is None or kept_expected:
            try:
                stamp = stamp_of(os.stat(full))
            except OSError:
                return None
            key = (rel, stamp)
            with self._lock:
                kept = self._files.get(key)
                if kept is not None:
                    self._files.move_to_end(key)
                    return stamp, FileRows(rel, kept)
        try:  # one open, its fstat the stamp of the very bytes read (a file object and a stat spared)
            opened, data = read_stamped(full, sys.maxsize)
        except (OSError, FsmemError):
            return None
        if data is None:
            return None
        stamp = stamp_of(opened)
        key = (rel, stamp)
        text, _ = fmt.decode(data)
        rows = kept_file(ranked_cut(rel, text))
        with self._lock:
            self.parses += 1
            if key not in self._files:
                self._files[key] = rows
                self.kept_bytes += stamp[1]
            while self.kept_bytes > self.max_bytes and len(self._files) > 1:
                (_rel, gone), _rows = self._files.popitem(last=False)
                self.kept_bytes -= gone[1]
        return stamp, FileRows(rel, rows)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self.kept_bytes = 0
