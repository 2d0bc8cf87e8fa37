"""The core commands: init, ls, grep, read, note, write, edit, rm, mv, check."""

from __future__ import annotations

import sys

import click

from fsmem.cli.output import emit, json_option, open_memory
from fsmem.errors import InvalidArgument
from fsmem.memory import Memory

_FILTERS = [
    click.option(
        "--type",
        "type_",
        metavar="T",
        help="Only files whose front matter says type: T (semantic, episodic, procedural).",
    ),
    click.option("--tag", multiple=True, metavar="T", help="Only files tagged T (repeat to require several)."),
    click.option("--updated-after", metavar="DATE", help="Only files updated after this ISO 8601 date or time."),
]


def filter_options(function):
    for option in reversed(_FILTERS):
        function = option(function)
    return function


def budget_options(function):
    function = click.option(
        "--max-tokens", type=int, metavar="N", help="Token cap for this answer (at most the agent's budget)."
    )(function)
    function = click.option(
        "--max-results", type=int, metavar="N", help="Row cap for this answer (at most the agent's budget)."
    )(function)
    return function


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init_cmd(directory: str) -> None:
    """Create a new memory in DIRECTORY from the template (never overwrites one)."""
    memory = Memory.init(directory)
    click.echo(f"created a memory in {memory.root}; try: fsmem --root {directory} ls")


@click.command("ls")
@click.argument("path", required=False)
@click.option("--depth", type=int, metavar="N", help="Only files at most N folders below PATH (1 = directly in it).")
@filter_options
@budget_options
@json_option
@click.pass_context
def ls_cmd(ctx, path, depth, type_, tag, updated_after, max_results, max_tokens, as_json):
    """List memory files: path, tokens, type, updated, title and description."""
    result = open_memory(ctx).ls(
        path,
        depth=depth,
        type=type_,
        tag=list(tag),
        updated_after=updated_after,
        max_results=max_results,
        max_tokens=max_tokens,
    )
    emit(result, as_json, empty=result.total == 0)


@click.command("grep")
@click.argument("pattern")
@click.argument("paths", nargs=-1)
@click.option("-i", "--ignore-case", is_flag=True, help="Match case-insensitively.")
@click.option("-F", "--fixed-strings", is_flag=True, help="Treat PATTERN as plain text, not a regular expression.")
@click.option("-w", "--word", is_flag=True, help="Match whole words only.")
@click.option("-C", "--context", type=int, default=0, metavar="N", help="Show N lines around each match.")
@filter_options
@click.option("--include-superseded", is_flag=True, help="Also match facts that a newer fact superseded.")
@click.option(
    "--offset", type=int, default=0, metavar="N", help="Skip the first N matches (to page through a cut answer)."
)
@budget_options
@json_option
@click.pass_context
def grep_cmd(
    ctx,
    pattern,
    paths,
    ignore_case,
    fixed_strings,
    word,
    context,
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
    result = open_memory(ctx).grep(
        pattern,
        list(paths),
        ignore_case=ignore_case,
        fixed_strings=fixed_strings,
        word=word,
        context=context,
        type=type_,
        tag=list(tag),
        updated_after=updated_after,
        include_superseded=include_superseded,
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
    )
    emit(result, as_json, empty=result.total_matches == 0)


@click.command("read")
@click.argument("path")
@click.option("--lines", metavar="A:B", help="Only lines A to B (A:, or a single line A).")
@click.option("--section", metavar="HEADING", help="Only the section under this heading.")
@click.option("--outline", is_flag=True, help="List the headings with their line ranges and token counts.")
@click.option("--include-superseded", is_flag=True, help="Also show facts that a newer fact superseded.")
@click.option("--max-tokens", type=int, metavar="N", help="Token cap for this answer (at most the agent's budget).")
@json_option
@click.pass_context
def read_cmd(ctx, path, lines, section, outline, include_superseded, max_tokens, as_json):
    """Show PATH with line numbers, cut at the token budget with the next range named."""
    result = open_memory(ctx).read(
        path,
        lines=lines,
        section=section,
        outline=outline,
        include_superseded=include_superseded,
        max_tokens=max_tokens,
    )
    emit(result, as_json)


def _text_argument(text: str) -> str:
    if text == "-":
        return sys.stdin.read()
    return text


@click.command("note")
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
@json_option
@click.pass_context
def note_cmd(ctx, text, session, subject, as_json):
    """Append TEXT (or stdin, with -) to today's session note."""
    emit(open_memory(ctx).note(_text_argument(text), session=session, subject=subject), as_json)


def _parse_sets(pairs: tuple[str, ...]) -> dict:
    import yaml

    fields = {}
    for pair in pairs:
        if "=" not in pair:
            raise InvalidArgument(f"--set takes key=value, not {pair!r}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if not key.replace("_", "").replace("-", "").isalnum():
            raise InvalidArgument(f"--set: {key!r} is not a valid field name")
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except (yaml.YAMLError, ValueError):  # ValueError: a date-shaped value that is no date, 2026-13-45
            parsed = value
        if isinstance(parsed, dict):
            parsed = value  # 'a: b' is meant as text, not a nested mapping
        fields[key] = parsed
    return fields


@click.command("write")
@click.argument("path")
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Set a front matter field (YAML value; repeatable)."
)
@click.option(
    "--keep-body",
    is_flag=True,
    help="Do not read stdin; only set fields (also the case when stdin is empty or a terminal).",
)
@json_option
@click.pass_context
def write_cmd(ctx, path, sets, keep_body, as_json):
    """Create or replace PATH with the body read from stdin, setting front matter fields."""
    body = None if keep_body or sys.stdin.isatty() else sys.stdin.read()
    if body == "":
        body = None  # an empty stdin never wipes a stored body
    emit(open_memory(ctx).write(path, body, set=_parse_sets(sets)), as_json)


@click.command("edit")
@click.argument("path")
@click.option("--old", required=True, metavar="TEXT", help="Exact text to replace; it must occur exactly once.")
@click.option("--new", required=True, metavar="TEXT", help="Replacement text.")
@json_option
@click.pass_context
def edit_cmd(ctx, path, old, new, as_json):
    """Replace the one occurrence of --old in PATH with --new."""
    emit(open_memory(ctx).edit(path, old=old, new=new), as_json)


@click.command("rm")
@click.argument("path")
@json_option
@click.pass_context
def rm_cmd(ctx, path, as_json):
    """Remove a memory file (or an empty folder)."""
    emit(open_memory(ctx).rm(path), as_json)


@click.command("mv")
@click.argument("source")
@click.argument("target")
@json_option
@click.pass_context
def mv_cmd(ctx, source, target, as_json):
    """Move or rename a memory file; never overwrites."""
    emit(open_memory(ctx).mv(source, target), as_json)


@click.command("check")
@click.argument("path", required=False)
@json_option
@click.pass_context
def check_cmd(ctx, path, as_json):
    """Validate every file; print each problem as path:line: message (exit 1 if any)."""
    result = open_memory(ctx).check(path)
    emit(result, as_json, empty=not result.empty)
