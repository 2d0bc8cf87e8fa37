"""fsmem.tools: definitions, the dispatcher, budgets, read-only agents, the log, and the example agent loop."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Annotated, Any

import pytest
from scripted_model import ScriptedChatModel, Step

from fsmem import Memory
from fsmem.agents import tools
from fsmem.agents.registry import Reply, ToolArgument, tool, unregister
from fsmem.errors import FsmemError
from fsmem.spec import tool_names
from fsmem.store import retrieval_log
from fsmem.store.files import file_version

REPO = Path(__file__).resolve().parents[1]
NOW = "2026-11-30T10:00:00+00:00"


def build_memory(tmp_path: Path, extra_agents: str = "") -> Path:
    root = tmp_path / "memory"
    Memory.init(root)
    shutil.copytree(REPO / "examples" / "memory", root, dirs_exist_ok=True)
    if extra_agents:
        config = (root / "fsmem.yaml").read_text()
        config = config.replace("  agents:\n", "  agents:\n" + extra_agents, 1)
        (root / "fsmem.yaml").write_text(config)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the root except machine state, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".fsmem" not in p.relative_to(root).parts
    }


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    monkeypatch.delenv("FSMEM_SESSION", raising=False)
    return build_memory(tmp_path, "    tiny:\n      max_tokens: 60\n      max_results: 3\n")


def log_records(root: Path) -> list[dict[str, Any]]:
    return list(retrieval_log.records(root))


# -- definitions ------------------------------------------------------------------


def expected_names(memory: Memory, writes: bool = True) -> list[str]:
    """The tools the spec offers to this memory's caller (`fsmem.spec.tool_names`): log and show need history."""
    return tool_names(writes=writes, history=memory.history is not None)


def test_definitions_in_each_format(root):
    memory = Memory(root)
    neutral = tools.definitions(memory, format="json")
    assert [d["name"] for d in neutral] == expected_names(memory)
    openai = tools.definitions(memory, format="openai")
    anthropic = tools.definitions(memory, format="anthropic")
    for plain, oa, an in zip(neutral, openai, anthropic, strict=False):
        assert oa == {
            "type": "function",
            "function": {"name": plain["name"], "description": plain["description"], "parameters": plain["parameters"]},
        }
        assert an == {"name": plain["name"], "description": plain["description"], "input_schema": plain["parameters"]}
        schema = plain["parameters"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert all(prop.get("description") for prop in schema["properties"].values())
        assert set(schema["required"]) <= set(schema["properties"])
    assert json.loads(json.dumps(openai)) == openai  # plain JSON, nothing SDK-specific


def test_anthropic_definitions_validate_against_the_sdk_type(root):
    pytest.importorskip("anthropic", reason="needs the anthropic extra: pip install 'fsmem[anthropic]'")
    from anthropic.types import ToolParam
    from pydantic import TypeAdapter

    adapter = TypeAdapter(ToolParam)
    for definition in tools.definitions(Memory(root), format="anthropic"):
        assert adapter.validate_python(definition) == definition


def test_schemas_come_from_the_signatures(root):
    grep = tools.REGISTRY["grep"].parameters
    assert grep["required"] == ["pattern"]
    assert grep["properties"]["paths"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Only these files or folders, relative to the memory root; omit for the whole memory",
    }
    assert grep["properties"]["offset"]["minimum"] == 0 and grep["properties"]["offset"]["default"] == 0
    assert grep["properties"]["ignore_case"] == {
        "type": "boolean",
        "description": "Match regardless of case",
        "default": False,
    }
    assert tools.REGISTRY["write"].parameters["properties"]["set"]["type"] == "object"
    assert "max_tokens" not in grep["properties"]  # supplied by the dispatcher, never by the model


def test_descriptions_say_how_to_continue_after_a_cut():
    assert "offset N" in tools.REGISTRY["grep"].description
    assert "lines 'A:'" in tools.REGISTRY["read"].description
    assert "left out" in tools.REGISTRY["ls"].description
    assert "exactly once" in tools.REGISTRY["edit"].description


def test_unknown_format_is_an_error(root):
    with pytest.raises(FsmemError, match="unknown tool format 'xml'"):
        tools.definitions(Memory(root), format="xml")


# -- every tool through the dispatcher ------------------------------------------------


def test_list(root):
    answer = tools.call(Memory(root), "ls", {"path": "entities/people"})
    assert not answer.is_error
    assert answer.paths == ["entities/people/adam-smith.md", "entities/people/maria-lopez.md"]
    assert answer.rows == 2 and not answer.empty and not answer.truncated
    assert answer.text.splitlines()[-1] == "[files 1-2 of 2]"


def test_grep(root):
    answer = tools.call(Memory(root), "grep", {"pattern": "proration", "ignore_case": True})
    assert answer.paths == ["entities/people/adam-smith.md:23", "topics/billing.md:3", "topics/billing.md:15"]
    assert answer.rows == 3 and answer.text.splitlines()[-1] == "[matches 1-3 of 3]"


def test_grep_nothing_found_is_empty_not_an_error(root):
    answer = tools.call(Memory(root), "grep", {"pattern": "zebra-unicorn"})
    assert answer.text == "(no matches)" and answer.empty and not answer.is_error and answer.rows == 0


def test_read_with_arguments_as_json_text(root):
    answer = tools.call(Memory(root), "read", '{"path": "topics/billing.md", "section": "Facts"}')
    assert answer.paths == ["topics/billing.md"]
    assert "- payment terms: net 30" in answer.text
    assert answer.rows == 6  # the heading, four facts and the blank line after them


def test_note_write_edit(root):
    memory = Memory(root)
    noted = tools.call(memory, "note", {"text": "- employer: Globex", "subject": "people/Adam Smith"})
    note = f"sessions/2026/11/30/default-{memory.host_id}.md"
    assert noted.text == f"noted in {note} at line 10 (new file)"
    note_text = (root / note).read_text()
    assert note_text.endswith("## people/Adam Smith\n- employer: Globex (as of 2026-11-30T10:00:00Z)\n")

    written = tools.call(
        memory,
        "write",
        {
            "path": "topics/support.md",
            "body": "# Support\n\n- hours: 9-17 CET\n",
            "set": {"description": "Support hours"},
        },
    )
    version = file_version(root / "topics/support.md")
    assert written.text == f"wrote topics/support.md (new file); version {version}"
    assert written.paths == ["topics/support.md"]
    assert "description: Support hours" in (root / "topics/support.md").read_text()

    edited = tools.call(memory, "edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"})
    version = file_version(root / "topics/billing.md")
    assert edited.text == f"edited topics/billing.md at line 17; version {version}"
    assert edited.paths == ["topics/billing.md:17"]
    assert "- payment terms: net 45" in (root / "topics/billing.md").read_text()


