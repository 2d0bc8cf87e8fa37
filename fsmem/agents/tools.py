"""The agent-facing tools: their definitions for each SDK, and the dispatcher that runs them.

The tools themselves (`fsmem.spec.tool_names()`) are declared once, with
every other operation, in `fsmem.spec`, and made tools by
`fsmem.agents.builtin`; the OpenAI and Anthropic exports, `fsmem
tools`, the MCP server and `fsmem serve` all read the same registry, and offer
a caller only the tools that can succeed for it (`offered`).

`call(memory, name, arguments)` validates the arguments and never raises on
bad input: a model gets an error text it can act on, and nothing on disk
changes. Every answer fits the calling agent's token budget, and every call,
good or bad, appends one record to the retrieval log.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fsmem import faces
from fsmem.agents import (
    builtin,  # noqa: F401  (registers the built-in tools)
    jsonrpc,
)
from fsmem.agents.registry import FORMATS, REGISTRY, Reply, Tool, json_type_name, validate
from fsmem.budget import CUT_BY_TOKENS, content_budget, echo, fit_text, within
from fsmem.errors import FsmemError, InvalidArgument, ReadOnly, translated
from fsmem.memory import Memory
from fsmem.store import retrieval_log
from fsmem.store.paths import text_problem


@dataclass
class ToolAnswer:
    """The dispatcher's answer: the text a model reads, plus the figures the log records."""

    tool: str
    text: str
    tokens: int
    rows: int = 0
    paths: list[str] = field(default_factory=list)
    truncated: bool = False
    empty: bool = False
    is_error: bool = False
    next: dict[str, Any] | None = None  # the arguments to change for the next page (`{"offset": 20}`), or None
    cut_by: str | None = None  # what cut it, when truncated: "tokens", "results", "read_limit"

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        return self.text

    def structured(self) -> dict[str, Any] | None:
        """The continuation as data, for MCP's `structuredContent`: `{"truncated": true, "cut_by": "tokens",
        "next_offset": 20}` (call again with the same arguments and `offset` 20); None for an error."""
        if self.is_error:
            return None
        data: dict[str, Any] = {"rows": self.rows, "truncated": self.truncated}
        if self.truncated and self.cut_by is not None:
            data["cut_by"] = self.cut_by
        data.update({f"next_{name}": value for name, value in (self.next or {}).items()})
        return data


# -- definitions and the dispatcher ---------------------------------------------


def offered(memory: Memory) -> list[Tool]:
    """The tools that can succeed for this memory's agent: no writer for a read-only agent or token, no tool
    whose operation works on the whole memory for a scoped one, and no note when today's sessions/ folder is
    out of its scope (`--path topics/`)."""
    return [t for t in REGISTRY.values() if t.available(memory) and can_succeed(t, memory)]


def can_succeed(tool_: Tool, memory: Memory) -> bool:
    """Whether what `tool_`'s operation needs (`fsmem.spec.NEEDS`) is within this agent's rights and scope."""
    if tool_.writes and memory.budget.read_only:
        return False
    scope = memory.scope
    if scope is None:
        return True
    if "whole" in tool_.needs:
        return False
    return "sessions" not in tool_.needs or scope.contains(todays_sessions())


def todays_sessions() -> str:
    """The folder today's session notes go to (`sessions/YYYY/MM/DD`), by fsmem's clock."""
    from fsmem import format as fmt

    when = fmt.parse_timestamp(fmt.now_iso())
    assert when is not None
    return f"sessions/{when.year:04d}/{when:%m}/{when:%d}"  # %Y gives year 1 as "1"


def mcp_tools(memory: Memory) -> list[dict[str, Any]]:
    """The offered tools as MCP lists them: name, description, input schema and annotations (MCP's spelling)."""
    listed = []
    for entry in offered(memory):
        tool_ = {"name": entry.name, "description": entry.description, "inputSchema": entry.parameters}
        if entry.annotations is not None:
            tool_["annotations"] = entry.annotations
        if entry.output_schema is not None:
            tool_["outputSchema"] = entry.output_schema
        listed.append(tool_)
    return listed


