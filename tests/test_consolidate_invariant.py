"""The consolidation invariant: however notes are batched, ordered, grown or interrupted, the next complete run
gives the same bytes as one uninterrupted run over all the notes.

Property tests run in-process (a simulated crash after the k-th file write, as
SIGKILL would leave it: no cleanup, a stray temporary file); a few scenarios run
the real CLI and SIGKILL it (FSMEM_CONSOLIDATE_KILL_AFTER).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.consolidate import plan as C

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cli_runner  # noqa: E402
import consolidation_scenarios as S  # noqa: E402
import preloaded  # noqa: E402

NOW = "2026-12-01T08:00:00+00:00"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", C.KILL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def differences(expected: dict[str, bytes], got: dict[str, bytes]) -> list[str]:
    return [path for path in sorted(set(expected) | set(got)) if expected.get(path) != got.get(path)]


# -- finding 1: batching changed the answer ----------------------------------------
def test_an_older_note_consolidated_later_leaves_the_same_bytes_as_one_run(tmp_path):
    """Issue #10, finding 1: `x: 1` then `x: 2` in a note of 01-03, consolidated; then a note of 01-01 says `x: 5`.

    The current value must stay 2 (the latest record: 01-03, second line), and the
    tree must be byte for byte the tree of one run over both notes.
    """
    apart, together = Memory.init(tmp_path / "apart"), Memory.init(tmp_path / "together")
    for memory in (apart, together):
        S.session_note(memory.root, "2026-01-03", "s3", "## topic/Build\n- x: 1\n- x: 2\n")
    apart.consolidate()
    for memory in (apart, together):
        S.session_note(memory.root, "2026-01-01", "s1", "## topic/Build\n- x: 5\n")
    apart.consolidate()
    together.consolidate()
    text = (apart.root / "topics/build.md").read_text()
    assert "## Facts\n- x: 2 ([2026-01-03](../sessions/2026/01/03/s3.md))\n" in text
    assert text.endswith(
        "## Superseded\n"
        "- x: 5 ([2026-01-01](../sessions/2026/01/01/s1.md) to 2026-01-03)\n"
        "- x: 1 ([2026-01-03](../sessions/2026/01/03/s3.md) to 2026-01-03)\n"
    )
    assert differences(S.snapshot(together.root), S.snapshot(apart.root)) == []


def test_an_older_fact_that_goes_only_to_the_history_file_still_moves_created_back(tmp_path):
    """Found by the fuzzer (HYPOTHESIS_PROFILE=explore): with no superseded value kept in the document, a note
    of the day before, consolidated later, changes only the history file; the document's `created` must still
    move back to that day, as one run over both notes writes it."""
    for name in ("apart", "together"):
        config = Memory.init(tmp_path / name).root / "fsmem.yaml"
        config.write_text(config.read_text().replace("superseded_in_document: 10", "superseded_in_document: 0", 1))
    apart, together = Memory(tmp_path / "apart"), Memory(tmp_path / "together")  # the bound read at the start
    for memory in (apart, together):
        S.session_note(memory.root, "2026-01-02", "a", "## people/Ann Lee\n- status: open\n")
    apart.consolidate()
    for memory in (apart, together):
        S.session_note(memory.root, "2026-01-01", "a", "## people/Ann Lee\n- status: closed\n")
    apart.consolidate()
    together.consolidate()
    document = (apart.root / "entities/people/ann-lee.md").read_text()
    assert "created: 2026-01-01\n" in document and "- status: open (" in document and "closed" not in document
    assert "- status: closed (" in (apart.root / "entities/people/ann-lee.history.md").read_text()
    assert differences(S.snapshot(together.root), S.snapshot(apart.root)) == []


def test_a_late_note_from_the_day_before_does_not_reopen_a_closed_ticket(tmp_path):
    """Issue #10, finding 1 (the realistic case): a ticket is open at 09:00 and closed at 15:00 (appended to the
    same note, consolidated in between), then a laptop's late note from the day before says escalated. The
    ticket must stay closed, and the tree must be the tree of one run over the final notes."""
    memory, together = Memory.init(tmp_path / "m"), Memory.init(tmp_path / "together")
    support = S.session_note(memory.root, "2026-03-10", "support", "## topic/Ticket 42\n- status: open\n")
    memory.consolidate()
    support.write_text(support.read_text() + "- status: closed\n")
    memory.consolidate()
    S.session_note(memory.root, "2026-03-09", "laptop", "## topic/Ticket 42\n- status: escalated\n")
    memory.consolidate()
    S.session_note(together.root, "2026-03-10", "support", "## topic/Ticket 42\n- status: open\n- status: closed\n")
    S.session_note(together.root, "2026-03-09", "laptop", "## topic/Ticket 42\n- status: escalated\n")
    together.consolidate()
    text = (memory.root / "topics/ticket-42.md").read_text()
    assert "## Facts\n- status: closed ([2026-03-10](../sessions/2026/03/10/support.md))\n" in text
    assert text.endswith(
        "## Superseded\n"
        "- status: escalated ([2026-03-09](../sessions/2026/03/09/laptop.md) to 2026-03-10)\n"
        "- status: open ([2026-03-10](../sessions/2026/03/10/support.md) to 2026-03-10)\n"
    )
    assert differences(S.snapshot(together.root), S.snapshot(memory.root)) == []


def test_a_late_record_inside_a_confirmed_run_keeps_the_confirmation_before_it(tmp_path):
    """Issue #10, finding 1 (exactness): records a@d1, a@d2, a@d4 are consolidated as one run a(d1..d4); then
    b@d3 arrives. One run over all four notes gives a(d1..d2), b(d3), a(d4): the confirmation of d2, which no
    citation named, must not be lost."""
    memory, together = Memory.init(tmp_path / "m"), Memory.init(tmp_path / "together")
    for m in (memory, together):
        for day in ("01", "02", "04"):
            S.session_note(m.root, f"2026-05-{day}", "desk", "## topic/Office\n- address: 1 Main St\n")
    memory.consolidate()
    assert (
        "- address: 1 Main St ([2026-05-01](../sessions/2026/05/01/desk.md); confirmed [2026-05-04]"
        in (memory.root / "topics/office.md").read_text()
    )
    for m in (memory, together):
        S.session_note(m.root, "2026-05-03", "laptop", "## topic/Office\n- address: 9 Side St\n")
    memory.consolidate()
    together.consolidate()
    text = (memory.root / "topics/office.md").read_text()
    assert "## Facts\n- address: 1 Main St ([2026-05-04](../sessions/2026/05/04/desk.md))\n" in text
    assert text.endswith(
        "## Superseded\n"
        "- address: 1 Main St ([2026-05-01](../sessions/2026/05/01/desk.md) to 2026-05-03; "
        "confirmed [2026-05-02](../sessions/2026/05/02/desk.md))\n"
        "- address: 9 Side St ([2026-05-03](../sessions/2026/05/03/laptop.md) to 2026-05-04)\n"
    )
    assert differences(S.snapshot(together.root), S.snapshot(memory.root)) == []


# -- the property ---------------------------------------------------------------------
STEPS = 3
lines = st.one_of(
    st.builds(
        S.fact_line,
        st.sampled_from(S.KEYS),
        st.sampled_from(S.VALUES),
        st.one_of(st.none(), st.none(), st.sampled_from(S.DATES), st.sampled_from(S.TIMES)),
    ),
    st.sampled_from(S.OBSERVATIONS).map(lambda text: "- " + text),
)


@st.composite
def scenarios(draw) -> S.Scenario:
    notes: dict[tuple[str, str], S.Note] = {}
    for _ in range(draw(st.integers(1, 5))):
        date, session = draw(st.sampled_from(S.DATES)), draw(st.sampled_from(["a", "b", "c"]))
        arrive = draw(st.integers(0, STEPS - 1))
        sections = []
        for _ in range(draw(st.integers(1, 3))):
            subject = draw(st.sampled_from(S.SUBJECTS))
            body = []
            for _ in range(draw(st.integers(1, 4))):
                later = draw(st.booleans()) and draw(st.booleans())  # a quarter of the lines are added later
                body.append(S.Line(draw(lines), draw(st.integers(arrive, STEPS - 1)) if later else arrive))
            sections.append((subject, body))
        notes.setdefault((date, session), S.Note(date, session, arrive, sections))
    crashes = draw(st.dictionaries(st.integers(0, STEPS - 1), st.integers(1, 10), max_size=2))
    strays = draw(st.sets(st.sampled_from(sorted(crashes)))) if crashes else set()
    kept = draw(st.sampled_from([None, 0, 1]))  # bounded documents: 0 and 1 move lines to history files
    links = draw(st.booleans())  # notes that are links (to a topic, to a note) in the evolved memory only
    folder_links = draw(st.booleans())  # folders of notes that are links to folders of documents, likewise
    return S.Scenario(
        list(notes.values()),
        STEPS,
        crashes,
        strays,
        human=draw(st.booleans()),
        kept=kept,
        links=links,
        folder_links=folder_links,
    )


# about 25 s; FSMEM_INVARIANT_EXAMPLES sets it, `make fuzz` (FSMEM_FUZZ_SCALE) multiplies it, for a longer hunt
EXAMPLES = int(os.environ.get("FSMEM_INVARIANT_EXAMPLES", "45")) * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_batches_growth_and_crashes_give_the_bytes_of_one_run(scenario):
    """Random notes (subjects, keys, values, retractions, `as of` dates and UTC times, near-duplicate
    observations, several notes a day) arriving in random batches, growing between runs (at their end or
    mid-section), runs crashing
    after a random write with or without a stray temporary file, starting from an empty memory or from a
    document written by hand, documents bounded to 0, 1 or 10 superseded values per key (the rest in history
    files), notes that are links (to a topic, to another note) and folders of notes that are links (the archive
    to topics/, a day to entities/people/) in the evolved memory alone: the final tree equals one run's."""
    with tempfile.TemporaryDirectory() as folder:  # in memory, as every test's (tests/conftest.py)
        expected = S.reference(Path(folder) / "one-run", scenario)
        got, _crashed, _asked = S.evolve(Path(folder) / "evolved", scenario)
        assert differences(expected, got) == []


