"""The merge driver: facts, notes, front matter and prose merged as the format means them, the same bytes
whichever side is "ours", never a raw conflict marker; and git calling it."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given, settings, strategies as st

from fsmem import Memory, format as fmt
from fsmem.format import facts as F
from fsmem.history import merge as driver
from fsmem.history.merge import merge_text

BASE = """---
title: Adam Smith
entity: people/Adam Smith
created: 2026-10-01
updated: 2026-10-01
tags: [customer, billing]
---
# Adam Smith

Finance lead at the customer.

## Facts
- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md))
- role: lead ([2026-10-01](../../sessions/2026/10/01/a.md))

## Notes
- Likes tea. ([2026-10-01](../../sessions/2026/10/01/a.md))
"""


def side(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


DOC = "entities/people/adam-smith.md"


def both_ways(base: str, ours: str, theirs: str, path: str = DOC) -> tuple[str, int]:
    one = merge_text(base, ours, theirs, path=path)
    two = merge_text(base, theirs, ours, path=path)
    assert one == two, "the merge depends on which side is ours"
    assert "<<<<<<<" not in one[0] and ">>>>>>>" not in one[0]
    return one


def test_a_fact_set_on_both_sides_keeps_the_newer_and_supersedes_the_other_with_its_dates():
    ours = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-11-20"),
        (
            "- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md))",
            "- employer: Globex ([2026-11-20](../../sessions/x.md))",
        ),
    )
    ours += "\n## Superseded\n- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md) to 2026-11-20)\n"
    theirs = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-11-21"),
        (
            "- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md))",
            "- employer: Initech ([2026-11-21](../../sessions/y.md))",
        ),
    )
    theirs += "\n## Superseded\n- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md) to 2026-11-21)\n"
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 0
    assert "## Facts\n- employer: Initech ([2026-11-21](../../sessions/y.md))\n- role: lead" in merged
    assert merged.endswith(
        "## Superseded\n"
        "- employer: Acme ([2026-10-01](../../sessions/2026/10/01/a.md) to 2026-11-20)\n"
        "- employer: Globex ([2026-11-20](../../sessions/x.md) to 2026-11-21)\n"
    )
    assert "updated: 2026-11-21\n" in merged


def test_a_change_on_one_side_takes_that_side_and_changes_on_different_lines_combine():
    ours = side(BASE, ("- role: lead ([2026-10-01]", "- role: cfo ([2026-11-02]"))
    theirs = side(BASE, ("Finance lead at the customer.", "Finance lead at the customer, since 2019."))
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 0 and "- role: cfo ([2026-11-02]" in merged and "since 2019." in merged
    assert merge_text(BASE, ours, BASE) == (ours, 0) and merge_text(BASE, BASE, theirs) == (theirs, 0)


def test_observations_are_the_union_and_near_duplicates_become_one_line_with_both_sources():
    """The merged line shows the later date, linked to the note of that date (before, to the first source in
    path order: `[2026-11-21](…/a.md)`, a.md a 2026-10-01 note)."""
    ours = side(
        BASE,
        (
            "- Likes tea. ([2026-10-01](../../sessions/2026/10/01/a.md))",
            "- Likes tea. ([2026-11-20](../../sessions/x.md); [a](../../sessions/2026/10/01/a.md))\n- Plays chess. ([2026-11-20](../../sessions/x.md))",
        ),
    )
    theirs = side(
        BASE,
        (
            "- Likes tea. ([2026-10-01](../../sessions/2026/10/01/a.md))",
            "- Likes tea! ([2026-11-21](../../sessions/y.md); [a](../../sessions/2026/10/01/a.md))",
        ),
    )
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 0
    notes = merged.split("## Notes\n")[1]
    assert notes == (
        "- Likes tea. ([2026-11-21](../../sessions/y.md); [a](../../sessions/2026/10/01/a.md); [x](../../sessions/x.md))\n"
        "- Plays chess. ([2026-11-20](../../sessions/x.md))\n"
    )


def test_observations_that_say_different_things_stay_two_lines_after_a_merge():
    """Two hosts' near-duplicates (ratio 96) that differ in a number: one line kept the lower words, and the other
    host's salary was only a citation."""
    ours = side(
        BASE, ("- Likes tea.", "- Salary is 100,000 per year. ([2026-11-20](../../sessions/x.md))\n- Likes tea.")
    )
    theirs = side(
        BASE, ("- Likes tea.", "- Salary is 150,000 per year. ([2026-11-21](../../sessions/y.md))\n- Likes tea.")
    )
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 0
    assert "- Salary is 100,000 per year. ([2026-11-20](../../sessions/x.md))\n" in merged
    assert "- Salary is 150,000 per year. ([2026-11-21](../../sessions/y.md))\n" in merged


