"""Nothing a note says is lost or hidden wrongly by consolidation: a property test on the whole memory.

Random notes full of near-duplicates that say different things (a number, a decimal point, a sign, a
currency, a version, an address, a negation, a name) and of ones that say the same (case, spacing,
full-width forms, punctuation), keyed facts with and without `(as of …)` dates and UTC times, consolidated
in one run and in random batches (older notes arriving later). Then every distinct fact is in its document or
history file, the current value of each key is its latest record's, a value is superseded only by a later
record of another value, every observation is shown in words that say what it said, citing its note, the
batches give the bytes of one run, and a second run changes nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.consolidate import plan as C
from fsmem.format import facts as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import consolidation_scenarios as S  # noqa: E402

NOW = "2026-12-01T08:00:00+00:00"
DOCUMENTS = {"people/Ann Lee": "entities/people/ann-lee", "topic/Ops": "topics/ops"}
DATES = ["2026-01-01", "2026-01-02", "2026-01-03"]
TIMES = ["2026-01-02T08:00:00Z", "2026-01-02T10:00:01+02:00", "2026-01-02T23:59:59Z", "2026-01-01T20:00:00-05:00"]
KEYS = ["salary", "email", "status", "version"]
VALUES = [
    "100,000", "150,000", "100000", "1.5", "15", "-5", "5", "$5", "€5", "５", "v1.2.3", "v1.2.4",
    "ann@example.com", "ann@example.org", "Acme", "acme", "ACME  Corp", "Acme Corp", "likes tea",
    "does not like tea", "Acme (UK) Ltd", "a: b", "# not a heading", "---", "Zürich", "Zu\u0308rich", "~",
]  # fmt: skip
# a person's document written before any note: its facts are seeds of their keys, dated by its `created`
HUMAN = {
    "entities/people/ann-lee": (
        "---\ntitle: Ann Lee\nentity: people/Ann Lee\ncreated: 2026-01-01\nupdated: 2026-01-01\n---\n# Ann Lee\n\n"
        "Prose a person wrote.\n\n## Facts\n- salary: 120,000\n- email: ann@example.net\n\n"
        "## Notes\n- Salary is 120,000 per year.\n- likes tea with milk and sugar in the morning\n"
    ),
}
OBSERVATIONS = [
    "Salary is 100,000 per year.", "Salary is 150,000 per year.", "salary is 100,000 per year",
    "Salary is １００,０００ per year!", "Likes tea with milk and sugar in the morning.",
    "Likes tea with milk and no sugar in the morning.", "Dislikes tea with milk and sugar in the morning.",
    "The freezer in the lab is kept at -20 degrees", "The freezer in the lab is kept at 20 degrees",
    "The freezer in the lab is kept at 2.0 degrees", "Runs version 3.2.1 of the billing client",
    "Runs version 3.2.4 of the billing client", "Paid $1,500 for the annual licence.",
    "Paid €1,500 for the annual licence.", "Met Michael Stone at the Berlin conference",
    "Met Michaela Stone at the Berlin conference", "Met Michael Stone at the Bern conference",
    "Prefers e-mail over the phone.", "prefers email over phone",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", C.KILL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


fact_lines = st.builds(
    S.fact_line,
    st.sampled_from(KEYS),
    st.sampled_from(VALUES),
    st.one_of(st.none(), st.sampled_from(DATES), st.sampled_from(TIMES)),
)
lines = st.one_of(fact_lines, st.sampled_from(OBSERVATIONS).map(lambda text: "- " + text))
notes = st.dictionaries(
    st.tuples(st.sampled_from(DATES), st.sampled_from(["a", "b"])),
    st.lists(st.tuples(st.sampled_from(sorted(DOCUMENTS)), st.lists(lines, min_size=1, max_size=4)), max_size=2),
    min_size=1,
    max_size=5,
)


def _body(sections: list[tuple[str, list[str]]]) -> str:
    return "\n".join(f"## {subject}\n" + "\n".join(said) + "\n" for subject, said in sections)


def _write(root: Path, chosen: dict) -> None:
    for (date, session), sections in chosen.items():
        S.session_note(root, date, session, _body(sections))


def _shown(root: Path, document: str) -> dict[str, list[str]]:
    """The lines under each section of the document and its history file (`facts`, `superseded`, `notes`)."""
    sections: dict[str, list[str]] = {"facts": [], "superseded": [], "notes": []}
    for path in (root / f"{document}.md", root / f"{document}.history.md"):
        if not path.exists():
            continue
        title = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("## "):
                title = line[3:].strip().casefold()
            elif title in sections and F.is_bullet(line):
                sections[title].append(line)
    return sections


def _records(chosen: dict, human: bool) -> dict[tuple[str, str], list[tuple[tuple, str | None, str]]]:
    """Each (subject, key)'s records in the order the rules give them: stamp, note path, line."""
    records: dict[tuple[str, str], list[tuple[tuple, str | None, str]]] = {}
    if human:
        for subject, document in DOCUMENTS.items():
            for number, line in enumerate(HUMAN.get(document, "").splitlines()):
                fact = F.parse_fact(line)
                if fact is not None:
                    order = ("2026-01-01", f"{document}.md", number)
                    records.setdefault((subject, fact.key), []).append((order, fact.value, f"{document}.md"))
    for (date, session), sections in chosen.items():
        path = f"sessions/{date.replace('-', '/')}/{session}.md"
        number = 0
        for subject, said in sections:
            for line in said:
                number += 1
                fact = F.parse_fact(line)
                if fact is not None:
                    order = (fact.as_of or date, path, number)
                    records.setdefault((subject, fact.key), []).append((order, fact.value, path))
    for history in records.values():
        history.sort(key=lambda record: record[0])
    return records


