"""Links between memories: [[wikilinks]] resolved by path, entity/topic name, title or alias, and file name;
`links PATH` through the CLI, the API and the tools (scoped too); check, read --json, note headings, INDEX.md."""

from __future__ import annotations

import json
import os
import string
import sys
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from conftest import write_file
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.agents import tools
from fsmem.consolidate import index_md
from fsmem.errors import OutOfScope
from fsmem.format.links import (
    TIERS,
    answered_names,
    choose,
    fold,
    heading_link,
    links_of,
    names_of,
    stored_names,
)

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = {"FSMEM_NOW": "2026-12-01T10:00:00+00:00"}

ROSA = """\
---
title: Rosa Diaz
entity: people/Rosa Diaz
aliases: [Rosie, "R. Diaz"]
---
# Rosa Diaz

Owns [[topics/billing]] with [[Sam Lee|Sam]].
"""
BILLING = """\
---
title: Billing
topic: Billing
---
# Billing

Ask [[Rosa Diaz]] or [[rosie|her]].
See [[Nobody]], [[people/Rosa Diaz#Facts]] and [[Sam]].
```
[[not a link, in code]]
```
Inline `[[not a link either]]` and [[topics/billing.md]].
"""
SAM_PERSON = "---\ntitle: Sam Lee\nentity: people/Sam Lee\naliases: [Sam]\n---\n# Sam Lee\n"
SAM_TOPIC = "---\ntitle: Sam\ntopic: Sam\n---\n# Sam\n"
NOTE = """\
---
title: Session zed 2026-12-01
type: episodic
---
## people/Rosa Diaz
- role: cfo
Met [[R. DIAZ]] today.
"""


def fsmem(root: Path, *args: str, env: dict[str, str] | None = None, input: str | None = None, process: bool = False):
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    clean = without_fsmem()
    clean.update(env or {})
    run = cli_runner.same_as_a_process if process else cli_runner.run
    return run(["--root", str(root), *args], text=True, env=clean, input=input)


@pytest.fixture
def linked(tmp_path) -> Memory:
    memory = Memory.init(tmp_path / "mem")
    write_file(memory.root, "entities/people/rosa-diaz.md", ROSA)
    write_file(memory.root, "entities/people/sam-lee.md", SAM_PERSON)
    write_file(memory.root, "topics/sam.md", SAM_TOPIC)
    write_file(memory.root, "topics/billing.md", BILLING)
    write_file(memory.root, "sessions/2026/12/01/zed.md", NOTE)
    return memory


BILLING_TEXT = """\
links in topics/billing.md:
7: [[Rosa Diaz]] -> entities/people/rosa-diaz.md
7: [[rosie|her]] -> entities/people/rosa-diaz.md
8: [[Nobody]] -> nothing (no memory file answers to this name)
8: [[people/Rosa Diaz]] -> entities/people/rosa-diaz.md
8: [[Sam]] -> ambiguous, 2 files: entities/people/sam-lee.md, topics/sam.md
12: [[topics/billing.md]] -> topics/billing.md
links to topics/billing.md:
entities/people/rosa-diaz.md:8: [[topics/billing]]
topics/billing.md:12: [[topics/billing.md]]
[links 1-8 of 8]"""


# -- the command line ----------------------------------------------------------------------------


