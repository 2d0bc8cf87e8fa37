"""The CLI and tool reference pages, generated at build time so they cannot drift from the code.

`reference/cli.md` gets every command of the click tree (`fsmem.cli.cli`):
its usage line, its help and every option with its help, as `fsmem X --help`
prints them. `reference/tools.md` gets every tool of the registry
(`fsmem.agents.registry.REGISTRY`): the description a model reads and the JSON
schema of its arguments. `reference/modules.md`, the code map, gets every module
of the package with the first line of its docstring, layer by layer as
`tests/test_layout.py` declares them; a module without a docstring fails the
build. The pages hold only their introductions on disk; the
generated Markdown is appended when Sphinx reads them (`source-read`), and they
are read again on every build (`env-get-outdated`).

Run as a script, it prints a page's generated Markdown:
`python docs/_ext/fsmem_reference.py cli` (or `tools`, `modules`).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

GENERATED = {"reference/cli": "cli", "reference/tools": "tools", "reference/modules": "modules"}
CHECKOUT = Path(__file__).resolve().parents[2]
GLOBAL = ("--root", "--agent")  # stacked on every command, documented once
_SPECIAL = re.compile(r"([\\`*_\[\]<>|#{}~])")


def text(value: str) -> str:
    """Plain text as Markdown that renders it as written (its punctuation escaped)."""
    return _SPECIAL.sub(r"\\\1", value)


def code(value: str) -> str:
    """Inline code that holds any text, backticks included."""
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def paragraphs(help_text: str) -> list[str]:
    """A click help string as paragraphs (click rewraps them the same way)."""
    blocks = re.split(r"\n\s*\n", help_text.strip())
    return [" ".join(line.strip() for line in block.splitlines()) for block in blocks if block.strip()]


# -- the command line --------------------------------------------------------------------------------------


def commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[click.Command, click.Context]]:
    """Every command under `group`, depth first in name order, each with its context."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        yield command, sub
        if isinstance(command, click.Group):
            yield from commands(command, sub)


def option_rows(command: click.Command, ctx: click.Context, skip: tuple[str, ...]) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or set(param.opts) & {*skip, "--help"}:
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        spelling, help_text = record
        names = ", ".join(code(part.strip()) for part in spelling.split(", "))
        rows.append(f"| {names} | {text(help_text) if help_text else ''} |")
    return rows


def command_section(command: click.Command, ctx: click.Context) -> list[str]:
    path = ctx.command_path
    level = "#" * min(1 + path.count(" "), 3)
    lines = [f"{level} {path}", ""]
    lines += [f"{text(p)}\n" for p in paragraphs(command.help or "")]
    pieces = command.collect_usage_pieces(ctx)
    lines += ["```text", f"{path} {' '.join(pieces)}".rstrip(), "```", ""]
    rows = option_rows(command, ctx, GLOBAL)
    if rows:
        lines += ["| option | what it does |", "| --- | --- |", *rows, ""]
    if isinstance(command, click.Group):
        subs = [f"[{sub_ctx.command_path}](#{slug(sub_ctx.command_path)})" for _, sub_ctx in commands(command, ctx)]
        lines += [f"Its commands: {', '.join(subs)}.", ""]
    return lines


