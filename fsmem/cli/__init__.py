"""The `fsmem` command: a thin skin over `fsmem.Memory`.

Commands are loaded lazily from their modules (`COMMANDS`), so `fsmem read`
pays neither for MCP, watchdog nor the search index at start-up. `main` is the
one error boundary: library errors become one line on stderr and exit code 2.
"""

from __future__ import annotations

import importlib
import sys

import click

from fsmem.errors import FsmemError

# command name -> "module:attribute" under fsmem.cli
COMMANDS: dict[str, str] = {
    "init": "core:init_cmd",
    "ls": "core:ls_cmd",
    "grep": "core:grep_cmd",
    "read": "core:read_cmd",
    "note": "core:note_cmd",
    "write": "core:write_cmd",
    "edit": "core:edit_cmd",
    "rm": "core:rm_cmd",
    "mv": "core:mv_cmd",
    "check": "core:check_cmd",
    "watch": "watch:watch_cmd",
    "tools": "agent:tools_cmd",
    "mcp": "agent:mcp_cmd",
    "stats": "agent:stats_cmd",
    "context": "agent:context_cmd",
    "consolidate": "consolidate:consolidate_cmd",
    "index": "consolidate:index_cmd",
    "search": "search:search_cmd",
    "recall": "search:recall_cmd",
    "eval": "search:eval_cmd",
    "import": "search:import_group",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        module = importlib.import_module(f"{__name__}.{module_name}")
        return getattr(module, attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--root",
    metavar="DIR",
    envvar="FSMEM_ROOT",
    help="Memory root (default: $FSMEM_ROOT, else the nearest folder above holding fsmem.yaml).",
)
@click.option(
    "--agent",
    metavar="NAME",
    envvar="FSMEM_AGENT",
    help="Agent whose budget (and read-only flag) from fsmem.yaml applies.",
)
@click.version_option(package_name="fsmem")
@click.pass_context
def cli(ctx: click.Context, root: str | None, agent: str | None) -> None:
    """Shared memory for agents and humans: Markdown files with YAML front matter.

    Exit codes follow grep: 0 found, 1 nothing found, 2 error.
    """
    ctx.obj = {"root": root, "agent": agent}


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the command, turning every fsmem error into one line and exit 2."""
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
