"""`fsmem grep` from the shell without click: the command agents call most, started with only what it uses.

rg's own pass over the memory is short, and importing click and building the command from its spec added a
large part of it again (docs/performance.md, "Start-up and one-shot commands"). `fsmem.cli.main` gives a grep
command line to `parse` first: one that names only grep's own options, spelled out, with plain values, is run here;
anything else (--help, a typo, `--`, combined short flags, a value that starts with '-' or that click would
reject) returns None and goes to click, so help, usage errors and their words stay click's. What runs
is what the generated command runs (`fsmem.cli.generated`): the same `Memory.grep` call, within the same
budget, printed as every command prints (`fsmem.cli.printing.echo`), behind the CLI's one error boundary
(`fsmem.cli.printing.boundary`). Its option tables are written from grep's spec (`fsmem.cli.generated.lean_tables`),
and tests/test_cli_lean.py shows a parse answering as click's parse of the same line does.
"""

from __future__ import annotations

import gc
import os
import re
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING: typing is imported after rg has started (fsmem.cli.early)
if TYPE_CHECKING:
    from typing import Any, NoReturn

# -- generated from grep's spec and fsmem.yaml's defaults by `python -m fsmem.cli.generated`; do not edit --
FLAGS = {
    "-i": "ignore_case",
    "--ignore-case": "ignore_case",
    "-F": "fixed_strings",
    "--fixed-strings": "fixed_strings",
    "-w": "word",
    "--word": "word",
    "--include-superseded": "include_superseded",
}
VALUES = {  # option -> (parameter, kind)
    "-C": ("context_lines", "int"),
    "--context-lines": ("context_lines", "int"),
    "--type": ("type", "str"),
    "--tag": ("tag", "list"),
    "--updated-after": ("updated_after", "str"),
    "--as-of": ("as_of", "str"),
    "--offset": ("offset", "int"),
    "--max-results": ("max_results", "int"),
    "--max-tokens": ("max_tokens", "int"),
}
DEFAULTS: dict[str, Any] = {
    "paths": [],
    "ignore_case": False,
    "fixed_strings": False,
    "word": False,
    "context_lines": 0,
    "type": None,
    "tag": [],
    "updated_after": None,
    "include_superseded": False,
    "as_of": None,
    "offset": 0,
    "max_results": None,
    "max_tokens": None,
}
MAX_LINE_CHARS = 2000  # read.max_line_chars's default (fsmem.cli.early)
# -- end of what is generated --
GLOBAL = {"--root": "root", "--agent": "agent"}  # before the command or after it, as `fsmem.cli.options`
ENV = {"root": "FSMEM_ROOT", "agent": "FSMEM_AGENT"}  # the group's envvars, used when the option is not given
_TEXT_ARGUMENT = re.compile(r"^-\s")  # a Markdown bullet is an argument, not an option (FsmemCommand)
_WHOLE = re.compile(r"[0-9]+")


class Grep:
    """A grep command line, parsed: the memory it opens, --json, and the arguments of `Memory.grep`."""

    def __init__(self, root: str | None, agent: str | None, as_json: bool, arguments: dict[str, Any]):
        self.root, self.agent, self.as_json, self.arguments = root, agent, as_json, arguments


