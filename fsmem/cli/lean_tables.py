"""The command lines the lean path parses (`fsmem.cli.lean`), written from the spec: do not edit."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING: typing is imported after rg has started (fsmem.cli.early)
if TYPE_CHECKING:
    from typing import Any

# -- generated from the spec by `python -m fsmem.cli.generated`; do not edit --
# option -> (parameter, kind): the same in every command that has it, as the spec's shared parameters
SPELLINGS: dict[str, tuple[str, str]] = {
    "--depth": ("depth", "int"),
    "--type": ("type", "str"),
    "--tag": ("tag", "list"),
    "--updated-after": ("updated_after", "str"),
    "--include-superseded": ("include_superseded", "bool"),
    "--offset": ("offset", "int"),
    "--max-results": ("max_results", "int"),
    "--max-tokens": ("max_tokens", "int"),
    "-i": ("ignore_case", "bool"),
    "--ignore-case": ("ignore_case", "bool"),
    "-F": ("fixed_strings", "bool"),
    "--fixed-strings": ("fixed_strings", "bool"),
    "-w": ("word", "bool"),
    "--word": ("word", "bool"),
    "-C": ("context_lines", "int"),
    "--context-lines": ("context_lines", "int"),
    "--as-of": ("as_of", "str"),
    "--lines": ("lines", "str"),
    "--section": ("section", "str"),
    "--outline": ("outline", "bool"),
    "--min-score": ("min_score", "float"),
    "--old": ("old", "str"),
    "--new": ("new", "str"),
    "--if-version": ("expected_version", "str"),
    "--at": ("at", "str"),
    "--command": ("command", "str"),
    "--timeout": ("timeout", "float"),
    "--episode-tokens": ("episode_tokens", "int"),
}
# parameter -> its value when not given (where it is not required)
DEFAULTS: dict[str, Any] = {
    "path": None,
    "depth": None,
    "type": None,
    "tag": [],
    "updated_after": None,
    "include_superseded": False,
    "offset": 0,
    "max_results": None,
    "max_tokens": None,
    "paths": [],
    "ignore_case": False,
    "fixed_strings": False,
    "word": False,
    "context_lines": 0,
    "as_of": None,
    "lines": None,
    "section": None,
    "outline": False,
    "min_score": None,
    "key": None,
    "expected_version": None,
    "command": None,
    "timeout": None,
    "episode_tokens": None,
}
# command -> its options, `!` after a required one
OPTIONS: dict[str, str] = {
    "ls": "--depth --type --tag --updated-after --include-superseded --offset --max-results --max-tokens",
    "grep": "-i --ignore-case -F --fixed-strings -w --word -C --context-lines --type --tag --updated-after --include-superseded --as-of --offset --max-results --max-tokens",
    "read": "--lines --section --outline --include-superseded --as-of --max-tokens",
    "stat": "--max-tokens",
    "search": "--type --tag --updated-after --include-superseded --as-of --min-score --offset --max-results --max-tokens",
    "links": "--offset --max-results --max-tokens",
    "timeline": "--offset --max-results --max-tokens",
    "context": "--as-of --max-tokens",
    "edit": "--old! --new! --if-version",
    "rm": "",
    "mv": "",
    "check": "",
    "index": "",
    "show": "--at! --lines --max-tokens",
    "restore": "--at!",
    "revert": "",
    "distill": "--command --timeout --episode-tokens",
}
# command -> its operands, in order: (parameter, kind, required); a list takes the rest
OPERANDS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "ls": (("path", "str", False),),
    "grep": (("pattern", "str", True), ("paths", "list", False)),
    "read": (("path", "str", True),),
    "stat": (("path", "str", True),),
    "search": (("query", "str", True),),
    "links": (("path", "str", True),),
    "timeline": (("subject", "str", True), ("key", "str", False)),
    "context": (),
    "edit": (("path", "str", True),),
    "rm": (("path", "str", True),),
    "mv": (("source", "str", True), ("target", "str", True)),
    "check": (("path", "str", False),),
    "index": (),
    "show": (("path", "str", True),),
    "restore": (("path", "str", True),),
    "revert": (("rev", "str", True),),
    "distill": (),
}
# command -> how its answer is printed and its exit code chosen (fsmem.cli.running.answering)
ANSWERING: dict[str, tuple[Any, ...]] = {
    "ls": (True, False, True, "empty", (), "to_text"),
    "grep": (True, False, True, "empty", (), "to_text"),
    "read": (True, False, True, "empty", (), "to_text"),
    "stat": (True, False, True, None, (), "to_text"),
    "search": (True, False, True, "empty", (), "to_text"),
    "links": (True, False, True, "empty", (), "to_text"),
    "timeline": (True, False, True, "empty", (), "to_text"),
    "context": (True, False, False, None, (), "to_text"),
    "edit": (False, False, True, None, (), "to_text"),
    "rm": (False, False, True, None, (), "to_text"),
    "mv": (False, False, True, None, (), "to_text"),
    "check": (False, False, True, "problems", (), "to_text"),
    "index": (False, False, True, None, (), "to_text"),
    "show": (True, False, True, "empty", (), "to_text"),
    "restore": (False, False, True, None, (), "to_text"),
    "revert": (False, False, True, None, (), "to_text"),
    "distill": (False, False, True, "empty", (("skipped", 3),), "to_text"),
}
MAX_LINE_CHARS = 2000  # read.max_line_chars's default (fsmem.cli.early)
# -- end of what is generated --