def test_session_defaults_to_the_agent_name(root):
    memory = Memory(root, agent="researcher")
    answer = tools.call(memory, "note", {"text": "checked billing"})
    assert answer.paths == [f"sessions/2026/11/30/researcher-{memory.host_id}.md:10"]  # after agent: researcher
    assert "\nagent: researcher\n" in (root / f"sessions/2026/11/30/researcher-{memory.host_id}.md").read_text()


# -- bad input: a clear error and no change on disk --------------------------------------

BAD_CALLS = [
    ("read", {"path": "../outside.md"}, "error: path '../outside.md' escapes the memory root"),
    ("write", {"path": "../../etc/x.md", "body": "x"}, "error: path '../../etc/x.md' escapes the memory root"),
    (
        "edit",
        {"path": "/etc/passwd", "old": "a", "new": "b"},
        "error: path '/etc/passwd' is absolute; give a path relative to the memory root, such as 'topics/billing.md'",
    ),
    (
        "read",
        {"path": ".fsmem/logs/retrieval.jsonl"},
        "error: path '.fsmem/logs/retrieval.jsonl' is inside .fsmem/, which holds machine state, not memory",
    ),
    (
        "edit",
        {"path": "topics/billing.md", "old": "- ", "new": "* "},
        "error: the old text matches 5 times in topics/billing.md; include more surrounding text so it matches once",
    ),
    (
        "edit",
        {"path": "topics/billing.md", "old": "net 90", "new": "net 45"},
        "error: the old text was not found in topics/billing.md; read the file and copy the text exactly",
    ),
    (
        "write",
        {"path": "topics/notes.txt", "body": "x"},
        "error: path 'topics/notes.txt' is not a memory file; memory files end in .md",
    ),
    ("read", {"path": "topics/nope.md"}, "error: topics/nope.md does not exist; list files with ls"),
    (
        "grep",
        {},
        "error: grep needs the argument 'pattern' (Regular expression (ripgrep syntax), or plain text with fixed_strings)",
    ),
    ("grep", {"pattern": 42}, "error: argument 'pattern' must be a string, not integer"),
    ("grep", {"pattern": "a", "offset": -1}, "error: argument 'offset' must be at least 0"),
    ("grep", {"pattern": "a", "offset": True}, "error: argument 'offset' must be an integer, not boolean"),
    ("grep", {"pattern": "a", "paths": "topics"}, "error: argument 'paths' must be an array, not string"),
    ("grep", {"pattern": "a", "paths": [1]}, "error: argument 'paths' must be an array of strings"),
    ("grep", {"pattern": "(unclosed"}, None),  # ripgrep's own message; checked below
    (
        "ls",
        {"folder": "topics"},
        "error: unknown argument 'folder' for ls; its arguments are: path, depth, type, tag, updated_after, include_superseded, offset, max_results",
    ),
    (
        "note",
        {"text": "x", "subject": "a\nb"},
        "error: subject must be a single line, such as 'people/Adam Smith' or 'topic/Billing'",
    ),
    (
        "write",
        "{not json",
        "error: the arguments are not valid JSON (Expecting property name enclosed in double quotes "
        "at character 1); send one JSON object",
    ),
    (
        "edit",
        ["topics/billing.md"],
        'error: the arguments must be a JSON object such as {"path": "topics/billing.md"}, not array',
    ),
    ("delete", {"path": "topics/billing.md"}, None),
]


