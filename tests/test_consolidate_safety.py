"""Consolidation and what humans and the file system do around it: deletions, notes dated in the future,
symbolic links, and the cost of many keys in one document (issue #10, findings 3-5)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from fsmem import Memory, format as fmt
from fsmem.consolidate import plan as C
from fsmem.errors import FsmemError, InvalidArgument

NOW = "2026-12-01T08:00:00+00:00"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION", C.KILL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


@pytest.fixture
def memory(tmp_path) -> Memory:
    return Memory.init(tmp_path / "mem")


def note(root: Path, date: str, session: str, body: str) -> Path:
    path = root / "sessions" / date.replace("-", "/") / f"{session}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: Session {session}\ncreated: {date}T09:00:00+00:00\n---\n{body}", encoding="utf-8")
    return path


def read(memory: Memory, rel: str) -> str:
    return (memory.root / rel).read_text(encoding="utf-8")


def delete_line(memory: Memory, rel: str, start: str) -> None:
    path = memory.root / rel
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(start)]
    assert len(kept) == len(lines) - 1
    path.write_text("".join(kept))


# -- finding 3: what a human deleted stays deleted ---------------------------------
def test_a_fact_a_human_deleted_does_not_come_back_when_its_note_grows(memory):
    """Issue #10, finding 3: a human deletes a consolidated fact; the agent appends to the note it came from; the
    next run reads the note again, and must not bring the fact back (what the note adds is still merged)."""
    memory.note("- employer: Acme", session="s", subject="people/Ann Lee")
    memory.note("- Likes tea.", session="s", subject="people/Ann Lee")
    memory.consolidate()
    delete_line(memory, "entities/people/ann-lee.md", "- employer: Acme")
    delete_line(memory, "entities/people/ann-lee.md", "- Likes tea.")
    memory.note("- role: cto", session="s", subject="people/Ann Lee")
    report = memory.consolidate()
    text = read(memory, "entities/people/ann-lee.md")
    assert "employer" not in text and "Likes tea" not in text
    assert "- role: cto ([2026-12-01T08:00:00Z](../../sessions/2026/12/01/s.md))\n" in text  # the time fsmem note wrote
    assert report.counts["facts_added"] == 1


def test_a_deleted_fact_stays_deleted_when_the_note_grows_in_the_middle(memory):
    """Issue #10, finding 3: `fsmem note --subject` inserts under an existing heading, in the middle of the note."""
    memory.note("- employer: Acme", session="s", subject="people/Ann Lee")
    memory.note("- status: open", session="s", subject="topic/Ops")
    memory.consolidate()
    delete_line(memory, "entities/people/ann-lee.md", "- employer: Acme")
    memory.note("- role: cto", session="s", subject="people/Ann Lee")  # lands above `## topic/Ops`
    body = read(memory, "sessions/2026/12/01/s.md").split("---\n")[-1]
    assert body.index("- role: cto") < body.index("## topic/Ops")
    memory.consolidate()
    text = read(memory, "entities/people/ann-lee.md")
    assert "employer" not in text and "- role: cto (" in text
    assert "- status: open ([2026-12-01T08:00:00Z](../sessions/2026/12/01/s.md))\n" in read(memory, "topics/ops.md")


def test_a_deleted_fact_stays_deleted_without_the_ledger(memory):
    """Issue #10, finding 3, with `.fsmem/` deleted (another host, or a cleanup): a note that grew at its end is
    recognised from its own `consolidated:` hash."""
    path = note(memory.root, "2026-11-02", "s", "## people/Ann Lee\n- employer: Acme\n- city: Paris\n")
    memory.consolidate()
    delete_line(memory, "entities/people/ann-lee.md", "- employer: Acme")
    shutil.rmtree(memory.root / ".fsmem")
    path.write_text(path.read_text() + "- role: cto\n")
    memory.consolidate()
    text = read(memory, "entities/people/ann-lee.md")
    assert "employer" not in text and "- role: cto ([2026-11-02]" in text and "- city: Paris (" in text


