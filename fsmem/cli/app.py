"""The click group behind `fsmem`: global options, and commands loaded lazily from their modules."""

from __future__ import annotations

import importlib
import io
import sys
from typing import NoReturn

import click

from fsmem import __version__, faces
from fsmem.cli import COMMANDS
from fsmem.cli.options import AGENT_HELP, ROOT_HELP, did_you_mean, not_empty, parse_suggesting
from fsmem.cli.printing import Failure, boundary, cut, echo, watch_progress


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return parse_suggesting(self, ctx, lambda: super(LazyGroup, self).parse_args(ctx, args))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command is answered with the commands it could have meant (`fsmem serach`: 'search')."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            if not ctx.resilient_parsing:
                raise click.UsageError(f"No such command {name!r}.{did_you_mean(name, sorted(COMMANDS))}", ctx=ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        module = importlib.import_module(f"fsmem.cli.{module_name}")
        return getattr(module, attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--root",
    metavar="DIR",
    envvar="FSMEM_ROOT",
    callback=not_empty,
    help=ROOT_HELP,
)
@click.option(
    "--agent",
    metavar="NAME",
    envvar="FSMEM_AGENT",
    callback=not_empty,
    help=AGENT_HELP,
)
@click.version_option(version=__version__, prog_name="fsmem")
@click.pass_context
def cli(ctx: click.Context, root: str | None, agent: str | None) -> None:
    """Shared memory for agents and humans: Markdown files with YAML front matter.

    Exit codes follow grep: 0 found, 1 nothing found, 2 error.
    """
    ctx.obj = {"root": root, "agent": agent}
    ctx.with_resource(faces.speaking(faces.CLI))  # until the command ends, answers say how to go on in flags


def run(argv: list[str] | None = None) -> NoReturn:
    """Run the command behind the CLI's one error boundary (`fsmem.cli.printing.boundary`), which words click's
    usage errors as click does: never exit 1, which means "nothing found"."""
    args = sys.argv[1:] if argv is None else argv
    watch_progress()
    boundary(lambda: cli.main(args=args, prog_name="fsmem", standalone_mode=False), _asks_for_json(args), known=_click)


def _click(exc: Exception) -> Failure | None:
    """A click error as the boundary words it: click's own words, with what was typed in them."""
    if isinstance(exc, click.exceptions.Abort):
        return "aborted", 130, "fsmem: aborted"
    if isinstance(exc, click.ClickException):  # usage errors, and a missing extra
        shown = io.StringIO()  # printed through `visible` like the rest
        exc.show(file=shown)
        echo(cut(shown.getvalue()), err=True, nl=False)
        return exc.format_message(), max(exc.exit_code, 2), None
    return None


def _asks_for_json(args: list[str]) -> bool:
    """Whether the command line holds the --json flag (before a `--` that ends the options)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False
