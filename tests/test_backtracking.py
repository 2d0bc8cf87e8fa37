"""No line of a memory file makes a command backtrack: the patterns fsmem applies to lines take linear time.

Each hostile line held a command for minutes before: a heading with a long run of blanks in its title
(`fsmem.format.markdown.HEADING`, cubic in the run), a line of backticks beside a `[[link]]` (code spans,
cubic), an INDEX.md line of `](a` repeated, read for a scoped agent (`fsmem.query.context`, cubic: 15,000
characters took 200 s). The commands run as real subprocesses under a timeout, so a regression fails
instead of hanging the suite; the rewritten heading pattern is checked against the one it replaces.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import given, settings, strategies as st

from fsmem import Memory, format as fmt
from fsmem.format import facts, rows
from fsmem.format.links import in_line
from fsmem.history import merge_facts

FSMEM = str(Path(sys.executable).with_name("fsmem"))
NOW = "2026-11-30T10:00:00+00:00"
TIMEOUT = 60  # seconds; each command takes well under 2 s here, and took minutes before

# what each line was, before: the title `(.+?)` before a tail that backtracked into it
OLD_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
OLD_H2 = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$")
OLD_BULLET = re.compile(r"^(?P<mark>[-*+]) (?P<rest>.*?)[ \t]*$")

HOSTILE = {
    "topics/blank-heading.md": "# a" + " " * 6_400 + "b\n\nabout billing\n",
    "topics/hash-heading.md": "## a" + "#" * 50_000 + "b\n\nabout billing\n",
    "topics/backticks.md": "# Ticks\n\nsee [[README]] " + "`" * 4_000 + "\nabout billing\n",
}


def _memory(tmp_path: Path) -> Path:
    root = Memory.init(tmp_path / "mem").root
    (root / "topics").mkdir(exist_ok=True)
    for rel, text in HOSTILE.items():
        (root / rel).write_text(text)
    return root


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=TIMEOUT)


def test_hostile_lines_leave_every_reading_command_quick(tmp_path):
    root = _memory(tmp_path)
    for command in (
        ["ls"],  # builds the catalog: each file's headings and links
        ["check"],
        ["read", "topics/blank-heading.md", "--outline"],
        ["links", "topics/backticks.md"],
        ["search", "billing"],
        ["context"],
    ):
        done = _run([FSMEM, "--root", str(root), *command])
        assert done.returncode in (0, 1), (command, done.stderr)
        assert "Traceback" not in done.stderr
    listed = _run([FSMEM, "--root", str(root), "ls", "--json"]).stdout
    assert all(rel in listed for rel in HOSTILE)


def test_a_hostile_index_line_leaves_a_scoped_context_quick(tmp_path):
    """INDEX.md is any writer's file; an agent with a scope reads the lines of it that name files in its scope."""
    root = _memory(tmp_path)
    (root / "INDEX.md").write_text("# Index\n\n- [Billing](topics/blank-heading.md)\n- " + "](a" * 6_000 + "\n")
    script = textwrap.dedent(
        f"""
        from fsmem import Memory
        print(Memory({str(root)!r}, scope=["topics/"]).context().text)
        """
    )
    done = _run([sys.executable, "-c", script])
    assert done.returncode == 0, done.stderr
    assert "topics/blank-heading.md" in done.stdout and "](a](a" not in done.stdout


# -- the heading pattern reads every line as the old one did ---------------------------------------------------------

_LINES = st.text(alphabet="# \ta\n", max_size=24)
_STARTS = st.sampled_from(["", "#", "# ", "## ", "###### ", "####### "])


def _groups(match: re.Match[str] | None) -> tuple[str | None, ...] | None:
    return None if match is None else match.groups()


@settings(max_examples=2_000, deadline=None)
@given(_STARTS, _LINES, st.integers(0, 3), st.integers(0, 3))
def test_the_heading_pattern_reads_each_line_as_before(start, rest, pos, cut):
    line = start + rest
    assert _groups(fmt.HEADING.match(line)) == _groups(OLD_HEADING.match(line))
    assert _groups(merge_facts._H2.match(line)) == _groups(OLD_H2.match(line))
    # the search rows' copy, over a whole body: `^` and `$` at each line break, matched from a position
    old = re.compile(OLD_HEADING.pattern, re.M)
    end = max(len(line) - cut, 0)
    assert _groups(rows._HEADING_LINE.match(line, pos, end)) == _groups(old.match(line, pos, end))