def test_a_human_edit_of_a_value_still_wins_over_the_note_it_came_from(memory):
    path = note(memory.root, "2026-11-02", "s", "## people/Ann Lee\n- role: head of finance\n")
    memory.consolidate()
    doc = memory.root / "entities/people/ann-lee.md"
    doc.write_text(doc.read_text().replace("- role: head of finance (", "- role: Head of Finance, EMEA ("))
    path.write_text(path.read_text() + "- city: Paris\n")
    memory.consolidate()
    text = doc.read_text()
    assert "- role: Head of Finance, EMEA ([2026-11-02](../../sessions/2026/11/02/s.md))\n" in text
    assert "head of finance" not in text and "## Superseded" not in text
    note(memory.root, "2026-11-20", "t", "## people/Ann Lee\n- role: cfo\n")
    memory.consolidate()
    text = doc.read_text()
    assert "- role: cfo ([2026-11-20](../../sessions/2026/11/20/t.md))\n" in text
    assert "- role: Head of Finance, EMEA ([2026-11-02](../../sessions/2026/11/02/s.md) to 2026-11-20)\n" in text


# -- finding 4: notes dated in the future ----------------------------------------------
def test_a_note_dated_in_the_future_is_held_back_reported_and_applied_once_its_day_comes(memory, monkeypatch):
    """Issue #10, finding 4: `sessions/2099/01/01/…` must not stay current forever: it is held back (not applied,
    not marked), reported by consolidate and by check, and applied by the first run after its date."""
    future = note(memory.root, "2099-01-01", "typo", "## topic/Ops\n- status: from the future\n")
    note(memory.root, "2026-11-01", "a", "## topic/Ops\n- status: green\n")
    report = memory.consolidate()
    assert report.held_back == [("sessions/2099/01/01/typo.md", "2099-01-01")]
    assert "sessions/2099/01/01/typo.md: dated 2099-01-01, after today: held back until then" in report.to_text()
    assert report.to_dict()["held_back"] == [{"path": "sessions/2099/01/01/typo.md", "date": "2099-01-01"}]
    assert "future" not in read(memory, "topics/ops.md") and "2099" not in read(memory, "topics/ops.md")
    assert "consolidated:" not in future.read_text()
    problems = [(p, m) for p, _n, m in memory.check().problems]
    assert (
        "sessions/2099/01/01/typo.md",
        "dated 2099-01-01, after today (2026-12-01): consolidate holds it back until then",
    ) in problems
    note(memory.root, "2026-11-20", "b", "## topic/Ops\n- status: amber\n")
    memory.consolidate()
    assert "## Facts\n- status: amber ([2026-11-20](../sessions/2026/11/20/b.md))\n" in read(memory, "topics/ops.md")
    monkeypatch.setenv("FSMEM_NOW", "2099-01-02T08:00:00+00:00")
    report = memory.consolidate()
    assert report.held_back == [] and report.counts["notes_consolidated"] == 1
    assert "## Facts\n- status: from the future ([2099-01-01](../sessions/2099/01/01/typo.md))\n" in read(
        memory, "topics/ops.md"
    )
    assert not [p for p, _n, _m in memory.check().problems if p.startswith("sessions/")]


def test_a_fact_dated_after_today_holds_its_note_back(memory):
    path = note(memory.root, "2026-11-01", "a", "## topic/Ops\n- status: green\n- owner: bo (as of 2030-01-01)\n")
    report = memory.consolidate()
    assert report.held_back == [("sessions/2026/11/01/a.md", "2030-01-01")]
    assert not (memory.root / "topics/ops.md").exists() and "consolidated:" not in path.read_text()


# -- symbolic links ----------------------------------------------------------------------
def test_documents_that_are_links_out_of_the_memory_or_into_machine_state_are_skipped(memory, tmp_path):
    """A note naming `topic/creds` must not copy `topics/creds.md -> /elsewhere/secret` into memory, nor
    `topics/log.md -> ../.fsmem/logs/retrieval.jsonl`: both documents are skipped and reported, nothing changes."""
    secret = tmp_path / "secret.md"
    secret.write_text("---\ntitle: Secret\n---\n- password: hunter2\n")
    (memory.root / "topics").mkdir(exist_ok=True)
    os.symlink(secret, memory.root / "topics/creds.md")
    logs = memory.root / ".fsmem/logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "retrieval.jsonl").write_text('{"tool": "grep", "args": "password"}\n')
    os.symlink("../.fsmem/logs/retrieval.jsonl", memory.root / "topics/log.md")
    creds = note(memory.root, "2026-11-01", "a", "## topic/Creds\n- user: bob\n")
    log = note(memory.root, "2026-11-01", "b", "## topic/Log\n- size: big\n")
    note(memory.root, "2026-11-01", "c", "## topic/Ops\n- status: green\n")
    report = memory.consolidate()
    skipped = {path for path, _line, message in report.problems if message.endswith("document skipped")}
    assert skipped == {"topics/creds.md", "topics/log.md"}
    assert secret.read_text() == "---\ntitle: Secret\n---\n- password: hunter2\n"
    assert (logs / "retrieval.jsonl").read_text() == '{"tool": "grep", "args": "password"}\n'
    assert os.path.islink(memory.root / "topics/creds.md") and os.path.islink(memory.root / "topics/log.md")
    assert "consolidated:" not in creds.read_text() and "consolidated:" not in log.read_text()
    assert "- status: green (" in read(memory, "topics/ops.md")
    index = read(memory, "INDEX.md")
    assert "creds" not in index.lower() and "log.md" not in index and "hunter2" not in index
    for path in memory.root.rglob("*.md"):
        if not path.is_symlink():
            assert "hunter2" not in path.read_text() and '"tool"' not in path.read_text(), path


