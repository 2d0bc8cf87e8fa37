"""A declared operation's command line, run: the `Memory` call and its printed answer, with click or without.

Both parsers of a command line end here: click's command of an operation (`fsmem.cli.generated`) once
its inputs' adapters have run, and the lean path (`fsmem.cli.lean`) for a plain line. So the answer, its
budget and the exit code are the same whichever parsed it: within the token budget for an answer that has
one (`fsmem.cli.printing.print_within`), exit 1 when the spec's `exit_1` holds (grep's convention), and the
spec's other exit codes (`Cli.exits`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fsmem.cli.printing import print_answer, print_within

if TYPE_CHECKING:
    from fsmem.memory import Memory
    from fsmem.spec import Operation


def answering(op: Operation) -> tuple[bool, bool, bool, str | None, tuple[tuple[str, int], ...], str]:
    """How `op`'s command prints its answer and chooses its exit code, from its spec, as plain values (the lean
    path reads them from `fsmem.cli.lean_tables`, written from this, without loading the spec): whether it is
    fitted to the token budget, whether --max-tokens 0 answers at once unbudgeted (recall), whether room is
    reserved for the trailer, the answer's attribute that makes the exit code 1 (`!name`: that does not),
    (attribute, exit code) pairs of which the first that holds is the code, and the method that prints it."""
    from fsmem.spec import CLI

    params = [*op.params, *op.cli.extra]
    budgeted = op.answer in ("page", "text") and any(p.name == "max_tokens" and p.on(CLI) for p in params)
    return budgeted, op.cli.spent_at_zero, op.cli.reserve, op.cli.exit_1, tuple(op.cli.exits), op.cli.text


LEAN_KINDS = ("bool", "int", "float", "str", "list", "dict")  # a dict (--set KEY=VALUE) is its adapter's to read


def lean_parses(op: Operation) -> bool:
    """Whether the lean path (`fsmem.cli.lean`) parses `op`'s command line: every operation's but a group's
    subcommand (`fsmem import markdown`), of the kinds it reads, with an environment variable only for text."""
    from fsmem.spec import CLI

    params = [*op.on(CLI), *op.cli.extra]
    return op.cli.group is None and all(p.kind in LEAN_KINDS and (p.kind == "str" or not p.envvar) for p in params)


def command_lines(ops: Iterable[Operation]) -> tuple[dict[str, Any], ...]:
    """What the lean path parses and runs the command lines of `ops` with (those it parses): each option's
    (parameter, kind), each parameter's default, each command's options (`!` after a required one), its
    operands in order (parameter, kind, required), its inputs (the adapters of `Cli.inputs`, the parameters
    only the command line has, the environment variables read for options not given), and its `answering`.
    A spelling or a default is the same in every command that has it (the spec's shared parameters); one that
    is not is refused."""
    from fsmem.spec import CLI

    spellings: dict[str, tuple[str, str]] = {}
    defaults: dict[str, Any] = {}
    options: dict[str, str] = {}
    operands: dict[str, tuple[tuple[str, str, bool], ...]] = {}
    inputs: dict[str, tuple[tuple[Any, ...], ...]] = {}
    answers: dict[str, tuple[Any, ...]] = {}
    for op in ops:
        if not lean_parses(op):
            continue
        params = [*op.on(CLI), *op.cli.extra]
        names = []
        for param in params:
            if not param.required:
                default = [] if param.kind in ("list", "dict") else False if param.kind == "bool" else param.default
                if defaults.setdefault(param.name, default) != default:
                    raise ValueError(f"{op.name}: {param.name}'s default differs from another operation's")
            if param.positional:
                continue
            for name in [param.short, param.cli_flag] if param.short else [param.cli_flag]:
                if spellings.setdefault(name, (param.name, param.kind)) != (param.name, param.kind):
                    raise ValueError(f"{op.name}: {name} means another parameter in another operation")
                names.append(name + ("!" if param.required else ""))
        options[op.name] = " ".join(names)
        operands[op.name] = tuple((p.name, p.kind, p.required) for p in params if p.positional)
        inputs[op.name] = (
            tuple(op.cli.inputs.items()),
            tuple(p.name for p in op.cli.extra),
            tuple((p.name, p.envvar) for p in params if p.envvar),
        )
        answers[op.name] = answering(op)
    return spellings, defaults, options, operands, inputs, answers


def _empty(rule: str | None) -> Callable[[Any], bool]:
    """Whether an answer makes the exit code 1: its attribute `rule` holds (`!name`: does not)."""
    if rule is None:
        return lambda result: False
    name = rule.lstrip("!")
    wanted = not rule.startswith("!")
    return lambda result: bool(getattr(result, name)) == wanted


class _Shown:
    """An answer whose text is printed by another of its methods than `to_text` (the spec's `Cli.text`)."""

    def __init__(self, answer: Any, method: str) -> None:
        self.to_text, self.to_dict = getattr(answer, method), answer.to_dict


def run_operation(
    command: str, answering: tuple[Any, ...], memory: Memory, as_json: bool, arguments: dict[str, Any]
) -> int:
    """Call the operation `command` on `memory` with `arguments` (every parameter the command line has), print
    the answer as `answering` says, and return the exit code."""
    budgeted, spent_at_zero, reserve, exit_1, exits, text = answering
    method = getattr(memory, command)
    empty = _empty(exit_1)
    max_tokens = arguments.get("max_tokens")
    if budgeted and not (spent_at_zero and max_tokens == 0):
        nothing = print_within(
            memory,
            command,
            max_tokens,
            lambda room: method(**{**arguments, "max_tokens": room}),
            as_json,
            empty=empty,
            reserve=reserve,
        )
        return 1 if nothing else 0
    result = method(**arguments)
    code = next((code for name, code in exits if getattr(result, name)), 0)
    shown = _Shown(result, text) if text != "to_text" else result
    if print_answer(shown, as_json, empty=not code and empty(result)):
        return 1
    return code