def parse(argv: list[str]) -> Grep | None:
    """The grep that `argv` (the words after `fsmem`) asks for, or None when click should read it."""
    chosen: dict[str, str | None] = {}
    words = iter(argv)
    at_command = False
    for word in words:  # the group's options, then the command's name
        name, value = _split(word)
        if name in GLOBAL:
            value = value if value is not None else next(words, None)
            if not _plain(value):
                return None
            chosen[GLOBAL[name]] = value
            continue
        at_command = word == "grep"
        break
    if not at_command:
        return None
    arguments: dict[str, Any] = {
        "pattern": None,
        **{k: list(v) if isinstance(v, list) else v for k, v in DEFAULTS.items()},
    }
    as_json = False
    positional: list[str] = []
    for word in words:
        if word.startswith("-") and len(word) > 1 and not (_TEXT_ARGUMENT.match(word) or "\n" in word):
            name, value = _split(word)
            if name in FLAGS or name == "--json":
                if value is not None:
                    return None  # click: "does not take a value"
                if name == "--json":
                    as_json = True
                else:
                    arguments[FLAGS[name]] = True
                continue
            if name in GLOBAL or name in VALUES:
                value = value if value is not None else next(words, None)
                if not _plain(value):
                    return None
                assert value is not None
                if name in GLOBAL:
                    chosen[GLOBAL[name]] = value
                    continue
                parameter, kind = VALUES[name]
                if kind == "int":
                    if not _WHOLE.fullmatch(value):
                        return None
                    arguments[parameter] = int(value)
                elif kind == "list":
                    arguments[parameter].append(value)
                else:
                    arguments[parameter] = value
                continue
            return None  # --help, `--`, combined flags, a typo: click's to answer
        if word == "-":
            return None
        positional.append(word)
    if not positional:
        return None  # click: "Missing argument 'PATTERN'"
    arguments["pattern"], arguments["paths"] = positional[0], positional[1:]
    for key, variable in ENV.items():
        if key not in chosen:
            chosen[key] = os.environ.get(variable) or None
    return Grep(chosen["root"], chosen["agent"], as_json, arguments)


def _split(word: str) -> tuple[str, str | None]:
    """`--name=value` as its name and value; any other word as itself, without a value."""
    if word.startswith("--") and "=" in word:
        name, value = word.split("=", 1)
        return name, value
    return word, None


def _plain(value: str | None) -> bool:
    """A value click takes as it is (one that starts with '-' is left to click's judgement)."""
    return value is not None and not value.startswith("-")


def run(grep: Grep, *, whole_process: bool = False) -> NoReturn:
    """Run the grep and exit as the click command does: 0 found, 1 nothing found, 2 (or 130) an error.

    `whole_process`: this grep is all the process does (`fsmem` from the shell), so the garbage collector
    is left out of its imports, which make no garbage, and of its exit (`_settled`).
    """
    from fsmem.cli import early
    from fsmem.store import rg_command

    if whole_process:
        gc.disable()
    try:
        if "fsmem.store.feed" not in sys.modules:  # not in a watcher answering (fsmem.cli.answering): it narrows
            # rg runs on the other core while the rest is imported
            early.start(grep.root, grep.arguments, max_line_chars=MAX_LINE_CHARS)
    except Exception:  # only a head start: whatever stops it, the pass below runs rg and says what is wrong
        rg_command.discard()
    try:
        _run(grep, whole_process)
    finally:
        rg_command.discard()  # one that no pass claimed
        if whole_process:
            gc.freeze()  # see `_settled`


def _settled() -> None:
    """The modules are imported: what exists now lives as long as the process, so the collector need never look
    at it again. Collections during the imports were a measurable share of a grep's CPU, and the interpreter's
    last collections of every module's objects at exit delayed the process's end after the answer was printed;
    the objects are freed with the process (its memory closed by then). The grep itself runs with the collector on."""
    gc.freeze()
    gc.enable()


def _run(grep: Grep, whole_process: bool) -> NoReturn:
    from fsmem import faces
    from fsmem.cli.printing import boundary, print_within

    def answer() -> int:
        with faces.speaking(faces.CLI):
            from fsmem.cli import rendezvous
            from fsmem.memory import Memory  # noqa: F401  (imported before the collector is settled)

            if whole_process:
                from fsmem.operations import reads  # noqa: F401  (what Memory.grep loads on its first call)

                _settled()
            memory = rendezvous.open_memory(grep.root, grep.agent)
            arguments = grep.arguments
            try:
                empty = print_within(
                    memory,
                    "grep",
                    arguments["max_tokens"],
                    lambda room: memory.grep(**{**arguments, "max_tokens": room}),
                    grep.as_json,
                    empty=lambda result: bool(result.empty),
                )
            finally:
                if rendezvous.closes(memory):
                    memory.close()
        return 1 if empty else 0

    boundary(answer, grep.as_json)
