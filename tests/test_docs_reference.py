"""The generated reference pages hold every command, option and tool, so the reference cannot drift from the code.

`docs/_ext/fsmem_reference.py` writes the CLI reference from the click tree
and the tool reference from the registry on every `make docs`; here the
Markdown it generates is checked against the same sources, walked
independently: every command has its own heading, every option that
`--help` shows is in that command's section with its help, and every tool
has its heading, the description a model reads, and its JSON schema.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import click
import pytest

from fsmem.agents import tools  # noqa: F401  (registers the built-in tools)
from fsmem.agents.registry import REGISTRY
from fsmem.cli import cli

EXT = Path(__file__).resolve().parent.parent / "docs" / "_ext" / "fsmem_reference.py"


@pytest.fixture(scope="module")
def reference():
    spec = importlib.util.spec_from_file_location("fsmem_reference", EXT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def walk(group: click.Group, ctx: click.Context):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        yield command, sub
        if isinstance(command, click.Group):
            yield from walk(command, sub)


def sections(markdown: str) -> dict[str, str]:
    """Heading text -> the text under it, up to the next heading of any level (outside fences)."""
    found: dict[str, str] = {}
    current, fenced = "", False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"^#{1,3} ", line):
            current = line.lstrip("#").strip()
            found[current] = ""
        elif current:
            found[current] += line + "\n"
    return found


def test_every_command_has_its_section_with_its_help_and_every_option(reference):
    page = sections(reference.cli_markdown())
    root = click.Context(cli, info_name="fsmem")
    commands = list(walk(cli, root))
    assert len(commands) >= 30
    for command, ctx in commands:
        section = page.get(ctx.command_path)
        assert section is not None, f"no section for {ctx.command_path}"
        first = (command.help or "").strip().split("\n\n")[0].split()[0]
        assert reference.text(first) in section, ctx.command_path
        assert f"```text\n{ctx.command_path} " in section, f"{ctx.command_path}: no usage line"
        for param in command.get_params(ctx):
            if not isinstance(param, click.Option) or param.hidden or {"--root", "--agent", "--help"} & set(param.opts):
                continue  # the global options are documented once; -h and --help on every command
            spelling, help_text = param.get_help_record(ctx) or ("", "")
            for name in spelling.split(", "):
                assert f"`{name}`" in section, f"{ctx.command_path}: no option {name}"
            assert reference.text(help_text) in section, f"{ctx.command_path} {spelling}: no help"


def test_the_global_options_are_documented_once(reference):
    page = sections(reference.cli_markdown())
    for option in ("`--root DIR`", "`--agent NAME`", "`--version`"):
        assert option in page["Global options"]
    assert all("`--root DIR`" not in text for name, text in page.items() if name != "Global options")


def test_hidden_and_removed_spellings_stay_out_of_the_reference(reference):
    markdown = reference.cli_markdown()
    hidden = [
        name
        for command, ctx in walk(cli, click.Context(cli, info_name="fsmem"))
        for param in command.params
        if isinstance(param, click.Option) and param.hidden
        for name in param.opts
    ]
    removed_in_0_3 = ["--k", "--quiet", "--context", "--context-file"]
    assert not set(hidden) & set(removed_in_0_3)  # gone, not hidden: typing one is a usage error
    for name in hidden + removed_in_0_3:
        assert f"`{name}`" not in markdown and f"`{name} " not in markdown, name
    assert "## fsmem eval\n" not in markdown  # the renamed command is gone too


def test_every_tool_has_its_description_and_schema(reference):
    page = sections(reference.tools_markdown())
    assert len(REGISTRY) >= 9
    for tool in REGISTRY.values():
        section = page.get(tool.name)
        assert section is not None, f"no section for the tool {tool.name}"
        assert f"```text\n{tool.description}\n```" in section, tool.name
        schema = re.search(r"```json\n(.*?)\n```", section, re.S)
        assert schema and json.loads(schema.group(1)) == tool.parameters, tool.name
        for argument in tool.parameters["properties"]:
            assert f"| `{argument}` |" in section, (tool.name, argument)
        assert ("writes" in section.strip().split("\n\n")[0]) == tool.writes, tool.name


def test_a_history_tool_says_when_it_is_offered(reference):
    page = sections(reference.tools_markdown())
    assert "offered only when the memory has history" in page["log"]
    assert "offered only when" not in page["search"]  # `requires="search"` names a method every Memory has
