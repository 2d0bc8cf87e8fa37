"""A plain grep's first rg pass, started before the rest of fsmem is imported.

rg's pass over the memory and Python's imports for grep take about as long as each other; one after the other,
they add up. `start` builds the command line the first pass of `fsmem.query.grep` would run for the whole
memory, with the settings' defaults (`fsmem.store.rg_command`), and starts rg on the other core, its output
read as it comes (`rg_command.Drained`: a pipe holds 64 KB, and rg waited on a full one); the
pass adopts it only when its own command line and folder are exactly these (`rg_command.claim`), so
the answer is the one rg would have printed a moment later, and anything else (a scope, named paths,
filters, a setting of fsmem.yaml) runs rg as before once the early process is stopped.
"""

from __future__ import annotations

import subprocess

from fsmem.errors import FsmemError
from fsmem.names import find_root
from fsmem.store import rg_command

TYPE_CHECKING = False  # typing.TYPE_CHECKING: typing is imported after rg has started
if TYPE_CHECKING:
    from typing import Any

_FILTERS = ("paths", "type", "tag", "updated_after")  # each one narrows the files rg is given


def start(root: str | None, arguments: dict[str, Any], *, max_line_chars: int) -> None:
    """Start the first pass a grep of the whole memory at `root` (as `Memory` finds it) will ask for, with lines
    cut at `max_line_chars`, the setting's default (`fsmem.cli.lean.MAX_LINE_CHARS`, written from it)."""
    if any(arguments[name] for name in _FILTERS):
        return
    folder = find_root(root)  # the folder discover_root chooses, or None where it refuses
    if folder is None:
        return
    try:
        command = [rg_command.find_rg()] + rg_command.build_args(
            arguments["pattern"],
            ignore_case=arguments["ignore_case"],
            fixed_strings=arguments["fixed_strings"],
            word=arguments["word"],
        )
    except FsmemError:
        return  # the normal path says why
    argv = command + rg_command.line_args(max_line_chars, arguments["context_lines"], heading=True) + ["--", "./"]
    try:
        process = subprocess.Popen(argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError:
        return
    rg_command.start_early(argv, folder, process)