@pytest.mark.parametrize("name,arguments,message", BAD_CALLS)
def test_bad_calls_answer_with_an_error_and_change_nothing(root, name, arguments, message):
    memory = Memory(root)
    before = snapshot(root)
    answer = tools.call(memory, name, arguments)
    assert answer.is_error and answer.rows == 0 and not answer.empty
    if message is not None:
        assert answer.text == message
    assert snapshot(root) == before
    assert log_records(root)[-1]["error"] == answer.text


def test_invalid_regex_and_unknown_tool_messages(root):
    memory = Memory(root)
    regex = tools.call(memory, "grep", {"pattern": "(unclosed"})
    assert regex.text.startswith("error: invalid regular expression '(unclosed'")
    assert regex.text.endswith("use -F to search for the text as is")
    unknown = tools.call(memory, "delete", {})
    names = ", ".join(expected_names(memory))
    assert unknown.text == f"error: unknown tool 'delete'; the tools are: {names}"


# -- read-only agents ---------------------------------------------------------------------


def test_read_only_agent_is_not_offered_write_tools_and_is_refused(root):
    reviewer = Memory(root, agent="reviewer")
    assert [d["name"] for d in tools.definitions(reviewer)] == expected_names(reviewer, writes=False)
    before = snapshot(root)
    for name, arguments in [
        ("note", {"text": "x"}),
        ("write", {"path": "a.md", "body": "x"}),
        ("edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"}),
    ]:
        answer = tools.call(reviewer, name, arguments)
        readers = ", ".join(expected_names(reviewer, writes=False))
        assert answer.text == f"error: agent 'reviewer' is read-only; it may use {readers}, not {name}"
    assert snapshot(root) == before


def test_read_only_switch_makes_memory_itself_refuse_writes(root):
    memory = tools.read_only(Memory(root))
    assert "write" not in [d["name"] for d in tools.definitions(memory)]
    with pytest.raises(FsmemError, match="read-only"):
        memory.write("topics/x.md", "x")


# -- budgets ----------------------------------------------------------------------------------


def test_answers_never_exceed_the_agents_budget(root):
    (root / "topics" / "long.md").write_text(
        "---\ntitle: Long\n---\n" + "".join(f"- fact {i}: value number {i} with some more words\n" for i in range(3000))
    )
    calls = [
        ("ls", {}),
        ("grep", {"pattern": "fact"}),
        ("grep", {"pattern": "e", "context_lines": 3}),
        ("read", {"path": "topics/long.md"}),
        ("read", {"path": "topics/long.md", "outline": True}),
        ("read", {"path": "topics/long.md", "lines": "2000:"}),
        ("grep", {"pattern": "fact", "offset": 2990}),
        ("edit", {"path": "topics/long.md", "old": "- fact", "new": "x"}),  # an error text, also bounded
        ("ls", {"folder": "x" * 500}),
    ]
    for agent in ("tiny", "reviewer", None):
        memory = Memory(root, agent=agent)
        for name, arguments in calls:
            answer = tools.call(memory, name, arguments)
            assert answer.tokens == memory.tokens.count(answer.text)
            assert answer.tokens <= memory.budget.max_tokens, (agent, name, answer.text)
            if name in ("ls", "grep") and not answer.is_error:
                assert answer.rows <= memory.budget.max_results
    tiny = Memory(root, agent="tiny")
    page = tools.call(tiny, "read", {"path": "topics/long.md"})
    assert page.truncated and 'next: lines="' in page.text and "--" not in page.text.splitlines()[-1]
    hits = tools.call(tiny, "grep", {"pattern": "fact [0-9]+:", "paths": ["topics/long.md"]})
    assert hits.truncated and 1 <= hits.rows <= 3 and f"Continue with offset={hits.rows}," in hits.text


