"""The click group behind `fsmem`: global options, commands loaded lazily from their modules, and the error boundary."""

from __future__ import annotations

import importlib
import sys

import click

from fsmem import __version__
from fsmem.cli import COMMANDS, RENAMED_COMMANDS
from fsmem.cli.options import AGENT_HELP, ROOT_HELP
from fsmem.errors import FsmemError


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in RENAMED_COMMANDS:
            new = RENAMED_COMMANDS[name]
            click.echo(
                f"fsmem: warning: 'fsmem {name}' is deprecated and goes away in fsmem 0.3; use 'fsmem {new}'", err=True
            )
            name = new
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
    help=ROOT_HELP,
)
@click.option(
    "--agent",
    metavar="NAME",
    envvar="FSMEM_AGENT",
    help=AGENT_HELP,
)
@click.version_option(version=__version__, prog_name="fsmem")
@click.pass_context
def cli(ctx: click.Context, root: str | None, agent: str | None) -> None:
    """Shared memory for agents and humans: Markdown files with YAML front matter.

    Exit codes follow grep: 0 found, 1 nothing found, 2 error.
    """
    ctx.obj = {"root": root, "agent": agent}


def run(argv: list[str] | None = None) -> None:
    """Run the command, turning every fsmem error into one line and exit 2: the one error boundary."""
    try:
        code = cli.main(args=argv, prog_name="fsmem", standalone_mode=False)
    except FsmemError as exc:
        click.echo(f"fsmem: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("fsmem: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code not in (0, 1) else exc.exit_code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        click.echo(f"fsmem: error: {exc.strerror or exc}{where}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except UnicodeError as exc:  # stdin or an argument that is not text
        click.echo(f"fsmem: error: input that is not valid UTF-8 text ({getattr(exc, 'reason', exc)})", err=True)
        sys.exit(2)
    except Exception as exc:  # the last resort of the one boundary: still one line, never a traceback
        click.echo(f"fsmem: error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
