"""The options every command shares, the command class that applies them, and how an answer is printed.

The options of a declared operation come from its spec (`fsmem.cli.generated`): a parameter that several
operations share is one `fsmem.spec.params` declaration, so `--max-tokens` or `--offset` means the same
thing, with the same help, everywhere. `--root` and `--agent` are accepted before the subcommand and after
it; `--json` is one `output_option`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from fsmem.cli.printing import print_answer

if TYPE_CHECKING:
    from fsmem.memory import Memory

F = TypeVar("F", bound=Callable[..., Any])

# An argument such as "- employer: Globex" (the fact syntax) starts with '-' but is no option.
_TEXT_ARGUMENT = re.compile(r"^-\s")
_PROTECTED = "\x00fsmem-text-"  # argv can never hold a NUL, so this cannot clash with a real argument


def did_you_mean(word: str, choices: list[str]) -> str:
    """The hint for a mistyped name (" Did you mean 'x'?", or ""): the names it starts, else the closest spellings.

    click's own suggestion (difflib alone) offers '--tag' for '--max'; a prefix
    of real names is what a user who stopped typing meant.
    """
    import difflib

    stem = word.rstrip("-")
    found = [c for c in choices if len(stem) >= 2 and c.startswith(word) and c != word]
    found = sorted(found) if found else difflib.get_close_matches(word, choices, n=3)
    if not found:
        return ""
    if len(found) == 1:
        return f" Did you mean {found[0]!r}?"
    return f" Did you mean one of: {', '.join(repr(c) for c in found)}?"


def option_names(command: click.Command, ctx: click.Context) -> list[str]:
    """The long options a user may type for `command` (hidden ones left out)."""
    return [
        name
        for param in command.get_params(ctx)
        if isinstance(param, click.Option) and not param.hidden
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    ]


def parse_suggesting(command: click.Command, ctx: click.Context, parse: Callable[[], list[str]]) -> list[str]:
    """Run click's parse; an unknown option is answered with the options it could have meant."""
    try:
        return parse()
    except click.NoSuchOption as exc:
        if not exc.option_name.startswith("--"):
            raise
        hint = did_you_mean(exc.option_name, option_names(command, ctx))
        raise click.NoSuchOption(exc.option_name, f"No such option {exc.option_name!r}.{hint}", ctx=ctx) from None


class FsmemCommand(click.Command):
    """A command whose text arguments may start with '- ' (a Markdown bullet) without being read as options."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        kept: dict[str, str] = {}
        protected = []
        for arg in args:
            if _TEXT_ARGUMENT.match(arg) or ("\n" in arg and arg.startswith("-")):
                key = f"{_PROTECTED}{len(kept)}"
                kept[key] = arg
                protected.append(key)
            else:
                protected.append(arg)
        rest = parse_suggesting(self, ctx, lambda: super(FsmemCommand, self).parse_args(ctx, protected))
        if kept:
            ctx.params = {name: _restore(value, kept) for name, value in ctx.params.items()}
        return rest


def _restore(value: Any, kept: dict[str, str]) -> Any:
    if isinstance(value, str):
        return kept.get(value, value)
    if isinstance(value, tuple):
        return tuple(_restore(item, kept) for item in value)
    if isinstance(value, list):
        return [_restore(item, kept) for item in value]
    return value


def command(name: str, **kwargs: Any) -> Callable[[F], click.Command]:
    """A subcommand: the fsmem command class, with --root and --agent accepted after its name too."""

    def decorate(function: F) -> click.Command:
        return click.command(name, cls=FsmemCommand, **kwargs)(global_options(function))

    return decorate


def not_empty(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--root "" or --agent "" (an unset shell variable, most often) is refused: it meant the default, so
    `fsmem --root "$MEMORY" rm notes/x.md` with MEMORY unset removed the file from the working folder's memory."""
    if value == "":
        raise click.BadParameter("is empty; leave the option out to mean the default", ctx=ctx, param=param)
    return value


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def store(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        value = not_empty(ctx, param, value)
        if value is not None:
            obj = ctx.find_root().obj
            if obj is None:
                obj = ctx.find_root().obj = {}
            obj[name] = value
        return value

    return store


ROOT_HELP = "Memory root (default: $FSMEM_ROOT, else the nearest folder above holding fsmem.yaml)."
AGENT_HELP = "The agent this command acts for: its budget and read-only flag from fsmem.yaml, and its name in logs."


def global_options(function: F) -> F:
    """--root and --agent, also after the subcommand (`fsmem ls --root X`), meaning what they mean before it."""
    function = click.option(
        "--agent", metavar="NAME", expose_value=False, is_eager=True, callback=_remember("agent"), help=AGENT_HELP
    )(function)
    function = click.option(
        "--root", metavar="DIR", expose_value=False, is_eager=True, callback=_remember("root"), help=ROOT_HELP
    )(function)
    return function


def scope_option(holder: str) -> Callable[[F], F]:
    """--path PREFIX (repeatable): the part of the memory the agent (or token) reaches; `holder` names it."""
    return click.option(
        "--path",
        "paths",
        multiple=True,
        metavar="PREFIX",
        help=f"Reach only files under PREFIX, such as topics/ (repeatable); outside, nothing exists for this {holder}.",
    )


def output_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")(function)


def max_tokens_option(function: F) -> F:
    """--max-tokens for a command that is not a declared operation (evaluate): the spec's words for it."""
    from fsmem.spec.params import MAX_TOKENS

    return click.option("--max-tokens", type=int, metavar="N", help=MAX_TOKENS.description + ".")(function)


def open_memory(ctx: click.Context) -> Memory:
    """The memory the command acts on (--root, --agent), opened once per command."""
    from fsmem.cli import rendezvous  # a process answering one-shot reads keeps its memories open

    opened = ctx.meta.get("fsmem.memory")
    if opened is None:
        obj = ctx.find_root().obj or {}
        opened = ctx.meta["fsmem.memory"] = rendezvous.open_memory(obj.get("root"), obj.get("agent"))
    return opened


def emit(result: Any, as_json: bool, *, empty: bool = False) -> None:
    """Print `result` and exit like grep: 0 when something was found, 1 when nothing was."""
    if print_answer(result, as_json, empty=empty):
        raise click.exceptions.Exit(1)
