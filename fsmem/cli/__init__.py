"""The `fsmem` command: a thin skin over `fsmem.Memory`.

Commands are loaded lazily from their modules (`COMMANDS`, made from the spec and the
hand-written list of `fsmem.spec.commands`), so `fsmem read`
pays neither for MCP, watchdog nor the search index at start-up, and
`fsmem --version` answers before click is imported, and so does a plain
command line of an operation, `fsmem grep PATTERN` or `fsmem ls`
(`fsmem.cli.lean`). The click group is in `fsmem.cli.app`; the one error
boundary of both (library errors become one line on stderr and exit code 2)
is `fsmem.cli.printing.boundary`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: `fsmem --version` and a plain grep import no typing
if TYPE_CHECKING:
    COMMANDS: dict[str, str]  # made by the module's __getattr__


def commands() -> dict[str, str]:
    """Command name -> "module:attribute" under fsmem.cli: each declared operation's command, built from its
    spec (`fsmem.cli.generated`), and the hand-written ones (`fsmem.spec.commands`, each with its reason)."""
    from fsmem.spec import declared
    from fsmem.spec.commands import HAND_WRITTEN

    generated = {op.name: f"generated:{op.name}" for op in declared().values() if op.cli.group is None}
    return {**generated, **{name: command.target for name, command in HAND_WRITTEN.items()}}


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `fsmem` command."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from fsmem import __version__

        print(f"fsmem, version {__version__}")
        sys.exit(0)
    if argv is None:  # a read from the shell: a running `fsmem watch` of the memory may answer it (rendezvous)
        from fsmem.cli.rendezvous import ask

        ask(args)
    dispatch(args, whole_process=argv is None)


def dispatch(args: list[str], *, whole_process: bool = False) -> None:
    """Run the command line `args` here, and exit with its code (`whole_process`: it is all the process does)."""
    from fsmem.cli.lean import parse, run as run_lean

    parsed = parse(args)  # a plain command line of an operation runs without click (`fsmem.cli.lean`)
    if parsed is not None:
        run_lean(parsed, whole_process=whole_process)
    from fsmem.cli.app import run

    run(args)


def __getattr__(name: str) -> object:
    if name == "COMMANDS":  # made on first use: `fsmem --version` and a plain grep load no spec
        table = commands()
        globals()["COMMANDS"] = table
        return table
    if name == "cli":  # the click group, for click's test runner and the command table
        from fsmem.cli.app import cli

        return cli
    raise AttributeError(f"module 'fsmem.cli' has no attribute {name!r}")
