"""A cold build's rows cut by SQLite as the command writes them, rather than stemmed by the workers.

A build's workers send most files' rows as they are (`RAW` before each row's ASCII text and its date's
words), and the writing connection cuts them as `fsmem.search.analyzer` does, in C: the native module, loaded
on that connection as a SQLite extension (`register`), puts a tokenizer before FTS5's `ascii` under its name,
which cuts a text marked `RAW` into the analyzer's terms, counts them for the file's document (`take`), and
hands any other text to FTS5's `ascii`. The tables keep their schema and every byte they store
(`benchmarks/bench_cold_start.py --same-index`); other connections, and a process without the native module,
write stemmed rows through `ascii` itself. The stemming, the counting and most of the sending leave the
workers: a first search's CPU at 10k files falls by 4-6 % quiet, 12-15 % at load 11-15 (docs/performance.md).

A file's rows go raw only where its analysis is the analyzer's ASCII path (`raw_texts`): no row cites a note,
every row is ASCII and shorter than FTS5's longest token, so that no term is cut shorter by FTS5.
"""

from __future__ import annotations

import weakref
from array import array
from typing import Any

from fsmem.search import postings
from fsmem.search.analyzer import STOP_WORDS

RAW = "\x01"  # a row's text that the writing connection cuts (no stem, and so no stored row, begins with it)
_native = postings._native
_cuts: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_setup: list[bool] = []  # whether the native module found Snowball's functions, once per process


def register(conn) -> bool:
    """Put the native module's tokenizer before FTS5's `ascii` on `conn`, before the connection reads any
    FTS5 table (a table already read keeps the tokenizer it was opened with); whether it is there."""
    found = _cuts.get(conn)
    if found is not None:
        return found
    entry = getattr(_native, "cut_entry", None)
    found = entry is not None and _stemmer_found() and entry_loaded(conn, entry)
    _cuts[conn] = found
    return found


def entry_loaded(conn, entry: str | None) -> bool:
    """Load the native module into `conn` as a SQLite extension through its entry point `entry` (apsw's SQLite
    exports no functions: the module reaches them through the table SQLite hands an extension), with extension
    loading switched on for that call alone; whether it loaded (never where the module or `entry` is missing)."""
    import apsw

    if _native is None or entry is None:
        return False
    conn.enable_load_extension(True)
    try:
        conn.load_extension(_native.__file__, entry)
        return True
    except apsw.Error:
        return False
    finally:
        conn.enable_load_extension(False)


def cuts(conn) -> bool:
    """Whether `conn` cuts raw rows (`register`)."""
    return _cuts.get(conn, False)


def _stemmer_found() -> bool:
    if not _setup:
        import Stemmer

        _setup.append(bool(_native.cut_setup(Stemmer.__file__, tuple(sorted(STOP_WORDS)))))
    return _setup[0]


def raw_texts(texts: list[str], when: str) -> list[str] | None:
    """Each row's text as the writing connection cuts it (`RAW`, the text, its date's words `when`), or None
    where the rows must be stemmed here: a row not ASCII, or as long as FTS5's longest token."""
    if not texts or not "".join(texts).isascii() or max(map(len, texts)) >= postings.MAX_TOKEN_BYTES:
        return None
    if not when.isascii():
        return None
    return [f"{RAW}{text} {when}" for text in texts] if when else [RAW + text for text in texts]


def take(conn) -> tuple[int, postings.Counted | None, str]:
    """What the raw rows cut on `conn` since the last call held: how many were cut, their document (document
    0, as `postings.counted` counts it; None where they hold no term), and its distinct terms, space separated."""
    (blob,) = conn.execute("SELECT fsmem_cut_take()").fetchone()
    head = array("I", blob[:12])
    values, distinct, length = head
    terms = blob[12 + 4 * distinct :].decode("utf-8")
    if not distinct:
        return values, None, ""
    return values, (0, length, terms, blob[12 : 12 + 4 * distinct]), terms
