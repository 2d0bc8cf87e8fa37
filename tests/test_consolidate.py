"""fsmem consolidate on real files: supersession, retraction, near-duplicates, human edits, idempotence."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.consolidate import apply as CA, batch_writes, extractors as ex, ledger as L, plan as C

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "memory"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", C.KILL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", "2026-12-01T08:00:00+00:00")


@pytest.fixture
def memory(tmp_path) -> Memory:
    return Memory.init(tmp_path / "mem")


@pytest.fixture
def demo(tmp_path) -> Memory:
    memory = Memory.init(tmp_path / "demo")
    shutil.copytree(EXAMPLES, memory.root, dirs_exist_ok=True)
    return memory


def note(root: Path, date: str, session: str, body: str) -> Path:
    y, m, d = date.split("-")
    path = root / "sessions" / y / m / d / f"{session}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"---\ntitle: Session {session} {date}\ntype: episodic\nsession: {session}\ncreated: {date}T09:00:00+00:00\n---\n"
    path.write_text(head + textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every memory file (hidden machine state left out) and its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def body(memory: Memory, rel: str) -> str:
    return (memory.root / rel).read_text(encoding="utf-8")


def planned(memory: Memory) -> tuple[C.Plan, L.Ledger]:
    """Gather and plan as a run does, without applying: (plan, open ledger)."""
    settings = memory.config.consolidate
    ledger = L.Ledger(memory.root, L.signature(settings.extractors, settings.default_subject), settings.default_subject)
    plan = C.plan(C.gather(memory.root, settings, ex.load(settings.extractors), ledger), settings)
    ledger.commit()
    return plan, ledger


ADAM_AFTER = """\
# Adam Smith

## Facts
- employer: Globex ([2026-11-20](../../sessions/2026/11/20/support-0140.md))
- role: head of finance ([2026-11-02](../../sessions/2026/11/02/support-0102.md))
- timezone: Europe/London
- preferred contact: email, never phone before 10:00

## Notes
- Prefers invoices as PDF attachments rather than portal links. ([2026-11-02](../../sessions/2026/11/02/support-0102.md); [kickoff](../../sessions/2026/10/01/kickoff.md))
- Asked twice about proration when seats change mid-cycle. (2026-10-28, sessions/2026/10/28/review.md)
- Adam confirmed that Acme wants usage lines grouped by project on the invoice. ([2026-11-02](../../sessions/2026/11/02/support-0102.md))
- Adam introduced his successor at Acme, Priya Natarajan. ([2026-11-20](../../sessions/2026/11/20/support-0140.md))