def test_cli_lists_links_and_backlinks_with_their_lines(linked):
    done = fsmem(linked.root, "links", "topics/billing.md", process=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.rstrip("\n") == BILLING_TEXT


def test_cli_json_and_paging(linked):
    done = fsmem(linked.root, "links", "entities/people/rosa-diaz.md", "--json")
    data = json.loads(done.stdout)
    assert data["links"] == [
        {
            "line": 8,
            "target": "topics/billing",
            "label": None,
            "status": "resolved",
            "to": "topics/billing.md",
            "candidates": [],
        },
        {
            "line": 8,
            "target": "Sam Lee",
            "label": "Sam",
            "status": "resolved",
            "to": "entities/people/sam-lee.md",
            "candidates": [],
        },
    ]
    assert data["backlinks"] == [
        {"path": "sessions/2026/12/01/zed.md", "line": 7, "target": "R. DIAZ", "label": None},
        {"path": "topics/billing.md", "line": 7, "target": "Rosa Diaz", "label": None},
        {"path": "topics/billing.md", "line": 7, "target": "rosie", "label": "her"},
        {"path": "topics/billing.md", "line": 8, "target": "people/Rosa Diaz", "label": None},
    ]
    assert (data["total"], data["next_offset"], data["truncated"]) == (6, None, False)
    first = fsmem(linked.root, "links", "entities/people/rosa-diaz.md", "--max-results", "3")
    assert first.stdout.splitlines()[-1] == "[links 1-3 of 6; 3 left out by the result limit. Continue with --offset 3]"
    rest = fsmem(linked.root, "links", "entities/people/rosa-diaz.md", "--offset", "3", "--max-results", "3")
    assert rest.stdout.splitlines() == [
        "links to entities/people/rosa-diaz.md:",
        "topics/billing.md:7: [[Rosa Diaz]]",
        "topics/billing.md:7: [[rosie|her]]",
        "topics/billing.md:8: [[people/Rosa Diaz]]",
        "[links 4-6 of 6]",
    ]


def test_cli_exit_codes(linked):
    alone = fsmem(linked.root, "links", "profile/identity.md")
    assert alone.returncode == 1
    assert alone.stdout.splitlines() == [
        "(profile/identity.md holds no [[links]], and no file links to it)",
        "[0 links]",
    ]
    missing = fsmem(linked.root, "links", "topics/nothing.md")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip() == "fsmem: error: topics/nothing.md does not exist; list files with ls"
    escape = fsmem(linked.root, "links", "../outside.md")
    assert escape.returncode == 2 and "Traceback" not in escape.stderr


def test_check_reports_links_to_nothing_and_ambiguous_names(linked):
    done = fsmem(linked.root, "check")
    assert done.returncode == 1
    assert done.stdout.splitlines()[:2] == [
        "topics/billing.md:8: link [[Nobody]] leads to no memory file",
        "topics/billing.md:8: link [[Sam]] is ambiguous: 2 files answer to it "
        "(entities/people/sam-lee.md, topics/sam.md)",
    ]
    assert fsmem(linked.root, "check", "entities").returncode == 0


def test_read_json_gives_the_links_it_shows(linked):
    data = json.loads(fsmem(linked.root, "read", "topics/billing.md", "--lines", "8:11", "--json").stdout)
    assert [(link["line"], link["target"], link["status"], link["to"]) for link in data["links"]] == [
        (8, "Nobody", "unresolved", None),
        (8, "people/Rosa Diaz", "resolved", "entities/people/rosa-diaz.md"),
        (8, "Sam", "ambiguous", None),
    ]
    assert data["links"][2]["candidates"] == ["entities/people/sam-lee.md", "topics/sam.md"]
    plain = json.loads(fsmem(linked.root, "read", "topics/billing.md", "--lines", "1:6", "--json").stdout)
    assert plain["links"] == []


# -- the API ---------------------------------------------------------------------------------------


def _targets(memory: Memory, rel: str) -> dict[str, str | None]:
    return {row.target: row.outcome.path for row in memory.links(rel).links}


def test_resolution_order_path_then_subject_then_title_then_file_name(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    # a title that is another file's path: the path wins
    write_file(memory.root, "topics/a.md", "---\ntitle: topics/b\n---\n")
    write_file(memory.root, "topics/b.md", "---\ntitle: B\n---\n")
    # a title that is another file's entity name: the entity wins
    write_file(memory.root, "topics/c.md", "---\ntitle: people/Ann\n---\n")
    write_file(memory.root, "entities/people/ann.md", "---\ntitle: Ann Smith\nentity: people/Ann\n---\n")
    # a title that is another file's name: the title wins; a bare file name (Obsidian's [[Note]]) still resolves
    write_file(memory.root, "topics/d.md", "---\ntitle: rosa-notes\n---\n")
    write_file(memory.root, "topics/rosa-notes.md", "---\ntitle: Something\n---\n")
    write_file(memory.root, "notes/Plain Note.md", "no front matter\n")
    write_file(
        memory.root,
        "topics/links.md",
        "[[topics/b]] [[people/ann]] [[ROSA-NOTES]] [[plain note]] [[Ann]] [[notes/Plain Note.md]]\n",
    )
    assert _targets(memory, "topics/links.md") == {
        "topics/b": "topics/b.md",
        "people/ann": "entities/people/ann.md",
        "ROSA-NOTES": "topics/d.md",
        "plain note": "notes/Plain Note.md",
        "Ann": "entities/people/ann.md",  # the entity's name without its kind counts as a title
        "notes/Plain Note.md": "notes/Plain Note.md",
    }


def test_the_end_of_a_path_resolves_last_as_an_imported_vault_writes_it(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    write_file(memory.root, "topics/vault/People/Bob.md", "# Bob\n\nSee [[Ada]].\n")
    write_file(memory.root, "topics/vault/Clients/Bob.md", "# Bob\n\nOf Acme.\n")
    write_file(memory.root, "topics/vault/People/Ada.md", "# Ada\n\n[[People/Bob|Bob]] [[people/bob.md]] [[Bob]]\n")
    write_file(memory.root, "topics/vault/Atlas.md", "[[vault/People/Ada]] [[Clients/Bob]] [[opl/Bob]] [[Ada]]\n")
    assert _targets(memory, "topics/vault/People/Ada.md") == {
        "People/Bob": "topics/vault/People/Bob.md",
        "people/bob.md": "topics/vault/People/Bob.md",
        "Bob": None,  # two files are named Bob: ambiguous, as before
    }
    assert _targets(memory, "topics/vault/Atlas.md") == {
        "vault/People/Ada": "topics/vault/People/Ada.md",
        "Clients/Bob": "topics/vault/Clients/Bob.md",
        "opl/Bob": None,  # an end of a path at a folder's boundary, not inside a folder's name
        "Ada": "topics/vault/People/Ada.md",
    }
    back = memory.links("topics/vault/People/Bob.md").backlinks
    assert [(r.path, r.target) for r in back] == [
        ("topics/vault/People/Ada.md", "People/Bob"),
        ("topics/vault/People/Ada.md", "people/bob.md"),
    ]
    problems = [p for p in memory.check().problems if "link" in str(p)]
    assert len(problems) == 2 and all("[[Bob]]" in str(p) or "[[opl/Bob]]" in str(p) for p in problems)
    write_file(memory.root, "topics/Clients/Bob.md", "# Bob's clients\n")  # two paths end with Clients/Bob now
    assert _targets(memory, "topics/vault/Atlas.md")["Clients/Bob"] is None
    write_file(memory.root, "topics/x.md", "---\ntitle: Clients/Bob\n---\n")  # a title comes before path ends
    assert _targets(memory, "topics/vault/Atlas.md")["Clients/Bob"] == "topics/x.md"
    memory.note("## [[People/Bob]]\n- phone: 555-0101\n", session="s1")  # a note heading follows the same rules
    memory.consolidate()
    assert "- phone: 555-0101" in (memory.root / "topics/vault/People/Bob.md").read_text()


def test_a_long_lived_memory_follows_edits_without_walking(linked):
    linked.links("topics/billing.md")
    linked.links("topics/billing.md")
    assert linked.catalog._feed is not None and linked.catalog._feed.trusted
    walks = linked.catalog.rows.walks
    write_file(linked.root, "topics/nobody.md", "---\ntitle: Nobody\n---\n")
    assert _targets(linked, "topics/billing.md")["Nobody"] == "topics/nobody.md"
    (linked.root / "entities/people/sam-lee.md").unlink()
    assert _targets(linked, "topics/billing.md")["Sam"] == "topics/sam.md"
    assert linked.catalog.rows.walks == walks
    linked.close()


def test_a_scoped_memory_sees_no_backlink_from_outside(linked):
    scoped = Memory(linked.root, scope=["topics/"])
    answer = scoped.links("topics/billing.md")
    assert [(r.path, r.line) for r in answer.backlinks] == [("topics/billing.md", 12)]  # not rosa-diaz.md
    assert answer.total == 7  # 6 links in the file, 1 backlink: the one from entities/ is not counted
    outcomes = {r.target: (r.outcome.status, r.outcome.paths) for r in answer.links}
    assert outcomes["Rosa Diaz"] == ("unresolved", ())  # outside the scope: as if it did not exist
    assert outcomes["Sam"] == ("resolved", ("topics/sam.md",))  # unique within the scope
    assert "entities/" not in json.dumps(answer.to_dict()) and "entities/" not in answer.to_text()
    with pytest.raises(OutOfScope):
        scoped.links("entities/people/rosa-diaz.md")
    scoped.close()


def test_links_within_the_token_budget(linked):
    answer = linked.links("topics/billing.md", max_tokens=40)
    assert answer.tokens <= 40 and answer.truncated and answer.cut_by == "tokens"
    assert answer.next_offset == len(answer.links) + len(answer.backlinks) > 0


# -- the tools ---------------------------------------------------------------------------------------


def test_tool_answers_and_is_read_only(linked):
    answer = tools.call(linked, "links", {"path": "topics/billing.md"})
    assert not answer.is_error
    assert answer.text == BILLING_TEXT
    assert (answer.rows, answer.truncated, answer.empty) == (8, False, False)
    assert "links" in [t.name for t in tools.offered(tools.read_only(Memory(linked.root)))]
    bad = tools.call(linked, "links", {"path": "../etc/passwd"})
    assert bad.is_error
    scoped = Memory(linked.root, scope=["topics/"])
    text = tools.call(scoped, "links", {"path": "topics/billing.md"}).text
    assert "entities/" not in text and "[links 1-7 of 7]" in text
    scoped.close()


# -- notes, consolidation and INDEX.md ---------------------------------------------------------------


def test_note_headings_and_subjects_that_are_links_file_under_the_entity(tmp_path):
    root = tmp_path / "mem"
    Memory.init(root)
    write_file(root, "entities/people/rosa.md", "---\ntitle: Rosa Diaz\nentity: people/Rosa Diaz\n---\n# Rosa Diaz\n")
    assert fsmem(root, "note", "--subject", "[[Rosa Diaz]]", "- employer: Acme", env=NOW).returncode == 0
    text = "## [[people/Rosa Diaz]]\n- role: cfo\n\n## [[Sam Lee|Sam]]\n- city: Oslo\n"
    assert fsmem(root, "note", "-", "--session", "s2", env=NOW, input=text).returncode == 0
    done = fsmem(root, "consolidate", env={"FSMEM_NOW": "2026-12-01T11:00:00+00:00"})
    assert done.returncode == 0, done.stderr
    rosa = (root / "entities/people/rosa.md").read_text()
    assert "- employer: Acme ([2026-12-01T10:00:00Z](../../sessions/2026/12/01/" in rosa
    assert "- role: cfo ([2026-12-01T10:00:00Z](../../sessions/2026/12/01/s2.md))" in rosa
    assert not (root / "entities/people/rosa-diaz.md").exists()
    assert sorted(p.name for p in (root / "topics").iterdir()) == ["sam-lee.md"]
    assert (root / "topics/sam-lee.md").read_text().startswith("---\ntitle: Sam Lee\n")
    index = (root / "INDEX.md").read_text()
    assert "- [Rosa Diaz](entities/people/rosa.md)" in index and "[[" not in index


def test_index_md_escapes_every_title(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    write_file(memory.root, "topics/rosa-diaz.md", "---\ntitle: '[[Rosa Diaz]]'\ntopic: Rosa\n---\n")
    write_file(memory.root, "topics/q3 (draft).md", "---\ntitle: 'a*b* _c_ `d` <e> \\f'\ntopic: Q3\n---\n")
    memory.index()
    index = (memory.root / "INDEX.md").read_text()
    assert r"- [\[\[Rosa Diaz\]\]](topics/rosa-diaz.md)" in index
    assert r"- [a\*b\* \_c\_ \`d\` \<e\> \\f](topics/q3%20%28draft%29.md)" in index


@given(st.text(min_size=1, max_size=40))
def test_index_link_text_is_one_link_whatever_the_title(title):
    text = index_md.link_text(title)
    assert "\n" not in text
    for at, char in enumerate(text):  # each character that could end or change the link is escaped
        if char in "[]`*_<>":
            run = len(text[:at]) - len(text[:at].rstrip("\\"))
            assert run % 2 == 1, (title, text)


# -- parsing and the property ------------------------------------------------------------------------


def test_parsing_leaves_code_out_and_keeps_labels_and_lines():
    body = "a [[X]] b [[y|Label here]]\n```\n[[no]]\n```\n`[[no]]` [[z#Part|p]] [[w^block]] [[ ]] [[q\\|t]]\n"
    assert [(w.line, w.target, w.label) for w in links_of(body, 10)] == [
        (10, "X", None),
        (10, "y", "Label here"),
        (14, "z", "p"),
        (14, "w", None),
        (14, "q", "t"),
    ]
    assert heading_link("[[Rosa Diaz]]") == "Rosa Diaz"
    assert heading_link("[[people/Rosa Diaz|Rosa]]") == "people/Rosa Diaz"
    assert heading_link("Call with [[Rosa Diaz]]") is None
    assert fold("  ./People/ROSA   Diaz ") == "people/rosa diaz"


NAMES = st.text(alphabet=string.ascii_letters + " -_./", min_size=1, max_size=12).filter(lambda s: s.strip(" ./"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    titles=st.lists(NAMES, min_size=1, max_size=6),
    aliases=st.lists(NAMES, max_size=4),
    asked=st.lists(NAMES, min_size=1, max_size=6),
)
def test_resolution_is_deterministic_and_stays_in_the_memory(tmp_path_factory, titles, aliases, asked):
    root = tmp_path_factory.mktemp("prop") / "mem"
    memory = Memory.init(root)
    outside = root.parent / "outside.md"
    outside.write_text(f"---\ntitle: {json.dumps(titles[0])}\n---\n")
    os.symlink(outside, root / "topics-link.md")  # a link out of the memory answers to nothing
    for n, title in enumerate(titles):
        front = {"title": title, "aliases": aliases[n % len(aliases) :][:1] if aliases else []}
        write_file(
            root, f"topics/t{n}.md", "---\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in front.items()) + "\n---\n"
        )
    body = " ".join(f"[[{name}]]" for name in asked) + "\n"
    write_file(root, "links.md", body)
    files = {str(p.relative_to(root)) for p in root.rglob("*.md") if not p.is_symlink()}
    first = [(r.target, r.outcome.status, r.outcome.paths) for r in memory.links("links.md").links]
    again = Memory(root)
    second = [(r.target, r.outcome.status, r.outcome.paths) for r in again.links("links.md").links]
    assert first == second
    for _target, status, paths in first:
        assert set(paths) <= files
        assert (status == "resolved") == (len(paths) == 1)
        assert (status == "ambiguous") == (len(paths) > 1)
    memory.close()
    again.close()


TWINNED = st.sampled_from(["a", "a.md", "a.md.md", "A.MD", "a .md", "b.markdown", "b", "b.md", ".md", "x/a.md", "x/a"])


@given(st.lists(st.tuples(st.sampled_from(sorted(TIERS)[:4]), TWINNED), unique=True, max_size=12))
def test_a_name_and_its_twin_with_md_are_one_stored_row_and_give_back_exactly_the_names(names):
    """The cache keeps `x` and `x.md` of one tier as one row (MD_TWIN); what the rows answer to is the names."""
    stored = stored_names(names)
    answered = [pair for tier, name in stored for pair in answered_names(tier, name)]
    assert sorted(answered) == sorted(names)
    assert len(stored) == len(names) - sum(len(answered_names(t, n)) - 1 for t, n in stored)


FILE_PARTS = st.sampled_from(["ada", "Ada", "ada.md", "ada .md", "bob", "ada.markdown", "ADA.MD"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(
        st.tuples(st.sampled_from(["", "people/", "x/people/"]), FILE_PARTS, FILE_PARTS), min_size=1, max_size=5
    ),
    asked=st.lists(
        st.sampled_from(["ada", "ada.md", "ada.md.md", "people/ada.md", "people/ada", "bob.md", "ada .md"]),
        min_size=1,
        max_size=5,
    ),
)
def test_links_resolve_as_the_names_each_file_answers_to_say(tmp_path_factory, files, asked):
    """Resolution over the stored rows (twins folded into one) equals `choose` over every file's `names_of`."""
    root = tmp_path_factory.mktemp("twins") / "mem"
    memory = Memory.init(root)
    made: dict[str, str] = {}
    for folder, stem, title in files:
        path = f"topics/{folder}{stem}" + ("" if stem.lower().endswith((".md", ".markdown")) else ".md")
        if fold(path) in {fold(p) for p in made}:
            continue  # one file per folded path: a case-insensitive file system would hold one
        made[path] = title
        write_file(root, path, f"---\ntitle: {json.dumps(title)}\n---\n")
    write_file(root, "links.md", " ".join(f"[[{name}]]" for name in asked) + "\n")
    found = {r.target: (r.outcome.status, r.outcome.paths) for r in memory.links("links.md").links}
    for name in asked:
        candidates = [
            (tier, path) for path, title in made.items() for tier, n in names_of(path, title=title) if n == fold(name)
        ]
        if candidates or "/" not in name:  # the end of a path, the fifth tier, is asked of no stored name
            status, paths = choose(candidates)
            assert found[name] == (status, tuple(paths)), (name, made)
    memory.close()


def test_hostile_targets_and_links_inside_the_memory(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    write_file(memory.root, "entities/people/rosa.md", "---\ntitle: Rosa Diaz\n---\n")
    os.symlink("rosa.md", memory.root / "entities/people/rosa-link.md")  # the same file under a second name
    (tmp_path / "outside.md").write_text("---\ntitle: Outside\n---\n")
    os.symlink(tmp_path / "outside.md", memory.root / "topics-out.md")  # a link out of the memory
    write_file(
        memory.root,
        "topics/t.md",
        "[[Rosa Diaz]] [[../../etc/passwd]] [[/etc/hosts]] [[Outside]] [[topics-out]] [[.fsmem/cache.sqlite]]\n",
    )
    assert _targets(memory, "topics/t.md") == {
        "Rosa Diaz": "entities/people/rosa.md",  # not ambiguous: the link inside the memory is the same file
        "../../etc/passwd": None,
        "/etc/hosts": None,
        "Outside": None,
        "topics-out": None,
        ".fsmem/cache.sqlite": None,
    }
