import json

import pytest
from conftest import write_file

from fsmem.errors import InvalidArgument, NotFound, PathEscape, PatternTimeout


@pytest.fixture(autouse=True, params=["one pass", "count pass then page pass"])
def passes(request, monkeypatch):
    """Every test runs with both strategies: small answers in one rg --json pass, large ones in two."""
    import fsmem.query.grep as grep_module

    if request.param != "one pass":
        monkeypatch.setattr(grep_module, "_SMALL_OUTPUT", 0)
    return request.param


def test_grep_finds_lines_grouped_by_file_with_line_numbers(demo_memory):
    result = demo_memory.grep("proration", ignore_case=True)
    assert [(m.path, m.line) for m in result.matches] == [
        ("entities/people/adam-smith.md", 23),
        ("topics/billing.md", 3),
        ("topics/billing.md", 15),
    ]
    assert result.matches[2].text == "- proration: daily, for seat changes mid-cycle"
    assert result.total == 3 and not result.truncated and result.left_out == 0
    text = result.to_text()
    assert text.splitlines()[0] == "entities/people/adam-smith.md:"
    assert "15:- proration: daily" in text
    assert text.endswith("[matches 1-3 of 3]")


def test_grep_flags_fixed_strings_word_and_case(demo_memory):
    assert demo_memory.grep("Proration").total == 0
    assert demo_memory.grep("net 3.", fixed_strings=True).total == 0
    assert demo_memory.grep("net 3.").total == 1
    assert demo_memory.grep("invoic", word=True, ignore_case=True).total == 0
    assert demo_memory.grep("invoic", ignore_case=True).total > 0
    assert demo_memory.grep("billing", word=True, ignore_case=True).total > 0


def test_grep_total_is_honest_when_cut_and_offset_pages_through(empty_memory):
    lines = "".join(f"- item {i}: needle number {i}\n" for i in range(300))
    write_file(empty_memory.root, "topics/many.md", "---\ntitle: many\n---\n" + lines)
    first = empty_memory.grep("needle", max_results=100, max_tokens=100_000)
    assert first.total == 300
    assert len(first.matches) == 50  # the default budget's max_results caps the request
    assert first.truncated and first.left_out == 250 and first.next_offset == 50
    assert "Continue with offset=50" in first.to_text()
    seen = []
    offset = 0
    while offset is not None:
        page = empty_memory.grep("needle", offset=offset, max_tokens=300)
        assert page.total == 300
        assert page.tokens <= 300
        seen.extend(m.line for m in page.matches)
        offset = page.next_offset
    assert seen == list(range(4, 304))


def test_grep_token_budget_cuts_whole_matches(empty_memory):
    write_file(empty_memory.root, "a.md", "".join(f"needle {'x' * 50} {i}\n" for i in range(40)))
    result = empty_memory.grep("needle", max_tokens=100)
    assert result.tokens <= 100 and result.cut_by == "tokens"
    assert all(m.text.startswith("needle") and m.text.endswith(str(i)) for i, m in enumerate(result.matches))
    assert "token budget" in result.to_text()


def test_grep_paths_and_front_matter_filters(demo_memory):
    only_topics = demo_memory.grep("Facts", ["topics"])
    assert {m.path for m in only_topics.matches} == {"topics/billing.md", "topics/deployments.md"}
    semantic = demo_memory.grep("## Facts", type="semantic")
    assert "topics/deployments.md" not in {m.path for m in semantic.matches}
    tagged = demo_memory.grep("Facts", tag=["sre"])
    assert {m.path for m in tagged.matches} == {"entities/people/maria-lopez.md", "topics/deployments.md"}
    assert demo_memory.grep("Facts", tag=["no-such-tag"]).total == 0


def test_grep_context_lines(demo_memory):
    result = demo_memory.grep("payment terms", context_lines=1)
    match = result.matches[0]
    assert match.before == [(16, "- invoice format: PDF, emailed to the billing contact")]
    assert match.after == [(18, "")]


