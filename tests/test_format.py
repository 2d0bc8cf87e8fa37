from hypothesis import example, given, settings, strategies as st

from fsmem import format as fmt
from fsmem.format.fences import fences, line_fences, plain_fences


def test_split_reads_front_matter_and_keeps_body_offsets():
    text = "---\ntitle: Adam\ntags: [a, b]\ncreated: 2026-10-01\n---\n# Adam\n- role: lead\n"
    doc = fmt.split(text)
    assert doc.has_front_matter
    assert doc.front_matter == {"title": "Adam", "tags": ["a", "b"], "created": "2026-10-01"}
    assert doc.body == "# Adam\n- role: lead\n"
    assert doc.body_start_line == 6
    assert doc.problems == []


def test_split_accepts_bom_and_crlf():
    text = "\ufeff---\r\ntitle: X\r\n---\r\nbody\r\n"
    doc = fmt.split(text)
    assert doc.front_matter == {"title": "X"}
    assert doc.body == "body\r\n"


def test_broken_yaml_is_reported_with_its_line_and_body_is_whole_text():
    text = "---\ntitle: ok\ndescription: a: b: c\n---\nbody\n"
    doc = fmt.split(text)
    assert not doc.has_front_matter
    assert doc.body == text
    assert doc.problems and doc.problems[0].line == 3
    assert "not valid YAML" in doc.problems[0].message


def test_unclosed_front_matter_is_a_problem_not_a_crash():
    doc = fmt.split("---\ntitle: x\nno closing fence\n")
    assert not doc.has_front_matter
    assert "never closed" in doc.problems[0].message


def test_front_matter_that_is_not_a_mapping_is_reported():
    doc = fmt.split("---\n- a\n- b\n---\nbody\n")
    assert not doc.has_front_matter
    assert "mapping" in doc.problems[0].message


def test_no_front_matter_means_all_body():
    doc = fmt.split("# Title\ntext\n")
    assert not doc.has_front_matter and doc.problems == []
    assert fmt.validate(doc)[0].message.startswith("no front matter")


def test_validate_reports_bad_fields_at_their_lines():
    text = "---\ntitle: x\ntype: opinion\nimportance: 3\nupdated: yesterday\n---\n"
    problems = fmt.validate(fmt.split(text))
    assert [(p.line, p.message.split(" ")[0]) for p in problems] == [(3, "type"), (4, "importance"), (5, "updated")]


def test_decode_replaces_invalid_utf8_and_reports_line():
    text, problems = fmt.decode(b"ok\nbad \xff here\n")
    assert "\ufffd" in text
    assert problems[0].line == 2


def test_set_fields_touches_only_the_changed_line():
    text = "---\n# a comment\ntitle: 'Quoted'\nupdated: 2020-01-01\nextra: {keep: me}\n---\nbody\n"
    out = fmt.set_fields(text, {"updated": "2026-11-30T10:00:00+00:00"})
    assert out == text.replace("updated: 2020-01-01", "updated: 2026-11-30T10:00:00+00:00")


def test_set_fields_adds_missing_field_before_closing_fence_and_removes_with_none():
    text = "---\ntitle: x\ntags:\n  - a\n  - b\nz: 1\n---\nbody\n"
    out = fmt.set_fields(text, {"importance": 0.5, "tags": None})
    assert out == "---\ntitle: x\nz: 1\nimportance: 0.5\n---\nbody\n"


def test_set_fields_keeps_crlf_line_endings():
    text = "---\r\ntitle: x\r\n---\r\nbody\r\n"
    out = fmt.set_fields(text, {"type": "semantic"})
    assert out == "---\r\ntitle: x\r\ntype: semantic\r\n---\r\nbody\r\n"


def test_set_fields_on_file_without_front_matter_adds_one():
    assert fmt.set_fields("body\n", {"title": "T"}) == "---\ntitle: T\n---\nbody\n"


def test_headings_skip_fenced_code_and_know_their_ranges():
    text = "# A\ntext\n```\n# not a heading\n```\n## B\nb\n## C\nc\n# D\n"
    got = [(h.level, h.title, h.line, h.end_line) for h in fmt.headings(text)]
    assert got == [(1, "A", 1, 9), (2, "B", 6, 7), (2, "C", 8, 9), (1, "D", 10, 10)]


def test_superseded_ranges_cover_the_section_only():
    text = "---\ntitle: x\n---\n## Facts\n- a: 1\n## Superseded\n- a: 0 (old)\n- b: 2 (old)\n## Notes\n- n\n"
    assert fmt.superseded_ranges(fmt.split(text)) == [(6, 8)]