def test_each_observation_of_a_side_finds_its_near_duplicate_on_the_other_whatever_comes_before_it():
    """Two new observations on each side: the first of ours has no near-duplicate on theirs, the second has one.
    The words rule first stopped at the first (no candidate left it, so it looked for no more)."""
    ours = side(
        BASE,
        (
            "- Likes tea.",
            "- Salary is 100,000. ([2026-11-20](../../sessions/x.md))\n- Plays chess. ([2026-11-20](../../sessions/x.md))\n- Likes tea.",
        ),
    )
    theirs = side(
        BASE,
        (
            "- Likes tea.",
            "- Salary is 150,000. ([2026-11-21](../../sessions/y.md))\n- plays chess! ([2026-11-21](../../sessions/y.md))\n- Likes tea.",
        ),
    )
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 0
    notes = merged.split("## Notes\n")[1]
    assert "- Salary is 100,000. (" in notes and "- Salary is 150,000. (" in notes
    assert notes.count("hess") == 1
    assert "- Plays chess. ([2026-11-21](../../sessions/y.md); [x](../../sessions/x.md))\n" in notes  # y.md: 11-21


def test_front_matter_merges_field_by_field():
    ours = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-11-02"),
        ("tags: [customer, billing]", "tags: [customer, billing, vip]"),
    )
    ours = side(ours, ("created: 2026-10-01\n", "created: 2026-10-01\nowner: ann\n"))
    theirs = side(
        BASE, ("updated: 2026-10-01", "updated: 2026-11-05"), ("tags: [customer, billing]", "tags: [customer, emea]")
    )
    theirs = side(
        theirs,
        ("title: Adam Smith", "title: Adam J. Smith"),
        ("created: 2026-10-01\n", "created: 2026-10-01\nowner: bo\n"),
    )
    merged, _ = both_ways(BASE, ours, theirs)
    front = fmt.split(merged).front_matter
    assert front["title"] == "Adam J. Smith"  # changed on one side
    assert front["updated"] == "2026-11-05"  # the later
    assert front["tags"] == ["customer", "emea", "vip"]  # billing removed on one side, both additions kept
    assert front["owner"] == "bo"  # added on both: the side updated last


def test_a_document_both_hosts_created_keeps_the_consolidators_field_order():
    """Two hosts that each consolidated a note on a new subject made one document (git merges it from an empty
    base); the merge kept its fields sorted by name, where one host consolidating both notes writes them in the
    consolidator's order, so the replicas' bytes were never the one run's."""
    made = (
        "---\ntitle: Nadia\ntype: semantic\nentity: people/Nadia\ncreated: 2026-12-01\nupdated: 2026-12-0{day}\n---\n"
    )
    body = "# Nadia\n\n## Facts\n- employer: {value} ([2026-12-0{day}](../../sessions/2026/12/0{day}/{value}.md))\n"
    ours = made.format(day=1) + body.format(day=1, value="Acme")
    theirs = side(made.format(day=2), ("type: semantic\n", "type: semantic\ntags: [vip]\n")) + body.format(
        day=2, value="Globex"
    )
    merged, _ = both_ways("", ours, theirs)
    fields = [line.split(":")[0] for line in merged.split("---\n")[1].splitlines()]
    assert fields == ["title", "type", "entity", "created", "updated", "tags"]


