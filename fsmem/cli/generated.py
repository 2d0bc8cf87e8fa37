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

from fsmem.cli.options import FsmemCommand, command as fsmem_command, open_memory, output_option
from fsmem.cli.running import answering, command_lines, run_operation
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


LINE_LENGTH = 120  # ruff's line-length in pyproject.toml
LEAN_BEGIN = "# -- generated from the spec by `python -m fsmem.cli.generated`; do not edit --\n"
LEAN_END = "# -- end of what is generated --\n"


def lean_tables() -> str:
    """The tables of `fsmem.cli.lean_tables`, as Python source: grep's command line as the lean path parses it
    (`fsmem.cli.running.command_lines`), and the read setting the early rg pass guesses (`fsmem.cli.early`).

    A plain grep is parsed before Python's typing or the spec are imported (they would delay rg's start), so
    it reads its options from this source, written from grep's declaration; every other command reads the
    spec (a new operation touches no written file). tests/test_cli_lean.py asks that it is what this makes now."""
    from fsmem.config.sections import ReadSettings

    spellings, defaults, options, operands, inputs, answers = command_lines([declared()["grep"]])
    lines = [
        LEAN_BEGIN.rstrip("\n"),
        "# option -> (parameter, kind)",
        *_source("SPELLINGS: dict[str, tuple[str, str]] = ", spellings),
        "# parameter -> its value when not given (where it is not required)",
        *_source("DEFAULTS: dict[str, Any] = ", defaults),
        "# command -> its options, `!` after a required one",
        *_source("OPTIONS: dict[str, str] = ", options),
        "# command -> its operands, in order: (parameter, kind, required); a list takes the rest",
        *_source("OPERANDS: dict[str, tuple[tuple[str, str, bool], ...]] = ", operands),
        "# command -> its inputs' adapters, the parameters only the command line has, the variables options read",
        *_source("INPUTS: dict[str, tuple[tuple[Any, ...], ...]] = ", inputs),
        "# command -> how its answer is printed and its exit code chosen (fsmem.cli.running.answering)",
        *_source("ANSWERING: dict[str, tuple[Any, ...]] = ", answers),
        f"MAX_LINE_CHARS = {ReadSettings.max_line_chars!r}  # read.max_line_chars's default (fsmem.cli.early)",
        LEAN_END.rstrip("\n"),
    ]
    return "".join(line + "\n" for line in lines)


def _source(prefix: str, value: Any, indent: str = "", suffix: str = "") -> list[str]:
    """`value` as ruff formats it after `prefix`: on one line where it fits in LINE_LENGTH, else one item a
    line with a trailing comma, each item formatted the same way."""
    flat = _flat(value)
    if len(indent + prefix + flat + suffix) <= LINE_LENGTH or not isinstance(value, (dict, tuple, list)) or not value:
        return [indent + prefix + flat + suffix]
    opening, closing = ("{", "}") if isinstance(value, dict) else ("(", ")") if isinstance(value, tuple) else ("[", "]")
    lines = [indent + prefix + opening]
    inner = indent + "    "
    if isinstance(value, dict):
        for key, item in value.items():
            lines.extend(_source(f"{_flat(key)}: ", item, inner, ","))
    else:
        for item in value:
            lines.extend(_source("", item, inner, ","))
    lines.append(indent + closing + suffix)
    return lines


def _flat(value: Any) -> str:
    """`value` on one line, as ruff writes it: double quotes, a one-item tuple with its comma."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        items = ", ".join(_flat(item) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(item) for item in value) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


LIMITS_BEGIN = "# -- generated from the spec's parameters by `python -m fsmem.cli.generated`; do not edit --\n"


def limits_table() -> str:
    """`fsmem.arguments.LIMITS`, as Python source: grep's parameters that have a minimum or choices
    (`fsmem.spec.schema.limits`), as ruff formats it. `Memory`'s argument check reads grep's there, so that a
    plain grep never loads the spec, and every other operation's from the spec (a new one touches no written
    file); tests/test_arguments.py asks that it is what this makes now."""
    from fsmem.spec.schema import limits

    lines = ["LIMITS: dict[str, dict[str, dict[str, Any]]] = {"]
    for op, params in limits([declared()["grep"]]).items():
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
    """Rewrite the generated part of `fsmem/cli/lean_tables.py` at `path` from grep's spec; True when it changed."""
    return write_generated(path, LEAN_BEGIN, lean_tables())


def write_limits(path: str) -> bool:
    """Rewrite the generated part of `fsmem/arguments.py` at `path` from the spec; True when it changed."""
    return write_generated(path, LIMITS_BEGIN, limits_table())


class _Invocation:
    """A click command as the inputs' adapters see it (`fsmem.cli.inputs.Invocation`)."""

    def __init__(self, ctx: click.Context) -> None:
        self.ctx = ctx

    @property
    def agent(self) -> str | None:
        return (self.ctx.find_root().obj or {}).get("agent")

    def memory(self) -> Any:
        return open_memory(self.ctx)

    def on_close(self, callback: Callable[[], Any]) -> None:
        self.ctx.call_on_close(callback)


def build(op: Operation) -> click.Command:
    """The click command of `op`."""
    params = [p for p in op.params if p.on(CLI)] + list(op.cli.extra)
    lists = {p.name for p in params if p.kind == "list"}
    extra = {p.name for p in op.cli.extra}
    how = answering(op)

    def run(ctx: click.Context, as_json: bool, **given: Any) -> None:
        given = {name: list(value) if name in lists else value for name, value in given.items()}
        if op.cli.inputs:  # the shell's adapters load only for a command that has one
            from fsmem.cli.inputs import adapted

            given = adapted(dict(op.cli.inputs), given, _Invocation(ctx))
        arguments = {name: value for name, value in given.items() if name not in extra}
        code = run_operation(op.name, how, open_memory(ctx), as_json, arguments)
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
    import os

    from fsmem import arguments

    tables = os.path.join(os.path.dirname(__file__), "lean_tables.py")
    print("rewritten" if write_lean_tables(tables) else "unchanged", tables)
    print("rewritten" if write_limits(arguments.__file__) else "unchanged", arguments.__file__)