def test_a_second_complete_run_changes_nothing(tmp_path):
    scenario = S.random_scenario(random.Random(5), notes=8)
    S.evolve(tmp_path / "m", scenario)
    before = S.snapshot(tmp_path / "m")
    report = Memory(tmp_path / "m").consolidate()
    assert report.empty and report.files_written == [] and S.snapshot(tmp_path / "m") == before


# -- finding 2: real SIGKILLs ----------------------------------------------------------------
def _cli(root: Path, **env: str) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT consolidate` as a process of its own, forked from a parent that imported fsmem once
    (tests/preloaded.py): a real process, really SIGKILLed, without an interpreter start a kill."""
    clean = without_fsmem()
    return preloaded.run(["--root", str(root), "consolidate"], env={**clean, "FSMEM_NOW": NOW, **env}, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 8])
def test_sigkill_in_a_later_batch_then_a_rerun_gives_the_bytes_of_one_run(tmp_path, seed):
    """Issue #10, finding 2: a run SIGKILLed at every write of a later batch (documents that already hold history,
    notes written several times a day), sometimes leaving a stray temporary file, then rerun: the tree equals
    one uninterrupted run's (no spurious "; confirmed", no `.fsmem-tmp-*` left)."""
    scenario = S.random_scenario(random.Random(seed), notes=7, steps=2)
    expected = S.reference(tmp_path / "reference", scenario)
    base = tmp_path / "base"
    S.start(base, scenario)
    S.write_notes(base, scenario, 0)
    assert cli_runner.fsmem_here(base, "consolidate", now=NOW)[0] in (
        0,
        1,
    )  # the runs not killed: the CLI in this process
    S.write_notes(base, scenario, scenario.steps)
    full = tmp_path / "full"
    shutil.copytree(base, full)
    assert cli_runner.fsmem_here(full, "consolidate", now=NOW)[0] == 0
    before, after = S.snapshot(base), S.snapshot(full)
    writes = len([p for p in after if after[p] != before.get(p)])
    assert writes >= 4
    for kill in range(1, writes + 1):
        work = tmp_path / f"killed-{kill}"
        shutil.copytree(base, work)
        killed = _cli(work, FSMEM_CONSOLIDATE_KILL_AFTER=str(kill))  # a real fsmem, really SIGKILLed
        assert killed.returncode == -signal.SIGKILL, (kill, killed.stderr)
        if kill % 2:
            (work / "topics" / ".fsmem-tmp-half").parent.mkdir(exist_ok=True)
            (work / "topics" / ".fsmem-tmp-half").write_bytes(b"half written")
        code, _, err = cli_runner.fsmem_here(work, "consolidate", now=NOW)
        assert code in (0, 1), err
        assert differences(expected, S.snapshot(work)) == [], kill
