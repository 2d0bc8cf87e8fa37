"""Each face says how to continue in its own words (issue #21), and following the words it gives goes on.

For every face (the Python API, the tool dispatcher, the CLI as a subprocess, MCP over stdio, the HTTP
server) a cut ls / grep / search / log answer, a cut read / show answer, a cut outline, a hidden-superseded
note and a bad `lines`: the answer names only its own face's syntax, and the continuation it names, parsed
from the text and sent again, gives the next page.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import cli_runner
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from fsmem import Memory, faces
from fsmem.agents import tools

NOW = "2026-11-30T10:00:00+00:00"
FSMEM = str(Path(sys.executable).with_name("fsmem"))
TINY = "    tiny:\n      max_tokens: 120\n      max_results: 2\n    wide:\n      max_tokens: 20000\n      max_results: 1000\n"
LONG = "topics/long.md"
PERSON = "entities/people/ada.md"

# The other faces' syntax: a flag (`--offset`), or a keyword argument (`offset=2`, `lines="4:"`).
FLAG = re.compile(r"--[a-z]")
KEYWORD = re.compile(r"\b[a-z_]+=(?:\"|\d|true\b|True\b)")
# A continuation as each face words it, after "Continue with" or "next:".
KEYWORD_NEXT = re.compile(r"(?:Continue with|next:) ((?:[a-z_]+=(?:\"[^\"]*\"|\d+|true|True)(?:, (?=[a-z_]+=))?)+)")
FLAG_NEXT = re.compile(r"(?:Continue with|next:) ((?:--[a-z-]+(?: [^\s;,\]-][^\s;,\]]*)?(?: |(?=[;,\]])))+)")


def keyword_next(text: str) -> dict | None:
    """The arguments a tool or API answer says to send again (`offset=2` -> {"offset": 2}), or None."""
    found = KEYWORD_NEXT.search(text)
    if found is None:
        return None
    pairs = re.findall(r"([a-z_]+)=(\"[^\"]*\"|\d+|true|True)", found.group(1))
    return {name: json.loads(value.lower() if value == "True" else value) for name, value in pairs}


def flag_next(text: str) -> list[str] | None:
    """The flags a CLI answer says to add (`--offset 2` -> ["--offset", "2"]), or None."""
    found = FLAG_NEXT.search(text)
    return None if found is None else shlex.split(found.group(1))


def build(tmp_path: Path) -> Path:
    """A memory with history: six files that match `needle`, a long file with headings, a person with a
    superseded fact, each written (and committed) by fsmem; the agent `tiny` has a small budget."""
    root = tmp_path / "mem"
    Memory.init(root, git=True)
    config = root / "fsmem.yaml"
    config.write_text(config.read_text().replace("  agents:\n", "  agents:\n" + TINY, 1))
    memory = Memory(root)
    for i in range(6):
        memory.write(f"topics/t{i}.md", f"# Topic {i}\n\n- needle {i}: invoices are sent weekly\n")
    sections = "".join(
        f"## Part {p}\n\n" + "".join(f"- line {p}.{n} of the part\n" for n in range(8)) for p in range(8)
    )
    memory.write(LONG, "# Long\n\n" + sections)
    memory.write(PERSON, "## Facts\n- employer: Globex\n## Superseded\n- employer: Acme (until 2025)\n")
    memory.close()
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    old = os.environ.get("FSMEM_NOW")
    os.environ["FSMEM_NOW"] = NOW
    try:
        yield build(tmp_path_factory.mktemp("faces"))
    finally:
        if old is None:
            os.environ.pop("FSMEM_NOW", None)
        else:
            os.environ["FSMEM_NOW"] = old


# -- the words themselves ----------------------------------------------------------------------------------


def test_each_face_spells_a_continuation_and_a_call_its_own_way():
    with faces.speaking(faces.CLI):
        assert faces.ask(offset=20) == "--offset 20"
        assert faces.ask(outline=True, lines="41:") == "--outline --lines 41:"
        assert faces.call("read", path="people/Ada Lovelace.md", lines="A:B") == (
            "fsmem read 'people/Ada Lovelace.md' --lines A:B"
        )
        assert faces.call("init", directory="DIR", git=True) == "fsmem init --git DIR"
        assert faces.arg("max_tokens") == "--max-tokens" and faces.arg("path", "ls") == "PATH"
        assert faces.larger_budget() == "; ask again with a larger --max-tokens"
    with faces.speaking(faces.TOOLS, accepts=("query", "offset", "type")):
        assert faces.ask(offset=20) == "offset=20"
        assert faces.ask(outline=True, lines="41:") == 'outline=true, lines="41:"'
        assert faces.call("read", path="a.md", lines="A:B") == 'read(path="a.md", lines="A:B")'
        assert faces.offers("type") and not faces.offers("min_score") and faces.larger_budget() == ""
        assert faces.narrowing("search", ("type", "tag")) == ", or narrow with type"
    assert faces.current() == faces.PYTHON  # the block ended: the default again
    assert faces.ask(outline=True, lines="41:") == 'outline=True, lines="41:"'
    assert faces.call("read", path="a.md") == 'memory.read(path="a.md")'


def test_the_face_is_per_thread_so_concurrent_calls_keep_their_own_words():
    seen: dict[str, str] = {}
    entered, leave = threading.Event(), threading.Event()

    def tool_thread() -> None:
        with faces.speaking(faces.TOOLS):
            entered.set()
            leave.wait(5)
            seen["tool"] = faces.ask(offset=3)

    worker = threading.Thread(target=tool_thread)
    worker.start()
    entered.wait(5)
    with faces.speaking(faces.CLI):
        seen["cli"] = faces.ask(offset=3)
        leave.set()
        worker.join(5)
    assert seen == {"tool": "offset=3", "cli": "--offset 3"}


# -- the Python API ----------------------------------------------------------------------------------------


def test_the_python_api_speaks_in_keyword_arguments_and_they_page_on(root):
    memory = Memory(root)
    first = memory.ls("topics", max_results=2)
    text = first.to_text()
    assert text.splitlines()[-1] == (
        "[files 1-2 of 7; 5 left out by the result limit. Continue with offset=2, "
        "or narrow with path, type, tag or updated_after]"
    )
    again = memory.ls("topics", max_results=2, **keyword_next(text))
    assert [e.path for e in again.entries] == [e.path for e in memory.ls("topics").entries][2:4]
    cut = memory.read(LONG, max_tokens=80)
    following = {"lines": cut.next_lines, "expected_version": cut.version}  # the next part of this version
    assert keyword_next(cut.to_text()) == following and not FLAG.search(cut.to_text())
    assert memory.read(LONG, **keyword_next(cut.to_text()), max_tokens=80).start == cut.end + 1
    none = memory.search("zebra crossing quantum", max_results=1).to_text()
    assert none.endswith("try other words, grep for a name, or lower min_score")


# -- the tools, through the dispatcher ---------------------------------------------------------------------


def tiny(root: Path) -> Memory:
    return Memory(root, agent="tiny")


PAGED = [
    ("ls", {"path": "topics"}),
    ("grep", {"pattern": "needle"}),
    ("search", {"query": "invoices sent weekly"}),
    ("log", {}),
]


@pytest.mark.parametrize(("name", "arguments"), PAGED, ids=[p[0] for p in PAGED])
def test_a_cut_tool_answer_names_its_own_arguments_and_following_them_pages_on(root, name, arguments):
    memory = tiny(root)
    first = tools.call(memory, name, arguments)
    assert first.truncated and not first.is_error, first.text
    assert not FLAG.search(first.text) and "fsmem " not in first.text, first.text
    assert keyword_next(first.text) == first.next == {"offset": first.rows}
    assert set(keyword_next(first.text)) <= set(tools.definitions(memory)[0]["parameters"]["properties"])
    second = tools.call(memory, name, {**arguments, **keyword_next(first.text)})
    assert not second.is_error and second.rows >= 1
    whole = tools.call(Memory(root, agent="wide"), name, arguments)  # every row at once
    assert (first.paths + second.paths) == whole.paths[: first.rows + second.rows]


def test_search_over_a_tool_never_suggests_min_score_which_the_tool_lacks(root):
    answer = tools.call(tiny(root), "search", {"query": "invoices sent weekly"})
    assert "min_score" not in answer.text and "min-score" not in answer.text
    assert 'Read around a row with: read(path="PATH", lines="A:B")]' in answer.text
    none = tools.call(tiny(root), "search", {"query": "zebra crossing quantum"})
    assert not none.is_error and none.text.endswith("; try other words, or grep for a name")


@pytest.mark.parametrize("name", ["read", "show"])
def test_a_cut_read_or_show_names_lines_and_following_it_reads_on(root, name):
    memory = tiny(root)
    arguments = {"path": LONG, **({"at": "HEAD"} if name == "show" else {})}
    first = tools.call(memory, name, arguments)
    assert first.truncated and not FLAG.search(first.text), first.text
    follow = keyword_next(first.text)
    carried = {"lines", "expected_version"} if name == "read" else {"lines"}  # show is of a commit, unchanging
    assert follow is not None and follow == first.next and set(follow) == carried
    second = tools.call(memory, name, {**arguments, **follow})
    numbers = [int(m) for m in re.findall(r"^\s+(\d+)\t", first.text + "\n" + second.text, re.M)]
    assert numbers == list(range(1, len(numbers) + 1))  # nothing skipped, nothing repeated


def test_a_cut_outline_names_outline_and_lines_and_goes_on(root):
    memory = tiny(root)
    first = tools.call(memory, "read", {"path": LONG, "outline": True})
    assert first.truncated and 'next: outline=true, lines="' in first.text, first.text
    follow = keyword_next(first.text)
    second = tools.call(memory, "read", {"path": LONG, **follow})
    headings = re.findall(r"^## (Part \d+)", first.text + "\n" + second.text, re.M)
    assert headings == [f"Part {p}" for p in range(len(headings))] and len(headings) > 1


def test_hidden_superseded_and_a_bad_range_speak_in_tool_arguments(root):
    memory = Memory(root)
    hidden = tools.call(memory, "read", {"path": PERSON})
    assert "[2 superseded line(s) hidden; add include_superseded=true to see them]" in hidden.text
    shown = tools.call(memory, "read", {"path": PERSON, **keyword_next_add(hidden.text)})
    assert "Acme" in shown.text
    bad = tools.call(memory, "read", {"path": PERSON, "lines": "x:y"})
    assert bad.is_error and bad.text == "error: lines takes A:B, A: or A with whole line numbers, not 'x:y'"
    backwards = tools.call(memory, "read", {"path": PERSON, "lines": "5:2"})
    assert backwards.text == ("error: lines '5:2' is not a valid range (lines count from 1, and B must be >= A)")


def keyword_next_add(text: str) -> dict:
    """The arguments after `add ` in a note such as `add include_superseded=true to see them`."""
    found = re.search(r"add ([a-z_]+)=(true|\"[^\"]*\"|\d+)", text)
    assert found is not None, text
    return {found.group(1): json.loads(found.group(2))}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_tokens=st.integers(min_value=40, max_value=400), max_results=st.integers(min_value=1, max_value=9))
@example(max_tokens=47, max_results=1)  # four tries of `within` left this grep over budget: the last net cut it
def test_following_the_tool_continuation_yields_every_row_once(root, max_tokens, max_results):
    memory = Memory(root, agent="tiny")
    memory.budget = replace(memory.budget, max_tokens=max_tokens, max_results=max_results)
    for name, arguments in (("grep", {"pattern": "needle|line"}), ("ls", {})):
        whole = tools.call(Memory(root, agent="wide"), name, arguments).paths
        seen: list[str] = []
        follow: dict | None = {}
        for _ in range(200):
            answer = tools.call(memory, name, {**arguments, **(follow or {})})
            assert not answer.is_error and answer.tokens <= max_tokens, answer.text
            seen += answer.paths
            follow = keyword_next(answer.text)
            assert follow == answer.next
            if follow is None:
                break
        if seen != whole:  # only a budget too small for the next row stops short, and says so
            assert seen == whole[: len(seen)] and "too small" in answer.text, (name, answer.text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_tokens=st.integers(min_value=30, max_value=600))
def test_following_the_read_continuation_yields_every_line_once(root, max_tokens):
    memory = Memory(root, agent="tiny")
    memory.budget = replace(memory.budget, max_tokens=max_tokens)
    numbers: list[int] = []
    follow: dict | None = {}
    for _ in range(400):
        answer = tools.call(memory, "read", {"path": LONG, **(follow or {})})
        numbers += [int(m) for m in re.findall(r"^\s+(\d+)\t", answer.text, re.M)]
        follow = keyword_next(answer.text)
        if follow is None:
            break
    total = len((root / LONG).read_text().splitlines())
    if numbers != list(range(1, total + 1)):
        assert numbers == list(range(1, len(numbers) + 1)) and "too small" in answer.text, answer.text


# -- the CLI: its command lines run here (`cli_runner`), the first of each held to a real process's bytes ------


def passed_on() -> dict[str, str]:
    """PYTHONPATH, when set (to run these tests against another checkout of fsmem)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


