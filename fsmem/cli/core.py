"""The core commands: init, ls, grep, read, note, write, edit, rm, mv, check."""

from __future__ import annotations

import sys

import click

from fsmem.budget import echo
from fsmem.cli.options import (
    command,
    emit,
    emit_within,
    filter_options,
    if_version_option,
    include_superseded_option,
    max_tokens_option,
    open_memory,
    output_option,
    page_options,
)
from fsmem.errors import InvalidArgument
from fsmem.store import given


@command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option(
    "--git",
    is_flag=True,
    help="With history: a git repository (or the work tree DIRECTORY is in), every change a commit. "
    "On an existing memory, turns history on.",
)
@output_option
def init_cmd(directory: str, git: bool, as_json: bool) -> None:
    """Make DIRECTORY a memory: a new folder gets the template; a folder of Markdown (an Obsidian vault) gets only
    what it lacks, its files unchanged. Never overwrites a memory; --git gives it history."""
    import os
    from pathlib import Path

    from fsmem.memory import Memory, template_dir
    from fsmem.store import template

    target = Path(directory).expanduser()
    existing = target.is_dir() and any(name != ".git" for name in os.listdir(target))
    adding = template.missing(template_dir(), target) if target.is_dir() else []
    memory = Memory.init(directory, git=git)
    emit(InitResult(str(memory.root), directory, git, added=adding if existing else None), as_json)


class InitResult:
    def __init__(self, root: str, given: str, git: bool = False, added: list[str] | None = None):
        self.root, self.given, self.git = root, given, git
        self.added = added  # None: a new memory from the template; else what a folder already in use was given

    def to_dict(self) -> dict[str, object]:
        return {"root": self.root, "git": self.git, "added": self.added}

    def to_text(self) -> str:
        import shlex

        history = " with history (git)" if self.git else ""
        hint = f"try: fsmem --root {shlex.quote(self.given)} ls"
        if self.added is None:
            return f"created a memory{history} in {self.root}; {hint}"
        added = ", ".join(self.added) or "nothing"
        kept = "no file already there was changed"
        if self.git:
            kept += " (history adds its lines to .gitignore and .gitattributes)"
        return f"made {self.root} a memory{history}: added {added}; {kept}; {hint}"


@command("ls")
@click.argument("path", required=False)
@click.option("--depth", type=int, metavar="N", help="Only files at most N folders below PATH (1 = directly in it).")
@filter_options
@page_options
@output_option
@click.pass_context
def ls_cmd(ctx, path, depth, type_, tag, updated_after, offset, max_results, max_tokens, as_json):
    """List memory files: path, tokens, type, updated, title and description."""
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.ls(
            path,
            depth=depth,
            type=type_,
            tag=list(tag),
            updated_after=updated_after,
            offset=offset,
            max_results=max_results,
            max_tokens=room,
        ),
        as_json,
        empty=lambda result: result.total == 0,
    )


@command("grep")
@click.argument("pattern")
@click.argument("paths", nargs=-1)
@click.option("-i", "--ignore-case", is_flag=True, help="Match case-insensitively.")
@click.option("-F", "--fixed-strings", is_flag=True, help="Treat PATTERN as plain text, not a regular expression.")
@click.option("-w", "--word", is_flag=True, help="Match whole words only.")
@click.option("-C", "--context-lines", type=int, metavar="N", help="Also show N lines before and after each match.")
@filter_options
@include_superseded_option
@page_options
@output_option
@click.pass_context
def grep_cmd(
    ctx,
    pattern,
    paths,
    ignore_case,
    fixed_strings,
    word,
    context_lines,
    type_,
    tag,
    updated_after,
    include_superseded,
    offset,
    max_results,
    max_tokens,
    as_json,
):
    """Search memory files for PATTERN (ripgrep syntax); the answer says how many matches exist in all."""
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.grep(
            pattern,
            list(paths),
            ignore_case=ignore_case,
            fixed_strings=fixed_strings,
            word=word,
            context_lines=context_lines or 0,
            type=type_,
            tag=list(tag),
            updated_after=updated_after,
            include_superseded=include_superseded,
            offset=offset,
            max_results=max_results,
            max_tokens=room,
        ),
        as_json,
        empty=lambda result: result.total == 0,
    )


@command("read")
@click.argument("path")
@click.option("--lines", metavar="A:B", help="Only lines A to B (A:, or a single line A).")
@click.option("--section", metavar="HEADING", help="Only the section under this heading.")
@click.option("--outline", is_flag=True, help="List the headings (within --lines) with their line ranges and tokens.")
@include_superseded_option
@max_tokens_option
@output_option
@click.pass_context
def read_cmd(ctx, path, lines, section, outline, include_superseded, max_tokens, as_json):
    """Show PATH with line numbers, cut at the token budget with the next range named (exit 1: no line to show)."""
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.read(
            path,
            lines=lines,
            section=section,
            outline=outline,
            include_superseded=include_superseded,
            max_tokens=room,
        ),
        as_json,
        empty=lambda result: result.empty,
    )


