"""The analyzer's terms: the fast path for ASCII text gives exactly what the word pattern gives."""

from __future__ import annotations

import unicodedata

from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem.search.analyzer import _MARKER, _WORD, STOP_WORDS, Analyzer, _machine_token

ANALYZER = Analyzer()


def by_pattern(text: str) -> str:
    """The terms as the pattern and a plain loop give them: what the index stored before the fast path."""
    text = unicodedata.normalize("NFKC", text)
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


# text in one Unicode form or another: precomposed letters, the same letters decomposed (NFD, as macOS writes
# them), lone combining marks, compatibility characters (ligatures, fullwidth letters and digits, superscripts)
_FORMS = st.lists(
    st.sampled_from(["Zu\u0308rich", "Z\u00fcrich", "\u0308", "\u0301e", "e\u0301", "\u00e9", "\ufb01le", "\ufb03",
                     "\uff3a\uff55\uff12", "x\u00b2", "\u212b", "\u00c5", "\u1e9b\u0323", "\u0130", "\u00df",
                     "\uff3b\uff24\uff11:\uff13\uff3d", "[D1:3]", " ", "_", "the", "Running"])
    | st.text(max_size=3),
    max_size=12,
).map("".join)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_FORMS)
def test_every_unicode_form_of_a_text_gives_its_terms(text: str) -> None:
    """A text in NFC, NFD, NFKC or NFKD gives the same terms and the same words (a question's), and so do its
    rows analysed as one file: index and question meet whatever form each was typed in."""
    forms = {unicodedata.normalize(form, text) for form in ("NFC", "NFD", "NFKC", "NFKD")}
    assert {ANALYZER.text(form) for form in forms} == {by_pattern(text)}
    assert len({tuple(ANALYZER.words(form)) for form in forms}) == 1
    assert Analyzer().texts(sorted(forms)) == [by_pattern(text)] * len(forms)
