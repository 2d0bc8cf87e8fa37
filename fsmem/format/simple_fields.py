"""Front matter of `key: value` lines read without a YAML parser, exactly as PyYAML reads them.

A cold build reads the front matter of every file, and PyYAML (even its C
parser: the constructing is Python) was a large share of its CPU. Most
front matter is one plain scalar or one flow list of plain scalars a line;
`simple_fields` reads that, resolving each scalar's type with PyYAML's own
resolver table, and gives up (None) on anything else — quotes, nesting,
comments, blank lines, a repeated key, a number or timestamp in any but the
plainest form — for `fsmem.format.frontmatter.split` to load with PyYAML.
tests/test_simple_fields.py holds the two equal on generated front matter.
"""

from __future__ import annotations

import functools
import re
from typing import Any

_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: ([ -~]*))?")  # the value: printable ASCII, no tab
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`. ")  # a plain scalar starting so is left to PyYAML
_FLOW_FORBIDDEN = re.compile(r"[\[\]{}#:?'\"]")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]+\Z")
# a timestamp PyYAML turns into a date or datetime whose isoformat() is the text itself (or, where the
# date is no real one, leaves the text): a UTC offset of 60 minutes or more, or -00:00, is written otherwise
_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[-+][0-9]{2}:[0-5][0-9])?)?\Z")
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_GIVE_UP = object()


@functools.cache
def _resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    from yaml.resolver import Resolver

    return Resolver.yaml_implicit_resolvers


def simple_fields(raw: str) -> dict[str, Any] | None:
    """The fields of front matter `raw` (the lines between its fences) as PyYAML's safe loader and
    `frontmatter._plain` make them, or None where it holds anything but simple `key: value` lines."""
    fields: dict[str, Any] = {}
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        match = _LINE.fullmatch(line)
        if match is None:
            return None
        key, text = match.group(1), match.group(2)
        if key in fields or (key not in _PLAIN_KEYS and _plain_key(key) is not key):
            return None
        value = _kept_value(text or "") if text is not None else None
        if value is _GIVE_UP:
            return None
        fields[key] = value
    return fields


_PLAIN_KEYS: set[str] = set()  # keys read as themselves before
_KEPT: dict[str, Any] = {}  # a value's text -> its value, read before: a build reads thousands of files alike
KEPT_VALUES = 4096


def _plain_key(key: str) -> Any:
    found = _scalar(key)
    if found is key and len(_PLAIN_KEYS) < KEPT_VALUES:
        _PLAIN_KEYS.add(key)
    return found


def _kept_value(text: str) -> Any:
    """`_value(text)`, kept for the texts read first (a list copied: a caller may change its own)."""
    found = _KEPT.get(text, _KEPT)
    if found is _KEPT:
        found = _value(text)
        if len(_KEPT) < KEPT_VALUES:
            _KEPT[text] = found
    return list(found) if type(found) is list else found


def _value(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        if _FLOW_FORBIDDEN.search(inner):
            return _GIVE_UP
        if not inner.strip(" "):
            return []
        items = [_scalar(item.strip(" "), flow=True) for item in inner.split(",")]
        return _GIVE_UP if any(item is _GIVE_UP for item in items) else items
    return _scalar(text)


def _scalar(text: str, *, flow: bool = False) -> Any:
    """A plain scalar as PyYAML resolves and constructs it, or _GIVE_UP."""
    if not text or text[-1] == " " or text[-1] == ":" or ": " in text or " #" in text:
        return _GIVE_UP
    first = text[0]
    if first in _INDICATORS and not (first in "-." and text[1:2].isdigit()):
        return _GIVE_UP
    if flow and ("," in text or ":" in text):
        return _GIVE_UP
    if _STAMP.match(text):  # a date or time (a build reads two a file): no other resolver of a digit takes it
        return _GIVE_UP if text.endswith("-00:00") else text
    resolvers = _resolvers().get(first)
    if resolvers is None:  # a title, a name: a first character no resolver has
        return text
    tag = next((tag for tag, pattern in resolvers if pattern.match(text)), None)
    if tag is None:
        return text
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:bool":
        return _BOOLS[text.lower()]
    if tag == "tag:yaml.org,2002:int" and _INT.match(text):
        return int(text)
    if tag == "tag:yaml.org,2002:float" and _FLOAT.match(text):
        return float(text)
    if tag == "tag:yaml.org,2002:timestamp" and _STAMP.match(text) and not text.endswith("-00:00"):
        return text
    return _GIVE_UP
