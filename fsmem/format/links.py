"""Wikilinks: `[[Title]]`, `[[kind/Name]]`, `[[path]]` and `[[…|label]]` in a body, and the names a file answers to.

Pure, no I/O. A link names its target in one of four ways, tried in this order
(`TIERS`): a memory path (`topics/billing.md`, with or without `.md`), an entity
or topic name as a note subject says it (`people/Rosa Diaz`, `topic/Billing`), a
title or an alias in front matter (or the name of the entity or topic alone),
a file name without its folder (`rosa-diaz`, as Obsidian writes it), and last
the end of a path (`People/Rosa`, as Obsidian writes a link whose name is not
unique: an imported vault's links keep leading where they led in the vault).
Names compare case-insensitively, spaces collapsed. The first way that names
any file decides: one file is the target, several make the link ambiguous, and
a link that no way names leads to nothing. The catalog keeps each file's links
and names (`fsmem.store.cache`); `fsmem.query.links` answers over them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fsmem.format.markdown import FENCED_CODE

PATH, SUBJECT, TITLE, FILE_NAME, PATH_END = 1, 2, 3, 4, 5
TIERS = {
    PATH: "path",
    SUBJECT: "entity or topic name",
    TITLE: "title or alias",
    FILE_NAME: "file name",
    PATH_END: "end of a path",
}
MAX_TARGET_CHARS = 300  # a longer "[[...]]" is no link a human wrote
SUFFIXES = (".md", ".markdown")
TOPIC_KINDS = ("topic", "topics")

# `[[target]]`, `[[target|label]]`, `[[target#heading]]`; no brackets or line breaks inside
_LINK = re.compile(r"\[\[([^\[\]\n|]{1,300}?)(?:\|([^\[\]\n]{0,300}))?\]\]")
_BACKTICKS = re.compile(r"`+")
RESOLVED, UNRESOLVED, AMBIGUOUS = "resolved", "unresolved", "ambiguous"


@dataclass(frozen=True)
class Wikilink:
    """One link as written: its line in the file, its target (before `|` and `#`), and its label."""

    line: int
    target: str
    label: str | None = None

    @property
    def name(self) -> str:
        """The target as names compare (`fold`)."""
        return fold(self.target)

    @property
    def written(self) -> str:
        return f"[[{self.target}|{self.label}]]" if self.label is not None else f"[[{self.target}]]"


def fold(name: str) -> str:
    """A name as links compare it: case folded, runs of spaces one space, no leading `./` or `/`."""
    text = " ".join(name.split()).casefold()
    while text.startswith(("./", "/")):
        text = text[2:] if text.startswith("./") else text[1:]
    return text


def _target(raw: str) -> str:
    """The target of `raw` (the text before `|`): without `#heading` or `^block`, nor a table's escaping `\\`."""
    text = raw.rstrip("\\")
    for mark in ("#", "^"):
        if mark in text:
            text = text.split(mark, 1)[0]
    return " ".join(text.split())


def in_line(text: str, line: int) -> list[Wikilink]:
    """The links of one line of prose (code spans left out)."""
    if "[[" not in text:
        return []
    if "`" in text:
        text = "\n".join(_without_code_spans(part) for part in text.split("\n"))
    found = []
    for match in _LINK.finditer(text):
        target = _target(match.group(1))
        if target:
            label = match.group(2)
            found.append(Wikilink(line, target, " ".join(label.split()) if label is not None else None))
    return found