def cli(root: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """The command line run here; with `process`, also as the `fsmem` script, which must print the same bytes."""
    env = {"FSMEM_NOW": NOW, "PATH": "/usr/bin:/bin", **passed_on()}
    if process:
        return cli_runner.same_as_a_process(["--root", str(root), *args], text=True, env=env)
    return cli_runner.run(["--root", str(root), *args], text=True, env=env)


CLI_PAGED = [
    ["ls", "topics", "--max-results", "2"],
    ["grep", "needle", "--max-results", "2"],
    ["search", "invoices sent weekly", "--max-results", "2"],
    ["log", "--max-results", "2"],
    ["read", LONG, "--max-tokens", "80"],
    ["show", LONG, "--at", "HEAD", "--max-tokens", "120"],  # its header names a commit: room for any id
    ["read", LONG, "--outline", "--max-tokens", "120"],
]


@pytest.mark.slow
@pytest.mark.parametrize("args", CLI_PAGED, ids=[" ".join(a[:1] + a[2:3]) for a in CLI_PAGED])
def test_the_cli_speaks_in_flags_and_following_them_pages_on(root, args):
    first = cli(root, *args, process=True)
    assert first.returncode == 0, first.stderr
    assert not KEYWORD.search(first.stdout) and "read(" not in first.stdout, first.stdout
    flags = flag_next(first.stdout)
    assert flags is not None and flags[0] in ("--offset", "--lines", "--outline"), first.stdout
    second = cli(root, *args, *flags)
    assert second.returncode == 0 and second.stdout != first.stdout, second.stderr
    if args[0] in ("read", "show"):
        pattern = r"^## (Part \d+)" if "--outline" in args else r"^\s+(\d+)\t"
        seen = re.findall(pattern, first.stdout + "\n" + second.stdout, re.M)
        expected = [f"Part {p}" for p in range(len(seen))] if "--outline" in args else list(range(1, len(seen) + 1))
        assert [s if "--outline" in args else int(s) for s in seen] == expected


@pytest.mark.slow
def test_cli_notes_and_errors_speak_in_flags(root):
    hidden = cli(root, "read", PERSON)
    assert "[2 superseded line(s) hidden; add --include-superseded to see them]" in hidden.stdout
    assert "Acme" in cli(root, "read", PERSON, "--include-superseded").stdout
    bad = cli(root, "read", PERSON, "--lines", "x:y", process=True)
    assert bad.returncode == 2
    assert bad.stderr == "fsmem: error: --lines takes A:B, A: or A with whole line numbers, not 'x:y'\n"
    search = cli(root, "search", "invoices sent weekly", "--max-results", "1").stdout
    assert "Read around a row with: fsmem read PATH --lines A:B]" in search and "min-score" in search


# -- MCP over stdio, and the HTTP server -------------------------------------------------------------------

mcp = pytest.importorskip("mcp")


def mcp_session(root: Path, actions):
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fsmem", "--root", str(root), "--agent", "tiny", "mcp"],
        env={"FSMEM_NOW": NOW, **passed_on()},
    )

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                return await actions(session)

    return anyio.run(main)