def test_grep_leaves_superseded_facts_out_unless_asked(empty_memory):
    write_file(
        empty_memory.root,
        "entities/people/adam.md",
        """\
        ---
        title: Adam
        ---
        ## Facts
        - employer: Globex
        ## Superseded
        - employer: Acme Corp (2026-10-01 to 2026-11-20)
        ## Notes
        - employer history is long
        """,
    )
    default = empty_memory.grep("employer", ["entities"])
    assert [(m.line, m.superseded) for m in default.matches] == [(5, False), (9, False)]
    assert default.total == 2
    everything = empty_memory.grep("employer", ["entities"], include_superseded=True)
    assert [(m.line, m.superseded) for m in everything.matches] == [(5, False), (7, True), (9, False)]
    assert everything.to_dict()["matches"][1]["superseded"] is True
    assert "[superseded]" in everything.to_text()


def test_grep_json_document_shape(demo_memory):
    data = demo_memory.grep("Globex").to_dict()
    assert set(data) >= {"matches", "total", "truncated", "tokens"} and "total_matches" not in data
    assert data["matches"] == [
        {"path": "sessions/2026/11/20/support-0140.md", "line": 10, "text": "- employer: Globex", "superseded": False}
    ]
    json.dumps(data)


def test_grep_reads_broken_and_crlf_files_as_text(empty_memory):
    (empty_memory.root / "crlf.md").write_bytes(b"---\r\ntitle: x\r\n---\r\nthe needle here\r\n")
    (empty_memory.root / "bad.md").write_bytes(b"---\ntitle: [\n---\nneedle \xff\n")
    result = empty_memory.grep("needle")
    assert [(m.path, m.text) for m in result.matches] == [("bad.md", "needle \ufffd"), ("crlf.md", "the needle here")]


def test_grep_bad_input(demo_memory):
    with pytest.raises(InvalidArgument, match="invalid regular expression"):
        demo_memory.grep("(unclosed")
    with pytest.raises(InvalidArgument):
        demo_memory.grep("")
    with pytest.raises(PathEscape):
        demo_memory.grep("x", ["../"])
    with pytest.raises(NotFound):
        demo_memory.grep("x", ["nope.md"])
    with pytest.raises(InvalidArgument):
        demo_memory.grep("x", offset=-1)


def test_grep_stops_a_pattern_that_runs_too_long(empty_memory):
    (empty_memory.root / "fsmem.yaml").write_text("grep:\n  timeout_seconds: 0.05\n")
    big = ("a" * 200 + "\n") * 100_000
    for i in range(6):
        write_file(empty_memory.root, f"big{i}.md", big)
    from fsmem import Memory

    memory = Memory(empty_memory.root)
    with pytest.raises(PatternTimeout, match="too slow"):
        memory.grep(r"\w+\d", ignore_case=True, max_tokens=100)


def _many_files(memory, count=40, per_file=7):
    for i in range(count):
        lines = "".join(f"- line {j}: needle {i}-{j}\n" for j in range(per_file))
        superseded = "\n## Superseded\n- old: needle stale\n" if i % 3 == 0 else ""
        write_file(memory.root, f"d{i % 4}/f{i:02d}.md", "---\ntitle: f\n---\n" + lines + superseded)


def _pages(memory, **kwargs):
    shown, offset = [], 0
    while offset is not None:
        page = memory.grep("needle", offset=offset, max_results=9, max_tokens=100_000, **kwargs)
        shown += [(m.path, m.line) for m in page.matches]
        offset = page.next_offset
    return page.total, shown


def test_grep_order_is_path_order_and_pages_are_exact_without_rg_sorting(empty_memory):
    _many_files(empty_memory)
    total, shown = _pages(empty_memory)
    assert total == 40 * 7 == len(shown)  # superseded lines are neither counted nor shown
    assert shown == sorted(shown, key=lambda item: (item[0].split("/"), item[1]))
    total_all, shown_all = _pages(empty_memory, include_superseded=True)
    assert total_all == 40 * 7 + 14 == len(shown_all)


