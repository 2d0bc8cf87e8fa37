"""A scope (`Memory(root, scope=[...])`): outside it nothing exists, through every tool, total and context."""

from __future__ import annotations

import os

import pytest
from test_tools import NOW, build_memory, snapshot

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.errors import InvalidArgument, NotFound, OutOfScope, PathEscape
from fsmem.query.context import scoped_lines
from fsmem.store.scope import Scope
from fsmem.store.walk import walk_stats

BIG = "    big:\n      max_tokens: 100000\n      max_results: 1000\n"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    monkeypatch.delenv("FSMEM_SESSION", raising=False)
    root = build_memory(tmp_path, BIG)
    # a link in scope whose target is not, and a folder whose name only starts like the scope
    os.symlink("../entities/people/adam-smith.md", root / "topics" / "link.md")
    (root / "topics-old").mkdir()
    (root / "topics-old" / "acme-notes.md").write_text("# Old\n- Adam Smith asked about Acme proration.\n")
    Memory(root).index()  # INDEX.md names entities and topics
    return root


def refusal(path: str, scope: str = "topics/") -> str:
    return f"error: path {path!r} is outside this agent's scope ({scope}); it reaches only files under those paths"


# -- the prefixes ------------------------------------------------------------------------


def test_prefixes_are_normalised_and_checked():
    assert Scope.of(["topics/", "./topics//", "entities/people", "entities/people/adam-smith.md"]).prefixes == (
        "entities/people",
        "topics",
    )
    assert Scope.of("topics").describe() == "topics/"
    assert Scope.of("topics/billing.md").describe() == "topics/billing.md"
    assert Scope.of(None) is None and Scope.of([]) is None and Scope.of(["topics", "."]) is None
    for bad, error in (("../x", PathEscape), ("/etc", PathEscape), (".git", PathEscape), ("", InvalidArgument)):
        with pytest.raises(error):
            Scope.of([bad])


def test_a_prefix_matches_whole_components():
    scope = Scope.of(["topics", "entities/people"])
    assert scope.contains("topics/billing.md") and scope.contains("topics")
    assert not scope.contains("topics-old/x.md") and not scope.contains("entities/orgs/acme.md")
    assert scope.leads_to(".") and scope.leads_to("entities") and not scope.leads_to("entities/orgs")
    assert scope.roots_under(".") == ["entities/people", "topics"] and scope.roots_under("entities") == [
        "entities/people"
    ]


def test_the_walk_never_enters_or_reports_what_is_out_of_scope(root):
    (root / "entities" / "bad\nname.md").write_text("x")  # would be reported as skipped by a whole walk
    skipped: list = []
    found = [rel for rel, _, _ in walk_stats(root, skipped=skipped, scope=Scope.of("topics"))]
    assert found == ["topics/billing.md", "topics/deployments.md"]  # not the link to entities/, not topics-old/
    assert skipped == []
    whole: list = []
    list(walk_stats(root, skipped=whole))
    assert [shown for shown, _ in whole] == ["'entities/bad\\nname.md'"]  # a whole walk does report it


# -- every tool ---------------------------------------------------------------------------


def test_every_tool_sees_only_the_scope(root):
    before = snapshot(root)
    memory = Memory(root, agent="big", scope=["topics/"])

    def call(name, **arguments):
        return tools.call(memory, name, arguments)

    listing = call("ls")
    assert [line.split()[0] for line in listing.text.splitlines()[:-1]] == [
        "topics/billing.md",
        "topics/deployments.md",
    ]
    assert listing.text.splitlines()[-1] == "[files 1-2 of 2]"
    assert call("ls", path=".").text == listing.text

    grep = call("grep", pattern="Adam|Acme|proration", ignore_case=True)
    whole = Memory(root, agent="big").grep("Adam|Acme|proration", ignore_case=True)
    in_scope = [m for m in whole.matches if m.path.startswith("topics/")]
    assert (
        grep.rows == len(in_scope) and grep.text.splitlines()[-1] == f"[matches 1-{len(in_scope)} of {len(in_scope)}]"
    )
    assert all(p.startswith("topics/") for p in grep.paths)
    filtered = call("grep", pattern="a", type="semantic", max_results=1000)
    assert filtered.paths and all(p.startswith("topics/billing.md") for p in filtered.paths)

    hits = call("search", query="Adam Smith Acme proration billing")
    assert hits.paths and all(p.startswith("topics/") for p in hits.paths)
    read = call("read", path="topics/billing.md", lines="1:3")
    assert not read.is_error and read.text.startswith("     1\t---")

    assert not call("write", path="topics/support.md", body="# Support\n").is_error
    assert not call("edit", path="topics/support.md", old="# Support", new="# Support desk").is_error
    after = snapshot(root)
    assert {k for k in after if before.get(k) != after[k]} == {"topics/support.md"}


