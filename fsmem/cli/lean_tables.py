"""grep's command line as the lean path parses it (`fsmem.cli.lean`): its tables are written from grep's spec."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING: typing is imported after rg has started (fsmem.cli.early)
if TYPE_CHECKING:
    from typing import Any

# -- generated from the spec by `python -m fsmem.cli.generated`; do not edit --
# option -> (parameter, kind)
SPELLINGS: dict[str, tuple[str, str]] = {
    "-i": ("ignore_case", "bool"),
    "--ignore-case": ("ignore_case", "bool"),
    "-F": ("fixed_strings", "bool"),
    "--fixed-strings": ("fixed_strings", "bool"),
    "-w": ("word", "bool"),
    "--word": ("word", "bool"),
    "-C": ("context_lines", "int"),
    "--context-lines": ("context_lines", "int"),
    "--type": ("type", "str"),
    "--tag": ("tag", "list"),
    "--updated-after": ("updated_after", "str"),
    "--include-superseded": ("include_superseded", "bool"),
    "--as-of": ("as_of", "str"),
    "--offset": ("offset", "int"),
    "--max-results": ("max_results", "int"),
    "--max-tokens": ("max_tokens", "int"),
}
# parameter -> its value when not given (where it is not required)
DEFAULTS: dict[str, Any] = {
    "paths": [],
    "ignore_case": False,
    "fixed_strings": False,
    "word": False,
    "context_lines": 0,
    "type": None,
    "tag": [],
    "updated_after": None,
    "include_superseded": False,
    "as_of": None,
    "offset": 0,
    "max_results": None,
    "max_tokens": None,
}
# command -> its options, `!` after a required one
OPTIONS: dict[str, str] = {
    "grep": "-i --ignore-case -F --fixed-strings -w --word -C --context-lines --type --tag --updated-after --include-superseded --as-of --offset --max-results --max-tokens",
}
# command -> its operands, in order: (parameter, kind, required); a list takes the rest
OPERANDS: dict[str, tuple[tuple[str, str, bool], ...]] = {"grep": (("pattern", "str", True), ("paths", "list", False))}
# command -> its inputs' adapters, the parameters only the command line has, the variables options read
INPUTS: dict[str, tuple[tuple[Any, ...], ...]] = {"grep": ((), (), ())}
# command -> how its answer is printed and its exit code chosen (fsmem.cli.running.answering)
ANSWERING: dict[str, tuple[Any, ...]] = {"grep": (True, False, True, "empty", (), "to_text")}
MAX_LINE_CHARS = 2000  # read.max_line_chars's default (fsmem.cli.early)
# -- end of what is generated --