def check_mcp_answers(first, second, outline, hidden, bad) -> None:
    """What MCP answers must say, over stdio or HTTP: tool words in the text, the continuation as data."""
    texts = [r.content[0].text for r in (first, second, outline, hidden, bad)]
    for text in texts:
        assert not FLAG.search(text) and "fsmem " not in text, text
    assert first.structured_content == {"rows": 2, "truncated": True, "cut_by": "results", "next_offset": 2}
    assert keyword_next(texts[0]) == {"offset": 2}
    assert second.structured_content["rows"] >= 1 and not second.is_error
    assert outline.structured_content["truncated"] and keyword_next(texts[2]) == {
        "outline": True,
        "lines": outline.structured_content["next_lines"],
        "expected_version": outline.structured_content["next_expected_version"],
    }
    assert "add include_superseded=true to see them" in texts[3]
    assert bad.is_error and bad.structured_content is None
    assert texts[4] == "error: lines takes A:B, A: or A with whole line numbers, not 'x:y'"


async def mcp_calls(session):
    first = await session.call_tool("ls", {"path": "topics"})
    second = await session.call_tool("ls", {"path": "topics", "offset": first.structured_content["next_offset"]})
    outline = await session.call_tool("read", {"path": LONG, "outline": True})
    hidden = await session.call_tool("read", {"path": PERSON, "lines": "6:"})
    bad = await session.call_tool("read", {"path": PERSON, "lines": "x:y"})
    return first, second, outline, hidden, bad


