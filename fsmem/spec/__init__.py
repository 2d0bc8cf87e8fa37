"""One declaration per operation: its parameters, what it answers, what it needs, and the function that does it.

Every face is generated from these declarations (`fsmem.spec.operations`):
`Memory`'s methods (`fsmem.memory`), the command table (`fsmem.cli.COMMANDS`,
with the hand-written commands of `fsmem.spec.commands`) and the CLI's positional
arguments (`fsmem.faces`), the click commands (`fsmem.cli.generated`), the agent tools and their
schemas for OpenAI, Anthropic, MCP and fsmem's own form
(`fsmem.agents.builtin`), the tool list a caller is offered
(`fsmem.agents.tools.offered`), and the check that each operation's function
takes what its declaration says (`fsmem.spec.check`). A new parameter is one
edit here. This package is plain data: importing it loads no click, yaml, mcp
or operation, so that `fsmem read` starts no slower for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

CLI, API, TOOL = "cli", "api", "tool"
EVERY_FACE = frozenset({CLI, API, TOOL})
NOT_TOOLS = frozenset({CLI, API})  # what a dispatcher grants (max_tokens) or only a person chooses (session)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a parameter with no default

# list: of text; dict: a mapping of front-matter fields; callable: a Python callback (the API alone)
KINDS = ("str", "int", "float", "bool", "list", "dict", "callable")
ANSWERS = {
    "page": "a page of rows, with the total and the offset of the next page",
    "text": "a text cut at the token budget, naming what to ask for next",
    "receipt": "what a write did: the path, the line, the file's new version",
    "report": "what a whole-memory task did or found",
}
NEEDS = {
    "write": "write access (not a read-only agent or token)",
    "history": "the memory's history (git)",
    "whole": "the whole memory (an agent with a scope cannot run it)",
    "sessions": "the sessions/ folder in reach (where notes are written)",
}


@dataclass(frozen=True)
class Param:
    """One parameter, named as in Python and in the tools, with the one description every face shows.

    The CLI spells it `--name-with-dashes` unless `flag` says otherwise (`--if-version` for
    expected_version), or takes it as an argument (`positional`); a list is a repeatable option there.
    `minimum` and `choices` are what a value must also be: the tools' JSON schema says them (`minimum`,
    `enum`), and `Memory`'s one argument check refuses a value beyond them on every face (`fsmem.arguments`).
    """

    name: str
    kind: str
    description: str
    default: Any = REQUIRED
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    positional: bool = False
    flag: str | None = None
    short: str | None = None
    metavar: str | None = None
    envvar: str | None = None
    faces: frozenset[str] = EVERY_FACE

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def on(self, face: str) -> bool:
        return face in self.faces

    def but(self, **changes: Any) -> Param:
        """The same parameter with some facts changed (`PATH.but(description=...)`) for one operation."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Cli:
    """What only the command line needs of an operation: how a shell hands its inputs over, and its exit code.

    `inputs` names, per parameter, the adapter of `fsmem.cli.inputs` that turns what was typed into the
    value (a `-` that means stdin, `KEY=VALUE` pairs, a file to read); `extra` are options of the command
    alone (write's --keep-body); `exit_1` is the answer's attribute whose truth makes the exit code 1
    (grep's convention: nothing found; `!calls`: when it is false), `exits` the attributes whose truth gives
    a code of their own, checked first (consolidate's `skipped`: 3), `text` the answer's method whose text
    the command prints (consolidate's `to_log`, each line after the run's time), and `reserve` says whether the answer
    needs room kept for its trailer (`fsmem.cli.printing.print_within`); `spent_at_zero`, that
    --max-tokens 0 is no budget but the signal that the turn's budget is spent (recall). `group` puts
    the command under a group of that name, as one subcommand per value of its first parameter
    (`values`): `fsmem import chatgpt PATH` is import_from(format="chatgpt", path=PATH).
    """

    note: str = ""
    inputs: dict[str, str] = field(default_factory=dict)
    extra: tuple[Param, ...] = ()
    exit_1: str | None = None
    exits: tuple[tuple[str, int], ...] = ()
    text: str = "to_text"
    reserve: bool = True
    spent_at_zero: bool = False
    group: str | None = None
    values: dict[str, str] = field(default_factory=dict)  # each subcommand, and its line in the group's help


@dataclass(frozen=True)
class Operation:
    """One operation of a memory, declared once.

    `function` is the operation, a lazy "module:function" in `fsmem.operations`; `summary` is its one line
    (the CLI's help and the tool's first line), `guide` what a model reads after it: when to use it, its
    limits, how to go on after a cut answer. `read_only`, `destructive` and `idempotent` are the MCP
    annotations; `tool` says whether agents are offered it.
    """

    name: str
    summary: str
    function: str
    params: tuple[Param, ...]
    answer: str
    guide: str = ""
    needs: frozenset[str] = frozenset()
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    tool: bool = False
    cli: Cli = field(default_factory=Cli)

    def __post_init__(self) -> None:
        if self.answer not in ANSWERS:
            raise ValueError(f"{self.name}: answer {self.answer!r} is not one of {sorted(ANSWERS)}")
        unknown = self.needs - set(NEEDS)
        if unknown:
            raise ValueError(f"{self.name}: needs {sorted(unknown)} are not among {sorted(NEEDS)}")
        if self.read_only == ("write" in self.needs):
            raise ValueError(f"{self.name}: an operation that writes needs write access, and only it")

    def on(self, face: str) -> tuple[Param, ...]:
        """The parameters this face carries."""
        return tuple(p for p in self.params if p.on(face))

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def description(self) -> str:
        """What a model reads: the summary, then the guide."""
        return self.summary + ("\n\n" + self.guide if self.guide else "")

    @property
    def cli_help(self) -> str:
        return self.summary + ("\n\n" + self.cli.note if self.cli.note else "")


def declared() -> dict[str, Operation]:
    """Every declared operation, by name, in the order the tools are offered."""
    from fsmem.spec.operations import OPERATIONS

    return OPERATIONS


def tool_operations() -> list[Operation]:
    return [op for op in declared().values() if op.tool]


def tool_names(*, writes: bool = True, history: bool = True) -> list[str]:
    """The names of the tools offered, in order: to a writer or a read-only caller, with history or without."""
    return [op.name for op in tool_operations() if (writes or op.read_only) and (history or "history" not in op.needs)]