def test_one_value_noted_on_both_sides_is_one_value_confirmed_never_superseded_by_itself():
    """Each host noted `employer: Acme`, on 10-03 and on 10-05: one run wrote the value once, current since 10-03
    and confirmed 10-05; the merge made the later one current from 10-05 and put the other under `## Superseded`,
    Acme superseded by Acme."""
    ours = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-10-05"),
        ("## Facts\n", "## Facts\n- city: Leeds ([2026-10-05](../../sessions/2026/10/05/x.md))\n"),
    )
    theirs = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-10-03"),
        ("## Facts\n", "## Facts\n- city: Leeds ([2026-10-03](../../sessions/2026/10/03/y.md))\n"),
    )
    merged, _ = both_ways(BASE, ours, theirs)
    assert "## Superseded" not in merged
    assert (
        "- city: Leeds ([2026-10-03](../../sessions/2026/10/03/y.md); confirmed [2026-10-05](../../sessions/2026/10/05/x.md))\n"
        in merged
    )


def test_a_value_superseded_in_the_same_second_keeps_its_end():
    """Two hosts noted two values of one key in the same second: the note that sorts last is current, and the
    other ends then, `to` that second, as one run writes it; the merge left it without an end."""
    ours = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-10-05"),
        ("## Facts\n", "## Facts\n- city: Leeds ([2026-10-05T10:00:00Z](../../sessions/2026/10/05/x.md))\n"),
    )
    theirs = side(
        BASE,
        ("updated: 2026-10-01", "updated: 2026-10-05"),
        ("## Facts\n", "## Facts\n- city: York ([2026-10-05T10:00:00Z](../../sessions/2026/10/05/y.md))\n"),
    )
    merged, _ = both_ways(BASE, ours, theirs)
    assert "- city: York ([2026-10-05T10:00:00Z](../../sessions/2026/10/05/y.md))\n" in merged.split("## Superseded")[0]
    superseded = merged.split("## Superseded\n")[1]
    assert (
        "- city: Leeds ([2026-10-05T10:00:00Z](../../sessions/2026/10/05/x.md) to 2026-10-05T10:00:00Z)\n" in superseded
    )


def test_hand_written_facts_set_on_both_sides_keep_the_side_updated_last():
    base = "---\ntitle: Shared\nupdated: 2026-11-01T10:00:00+00:00\n---\n# Shared\n\n## Facts\n- owner: nobody\n- status: open\n"
    ours = side(base, ("updated: 2026-11-01T10", "updated: 2026-11-03T10"), ("- owner: nobody", "- owner: ann"))
    theirs = side(base, ("updated: 2026-11-01T10", "updated: 2026-11-04T10"), ("- owner: nobody", "- owner: bo"))
    merged, kept = both_ways(base, ours, theirs, "topics/shared.md")
    assert kept == 0
    assert "## Facts\n- owner: bo\n- status: open\n" in merged
    assert merged.endswith("## Superseded\n- owner: ann ([2026-11-03](../topics/shared.md) to 2026-11-04)\n")


def test_prose_both_sides_changed_keeps_both_versions_marked_and_check_reports_it(tmp_path):
    ours = side(BASE, ("Finance lead at the customer.", "Finance lead, based in Leeds."))
    theirs = side(BASE, ("Finance lead at the customer.", "Head of finance at the customer."))
    merged, kept = both_ways(BASE, ours, theirs)
    assert kept == 1
    assert (
        f"{driver.OPEN}\nFinance lead, based in Leeds.\n{driver.MIDDLE}\nHead of finance at the customer.\n{driver.CLOSE}\n"
        in merged
    )
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "entities/people").mkdir(parents=True)
    (memory.root / "entities/people/adam-smith.md").write_text(merged)
    problems = [p for p in memory.check().problems if "a session note that is not there" not in p[2]]
    assert [(p, m.split(":")[0]) for p, _, m in problems] == [
        ("entities/people/adam-smith.md", "merge")
    ]  # its notes are elsewhere
    added_both = BASE + "\nA paragraph from one host.\n", BASE + "\nA paragraph from the other host.\n"
    merged, kept = both_ways(BASE, *added_both)
    assert kept == 0 and "one host." in merged and "other host." in merged


