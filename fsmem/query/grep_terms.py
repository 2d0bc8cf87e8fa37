"""The words a grep pattern needs and the words a file holds, as the grep word index (`fsmem.query.grep_words`)
reads them: ASCII alphanumeric runs, lowercased.

With `--ignore-case`, rg folds case as Unicode's simple folding does, and two
non-ASCII letters fold to ASCII ones: U+212A KELVIN SIGN to k, U+017F LONG S
to s. A file's words read them as those letters, so a file spelling a word with
them holds the ASCII word too (a superset, which costs a case-sensitive grep
nothing but a candidate). A file starting with a UTF-16 byte-order mark (rg
reads it transcoded), or holding a word longer than FTS5 keeps of one
(`MAX_WORD_BYTES`), has no words: the index makes it a candidate for every
pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_WORD_BYTES = 32768  # FTS5 keeps this much of a longer word (FTS5_MAX_TOKEN_SIZE): its file is always searched

_WORD_BYTES = re.compile(rb"[a-z0-9]+")
_WORD = re.compile(r"[A-Za-z0-9]+")
_REGEX_OPERATORS = frozenset("\\.+*?()|[]{}^$")
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
_FOLDED = (("\u212a".encode(), b"k"), ("\u017f".encode(), b"s"))  # what rg -i matches to an ASCII letter


@dataclass(frozen=True)
class Need:
    """A word every match holds: as a whole word of the file (`exact`), or as its start (`prefix`), its end
    (`suffix`) or anywhere in it (`inner`)."""

    word: str
    kind: str


def needs(pattern: str, *, fixed_strings: bool, word: bool) -> list[Need] | None:
    """The words every match of `pattern` holds (lowercased), or None where the pattern is not one the
    word index reasons about exactly: a regular expression with operators, or a character outside printable
    ASCII (a newline, or a letter whose case rg folds beyond ASCII)."""
    if not pattern or not all(" " <= c <= "~" for c in pattern):
        return None
    if not fixed_strings and not _REGEX_OPERATORS.isdisjoint(pattern):
        return None
    found = []
    for run in _WORD.finditer(pattern):
        start = run.start() > 0 or word  # a pattern's non-alphanumeric neighbour, or -w's boundary, ends the word
        end = run.end() < len(pattern) or word
        kind = "exact" if start and end else "prefix" if start else "suffix" if end else "inner"
        found.append(Need(run.group().lower(), kind))
    return found


def words_of(data: bytes) -> str | None:
    """A file's distinct words, lowercased, space-separated (what the `ascii` tokenizer splits back); None
    for a file rg would transcode (UTF-16) or holding a word longer than FTS5 keeps of one (the vocabulary
    would not hold its end), which every pattern may match."""
    if data.startswith(_UTF16_MARKS):
        return None
    data = data.lower()  # ASCII letters only, as the index's words are
    for letter, ascii_letter in _FOLDED:
        if letter in data:
            data = data.replace(letter, ascii_letter)
    words = set(_WORD_BYTES.findall(data))
    if words and max(map(len, words)) > MAX_WORD_BYTES:
        return None
    return b" ".join(words).decode("ascii")
