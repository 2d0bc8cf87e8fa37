"""The front matter fields a write may set: values YAML writes as they are, checked before anything is written.

A value from Python (`Memory.write(set=...)`), a tool's JSON or `--set` may be
anything; front matter holds text, numbers, True or False, dates, and lists or
mappings of them. Anything else (an object, a set, a value that holds itself)
used to fail deep in the YAML writer; it is refused here with its field named.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from fsmem.budget import echo
from fsmem.errors import InvalidArgument
from fsmem.store.paths import check_text

MAX_FIELD_DEPTH = 32  # lists and mappings inside one front matter field


def check_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Front matter fields to set, as YAML can write them (tuples become lists); anything else is refused at the door.

    A value is text, a number, True or False, None, a date, or a list or mapping
    of those, nested at most MAX_FIELD_DEPTH deep; text holds no NUL byte and
    no lone surrogate. A value that holds itself (a cycle) is refused too.
    """

    def visit(value: Any, where: str, depth: int, open_: set[int]) -> Any:
        if isinstance(value, str):
            return check_text(value, where)
        if value is None or isinstance(value, (bool, int, float, _dt.date)):
            return value
        if not isinstance(value, (dict, list, tuple)):
            raise InvalidArgument(
                f"{where} holds {type(value).__name__}, which front matter cannot hold; "
                "give text, numbers, True or False, dates, or lists and mappings of them"
            )
        if depth >= MAX_FIELD_DEPTH or id(value) in open_:
            what = "holds itself" if id(value) in open_ else f"is nested more than {MAX_FIELD_DEPTH} deep"
            raise InvalidArgument(f"{where} {what}; give a plain value")
        inside = open_ | {id(value)}
        if isinstance(value, dict):
            return {
                visit(key, f"a field name in {where}", depth + 1, inside): visit(inner, where, depth + 1, inside)
                for key, inner in value.items()
            }
        return [visit(inner, where, depth + 1, inside) for inner in value]

    checked = {}
    for key, value in fields.items():
        if not isinstance(key, str):
            raise InvalidArgument(f"a front matter field name must be text, not {type(key).__name__} {echo(key)}")
        check_text(key, "a front matter field name")
        checked[key] = visit(value, f"the front matter field {echo(key)}", 0, set())
    return checked