def test_a_retraction_on_one_side_against_a_change_on_the_other_goes_by_date():
    ours = side(
        BASE,
        (
            "- role: lead ([2026-10-01](../../sessions/2026/10/01/a.md))",
            "- role: cto ([2026-11-02](../../sessions/x.md))",
        ),
    )
    theirs = side(BASE, ("- role: lead ([2026-10-01](../../sessions/2026/10/01/a.md))\n", ""))
    theirs += "\n## Superseded\n- role: lead ([2026-10-01](../../sessions/2026/10/01/a.md) to 2026-11-09)\n- role: ~ ([2026-11-09](../../sessions/y.md))\n"
    merged, _ = both_ways(BASE, ours, theirs)
    assert "- role: cto" not in merged.split("## Facts")[1].split("##")[0]
    assert (
        "- role: cto ([2026-11-02](../../sessions/x.md) to 2026-11-09)" in merged
        and "- role: ~ ([2026-11-09](../../sessions/y.md))" in merged
    )


def test_the_driver_leaves_index_md_to_be_regenerated_and_writes_the_merge_into_ours(tmp_path, monkeypatch):
    memory = Memory.init(tmp_path / "mem")
    names = {}
    for name, text in (("base", "# I\n- a\n"), ("ours", "# I\n- b\n"), ("theirs", "# I\n- c\n")):
        names[name] = tmp_path / name
        names[name].write_text(text)
    monkeypatch.chdir(memory.root)  # git runs the driver in the work tree; given back after the test
    assert driver.main([str(names["base"]), str(names["ours"]), str(names["theirs"]), "7", "INDEX.md"]) == 0
    assert names["ours"].read_text() == "# I\n- b\n"
    names["ours"].write_text(side(BASE, ("role: lead", "role: cfo")))
    names["base"].write_text(BASE)
    names["theirs"].write_text(side(BASE, ("employer: Acme", "employer: Acme Ltd")))
    assert driver.main([str(names[n]) for n in ("base", "ours", "theirs")] + ["7", "topics/x.md"]) == 0
    assert "role: cfo" in names["ours"].read_text() and "employer: Acme Ltd" in names["ours"].read_text()


def test_git_merge_by_hand_runs_the_driver_set_up_by_init(tmp_path):
    memory = Memory.init(tmp_path / "mem", git=True)
    root = memory.root
    memory.write("entities/people/adam-smith.md", BASE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "FSMEM_"))}

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=env)

    git("checkout", "-q", "-b", "other")
    Memory(root).edit("entities/people/adam-smith.md", old="Finance lead at", new="Finance head at")
    git("checkout", "-q", "main")
    Memory(root).edit("entities/people/adam-smith.md", old="role: lead", new="role: cfo")
    merged = git("-c", "user.name=t", "-c", "user.email=t@t", "merge", "--no-edit", "other")
    assert merged.returncode == 0, merged.stderr
    text = (root / "entities/people/adam-smith.md").read_text()
    assert "Finance head at" in text and "role: cfo" in text and "<<<<<<<" not in text
    assert "fsmem.history.merge" in git("config", "merge.fsmem.driver").stdout and sys.executable


# -- properties ---------------------------------------------------------------------------------
KEYS = ("employer", "role", "city")
VALUES = ("acme", "globex", "initech", "oslo", "rome", "cfo", "lead")
DATES = ("2026-10-01", "2026-10-05", "2026-11-02", "2026-11-20")
SOURCES = ("sessions/a.md", "sessions/b.md", "sessions/c.md")