def definitions(memory: Memory, format: str = "json") -> list[dict[str, Any]]:
    """Tool definitions for `memory`'s agent: `openai` (Chat Completions `tools=`),
    `anthropic` (Messages `tools=`) or `json` (fsmem's neutral form)."""
    if format not in FORMATS:
        raise FsmemError(f"unknown tool format {format!r}; choose one of: {', '.join(FORMATS)}")
    return [t.definition(format) for t in offered(memory)]


def read_only(memory: Memory) -> Memory:
    """Make `memory` refuse every write (its own check, not only the tool list); returns it."""
    memory.budget = replace(memory.budget, read_only=True)
    return memory


def call(memory: Memory, name: str, arguments: dict[str, Any] | str | None = None) -> ToolAnswer:
    """Run tool `name` with `arguments` (a dict, or the JSON text an SDK hands over).

    Bad input never raises: the answer is an error text (`is_error`) a model
    can act on, and nothing on disk changes. The answer fits the agent's token
    budget, and the call is appended to the retrieval log once (a tool whose
    `Memory` method logs too, such as search, is not logged twice). It speaks
    the tools' words (`offset=20`), set here, in the thread that runs the call.
    """
    with faces.speaking(faces.TOOLS, accepts=()):
        return _call(memory, name, arguments)


def _call(memory: Memory, name: str, arguments: dict[str, Any] | str | None) -> ToolAnswer:
    logged_name = name if isinstance(name, str) else repr(name)
    decoded = _decoded(arguments)
    deep = decoded is _TOO_DEEP or jsonrpc.nested_deeper_than(decoded, jsonrpc.MAX_DEPTH)
    logged_arguments = {"arguments": f"nested more than {jsonrpc.MAX_DEPTH} levels"} if deep else decoded
    with retrieval_log.LoggedCall(
        memory.root, agent=memory.agent, tool=logged_name, arguments=logged_arguments
    ) as logged:
        is_error = False
        try:
            if deep:  # walked without recursion; nothing below (the checks, the log) may recurse through it
                raise InvalidArgument(
                    f"the arguments are nested more than {jsonrpc.MAX_DEPTH} levels of arrays and objects; "
                    "send flatter values"
                )
            reply = _run(memory, name, arguments)
        except Exception as exc:  # the dispatcher's one boundary: never raise to the model's harness
            error = translated(exc, memory.root)
            text = str(error) if error is not None else f"{logged_name} failed: {type(exc).__name__}: {exc}"
            reply, is_error = Reply(f"error: {hide_host_paths(text, memory.root)}"), True
        # Whatever the input held, the answer is text that encodes as UTF-8 (a lone surrogate is escaped).
        safe = reply.text.encode("utf-8", "backslashreplace").decode("utf-8")
        text, cut = fit(memory, safe, memory.budget.max_tokens)
        answer = ToolAnswer(
            tool=logged_name,
            text=text,
            tokens=memory.tokens.count(text),
            rows=reply.rows,
            paths=reply.paths,
            truncated=reply.truncated or cut,
            empty=reply.empty,
            is_error=is_error,
            next=None if cut else reply.next,  # a text cut by the last net shows fewer rows than the reply
            cut_by=CUT_BY_TOKENS if cut else reply.cut_by,
        )
        logged.done(
            paths=answer.paths,
            rows=answer.rows,
            tokens=answer.tokens,
            truncated=answer.truncated,
            empty=answer.empty,
            error=answer.text if is_error else None,
        )
    return answer


@functools.cache
def _host_places() -> tuple[str, ...]:
    """Folders of this host that an error could name and an agent has no business knowing: where Python and
    fsmem are installed, and the home folder. Longest first."""
    found = {sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(sys.executable)}
    found |= {sysconfig.get_path(key) for key in ("scripts", "purelib", "platlib", "stdlib")}
    found |= {str(Path(__file__).resolve().parents[1]), os.path.expanduser("~")}
    kept = set()
    for place in filter(None, found):
        for spelling in (place, os.path.realpath(place)):
            if spelling.count(os.sep) >= 1 and spelling.strip(os.sep):
                kept.add(spelling.rstrip(os.sep))
    return tuple(sorted(kept, key=len, reverse=True))


