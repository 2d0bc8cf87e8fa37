"""The tool registry: every tool's name, description and schema, declared once, and the check of its arguments.

fsmem's own tools are generated from the operation declarations
(`fsmem.agents.builtin`) and registered with `register`; a plugin's tool is a
plain typed function, registered with `@tool`: its description is the
docstring (written for a model: what it does, its limits, when to use it, how
to continue after a cut) and its JSON schema comes from the signature, where
each argument the model supplies is `Annotated[type, ToolArgument("what it is")]`.
`validate` checks arguments against the schema and words every problem so a
model can fix its next call. The limits of an operation's tool (`minimum`,
`enum`) are left to `Memory`'s argument check, which holds every face to them
(`fsmem.arguments`); a plugin's tool has no such method, and they are checked here,
by the same function, in the same words.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from fsmem.arguments import beyond
from fsmem.errors import FsmemError

if TYPE_CHECKING:
    from fsmem.memory import Memory

FORMATS = ("openai", "anthropic", "json")


@dataclass(frozen=True)
class ToolArgument:
    """Schema facts about one argument of a plugin's tool: its description and simple constraints.

    (An operation's parameter is `fsmem.spec.Param`; this one describes an argument of a plain function.)
    """

    description: str
    minimum: int | None = None


class Answer(Protocol):
    """What every answer of an operation says of itself, whatever its kind: the figures a tool call logs."""

    @property
    def rows(self) -> int: ...  # rows (lines, files, commits) shown
    @property
    def cited(self) -> list[str]: ...  # what they point at: paths, path:line, commits
    @property
    def truncated(self) -> bool: ...  # the budget or the row cap cut it
    @property
    def empty(self) -> bool: ...  # nothing was found
    def to_text(self) -> str: ...


@dataclass
class Reply:
    """What a tool function hands back: the text for the model and what it showed."""

    text: str
    rows: int = 0
    paths: list[str] = field(default_factory=list)
    truncated: bool = False
    empty: bool = False
    next: dict[str, Any] | None = None  # the arguments that change in the call that goes on (`{"offset": 20}`)
    cut_by: str | None = None  # what cut it, as its JSON says: "tokens", "results", "read_limit"

    @classmethod
    def of(cls, answer: Answer) -> Reply:
        next_arguments = getattr(answer, "next_arguments", None)  # a paged or cut answer's way on
        cut_by = getattr(answer, "cut_by", None) if answer.truncated else None
        return cls(answer.to_text(), answer.rows, answer.cited, answer.truncated, answer.empty, next_arguments, cut_by)


@dataclass(frozen=True)
class Tool:
    """One registered tool: the function, and the definition a model sees."""

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Reply]
    writes: bool = False
    requires: str | None = None  # a Memory method the tool needs, or a property that must be set (history)
    needs: frozenset[str] = frozenset()  # what its operation needs (`fsmem.spec.NEEDS`): the scope it must reach
    annotations: dict[str, bool] | None = None  # MCP's hints: read-only, destructive, idempotent
    output_schema: dict[str, Any] | None = None  # MCP's outputSchema: what its structured content holds
    memory_checks_limits: bool = False  # an operation's tool: `Memory`'s argument check holds its minimum and enum

    def available(self, memory: Memory) -> bool:
        if self.requires is None:
            return True
        needed = getattr(memory, self.requires, None)
        return callable(needed) or needed is not None

    def definition(self, format: str = "json") -> dict[str, Any]:
        """The definition as a plain dict, ready for the SDK named by `format`."""
        schema = json.loads(json.dumps(self.parameters))  # a copy the caller may change
        if format == "openai":
            return {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": schema},
            }
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": schema}
        if format == "json":
            return {"name": self.name, "description": self.description, "parameters": schema, "writes": self.writes}
        raise FsmemError(f"unknown tool format {format!r}; choose one of: {', '.join(FORMATS)}")


REGISTRY: dict[str, Tool] = {}


def tool(name: str | None = None, *, writes: bool = False, requires: str | None = None):
    """Register a function as an agent tool.

    The function takes `memory` first and `max_tokens` (the content budget the
    dispatcher grants) as a keyword; every other argument must be
    `Annotated[type, ToolArgument(...)]` and becomes a property of the JSON schema.
    """

    def decorate(function: Callable[..., Reply]) -> Callable[..., Reply]:
        register(
            Tool(
                name=name or function.__name__,
                description=inspect.cleandoc(function.__doc__ or ""),
                parameters=schema_for(function),
                function=function,
                writes=writes,
                requires=requires,
            )
        )
        return function

    return decorate


def register(entry: Tool) -> Tool:
    """Add a tool to the registry (the hook `@tool` and fsmem's own tools both use)."""
    REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


# -- schemas ---------------------------------------------------------------------


def schema_for(function: Callable[..., Any]) -> dict[str, Any]:
    """A JSON schema (type object) built from the function's annotated arguments."""
    hints = typing.get_type_hints(function, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        hint = hints.get(parameter.name)
        if typing.get_origin(hint) is not Annotated:
            continue  # memory and max_tokens: supplied by the dispatcher, not the model
        base, *extras = typing.get_args(hint)
        param = next((e for e in extras if isinstance(e, ToolArgument)), None)
        if param is None:
            continue
        prop = _type_schema(base)
        prop["description"] = param.description
        if param.minimum is not None:
            prop["minimum"] = param.minimum
        if parameter.default not in (inspect.Parameter.empty, None):
            prop["default"] = parameter.default
        properties[parameter.name] = prop
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _type_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return _type_schema(inner[0])
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(hint))}
    if origin is list:
        (item,) = typing.get_args(hint)
        return {"type": "array", "items": _type_schema(item)}
    if origin is dict or hint is dict:
        return {"type": "object"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON schema for {hint!r}")


_JSON_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
}


def json_type_name(value: Any) -> str:
    for name, kinds in (
        ("null", (type(None),)),
        ("boolean", (bool,)),
        ("integer", (int,)),
        ("number", (float,)),
        ("string", (str,)),
        ("array", (list,)),
        ("object", (dict,)),
    ):
        if isinstance(value, kinds):
            return name
    return type(value).__name__


def _check_value(name: str, value: Any, schema: dict[str, Any], limits: bool = True) -> str | None:
    """What is wrong with `value` for its property `schema`, its limits too unless `limits` is false."""
    expected = schema.get("type")
    if expected is None:
        return None
    ok = isinstance(value, _JSON_TYPES[expected]) and not (
        expected in ("integer", "number") and isinstance(value, bool)
    )
    if not ok:
        return f"argument '{name}' must be {_ARTICLE[expected]}, not {json_type_name(value)}"
    if limits and ("enum" in schema or "minimum" in schema):
        problem = beyond(name, value, schema)
        if problem is not None:
            return problem
    if expected == "array":
        item = schema["items"]
        for value_item in value:
            if _check_value(name, value_item, item):
                return f"argument '{name}' must be an array of {item['type']}s"
    return None


def validate(tool_: Tool, arguments: dict[str, Any]) -> str | None:
    """The first problem with `arguments` for this tool, worded for a model; None when valid. An operation's
    tool leaves the limits to `Memory`'s check, which its call reaches next."""
    schema = tool_.parameters
    properties = schema["properties"]
    for name in schema["required"]:
        if name not in arguments or arguments[name] is None:
            return f"{tool_.name} needs the argument '{name}' ({properties[name]['description']})"
    for name, value in arguments.items():
        if name not in properties:
            known = ", ".join(properties) or "none"
            return f"unknown argument '{name}' for {tool_.name}; its arguments are: {known}"
        if value is None:
            continue  # an optional argument sent as null means "not given"
        problem = _check_value(name, value, properties[name], limits=not tool_.memory_checks_limits)
        if problem:
            return problem
    return None