def test_grep_small_read_chunks_give_the_same_answer(empty_memory, monkeypatch):
    import fsmem.store.rg as rg_module

    _many_files(empty_memory)
    expected = [empty_memory.grep("needle", offset=o, max_results=9).to_dict() for o in (0, 100, 275)]
    monkeypatch.setattr(rg_module, "_CHUNK", 7)  # rg's count and line-number output cut mid-line
    got = [empty_memory.grep("needle", offset=o, max_results=9).to_dict() for o in (0, 100, 275)]
    assert got == expected
    assert expected[0]["total"] == 280


def test_grep_context_lines_survive_client_side_ordering(empty_memory):
    _many_files(empty_memory, count=6)
    result = empty_memory.grep("needle 5-3", context_lines=1)
    assert [(m.line, m.before, m.after) for m in result.matches] == [
        (7, [(6, "- line 2: needle 5-2")], [(8, "- line 4: needle 5-4")])
    ]


def test_grep_totals_follow_superseded_sections_the_cache_has_not_seen(empty_memory):
    _many_files(empty_memory, count=12)
    assert empty_memory.grep("needle").total == 12 * 7  # warms the cache: its hint names f00, f03, ...
    write_file(
        empty_memory.root, "d1/f01.md", "---\ntitle: f\n---\n- a: needle\n## Superseded\n- b: needle\n- c: needle\n"
    )
    write_file(empty_memory.root, "d0/f00.md", "---\ntitle: f\n---\n- a: needle\n## Notes\n- b: needle\n")
    result = empty_memory.grep("needle", ["d0", "d1"], max_results=50)
    assert [(m.path, m.line) for m in result.matches][:4] == [
        ("d0/f00.md", 4),
        ("d0/f00.md", 6),
        ("d0/f04.md", 4),
        ("d0/f04.md", 5),
    ]
    assert ("d1/f01.md", 4) in [(m.path, m.line) for m in result.matches]
    assert ("d1/f01.md", 6) not in [(m.path, m.line) for m in result.matches]
    # d0: f00 (now 2, none superseded), f04 and f08 (7 each);
    # d1: f01 (now 1 visible of 3), f05 and f09 (7 each; f09's superseded needle left out)
    assert result.total == 2 + 7 + 7 + 1 + 7 + 7
    everything = empty_memory.grep("needle", ["d0", "d1"], include_superseded=True, max_results=50)
    assert everything.total == result.total + 2 + 1


def test_grep_page_starts_inside_a_file_after_superseded_ones(empty_memory):
    _many_files(empty_memory, count=8)
    page = empty_memory.grep("needle", offset=9, max_results=4)
    # d0/f00 (7 visible, its superseded needle left out), then d0/f04 from its 3rd match
    assert [(m.path, m.line) for m in page.matches] == [
        ("d0/f04.md", 6),
        ("d0/f04.md", 7),
        ("d0/f04.md", 8),
        ("d0/f04.md", 9),
    ]
    assert page.total == 8 * 7 and page.next_offset == 13 and page.cut_by == "results"


def test_grep_explicit_file_lists_are_split_across_rg_calls(empty_memory, monkeypatch):
    import fsmem.query.grep as grep_module

    _many_files(empty_memory, count=10)
    expected = empty_memory.grep("needle", max_results=50).to_dict()
    monkeypatch.setattr(grep_module, "_ARGS_PER_CALL", 3)
    files = sorted(str(p.relative_to(empty_memory.root)) for p in empty_memory.root.rglob("f*.md"))
    got = empty_memory.grep("needle", files, max_results=50).to_dict()
    assert got == expected and got["total"] == 70


