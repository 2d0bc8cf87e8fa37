"""How a command prints its answer within the token budget and exits like grep, whatever parsed its command line.

The click commands (`fsmem.cli.options`) print with `click.echo`; the lean `fsmem grep` (`fsmem.cli.lean`)
prints with `echo` below, which writes a text as `click.echo` does, so both print the same bytes.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsmem.memory import Memory

Echo = Callable[..., Any]

_ANSI = re.compile(r"\033\[[0-?]*[ -/]*[@-~]")  # click's: a terminal's escape codes, dropped when not printing to one


def echo(message: str, err: bool = False) -> None:
    """Print `message` and a newline as `click.echo` does: escape codes stripped unless the stream is a terminal."""
    stream: IO[str] = sys.stderr if err else sys.stdout
    try:
        terminal = stream.isatty()
    except Exception:  # a closed or odd stream: click counts it as no terminal
        terminal = False
    stream.write(message + "\n" if terminal else _ANSI.sub("", message + "\n"))
    stream.flush()


def print_within(
    memory: Memory,
    max_tokens: int | None,
    ask: Callable[[int | None], Any],
    as_json: bool,
    *,
    echo: Echo,
    empty: Callable[[Any], bool] = lambda result: False,
    reserve: bool = True,
) -> bool:
    """Print the answer of `ask(max_tokens)`; as text, it fits the token budget whole. True: exit 1 (nothing found).

    The budget (the agent's, or less with --max-tokens) caps what is printed,
    the lines that say what was left out and how to go on included, as it does
    for a tool: the content is asked for with room left for them, then asked
    again with less when the text still comes out over (`fsmem.budget.within`),
    and `fit_text` is the last net. An answer that fits its trailer in by
    itself (context, recall) passes `reserve=False`. A JSON document carries
    the same rows with its content within the budget; its keys are not counted.
    """
    if as_json:
        result = ask(max_tokens)
        return print_answer(result, True, echo=echo, empty=empty(result))
    from fsmem.budget import fit_text, within

    budget = memory.budget.narrowed(max_tokens).max_tokens
    result, text = within(ask, lambda answer: answer.to_text(), memory.tokens.count, budget, reserve=reserve)
    text, _ = fit_text(memory.tokens.count, memory.tokens.truncate, text, budget)
    echo(text)
    return empty(result)


def print_answer(result: Any, as_json: bool, *, echo: Echo, empty: bool = False) -> bool:
    """Print `result`, as JSON or as text; returns `empty` (exit 1 when nothing was found)."""
    if as_json:
        echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        echo(result.to_text())
    return empty


def json_error(message: str, code: int) -> str:
    """The JSON document a failed command prints on stdout with --json."""
    return json.dumps({"error": {"message": message, "exit": code}}, ensure_ascii=False)
