"""Each face says "how to continue" in its own words: the CLI in flags, the agent tools and the Python API in
keyword arguments.

An answer or an error that names a next call (`--offset 20`, `offset=20`) asks this module how the face being
served spells it, so no face shows another's syntax. The face is a context variable set at each face's one
boundary: the CLI's `run()`, and the tool dispatcher's `call()`, which sets it in the thread that runs the
call (the servers run tools on worker threads). Python code that calls `Memory` itself gets the keyword form,
the default. A face also knows which arguments its caller can send again: an agent's `search` has no
`min_score` and no tool has `max_tokens`, so neither is ever suggested to a model.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

CLI = "cli"
TOOLS = "tools"
API = "api"

# Arguments the CLI spells otherwise than `--name-with-dashes`; the spec's `Param.flag` takes them from here.
RENAMED_FLAGS = {"expected_version": "--if-version"}


@functools.cache
def positional_table() -> dict[str, tuple[str, ...]]:
    """The CLI's positional arguments, by command, in order; every other argument is an option (`--name VALUE`).

    Made from the declarations (`Param.positional`) and the hand-written commands (`fsmem.spec.commands`),
    when an answer first names a CLI call: a plain grep that names none loads no spec."""
    from fsmem.spec import CLI as ON_CLI, declared
    from fsmem.spec.commands import HAND_WRITTEN

    table = {
        op.name: tuple(p.name for p in op.on(ON_CLI) if p.positional)
        for op in declared().values()
        if op.cli.group is None
    }
    table.update({name: command.positional for name, command in HAND_WRITTEN.items()})
    return {name: names for name, names in sorted(table.items()) if names}


def positional(command: str) -> tuple[str, ...]:
    return positional_table().get(command, ())


@dataclass(frozen=True)
class Face:
    """Who is being answered: `kind` (CLI, TOOLS or API), and the arguments its caller can send again
    (`accepts`; None: every argument the operation has, as on the CLI and in Python)."""

    kind: str = API
    accepts: frozenset[str] | None = None


PYTHON = Face()  # the default: code calling `Memory` itself
_FACE: ContextVar[Face] = ContextVar("fsmem_face", default=PYTHON)


def current() -> Face:
    return _FACE.get()


@contextmanager
def speaking(kind: str, accepts: Collection[str] | None = None) -> Iterator[Face]:
    """Answer in the words of `kind` (and suggest only `accepts`) until the block ends, in this thread only."""
    face = Face(kind, None if accepts is None else frozenset(accepts))
    token = _FACE.set(face)
    try:
        yield face
    finally:
        _FACE.reset(token)


def offers(name: str) -> bool:
    """Whether the caller can send argument `name` (so an answer may suggest it)."""
    accepts = current().accepts
    return accepts is None or name in accepts


def arg(name: str, command: str | None = None) -> str:
    """An argument's name as the face spells it: `--max-tokens` (`PATH` when positional) or `max_tokens`."""
    if current().kind != CLI:
        return name
    if command is not None and name in positional(command):
        return name.upper()
    return flag(name)


def flag(name: str) -> str:
    """An option as the CLI spells it: `--max-tokens`, or `--if-version` for expected_version."""
    return RENAMED_FLAGS.get(name) or "--" + name.replace("_", "-")


def operand(name: str) -> str:
    """An argument its command takes by position (`PATH` on the command line, `paths` elsewhere), named by an
    answer of that command itself: grep's trailer, which a plain grep prints without loading the spec."""
    return name.upper() if current().kind == CLI else name


def _value(value: Any, kind: str) -> str:
    if kind == CLI:
        return shlex.quote(str(value))
    if isinstance(value, bool):
        return ("true" if value else "false") if kind == TOOLS else repr(value)
    return json.dumps(value, ensure_ascii=False)


def ask(**arguments: Any) -> str:
    """Arguments to send again, as the face spells them: `--outline --lines 41:` or `outline=true, lines="41:"`."""
    kind = current().kind
    if kind == CLI:
        words = []
        for name, value in arguments.items():
            spelled = flag(name)
            words.append(spelled if value is True else f"{spelled} {_value(value, kind)}")
        return " ".join(words)
    return ", ".join(f"{name}={_value(value, kind)}" for name, value in arguments.items())


def call(command: str, **arguments: Any) -> str:
    """A whole call, as the face spells it: `fsmem read PATH --lines A:B`, the tool `read(path="PATH",
    lines="A:B")` or the method `memory.read(path="PATH", lines="A:B")`."""
    kind = current().kind
    if kind == TOOLS:
        return f"{command}({ask(**arguments)})"
    if kind == API:
        return f"{'Memory' if command == 'init' else 'memory'}.{command}({ask(**arguments)})"
    operands = [shlex.quote(str(arguments.pop(name))) for name in positional(command) if name in arguments]
    switches = {name: value for name, value in arguments.items() if value is True}  # before the operands, as
    options = {name: value for name, value in arguments.items() if value is not True}  # `fsmem init --git DIR`
    words = [ask(**switches)] if switches else []
    return " ".join(["fsmem", command, *words, *operands, *([ask(**options)] if options else [])])


def narrowing(command: str, names: Collection[str]) -> str:
    """`, or narrow with PATH, --type or --tag` (the names the caller can send), or nothing."""
    shown = [arg(name, command) for name in names if offers(name)]
    if not shown:
        return ""
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f", or narrow with {listed}"


def larger_budget() -> str:
    """`; ask again with a larger --max-tokens`, or nothing where the budget is not the caller's to raise."""
    return f"; ask again with a larger {arg('max_tokens')}" if offers("max_tokens") else ""
