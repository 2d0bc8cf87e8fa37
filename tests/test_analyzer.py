"""The analyzer's terms: the fast path for ASCII text gives exactly what the word pattern gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem.search.analyzer import _MARKER, _WORD, STOP_WORDS, Analyzer, _machine_token

ANALYZER = Analyzer()


def by_pattern(text: str) -> str:
    """The terms as the pattern and a plain loop give them: what the index stored before the fast path."""
    if "[" in text:
        text = _MARKER.sub(" ", text)
    words = _WORD.findall(text.lower())
    out = [ANALYZER.stem(w) for w in words if w not in STOP_WORDS and not _machine_token(w)]
    return " ".join(out)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_text_is_cut_as_the_pattern_cuts_it(text: str) -> None:
    assert ANALYZER.text(text) == by_pattern(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_gives_the_patterns_terms(text: str) -> None:
    assert ANALYZER.text(text) == by_pattern(text)


def test_rows_of_a_memory() -> None:
    rows = [
        "- deadline: UTC+1, per the ledger [D1:3] (2023-07-15, sessions/2026/07/14/s1583.md)",
        "place_of_death: Ürümqi — the ÉCOLE's Straße",
        "key sk_live_4eC39HqLyjWDarjtT1zdp7dcAB12 and 12345678901234567890123 stay out",
        "What is the renewal date for Acme Corp?",
        "",
    ]
    for row in rows:
        assert ANALYZER.text(row) == by_pattern(row)
    assert ANALYZER.text("What is the renewal date for Acme Corp?") == "renew date acm corp"


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text("ab XYZ09_-[]:\0\n\té ß İthe", max_size=12) | st.sampled_from(["[D1:3]", "running", "x1y2" * 6]))
)
def test_texts_is_text_of_each(texts):
    """A file's rows analysed at once give each row's terms, whatever they hold (NUL, markers, non-ASCII)."""
    analyzer = Analyzer()
    terms: set[str] = {"kept"}
    assert analyzer.texts(texts, terms) == [Analyzer().text(t) for t in texts]
    # and the file's vocabulary, which a cold build takes from the words it looked up, is every term of them
    assert terms == {"kept", *" ".join(Analyzer().text(t) for t in texts).split()}