@pytest.mark.slow
def test_mcp_over_stdio_answers_in_tool_words_with_the_continuation_as_structured_content(root):
    answers = mcp_session(root, mcp_calls)
    check_mcp_answers(*answers)
    first, second = answers[0], answers[1]
    assert first.content[0].text != second.content[0].text


@pytest.mark.slow
def test_the_http_server_answers_in_tool_words_with_the_continuation_as_structured_content(root, tmp_path):
    pytest.importorskip("uvicorn")
    from test_server_app import ServerProcess, session

    from fsmem.server.tokens import TokenStore

    store = TokenStore(tmp_path / "tokens.json")
    token = store.create(memory="team", agent="tiny").token
    server = ServerProcess("--memory", f"team={root}", "--tokens", str(tmp_path / "tokens.json"), tokens=store.path)
    try:
        answers = session(server.base + "/mcp", token, mcp_calls)
    finally:
        assert server.stop() == 0
    assert not isinstance(answers, BaseException), answers
    check_mcp_answers(*answers)


def test_history_refusals_over_a_tool_name_the_log_tool_not_the_command(root):
    memory = Memory(root)
    first = memory.log(max_results=100).entries[-1].commit  # the oldest: before the person's file was written
    missing = tools.call(memory, "show", {"path": PERSON, "at": first})
    assert missing.is_error and missing.text.endswith(f'; log(path="{PERSON}") lists its changes'), missing.text
    unknown = tools.call(memory, "show", {"path": PERSON, "at": "deadbeef"})
    assert unknown.text == "error: no commit 'deadbeef' in this memory's history; log() lists them"
    early = tools.call(memory, "show", {"path": PERSON, "at": "2001-01-01"})
    assert early.text == "error: no commit at or before 2001-01-01; the history starts later (see log())"
    with faces.speaking(faces.CLI):
        with pytest.raises(Exception, match=re.escape(f"; fsmem log {PERSON} lists its changes")):
            memory.show(PERSON, at=first)


def test_the_positional_table_is_the_clis_arguments():
    """`faces.call` spells a CLI call from the positional table made from the spec and the hand-written commands:
    every command's arguments, in order, and nothing else."""
    import click

    from fsmem.cli.app import cli
    from fsmem.faces import positional_table

    context = click.Context(cli)
    arguments = {}
    for name in cli.list_commands(context):
        command = cli.get_command(context, name)
        names = tuple(p.name for p in command.params if isinstance(p, click.Argument))
        if names:
            arguments[name] = names
    assert arguments == positional_table()
