"""A declared operation's command from the shell without click: every command starts with only what it uses.

Importing click and building a command from its spec took a large part of a one-shot command's time (for
a grep, as long as rg's pass; docs/performance.md, "Start-up and one-shot commands"). `fsmem.cli.main`
gives every command line to `parse` first: one for a declared operation (`fsmem.cli.running.lean_parses`:
any but a group's subcommand), naming only its own options, spelled out, with plain values, is run here, its
inputs read by click's adapters (`fsmem.cli.inputs`: `note -`'s stdin, `write`'s --set); anything else
(--help, a typo, `--`, combined short flags, a value that starts with '-' or that click would reject, a
missing operand) returns None and goes to click, so help, usage errors and their words stay click's. What
runs is what the generated command runs (`fsmem.cli.running.run_operation`): the same `Memory` call, within
the same budget, printed and exited alike, behind the CLI's one error boundary (`fsmem.cli.printing.boundary`). The tables it parses with
are made from the spec (`fsmem.cli.running.command_lines`; grep's are written into `fsmem.cli.lean_tables`,
so that a plain grep loads no spec), and tests/test_cli_lean.py shows every command's parse answering as
click's parse of the same line does.
"""

from __future__ import annotations

import gc
import os
import re
import sys

from fsmem.cli.lean_tables import MAX_LINE_CHARS

TYPE_CHECKING = False  # typing.TYPE_CHECKING: typing is imported after rg has started (fsmem.cli.early)
if TYPE_CHECKING:
    from typing import Any, NoReturn

GLOBAL = {"--root": ("root", "str"), "--agent": ("agent", "str")}  # before the command or after it (cli.options)
ENV = {"root": "FSMEM_ROOT", "agent": "FSMEM_AGENT"}  # the group's envvars, used when the option is not given
_TEXT_ARGUMENT = re.compile(r"^-\s")  # a Markdown bullet is an argument, not an option (FsmemCommand)
_NUMBERS = {"int": re.compile(r"[0-9]+"), "float": re.compile(r"[0-9]+(?:\.[0-9]+)?")}  # as click reads them


class Parsed:
    """A command line, parsed: the command, the memory it opens, --json, and the arguments of its method."""

    def __init__(
        self,
        command: str,
        root: str | None,
        agent: str | None,
        as_json: bool,
        arguments: dict[str, Any],
        answering: tuple[Any, ...],
        adapters: dict[str, str],
        extra: tuple[str, ...],
    ):
        self.command, self.root, self.agent, self.as_json = command, root, agent, as_json
        self.arguments, self.answering = arguments, answering
        self.adapters = adapters  # parameter -> the adapter of its input (`fsmem.cli.inputs`)
        self.extra = extra  # parameters the command line has and the method does not


def parse(argv: list[str]) -> Parsed | None:
    """The command that `argv` (the words after `fsmem`) asks for, or None when click should read it."""
    chosen: dict[str, str | None] = {}
    words = iter(argv)
    command = None
    for word in words:  # the group's options, then the command's name
        name, value = _split(word)
        if name in GLOBAL:
            value = value if value is not None else next(words, None)
            if not _plain(value) or value == "":  # click refuses an empty --root or --agent
                return None
            chosen[GLOBAL[name][0]] = value
            continue
        command = word
        break
    if command is None or command.startswith("-"):
        return None
    spellings, defaults, commands, operand_lists, inputs, answering = _lines(command)
    if command not in commands:
        return None
    options = {name.rstrip("!"): spellings[name.rstrip("!")] for name in commands[command].split()}
    required = {spellings[name[:-1]][0] for name in commands[command].split() if name.endswith("!")}
    required |= {name for name, _, needed in operand_lists[command] if needed}
    given = [parameter for parameter, _ in options.values()] + [name for name, _, _ in operand_lists[command]]
    arguments: dict[str, Any] = {p: _fresh(defaults[p]) for p in given if p not in required}
    as_json = False
    operands: list[str] = []
    for word in words:
        if word.startswith("-") and len(word) > 1 and not (_TEXT_ARGUMENT.match(word) or "\n" in word):
            name, value = _split(word)
            parameter, kind = options.get(name) or GLOBAL.get(name) or ("", "bool" if name == "--json" else "")
            if kind == "bool":
                if value is not None:
                    return None  # click: "does not take a value"
                if name == "--json":
                    as_json = True
                else:
                    arguments[parameter] = True
                continue
            if kind:
                value = value if value is not None else next(words, None)
                if not _plain(value) or (value == "" and name in GLOBAL):
                    return None
                assert value is not None
                if name in GLOBAL:
                    chosen[parameter] = value
                elif kind in _NUMBERS:
                    if not _NUMBERS[kind].fullmatch(value):
                        return None
                    arguments[parameter] = int(value) if kind == "int" else float(value)
                elif kind in ("list", "dict"):  # a dict's KEY=VALUE pairs are its adapter's to read
                    arguments[parameter].append(value)
                else:
                    arguments[parameter] = value
                continue
            return None  # --help, `--`, combined flags, a typo: click's to answer
        operands.append(word)  # `-` too: standard input where the operand's adapter reads it (`note -`)
    for parameter, kind, needed in operand_lists[command]:
        if kind == "list":
            arguments[parameter], operands = operands, []
        elif operands:
            arguments[parameter] = operands.pop(0)
        elif needed:
            return None  # click: "Missing argument 'PATTERN'"
    if operands or any(name not in arguments for name, _ in options.values()):
        return None  # click: "Got unexpected extra argument", "Missing option"
    for key, variable in ENV.items():
        if key not in chosen:
            chosen[key] = os.environ.get(variable) or None
    adapters, extra, envvars = inputs[command]
    for parameter, variable in envvars:  # an option not given takes its variable's value, as click's does
        if arguments.get(parameter) is None:
            arguments[parameter] = os.environ.get(variable) or None
    return Parsed(
        command, chosen["root"], chosen["agent"], as_json, arguments, answering[command], dict(adapters), extra
    )