def hide_host_paths(text: str, root: Path) -> str:
    """`text` (an error for an agent) without a path of the host: paths in the memory become memory-relative,
    the memory's own folder 'the memory', and a path in the install, home or temporary folder '<host path>'."""
    for spelling in dict.fromkeys((str(root), os.path.realpath(root))):
        if spelling.strip(os.sep) and spelling in text:
            text = text.replace(spelling + os.sep, "")
            text = re.sub(re.escape(spelling) + r"(?=$|[\s'\"),;:])", "the memory", text)
    for place in _host_places():
        if place in text:
            text = re.sub(re.escape(place) + r"(?=$|[/\s'\"),;:])(?:/[^\s'\"),;]*)?", "<host path>", text)
    return text


def _check_arguments(value: Any, where: str = "") -> None:
    """Refuse, at the door, any string argument (or key) holding a NUL byte or a lone surrogate.

    Not a part of the argument check (`fsmem.arguments`): that one judges the declared arguments of a method,
    this one whatever JSON a model sent, unknown names, nested keys and the values of a plugin's tool included,
    before any of it is named in an answer or looked up."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise InvalidArgument(f"argument {where or 'text'!r} {problem}; send plain text")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _check_arguments(key, where)
            _check_arguments(inner, where or (key if isinstance(key, str) and not text_problem(key) else ""))
    elif isinstance(value, (list, tuple)):
        for inner in value:
            _check_arguments(inner, where)


def _run(memory: Memory, name: str, arguments: dict[str, Any] | str | None) -> Reply:
    if not isinstance(name, str) or text_problem(name):
        raise InvalidArgument("the tool name must be plain text")
    parsed = _parse_arguments(arguments)
    _check_arguments(parsed)
    tool_ = REGISTRY.get(name)
    if tool_ is None or not tool_.available(memory):
        names = ", ".join(t.name for t in offered(memory))
        raise InvalidArgument(f"unknown tool {echo(name)}; the tools are: {names}")
    if tool_.writes and memory.budget.read_only:
        who = f"agent {memory.agent!r}" if memory.agent else "this agent"
        readers = ", ".join(t.name for t in offered(memory))
        raise ReadOnly(f"{who} is read-only; it may use {readers}, not {name}")
    problem = validate(tool_, parsed)
    if problem:
        raise InvalidArgument(problem)
    given = {key: value for key, value in parsed.items() if value is not None}
    budget = memory.budget.max_tokens
    with faces.speaking(faces.TOOLS, accepts=tool_.parameters.get("properties", {})):
        if tool_.writes:  # a write is done once; its short answer is cut by the last net if need be
            return tool_.function(memory, **given, max_tokens=content_budget(budget))
        reply, _ = within(
            lambda room: tool_.function(memory, **given, max_tokens=room),
            lambda r: r.text,
            memory.tokens.count,
            budget,
        )
    return reply


def _parse_arguments(arguments: dict[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(
                f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}); send one JSON object"
            ) from None
        except ValueError as exc:  # a number of more digits than Python converts
            raise InvalidArgument(f"the arguments are not valid JSON ({exc}); send one JSON object") from None
    if not isinstance(arguments, dict):
        raise InvalidArgument(
            f'the arguments must be a JSON object such as {{"path": "topics/billing.md"}}, '
            f"not {json_type_name(arguments)}"
        )
    return arguments


def fit(memory: Memory, text: str, max_tokens: int) -> tuple[str, bool]:
    """`text` cut in whole lines to `max_tokens`, with a note saying so; (text, was_cut)."""
    return fit_text(memory.tokens.count, memory.tokens.truncate, text, max_tokens)


_TOO_DEEP = object()  # arguments given as JSON text too deep for Python's parser


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except RecursionError:
            return _TOO_DEEP
        except ValueError:  # not JSON, or a number of more digits than Python converts: refused by the checks
            return arguments
    return arguments
