import multiprocessing
import os

import pytest
from conftest import write_file

from fsmem import Memory, format as fmt
from fsmem.errors import AlreadyExists, EditConflict, InvalidArgument, NotFound, PathEscape, ReadOnly


@pytest.fixture
def fixed_now(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:15:00+00:00")


def test_note_creates_todays_session_file_with_front_matter(empty_memory, fixed_now):
    result = empty_memory.note("employer: Globex", session="s1", subject="people/Adam Smith")
    assert result.path == "sessions/2026/11/30/s1.md" and result.created
    text = (empty_memory.root / result.path).read_text()
    doc = fmt.split(text)
    assert doc.front_matter == {
        "title": "Session s1 2026-11-30",
        "description": "Session notes of s1 on 2026-11-30",
        "type": "episodic",
        "session": "s1",
        "created": "2026-11-30T09:15:00+00:00",
        "updated": "2026-11-30T09:15:00+00:00",
    }
    assert (
        doc.body == "## people/Adam Smith\n- employer: Globex (as of 2026-11-30T09:15:00Z)\n"
    )  # the time of the write


def test_note_appends_under_an_existing_subject_and_adds_new_subjects(empty_memory, fixed_now):
    empty_memory.note("- role: lead", session="s1", subject="people/Adam Smith")
    empty_memory.note("- cycle: monthly", session="s1", subject="topic/Billing")
    empty_memory.note("- employer: Globex", session="s1", subject="people/Adam Smith")
    empty_memory.note("A free observation without subject.", session="s1")
    body = fmt.split((empty_memory.root / "sessions/2026/11/30/s1.md").read_text()).body
    assert body == (
        "## people/Adam Smith\n- role: lead (as of 2026-11-30T09:15:00Z)\n- employer: Globex (as of 2026-11-30T09:15:00Z)\n\n"
        "## topic/Billing\n- cycle: monthly (as of 2026-11-30T09:15:00Z)\n\n"
        "## topic/Inbox\n- A free observation without subject.\n"  # not under Billing: each note is its own unit
    )


def test_note_session_defaults_to_env_then_agent_then_config(empty_memory, fixed_now, monkeypatch):
    host = empty_memory.host_id
    assert len(host) == 8 and host == Memory(empty_memory.root).host_id  # stable for one copy of the memory
    assert empty_memory.note("x").path == f"sessions/2026/11/30/default-{host}.md"
    assert Memory(empty_memory.root, agent="researcher").note("x").path == f"sessions/2026/11/30/researcher-{host}.md"
    assert empty_memory.note("x", session="given").path == "sessions/2026/11/30/given.md"
    monkeypatch.setenv("FSMEM_SESSION", "envsess")
    assert empty_memory.note("x").path == "sessions/2026/11/30/envsess.md"


def test_note_rejects_bad_session_ids_and_empty_text(empty_memory):
    with pytest.raises(InvalidArgument):
        empty_memory.note("x", session="../../etc")
    with pytest.raises(InvalidArgument):
        empty_memory.note("   \n")
    with pytest.raises(InvalidArgument):
        empty_memory.note("x", subject="two\nlines")
    assert not (empty_memory.root / "sessions").exists()


def test_note_refuses_a_session_note_that_is_a_link_to_a_file_that_is_no_note(empty_memory, fixed_now):
    """Today's note made a link to a topic: the note would land in the topic, which consolidation then skips
    (it is no note), so nothing is written and the error says what to do. A link to a note is written through."""
    root = empty_memory.root
    write_file(root, "topics/billing.md", "---\ntitle: Billing\n---\n# Billing\n")
    (root / "sessions/2026/11/30").mkdir(parents=True)
    os.symlink("../../../../topics/billing.md", root / "sessions/2026/11/30/s1.md")
    before = (root / "topics/billing.md").read_bytes()
    with pytest.raises(InvalidArgument) as refused:
        empty_memory.note("- cycle: monthly", session="s1", subject="topic/Billing")
    assert str(refused.value) == (
        "sessions/2026/11/30/s1.md is a symbolic link to topics/billing.md, which is not a session note: remove the "
        "link, or put the session note itself in its place; nothing was written"
    )
    assert (root / "topics/billing.md").read_bytes() == before
    empty_memory.note("- cycle: monthly", session="s0")
    os.symlink("s0.md", root / "sessions/2026/11/30/s2.md")
    assert empty_memory.note("- plan: gold", session="s2").path == "sessions/2026/11/30/s0.md"
    assert "- plan: gold" in (root / "sessions/2026/11/30/s0.md").read_text()


def _append_notes(root, worker):
    memory = Memory(root)
    for i in range(20):
        memory.note(f"- worker {worker} item {i}", session="shared")


def test_concurrent_note_writers_lose_nothing(empty_memory, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:15:00+00:00")
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_append_notes, args=(empty_memory.root, w)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    text = (empty_memory.root / "sessions/2026/11/30/shared.md").read_text()
    for w in range(4):
        for i in range(20):
            assert f"- worker {w} item {i}\n" in text


def test_write_creates_with_front_matter_and_replaces_body_keeping_fields(empty_memory, fixed_now):
    created = empty_memory.write("topics/billing.md", "# Billing\n- cycle: monthly\n", set={"type": "semantic"})
    assert created.created
    text = (empty_memory.root / "topics/billing.md").read_text()
    assert text == (
        "---\ntitle: Billing\ncreated: 2026-11-30T09:15:00+00:00\nupdated: 2026-11-30T09:15:00+00:00\n"
        "type: semantic\n---\n# Billing\n- cycle: monthly\n"
    )
    empty_memory.write("topics/billing.md", "# Billing\n- cycle: yearly\n")
    assert (empty_memory.root / "topics/billing.md").read_text() == text.replace("monthly", "yearly")


@pytest.mark.parametrize(
    "head",
    [
        "title: Ada\nn: " + "9" * 5000,  # a value YAML cannot construct
        "title: Ada\nn: &a [1]\nm: *a",  # an alias
        "title: Ada\nentity: [people/Ada",  # not YAML
        "title: Ada\nentity: people/Ada\nno closing fence",  # never closed
    ],
    ids=["value", "alias", "not yaml", "unclosed"],
)
def test_a_body_is_not_written_over_front_matter_that_does_not_parse(empty_memory, fixed_now, head):
    """A head fsmem cannot read is body to it: a new body replaced the title, entity and every field with it."""
    original = f"---\n{head}\n---\n# Ada\n- employer: Globex\n".replace("\nno closing fence\n---", "")
    path = write_file(empty_memory.root, "entities/people/ada.md", original, dedent=False)
    with pytest.raises(InvalidArgument, match=r"^entities/people/ada.md: cannot replace the body: front matter "):
        empty_memory.write("entities/people/ada.md", "# Ada\n- employer: Initech\n")
    assert path.read_text() == original
    whole = "---\ntitle: Ada\n---\n# Ada\n- employer: Initech\n"
    empty_memory.write("entities/people/ada.md", whole)  # the whole file, its front matter first, is written
    assert path.read_text().startswith("---\ntitle: Ada\n") and path.read_text().endswith("Initech\n")


def test_write_with_only_fields_keeps_every_other_byte(empty_memory, monkeypatch):
    original = (
        '---\n# human comment\ntitle: "Adam"   # keep\nweird_field: {a: [1, 2]}\nupdated: 2020-01-01\n---\r\n'
        "Body with  double  spaces and CRLF\r\n\r\n- x: y\r\n"
    )
    path = write_file(empty_memory.root, "entities/people/adam.md", original, dedent=False)
    monkeypatch.setenv("FSMEM_NOW", "2026-11-30T09:15:00+00:00")
    empty_memory.write("entities/people/adam.md", None, set={"importance": 0.9})
    assert path.read_bytes().decode() == original.replace(
        "weird_field: {a: [1, 2]}\nupdated: 2020-01-01\n",
        "weird_field: {a: [1, 2]}\nupdated: 2026-11-30T09:15:00+00:00\nimportance: 0.9\n",
    )


def test_edit_replaces_exactly_one_occurrence(demo_memory, fixed_now):
    path = demo_memory.root / "topics/billing.md"
    before = path.read_text()
    result = demo_memory.edit("topics/billing.md", old="net 30", new="net 45")
    assert result.line == 17
    after = path.read_text()
    assert after == before.replace("net 30", "net 45").replace(
        "updated: 2026-11-01T12:00:00+00:00", "updated: 2026-11-30T09:15:00+00:00"
    )


def test_edit_that_matches_twice_or_never_changes_nothing(demo_memory):
    path = demo_memory.root / "topics/billing.md"
    before = path.read_bytes()
    with pytest.raises(EditConflict, match="matches 2 times"):
        demo_memory.edit("topics/billing.md", old="billing contact", new="x")
    with pytest.raises(EditConflict, match="not found"):
        demo_memory.edit("topics/billing.md", old="no such text", new="x")
    with pytest.raises(NotFound):
        demo_memory.edit("topics/none.md", old="a", new="b")
    assert path.read_bytes() == before


def test_rm_and_mv(demo_memory):
    demo_memory.mv("topics/deployments.md", "topics/ops/deployments.md")
    assert (demo_memory.root / "topics/ops/deployments.md").exists()
    with pytest.raises(AlreadyExists):
        demo_memory.mv("topics/billing.md", "topics/ops/deployments.md")
    demo_memory.rm("topics/ops/deployments.md")
    assert not (demo_memory.root / "topics/ops/deployments.md").exists()
    demo_memory.rm("topics/ops")
    with pytest.raises(NotFound):
        demo_memory.rm("topics/ops")
    with pytest.raises(InvalidArgument):
        demo_memory.rm("topics")  # not empty
    with pytest.raises(InvalidArgument):
        demo_memory.rm("")


def test_writes_refuse_escapes_and_state(empty_memory, tmp_path):
    for call in (
        lambda: empty_memory.write("../evil.md", "x"),
        lambda: empty_memory.write("/tmp/evil.md", "x"),
        lambda: empty_memory.write(".fsmem/x.md", "x"),
        lambda: empty_memory.mv("README.md", "../README.md"),
        lambda: empty_memory.rm("../mem"),
        lambda: empty_memory.edit("../x.md", old="a", new="b"),
    ):
        with pytest.raises(PathEscape):
            call()
    assert not (tmp_path / "evil.md").exists()
    assert (empty_memory.root / "README.md").exists()


def test_read_only_agent_cannot_write(demo_memory):
    reviewer = Memory(demo_memory.root, agent="reviewer")
    before = {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")}
    for call in (
        lambda: reviewer.note("x"),
        lambda: reviewer.write("topics/x.md", "x"),
        lambda: reviewer.edit("topics/billing.md", old="net 30", new="net 45"),
        lambda: reviewer.rm("topics/billing.md"),
        lambda: reviewer.mv("topics/billing.md", "topics/b.md"),
    ):
        with pytest.raises(ReadOnly):
            call()
    assert {p: p.read_bytes() for p in demo_memory.root.rglob("*.md")} == before
    assert reviewer.grep("net 30").total == 1


def test_write_refuses_non_markdown_and_folders(empty_memory):
    with pytest.raises(InvalidArgument):
        empty_memory.write("notes.txt", "x")
    (empty_memory.root / "topics.md").mkdir()
    with pytest.raises(InvalidArgument):
        empty_memory.write("topics.md", "x")


def test_edit_of_a_file_that_is_not_utf8_is_refused_and_left_as_is(empty_memory):
    path = empty_memory.root / "latin1.md"
    path.write_bytes(b"caf\xe9 au lait\n")
    with pytest.raises(
        InvalidArgument, match=r"latin1.md line 1: not valid UTF-8 \(byte 3\); fsmem edits only UTF-8 text"
    ):
        empty_memory.edit("latin1.md", old="au lait", new="noir")
    assert path.read_bytes() == b"caf\xe9 au lait\n"