STDIN_LIMIT = 64 * given.MiB  # a note or a body read from standard input


def _text_argument(text: str) -> str:
    if text == "-":
        return given.read_stdin(what="the note", limit=STDIN_LIMIT)
    return text


@command("note")
@click.argument("text")
@click.option(
    "--session",
    metavar="ID",
    envvar="FSMEM_SESSION",
    help="Session id (default: $FSMEM_SESSION, the agent name, or 'default').",
)
@click.option(
    "--subject",
    metavar="SUBJECT",
    help="File the note under '## SUBJECT', e.g. 'people/Adam Smith' or 'topic/Billing'.",
)
@output_option
@click.pass_context
def note_cmd(ctx, text, session, subject, as_json):
    """Append TEXT (or stdin, with -) to today's session note; write facts as "- key: value"."""
    emit(open_memory(ctx).note(_text_argument(text), session=session, subject=subject), as_json)


def _parse_sets(pairs: tuple[str, ...]) -> dict:
    import yaml

    fields = {}
    for pair in pairs:
        if "=" not in pair:
            raise InvalidArgument(f"--set takes key=value, not {echo(pair)}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if not key.replace("_", "").replace("-", "").isalnum():
            raise InvalidArgument(f"--set: {echo(key)} is not a valid field name")
        try:
            if ("&" in value or "*" in value) and _has_alias(yaml, value):
                raise InvalidArgument(
                    f"--set {key}: YAML anchors and aliases (&name, *name) are not taken in a value; "
                    f"to set it as text, quote it: --set '{key}=\"…\"'"
                )
            parsed = yaml.safe_load(value) if value.strip() else ""
        except (yaml.YAMLError, ValueError):  # ValueError: a date-shaped value that is no date, 2026-13-45
            parsed = value
        except RecursionError:
            raise InvalidArgument(f"--set {key}: the value is nested too deeply; give a plain value") from None
        if isinstance(parsed, dict):
            parsed = value  # 'a: b' is meant as text, not a nested mapping
        fields[key] = parsed
    return fields


def _has_alias(yaml, value: str) -> bool:
    """True when the YAML value names an anchor or an alias: `&a [*a]` would be a list that holds itself."""
    try:
        return any(isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) for event in yaml.parse(value))
    except yaml.YAMLError:
        return False


@command("write")
@click.argument("path")
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Set a front matter field (YAML value; repeatable)."
)
@click.option(
    "--keep-body",
    is_flag=True,
    help="Do not read stdin; only set fields (also the case when stdin is empty or a terminal).",
)
@if_version_option
@output_option
@click.pass_context
def write_cmd(ctx, path, sets, keep_body, expected_version, as_json):
    """Create or replace PATH with the body read from stdin, setting front matter fields."""
    body = None if keep_body or sys.stdin.isatty() else given.read_stdin(what="the body", limit=STDIN_LIMIT)
    if body == "":
        body = None  # an empty stdin never wipes a stored body
    emit(open_memory(ctx).write(path, body, set=_parse_sets(sets), expected_version=expected_version), as_json)


@command("edit")
@click.argument("path")
@click.option("--old", required=True, metavar="TEXT", help="Exact text to replace; it must occur exactly once.")
@click.option("--new", required=True, metavar="TEXT", help="Replacement text.")
@if_version_option
@output_option
@click.pass_context
def edit_cmd(ctx, path, old, new, expected_version, as_json):
    """Replace the one occurrence of --old in PATH with --new."""
    emit(open_memory(ctx).edit(path, old=old, new=new, expected_version=expected_version), as_json)


@command("rm")
@click.argument("path")
@output_option
@click.pass_context
def rm_cmd(ctx, path, as_json):
    """Remove a memory file (or an empty folder)."""
    emit(open_memory(ctx).rm(path), as_json)


@command("mv")
@click.argument("source")
@click.argument("target")
@output_option
@click.pass_context
def mv_cmd(ctx, source, target, as_json):
    """Move or rename a memory file; never overwrites."""
    emit(open_memory(ctx).mv(source, target), as_json)


@command("check")
@click.argument("path", required=False)
@output_option
@click.pass_context
def check_cmd(ctx, path, as_json):
    """Validate every file; print each problem as path:line: message (exit 1 if any)."""
    result = open_memory(ctx).check(path)
    emit(result, as_json, empty=not result.empty)
