"""fsmem.spec: each declaration agrees with its function, and the faces offer only what can succeed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from fsmem import Memory
from fsmem.agents import tools
from fsmem.spec import REQUIRED, declared, tool_names
from fsmem.spec.check import problems

NOW = "2026-11-30T10:00:00+00:00"


@pytest.mark.parametrize("name", sorted(declared()))
def test_every_declaration_matches_its_functions_signature(name):
    assert problems(declared()[name]) == []


def test_a_declaration_that_drifts_from_its_function_is_named():
    grep = declared()["grep"]
    context = grep.param("context_lines")
    drifted = [
        dataclasses.replace(grep, params=grep.params[:-1]),
        dataclasses.replace(grep, params=tuple(p.but(default=2) if p is context else p for p in grep.params)),
        dataclasses.replace(grep, params=tuple(p.but(kind="str") if p is context else p for p in grep.params)),
        dataclasses.replace(grep, params=tuple(p.but(default=REQUIRED) if p is context else p for p in grep.params)),
    ]
    found = [problems(op) for op in drifted]
    assert found == [
        [
            "grep: the function takes ['pattern', 'paths', 'ignore_case', 'fixed_strings', 'word', 'context_lines', "
            "'type', 'tag', 'updated_after', 'include_superseded', 'as_of', 'offset', 'max_results', 'max_tokens'], "
            "the spec declares ['pattern', 'paths', 'ignore_case', 'fixed_strings', 'word', 'context_lines', 'type', "
            "'tag', 'updated_after', 'include_superseded', 'as_of', 'offset', 'max_results']"
        ],
        ["grep(context_lines): the default is 0, the spec says 2"],
        ["grep(context_lines): the function takes a whole number, not the spec's str"],
        ["grep(context_lines): required in one and not the other"],
    ]


def test_importing_the_specs_loads_no_face_and_no_operation():
    probe = (
        "import sys, fsmem.spec.operations, fsmem.spec.schema; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'yaml', 'mcp') "
        "or m.startswith(('fsmem.operations', 'fsmem.cli', 'fsmem.agents', 'fsmem.memory'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def names(memory: Memory) -> list[str]:
    return [t.name for t in tools.offered(memory)]


@pytest.fixture
def memory(tmp_path, monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)
    return Memory.init(tmp_path / "mem", git=True)


def test_a_caller_is_offered_only_the_tools_that_can_succeed_for_it(memory):
    everything = tool_names()
    assert names(memory) == everything and {"ls", "note", "log"} <= set(everything)
    assert names(tools.read_only(Memory(memory.root))) == tool_names(writes=False)
    assert names(Memory(memory.root, scope=["topics/"])) == [n for n in everything if n != "note"]
    for reaching in (["topics/", "sessions/"], ["sessions/2026/11/30"], ["sessions/2026"]):
        assert "note" in names(Memory(memory.root, scope=reaching)), reaching
    assert "note" not in names(Memory(memory.root, scope=["sessions/2026/11/29"]))
    assert names(Memory.init(memory.root.parent / "plain")) == tool_names(history=False)  # no log, no show


def test_a_tool_left_out_for_a_scope_still_answers_why_when_called(memory):
    scoped = Memory(memory.root, scope=["topics/"])
    answer = tools.call(scoped, "note", {"text": "- employer: Globex"})
    assert answer.is_error and "is outside this agent's scope (topics/)" in answer.text


def test_mcp_lists_each_tool_with_what_it_changes(memory):
    listed = {t["name"]: t.get("annotations") for t in tools.mcp_tools(memory)}
    reads = {"readOnlyHint": True, "openWorldHint": False}
    readers = tool_names(writes=False)
    assert {name: listed[name] for name in readers} == dict.fromkeys(readers, reads)
    writer = {"readOnlyHint": False, "openWorldHint": False}
    assert listed["note"] == {**writer, "destructiveHint": False, "idempotentHint": False}
    assert listed["write"] == {**writer, "destructiveHint": True, "idempotentHint": True}
    assert listed["edit"] == {**writer, "destructiveHint": True, "idempotentHint": False}
