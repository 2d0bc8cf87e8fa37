"""History commands: log, show, diff, restore, revert, sync. Thin adapters over the Memory methods of the same names.

None of them imports git machinery at start-up: the Memory method does, once
it knows the memory has history (otherwise the error says how to turn it on).
"""

from __future__ import annotations

import click

from fsmem.cli.options import (
    command,
    emit,
    emit_within,
    max_tokens_option,
    open_memory,
    output_option,
    page_options,
)

AT_HELP = "A revision (a commit id from fsmem log, HEAD~2, a branch) or a date: the last commit at or before it."


@command("log")
@click.argument("path", required=False)
@click.option("--since", metavar="DATE", help="Only commits at or after this ISO 8601 date or time.")
@page_options
@output_option
@click.pass_context
def log_cmd(ctx, path, since, offset, max_results, max_tokens, as_json):
    """Who changed what, when, with what message: one row per commit, newest first (PATH narrows to a file or folder).

    With --agent NAME, only the commits that agent made.
    """
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.log(
            path, since=since, agent=memory.agent, offset=offset, max_results=max_results, max_tokens=room
        ),
        as_json,
        empty=lambda result: result.total == 0,
    )


@command("show")
@click.argument("path")
@click.option("--at", "at", required=True, metavar="REV|DATE", help=AT_HELP)
@click.option("--lines", metavar="A:B", help="Only lines A to B (A:, or a single line A).")
@max_tokens_option
@output_option
@click.pass_context
def show_cmd(ctx, path, at, lines, max_tokens, as_json):
    """Show PATH as it was at a revision or date, line-numbered and cut at the token budget like read."""
    memory = open_memory(ctx)
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.show(path, at=at, lines=lines, max_tokens=room),
        as_json,
        empty=lambda result: result.read.empty,
    )


@command("diff")
@click.argument("rev", required=False)
@click.argument("path", required=False)
@click.option("--lines", metavar="A:B", help="Only lines A to B of the diff (A:, or a single line A).")
@max_tokens_option
@output_option
@click.pass_context
def diff_cmd(ctx, rev, path, lines, max_tokens, as_json):
    """Show what changed since REV (a revision, a date, or A..B; default: what is not committed yet), for PATH or
    the whole memory, as a unified diff cut at the token budget. A single argument that names a memory file or
    folder is taken as PATH. Exit 1 when there is no difference."""
    memory = open_memory(ctx)
    if rev is not None and path is None and _names_a_path(memory, rev):
        rev, path = None, rev
    emit_within(
        memory,
        max_tokens,
        lambda room: memory.diff(rev, path, lines=lines, max_tokens=room),
        as_json,
        empty=lambda result: result.empty,
    )


def _names_a_path(memory, argument: str) -> bool:
    if argument.lower().endswith((".md", ".markdown")):
        return True
    return ".." not in argument and (memory.root / argument).is_dir() and not argument.startswith("-")


@command("restore")
@click.argument("path")
@click.option("--at", "at", required=True, metavar="REV|DATE", help=AT_HELP)
@output_option
@click.pass_context
def restore_cmd(ctx, path, at, as_json):
    """Put PATH back as it was at a revision or date, as a new commit (nothing in the history is rewritten)."""
    emit(open_memory(ctx).restore(path, at=at), as_json)


@command("revert")
@click.argument("rev")
@output_option
@click.pass_context
def revert_cmd(ctx, rev, as_json):
    """Undo what commit REV changed, as a new commit; refused, naming the later commit, when one changed the same
    lines, facts or fields since."""
    emit(open_memory(ctx).revert(rev), as_json)


@command("sync")
@click.argument("remote", required=False)
@click.option(
    "--setup",
    is_flag=True,
    help="Only set this clone up: .gitignore, .gitattributes (merge=fsmem) and the merge driver in .git/config; "
    "what git clone put on disk (links, fsmem's own files, tracked .fsmem/ state) is checked and repaired.",
)
@click.option(
    "--accept-config",
    is_flag=True,
    help="Take the change to fsmem.yaml that the last sync showed and held (a person's approval; see docs/history.md).",
)
@click.option(
    "--repair",
    is_flag=True,
    help="Merge the remote without what the trust boundary refused, keeping this host's version of each "
    "(a commit on top, which the push sends: the remote is repaired for every host).",
)
@output_option
@click.pass_context
def sync_cmd(ctx, remote, setup, accept_config, repair, as_json):
    """Fetch from REMOTE (default: the branch's remote, else origin), merge, consolidate and push, retrying until
    the push goes through. What the remote sends is checked first: fsmem.yaml changes are held until
    --accept-config; links out, tracked .fsmem/ state and names fsmem refuses are refused (--repair). Exit 0
    when synced; 2 on error (no network: nothing is lost; another sync running; held or refused)."""
    if setup:  # a clone with no commit yet has no fsmem.yaml: it takes its remote's branch first
        from fsmem.memory import Memory

        obj = ctx.find_root().obj or {}
        emit(Memory.setup_clone(obj.get("root"), agent=obj.get("agent"), remote=remote), as_json)
        return
    emit(open_memory(ctx).sync(remote, setup=setup, accept_config=accept_config, repair=repair), as_json)