## Superseded
- employer: Acme Corp ([2026-10-01](../../entities/people/adam-smith.md) to 2026-11-20)
- role: finance lead ([2026-10-01](../../entities/people/adam-smith.md) to 2026-11-02)
"""


def test_demo_supersedes_employer_and_role(demo):
    before = body(demo, "entities/people/adam-smith.md")
    report = demo.consolidate()
    after = body(demo, "entities/people/adam-smith.md")
    head_before, head_after = before.split("# Adam Smith")[0], after.split("# Adam Smith")[0]
    assert head_after == head_before.replace("updated: 2026-10-28T16:20:00+00:00", "updated: 2026-11-20")
    assert after.endswith(ADAM_AFTER)
    assert report.counts["notes_consolidated"] == 2 and report.counts["superseded"] == 3
    assert report.counts["observations_merged"] == 1
    priya = body(demo, "entities/people/priya-natarajan.md")
    assert priya.startswith(
        "---\ntitle: Priya Natarajan\ntype: semantic\nentity: people/Priya Natarajan\ncreated: 2026-11-20\n"
    )
    assert "- role: finance lead ([2026-11-20](../../sessions/2026/11/20/support-0140.md))\n" in priya
    hits = demo.grep("Acme Corp", ["entities/people/adam-smith.md"])
    assert hits.total == 0
    hits = demo.grep("Acme Corp", ["entities/people/adam-smith.md"], include_superseded=True)
    assert hits.to_dict()["matches"][0]["superseded"] is True
    shown = demo.read("entities/people/adam-smith.md").to_text()
    assert "Globex" in shown and "Acme Corp (" not in shown
    for rel in ("sessions/2026/11/02/support-0102.md", "sessions/2026/11/20/support-0140.md"):
        assert "\nconsolidated: sha256-" in body(demo, rel)


def test_second_run_changes_nothing(demo):
    demo.consolidate()
    first = snapshot(demo.root)
    report = demo.consolidate()
    assert snapshot(demo.root) == first
    assert report.files_written == [] and report.empty
    log = (demo.root / ".fsmem/logs/consolidate.jsonl").read_text().splitlines()
    assert len(log) == 2 and json.loads(log[0])["notes_consolidated"] == 2 and json.loads(log[1])["notes_read"] == 0


def test_same_inputs_same_bytes_whatever_the_file_order(tmp_path):
    results = []
    for name, order in (("a", [0, 1, 2]), ("b", [2, 0, 1])):
        memory = Memory.init(tmp_path / name)
        notes = [
            ("2026-01-05", "s1", "## people/Ann Lee\n- employer: Acme\n- Likes tea.\n"),
            ("2026-02-05", "s2", "## people/Ann Lee\n- employer: Globex\n- likes tea\n"),
            ("2026-03-05", "s3", "## people/Ann Lee\n- role: cto\n- Moved to Berlin.\n"),
        ]
        for index in order:
            note(memory.root, *notes[index])
        memory.consolidate()
        results.append(snapshot(memory.root))
    assert results[0] == results[1]


def test_older_note_consolidated_later_never_brings_the_old_value_back(tmp_path):
    together = Memory.init(tmp_path / "together")
    apart = Memory.init(tmp_path / "apart")
    old = ("2026-01-05", "s1", "## people/Ann Lee\n- employer: Acme\n")
    new = ("2026-03-05", "s3", "## people/Ann Lee\n- employer: Globex\n")
    note(together.root, *old)
    note(together.root, *new)
    together.consolidate()
    note(apart.root, *new)
    apart.consolidate()
    note(apart.root, *old)  # the older note turns up after the newer one was consolidated
    apart.consolidate()
    text = body(apart, "entities/people/ann-lee.md")
    assert "## Facts\n- employer: Globex ([2026-03-05](../../sessions/2026/03/05/s3.md))\n" in text
    assert "## Superseded\n- employer: Acme ([2026-01-05](../../sessions/2026/01/05/s1.md) to 2026-03-05)\n" in text
    assert snapshot(apart.root) == snapshot(together.root)


def test_explicit_date_beats_note_date_and_a_late_older_value_splits_a_run(memory):
    note(memory.root, "2026-01-01", "a", "## topic/Office\n- address: 1 Main St\n")
    note(memory.root, "2026-03-01", "c", "## topic/Office\n- address: 1 Main St\n")
    memory.consolidate()
    text = body(memory, "topics/office.md")
    assert (
        "- address: 1 Main St ([2026-01-01](../sessions/2026/01/01/a.md); confirmed [2026-03-01](../sessions/2026/03/01/c.md))"
        in text
    )
    # written later, but dated between the two records of the current value: it must not become current
    note(memory.root, "2026-04-01", "d", "## topic/Office\n- address: 9 Side St (as of 2026-02-01)\n")
    memory.consolidate()
    text = body(memory, "topics/office.md")
    assert "## Facts\n- address: 1 Main St ([2026-03-01](../sessions/2026/03/01/c.md))\n" in text
    assert text.endswith(
        "## Superseded\n"
        "- address: 1 Main St ([2026-01-01](../sessions/2026/01/01/a.md) to 2026-02-01)\n"
        "- address: 9 Side St ([2026-02-01](../sessions/2026/04/01/d.md) to 2026-03-01)\n"
    )


def test_later_line_of_the_same_note_wins(memory):
    note(memory.root, "2026-01-01", "a", "## topic/Build\n- status: red\n- status: green\n")
    memory.consolidate()
    text = body(memory, "topics/build.md")
    assert "## Facts\n- status: green ([2026-01-01](../sessions/2026/01/01/a.md))\n" in text
    assert "## Superseded\n- status: red ([2026-01-01](../sessions/2026/01/01/a.md) to 2026-01-01)\n" in text


def test_retraction(memory):
    note(memory.root, "2026-01-01", "a", "## people/Ann Lee\n- employer: Acme\n- role: cto\n")
    note(memory.root, "2026-02-01", "b", "## people/Ann Lee\n- employer: ~\n")
    memory.consolidate()
    text = body(memory, "entities/people/ann-lee.md")
    assert "## Facts\n- role: cto ([2026-01-01](../../sessions/2026/01/01/a.md))\n" in text
    assert text.endswith(
        "## Superseded\n"
        "- employer: Acme ([2026-01-01](../../sessions/2026/01/01/a.md) to 2026-02-01)\n"
        "- employer: ~ ([2026-02-01](../../sessions/2026/02/01/b.md))\n"
    )
    assert memory.grep("employer", ["entities/people/ann-lee.md"]).total == 0
    # an older value arriving after the retraction stays retracted
    note(memory.root, "2026-01-15", "late", "## people/Ann Lee\n- employer: Initech\n")
    memory.consolidate()
    assert memory.grep("employer", ["entities/people/ann-lee.md"]).total == 0
    assert "- employer: Initech ([2026-01-15](../../sessions/2026/01/15/late.md) to 2026-02-01)\n" in body(
        memory, "entities/people/ann-lee.md"
    )


def test_observation_is_not_a_fact_and_near_duplicates_merge(memory):
    note(
        memory.root,
        "2026-01-01",
        "a",
        "## people/Ann Lee\n- Wow: that trip sounds amazing!\n- Prefers email over phone.\n",
    )
    note(
        memory.root, "2026-01-09", "b", "## people/Ann Lee\n- prefers email over phone\n- Prefers e-mail over phone!\n"
    )
    memory.consolidate()
    text = body(memory, "entities/people/ann-lee.md")
    assert "## Facts" not in text and "## Superseded" not in text
    assert text.endswith(
        "## Notes\n"
        "- Wow: that trip sounds amazing! ([2026-01-01](../../sessions/2026/01/01/a.md))\n"
        "- Prefers email over phone. ([2026-01-09](../../sessions/2026/01/09/b.md); [a](../../sessions/2026/01/01/a.md))\n"
    )


# near-duplicates that say different things: each pair is over the ratio threshold (90) and was one line
SAID_APART = [
    ("Salary is 100,000 per year.", "Salary is 150,000 per year."),
    ("Likes tea with milk and sugar in the morning.", "Likes tea with milk and no sugar in the morning."),
    ("Her work address is ann.lee@example.com today", "Her work address is ann.lee@example.org today"),
    ("Runs version 3.2.1 of the billing client", "Runs version 3.2.4 of the billing client"),
    ("Paid $1,500 for the annual licence.", "Paid €1,500 for the annual licence."),
    ("Lives at 12 Baker Street in London", "Lives at 21 Baker Street in London"),
    ("The thermostat in the lab is set to 2.5 degrees", "The thermostat in the lab is set to 25 degrees"),
    ("The freezer in the lab is kept at -20 degrees", "The freezer in the lab is kept at 20 degrees"),
    ("Flies back to Lisbon on 2026-03-14 with Ann", "Flies back to Lisbon on 2026-03-17 with Ann"),
    ("Dislikes green tea with milk in the morning", "Likes green tea with milk in the morning"),
    ("Met Michaela Stone at the Berlin conference", "Met Michael Stone at the Berlin conference"),
]


@pytest.mark.parametrize(("first", "second"), SAID_APART)
def test_observations_that_say_different_things_are_never_merged(memory, first, second):
    """The later observation of a near-duplicate pair lost its words (the line keeps its first record's): 'Salary
    is 150,000' was only a citation under 'Salary is 100,000', dated as of the later note."""
    note(memory.root, "2026-01-01", "a", f"## people/Ann Lee\n- {first}\n")
    note(memory.root, "2026-01-02", "b", f"## people/Ann Lee\n- {second}\n")
    memory.consolidate()
    text = body(memory, "entities/people/ann-lee.md")
    assert f"- {first} ([2026-01-01](../../sessions/2026/01/01/a.md))\n" in text
    assert f"- {second} ([2026-01-02](../../sessions/2026/01/02/b.md))\n" in text


def test_observations_that_differ_in_case_punctuation_spacing_or_an_article_still_merge(memory):
    note(memory.root, "2026-01-01", "a", "## people/Ann Lee\n- Prefers e-mail over the phone.\n- Costs ＄５.\n")
    note(memory.root, "2026-01-02", "b", "## people/Ann Lee\n- prefers  email over phone!\n- costs $5\n")
    memory.consolidate()
    assert body(memory, "entities/people/ann-lee.md").endswith(
        "## Notes\n"
        "- Prefers e-mail over the phone. ([2026-01-02](../../sessions/2026/01/02/b.md); [a](../../sessions/2026/01/01/a.md))\n"
        "- Costs ＄５. ([2026-01-02](../../sessions/2026/01/02/b.md); [a](../../sessions/2026/01/01/a.md))\n"
    )


def test_a_note_of_many_long_observations_is_consolidated_again_in_linear_time(memory):
    """300 distinct observations of 2,000 characters (600 KB) in one note, which then grows by one line: the
    second run looked for each record's line by a ratio against every line citing its note, 90,000 ratios of
    2 KB (27 s of CPU); the first run's placing compared every record with every line before it likewise."""
    import random
    import time

    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(500)]
    said = "\n".join("- " + " ".join(rng.choice(words) for _ in range(285)) for _ in range(300))
    path = note(memory.root, "2026-01-01", "a", f"## topic/Big\n{said}\n")
    spent = time.process_time()
    memory.consolidate()
    path.write_text(path.read_text() + "- One more line.\n")
    memory.consolidate()
    assert time.process_time() - spent < 5
    assert body(memory, "topics/big.md").count("\n- ") == 301


