"""The document part of the score in C (fsmem/search/_native.c); fsmem.search.postings holds its Python twin."""

from array import array
from collections.abc import Sequence

def term_parts(
    rows: Sequence[tuple[int, int, bytes, bytes]], ids: array, norm: array, shift: int, k: float, dense: int, /
) -> tuple[int, array, array, array | None]: ...
def best_documents(
    terms: Sequence[tuple[array, array, array | None]], rows: int, limit: int, sparse: bool, /
) -> tuple[list[int], list[float]]: ...