def test_fit_cuts_whole_lines_and_says_so(root):
    memory = Memory(root)
    text = "\n".join(f"line {i} of a long answer" for i in range(100))
    cut, was_cut = tools.fit(memory, text, 50)
    assert was_cut and memory.tokens.count(cut) <= 50
    kept = cut.splitlines()
    assert kept[:-1] == text.splitlines()[: len(kept) - 1]
    assert kept[-1] == f"[answer cut at the 50-token budget after line {len(kept) - 1} of 100; ask for less]"
    assert tools.fit(memory, "short", 50) == ("short", False)


# -- the retrieval log ------------------------------------------------------------------------


def test_every_call_appends_one_record_with_the_agreed_fields(root):
    memory = Memory(root, agent="researcher")
    answers = [
        tools.call(memory, "grep", {"pattern": "proration", "ignore_case": True}),
        tools.call(memory, "read", {"path": "../x"}),
        tools.call(memory, "write", {"path": "topics/big.md", "body": "y" * 1000}),
    ]
    records = log_records(root)
    assert len(records) == 3
    for answer, record in zip(answers, records, strict=False):
        assert set(record) - {"error"} == {
            "time",
            "agent",
            "tool",
            "arguments",
            "paths",
            "rows",
            "tokens",
            "latency_ms",
            "truncated",
            "empty",
        }
        assert record["agent"] == "researcher" and record["tool"] == answer.tool
        assert (record["paths"], record["rows"], record["tokens"]) == (answer.paths, answer.rows, answer.tokens)
        assert (record["truncated"], record["empty"]) == (answer.truncated, answer.empty)
        assert record["latency_ms"] >= 0
    assert records[0]["arguments"] == {"pattern": "proration", "ignore_case": True}
    assert records[1]["error"] == "error: path '../x' escapes the memory root"
    assert records[2]["arguments"]["body"] == "y" * 200 + "… (1000 chars)"  # bodies are not copied whole


# -- tools registered elsewhere: the path the search tool takes -------------------------------------


@pytest.fixture
def frobnicate_tool():
    @tool("frobnicate", requires="frobnicate")
    def frobnicate(
        memory: Memory, times: Annotated[int, ToolArgument("How often", minimum=1)], *, max_tokens: int
    ) -> Reply:
        """Frobnicate the memory."""
        return Reply(memory.frobnicate() * times, rows=times)

    yield
    unregister("frobnicate")


def test_a_tool_is_offered_only_where_memory_has_the_method_it_needs(root, frobnicate_tool):
    class Frobnicating(Memory):
        def frobnicate(self):
            return "frob "

    plain, frob = Memory(root), Frobnicating(root)
    assert "frobnicate" not in [d["name"] for d in tools.definitions(plain)]
    definition = [d for d in tools.definitions(frob) if d["name"] == "frobnicate"]
    assert definition == [
        {
            "name": "frobnicate",
            "description": "Frobnicate the memory.",
            "writes": False,
            "parameters": {
                "type": "object",
                "properties": {"times": {"type": "integer", "description": "How often", "minimum": 1}},
                "required": ["times"],
                "additionalProperties": False,
            },
        }
    ]
    assert tools.call(frob, "frobnicate", {"times": 2}).text == "frob frob "
    assert tools.call(frob, "frobnicate", {"times": 0}).text == "error: argument 'times' must be at least 1"
    assert tools.call(plain, "frobnicate", {"times": 2}).text.startswith("error: unknown tool 'frobnicate'")


