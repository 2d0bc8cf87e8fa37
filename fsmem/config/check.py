"""fsmem.yaml as parsed, into its sections: every value checked against its setting's rule, every name known.

A problem is a ConfigError naming the file and line, the setting, what it must be and the value
(`fsmem.yaml:24: grep.timeout_seconds must be a number above 0, not 'abc'`); a name fsmem does not
know is one too, with the closest it does (`did you mean grep.timeout_seconds?`): a misspelt
setting would otherwise leave its default in force without a word, and several guard this host.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NoReturn, TypeVar

from fsmem.budget import echo
from fsmem.config.parse import line_of
from fsmem.config.sections import RENAMED, Section
from fsmem.errors import ConfigError

S = TypeVar("S", bound=Section)


def build(cls: type[S], data: Mapping[Any, Any], where: str, source: Callable[[], str | None]) -> S:
    """The settings of `data` as `cls`; `where` names the file in messages, `source()` is its text (or None)."""
    checker = _Checker(where, source)
    return checker.make(cls, None, checker.values(cls, data, ()), ())


class _Checker:
    def __init__(self, where: str, source: Callable[[], str | None]):
        self.where, self.source = where, source

    def make(self, cls: type[S], base: Section | None, given: dict[str, Any], keys: tuple[str, ...]) -> S:
        if base is not None:
            given = {**{name: getattr(base, name) for name in cls._defaults}, **given}
        made = cls(**given)
        problem = made.problem()
        if problem is not None:
            self.refuse(keys, f"{dotted(keys)} {problem}")
        return made

    def values(self, cls: type[Section], data: Mapping[Any, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        """The settings `data` gives, checked and converted; in the file's order, so the first problem is named."""
        fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
        given: dict[str, Any] = {}
        later = []
        for key, value in data.items():
            name = key if isinstance(key, str) and key in fields else RENAMED.get((*keys, str(key)))
            if name is None:
                self.unknown(keys, key, list(fields))
            elif name != key and name in data:
                continue  # the old spelling beside the new one: the new one holds
            elif "section" in fields[name].metadata:
                kind = fields[name].metadata["section"]
                inner = {} if value is None else self.mapping(value, keys, name)
                given[name] = self.make(kind, None, self.values(kind, inner, (*keys, name)), (*keys, name))
            elif "entries" in fields[name].metadata:
                later.append((name, self.entries(fields[name].metadata, value, (*keys, name))))
            else:
                ok, says, convert = fields[name].metadata["rule"]
                if not ok(value):
                    self.refuse((*keys, str(key)), f"{dotted((*keys, str(key)))} must be {says}, not {echo(value)}")
                given[name] = convert(value)
        for name, named in later:  # each entry over its base, once the base is known whatever the file's order
            meta = fields[name].metadata
            base = given.get(meta["over"]) or getattr(cls(), meta["over"])
            given[name] = MappingProxyType(
                {
                    entry: self.make(meta["entries"], base, values, (*keys, name, entry))
                    for entry, values in named.items()
                }
            )
        return given

    def entries(self, meta: Mapping[str, Any], value: Any, keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """Each named entry's settings, checked (merged over their base later)."""
        named = {} if value is None else self.mapping(value, keys[:-1], keys[-1], meta["what"])
        checked = {}
        for entry, settings in named.items():
            if not isinstance(entry, str):
                self.refuse((*keys, str(entry)), f"{dotted(keys)}: a name must be text, not {echo(entry)}")
            inner = {} if settings is None else self.mapping(settings, keys, entry)
            checked[entry] = self.values(meta["entries"], inner, (*keys, entry))
        return checked

    def mapping(
        self, value: Any, keys: tuple[str, ...], name: str, what: str = "a mapping of settings"
    ) -> Mapping[Any, Any]:
        if not isinstance(value, dict):
            self.refuse((*keys, name), f"{dotted((*keys, name))} must be {what}, not {echo(value)}")
        return value

    def unknown(self, keys: tuple[str, ...], key: Any, known: list[str]) -> NoReturn:
        import difflib

        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        if not keys and key == "distill":  # a command: this host's operator's alone (fsmem.history.host_settings)
            hint = "a command to run is never read from fsmem.yaml; set this host's own: fsmem config --local distill.command CMD"
        elif close:
            hint = f"did you mean {dotted((*keys, close[0]))}?"
        else:
            hint = (
                f"{dotted(keys) or 'the file'} holds {', '.join(known[:-1])} and {known[-1]}"
                if len(known) > 1
                else f"{dotted(keys)} holds {known[0]}"
            )
        self.refuse((*keys, str(key)), f"{dotted((*keys, str(key)))} is not a setting of fsmem; {hint}")

    def refuse(self, keys: tuple[str, ...], message: str) -> NoReturn:
        """`message` as a ConfigError that names the line of the setting at `keys` (the line of its name)."""
        text = self.source()
        line = line_of(text, keys) if text is not None else None
        raise ConfigError(f"{self.where}:{line}: {message}" if line else f"{self.where}: {message}")


def dotted(keys: tuple[str, ...]) -> str:
    """A setting's name as messages show it (`grep.timeout_seconds`); a name that is not plain is quoted, so a
    file's text never reaches a message raw (no line break, no control character, no flood)."""
    return ".".join(key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else echo(key, 40) for key in keys)