def slug(heading: str) -> str:
    """The anchor MyST gives a heading (GitHub's rule, for the plain words used here)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def cli_markdown() -> str:
    from fsmem.cli import cli

    root = click.Context(cli, info_name="fsmem")
    lines = ["## Global options", ""]
    lines += [f"{text(p)}\n" for p in paragraphs(cli.help or "")]
    lines += ["```text", f"fsmem {' '.join(cli.collect_usage_pieces(root))}", "```", ""]
    lines += [
        "Accepted before the command name, and after it on every command (`fsmem ls --root DIR`):",
        "",
        "| option | what it does |",
        "| --- | --- |",
        *option_rows(cli, root, ()),
        "",
        "Every command also takes `-h` and `--help`.",
        "",
    ]
    for command, ctx in commands(cli, root):
        lines += command_section(command, ctx)
    return "\n".join(lines)


# -- the agent tools ---------------------------------------------------------------------------------------


def schema_type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(code(json.dumps(v)) for v in prop["enum"])
    if prop.get("type") == "array":
        return f"array of {schema_type(prop.get('items', {}))}"
    return str(prop.get("type", "any"))


def tools_markdown() -> str:
    from fsmem.agents import builtin  # noqa: F401  (registers the built-in tools)
    from fsmem.agents.registry import REGISTRY
    from fsmem.memory import Memory

    lines: list[str] = []
    for tool in REGISTRY.values():
        offered = "writes: not offered to a read-only agent" if tool.writes else "reads"
        if tool.requires and not callable(getattr(Memory, tool.requires, None)):  # a method is always there
            needs = "the memory has history" if tool.requires == "history" else f"Memory.{tool.requires} is set"
            offered += f"; offered only when {needs}"
        lines += [f"## {tool.name}", "", f"*{offered}.*", "", "What the model reads:", "", "```text"]
        lines += [tool.description, "```", ""]
        properties = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", []))
        if properties:
            lines += ["| argument | type | required | default | what it is |", "| --- | --- | --- | --- | --- |"]
            for name, prop in properties.items():
                default = code(json.dumps(prop["default"])) if "default" in prop else ""
                minimum = f" (at least {prop['minimum']})" if "minimum" in prop else ""
                lines.append(
                    f"| {code(name)} | {schema_type(prop)}{minimum} | {'yes' if name in required else 'no'} "
                    f"| {default} | {text(prop.get('description', ''))} |"
                )
            lines.append("")
        lines += ["The JSON schema of its arguments:", "", "```json", json.dumps(tool.parameters, indent=2), "```", ""]
    return "\n".join(lines)


# -- the code map ------------------------------------------------------------------------------------------


def _layout() -> Any:
    """tests/test_layout.py, where the layers are declared once (the test enforces them, this page shows them)."""
    spec = importlib.util.spec_from_file_location("fsmem_layout", CHECKOUT / "tests" / "test_layout.py")
    assert spec is not None and spec.loader is not None
    layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layout)
    return layout


def summary(path: Path) -> str:
    """The first sentence of a module's docstring (its summary, which may wrap): what it holds, in its own words."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc or not doc.strip():
        raise ValueError(f"{path.relative_to(CHECKOUT)} has no docstring: say in one line what the module holds")
    first = " ".join(line.strip() for line in doc.strip().split("\n\n")[0].splitlines())
    sentence = re.match(r"(.+?[.!?])(?=\s+[A-Z`(]|$)", first)
    return sentence.group(1) if sentence else first


def modules_markdown() -> str:
    layout = _layout()
    by_layer: dict[int, list[str]] = {}
    found = layout.modules()
    for name in found:
        if name != "fsmem":
            by_layer.setdefault(layout.layer_of(name), []).append(name)
    lines = [f"The package itself, `fsmem`: {text(summary(found['fsmem']))}", ""]
    for index, (layer, _) in enumerate(layout.LAYERS):
        lines += [f"## {layer.capitalize()}", "", "| module | what it holds |", "| --- | --- |"]
        for name in sorted(by_layer.get(index, [])):
            path = found[name].relative_to(CHECKOUT).as_posix()
            lines.append(f"| {code(name)} ({code(path)}) | {text(summary(found[name]))} |")
        lines.append("")
    return "\n".join(lines)


MARKDOWN = {"cli": cli_markdown, "tools": tools_markdown, "modules": modules_markdown}


# -- the Sphinx side ---------------------------------------------------------------------------------------


def add_generated(app: Any, docname: str, source: list[str]) -> None:
    if docname in GENERATED:
        source[0] = source[0].rstrip("\n") + "\n\n" + MARKDOWN[GENERATED[docname]]() + "\n"


def always_outdated(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    return [name for name in GENERATED if name in env.found_docs and name not in added | changed]


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", add_generated)
    app.connect("env-get-outdated", always_outdated)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print(MARKDOWN[sys.argv[1]]())
