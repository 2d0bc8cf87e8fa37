"""Extractors turn one session note into items (keyed facts and observations) filed under subjects.

The default extractor, `rules`, reads the syntax in fsmem.facts: level-2
headings name subjects, `- key: value` bullets are facts, every other bullet or
paragraph is an observation. Other extractors (for example one that asks an
LLM to turn free text into facts) are found through the Python entry point
group `fsmem.extractors`; each entry point names a callable
`extract(note: SessionNote) -> Iterable[Item]`. The built-in one is registered
through the same group, so the plugin path is always exercised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from fsmem import format as fmt
from fsmem.errors import ConfigError
from fsmem.format import facts as _facts, secrets

ENTRY_POINT_GROUP = "fsmem.extractors"
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])[ \t]+")


@dataclass(frozen=True)
class SessionNote:
    """What an extractor sees: the note's path, its date, its text and where its body starts."""

    path: str
    date: str  # YYYY-MM-DD
    text: str
    body: str
    body_start_line: int


@dataclass(frozen=True)
class Item:
    """One thing a note says about a subject.

    `subject` is the heading text (`people/Adam Smith`, `topic/Billing`,
    `Adam Smith`) or None for the configured default. A fact has `key` and
    `value` (None: retracted); an observation has only `text`. `as_of` dates a
    fact explicitly (YYYY-MM-DD, or a UTC time YYYY-MM-DDTHH:MM:SSZ); `line` is the note line it came from.
    """

    subject: str | None
    line: int
    key: str | None = None
    value: str | None = None
    text: str | None = None
    as_of: str | None = None

    @property
    def is_fact(self) -> bool:
        return self.key is not None


@dataclass
class Extraction:
    items: list[Item] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)


def rules(note: SessionNote) -> Extraction:
    """The built-in extractor: the keyed-fact syntax of fsmem.facts, subjects from level-2 headings."""
    result = Extraction()
    subject: str | None = None
    pending: list[str] = []  # lines of the current paragraph or list item
    pending_line = 0
    in_code = False

    def flush() -> None:
        nonlocal pending
        if not pending:
            return
        first = pending[0]
        fact = _facts.parse_fact(first) if len(pending) == 1 else None
        if fact is not None and fact.bad_date:
            result.problems.append(
                (
                    pending_line,
                    f"'(as of {fact.bad_date})' is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ); line skipped",
                )
            )
        elif fact is not None:
            result.items.append(Item(subject, pending_line, key=fact.key, value=fact.value, as_of=fact.as_of))
        else:
            text = " ".join(part.strip() for part in pending)
            text = _LIST_ITEM.sub("", text, count=1).strip()
            if text:
                result.items.append(Item(subject, pending_line, text=text))
        pending = []

    for number, line in enumerate(note.body.splitlines(), start=note.body_start_line):
        if fmt.FENCED_CODE.match(line):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        heading = fmt.HEADING.match(line)
        if heading:
            flush()
            if len(heading.group(1)) == 2:
                subject = heading.group(2).strip()
            continue
        if not line.strip():
            flush()
            continue
        if _LIST_ITEM.match(line):
            flush()
            pending, pending_line = [line], number
        elif pending and (line[:1] in (" ", "\t") or not _LIST_ITEM.match(pending[0])):
            pending.append(line)  # continuation of an item or of a paragraph
        else:
            flush()
            pending, pending_line = [line], number
    flush()
    if in_code:
        result.problems.append((note.body_start_line, "a fenced code block is never closed"))
    return result


Extractor = Callable[[SessionNote], "Extraction | Iterable[Item]"]


_found: dict[tuple[str, ...], dict] = {}


def _entry_points() -> dict:
    """The group's entry points, looked up once per `sys.path` (scanning every installed package takes tens of ms)."""
    import sys
    from importlib.metadata import entry_points

    key = tuple(sys.path)
    if key not in _found:
        _found.clear()
        _found[key] = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return _found[key]


def load(names: Iterable[str]) -> list[tuple[str, Extractor]]:
    """The extractors named in fsmem.yaml, looked up in the entry point group."""
    found = _entry_points()
    chosen: list[tuple[str, Extractor]] = []
    for name in names:
        if name == "rules" and name not in found:
            chosen.append((name, rules))  # running from a source tree without installed metadata
            continue
        if name not in found:
            known = ", ".join(sorted(set(found) | {"rules"}))
            raise ConfigError(f"fsmem.yaml consolidate.extractors: no extractor {name!r} (installed: {known})")
        try:
            chosen.append((name, found[name].load()))
        except Exception as exc:  # a broken plugin is a configuration problem, not a crash
            raise ConfigError(f"extractor {name!r} could not be loaded: {type(exc).__name__}: {exc}") from None
    return chosen


def run(extractors: list[tuple[str, Extractor]], note: SessionNote) -> Extraction:
    """All items of all extractors, in their order; plugin output is checked like note text."""
    merged = Extraction()
    for name, extract in extractors:
        output = extract(note)
        if isinstance(output, Extraction):
            merged.problems.extend(output.problems)
            items = output.items
        else:
            items = list(output)
        for item in items:
            if not isinstance(item, Item):
                raise ConfigError(f"extractor {name!r} returned {type(item).__name__}, not fsmem.extractors.Item")
            if item.is_fact and not _facts.is_key(item.key or ""):
                merged.problems.append((item.line, f"extractor {name!r}: {item.key!r} is not a valid key; skipped"))
                continue
            if item.as_of is not None and not _facts.valid_stamp(item.as_of):
                merged.problems.append((item.line, f"extractor {name!r}: as_of {item.as_of!r} is not a date; skipped"))
                continue
            if not item.is_fact and not (item.text or "").strip():
                continue
            merged.items.append(_without_secrets(item, merged.problems))
    return merged


def _without_secrets(item: Item, problems: list[tuple[int, str]]) -> Item:
    """The item with any secret redacted: a secret stays in the note it was written in and goes no further.

    Documents feed INDEX.md, `fsmem context` and every agent's answers; a key
    a human typed into a note (or that `secrets.policy: allow` let in) is
    never copied there, and the report says so.
    """
    for name in ("value", "text"):
        value = getattr(item, name)
        if value and secrets.scan(value):
            kinds = ", ".join(sorted({s.kind for s in secrets.scan(value)}))
            problems.append((item.line, f"looks like {secrets.with_article(kinds)}; consolidated with it redacted"))
            item = (
                replace(item, value=secrets.redact(value))
                if name == "value"
                else replace(item, text=secrets.redact(value))
            )
    return item
