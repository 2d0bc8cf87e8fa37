"""The commands of the declared operations, each built from its spec (`fsmem.spec`) when it is first asked for.

A parameter becomes an argument or an option spelled as its spec says, with
its one description as help; the command opens the memory, runs the inputs'
adapters (`fsmem.cli.inputs`), calls the `Memory` method of the same name
and prints the answer: within the token budget for an answer that has one
(`fsmem.cli.printing.print_within`), with exit code 1 when its spec's `exit_1` holds (grep's
convention). Only the command asked for is built, so `fsmem read` builds
one command, and imports no other operation's machinery.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from fsmem.cli.options import (
    FsmemCommand,
    command as fsmem_command,
    emit,
    open_memory,
    output_option,
)
from fsmem.cli.printing import print_within
from fsmem.spec import CLI, REQUIRED, Operation, Param, declared

CLICK_TYPES: dict[str, Any] = {"int": int, "float": float}


def help_of(param: Param) -> str:
    """The option's help: its one description, with how the command line repeats a list or a mapping."""
    text = param.description
    if param.kind == "list":
        text += " (repeat the option for several)"
    elif param.kind == "dict":
        text += " (KEY=VALUE, the value read as YAML; repeat the option for several)"
    return text if text.endswith(".") else text + "."


def decorator(param: Param) -> Callable[[Any], Any]:
    """The click argument or option of one parameter."""
    if param.positional:
        if param.kind == "list":
            return click.argument(param.name, nargs=-1)
        return click.argument(param.name, required=param.required)
    names = [param.short, param.cli_flag] if param.short else [param.cli_flag]
    settings: dict[str, Any] = {"help": help_of(param), "required": param.required}
    if param.kind == "bool":
        settings["is_flag"] = True
    elif param.kind in ("list", "dict"):
        settings["multiple"] = True
    else:
        settings["type"] = CLICK_TYPES.get(param.kind)
    if param.metavar:
        settings["metavar"] = param.metavar
    if param.envvar:
        settings["envvar"] = param.envvar
    if param.default is not REQUIRED and param.default is not None and param.kind != "bool":
        settings["default"] = param.default
    return click.option(*names, param.name, **settings)


def exits_1(op: Operation) -> Callable[[Any], bool]:
    """Whether an answer makes the exit code 1: its spec's `exit_1` attribute holds (`!name`: does not)."""
    rule = op.cli.exit_1
    if rule is None:
        return lambda result: False
    name = rule.lstrip("!")
    wanted = not rule.startswith("!")
    return lambda result: bool(getattr(result, name)) == wanted


LEAN_BEGIN = (
    "# -- generated from grep's spec and fsmem.yaml's defaults by `python -m fsmem.cli.generated`; do not edit --\n"
)
LEAN_END = "# -- end of what is generated --\n"


def lean_tables(op: Operation) -> str:
    """`fsmem.cli.lean`'s tables of `op`'s options, as Python source: each spelled as `decorator` spells it,
    and the read setting the early rg pass guesses (`fsmem.cli.early`).

    The lean path parses before Python's typing or the spec are imported (they would delay rg's start), so
    it reads its options from this source, written from the spec; tests/test_cli_lean.py asks that it is
    what this makes now."""
    from fsmem.config.sections import ReadSettings

    flags: dict[str, str] = {}
    values: dict[str, tuple[str, str]] = {}
    defaults: dict[str, Any] = {}
    for param in op.on(CLI):
        defaults[param.name] = [] if param.kind == "list" else param.default
        if param.positional:
            continue
        if param.kind not in ("bool", "int", "str", "list"):
            raise ValueError(f"{op.name}: the lean path does not parse {param.kind} options ({param.name})")
        for name in [param.short, param.cli_flag] if param.short else [param.cli_flag]:
            if param.kind == "bool":
                flags[name] = param.name
            else:
                values[name] = (param.name, param.kind)
    defaults = {name: value for name, value in defaults.items() if value is not REQUIRED}
    lines = [
        *_literal("FLAGS", flags),
        *_literal("VALUES", values, note="  # option -> (parameter, kind)"),
        *_literal("DEFAULTS: dict[str, Any]", defaults),
        f"MAX_LINE_CHARS = {ReadSettings.max_line_chars!r}  # read.max_line_chars's default (fsmem.cli.early)",
    ]
    return LEAN_BEGIN + "".join(line + "\n" for line in lines) + LEAN_END


def _literal(name: str, table: dict[str, Any], *, note: str = "") -> list[str]:
    """`name = {...}` as ruff formats it: one entry a line, double quotes, a trailing comma."""

    def source(value: Any) -> str:
        if isinstance(value, tuple):
            return "(" + ", ".join(source(item) for item in value) + ")"
        return json.dumps(value) if isinstance(value, str) else repr(value)

    return [f"{name} = {{{note}", *(f"    {source(key)}: {source(value)}," for key, value in table.items()), "}"]


LIMITS_BEGIN = "# -- generated from the spec's parameters by `python -m fsmem.cli.generated`; do not edit --\n"


LINE_LENGTH = 120  # ruff's line-length in pyproject.toml