def test_parse_timestamp_accepts_dates_and_zulu():
    assert fmt.parse_timestamp("2026-01-02").isoformat() == "2026-01-02T00:00:00+00:00"
    assert fmt.parse_timestamp("2026-01-02T03:04:05Z").isoformat() == "2026-01-02T03:04:05+00:00"
    assert fmt.parse_timestamp("soon") is None


def test_now_iso_honours_fsmem_now(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", "2026-03-04T05:06:07+01:00")
    assert fmt.now_iso() == "2026-03-04T05:06:07+01:00"


def test_impossible_date_in_front_matter_is_a_problem_not_a_crash():
    text = "---\ntitle: x\ncreated: 2026-13-45\nupdated: 2026-02-30T10:00:00Z\n---\nbody\n"
    doc = fmt.split(text)
    assert doc.has_front_matter
    assert doc.front_matter["title"] == "x"
    assert doc.front_matter["created"] == "2026-13-45"
    assert doc.front_matter["updated"] == "2026-02-30T10:00:00Z"
    problems = fmt.validate(doc)
    assert [(p.line, p.message.split(" must ")[0]) for p in problems] == [(3, "created"), (4, "updated")]


def test_decode_reports_a_nul_byte_at_its_line():
    text, problems = fmt.decode(b"ok\nfine\nbad\x00here\n")
    assert text == "ok\nfine\nbad\x00here\n"
    assert [(p.line, p.message) for p in problems] == [(3, "contains a NUL byte (byte 11); not text")]


def test_section_ends_match_the_rule_on_random_outlines():
    """Each section ends before the next heading of the same or a higher level (computed in one pass, so
    a file of 100,000 headings is read in linear time; the hostile benchmark has that file)."""
    import random

    from fsmem.format.markdown import headings

    rng = random.Random(7)
    for _ in range(200):
        levels = [rng.randint(1, 6) for _ in range(rng.randint(0, 30))]
        text = "".join("#" * level + f" h{n}\nbody\n" for n, level in enumerate(levels))
        found = headings(text)
        last = len(text.splitlines())
        for index, heading in enumerate(found):
            later = [h.line for h in found[index + 1 :] if h.level <= heading.level]
            assert heading.end_line == (later[0] - 1 if later else last)


# lines made of what tells fences apart: fences and near-fences, trailing spaces of any kind (\x1f and \u3000
# among them), BOMs, and now and then a line break other than "\n" (every one `str.splitlines` cuts at)
_IN_LINE = st.sampled_from(
    ["---", "...", "--", "----", ". ..", " ", "\t", "\x1f", "\u3000", "\ufeff", "a: b", "é", "#"]
)
_BREAK = st.sampled_from(["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028"])
_LINE = st.lists(_IN_LINE | _IN_LINE | _IN_LINE | _BREAK, max_size=3).map("".join) | st.sampled_from(
    ["---", "...", "--- ", "---\x1f", "...\t", "---\u3000", "---\x1c", "title: x"]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_LINE, max_size=8).map("\n".join), st.booleans(), st.booleans())
@example("title: A\n---\x1f\nbody", True, False)
@example("title: A\x0b---\nbody", True, False)  # a line break splitlines knows, before the fence
@example("---\x0bx\ntitle: A\n---", False, True)
@example("title: A\n...", True, False)  # the closing fence the last line, without a line break
def test_front_matter_found_without_cutting_lines_is_where_the_lines_put_it(text, opened, ended):
    """Wherever `plain_fences` finds front matter, cutting the file into lines finds the same: its text, its
    closing fence's line and the body; and `fences` is the lines' answer everywhere."""
    text = ("---\n" if opened else "") + text + ("\n" if ended else "")
    found = plain_fences(text)
    if found is not None:
        assert found == line_fences(text)
    assert fences(text) == line_fences(text)


def test_a_set_or_binary_field_reads_as_written_in_every_process():
    """`!!set` made a Python set, whose order of strings changes from one process to the next (an answer showing
    it changed with it: a walk and a watcher's answer differed), and `!!binary` bytes shown as b'...'."""
    import subprocess
    import sys

    text = "---\ntitle: Sets\ntags: !!set {beta, alpha, gamma}\nblob: !!binary aGVs\n bG8=\n---\n# Sets\n"
    doc = fmt.split(text)
    assert not doc.problems
    assert doc.tags == ["beta", "alpha", "gamma"] and doc.front_matter["blob"] == "aGVsbG8="
    program = f"from fsmem import format as fmt; print(fmt.split({text!r}).front_matter)"
    seen = {
        subprocess.run(
            [sys.executable, "-c", program], env={"PYTHONHASHSEED": str(seed)}, capture_output=True, text=True
        ).stdout
        for seed in range(1, 6)
    }
    assert seen == {str(doc.front_matter) + "\n"}