def test_a_document_that_links_to_another_memory_file_is_written_through_and_stays_a_link(memory):
    note(memory.root, "2026-11-01", "a", "## topic/Billing\n- cycle: monthly\n")
    memory.consolidate()
    os.symlink("billing.md", memory.root / "topics/invoices.md")
    note(memory.root, "2026-11-02", "b", "## topic/Invoices\n- format: pdf\n\n## topic/Billing\n- cycle: yearly\n")
    memory.consolidate()
    assert os.path.islink(memory.root / "topics/invoices.md")
    text = read(memory, "topics/billing.md")
    assert "- cycle: yearly ([2026-11-02](../sessions/2026/11/02/b.md))\n" in text
    assert "- format: pdf ([2026-11-02](../sessions/2026/11/02/b.md))\n" in text
    assert memory.consolidate().empty


def test_a_note_that_links_to_a_topic_is_left_alone_and_said_by_consolidate_and_check(memory):
    """`sessions/…/x.md -> topics/billing.md` would file the topic's facts as a session's and mark the topic:
    the link is skipped (exit 3's `skipped`), the topic keeps its bytes, and check names the same remedy."""
    billing = memory.root / "topics/billing.md"
    billing.parent.mkdir(exist_ok=True)
    billing.write_text("---\ntitle: Billing\n---\n# Billing\n\n## people/Rosa Diaz\n- employer: Acme\n")
    link = memory.root / "sessions/2026/11/01/x.md"
    link.parent.mkdir(parents=True)
    os.symlink("../../../../topics/billing.md", link)
    before = billing.read_bytes()
    report = memory.consolidate()
    reason = "a symbolic link to topics/billing.md, which is not a session note: remove the link, or put the session note itself in its place"
    assert report.problems == [("sessions/2026/11/01/x.md", 1, reason + "; note skipped")]
    assert report.skipped == ["sessions/2026/11/01/x.md"]
    assert billing.read_bytes() == before and os.readlink(link) == "../../../../topics/billing.md"
    assert not (memory.root / "entities").exists()
    assert memory.check().problems == [("sessions/2026/11/01/x.md", 1, reason + "; consolidate skips it")]


@pytest.mark.parametrize(
    ("folder", "target"),
    [("sessions", "topics"), ("sessions", "entities/people"), ("archive", "topics"), ("sessions", "profile")],
)
def test_a_folder_of_notes_that_is_a_link_into_the_memory_is_left_alone_and_said(memory, folder, target):
    """`sessions -> topics` had every topic with a `created:` read as a session note: marked `consolidated:`,
    its facts filed again, and (archive: true) moved out of topics/ into the archive; `fsmem note` wrote notes
    into topics/. A folder of notes is one that is where it is named: the folder is left alone and said, by
    consolidate (exit 3) and check, `fsmem note` refuses, and every document keeps its bytes and its place."""
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("archive: false", "archive: true"))
    doc = memory.root / target / "billing.md"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("---\ntitle: Billing\ncreated: 2026-11-01\n---\n# Billing\n\n- terms: net 30\n")
    if folder == "archive":
        note(memory.root, "2026-11-01", "a", "## topic/Ops\n- status: green\n")
    else:
        shutil.rmtree(memory.root / folder, ignore_errors=True)
    (memory.root / folder).symlink_to(target, target_is_directory=True)
    before, listed = doc.read_bytes(), sorted(doc.parent.rglob("*"))
    report = memory.consolidate()
    named = "archive/sessions" if folder == "archive" else folder
    said = [(path, line, message) for path, line, message in report.problems if path == named]
    assert len(said) == 1 and said[0][2].endswith(
        f"which is not a folder of session notes: make {named}/ a real folder; notes skipped"
    ), report.problems
    assert named in report.skipped
    assert doc.read_bytes() == before
    assert not list((memory.root / "archive").rglob("billing.md")) if folder != "archive" else True
    assert [p for p, _l, m in memory.check().problems if m.endswith("consolidate skips its notes")] == [named]
    if folder == "sessions":
        with pytest.raises(InvalidArgument, match="not a folder of session notes"):
            memory.note("- terms: net 60")
        assert doc.read_bytes() == before and sorted(doc.parent.rglob("*")) == listed