def _without_code_spans(line: str) -> str:
    """`line` with each code span blanked: a run of backticks up to the next run of the same length, as CommonMark
    pairs them; one that no run closes stays as it is. One pass over the runs (a backtracking regex took
    minutes on a line of a few thousand backticks)."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    closer: list[int | None] = [None] * len(runs)
    later: dict[int, int] = {}  # run length -> index of the nearest run of that length after this one
    for index in range(len(runs) - 1, -1, -1):
        length = runs[index][1] - runs[index][0]
        closer[index] = later.get(length)
        later[length] = index
    pieces, kept, index = [], 0, 0
    while index < len(runs):
        close = closer[index]
        if close is None:
            index += 1
            continue
        start, end = runs[index][0], runs[close][1]
        pieces += [line[kept:start], " " * (end - start)]
        kept, index = end, close + 1
    return "".join(pieces) + line[kept:]


def links_of(body: str, first_line: int = 1) -> list[Wikilink]:
    """Every link in a body, with its line in the file; fenced code is left out, as are code spans."""
    found: list[Wikilink] = []
    in_code = False
    for number, line in enumerate(body.splitlines(), start=first_line):
        if FENCED_CODE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            found.extend(in_line(line, number))
    return found


def heading_link(title: str) -> str | None:
    """The target of a heading that is one link and nothing else (`## [[Rosa Diaz]]`); else None."""
    text = title.strip()
    found = in_line(text, 1)
    if len(found) != 1 or not text.startswith("[[") or not text.endswith("]]") or text.count("[[") != 1:
        return None
    return found[0].target


def subject_name(value: str, field: str) -> str:
    """An entity's or topic's name as a note subject says it: `people/Rosa Diaz`, `topic/Billing`."""
    return value if field == "entity" else f"topic/{value}"


def names_of(
    path: str,
    *,
    title: str | None = None,
    aliases: Iterable[str] = (),
    entity: str | None = None,
    topic: str | None = None,
) -> list[tuple[int, str]]:
    """The (tier, folded name) pairs a file answers to, without repeats (`TIERS` says what each tier is)."""
    names: list[tuple[int, str]] = []

    def add(tier: int, name: str | None) -> None:
        if name and fold(name) and (tier, fold(name)) not in names:
            names.append((tier, fold(name)))

    stem = _stem(path)
    add(PATH, path)
    add(PATH, stem)
    if entity:
        add(SUBJECT, entity)
    if topic:
        add(SUBJECT, f"topic/{topic}")
        add(SUBJECT, f"topics/{topic}")
    add(TITLE, title)
    for alias in aliases:
        add(TITLE, alias)
    for value in (entity, topic):
        if value and "/" in value.strip("/"):
            add(TITLE, value.rsplit("/", 1)[-1])
        elif value:
            add(TITLE, value)
    file_name = path.rsplit("/", 1)[-1]
    add(FILE_NAME, file_name)
    add(FILE_NAME, stem.rsplit("/", 1)[-1])
    return names


# A stored tier with this bit names two names of the file: the row's and the row's with `.md` after it.
MD_TWIN = 8
_MD = ".md"


def stored_names(names: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`names_of`'s (tier, name) pairs as the cache stores them: a name and its twin with `.md` (a path and its
    stem, a file name and its stem) at one tier as one row whose tier carries MD_TWIN. Over a third of the
    names' rows were such twins; `answered_names` gives the pairs back, exactly."""
    kept: dict[tuple[int, str], bool] = {}  # (tier, name) -> its twin rides on it
    for tier, name in sorted(names, key=lambda pair: len(pair[1])):  # a stem before its twin
        stem = (tier, name[: -len(_MD)])
        if name.endswith(_MD) and kept.get(stem) is False:
            kept[stem] = True
        else:
            kept[(tier, name)] = False
    return [(tier | MD_TWIN if kept[(tier, name)] else tier, name) for tier, name in names if (tier, name) in kept]


def answered_names(tier: int, name: str) -> list[tuple[int, str]]:
    """The (tier, name) pairs one stored row answers to (`stored_names`)."""
    if tier & MD_TWIN:
        return [(tier & ~MD_TWIN, name), (tier & ~MD_TWIN, name + _MD)]
    return [(tier, name)]


def asked_names(names: Iterable[str]) -> list[str]:
    """The stored names to look up for `names`: each one, and without its `.md` (a row that may carry it)."""
    return sorted({n for name in names for n in (name, name[: -len(_MD)] if name.endswith(_MD) else name)})


def _stem(path: str) -> str:
    for suffix in SUFFIXES:
        if path.lower().endswith(suffix):
            return path[: -len(suffix)]
    return path


def path_ends(path: str) -> list[str]:
    """The folded names of the PATH_END tier of `path`: every end of it, with and without `.md`, of at least
    two parts and shorter than the path (`topics/v/people/bob.md` -> `v/people/bob.md`, `people/bob`, ...).
    Not stored with a file's names: asked of a link that names nothing else (`fsmem.query.links`)."""
    folded = fold(path)
    ends: list[str] = []
    for whole in (folded, _stem(folded)):
        parts = whole.split("/")
        ends += ["/".join(parts[at:]) for at in range(1, len(parts) - 1)]
    return ends


def ends_path(name: str, path: str) -> bool:
    """A folded `name` of two parts or more is an end of `path` (the PATH_END tier)."""
    return "/" in name and name in path_ends(path)


def aliases_of(front: dict) -> list[str]:
    """The `aliases:` of front matter, as a list of text (a comma-separated text counts as a list)."""
    value = front.get("aliases")
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    return [str(alias).strip() for alias in value if alias is not None and str(alias).strip()]


def choose(candidates: Iterable[tuple[int, str]]) -> tuple[str, list[str]]:
    """The outcome of a link from the (tier, path) of every file one of whose names it fits.

    The first tier that holds any decides: (RESOLVED, [path]), (AMBIGUOUS, the paths sorted), or, with no
    candidate at all, (UNRESOLVED, [])."""
    by_tier: dict[int, set[str]] = {}
    for tier, path in candidates:
        by_tier.setdefault(tier, set()).add(path)
    if not by_tier:
        return UNRESOLVED, []
    paths = sorted(by_tier[min(by_tier)])
    return (RESOLVED if len(paths) == 1 else AMBIGUOUS), paths
