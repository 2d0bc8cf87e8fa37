"""The rows of the files answers are read back from, parsed once per version of each file and kept.

The index stores no text: an answer reads the rows it shows from their files.
A server answers the same files again and again, and parsing one (its YAML,
its Markdown) costs about a millisecond; 64 files were kept, fewer than one
busy minute of searches touches, so most answers parsed most of their files
again. Here the files are kept by the bytes of their text (`MAX_BYTES`), the
least recently used given back first; parsing runs outside the lock, so
searches on many threads read back their rows side by side, and never wait for
a refresh of the index.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from fsmem import format as fmt
from fsmem.errors import FsmemError
from fsmem.format.rows import Row, document_rows
from fsmem.search.parsing import Stamp, is_ranked, ranked_rows, stamp_of
from fsmem.store.paths import read_regular

MAX_BYTES = 8 << 20  # of the files' text kept parsed (their rows take about 3.5 times as much memory)


class ParsedRows:
    """One memory's parsed files, keyed by (path, stamp): a file that changed is parsed again."""

    def __init__(self, root: Path, max_bytes: int = MAX_BYTES):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.kept_bytes = 0
        self.parses = 0  # files parsed (for tests and benchmarks)
        self._lock = threading.Lock()
        self._files: OrderedDict[tuple[str, Stamp], list[Row]] = OrderedDict()

    def rows_of(self, rel: str) -> tuple[Stamp, list[Row]] | None:
        """The rows of one file as it is now, or None when it is gone or cannot be read."""
        full = os.path.join(self.root, rel)
        try:
            stamp = stamp_of(os.stat(full))
        except OSError:
            return None
        key = (rel, stamp)
        with self._lock:
            kept = self._files.get(key)
            if kept is not None:
                self._files.move_to_end(key)
                return stamp, kept
        try:
            data = read_regular(full)
        except (OSError, FsmemError):
            return None
        text, _ = fmt.decode(data)
        rows = ranked_rows(rel, text, document_rows(rel, fmt.split(text))) if is_ranked(rel, text) else []
        with self._lock:
            self.parses += 1
            if key not in self._files:
                self._files[key] = rows
                self.kept_bytes += stamp[1]
            while self.kept_bytes > self.max_bytes and len(self._files) > 1:
                (_rel, gone), _rows = self._files.popitem(last=False)
                self.kept_bytes -= gone[1]
        return stamp, rows

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self.kept_bytes = 0
