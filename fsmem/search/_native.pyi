"""fsmem's C module (fsmem/search/_native.c): the document part of the score (its Python twin:
fsmem.search.postings), each candidate row's relevance and salience (their twins: fsmem.search.scoring.pool_relevance,
salience_scores), and a
cold build's cutting of a plain body's sections into rows and of its rows' texts into stems and of its rows
into the index's columns (their twins: fsmem.format.rows.plain_rows, fsmem.search.analyzer.stemmed_texts,
fsmem.search.parsing.row_columns); and, as a SQLite extension, the row part's score function (its twin:
fsmem.search.rowscores._Scores)."""

from array import array
from collections.abc import Callable, Sequence
from typing import Any

def term_parts(
    rows: Sequence[tuple[int, int, bytes, bytes]], ids: array, norm: array, shift: int, k: float, dense: int, /
) -> tuple[int, array, array, array | None]: ...
def best_documents(
    terms: Sequence[tuple[array, array, array | None]], rows: int, limit: int, sparse: bool, /
) -> tuple[list[int], list[float]]: ...
def best_rows(
    found: list[tuple[int, float]], packed: dict[int, array] | None, flag: int, shift: int, limit: int, /
) -> list[tuple[int, float]]: ...
def pool_relevance(
    pool: list[int],
    files: dict[int, tuple[str, array, array | None, tuple[str, ...], float]],
    raw: dict[int, float],
    groups: dict[Any, float],
    w_row: float,
    w_neighbours: float,
    w_document: float,
    row_den: float,
    parts: float,
    shift: int,
    linked: int,
    /,
) -> tuple[dict[int, float], dict[int, str], dict[int, int]]: ...
def scaled_documents(
    positions: list[int], scores: list[float], ids: array, denominator: float, /
) -> dict[int, float]: ...
def salience_scores(
    pool: list[int],
    base: dict[int, float],
    relevance: dict[int, float],
    paths: dict[int, str],
    lines: dict[int, int],
    by_path: dict[str, dict[int, int]] | None,
    w_usage: float,
    most: float,
    shift: int,
    /,
) -> dict[int, float] | None: ...
def best_first_rows(
    pool: list[int], scores: dict[int, float], paths: dict[int, str], lines: dict[int, int], /
) -> list[int] | None: ...
def plain_rows(text: str, begin: int, stop: int, number: int, /) -> tuple[list[int], list[str], list[bool]]: ...
def plain_sections(
    text: str, number: int, title: str | None, subject: str | None, /
) -> tuple[str | None, list[tuple[list[str], str | None, bool, list[int], list[str], list[bool]]]]: ...
def add_postings(rows: dict[str, tuple[list[int], list[int]]], doc: int, terms: str, counts: bytes, /) -> None: ...
def encode_postings(before: int, ids: list[int], counts: list[int], /) -> tuple[int, bytes, bytes]: ...
def row_columns(
    terms: list[str], when: str, sections: list[tuple[list[int], str, bool, bool]], /
) -> tuple[list[str], list[str], bytes, list[int]]: ...
def stemmed_texts(
    joined: str,
    table: dict[str, str],
    missing: Callable[[str], str],
    counts: dict[str, int] | None,
    memo: WordMemo | None = None,
    /,
) -> list[str]: ...

class WordMemo:
    """The words `stemmed_texts` found in one table, remembered by their bytes."""

# the SQLite extension's entry point (it registers the FTS5 function fsmem_row_score); None where the module was
# built without SQLite's sqlite3ext.h
row_score_entry: str | None
# the SQLite extension's entry point that puts the raw rows' tokenizer before FTS5's `ascii` (fsmem.search.raw_rows),
# after `cut_setup` found Snowball's functions; None where the module was built without sqlite3ext.h (and so has
# no `cut_setup`)
cut_entry: str | None

def cut_setup(stemmer_library: str, stop_words: tuple[str, ...], /) -> bool: ...