def test_grep_survives_files_changing_between_its_passes(empty_memory, passes):
    import fsmem.query.grep as grep_module

    if passes == "one pass":
        pytest.skip("one pass reads every file before the ranges are looked up")

    _many_files(empty_memory, count=6)
    memory = empty_memory

    def ranges_then_edit(paths):
        ranges = memory.catalog.superseded(paths)
        (memory.root / "d1/f01.md").unlink()  # gone before the page is read
        write_file(memory.root, "d1/f05.md", "---\ntitle: f\n---\nno match left\n")
        return ranges

    result = grep_module.run(
        memory.root,
        "needle",
        None,
        max_results=20,
        max_tokens=100_000,
        count_tokens=memory.tokens.count,
        superseded_ranges=ranges_then_edit,
        superseded_hint=memory.catalog.superseded_hint,
    )
    assert result.total == 6 * 7  # as counted before the files changed
    assert [m.path for m in result.matches] == ["d0/f00.md"] * 7 + ["d0/f04.md"] * 7
    assert result.next_offset == 14 and result.left_out == 28


def test_grep_match_longer_than_the_budget_is_shown_cut_and_pages_on(empty_memory):
    write_file(empty_memory.root, "a.md", "needle " + "word " * 20000 + "\nneedle two\n")
    first = empty_memory.grep("needle", max_tokens=100)
    assert [m.line for m in first.matches] == [1]
    assert first.tokens <= 100 and first.truncated and first.cut_by == "tokens"
    assert first.matches[0].text.startswith("needle word")
    assert first.matches[0].text.endswith('[line cut by the token budget; memory.read(path="a.md", lines="1:1")]')
    assert first.next_offset == 1
    second = empty_memory.grep("needle", max_tokens=100, offset=1)
    assert [(m.line, m.text) for m in second.matches] == [(2, "needle two")]
    only = empty_memory.grep("needle", ["a.md"], max_tokens=100)
    assert only.total == 2
    tiny = empty_memory.grep("needle", max_tokens=5)
    assert tiny.matches == [] and tiny.tokens == 0 and tiny.truncated


def test_grep_searches_a_file_with_a_nul_byte_as_text(empty_memory):
    write_file(empty_memory.root, "entities/people/a.md", "- employer: Acme\n- car: a\x00b\n")
    result = empty_memory.grep("Acme", ["entities"])
    assert [(m.path, m.line, m.text) for m in result.matches] == [("entities/people/a.md", 1, "- employer: Acme")]
    assert result.total == 1


def test_grep_a_carriage_return_inside_a_line_neither_cuts_it_nor_forges_a_match(empty_memory):
    """rg ends its lines with a newline alone: the one pass cut them at a lone carriage return as well, so it
    showed the line short, and what followed (a file's name, a NUL, a number) passed for a match line."""
    (empty_memory.root / "a.md").write_bytes(b"---\ntitle: a\n---\nthe needle\rand more\n")
    (empty_memory.root / "b.md").write_bytes(b"---\ntitle: b\n---\nplain\rb.md\x009:needle forged\n")
    result = empty_memory.grep("needle")
    assert [(m.path, m.line, m.text) for m in result.matches] == [
        ("a.md", 4, "the needle\rand more"),
        ("b.md", 4, "plain\rb.md\x009:needle forged"),
    ]
    assert result.total == 2


def test_grep_counts_past_a_full_page_as_it_shows(empty_memory):
    """The total counts every visible match line, whatever page is shown: before it, on it and after it
    (lines that are not decoded), with superseded lines, context lines and offsets; the same whichever pass
    answers."""
    import fsmem.query.grep as grep_module

    _many_files(empty_memory, count=30)
    write_file(empty_memory.root, "d0/z.md", "---\ntitle: z\n---\nneedle\nnot it\nneedle\r\n")
    asked = [
        dict(offset=offset, max_results=results, context_lines=context, include_superseded=superseded)
        for offset in (0, 3, 150)
        for results in (1, 5)
        for context in (0, 2)
        for superseded in (False, True)
    ]
    one_pass = [empty_memory.grep("needle", **kwargs).to_dict() for kwargs in asked]
    grep_module._SMALL_OUTPUT, small = 0, grep_module._SMALL_OUTPUT
    try:
        counted = [empty_memory.grep("needle", **kwargs).to_dict() for kwargs in asked]
    finally:
        grep_module._SMALL_OUTPUT = small
    assert one_pass == counted
    for kwargs, answer in zip(asked, one_pass, strict=True):  # 10 superseded needles
        assert answer["total"] == 30 * 7 + 2 + (10 if kwargs["include_superseded"] else 0), kwargs


