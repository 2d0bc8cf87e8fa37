"""The built-in agent tools, generated from the operation declarations (`fsmem.spec`).

Each declared operation offered as a tool (`fsmem.spec.tool_names()`, in the
order they are offered) becomes a registry entry: its schema from the
parameters the tool face carries, its description the operation's summary
and guide, and one caller for all of them, which runs
the `Memory` method of the same name and reads the answer's common figures
(`fsmem.agents.registry.Answer`). They are registered through the same hook
a plugin uses, so the registry path is always exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fsmem.agents.registry import Reply, Tool, register
from fsmem.memory import Memory
from fsmem.spec import Operation, tool_operations
from fsmem.spec.schema import input_schema, mcp_annotations, output_schema


def caller(op: Operation) -> Callable[..., Reply]:
    """The tool function of `op`: its `Memory` method, given the budget the dispatcher grants when it takes one."""
    name = op.name
    takes_budget = any(p.name == "max_tokens" for p in op.params)

    def call(memory: Memory, *, max_tokens: int, **given: Any) -> Reply:
        if takes_budget:
            given["max_tokens"] = max_tokens
        return Reply.of(getattr(memory, name)(**given))

    call.__name__ = call.__qualname__ = name
    return call


def tool_of(op: Operation) -> Tool:
    return Tool(
        name=op.name,
        description=op.description,
        parameters=input_schema(op),
        function=caller(op),
        writes=not op.read_only,
        requires="history" if "history" in op.needs else None,
        needs=op.needs,
        annotations=mcp_annotations(op),
        output_schema=output_schema(op),
        memory_checks_limits=True,  # its call is `Memory`'s method, whose argument check holds them
    )


for _op in tool_operations():
    register(tool_of(_op))