def test_paths_out_of_scope_are_refused_alike_whether_or_not_they_exist(root):
    before = snapshot(root)
    memory = Memory(root, scope=["topics/"])
    calls = [
        ("ls", {"path": "entities"}, "entities"),
        ("ls", {"path": "entities/nothing-here"}, "entities/nothing-here"),
        ("grep", {"pattern": "Adam", "paths": ["entities/people"]}, "entities/people"),
        ("grep", {"pattern": "Adam", "paths": ["nothing-here"]}, "nothing-here"),
        ("read", {"path": "entities/people/adam-smith.md"}, "entities/people/adam-smith.md"),
        ("read", {"path": "entities/people/nobody.md"}, "entities/people/nobody.md"),
        ("read", {"path": "topics/link.md"}, "topics/link.md"),  # the link's name is in scope, its target is not
        ("read", {"path": "topics-old/acme-notes.md"}, "topics-old/acme-notes.md"),
        ("read", {"path": "INDEX.md"}, "INDEX.md"),
        ("read", {"path": "profile/team.md"}, "profile/team.md"),
        ("write", {"path": "entities/people/adam-smith.md", "body": "x"}, "entities/people/adam-smith.md"),
        ("write", {"path": "entities/new.md", "body": "x"}, "entities/new.md"),
        ("write", {"path": "topics/link.md", "body": "x"}, "topics/link.md"),
        ("edit", {"path": "entities/orgs/acme.md", "old": "Acme", "new": "X"}, "entities/orgs/acme.md"),
        ("note", {"text": "- employer: Globex"}, f"sessions/2026/11/30/default-{memory.host_id}.md"),
    ]
    for name, arguments, shown in calls:
        answer = tools.call(memory, name, arguments)
        assert answer.is_error and answer.text == refusal(shown), (name, arguments, answer.text)
    with pytest.raises(OutOfScope) as caught:
        memory.read("entities/orgs/acme.md")
    assert isinstance(caught.value, NotFound)  # as if nothing were there
    for refused in (lambda: memory.rm("entities"), lambda: memory.rm("."), lambda: memory.mv("topics", "archive")):
        with pytest.raises(OutOfScope):
            refused()
    for whole in (memory.consolidate, memory.index, lambda: MemoryTool.over(memory)):
        with pytest.raises(InvalidArgument, match="whole memory"):
            whole()
    assert snapshot(root) == before


def test_a_scope_with_sessions_may_note(root):
    memory = Memory(root, scope=["topics/", "sessions/"])
    answer = tools.call(memory, "note", {"text": "- employer: Globex", "subject": "people/Adam Smith"})
    note = f"sessions/2026/11/30/default-{memory.host_id}.md"
    assert not answer.is_error and answer.text == f"noted in {note} at line 10 (new file)"
    listed = tools.call(memory, "ls", {"path": "sessions"})
    assert note in listed.text and "support-0140" in listed.text


def test_a_folder_above_the_scope_lists_only_what_is_inside(root):
    memory = Memory(root, scope=["entities/people"])
    listing = memory.ls("entities")
    assert [e.path for e in listing.entries] == ["entities/people/adam-smith.md", "entities/people/maria-lopez.md"]
    assert listing.total == 2
    assert memory.grep("Acme").total == Memory(root).grep("Acme", ["entities/people"]).total
    assert [m.path for m in memory.check().problems] == [] and memory.check().files == 2