def limits_table() -> str:
    """`fsmem.arguments.LIMITS`, as Python source: each declared operation's parameters that have a minimum or
    choices (`fsmem.spec.schema.limits`), an operation a line (or a parameter a line), as ruff formats it. `Memory`'s argument check reads it
    without loading the spec (a plain grep never does); tests/test_arguments.py asks that it is what this makes now."""
    from fsmem.spec.schema import limits

    lines = ["LIMITS: dict[str, dict[str, dict[str, Any]]] = {"]
    for op, params in limits(declared().values()).items():
        line = f"    {json.dumps(op)}: {json.dumps(params)},"
        if len(line) <= LINE_LENGTH:
            lines.append(line)
        else:  # a parameter a line, as ruff splits a line that is too long
            lines.append(f"    {json.dumps(op)}: {{")
            lines.extend(f"        {json.dumps(name)}: {json.dumps(limit)}," for name, limit in params.items())
            lines.append("    },")
    lines.append("}")
    return LIMITS_BEGIN + "".join(line + "\n" for line in lines) + LEAN_END


def write_generated(path: str, begin: str, source: str) -> bool:
    """Put `source` (from `begin` to the end marker) in place of the generated part of the file at `path`;
    True when it changed."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if begin not in text or LEAN_END not in text:
        raise ValueError(f"{path}: no generated part, between {begin.strip()!r} and {LEAN_END.strip()!r}")
    head, rest = text.split(begin, 1)
    new = head + source + rest.split(LEAN_END, 1)[1]
    if new != text:
        with open(path, "w", encoding="utf-8") as file:
            file.write(new)
    return new != text


def write_lean_tables(path: str) -> bool:
    """Rewrite the generated part of `fsmem/cli/lean.py` at `path` from grep's spec; True when it changed."""
    return write_generated(path, LEAN_BEGIN, lean_tables(declared()["grep"]))


def write_limits(path: str) -> bool:
    """Rewrite the generated part of `fsmem/arguments.py` at `path` from the spec; True when it changed."""
    return write_generated(path, LIMITS_BEGIN, limits_table())


class _Shown:
    """An answer whose text is printed by another of its methods than `to_text` (the spec's `Cli.text`)."""

    def __init__(self, answer: Any, method: str) -> None:
        self.to_text, self.to_dict = getattr(answer, method), answer.to_dict


def build(op: Operation) -> click.Command:
    """The click command of `op`."""
    params = [p for p in op.params if p.on(CLI)] + list(op.cli.extra)
    lists = {p.name for p in params if p.kind == "list"}
    extra = {p.name for p in op.cli.extra}
    budgeted = op.answer in ("page", "text") and any(p.name == "max_tokens" for p in params)
    empty = exits_1(op)

    def run(ctx: click.Context, as_json: bool, **given: Any) -> None:
        given = {name: list(value) if name in lists else value for name, value in given.items()}
        if op.cli.inputs:  # the shell's adapters load only for a command that has one
            from fsmem.cli.inputs import INPUTS

            for name, adapter in op.cli.inputs.items():
                given[name] = INPUTS[adapter](given.get(name), given, ctx)
        arguments = {name: value for name, value in given.items() if name not in extra}
        memory = open_memory(ctx)
        method = getattr(memory, op.name)
        max_tokens = arguments.get("max_tokens")
        if budgeted and not (op.cli.spent_at_zero and max_tokens == 0):
            nothing = print_within(
                memory,
                op.name,
                max_tokens,
                lambda room: method(**{**arguments, "max_tokens": room}),
                as_json,
                empty=empty,
                reserve=op.cli.reserve,
            )
            if nothing:
                raise click.exceptions.Exit(1)
            return
        result = method(**arguments)
        code = next((code for name, code in op.cli.exits if getattr(result, name)), 0)
        emit(
            _Shown(result, op.cli.text) if op.cli.text != "to_text" else result,
            as_json,
            empty=not code and empty(result),
        )
        if code:
            raise click.exceptions.Exit(code)

    function: Any = output_option(run)
    for param in reversed(params):
        function = decorator(param)(function)
    return fsmem_command(op.name, help=op.cli_help)(click.pass_context(function))


def build_under(op: Operation, value: str) -> click.Command:
    """The subcommand `value` of `op`'s group (`Cli.group`): `op`'s command with its first parameter given."""
    whole = build(op)
    first = next(p for p in op.params if p.on(CLI))
    callback = whole.callback
    assert callback is not None

    def run(**given: Any) -> Any:
        return callback(**{first.name: value}, **given)

    params = [p for p in whole.params if p.name != first.name]
    return FsmemCommand(value, callback=run, params=params, help=whole.help, short_help=op.cli.values[value])


class OperationGroup(click.Group):
    """A hand-written group whose other subcommands are a declared operation's, one per value (`Cli.group`)."""

    def _grouped(self) -> dict[str, Operation]:
        return {value: op for op in declared().values() if op.cli.group == self.name for value in op.cli.values}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self._grouped(), *super().list_commands(ctx)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        op = self._grouped().get(cmd_name)
        if op is None:
            return super().get_command(ctx, cmd_name)
        key = f"{op.name}:{cmd_name}"
        if key not in _BUILT:
            _BUILT[key] = build_under(op, cmd_name)
        return _BUILT[key]


_BUILT: dict[str, click.Command] = {}


def __getattr__(name: str) -> click.Command:
    """`fsmem.cli.generated.ls` and so on: the command, built on first use (`fsmem.cli.COMMANDS`)."""
    if name not in _BUILT:
        op = declared().get(name)
        if op is None:
            raise AttributeError(f"module 'fsmem.cli.generated' has no attribute {name!r}")
        _BUILT[name] = build(op)
    return _BUILT[name]


if __name__ == "__main__":
    from fsmem import arguments
    from fsmem.cli import lean

    print("rewritten" if write_lean_tables(lean.__file__) else "unchanged", lean.__file__)
    print("rewritten" if write_limits(arguments.__file__) else "unchanged", arguments.__file__)
