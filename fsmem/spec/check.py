"""The check that each operation's function takes exactly what its declaration says: names, defaults, types.

Run by `tests/test_vocabulary.py`; a declaration that drifts from its function (a parameter added to one
and not the other, a default changed, a type that the function's argument check would refuse) is named here.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from fsmem.spec import Operation, Param

# a value of each kind, as a face hands it over: the function's annotation must take it
SAMPLES: dict[str, Any] = {
    "str": "text",
    "int": 3,
    "float": 0.5,
    "bool": True,
    "list": ["a", "b"],
    "dict": {"description": "x"},
    "callable": print,
}


def function_of(op: Operation) -> Callable[..., Any]:
    """The operation's function, imported from `fsmem.operations` (its "module:function")."""
    module, name = op.function.split(":")
    return getattr(importlib.import_module(f"fsmem.operations.{module}"), name)


def problems(op: Operation) -> list[str]:
    """What differs between `op`'s declaration and its function's signature; empty when they agree."""
    from fsmem.arguments import ArgumentCheck

    function = function_of(op)
    check = ArgumentCheck(function, op.name)
    check._compile()
    found = []
    signature = list(inspect.signature(function).parameters.values())[1:]  # after the memory
    declared = [p.name for p in op.params]
    if [p.name for p in signature] != declared:
        found.append(f"{op.name}: the function takes {[p.name for p in signature]}, the spec declares {declared}")
    for parameter in signature:
        if parameter.name not in declared:
            continue
        param = op.param(parameter.name)
        found += _differences(op, param, parameter, check.by_name[parameter.name].rule)
    return found


def _differences(op: Operation, param: Param, parameter: inspect.Parameter, rule: Any) -> list[str]:
    where = f"{op.name}({param.name})"
    found = []
    if param.required != (parameter.default is inspect.Parameter.empty):
        found.append(f"{where}: required in one and not the other")
    elif not param.required and param.default != parameter.default:
        found.append(f"{where}: the default is {parameter.default!r}, the spec says {param.default!r}")
    if not rule.ok(SAMPLES[param.kind]):
        found.append(f"{where}: the function takes {rule.says}, not the spec's {param.kind}")
    if param.default is None and not rule.ok(None):
        found.append(f"{where}: the spec's default None is refused by the function ({rule.says})")
    if param.positional and parameter.kind is inspect.Parameter.KEYWORD_ONLY and param.on("api"):
        found.append(f"{where}: an argument of the command line but keyword-only in Python")
    return found