def test_a_note_that_links_to_another_note_is_that_note_consolidated_once(memory):
    """A link to a note adds nothing: the note is cited once, under its own path, and the link stays as it was."""
    note(memory.root, "2026-11-01", "a", "## people/Rosa Diaz\n- employer: Acme\n")
    alias = memory.root / "sessions/2026/11/05/b.md"
    alias.parent.mkdir(parents=True)
    os.symlink("../01/a.md", alias)
    report = memory.consolidate()
    assert report.problems == [] and report.counts["facts_added"] == 1 and report.counts["facts_confirmed"] == 0
    text = read(memory, "entities/people/rosa-diaz.md")
    assert "- employer: Acme ([2026-11-01](../../sessions/2026/11/01/a.md))\n" in text and "b.md" not in text
    assert os.readlink(alias) == "../01/a.md"
    assert memory.check().problems == []


def test_a_note_that_links_out_of_the_memory_is_reported_by_consolidate(memory, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("## people/Rosa Diaz\n- employer: Acme\n")
    link = memory.root / "sessions/2026/11/01/o.md"
    link.parent.mkdir(parents=True)
    os.symlink(outside, link)
    report = memory.consolidate()
    message = "a symbolic link that leads outside the memory root; note skipped"
    assert report.problems == [("sessions/2026/11/01/o.md", 1, message)]
    assert outside.read_text() == "## people/Rosa Diaz\n- employer: Acme\n" and not (memory.root / "entities").exists()


# -- finding 5: one parse per document, not one per key ---------------------------------------
def test_a_document_is_parsed_once_however_many_keys_a_run_merges_into_it(memory, monkeypatch):
    """Issue #10, finding 5: consolidation was quadratic in the keys of one subject (the document was parsed again
    for every key). Count the parses instead of timing them: a bounded number for 300 keys."""
    note(memory.root, "2026-11-01", "a", "## topic/Big\n" + "".join(f"- key {n}: value {n}\n" for n in range(300)))
    memory.consolidate()
    note(memory.root, "2026-11-02", "b", "## topic/Big\n" + "".join(f"- key {n}: new {n}\n" for n in range(300)))
    calls = {"headings": 0, "split": 0}
    real_headings, real_split = fmt.headings, fmt.split

    def headings(*args, **kwargs):
        calls["headings"] += 1
        return real_headings(*args, **kwargs)

    def split(*args, **kwargs):
        calls["split"] += 1
        return real_split(*args, **kwargs)

    monkeypatch.setattr(fmt, "headings", headings)
    monkeypatch.setattr(fmt, "split", split)
    report = memory.consolidate()
    assert report.counts["superseded"] == 300
    assert calls["headings"] <= 4 and calls["split"] <= 6, calls
    assert read(memory, "topics/big.md").count("\n- key ") == 600


@pytest.mark.parametrize("folder", ["entities", "topics", "sessions", "archive/sessions"])
def test_consolidation_removes_no_file_through_a_folder_that_links_out(memory, tmp_path, folder):
    """Consolidation clears the temporary files an interrupted write left (`.fsmem-tmp-*`) in its folders; with
    one of them a link out of the memory it deleted such a file there, outside the memory. Only folders inside
    the memory are cleared; one inside it is cleared once, where it really is."""
    from fsmem.store.beneath import TEMP_PREFIX

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / (TEMP_PREFIX + "abc")).write_text("not fsmem's")
    stray = memory.root / "topics" / (TEMP_PREFIX + "def")
    stray.parent.mkdir(exist_ok=True)
    stray.write_text("left by a killed write")
    link = memory.root / folder
    shutil.rmtree(link, ignore_errors=True)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    if folder == "topics":
        stray = memory.root / "entities" / (TEMP_PREFIX + "def")
        stray.parent.mkdir(exist_ok=True)
        stray.write_text("left by a killed write")
    with contextlib.suppress(FsmemError):  # an archive folder that leads out is refused, exit 2
        memory.consolidate()
    assert (outside / (TEMP_PREFIX + "abc")).read_text() == "not fsmem's"
    assert stray.exists() == (folder == "archive/sessions")  # refused before anything is cleared