def test_search_totals_count_only_the_scope(root):
    query = "Adam Smith Acme billing proration"
    whole = Memory(root, agent="big").search(query, max_results=1000)
    scoped = Memory(root, agent="big", scope=["topics/"]).search(query, max_results=1000)
    expected = [(h.path, h.line) for h in whole.hits if h.path in ("topics/billing.md", "topics/deployments.md")]
    assert [(h.path, h.line) for h in scoped.hits] == expected
    assert scoped.page.total == len(expected) < whole.page.total
    one = Memory(root, agent="big", scope=["topics/"]).search(query, max_results=1)
    assert one.page.total == len(expected) and one.left_out == len(expected) - 1


def test_context_shows_only_index_lines_that_name_files_in_scope(root):
    whole = Memory(root).context().text
    assert "entities/people/adam-smith.md" in whole and "profile/team.md" in whole
    text = Memory(root, scope=["topics/"]).context().text
    assert "entities" not in text.lower() and "profile" not in text and "Acme" not in text
    assert "- [Billing](topics/billing.md)" in text and "## Topics" in text
    people = Memory(root, scope=["entities/people/"]).context().text
    assert "## Entities: people" in people and "Entities: orgs" not in people and "Topics" not in people


def test_context_without_index_lists_the_scoped_catalog(root):
    (root / "INDEX.md").unlink()
    text = Memory(root, scope=["topics/"]).context().text
    assert "topics/billing.md" in text and "entities/" not in text


def test_scoped_lines_keep_a_line_only_when_everything_it_names_is_in_scope():
    lines = list(
        enumerate(
            [
                "# Index",
                "Generated from 12 documents.",
                "",
                "## Entities: people",
                "- [Adam](entities/people/adam-smith.md): see [billing](topics/billing.md)",
                "",
                "## Topics",
                "- [Billing](topics/billing.md): cycles",
                "- [Odd](<./topics/odd.md#facts>): an anchor",
                "- see https://example.com/topics/x.md",
                "[3 of 12 documents not listed]",
            ],
            start=1,
        )
    )
    kept = [text for _, text in scoped_lines(lines, Scope.of("topics").contains)]
    assert kept == [
        "# Index",
        "",
        "## Topics",
        "- [Billing](topics/billing.md): cycles",
        "- [Odd](<./topics/odd.md#facts>): an anchor",
    ]


def test_history_reaches_only_the_scope(root):
    memory = Memory(root, scope=["topics/"])
    for whole in (memory.log, memory.diff, lambda: memory.revert("HEAD"), memory.sync):
        with pytest.raises(InvalidArgument, match="whole memory"):
            whole()
    for outside in (
        lambda: memory.log("entities"),
        lambda: memory.diff(None, "entities/people"),
        lambda: memory.show("entities/orgs/acme.md", at="HEAD"),
        lambda: memory.restore("entities/orgs/acme.md", at="HEAD"),
    ):
        with pytest.raises(OutOfScope):
            outside()


def test_a_scoped_log_names_no_file_outside_the_scope(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    whole = Memory.init(tmp_path / "mem", git=True)
    # one run consolidates a note into a topic and holds back another, dated in the future, which it names
    whole.note("- owner: Dana", session="today", subject="topic/Billing")
    future = whole.root / "sessions" / "2099" / "01" / "01" / "secret-plans.md"
    future.parent.mkdir(parents=True)
    future.write_text("## people/Zed Quorum\n- employer: Umbrella\n")
    report = whole.consolidate()
    assert report.held_back and "topics/billing.md" in report.files_written

    scoped = Memory(whole.root, scope=["topics/"])
    shown = scoped.log("topics")
    assert shown.entries, "the consolidation commit touched topics/billing.md"
    text = shown.to_text() + str(shown.to_dict())
    # the run also changed sessions/ and INDEX.md: its summary (which counts notes out of scope) is withheld
    assert "changed topics/billing.md (message withheld" in text and "consolidated 1 of" not in text
    assert "secret-plans" not in text and "Zed" not in text and "sessions/" not in text
