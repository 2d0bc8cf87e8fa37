"""The word index's list of words, kept by a long-lived process for the patterns that name a part of a word.

A pattern that ends, or holds, a part of a word (`lrus` of walrus) narrows the
files rg reads only once the memory's words that hold that part are known: the
list of every word of the index (`fsmem.query.grep_words`), read once and then
kept up to date with the words of every file the change feed names. Words no
file holds any more stay until the list is read again: a lookup of one finds
no file, so answers are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

MAX_TERMS = 64  # words of the memory holding a pattern's inner word: more, and that word says too little
# adding one file's words to a kept list (`learn`) costs what reading 3 of the index's words again does (9 µs,
# 3 µs each); up to LEARNED_FILES files (9 ms) they are always added; it is read again once it holds GROWTH times
# the words it was read with and LEARNED_WORDS more (words no file holds any more are let go then)
TERMS_PER_FILE, LEARNED_FILES, GROWTH, LEARNED_WORDS = 3, 1000, 2, 100_000


class KeptWords:
    """Every word of one word index, one a line, read on first use and kept until `forget`."""

    def __init__(self, read: Callable[[], list[str]], data_version: Callable[[], int]):
        self._read = read  # every word of the index, from its database
        self._data_version = data_version  # changes whenever another connection commits to the index
        self._text: str | None = None  # "\nterm\nterm\n"
        self._terms: set[str] = set()  # the same words, while `_text` is kept
        self._read_terms = 0  # how many it was read with
        self._read_at: int | None = None  # the index's data_version when it was read

    @property
    def kept(self) -> bool:
        return self._text is not None

    def others_stored(self) -> bool:
        """Whether another process stored files in the index since the list was read (whose words it may lack)."""
        return self._text is not None and self._data_version() != self._read_at

    def text(self) -> str:
        if self._text is None:
            # the version first: a change committed between the two reads only makes the caller read more files
            self._read_at = self._data_version()
            terms = self._read()
            self._text, self._terms, self._read_terms = "\n" + "\n".join(terms) + "\n", set(terms), len(terms)
        return self._text

    def forget(self) -> None:
        self._text, self._terms = None, set()

    def cheaper_to_read_again(self, files: int) -> bool:
        """Whether reading the index's words again costs less than `learn` of this many files' words."""
        return files > max(LEARNED_FILES, len(self._terms) // TERMS_PER_FILE)

    def learn(self, texts: Iterable[str]) -> None:
        """Add the words of files just read to the kept list (nothing while none is kept)."""
        if self._text is None:
            return
        new: set[str] = set()
        for text in texts:
            new.update(text.split())
        new -= self._terms
        if new:
            self._terms |= new
            self._text += "\n".join(new) + "\n"
        if len(self._terms) > GROWTH * self._read_terms + LEARNED_WORDS:
            self.forget()

    def holding(self, word: str, *, suffix: bool) -> list[str] | None:
        """The memory's words that end with `word` (or hold it anywhere); None if more than MAX_TERMS."""
        text = self.text()
        key = word + "\n" if suffix else word
        found: list[str] = []
        at = 0
        while (at := text.find(key, at)) >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at + len(word))
            found.append(text[start:end])
            if len(found) > MAX_TERMS:
                return None
            at = end
        return found