def test_a_value_in_another_unicode_form_confirms_it_and_grep_still_finds_it(memory):
    """`Zürich` (NFC, one code point for ü) then `Zürich` as an editor on macOS saves it (NFD, u and a combining
    diaeresis): the same text by Unicode's rule. The second superseded the first, so `grep Zürich`, typed as
    keyboards type it, found nothing at all (the NFC line hidden as superseded, the current line NFD)."""
    note(memory.root, "2026-01-01", "a", "## people/Ann Lee\n- city: Z\u00fcrich\n")
    note(memory.root, "2026-01-02", "b", "## people/Ann Lee\n- city: Zu\u0308rich\n")
    memory.consolidate()
    text = body(memory, "entities/people/ann-lee.md")
    assert "- city: Z\u00fcrich ([2026-01-01](../../sessions/2026/01/01/a.md); confirmed [2026-01-02]" in text
    assert "## Superseded" not in text
    assert memory.grep("Z\u00fcrich", ["entities/people/ann-lee.md"]).total == 1


def test_human_edits_between_runs_are_kept(demo):
    demo.consolidate()
    path = demo.root / "entities/people/adam-smith.md"
    edited = (
        path.read_text()
        .replace("- timezone: Europe/London\n", "- timezone: Europe/London\n\nHuman prose  with odd   spacing.\n")
        .replace("- role: head of finance ([2026-11-02]", "- role: Head of Finance, EMEA ([2026-11-02]")
    )
    path.write_text(edited)
    note(demo.root, "2026-11-25", "support-0150", "## people/Adam Smith\n- phone: +44 20 7946 0000\n")
    # the edited note also grows, so the one whose value the human changed is read again: the human still wins
    with open(demo.root / "sessions/2026/11/02/support-0102.md", "a") as handle:
        handle.write("- Asked for a call next week.\n")
    demo.consolidate()
    after = path.read_text()
    assert "Human prose  with odd   spacing.\n" in after
    assert "- role: Head of Finance, EMEA ([2026-11-02](../../sessions/2026/11/02/support-0102.md))\n" in after
    assert "- role: head of finance" not in after
    assert "- phone: +44 20 7946 0000 ([2026-11-25](../../sessions/2026/11/25/support-0150.md))\n" in after
    assert after.count("Adam confirmed that Acme wants usage lines") == 1
    billing = body(demo, "topics/billing.md")  # the appended line falls under the note's last heading
    assert "- Asked for a call next week. ([2026-11-02](../sessions/2026/11/02/support-0102.md))\n" in billing


