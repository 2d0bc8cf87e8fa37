"""How every command prints: `--json` gives the result's stable dict, otherwise its text form.

Written once for all commands, and independent of whether stdout is a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from fsmem.memory import Memory


def json_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")(function)


def open_memory(ctx: click.Context) -> Memory:
    obj = ctx.find_root().obj or {}
    return Memory(obj.get("root"), agent=obj.get("agent"))


def emit(result: Any, as_json: bool, *, empty: bool = False) -> None:
    """Print `result` and exit like grep: 0 when something was found, 1 when nothing was."""
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(result.to_text())
    if empty:
        raise click.exceptions.Exit(1)