def _lines(command: str) -> tuple[dict[str, Any], ...]:
    """The tables `parse` reads `command`'s line with: grep's as written from its spec (no spec is loaded for
    a plain grep), any other command's from the spec itself (`fsmem.cli.running.command_lines`)."""
    if command == "grep":
        from fsmem.cli import lean_tables as grep

        return grep.SPELLINGS, grep.DEFAULTS, grep.OPTIONS, grep.OPERANDS, grep.INPUTS, grep.ANSWERING
    from fsmem.cli.running import command_lines
    from fsmem.spec import declared

    op = declared().get(command)
    return command_lines([op] if op is not None else [])


def _fresh(default: Any) -> Any:
    """A default as a value of its own: a list the parse appends to is a new one each time."""
    return list(default) if isinstance(default, list) else default


def _split(word: str) -> tuple[str, str | None]:
    """`--name=value` as its name and value; any other word as itself, without a value."""
    if word.startswith("--") and "=" in word:
        name, value = word.split("=", 1)
        return name, value
    return word, None


def _plain(value: str | None) -> bool:
    """A value click takes as it is (one that starts with '-' is left to click's judgement)."""
    return value is not None and not value.startswith("-")


def run(parsed: Parsed, *, whole_process: bool = False) -> NoReturn:
    """Run the command and exit as its click command does: 0, 1 nothing found, 2 (or 130) an error.

    `whole_process`: this command is all the process does (`fsmem` from the shell), so the garbage collector
    is left out of its imports, which make no garbage, and of its exit (`_settled`). A grep's first rg pass
    starts before the imports (`fsmem.cli.early`).
    """
    from fsmem.cli import early
    from fsmem.store import rg_command

    if whole_process:
        gc.disable()
    try:
        if parsed.command == "grep" and "fsmem.store.feed" not in sys.modules:  # a watcher answering narrows
            # rg runs on the other core while the rest is imported
            early.start(parsed.root, parsed.arguments, max_line_chars=MAX_LINE_CHARS)
    except Exception:  # only a head start: whatever stops it, the pass below runs rg and says what is wrong
        rg_command.discard()
    try:
        _run(parsed, whole_process)
    finally:
        rg_command.discard()  # one that no pass claimed
        if whole_process:
            gc.freeze()  # see `_settled`


def _settled() -> None:
    """The modules are imported: what exists now lives as long as the process, so the collector need never look
    at it again. Collections during the imports were a measurable share of a command's CPU, and the interpreter's
    last collections of every module's objects at exit delayed the process's end after the answer was printed;
    the objects are freed with the process (its memory closed by then). The command itself runs with the
    collector on."""
    gc.freeze()
    gc.enable()


class _Invocation:
    """The command as the inputs' adapters see it (`fsmem.cli.inputs.Invocation`): its memory, opened once."""

    def __init__(self, parsed: Parsed) -> None:
        self.parsed, self.opened = parsed, None
        self.closing: list[Any] = []

    @property
    def agent(self) -> str | None:
        return self.parsed.agent

    def memory(self) -> Any:
        if self.opened is None:
            from fsmem.cli import rendezvous

            self.opened = rendezvous.open_memory(self.parsed.root, self.parsed.agent)
        return self.opened

    def on_close(self, callback: Any) -> None:
        self.closing.append(callback)

    def close(self) -> None:
        """What the adapters asked to run at the end, then the memory closed (not one a watcher keeps open)."""
        from fsmem.cli import rendezvous

        for callback in self.closing:
            callback()
        if self.opened is not None and rendezvous.closes(self.opened):
            self.opened.close()


def _run(parsed: Parsed, whole_process: bool) -> NoReturn:
    from fsmem import faces
    from fsmem.cli.printing import boundary, watch_progress
    from fsmem.cli.running import run_operation

    def answer() -> int:
        with faces.speaking(faces.CLI):
            from fsmem.memory import Memory

            if whole_process:
                getattr(Memory, parsed.command)  # the operation's module, imported before the collector settles
                _settled()
            invocation = _Invocation(parsed)
            try:
                arguments = parsed.arguments
                if parsed.adapters:
                    from fsmem.cli.inputs import adapted

                    arguments = adapted(parsed.adapters, arguments, invocation)
                arguments = {name: value for name, value in arguments.items() if name not in parsed.extra}
                memory = invocation.memory()
                return run_operation(parsed.command, parsed.answering, memory, parsed.as_json, arguments)
            finally:
                invocation.close()

    watch_progress()
    boundary(answer, parsed.as_json)