def test_note_appended_after_consolidation_is_consolidated_next_run(memory):
    memory.note("- employer: Acme", session="s", subject="people/Ann Lee")
    memory.consolidate()
    memory.note("- employer: Globex", session="s", subject="people/Ann Lee")
    memory.note("- role: cto", session="s", subject="people/Ann Lee")
    report = memory.consolidate()
    text = body(memory, "entities/people/ann-lee.md")
    # fsmem note stamps each fact with the time of the write: the same second here, so the later line wins
    assert "- employer: Globex ([2026-12-01T08:00:00Z](../../sessions/2026/12/01/s.md))\n" in text
    assert "- employer: Acme ([2026-12-01T08:00:00Z](../../sessions/2026/12/01/s.md) to 2026-12-01T08:00:00Z)\n" in text
    assert "- role: cto ([2026-12-01T08:00:00Z](../../sessions/2026/12/01/s.md))\n" in text
    assert report.counts["facts_added"] == 2 and report.counts["superseded"] == 1


def test_change_between_read_and_write_is_never_overwritten(demo):
    plan, ledger = planned(demo)
    path = demo.root / "entities/people/adam-smith.md"
    path.write_text(path.read_text() + "\nA human wrote this while the consolidator was thinking.\n")
    human = path.read_bytes()
    report = CA.ConsolidationReport()
    CA.apply(demo.root, plan, report, batch_writes.Writes(), None, ledger)
    ledger.close(True)
    assert report.conflicts == ["entities/people/adam-smith.md"]
    assert path.read_bytes() == human
    assert "consolidated:" not in body(demo, "sessions/2026/11/20/support-0140.md")  # feeds the conflicted file
    again = demo.consolidate()  # the next run merges into the human's version
    assert again.conflicts == []
    text = path.read_text()
    assert "A human wrote this while the consolidator was thinking." in text and "- employer: Globex (" in text