@pytest.mark.parametrize(
    "line, title",
    [
        ("# Billing", "Billing"),
        ("## Facts ##", "Facts"),
        ("### C# notes #", "C# notes"),
        ("# a" + " " * 3_000 + "b", "a" + " " * 3_000 + "b"),  # 25 s before
        ("## a" + "#" * 20_000 + "b", "a" + "#" * 20_000 + "b"),
    ],
)
def test_headings_are_read_whatever_their_length(line, title):
    spent = time.process_time()
    assert [h.title for h in fmt.headings(line + "\n")] == [title]
    assert time.process_time() - spent < 1


@settings(max_examples=2_000, deadline=None)
@given(st.sampled_from(["", "-", "- ", "* ", "+  "]), st.text(alphabet="- \ta\n:", max_size=24))
def test_the_bullet_pattern_reads_each_line_as_before(start, rest):
    line = start + rest
    assert _groups(facts._BULLET.match(line)) == _groups(OLD_BULLET.match(line))


def test_a_fact_with_a_long_run_of_blanks_is_read_quickly():
    """Consolidation, sync's merge and timelines read each bullet's fact: 40,000 blanks took 5 s before."""
    spent = time.process_time()
    fact = facts.parse_fact("- note: a" + " " * 60_000 + "b")
    observation = facts.parse_observation("- a" + " " * 60_000 + "b" + " " * 60_000)
    assert time.process_time() - spent < 1
    assert fact is not None and fact.key == "note" and observation is not None


# -- code spans -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, targets",
    [
        ("`[[no]]` [[yes]]", ["yes"]),
        ("``a ` [[no]]`` [[yes]]", ["yes"]),  # a span of two backticks holds a lone one
        ("`[[open]]", ["open"]),  # a backtick that nothing closes is text
        ("```[[x]]`` [[y]]", ["x", "y"]),  # runs pair only with runs of their own length
        ("[[x]] " + "`" * 1_500, ["x"]),  # 12 s before
        ("[[x]] " + "`a" * 100_000, ["x"]),
    ],
)
def test_code_spans_pair_runs_of_backticks(line, targets):
    spent = time.process_time()
    assert [link.target for link in in_line(line, 1)] == targets
    assert time.process_time() - spent < 1


_CODE = st.builds(
    lambda ticks, text: "`" * ticks + text + "`" * ticks,
    st.integers(1, 3),
    st.text(alphabet="ab [] |", min_size=1, max_size=8).filter(lambda t: t.strip()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("link"), st.sampled_from(["x", "y z", "topics/b.md"])), _CODE), max_size=8))
def test_a_link_in_a_code_span_is_never_read(parts):
    """Links between code spans are found, one by one; what a span holds never is."""
    line = " ".join(f"[[{part[1]}]]" if isinstance(part, tuple) else part for part in parts)
    wanted = [part[1] for part in parts if isinstance(part, tuple)]
    assert [link.target for link in in_line(line, 1)] == wanted


OLD_CONFIG_KEY = re.compile(r"^(?P<indent> *)(?P<key>[^\s#:][^:#]*?)\s*:(?P<rest>.*)$")


@settings(max_examples=2_000, deadline=None)
@given(st.text(alphabet=" \ta:#'\"b", max_size=16))
def test_the_config_key_pattern_reads_each_line_as_before(line):
    from fsmem.config import edit

    assert _groups(edit._KEY.match(line)) == _groups(OLD_CONFIG_KEY.match(line))


def test_a_config_line_of_blanks_without_a_colon_is_refused_quickly():
    """`fsmem agent add` reads fsmem.yaml's lines for its keys: 60,000 blanks after a word took 5.7 s."""
    from fsmem.config import edit

    spent = time.process_time()
    assert edit._KEY.match("  agents" + " " * 60_000 + "#") is None
    assert edit._KEY.match("agents" + " \t" * 30_000 + ": x").group("key") == "agents"
    assert time.process_time() - spent < 1
