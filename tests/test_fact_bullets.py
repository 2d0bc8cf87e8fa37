"""Facts as people write them (issue 32, finding 4): `*` and `+` bullets are facts like `-` everywhere facts
are read, and a line keeps its bullet when it is superseded; the property test at the end holds the three
forms to the same facts, the same supersession and the same timeline."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.consolidate import documents as docs, plan as C
from fsmem.consolidate.history import Record
from fsmem.format import facts as F, valid_time as V
from fsmem.format.history_file import history_path, new_history_text
from fsmem.format.rows import split_rows
from fsmem.history import merge_facts as MF

NOW = "2026-12-01T08:00:00+00:00"
ANN = "entities/people/ann-lee.md"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", C.KILL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def note(root: Path, date: str, session: str, body: str) -> str:
    rel = f"sessions/{date.replace('-', '/')}/{session}.md"
    head = f"---\ntitle: Session {session}\ntype: episodic\nsession: {session}\ncreated: {date}T09:00:00+00:00\n---\n"
    write(root, rel, head + textwrap.dedent(body).lstrip("\n"))
    return rel


def ann(bullet: str) -> str:
    """Ann's document as a person keeps it: hand-written facts with `bullet`."""
    return f"""\
        ---
        title: Ann Lee
        type: semantic
        entity: people/Ann Lee
        created: 2026-10-01
        updated: 2026-10-01
        ---
        # Ann Lee

        ## Facts
        {bullet} phone: 111
        {bullet} city: Oslo
        """


@pytest.mark.parametrize("bullet", ["*", "+"])
def test_a_star_or_plus_fact_is_superseded_not_doubled(tmp_path, bullet):
    """A `* phone: 111` then `- phone: 222` from a note: one current phone, the old one superseded with its bullet."""
    memory = Memory.init(tmp_path / "mem")
    write(memory.root, ANN, ann(bullet))
    note(memory.root, "2026-11-20", "s1", "## people/Ann Lee\n- phone: 222\n")
    memory.consolidate()
    text = (memory.root / ANN).read_text()
    facts = text.split("## Facts\n")[1].split("\n\n")[0].splitlines()
    assert facts == ["- phone: 222 ([2026-11-20](../../sessions/2026/11/20/s1.md))", f"{bullet} city: Oslo"]
    old = f"{bullet} phone: 111 ([2026-10-01](../../{ANN}) to 2026-11-20)"
    assert text.endswith(f"## Superseded\n{old}\n")
    assert old in (memory.root / history_path(ANN)).read_text()
    rows = [(e.key, e.value, e.date, e.until) for e in memory.timeline("people/Ann Lee").entries]
    assert rows == [
        ("city", "Oslo", "2026-10-01", None),
        ("phone", "111", "2026-10-01", "2026-11-20"),
        ("phone", "222", "2026-11-20", None),
    ]


def test_as_of_reads_star_facts_and_their_citations(tmp_path):
    """A document with `*` lines as consolidation writes them: as of 2026-11-01 the old phone held."""
    memory = Memory.init(tmp_path / "mem")
    write(
        memory.root,
        ANN,
        ann("*").replace(
            "* phone: 111\n",
            "* phone: 222 ([2026-11-20](../../sessions/2026/11/20/s1.md))\n",
        )
        + "\n        ## Superseded\n        * phone: 111 ([2026-10-01](../../sessions/2026/10/01/s0.md) to 2026-11-20)\n",
    )
    then = [m.text for m in memory.grep("phone", as_of="2026-11-01").matches]
    assert then == ["* phone: 111 ([2026-10-01](../../sessions/2026/10/01/s0.md) to 2026-11-20)"]
    now = [m.text for m in memory.grep("phone").matches]
    assert now == ["* phone: 222 ([2026-11-20](../../sessions/2026/11/20/s1.md))"]


def test_a_superseded_star_fact_of_a_note_is_hidden_like_a_dash_one(tmp_path):
    """The superseded filter reads a note's `* employer: US Navy` as the fact the document superseded."""
    memory = Memory.init(tmp_path / "mem")
    first = note(memory.root, "2026-10-01", "kickoff", "## people/Adam Smith\n* employer: US Navy\n+ Likes boats.\n")
    note(memory.root, "2026-11-20", "support", "## people/Adam Smith\n+ employer: Acme\n")
    memory.consolidate()
    document = (memory.root / "entities/people/adam-smith.md").read_text()
    assert f"## Superseded\n- employer: US Navy ([2026-10-01](../../{first}) to 2026-11-20)" in document
    shown = [(m.path, m.text) for m in memory.grep("employer").matches]
    assert (first, "* employer: US Navy") not in shown
    assert ("sessions/2026/11/20/support.md", "+ employer: Acme") in shown
    assert [m.text for m in memory.grep("boats").matches if m.path == first] == ["+ Likes boats."]