def test_malformed_note_and_document_are_reported_and_skipped(memory):
    bad = memory.root / "sessions/2026/01/01/broken.md"
    bad.parent.mkdir(parents=True)
    bad.write_text("---\ntitle: [unclosed\n---\n## topic/X\n- a: b\n")
    note(memory.root, "2026-01-02", "dated", "## topic/X\n- when: soon (as of 2026-02-31)\n- size: 3\n")
    doc = memory.root / "topics/broken-doc.md"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("---\ntitle: Broken: doc: here\n---\n")
    note(memory.root, "2026-01-03", "feeds-broken", "## topic/Broken Doc\n- a: b\n")
    report = memory.consolidate()
    problems = {(p, line) for p, line, _ in report.problems}
    assert ("sessions/2026/01/01/broken.md", 3) in problems
    assert ("sessions/2026/01/02/dated.md", 8) in problems
    assert ("topics/broken-doc.md", 2) in problems
    assert "- size: 3 ([2026-01-02]" in body(memory, "topics/x.md")
    assert "when" not in body(memory, "topics/x.md")
    assert doc.read_text() == "---\ntitle: Broken: doc: here\n---\n"
    assert "consolidated:" not in body(memory, "sessions/2026/01/03/feeds-broken.md")
    assert "consolidated:" in body(memory, "sessions/2026/01/02/dated.md")


def test_note_with_a_nul_byte_is_reported_and_never_copied_into_a_document(memory):
    nul = note(memory.root, "2026-01-02", "nul", "## people/Adam Smith\n- car: blue\n")
    nul.write_bytes(nul.read_bytes().replace(b"blue", b"bl\x00ue"))
    note(memory.root, "2026-01-03", "clean", "## people/Adam Smith\n- role: lead\n")
    report = memory.consolidate()
    assert [(p, m) for p, _, m in report.problems] == [
        ("sessions/2026/01/02/nul.md", "contains a NUL byte (byte 131); not text; note skipped")
    ]
    adam = (memory.root / "entities/people/adam-smith.md").read_bytes()
    assert b"\x00" not in adam and b"- role: lead" in adam and b"car" not in adam
    assert b"consolidated:" not in nul.read_bytes()


def test_dry_run_prints_a_diff_and_writes_nothing(demo):
    before = snapshot(demo.root)
    report = demo.consolidate(dry_run=True)
    assert snapshot(demo.root) == before
    assert not (demo.root / ".fsmem/logs/consolidate.jsonl").exists()
    assert not (demo.root / ".fsmem/consolidate").exists()  # not even the ledger
    assert "--- a/entities/people/adam-smith.md\n+++ b/entities/people/adam-smith.md\n" in report.diff
    assert "+- employer: Globex ([2026-11-20](../../sessions/2026/11/20/support-0140.md))\n" in report.diff
    assert "--- /dev/null\n+++ b/entities/people/priya-natarajan.md\n" in report.diff
    assert report.to_dict()["diff"] == report.diff


