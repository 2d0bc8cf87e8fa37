"""JSON schemas from the declarations: the input schema of a tool, and its MCP annotations. Pure data."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fsmem.budget import CUT_BY_READ_LIMIT, CUT_BY_RESULTS, CUT_BY_TOKENS
from fsmem.spec import REQUIRED, TOOL, Operation, Param

JSON_TYPES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "list": {"type": "array", "items": {"type": "string"}},
    "dict": {"type": "object"},
}


def limits_of(param: Param) -> dict[str, Any]:
    """What a value must be besides its type, in a JSON schema's words (`minimum`, `enum`): what the tools'
    schemas say and what `Memory`'s argument check holds every face to (`fsmem.arguments.LIMITS`)."""
    found: dict[str, Any] = {}
    if param.minimum is not None:
        found["minimum"] = param.minimum
    if param.choices is not None:
        found["enum"] = list(param.choices)
    return found


def property_of(param: Param) -> dict[str, Any]:
    """One parameter as a JSON schema property: its type, its description, its limits and its default."""
    prop: dict[str, Any] = {**JSON_TYPES[param.kind], "description": param.description, **limits_of(param)}
    if param.default is not REQUIRED and param.default is not None:
        prop["default"] = param.default
    return prop


def limits(operations: Iterable[Operation]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per operation and parameter, its limits (`limits_of`): the table `fsmem.arguments.LIMITS` is written
    from, so that `Memory`'s check and the tools' schemas say the same."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for op in operations:
        for param in op.params:
            found = limits_of(param)
            if found:
                table.setdefault(op.name, {})[param.name] = found
    return table


def input_schema(op: Operation) -> dict[str, Any]:
    """The object a model sends to call `op` as a tool: the parameters the tool face carries."""
    params = op.on(TOOL)
    return {
        "type": "object",
        "properties": {p.name: property_of(p) for p in params},
        "required": [p.name for p in params if p.required],
        "additionalProperties": False,
    }


def mcp_annotations(op: Operation) -> dict[str, bool]:
    """MCP's tool annotations: a read-only tool says so; a writer says whether it destroys and repeats safely.

    Every tool acts on this memory alone, never on an open world.
    """
    if op.read_only:
        return {"readOnlyHint": True, "openWorldHint": False}
    return {
        "readOnlyHint": False,
        "destructiveHint": op.destructive,
        "idempotentHint": op.idempotent,
        "openWorldHint": False,
    }


_ROWS = {"type": "integer", "minimum": 0, "description": "How many rows (files, matches, lines, results) it shows"}
_TRUNCATED = {"type": "boolean", "description": "Whether the answer was cut; then next_* says how to go on"}
_CUT_BY = {
    "type": "string",
    "enum": [CUT_BY_TOKENS, CUT_BY_RESULTS, CUT_BY_READ_LIMIT],
    "description": "What cut it: the token budget, the row cap, or a file's 64 MiB read limit (no next part)",
}
_NEXT: dict[str, dict[str, Any]] = {
    "page": {
        "next_offset": {"type": "integer", "minimum": 0, "description": "Call again with this offset for the next page"}
    },
    "text": {
        "next_lines": {"type": "string", "description": "Call again with these lines ('A:') for the rest"},
        "next_expected_version": {
            "type": "string",
            "description": "And with this expected_version: the rest is refused if the file changed meanwhile",
        },
    },
}


def output_schema(op: Operation) -> dict[str, Any]:
    """The JSON schema of the tool's structured content (`fsmem.agents.tools.ToolAnswer.structured`): the
    figures of the answer and, for a page or a cut text, how to go on as data."""
    return {
        "type": "object",
        "properties": {"rows": _ROWS, "truncated": _TRUNCATED, "cut_by": _CUT_BY, **_NEXT.get(op.answer, {})},
        "required": ["rows", "truncated"],
        "additionalProperties": False,
    }
