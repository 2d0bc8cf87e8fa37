"""`fsmem sync`: a thin adapter over Memory.sync, and over Memory.setup_clone for a clone with no memory yet.

log, show, diff, restore and revert are built from their specs (`fsmem.cli.generated`). None of them
imports git machinery at start-up: the Memory method does, once it knows the memory has history.
"""

from __future__ import annotations

import click

from fsmem.cli.options import command, emit, open_memory, output_option


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