def test_rg_beside_another_rg_of_the_process_runs_on_one_thread(tmp_path, monkeypatch):
    """A busy server runs many greps at once: one thread each does the same work in less CPU time."""
    import subprocess

    from fsmem import Memory
    from fsmem.store import rg

    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text("# A\n- walrus\n")
    seen: list[list[str]] = []
    real = subprocess.Popen

    def popen(argv, *args, **kwargs):
        seen.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(rg.subprocess, "Popen", popen)
    # a regular expression: on the second call the memory holds the feed, and the word index would name the file
    assert memory.grep("wal+rus").total == 1
    alone, seen[:] = list(seen), []
    monkeypatch.setattr(rg, "_running", [1])  # another grep's rg is running
    assert memory.grep("wal+rus").total == 1
    assert alone and len(seen) == len(alone)
    for first, beside in zip(alone, seen, strict=True):
        assert "--threads" not in first
        assert beside[beside.index("--threads") + 1] == "1" and beside[0] == first[0]
        assert [a for a in beside if a not in ("--threads", "1")] == first


# -- the first pass cut into files while rg prints it (`fsmem.query.grep._Blocks`) -------------------------------
_PIECES = ["a.md\0", "b/c.md\0", "./", "12:x", "3:- plan", "\n", "\n\n", "\n\n\n", "\r", "\0", "é", "4-y"]


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({min(len(data), c) for c in cuts})
    return [data[i:j] for i, j in zip([0, *at], [*at, len(data)], strict=True) if j > i]


@pytest.mark.parametrize("ends", ["\n", "", "\n\n"])
def test_the_first_pass_cut_while_it_comes_is_the_whole_output_cut(ends):
    from hypothesis import given, settings, strategies as st

    from fsmem.query.grep import _Blocks, _blocks, _visible_lines
    from fsmem.store.rg import decode_path

    @settings(max_examples=300, deadline=None)
    @given(pieces=st.lists(st.sampled_from(_PIECES), max_size=30), cuts=st.lists(st.integers(0, 200), max_size=8))
    def check(pieces, cuts):
        output = ("".join(pieces) + ends).encode()
        streamed = _Blocks()
        for chunk in _cut(output, cuts):
            streamed.take(chunk)
        found, whole = streamed.of(output), _blocks(output)
        assert (found.blocks, found.lines) == (whole.blocks, whole.lines)
        assert found.lines == {  # each file's lines, counted where they were cut
            path: _visible_lines(found.head_and_lines(path)[1], None, context_lines=False) for path in found.blocks
        }
        named: dict[str, list[bytes]] = {}  # each block with a NUL: its name as rg prints one, read; its lines
        for block in output[:-1].split(b"\n\n") if output.endswith(b"\n") else [output]:
            name, nul, lines = block.partition(b"\0")
            if nul:
                named.setdefault(decode_path(name), []).append(lines)
        assert {path: found.head_and_lines(path)[1] for path in found.blocks} == {
            path: b"\n".join(lines) for path, lines in named.items()
        }

    check()


def test_a_name_in_many_files_is_cut_into_them_as_rg_prints_it(empty_memory, monkeypatch):
    """A first pass of many files read in chunks that end anywhere (inside a line, a name, a gap) gives the page
    and the total that the whole output cut at once gives."""
    from fsmem.query import grep as grep_module
    from fsmem.store import rg as rg_module

    memory = empty_memory
    for n in range(300):
        write_file(
            memory.root, f"topics/many-{n:03}.md", "".join(f"- zephyr line {i} of {n}\n" for i in range(n % 7 + 1))
        )
    with monkeypatch.context() as whole:
        whole.setattr(grep_module._Blocks, "take", lambda self, chunk: None)  # nothing streamed: `_blocks`
        expected = [memory.grep("zephyr", offset=offset).to_text() for offset in (0, 500)]
    monkeypatch.setattr(rg_module, "_CHUNK", 97)
    assert [memory.grep("zephyr", offset=offset).to_text() for offset in (0, 500)] == expected
    assert "of 1197;" in expected[0].splitlines()[-1]