def test_an_operation_tool_leaves_its_limits_to_memorys_one_check_and_says_them_in_its_schema(root):
    """The dispatcher checks a tool call's shape (names, JSON types); the limits the spec declares (minimum,
    choices) are checked once, by `Memory`'s method the tool calls, in the tools' words."""
    from fsmem.agents.registry import REGISTRY, validate
    from fsmem.spec import declared
    from fsmem.spec.schema import limits

    memory = Memory(root)
    declared_limits = limits(op for op in declared().values() if op.tool)
    for name, params in declared_limits.items():
        if not REGISTRY[name].available(memory):
            continue  # log: a memory with history
        for param, found in params.items():
            if param not in REGISTRY[name].parameters["properties"]:
                continue  # not on the tool face (search's min_score)
            assert {k: REGISTRY[name].parameters["properties"][param][k] for k in found} == found
            if "minimum" in found:
                beyond, says = found["minimum"] - 1, f"at least {found['minimum']}"
            else:
                beyond, says = "no-such-choice", f"one of: {', '.join(found['enum'])}"
            arguments = {"pattern": "a", "query": "a", "path": "topics/billing.md", "subject": "people/Ann"}
            arguments = {k: v for k, v in arguments.items() if k in REGISTRY[name].parameters["properties"]}
            assert validate(REGISTRY[name], {**arguments, param: beyond}) is None
            answer = tools.call(memory, name, {**arguments, param: beyond})
            assert (answer.is_error, answer.text) == (True, f"error: argument '{param}' must be {says}")
    found = {(n, p) for n, params in declared_limits.items() for p in params}
    assert {("grep", "context_lines"), ("ls", "type")} <= found


def test_search_tool_ranks_real_rows_within_the_budget_and_says_when_nothing_is_relevant(root):
    memory = Memory(root, agent="researcher")
    assert "search" in [d["name"] for d in tools.definitions(memory)]
    found = tools.call(memory, "search", {"query": "payment terms", "max_results": 3})
    assert not found.is_error and not found.empty
    assert found.paths[0] == "topics/billing.md:17"
    assert "- payment terms: net 30" in found.text
    assert 1 <= found.rows <= 3
    nothing = tools.call(memory, "search", {"query": "zebra unicorn spaceship"})
    assert nothing.empty and nothing.rows == 0 and "no relevant memory" in nothing.text


def test_search_tool_says_when_the_budget_not_the_relevance_left_nothing(root):
    tiny = Memory(root, agent="tiny")  # max_tokens 60, of which the trailer reserve takes most
    answer = tools.call(tiny, "search", {"query": "payment terms"})
    assert answer.empty and answer.tokens <= 60
    assert "not even the best one fits the budget" in answer.text
    assert "no relevant memory" not in answer.text


# -- the example agent loop, driven by a scripted model ------------------------------------------


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openai_example_loop_with_a_scripted_model(root):
    def contains(*parts):
        def check(text):
            for part in parts:
                assert part in text, (part, text)

        return check

    model = ScriptedChatModel(
        steps=[
            Step("ls", {"path": "entities/people"}, contains("entities/people/adam-smith.md", "[files 1-2 of 2]")),
            Step("grep", '{"pattern": "payment terms"}', contains("topics/billing.md:", "17:- payment terms: net 30")),
            Step("read", {"path": "topics/billing.md", "lines": "14:17"}, contains("    17\t- payment terms: net 30")),
            Step("read", {"path": "../secrets.md"}, contains("error: path '../secrets.md' escapes the memory root")),
            Step(
                "note",
                {"text": "- payment terms: net 30 confirmed", "subject": "topic/Billing"},
                contains("noted in sessions/2026/11/30/researcher-"),
            ),
            Step(
                "edit",
                {"path": "topics/billing.md", "old": "- ", "new": "* "},
                contains("error: the old text matches 5 times in topics/billing.md"),
            ),
        ],
        final="Acme pays net 30 (topics/billing.md).",
    )
    example = load_example("openai_agent")
    memory = Memory(root, agent="researcher")
    assert example.run(model, memory, "What are the payment terms?") == "Acme pays net 30 (topics/billing.md)."
    assert len(model.answers) == 6
    first = model.requests[0]
    assert first["tools"] == tools.definitions(memory, format="openai")
    assert "## profile/team.md" in first["messages"][0]["content"]  # the pre-injected context
    assert [r["tool"] for r in log_records(root)] == ["ls", "grep", "read", "read", "note", "edit"]


def test_a_search_through_the_dispatcher_is_logged_once(root):
    """One call, one record: tools.call logs it and Memory.search, nested inside, does not log it again."""
    memory = Memory(root)
    answer = tools.call(memory, "search", {"query": "proration", "max_results": 2})
    assert not answer.is_error and answer.rows >= 1
    records = log_records(root)
    assert [r["tool"] for r in records] == ["search"]
    assert records[0]["rows"] == answer.rows and records[0]["tokens"] == answer.tokens
    memory.search("proration")  # the Python API is a face of its own: logged once too
    assert [r["tool"] for r in log_records(root)] == ["search", "search"]