def _check(root: Path, chosen: dict, human: bool) -> None:
    for (subject, key), history in _records(chosen, human).items():
        shown = _shown(root, DOCUMENTS[subject])
        facts = [F.parse_fact(line) for line in shown["facts"]]
        old = [F.parse_fact(line) for line in shown["superseded"]]
        current = [f for f in facts if f is not None and f.key == key]
        superseded = {F.normalize_value(f.value or F.RETRACTED) for f in old if f is not None and f.key == key}
        latest = history[-1][1]
        if latest is None:
            assert current == [], (key, current)
        else:
            assert [F.normalize_value(f.value or "") for f in current] == [F.normalize_value(latest)], (key, history)
        # runs of equal values: every run but the last is superseded, and nothing else is
        runs = []
        for _order, value, _path in history:
            said = F.normalize_value(value or F.RETRACTED)
            if not runs or runs[-1] != said:
                runs.append(said)
        expected = set(runs[:-1]) | ({F.normalize_value(F.RETRACTED)} if latest is None else set())
        assert superseded == expected, (key, history)
    for (date, session), sections in chosen.items():
        path = f"sessions/{date.replace('-', '/')}/{session}.md"
        for subject, said in sections:
            notes = [F.parse_observation(line) for line in _shown(root, DOCUMENTS[subject])["notes"]]
            for line in said:
                if F.parse_fact(line) is not None:
                    continue
                words = F.observation_words(line[2:])
                assert any(
                    n is not None
                    and n.provenance is not None
                    and F.observation_words(n.text) == words
                    and path in n.provenance.sources
                    for n in notes
                ), (line, path, notes)
    if human:
        for document, text in HUMAN.items():
            said = _shown(root, document)
            assert "\nProse a person wrote.\n" in (root / f"{document}.md").read_text(encoding="utf-8")
            for line in text.splitlines():
                if line.startswith("- ") and F.parse_fact(line) is None:
                    words = F.observation_words(line[2:])
                    assert any(F.observation_words(F.parse_observation(n).text) == words for n in said["notes"])


EXAMPLES = int(os.environ.get("FSMEM_KEPT_EXAMPLES", "25")) * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(chosen=notes, batches=st.lists(st.integers(0, 2), min_size=5, max_size=5), human=st.booleans())
def test_no_fact_or_observation_is_lost_merged_or_hidden_wrongly_in_any_batching(chosen, batches, human):
    """`batches` puts each note in one of three runs, in the dictionary's order (an older note may come
    later), from an empty memory or one with a person's document: the same bytes as one run, and the
    invariants above on them."""
    with tempfile.TemporaryDirectory() as folder:
        one, apart = Memory.init(Path(folder) / "one"), Memory.init(Path(folder) / "apart")
        for memory in (one, apart):
            for document, text in HUMAN.items() if human else ():
                (memory.root / f"{document}.md").parent.mkdir(parents=True, exist_ok=True)
                (memory.root / f"{document}.md").write_text(text, encoding="utf-8")
        _write(one.root, chosen)
        one.consolidate()
        _check(one.root, chosen, human)
        before = S.snapshot(one.root)
        assert one.consolidate().empty and S.snapshot(one.root) == before
        items = list(chosen.items())
        for run in range(3):
            _write(apart.root, {k: v for number, (k, v) in enumerate(items) if batches[number] == run})
            apart.consolidate()
        assert S.snapshot(apart.root) == before
