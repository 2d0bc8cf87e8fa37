"""The click group behind `fsmem`: global options, commands loaded lazily from their modules, and the error boundary."""

from __future__ import annotations

import importlib
import io
import sys
from typing import NoReturn

import click

from fsmem import __version__, faces
from fsmem.cli import COMMANDS
from fsmem.cli.options import AGENT_HELP, ROOT_HELP, did_you_mean, parse_suggesting
from fsmem.cli.printing import echo, json_error, watch_progress
from fsmem.errors import FsmemError, translated


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
    ctx.with_resource(faces.speaking(faces.CLI))  # until the command ends, answers say how to go on in flags


def run(argv: list[str] | None = None) -> None:
    """Run the command, turning every error into one line and exit 2: the CLI's one error boundary.

    A library error is its own message; an error from below the library (an
    OSError, input that is not text) is worded as every face words it
    (`fsmem.errors.translated`). With --json the error is also a JSON document
    on stdout, `{"error": {"message": ..., "exit": 2}}`, so a caller that
    parses stdout learns why there is no answer.
    """
    args = sys.argv[1:] if argv is None else argv
    as_json = _asks_for_json(args)
    watch_progress()
    try:
        code = cli.main(args=args, prog_name="fsmem", standalone_mode=False)
    except FsmemError as exc:
        _fail(str(exc), exc.exit_code, as_json)
    except click.exceptions.Abort:
        _fail("aborted", 130, as_json, line="fsmem: aborted")
    except click.ClickException as exc:  # usage errors, and a missing extra: never exit 1, which means "nothing found"
        shown = io.StringIO()  # click's words, with what was typed in them, printed through `visible` like the rest
        exc.show(file=shown)
        echo(shown.getvalue(), err=True, nl=False)
        _fail(exc.format_message(), max(exc.exit_code, 2), as_json, line=None)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except KeyboardInterrupt:
        _fail("interrupted", 130, as_json, line=None)
    except Exception as exc:  # the last resort of the one boundary: still one line, never a traceback
        error = translated(exc)
        _fail(str(error) if error is not None else f"{type(exc).__name__}: {exc}", 2, as_json)
    sys.exit(code if isinstance(code, int) else 0)


def _asks_for_json(args: list[str]) -> bool:
    """Whether the command line holds the --json flag (before a `--` that ends the options)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _fail(message: str, code: int, as_json: bool, *, line: str | None = "") -> NoReturn:
    """End a failed command: its line on stderr (unless already shown), the JSON error on stdout with --json."""
    try:
        if line is not None:
            echo(line or f"fsmem: error: {message}", err=True)
        if as_json:
            echo(json_error(message, code))
    except OSError:  # a closed stdout or stderr: the exit code still says it
        pass
    sys.exit(code)