def test_subjects_without_kind_and_default_subject(demo):
    note(
        demo.root,
        "2026-11-21",
        "x",
        "- Loose line with no subject.\n\n## A. Smith\n- shoe size: 44\n\n## Zebra Crossing\n- colour: white\n",
    )
    demo.consolidate()
    assert "- shoe size: 44 ([2026-11-21]" in body(demo, "entities/people/adam-smith.md")
    assert "- colour: white ([2026-11-21]" in body(demo, "topics/zebra-crossing.md")
    inbox = body(demo, "topics/inbox.md")
    assert (
        "topic: Inbox" in inbox and "- Loose line with no subject. ([2026-11-21](../sessions/2026/11/21/x.md))" in inbox
    )


def test_archive_moves_consolidated_notes(memory):
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("archive: false", "archive: true"))
    memory = Memory(memory.root)
    note(memory.root, "2026-01-01", "a", "## topic/X\n- a: b\n")
    report = memory.consolidate()
    assert report.notes_archived == ["sessions/2026/01/01/a.md"]
    assert not (memory.root / "sessions/2026/01/01/a.md").exists()
    assert "consolidated: sha256-" in (memory.root / "archive/sessions/2026/01/01/a.md").read_text()
    # archived notes still count: a late note inside a confirmed run needs the archived confirmation
    for day in ("02", "04"):
        note(memory.root, f"2026-01-{day}", "a", "## topic/X\n- a: b\n")
    memory.consolidate()
    note(memory.root, "2026-01-03", "late", "## topic/X\n- a: c\n")
    memory.consolidate()
    assert body(memory, "topics/x.md").endswith(
        "## Superseded\n"
        "- a: b ([2026-01-01](../archive/sessions/2026/01/01/a.md) to 2026-01-03; "
        "confirmed [2026-01-02](../archive/sessions/2026/01/02/a.md))\n"
        "- a: c ([2026-01-03](../archive/sessions/2026/01/03/late.md) to 2026-01-04)\n"
    )


def test_extractor_plugin_through_entry_points(memory, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "shouting_extractor-1.0.dist-info").mkdir(parents=True)
    (site / "shouting_extractor-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shouting-extractor\nVersion: 1.0\n"
    )
    (site / "shouting_extractor-1.0.dist-info" / "entry_points.txt").write_text(
        "[fsmem.extractors]\nshouting = shouting_extractor:extract\n"
    )
    (site / "shouting_extractor.py").write_text(
        textwrap.dedent('''
        from fsmem.consolidate.extractors import Item

        def extract(note):
            """Free text 'X works at Y.' becomes the fact employer: Y about people/X."""
            for number, line in enumerate(note.body.splitlines(), start=note.body_start_line):
                if " works at " in line:
                    who, _, where = line.rstrip(".").partition(" works at ")
                    yield Item(subject="people/" + who.strip(), line=number, key="employer", value=where.strip())
    ''')
    )
    monkeypatch.syspath_prepend(str(site))
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("extractors: [rules]", "extractors: [rules, shouting]"))
    memory = Memory(memory.root)
    note(memory.root, "2026-01-01", "a", "Bo Diaz works at Initech.\n")
    memory.consolidate()
    assert "- employer: Initech ([2026-01-01](../../sessions/2026/01/01/a.md))\n" in body(
        memory, "entities/people/bo-diaz.md"
    )
    assert "- Bo Diaz works at Initech. ([2026-01-01]" in body(memory, "topics/inbox.md")
    config.write_text(config.read_text().replace("[rules, shouting]", "[nope]"))
    with pytest.raises(ex.ConfigError, match="no extractor 'nope'"):
        Memory(memory.root).consolidate()


def test_note_appended_while_a_run_is_in_progress_is_not_lost(memory):
    memory.note("- employer: Acme", session="s", subject="people/Ann Lee")
    plan, ledger = planned(memory)
    memory.note("- role: cto", session="s", subject="people/Ann Lee")  # lands between plan and apply
    CA.apply(memory.root, plan, CA.ConsolidationReport(), batch_writes.Writes(), None, ledger)
    ledger.close(True)
    note_text = body(memory, "sessions/2026/12/01/s.md")
    assert "- role: cto (as of 2026-12-01T08:00:00Z)\n" in note_text and "consolidated: sha256-" in note_text
    assert "role" not in body(memory, "entities/people/ann-lee.md")
    report = memory.consolidate()
    assert report.counts["facts_added"] == 1
    assert "- role: cto ([2026-12-01T08:00:00Z](../../sessions/2026/12/01/s.md))\n" in body(
        memory, "entities/people/ann-lee.md"
    )
    assert memory.consolidate().empty
