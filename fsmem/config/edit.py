"""Edits of fsmem.yaml made by fsmem itself, on the text: every other byte (comments, order, spacing,
line endings) stays as the human wrote it.

fsmem reads YAML with PyYAML, which cannot write a file back with its comments; rather than add a
round-trip parser as a dependency for one edit, `with_agent` inserts the lines of one entry into the
block-style `budgets: agents:` mapping and refuses, with the reason, a file it cannot edit that way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fsmem.config import CONFIG_FILE
from fsmem.errors import AlreadyExists, ConfigError, InvalidArgument

AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# A key is words separated by blanks, up to the blanks before its colon. Taken possessively, so that a line
# with no colon after a long run of blanks is refused in one pass (`[^:#]*?\s*:` was quadratic in the run).
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[^\s#:](?:\s*+[^\s:#]++)*+)\s*:(?P<rest>.*)$")


def check_agent_name(name: str) -> str:
    if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
        raise InvalidArgument(
            f"agent name {name!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def with_agent(text: str, name: str, settings: Mapping[str, object]) -> str:
    """`text` (fsmem.yaml) with agent `name` declared under `budgets: agents:`, holding `settings`.

    AlreadyExists when the file names the agent already; ConfigError when `budgets` or `agents` is written
    in flow style (`agents: {a: ...}`) or the file is not block YAML that this edit can follow.
    """
    check_agent_name(name)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    entry = _entry(name, settings)
    budgets = _find(lines, 0, len(lines), 0, "budgets")
    if budgets is None:
        tail = "" if not text or text.endswith(("\n", "\r")) else newline
        block = ["budgets:", "  agents:", *("    " + line for line in entry)]
        return text + tail + newline.join(block) + newline
    head, end = budgets
    _block_only(lines[head], "budgets")
    inner = _child_indent(lines, head + 1, end, 0)
    agents = _find(lines, head + 1, end, inner, "agents") if inner is not None else None
    if agents is None:
        indent = 2 if inner is None else inner
        at = _last_content(lines, head, end) + 1
        block = [" " * indent + "agents:", *(" " * (indent + 2) + line for line in entry)]
        return _insert(lines, at, block, newline)
    first, last = agents
    _block_only(lines[first], "budgets.agents")
    outer = len(lines[first]) - len(lines[first].lstrip(" "))
    found = _child_indent(lines, first + 1, last, outer)
    indent = outer + 2 if found is None else found
    if _find(lines, first + 1, last, indent, name) is not None:
        raise AlreadyExists(f"{CONFIG_FILE} declares agent {name!r} already (under budgets.agents); edit it there")
    at = _last_content(lines, first, last) + 1
    return _insert(lines, at, [" " * indent + line for line in entry], newline)


def _entry(name: str, settings: Mapping[str, object]) -> list[str]:
    if not settings:
        return [f"{name}: {{}}"]
    values = [f"  {key}: {_scalar(value)}" for key, value in settings.items()]
    return [f"{name}:", *values]


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise InvalidArgument(f"an agent setting must be a number or true/false, not {value!r}")


def _find(lines: list[str], start: int, end: int, indent: int, key: str) -> tuple[int, int] | None:
    """(line of `key:` at exactly `indent`, end of its block) among lines[start:end], or None."""
    for number in range(start, end):
        match = _KEY.match(lines[number].rstrip("\r\n"))
        if match is None or len(match.group("indent")) != indent:
            if _content(lines[number]) and _indent(lines[number]) < indent:
                return None  # the enclosing block ended
            continue
        if match.group("key").strip("'\"") == key:
            stop = number + 1
            while stop < end and (not _content(lines[stop]) or _indent(lines[stop]) > indent):
                stop += 1
            return number, stop
    return None


def _child_indent(lines: list[str], start: int, end: int, parent: int) -> int | None:
    for number in range(start, end):
        if _content(lines[number]):
            found = _indent(lines[number])
            return found if found > parent else None
    return None


def _last_content(lines: list[str], head: int, end: int) -> int:
    """The last line inside the block that starts at `head`: indented below it, comments included (a comment
    at the block's own indent or less belongs to what follows)."""
    last, own = head, _indent(lines[head])
    for number in range(head + 1, end):
        if lines[number].strip() and _indent(lines[number]) > own:
            last = number
    return last


def _block_only(line: str, where: str) -> None:
    rest = _KEY.match(line.rstrip("\r\n"))
    value = rest.group("rest").split("#", 1)[0].strip() if rest else ""
    if value:
        raise ConfigError(
            f"{CONFIG_FILE}: {where} is written on one line ({value[:40]}); fsmem agent add edits the block "
            "form only: declare the agent there by hand"
        )


def _insert(lines: list[str], at: int, block: list[str], newline: str) -> str:
    before = lines[:at]
    if before and not before[-1].endswith(("\n", "\r")):
        before[-1] += newline
    return "".join([*before, *(line + newline for line in block), *lines[at:]])


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
