"""A file's rows as `search_files` stores them: line << 2 | flags per row, and the cited note's number per row,
each in the fewest bytes that hold every value of the file.

A cold build's workers pack them where they parse the file (`fsmem.search.parsing`), so the command writing
the index stores the bytes as they come; ranking unpacks them (`fsmem.search.scoring`).
"""

from __future__ import annotations

import itertools
import operator
from array import array

from fsmem.search.postings import IndexDamaged


def pack_rows(lines: list[int], flags: list[int], groups: list[int] | None) -> tuple[bytes, bytes | None]:
    """A file's rows packed as `search_files` stores them: line << 2 | flags per row, each in 2 or 4 bytes, and
    the cited note's number per row (`groups`, None where no row cites one) in 1 or 2, the fewest that hold
    every value of the file (`unpack_rows` reads them)."""
    if max(lines, default=0) > 0x3FFFFFFF:
        lines = [min(line, 0x3FFFFFFF) for line in lines]
    packed = _narrow(list(map(operator.or_, map(operator.lshift, lines, itertools.repeat(2)), flags)), "HI")
    return packed.tobytes(), _narrow([min(g, 0xFFFF) for g in groups], "BH").tobytes() if groups is not None else None


def _narrow(values: list[int], codes: str) -> array:
    """`values` (none negative) in the narrower of two array types (`codes`) that holds them all; their length
    tells which."""
    narrow = array(codes[0]).itemsize * 8
    return array(codes[0] if max(values, default=0) >> narrow == 0 else codes[1], values)


def _unpack(data: bytes | None, n: int, codes: str) -> array:
    for code in codes:
        if data is not None and len(data) == n * array(code).itemsize:
            found = array(code)
            found.frombytes(data)
            return found
    raise IndexDamaged("packed rows do not match the row count")


def unpack_rows(lines: bytes | None, groups: bytes | None, n: int) -> tuple[array, array | None]:
    """A file's packed rows: (line << 2 | flags per row, cited-note number per row or None)."""
    if not n:
        if lines or groups:
            raise IndexDamaged("packed rows of a file without rows")
        return array("I"), None
    if not isinstance(lines, bytes) or (groups is not None and not isinstance(groups, bytes)):
        raise IndexDamaged("packed rows of the wrong type")
    return _unpack(lines, n, "HI"), _unpack(groups, n, "BH") if groups else None