def test_search_rows_and_the_merge_driver_read_all_three_bullets():
    text = "---\ntitle: T\n---\n## Facts\n- a: 1\n* b: 2\n+ c: 3\n1. d: 4\n"
    assert [(r.text, r.kind) for r in split_rows("topics/t.md", text)] == [
        ("- a: 1", "fact"),
        ("* b: 2", "fact"),
        ("+ c: 3", "fact"),
        ("1. d: 4", "bullet"),
    ]
    lines = ["## Facts\n", "* phone: 222\n", "## Superseded\n", "+ phone: 111 ([2026-10-01](../a.md) to 2026-11-20)\n"]
    found = MF.fact_lines(lines)
    assert [(i, sup) for i, _, sup in found["phone"]] == [(1, False), (3, True)]
    current, history = MF.rebuild("phone", [(line, "2026-11-30", sup) for _, line, sup in found["phone"]], ANN)
    assert current == ["* phone: 222"]  # a hand-written current line stays as it is
    assert history == ["+ phone: 111 ([2026-10-01](../../a.md) to 2026-11-30)"]  # re-derived, its bullet kept


# -- the property: the three forms give the same facts, the same supersession and the same timeline --------
KEYS = ["phone", "city", "role"]
VALUES = ["111", "222", "Oslo", "~"]
SOURCES = ["sessions/2026/11/02/a.md", "sessions/2026/11/20/b.md"]

line_st = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(VALUES),
    st.sampled_from(["hand", "as of", "cited"]),
    st.booleans(),  # under ## Superseded
)
record_st = st.tuples(st.sampled_from(KEYS), st.sampled_from(VALUES), st.sampled_from([0, 1]))


def _document(lines: list[tuple[str, str, str, bool]], bullet: str) -> str:
    current, old = [], []
    for key, value, kind, superseded in lines:
        tail = {
            "hand": "",
            "as of": " (as of 2026-10-15)",
            "cited": f" ([2026-11-02](../../{SOURCES[0]}))"
            if not superseded
            else " ([2026-10-01](../../x.md) to 2026-11-02)",
        }[kind]
        (old if superseded else current).append(f"{bullet} {key}: {value}{tail}")
    text = "---\ntitle: Ann Lee\ntype: semantic\nentity: people/Ann Lee\ncreated: 2026-10-01\n---\n# Ann Lee\n"
    text += "\n## Facts\n" + "".join(line + "\n" for line in current)
    if old:
        text += "\n## Superseded\n" + "".join(line + "\n" for line in old)
    return text


def _dashed(text: str) -> str:
    """`text` with the bullet of every fact line written `-`."""
    return "".join("- " + line[2:] if F.is_bullet(line) else line for line in text.splitlines(keepends=True))


def _consolidated(text: str, records: list[tuple[str, str, int]]) -> tuple[str | None, str]:
    settings = C.Settings()
    recs = [
        Record(
            key,
            None if value == "~" else value,
            None,
            SOURCES[s][9:19].replace("/", "-"),
            SOURCES[s],
            (SOURCES[s][9:19].replace("/", "-"), SOURCES[s], 1, i, 0, SOURCES[s]),
            True,
        )
        for i, (key, value, s) in enumerate(records)
    ]
    target = C.subjects.kinded("people/Ann Lee")
    history = docs.EntityDocument(history_path(ANN), new_history_text())
    new, problem, _ = C.plan_document(ANN, text, target, recs, settings, Counter(), lambda s: "", history=history)
    assert problem is None
    return new, history.text()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(line_st, max_size=6), records=st.lists(record_st, max_size=4))
def test_the_three_bullets_give_the_same_facts_supersession_and_timeline(lines, records):
    dash = _document(lines, "-")
    dash_doc = docs.EntityDocument(ANN, dash)
    dash_new, dash_history = _consolidated(dash, records)
    for bullet in "*+":
        text = _document(lines, bullet)
        doc = docs.EntityDocument(ANN, text)
        assert [(f.key, f.value, f.first, f.last, f.superseded) for f in doc.fact_lines()] == [
            (f.key, f.value, f.first, f.last, f.superseded) for f in dash_doc.fact_lines()
        ]
        assert V.file_facts(text, ANN) == V.file_facts(dash, ANN)  # the timeline's and as_of's reading
        new, history = _consolidated(text, records)
        assert (new if new is None else _dashed(new)) == dash_new  # the same supersession, bullets aside
        assert _dashed(history) == dash_history
        if new is not None:  # and every line a person wrote keeps its bullet where it went
            written = {(f.key, f.value, f.first.date, f.first.source) for f in doc.fact_lines()}
            for f in docs.EntityDocument(ANN, new).fact_lines():
                if (f.key, f.value, f.first.date, f.first.source) in written:
                    assert f.bullet == bullet


def test_note_takes_a_plus_fact_as_it_is_and_stamps_it(tmp_path):
    """`fsmem note "+ phone: 111"` is a fact already: not wrapped into `- + phone: 111`, and stamped like `-`."""
    memory = Memory.init(tmp_path / "mem")
    written = memory.note("+ phone: 111", subject="people/Ann Lee")
    text = (memory.root / written.path).read_text()
    assert "\n+ phone: 111 (as of 2026-12-01T08:00:00Z)\n" in text