def test_a_page_and_its_total_are_those_the_lines_give_whatever_pass_counts_them(tmp_path, monkeypatch):
    """The first pass counts the files past the page by their number of lines, less the superseded lines of
    the files that have some, from rg's output read in chunks that end anywhere: its page and total are those
    the count pass gives, and the total is the match lines outside `## Superseded` sections, counted here."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from fsmem import Memory
    from fsmem.query import grep as grep_module
    from fsmem.store import rg as rg_module

    line = st.sampled_from(["- needle", "- needle too", "- a needle and a needle", "plain text"])
    section = st.tuples(st.sampled_from(["## Facts", "## Superseded", "## Notes"]), st.lists(line, max_size=5))
    files = st.lists(st.lists(section, max_size=4), min_size=1, max_size=15)
    asked = st.fixed_dictionaries(
        {
            "offset": st.integers(0, 20),
            "max_results": st.integers(1, 6),
            "context_lines": st.integers(0, 2),
            "include_superseded": st.booleans(),
        }
    )
    examples = iter(range(10**6))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(files=files, asked=asked, chunk=st.sampled_from([7, 97, 4096, 1 << 20]))
    def check(files, asked, chunk):
        memory = Memory.init(tmp_path / f"mem{next(examples)}")
        expected = 0
        for n, sections in enumerate(files):
            text = "---\ntitle: f\n---\n" + "".join(h + "\n" + "".join(x + "\n" for x in xs) for h, xs in sections)
            write_file(memory.root, f"d{n % 3}/f{n:02d}.md", text, dedent=False)
            expected += sum(
                "needle" in x for h, xs in sections for x in xs if asked["include_superseded"] or h != "## Superseded"
            )
        with monkeypatch.context() as patched:
            patched.setattr(rg_module, "_CHUNK", chunk)
            one_pass = memory.grep("needle", **asked).to_dict()
            patched.setattr(grep_module, "_SMALL_OUTPUT", 0)
            counted = memory.grep("needle", **asked).to_dict()
        assert one_pass == counted
        assert one_pass["total"] == expected

    check()


def test_the_superseded_lines_of_a_file_are_counted_in_place_from_its_last_line():
    """`_hidden_lines` reads a file's match lines (`N:TEXT`, in the file's order) where rg's output holds them:
    how many have their number inside a superseded range."""
    from hypothesis import given, settings, strategies as st

    from fsmem.query.grep import _hidden_lines

    span = st.tuples(st.integers(1, 60), st.integers(0, 20)).map(lambda s: (s[0], s[0] + s[1]))

    @settings(max_examples=300, deadline=None)
    @given(
        numbers=st.sets(st.integers(1, 80)), ranges=st.lists(span, min_size=1, max_size=3), head=st.binary(max_size=9)
    )
    def check(numbers, ranges, head):
        lines = b"\n".join(b"%d:- text %d" % (n, n) for n in sorted(numbers))
        expected = sum(any(a <= n <= b for a, b in ranges) for n in numbers)
        assert _hidden_lines(head + b"\0" + lines, len(head) + 1, ranges) == expected

    check()


def test_paths_put_in_path_order_at_once_are_in_path_order():
    from hypothesis import given, settings, strategies as st

    from fsmem.query.grep import in_path_order, path_order

    name = st.text(st.sampled_from("ab/.-_ 0\n\0é"), max_size=8)

    @settings(max_examples=300, deadline=None)
    @given(paths=st.sets(name))
    def check(paths):
        assert in_path_order(list(paths)) == sorted(paths, key=path_order)

    check()
