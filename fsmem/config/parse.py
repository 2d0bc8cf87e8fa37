"""fsmem.yaml's text to a mapping, bounded; and, on the error path only, the line a setting stands on.

PyYAML is imported here only when a file is really parsed or a problem located: a command whose
configuration comes from the parsed copy in `.fsmem/` never imports it.
"""

from __future__ import annotations

import functools
from typing import Any

from fsmem.errors import ConfigError

# fsmem.yaml longer than this is refused: a configuration is a few kilobytes, and PyYAML's time grows with it.
MAX_CONFIG_BYTES = 64 * 1024


def first_alias(raw: str) -> int | None:
    """The 0-based line of the first YAML anchor or alias in `raw`, or None.

    Aliases let a few lines stand for gigabytes ("billion laughs"): every
    reader of the value would expand it. Only text holding '&' or '*' is
    scanned, event by event, without building anything. Front matter
    (`fsmem.format.frontmatter`) and fsmem.yaml are both read so.
    """
    if "&" not in raw and "*" not in raw:
        return None
    import yaml

    for event in yaml.parse(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            return event.start_mark.line if event.start_mark is not None else 0
    return None


def parse_config(data: bytes, where: str) -> dict[str, Any]:
    """fsmem.yaml's settings from its bytes, bounded as front matter is (`fsmem.format.frontmatter`): at most
    MAX_CONFIG_BYTES, no anchors or aliases (a few lines of them stand for gigabytes), not nested past what
    the parser can hold. `where` names the file in messages (a path, or a file a remote sent)."""
    import yaml

    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{where} is larger than {MAX_CONFIG_BYTES // 1024} KiB; fsmem reads no configuration that long"
        )
    text = decoded(data, where)
    try:
        alias = first_alias(text)
        if alias is not None:
            raise ConfigError(
                f"{where}, line {alias + 1}: a YAML anchor or alias (& or *); fsmem does not expand them in its configuration"
            )
        loaded = yaml.load(text, Loader=_strict_loader()) or {}
    except _KeyTwice as twice:
        key, first, again = twice.args
        name = repr(key) if len(repr(key)) <= 60 else repr(key)[:57] + "..."
        raise ConfigError(
            f"{where}, line {again + 1}: {name} is set twice in one mapping (first on line {first + 1}); "
            "YAML would keep only the last, so fsmem refuses it"
        ) from None
    except yaml.YAMLError as exc:
        reason = " ".join((getattr(exc, "problem", None) or str(exc)).split())
        if "nesting depth" in reason:
            raise ConfigError(f"{where} is nested too deeply to read") from None
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}," if mark is not None else ""
        raise ConfigError(f"{where}{at} is not valid YAML: {reason}") from None
    except RecursionError:
        raise ConfigError(f"{where} is nested too deeply to read") from None
    except ValueError as exc:  # a scalar its tag cannot hold (`!!int abc`), an integer of over 4,300 digits
        raise ConfigError(f"{where} holds a value YAML cannot construct: {str(exc).split(';')[0]}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{where} must be a mapping of settings")
    return loaded


class _KeyTwice(Exception):
    """A key set twice in one mapping: (the key, its first line, its second line), 0-based."""


@functools.cache
def _strict_loader() -> Any:
    """PyYAML's safe loader (C where built), refusing a key set twice in one mapping: YAML keeps the last
    silently, so a second `budgets:` pasted at the end of the file would drop every agent of the first.
    Made once, on the first parse (PyYAML is imported only then)."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _value in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base constructor says so
                    continue
                if first is not None:
                    raise _KeyTwice(key, first, key_node.start_mark.line)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    return StrictLoader


def decoded(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {where}: not UTF-8 (byte {exc.start})") from None


def line_of(text: str, keys: tuple[str, ...]) -> int | None:
    """The 1-based line of the setting at `keys` in `text` (the line of its name), or None.

    Only a problem's message needs it, so it costs nothing on a clean load: PyYAML's node tree has the marks.
    """
    import yaml

    try:
        node: Any = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):
        return None
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = [(name, value) for name, value in node.value if _key_text(name) == key]
        if not found:
            return None
        name, node = found[-1]
        line = int(name.start_mark.line) + 1
    return line


def _key_text(node: Any) -> str | None:
    """A key as the loaded mapping names it in messages (`str()` of what YAML made of it)."""
    value = getattr(node, "value", None)
    if not isinstance(value, str):
        return None
    if getattr(node, "tag", "").endswith(":str"):
        return value
    import yaml

    try:
        return str(yaml.safe_load(value))
    except yaml.YAMLError:
        return value