def render(facts: dict, history: list, notes: list, prose: list, updated: str) -> str:
    lines = ["---", "title: P", "entity: people/P", "created: 2026-10-01", f"updated: {updated}", "---", "# P", ""]
    lines += prose + ["", "## Facts"]
    lines += [F.render_current(k, v, F.Stamp(d, s), F.Stamp(d, s), DOC) for k, (v, d, s) in sorted(facts.items())]
    lines += ["", "## Notes"] + [F.render_observation(text, d, [s], DOC) for text, d, s in notes]
    if history:
        lines += ["", "## Superseded"] + history
    return "\n".join(lines) + "\n"


def model():
    fact = st.tuples(st.sampled_from(VALUES), st.sampled_from(DATES), st.sampled_from(SOURCES))
    return st.fixed_dictionaries(
        {
            "facts": st.dictionaries(st.sampled_from(KEYS), fact, max_size=3),
            "notes": st.lists(
                st.tuples(
                    st.sampled_from(["Likes tea.", "Plays chess.", "Owns a boat."]),
                    st.sampled_from(DATES),
                    st.sampled_from(SOURCES),
                ),
                max_size=2,
                unique_by=lambda n: n[0],
            ),
            "prose": st.lists(st.sampled_from(["Alpha line.", "Beta line.", "Gamma line."]), max_size=2, unique=True),
        }
    )


def edited(base: dict, data) -> tuple[dict, list, str]:
    """A side: some keys set anew (the old value superseded), a note or prose line added, as a consolidator would."""
    facts = dict(base["facts"])
    history = []
    for key in data.draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)):
        value, date, source = (
            data.draw(st.sampled_from(VALUES)),
            data.draw(st.sampled_from(DATES)),
            data.draw(st.sampled_from(SOURCES)),
        )
        old = facts.get(key)
        if old is not None and old[0] == value:
            continue
        if old is not None and old[1] > date:  # an older record: straight under ## Superseded
            stamp = F.Stamp(date, source)
            history.append(F.render_superseded(key, value, stamp, stamp, old[1], DOC))
            continue
        if old is not None:
            to = None if old[1] == date else date
            first = F.Stamp(old[1], old[2])
            history.append(F.render_superseded(key, old[0], first, first, to, DOC))
        facts[key] = (value, date, source)
    notes = list(base["notes"]) + data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(["Moved house.", "Likes tea!"]), st.sampled_from(DATES), st.sampled_from(SOURCES)
            ),
            max_size=1,
        )
    )
    prose = list(base["prose"]) + data.draw(st.lists(st.sampled_from(["Delta line.", "Epsilon line."]), max_size=1))
    updated = data.draw(st.sampled_from(DATES))
    return {"facts": facts, "notes": notes, "prose": prose}, history, updated


@settings(max_examples=150, deadline=None)
@given(base=model(), data=st.data())
def test_property_symmetric_markerless_and_every_fact_kept_current_or_superseded(base, data):
    base_text = render(base["facts"], [], base["notes"], base["prose"], "2026-10-01")
    sides = [edited(base, data) for _ in range(2)]
    texts = [render(m["facts"], h, m["notes"], m["prose"], u) for m, h, u in sides]
    merged, _ = both_ways(base_text, *texts)
    facts_part = merged.split("## Facts\n", 1)[1].split("## Notes")[0]
    keys = [F.parse_fact(line).key for line in facts_part.splitlines() if F.parse_fact(line)]
    assert len(keys) == len(set(keys)), merged  # one current value per key
    for m, _, _ in sides:
        for key, (value, _, _) in m["facts"].items():
            unchanged = all(other["facts"].get(key) == base["facts"].get(key) for other, _, _ in sides)
            if m["facts"][key] == base["facts"].get(key) and not unchanged:
                continue  # the other side changed this key: its change is taken
            assert any(
                (fact := F.parse_fact(line)) and fact.key == key and fact.value == value for line in merged.splitlines()
            ), (key, value, merged)
    assert merge_text(base_text, texts[0], texts[0])[0] == texts[0]
