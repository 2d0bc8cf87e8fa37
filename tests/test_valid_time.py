"""Valid time (issue #22): same-day writes ordered by their time, `as_of` on read, grep, search and context, and
`timeline`, through the CLI (run here as the `fsmem` script runs it, a few also as a real process held to the
same bytes; the clock pinned with FSMEM_NOW), the API and the tools."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import InvalidArgument, NotFound

NADIA = "people/Nadia Okafor"
DOC = "entities/people/nadia-okafor.md"
# three employers: Acme from March, Globex from May, Initech from August
WRITES = [
    ("zed", "2026-03-01T09:00:00Z", "Acme"),
    ("alice", "2026-05-01T10:00:00Z", "Globex"),
    ("zed", "2026-08-01T11:00:00Z", "Initech"),
]
LATER = "2026-09-01T08:00:00Z"


def fsmem(
    root: Path, *args: str, now: str = LATER, check: bool = True, process: bool = False
) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); with `process`, also as the `fsmem` script, held to its bytes."""
    env = without_fsmem()
    env["FSMEM_NOW"] = now
    argv = ["--root", str(root), *args]
    run = cli_runner.same_as_a_process if process else cli_runner.run
    proc = run(argv, text=True, env=env)
    if check and proc.returncode not in (0, 1):
        raise AssertionError(f"fsmem {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
    return proc


def with_agents(root: Path, *names: str) -> None:
    config = root / "fsmem.yaml"
    agents = "".join(f"    {name}:\n      max_tokens: 4000\n" for name in names)
    config.write_text(config.read_text().replace("  agents:\n", "  agents:\n" + agents, 1))


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    """This process's fsmem on the day the CLI runs on here (LATER): no test reads today's date, so none runs
    again on a moved day (tests/conftest.py), and the API and the CLI answer from the same day."""
    monkeypatch.setenv("FSMEM_NOW", LATER)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A memory whose Nadia changed employer twice, each write made through `fsmem note` at its own time."""
    root = tmp_path_factory.mktemp("history") / "memory"
    fsmem(root.parent, "init", str(root))
    with_agents(root, "zed", "alice")
    for agent, when, employer in WRITES:
        fsmem(root, "--agent", agent, "note", f"- employer: {employer}", "--subject", NADIA, now=when)
    fsmem(root, "note", "- city: Lagos", "--subject", NADIA, now="2026-03-01T09:00:05Z")
    assert fsmem(root, "consolidate").returncode == 0
    return root


@pytest.fixture
def history(built, tmp_path) -> Path:
    """`built`, copied for each test (the test may write to it)."""
    return Path(shutil.copytree(built, tmp_path / "memory", symlinks=True))


# -- same-day writes ------------------------------------------------------------------------------
def test_the_later_write_of_one_day_is_current_whoever_s_note_path_sorts_first(tmp_path):
    root = tmp_path / "memory"
    fsmem(root.parent, "init", str(root))
    with_agents(root, "zed", "alice")
    fsmem(root, "--agent", "zed", "note", "- employer: Acme", "--subject", NADIA, now="2026-12-01T15:32:07Z")
    fsmem(root, "--agent", "alice", "note", "- employer: Globex", "--subject", NADIA, now="2026-12-01T15:32:09Z")
    fsmem(root, "consolidate", now="2026-12-01T16:00:00Z")
    text = (root / DOC).read_text()
    facts, superseded = text.split("## Superseded\n")
    assert "- employer: Globex ([2026-12-01T15:32:09Z](../../sessions/2026/12/01/alice-" in facts
    assert "- employer: Acme ([2026-12-01T15:32:07Z](../../sessions/2026/12/01/zed-" in superseded
    assert "Acme" not in facts


def test_the_earlier_write_loses_even_when_its_note_path_sorts_last(tmp_path):
    root = tmp_path / "memory"
    fsmem(root.parent, "init", str(root))
    with_agents(root, "zed", "alice")
    fsmem(root, "--agent", "alice", "note", "- employer: Globex", "--subject", NADIA, now="2026-12-01T15:32:07Z")
    fsmem(root, "--agent", "zed", "note", "- employer: Acme", "--subject", NADIA, now="2026-12-01T15:32:09Z")
    fsmem(root, "consolidate", now="2026-12-01T16:00:00Z")
    facts = (root / DOC).read_text().split("## Superseded\n")[0]
    assert "- employer: Acme ([2026-12-01T15:32:09Z]" in facts and "Globex" not in facts


def test_notes_without_a_time_still_order_a_day_by_note_path(tmp_path):
    root = tmp_path / "memory"
    Memory.init(root)
    for name, employer in (("zed", "Acme"), ("alice", "Globex")):  # written by hand: no time on the facts
        path = root / f"sessions/2026/12/01/{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {name}\n---\n## {NADIA}\n- employer: {employer}\n")
    fsmem(root, "consolidate", now="2026-12-01T16:00:00Z")
    facts = (root / DOC).read_text().split("## Superseded\n")[0]
    assert "- employer: Acme ([2026-12-01](../../sessions/2026/12/01/zed.md))" in facts  # zed.md sorts after alice.md


def test_a_time_with_a_utc_offset_orders_the_fact_by_the_instant_it_names(tmp_path):
    """`(as of 2026-12-01T12:00:00+02:00)` is 10:00 UTC, after Globex's 09:00 UTC. It was read as part of the value
    ('Acme (as of …+02:00)'), the fact dated the start of its note's day, so Globex was current; and `fsmem note`
    stamped it again ('… +02:00) (as of NOW)')."""
    root = tmp_path / "memory"
    Memory.init(root)
    for name, employer in (
        ("a", "Acme (as of 2026-12-01T12:00:00+02:00)"),
        ("b", "Globex (as of 2026-12-01T09:00:00Z)"),
    ):
        path = root / f"sessions/2026/12/01/{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {name}\n---\n## {NADIA}\n- employer: {employer}\n")
    fsmem(root, "consolidate", now="2026-12-01T16:00:00Z")
    text = (root / DOC).read_text()
    assert "## Facts\n- employer: Acme ([2026-12-01T10:00:00Z](../../sessions/2026/12/01/a.md))\n" in text
    assert text.endswith(
        "- employer: Globex ([2026-12-01T09:00:00Z](../../sessions/2026/12/01/b.md) to 2026-12-01T10:00:00Z)\n"
    )
    fsmem(root, "note", "- role: cto (as of 2026-12-01T01:30:00+05:00)", "--session", "s", now="2026-12-01T17:00:00Z")
    assert "- role: cto (as of 2026-12-01T01:30:00+05:00)\n" in (root / "sessions/2026/12/01/s.md").read_text()


def test_a_note_records_the_time_of_each_write_in_utc(tmp_path):
    root = tmp_path / "memory"
    fsmem(root.parent, "init", str(root))
    fsmem(root, "note", "- role: cto\n- Likes tea.", "--session", "s", now="2026-12-01T17:32:07+02:00")
    body = (root / "sessions/2026/12/01/s.md").read_text().split("---\n")[2]
    assert body == "- role: cto (as of 2026-12-01T15:32:07Z)\n- Likes tea.\n"  # 17:32 at +02:00; only the fact


# -- as_of -----------------------------------------------------------------------------------------
def employer_lines(text: str) -> list[str]:
    return [line.split("\t", 1)[-1] for line in text.splitlines() if "employer:" in line]


@pytest.mark.parametrize(
    "day, shown",
    [
        ("2026-02-01", []),  # before the first value
        ("2026-04-15", ["Acme"]),  # between the first and the second change
        ("2026-06-30", ["Globex"]),
        ("2026-09-01", ["Initech"]),  # after the last
    ],
)
def test_read_as_of_shows_the_value_that_held_then_as_current(history, day, shown):
    out = fsmem(history, "read", DOC, "--as-of", day).stdout
    values = [line.split("employer: ")[1].split(" (")[0] for line in employer_lines(out)]
    assert values == shown
    assert "Initech" not in out if shown != ["Initech"] else "Initech" in out


def test_read_as_of_with_superseded_shows_what_was_replaced_by_then_and_nothing_later(history):
    out = fsmem(history, "read", DOC, "--as-of", "2026-06-30", "--include-superseded", process=True).stdout
    values = [line.split("employer: ")[1].split(" (")[0] for line in employer_lines(out)]
    assert sorted(values) == ["Acme", "Globex"]  # Initech came later: never shown


def test_read_as_of_says_what_it_left_out(history):
    out = fsmem(history, "read", DOC, "--as-of", "2026-04-15").stdout.splitlines()
    assert out[-2] == "[2 line(s) hidden as of 2026-04-15: recorded later or replaced by then]"  # Initech, Globex


def test_read_as_of_a_time_on_the_day_of_a_change(history):
    before = fsmem(history, "read", DOC, "--as-of", "2026-05-01T09:59:59Z").stdout
    after = fsmem(history, "read", DOC, "--as-of", "2026-05-01T10:00:00Z").stdout
    assert [v.split("employer: ")[1].split(" (")[0] for v in employer_lines(before)] == ["Acme"]
    assert [v.split("employer: ")[1].split(" (")[0] for v in employer_lines(after)] == ["Globex"]


def test_grep_as_of_marks_and_leaves_out_by_valid_time(history):
    def grep(*args: str) -> list[tuple[str, bool]]:
        proc = fsmem(history, "grep", "employer: ", DOC, "--json", *args)
        return [
            (m["text"].split("employer: ")[1].split(" (")[0], m["superseded"])
            for m in json.loads(proc.stdout)["matches"]
        ]

    assert grep("--as-of", "2026-02-01") == []
    assert fsmem(history, "grep", "employer: ", DOC, "--as-of", "2026-02-01").returncode == 1
    assert grep("--as-of", "2026-04-15") == [("Acme", False)]
    assert sorted(grep("--as-of", "2026-06-30", "--include-superseded")) == [("Acme", True), ("Globex", False)]
    assert grep("--as-of", "2026-09-01") == grep() == [("Initech", False)]
    proc = fsmem(history, "grep", "employer: ", DOC, "--json", "--as-of", "2026-06-30", process=True)
    total = json.loads(proc.stdout)["total"]
    assert total == 1  # the total counts what the answer may show


def test_grep_as_of_leaves_out_a_note_s_fact_recorded_later_and_one_replaced_by_then(history):
    proc = fsmem(history, "grep", "employer: ", "sessions", "--json", "--as-of", "2026-06-30")
    shown = sorted(m["text"].split("employer: ")[1].split(" (")[0] for m in json.loads(proc.stdout)["matches"])
    assert shown == ["Globex"]  # Acme was replaced in May, Initech written in August


def test_search_as_of(history):
    def search(*args: str) -> list[tuple[str, bool]]:
        proc = fsmem(history, "search", "Nadia employer", "--json", *args)
        hits = json.loads(proc.stdout)["results"]
        return sorted(
            (h["text"].split("employer: ")[1].split(" (")[0], h["superseded"])
            for h in hits
            if h["path"] == DOC and "employer:" in h["text"]
        )

    assert search("--as-of", "2026-02-01") == []
    assert search("--as-of", "2026-04-15") == [("Acme", False)]
    assert search("--as-of", "2026-06-30") == [("Globex", False)]
    assert search("--as-of", "2026-06-30", "--include-superseded") == [("Acme", True), ("Globex", False)]
    assert search("--as-of", "2026-09-01") == search() == [("Initech", False)]


def test_context_as_of_shows_the_profile_s_facts_as_they_held(history):
    profile = history / "profile/identity.md"
    profile.write_text(
        "---\ntitle: Identity\ncreated: 2026-01-01\n---\n# Identity\n\n## Facts\n"
        "- team lead: Rosa ([2026-01-01](../profile/identity.md))\n\n## Superseded\n"
        "- team lead: Ana ([2025-06-01](../profile/identity.md) to 2026-01-01)\n"
    )
    now = fsmem(history, "context").stdout
    then = fsmem(history, "context", "--as-of", "2025-12-31").stdout
    assert "team lead: Rosa" in now and "team lead: Ana" not in now
    assert "team lead: Ana" in then and "team lead: Rosa" not in then


def test_as_of_through_the_api_and_the_tools(history):
    memory = Memory(history)
    page = memory.read(DOC, as_of="2026-04-15")
    assert [v.split("employer: ")[1].split(" (")[0] for v in employer_lines(page.to_text())] == ["Acme"]
    hits = memory.grep("employer: ", [DOC], as_of="2026-06-30", include_superseded=True)
    assert sorted((m.text.split("employer: ")[1].split(" (")[0], m.superseded) for m in hits.matches) == [
        ("Acme", True),
        ("Globex", False),
    ]
    found = memory.search("Nadia employer", as_of="2026-04-15")
    assert [h.text for h in found.hits if h.path == DOC and "employer" in h.text][0].startswith("- employer: Acme")
    answer = tools.call(memory, "read", {"path": DOC, "as_of": "2026-06-30"})
    assert not answer.is_error and "employer: Globex" in answer.text and "Initech" not in answer.text
    answer = tools.call(memory, "grep", {"pattern": "employer: ", "paths": [DOC], "as_of": "2026-04-15"})
    assert "employer: Acme" in answer.text and "Globex" not in answer.text
    answer = tools.call(memory, "search", {"query": "Nadia employer", "as_of": "2026-02-01"})
    assert "employer:" not in answer.text.split("INDEX.md")[0]


def test_a_bad_as_of_is_refused_on_every_face(history):
    memory = Memory(history)
    with pytest.raises(InvalidArgument, match="as_of takes a date such as 2026-11-01"):
        memory.read(DOC, as_of="last spring")
    proc = fsmem(history, "grep", "x", "--as-of", "2026-13-01", check=False)
    assert proc.returncode == 2 and "error: --as-of takes a date" in proc.stderr and "Traceback" not in proc.stderr
    answer = tools.call(memory, "search", {"query": "employer", "as_of": "soon"})
    assert answer.is_error and "as_of takes a date" in answer.text


# -- timeline --------------------------------------------------------------------------------------
def test_timeline_through_the_cli_is_complete_and_ordered(history):
    out = fsmem(history, "timeline", NADIA).stdout.splitlines()
    assert out[0] == f"{DOC}:"
    rows = out[1:-1]
    assert [r.split("  ")[0] for r in rows] == [
        "city: Lagos",
        "employer: Acme",
        "employer: Globex",
        "employer: Initech",
    ]
    assert rows[1].startswith(
        "employer: Acme  (2026-03-01T09:00:00Z to 2026-05-01T10:00:00Z)  sessions/2026/03/01/zed-"
    )
    assert rows[1].endswith(" by zed")
    assert rows[2].endswith(" by alice") and "(2026-05-01T10:00:00Z to 2026-08-01T11:00:00Z)" in rows[2]
    assert "(2026-08-01T11:00:00Z, current)" in rows[3]
    assert out[-1] == "[values 1-4 of 4]"
    data = json.loads(fsmem(history, "timeline", DOC, "employer", "--json", process=True).stdout)
    assert [(v["value"], v["date"], v["until"], v["writer"], v["current"]) for v in data["values"]] == [
        ("Acme", "2026-03-01T09:00:00Z", "2026-05-01T10:00:00Z", "zed", False),
        ("Globex", "2026-05-01T10:00:00Z", "2026-08-01T11:00:00Z", "alice", False),
        ("Initech", "2026-08-01T11:00:00Z", None, "zed", True),
    ]


def test_timeline_pages_like_every_list(history):
    first = fsmem(history, "timeline", NADIA, "employer", "--max-results", "2").stdout.splitlines()
    assert first[-1] == "[values 1-2 of 3; 1 left out by the result limit. Continue with --offset 2, or name one KEY]"
    rest = fsmem(history, "timeline", NADIA, "employer", "--offset", "2").stdout.splitlines()
    assert rest[1].startswith("employer: Initech") and rest[-1] == "[values 3-3 of 3]"
    memory = Memory(history)
    page = memory.timeline(NADIA, max_tokens=60)
    assert page.truncated and page.cut_by == "tokens" and page.next_offset == len(page.entries) > 0


def test_timeline_through_the_api_and_the_tool(history):
    memory = Memory(history)
    by_title = memory.timeline("Nadia Okafor", "employer")
    assert [e.value for e in by_title.entries] == ["Acme", "Globex", "Initech"] and by_title.path == DOC
    answer = tools.call(memory, "timeline", {"subject": NADIA, "key": "employer"})
    assert not answer.is_error and answer.text.index("Acme") < answer.text.index("Globex") < answer.text.index(
        "Initech"
    )
    with pytest.raises(NotFound, match="no document for 'people/Rosa Diaz'"):
        memory.timeline("people/Rosa Diaz")
    with pytest.raises(InvalidArgument, match="is not a key"):
        memory.timeline(NADIA, "Employer!")
    assert fsmem(history, "timeline", "people/Rosa Diaz", check=False, process=True).returncode == 2


def test_timeline_leaves_out_a_value_whose_source_is_outside_the_scope(history):
    scoped = Memory(history, scope=["entities", "sessions/2026/05"])
    assert [e.value for e in scoped.timeline(NADIA, "employer").entries] == ["Globex"]
    outside = Memory(history, scope=["topics"])
    answer = tools.call(outside, "timeline", {"subject": NADIA})
    assert answer.is_error and "does not exist" in answer.text  # outside the scope, the document is not there
