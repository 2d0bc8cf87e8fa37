"""The keyed-fact rule and the provenance syntax (fsmem.facts)."""

from __future__ import annotations

import pytest

from fsmem.format import facts as F


@pytest.mark.parametrize(
    "line, key, value",
    [
        ("- employer: Globex", "employer", "Globex"),
        ("- billing contact: Adam Smith", "billing contact", "Adam Smith"),
        ("- place_of_death: Camden Town", "place_of_death", "Camden Town"),
        ("- on-call rotation: weeks 1 and 3", "on-call rotation", "weeks 1 and 3"),
        ("- a b c d: four words", "a b c d", "four words"),
        ("- note: x: y", "note", "x: y"),
        ("- 2fa: required", "2fa", "required"),
        ("- straße: Hauptstraße 1", "straße", "Hauptstraße 1"),
        ("- employer: ~", "employer", None),
        ("- employer:   Globex   ", "employer", "Globex"),
        ("* employer: Globex", "employer", "Globex"),  # CommonMark's three bullets are one fact
        ("+ employer: Globex", "employer", "Globex"),
    ],
)
def test_keyed_facts(line, key, value):
    fact = F.parse_fact(line)
    assert fact is not None and (fact.key, fact.value) == (key, value)


@pytest.mark.parametrize(
    "line",
    [
        "- Wow: that trip sounds amazing!",  # capitalised: an observation
        "- a b c d e: five words",
        "- " + "k" * 41 + ": too long a key",
        "- employer:",  # no value
        "- employer: ",
        "- employer:Globex",  # no space after the colon
        "-employer: Globex",
        "  - employer: Globex",  # nested bullets are not facts
        "  * employer: Globex",
        "*employer: Globex",
        "1. employer: Globex",  # a numbered item is not a fact
        "* * *",  # a thematic break, not a bullet
        "- - -",
        "- see http://example.com",
        "- Note that: x",
        "- key!: value",
        "- two  spaces: value",
        "- 東京: capital",  # letters without case are not lowercase letters
    ],
)
def test_not_keyed_facts(line):
    assert F.parse_fact(line) is None


def test_forty_character_key_is_the_limit():
    assert F.parse_fact("- " + "k" * 40 + ": v").key == "k" * 40


def test_explicit_date_and_bad_date():
    fact = F.parse_fact("- role: cto (as of 2024-03-01)")
    assert (fact.value, fact.as_of, fact.bad_date) == ("cto", "2024-03-01", None)
    bad = F.parse_fact("- role: cto (as of 2024-13-45)")
    assert (bad.value, bad.as_of, bad.bad_date) == ("cto", None, "2024-13-45")


def test_provenance_round_trip():
    first, last = F.Stamp("2026-03-01", "sessions/a.md"), F.Stamp("2026-05-02", "sessions/b.md")
    line = F.render_current("role", "cto", first, last, "entities/people/ann.md")
    assert line == "- role: cto ([2026-03-01](../../sessions/a.md); confirmed [2026-05-02](../../sessions/b.md))"
    fact = F.parse_fact(line)
    assert fact.value == "cto"
    assert fact.provenance == F.Provenance(
        "2026-03-01", ("sessions/a.md",), None, F.Stamp("2026-05-02", "sessions/b.md")
    )
    old = F.render_superseded("employer", "Acme Corp", first, first, "2026-11-20", "topics/x.md")
    assert old == "- employer: Acme Corp ([2026-03-01](../sessions/a.md) to 2026-11-20)"
    parsed = F.parse_fact(old)
    assert (parsed.value, parsed.provenance.first, parsed.provenance.to) == ("Acme Corp", "2026-03-01", "2026-11-20")
    assert parsed.provenance.sources == ("sessions/a.md",)
    gone = F.render_superseded(
        "employer", None, F.Stamp("", "entities/x.md"), F.Stamp("", "entities/x.md"), None, "entities/x.md"
    )
    assert gone == "- employer: ~ ([undated](../entities/x.md))"
    assert F.parse_fact(gone).retracted and F.parse_fact(gone).provenance.sources == ("entities/x.md",)


def test_citations_written_before_links_are_still_read():
    fact = F.parse_fact("- role: cto (2026-03-01, sessions/a.md; confirmed 2026-05-02, sessions/b.md)")
    assert fact.value == "cto" and fact.provenance == F.Provenance(
        "2026-03-01", ("sessions/a.md",), None, F.Stamp("2026-05-02", "sessions/b.md")
    )
    old = F.parse_fact("- employer: Acme Corp (2026-03-01 to 2026-11-20, sessions/a.md)")
    assert (old.value, old.provenance.to, old.provenance.sources) == ("Acme Corp", "2026-11-20", ("sessions/a.md",))


def test_value_with_ordinary_parentheses_keeps_them():
    fact = F.parse_fact("- venue: Town Hall (second floor)")
    assert (fact.value, fact.provenance) == ("Town Hall (second floor)", None)
    not_a_date = F.parse_fact("- x: y (2026-02-30, sessions/a.md)")
    assert not_a_date.value == "y (2026-02-30, sessions/a.md)"
    not_a_link = F.parse_fact("- x: y ([2026-02-30](../sessions/a.md))")
    assert not_a_link.value == "y ([2026-02-30](../sessions/a.md))"
    a_link_in_a_value = F.parse_fact("- site: [docs](https://example.com/docs)")
    assert (a_link_in_a_value.value, a_link_in_a_value.provenance) == ("[docs](https://example.com/docs)", None)


def test_observation_provenance_lists_sources():
    obs = F.parse_observation("- Prefers PDF. (2026-11-02, sessions/a.md; sessions/b.md)")
    assert obs.text == "Prefers PDF." and obs.provenance.sources == ("sessions/a.md", "sessions/b.md")
    line = F.render_observation("Prefers PDF.", "2026-11-02", ["sessions/a.md", "sessions/b.md"], "topics/t.md")
    assert line == "- Prefers PDF. ([2026-11-02](../sessions/a.md); [b](../sessions/b.md))"
    assert F.parse_observation(line).provenance.sources == ("sessions/a.md", "sessions/b.md")


def test_slugify():
    assert F.slugify("Adam Smith") == "adam-smith"
    assert F.slugify("Rogério Ceni") == "rogerio-ceni"
    assert F.slugify("Washington, D.C.") == "washington-d-c"
    assert F.slugify("!!!") == "untitled"
