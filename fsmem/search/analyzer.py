"""Text to index terms: lowercase words, English stop words removed, Snowball-stemmed.

The index stores these terms (pre-stemmed, space separated) and the query is
analysed the same way, so index, query, fuzzy vocabulary and IDF all speak
one vocabulary. `_` separates words (`place_of_death` is three words, as a
human reads it), and dialog-id markers such as `[D1:3]` are ids, not words.
Nor is a machine token: a word of 20 or more characters that mixes letters
and digits (an API key, a hash) is no term, so no key typed into a file ever
sits in the index.
Text is cut in one Unicode form, NFKC, so that a word saved in NFD (as macOS names and some editors write
`Zürich`: a `u` and a combining mark) or in a compatibility form (the `ﬁ` ligature of a PDF, fullwidth
letters) gives the terms the same word typed in NFC gives.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable

from fsmem.errors import MissingDependency
from fsmem.search import postings

# Bump when the terms of a text change: the index is then rebuilt.
ANALYZER_VERSION = 5
TOKEN_CHARS = 20  # a word this long, with letters and digits, is a machine token
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_MARKER = re.compile(r"\[[A-Za-z]*\d+:\d+\]")
# Lucene's English stop words (what bm25s removes), and question words, which carry no topic.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with what when where who whom whose which why how".split()
)


class Analyzer:
    """Words and their Snowball stems, each stem computed once per process."""

    def __init__(self) -> None:
        try:
            import Stemmer
        except ImportError:  # pragma: no cover - a core dependency
            raise MissingDependency("search needs PyStemmer; install it with: pip install PyStemmer") from None
        self._stem_word = Stemmer.Stemmer("english").stemWord
        self._cache: dict[str, str] = {}
        self._table: dict[str, str] = {"\0": "\0"}  # word -> stem, "" for a stop word; NUL: `texts`
        # the words the C module found in the table, by their bytes (a stem in the table never changes)
        self._memo = postings._native.WordMemo() if postings._native is not None else None

    def words(self, text: str) -> list[str]:
        """Lowercase words without stop words (not stemmed): what fuzzy matching compares."""
        text = canonical(text)
        if "[" in text:
            text = _MARKER.sub(" ", text)
        return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and not _machine_token(w)]

    def stem(self, word: str) -> str:
        stemmed = self._cache.get(word)
        if stemmed is None:
            stemmed = self._cache[word] = self._stem_word(word)
        return stemmed

    def terms(self, text: str) -> list[str]:
        return self.text(text).split()

    def text(self, text: str) -> str:
        """The terms of `text` as the index stores them: stems separated by spaces.

        A cold build analyses every row of every file: ASCII text (most of it) is cut into words and looked up
        in one pass in C, as `texts` does (a cold build's headings, dates and names), or else by a byte
        translation and a split, as `_WORD` cuts it and twice as fast, the words looked up in C. Other text is
        put in NFKC first (ASCII is in every form already)."""
        text = canonical(text)
        if "[" in text:
            text = _MARKER.sub(" ", text)
        if text.isascii():
            if postings._native is not None and "\0" not in text:
                return postings._native.stemmed_texts(text, self._table, self._stem_new, None, self._memo)[0]
            words = text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
        else:
            words = _WORD.findall(text.lower())
        return self._stems(words)

    def texts(self, texts: list[str], terms: set[str] | None = None, counts: Counter[str] | None = None) -> list[str]:
        """`[self.text(t) for t in texts]`, the texts of one file cut and looked up as one: a cold build's
        rows are short, and each call's own steps cost as much as its words. The texts are joined by a NUL
        between spaces and cut into words and looked up in one pass (`stemmed_texts`, in C where built).

        With `terms`, every term of the texts is added to it, looked up once per distinct word rather than
        cut again out of the texts' terms (a cold build keeps each file's vocabulary); with `counts`, how
        often each term occurs in them all is added to it, from the words' counts (the file's document)."""
        joined = " \0 ".join(texts)
        if "[" in joined:
            joined = _MARKER.sub(" ", joined)
        if not texts or not joined.isascii() or joined.count("\0") != len(texts) - 1:
            found = [self.text(t) for t in texts]
            if terms is not None:
                terms.update(" ".join(found).split())
            if counts is not None:
                counts.update(" ".join(found).split())
            return found
        if terms is None:
            return _stemmed_texts(joined, self._table, self._stem_new, counts, self._memo)
        # every distinct term, in the order they first occur: into `counts` itself if it is fresh
        seen = counts if counts is not None and not counts else Counter()
        found = _stemmed_texts(joined, self._table, self._stem_new, seen, self._memo)
        if counts is not None and seen is not counts:
            counts.update(seen)
        terms.update(seen)
        return found

    def _stems(self, words: list[str]) -> str:
        """The stems of `words` (stop words and machine tokens left out), space separated."""
        return " ".join(self._stem_list(words))

    def _stem_list(self, words: list[str]) -> list[str]:
        """The stems of `words` (stop words and machine tokens left out), looked up in C; a word not yet in the
        table is stemmed once and kept."""
        return _looked_up(words, self._table, self._stem_new)

    def _stem_new(self, word: str) -> str:
        """The stem of a word not yet in the table ("" for a stop word or a machine token), kept in it."""
        stem = self._table[word] = "" if word in STOP_WORDS or _machine_token(word) else self._stem_word(word)
        return stem


def stemmed_texts(
    joined: str,
    table: dict[str, str],
    missing: Callable[[str], str],
    counts: Counter[str] | None,
    memo: object = None,
) -> list[str]:
    """The terms of each NUL-separated part of ASCII `joined`: its words (runs of ASCII letters and digits,
    lowercased, as `_WORD` cuts them) mapped through `table` (word -> stem, "" for a word left out; a NUL, if
    there, to itself), a word not in it through `missing`; each part's non-empty stems joined by spaces. With
    `counts`, each stem's occurrences are added to it. The Python twin of `fsmem.search._native.stemmed_texts`
    (tests/test_native.py holds them equal), as fast as Python does it: one translation and one split for all
    the parts, the words looked up in C. `memo` is the C module's (`WordMemo`: the words it found in `table`,
    by their bytes, whose stems never change there), unused here."""
    stems = _looked_up(joined.encode("ascii").translate(_ASCII_ROWS).decode("ascii").split(), table, missing)
    if counts is not None:
        counts.update(stems)
        counts.pop("\0", None)
    return [part.strip(" ") for part in " ".join(stems).split("\0")]


def _looked_up(words: list[str], table: dict[str, str], missing: Callable[[str], str]) -> list[str]:
    """The non-empty stems of `words` through `table`, looked up in C; a word not in it through `missing` (which
    keeps it there), a NUL as itself."""
    try:
        return list(filter(None, map(table.__getitem__, words)))
    except KeyError:
        return [
            stem
            for stem in (word if word == "\0" else table[word] if word in table else missing(word) for word in words)
            if stem
        ]


# an ASCII byte to itself lowercased when `_WORD` takes it (a letter or digit), else to a space
_ASCII_WORDS = bytes(ord(chr(c).lower()) if chr(c).isalnum() else 32 for c in range(128)) + b" " * 128
_ASCII_ROWS = b"\0" + _ASCII_WORDS[1:]  # and the NUL `Analyzer.texts` joins texts with kept


def canonical(text: str) -> str:
    """`text` in the one form index and question are cut from (NFKC); ASCII text as it is, at no cost."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _machine_token(word: str) -> bool:
    return len(word) >= TOKEN_CHARS and any(c.isdigit() for c in word) and not word.isdigit()


# fsmem.search._native's where it was built (postings imports it), else the Python twin, which cuts alike
_stemmed_texts = postings._native.stemmed_texts if postings._native else stemmed_texts
