"""Keyed facts and provenance: the line syntax the consolidator reads and writes. Pure, no I/O.

A keyed fact is a bullet `- key: value`; `* key: value` and `+ key: value` are the
same fact (CommonMark's three bullets, which editors write), and a line keeps the
bullet it was written with when it is superseded or rewritten. The key is one to four words of
lowercase letters, digits, `_` or `-` (at most 40 characters), followed by
`: ` and a non-empty value; `- key: ~` retracts the key. Anything else
("- Wow: that trip sounds amazing!") is a free observation, because a misread
key would silently supersede unrelated text.

Provenance is a trailing parenthesis that a human reads as a citation, each
source a Markdown link relative to the document (editors, Obsidian and Git hosts
follow it): up to the memory's root, then the source's path from there, so the
path it names is read without knowing where the document is.

    - employer: Globex ([2026-11-20](../../sessions/2026/11/20/support-0140.md))
    - employer: Acme Corp ([2026-10-01](../../sessions/2026/10/01/kickoff.md) to 2026-11-20)
    - role: cto ([2026-03-01](../a.md); confirmed [2026-05-02](../b.md))
    - Prefers PDF invoices. ([2026-11-02](../x.md); [y](../y.md))

Citations written before links (`(2026-11-20, sessions/2026/11/20/support-0140.md)`,
`(2026-10-01 to 2026-11-20, SOURCE)`, `; confirmed DATE, SOURCE`) are still read;
a line the consolidator rewrites is written with links.

and a note may date a fact explicitly: `- role: cto (as of 2024-03-01)`.

A date may carry a UTC time, `2026-12-01T15:32:09Z` (a *stamp*): `fsmem note`
writes one on every fact, so that two writes of one day are ordered by when
they were made. An `(as of …)` may give a time with its UTC offset
(`2026-12-01T12:00:00+02:00`), read as the stamp of that instant. A stamp
without a time counts as the start of its day, so stamps compare as strings.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, replace

from fsmem.format.portable import DEVICE_NAMES

RETRACTED = "~"
MAX_KEY_CHARS = 40
MAX_KEY_WORDS = 4
UNDATED = "undated"

_DATE = r"\d{4}-\d{2}-\d{2}"
_STAMP = rf"{_DATE}(?:T\d{{2}}:\d{{2}}:\d{{2}}Z)?"
_DAY = rf"(?:{_STAMP}|{UNDATED})"
_SOURCE = r"[^\s;(),]+"
BULLETS = ("-", "*", "+")
# the rest of the line without its trailing blanks; possessive (`(?P<rest>.*?)[ \t]*$` took time quadratic in a
# run of blanks inside it: 40,000 took 5 s)
_BULLET = re.compile(r"^(?P<mark>[-*+]) (?P<rest>(?:[ \t]*+[^ \t\n])*+)[ \t]*+$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")  # `* * *`, `- - -`: a rule, not a bullet
_FACT = re.compile(r"^(?P<key>[^:]{1,40}): (?P<value>.*\S)$")
_KEY_CHAR = re.compile(r"^[a-z0-9_\-]+$")
_OFFSET_TIME = rf"{_DATE}T\d{{2}}:\d{{2}}:\d{{2}}[+-]\d{{2}}:\d{{2}}"  # a local time with its UTC offset
_AS_OF = re.compile(rf" \(as of (?P<date>{_STAMP}|{_OFFSET_TIME})\)$")
_PROVENANCE = re.compile(
    rf" \((?P<first>{_DAY})(?: to (?P<to>{_STAMP}))?, (?P<sources>{_SOURCE}(?:; {_SOURCE})*)"
    rf"(?:; confirmed (?P<cdate>{_DAY}), (?P<csource>{_SOURCE}))?\)$"
)
_TARGET = r"[^\s;(),\[\]<>]+"
_LINK = rf"\[[^\]\s]*\]\({_TARGET}\)"
_LINKED = re.compile(
    rf" \(\[(?P<first>{_DAY})\]\((?P<source>{_TARGET})\)(?: to (?P<to>{_STAMP}))?(?P<more>(?:; {_LINK})*)"
    rf"(?:; confirmed \[(?P<cdate>{_DAY})\]\((?P<csource>{_TARGET})\))?\)$"
)
_LINK_TARGET = re.compile(rf"\[[^\]\s]*\]\(({_TARGET})\)")
UP = "../"


def bullet_of(line: str) -> str | None:
    """The bullet (`-`, `*` or `+`) of a top-level list item that may hold a fact or observation, else None.

    The one rule every reader of facts uses (consolidation, the merge driver, the superseded filter,
    timeline, as_of, search rows, check): a bullet at the start of the line followed by one space; an
    indented item, a numbered one or a thematic break (`* * *`) is none."""
    if line[:2] not in ("- ", "* ", "+ ") or _THEMATIC_BREAK.match(line):
        return None
    return line[0]


def is_bullet(line: str) -> bool:
    """`line` is a top-level `-`, `*` or `+` list item (`bullet_of`)."""
    return bullet_of(line) is not None


def valid_date(text: str) -> bool:
    """A real calendar date written YYYY-MM-DD."""
    import datetime as _dt

    try:
        _dt.date.fromisoformat(text)
    except ValueError:
        return False
    return bool(re.fullmatch(_DATE, text))


def valid_stamp(text: str) -> bool:
    """A real date, YYYY-MM-DD, or a real UTC time of one, YYYY-MM-DDTHH:MM:SSZ."""
    import datetime as _dt

    if not valid_date(text[:10]):
        return False
    if len(text) == 10:
        return True
    if not re.fullmatch(rf"{_DATE}T\d{{2}}:\d{{2}}:\d{{2}}Z", text):
        return False
    try:
        _dt.time.fromisoformat(text[11:19])
    except ValueError:
        return False
    return True


def utc_stamp(when) -> str:
    """`when` (an aware datetime) as the stamp fsmem writes: UTC, to the second, `YYYY-MM-DDTHH:MM:SSZ`."""
    import datetime as _dt

    utc = when.astimezone(_dt.UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%SZ}"  # strftime's %Y gives year 1 as "1", not "0001"


def _in_utc(text: str) -> str:
    """An `(as of …)` time written with a UTC offset (`2026-12-01T12:00:00+02:00`) as the stamp of the instant it
    names (`2026-12-01T10:00:00Z`), so that it orders among the others; any other text as it is."""
    import datetime as _dt

    if not re.fullmatch(_OFFSET_TIME, text):
        return text
    try:
        return utc_stamp(_dt.datetime.fromisoformat(text))
    except (ValueError, OverflowError):
        return text


def is_key(text: str) -> bool:
    """The key rule: one to four words of lowercase letters, digits, `_` or `-`, at most 40 characters."""
    if not text or len(text) > MAX_KEY_CHARS or text != text.strip():
        return False
    words = text.split(" ")
    if len(words) > MAX_KEY_WORDS:
        return False
    for word in words:
        if not word:
            return False
        for char in word:
            if char in "_-" or char.isdigit() and char.isascii():
                continue
            if not (char.isalpha() and char.islower()):
                return False
    return True


def normalize_value(value: str) -> str:
    """What two values must share to count as the same value: case, spacing and Unicode's canonical forms (`ü`
    as one code point or as `u` and a combining diaeresis, as macOS saves it) do not matter."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", " ".join(value.split())).casefold())


def normalize_text(text: str) -> str:
    """Observation text as its ratio to another is taken for near-duplicates (which also say the same
    `observation_words`)."""
    text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split()).casefold().rstrip(".!?;, ")


_ARTICLES = frozenset({"a", "an", "the"})
_AROUND_WORD = ".,;:!?\"'()[]{}«»“”‘’…"  # a sentence's punctuation, not the word's
_INSIDE_WORD = "-'’"  # e-mail is email, don't is dont


def observation_words(text: str) -> tuple[str, ...]:
    """What an observation says, word for word: two near-duplicates must say the same (a merged line keeps only
    the first one's words). Case, spacing, compatibility forms (NFKC), a word's hyphens and apostrophes, the
    sentence's punctuation and the articles do not count; a word with a digit or a symbol (an amount, a date, a
    version, a sign, an address) counts with every character of it."""
    words = []
    for token in unicodedata.normalize("NFKC", text).casefold().split():
        token = token.strip(_AROUND_WORD)
        if token.isalpha():  # most words: letters alone
            if token in _ARTICLES:
                continue
        elif token and all(char in _INSIDE_WORD or unicodedata.category(char)[0] in "LM" for char in token):
            token = "".join(char for char in token if char not in _INSIDE_WORD)
            if token in _ARTICLES:
                continue
        if token:
            words.append(token)
    return tuple(words)


@dataclass(frozen=True)
class Stamp:
    """When and where a value was recorded; `seq` orders records of one source on one day."""

    date: str  # YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ, or "" when unknown
    source: str
    seq: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.date, self.source, self.seq)


@dataclass(frozen=True)
class Provenance:
    """A parsed trailing citation: first record, optional end date, sources, last confirmation."""

    first: str  # date or ""
    sources: tuple[str, ...]
    to: str | None = None
    confirmed: Stamp | None = None


def split_provenance(text: str) -> tuple[str, Provenance | None]:
    """`text` without its trailing citation, and the citation (None if there is none); its sources are paths
    from the memory's root, whether the citation links them or names them as text."""
    linked = text.endswith(")") and _LINKED.search(text)
    match = linked or _PROVENANCE.search(text)
    if not match:
        return text, None
    first = match.group("first")
    to = match.group("to")
    dates = [d for d in (first, to, match.group("cdate")) if d and d != UNDATED]
    if not all(valid_stamp(d) for d in dates):
        return text, None
    if linked:
        sources = [match.group("source"), *_LINK_TARGET.findall(match.group("more") or "")]
        sources = [root_path(s) for s in sources]
    else:
        sources = match.group("sources").split("; ")
    confirmed = None
    if match.group("cdate"):
        cdate = match.group("cdate")
        csource = root_path(match.group("csource")) if linked else match.group("csource")
        confirmed = Stamp("" if cdate == UNDATED else cdate, csource)
    return text[: match.start()], Provenance(
        first="" if first == UNDATED else first,
        sources=tuple(sources),
        to=to,
        confirmed=confirmed,
    )


def root_path(target: str) -> str:
    """The memory path a citation link leads to: the link climbs to the root, then names the path from there."""
    while target.startswith((UP, "./")):
        target = target[3:] if target.startswith(UP) else target[2:]
    return target


def link_to(path: str, document: str) -> str:
    """The link from `document` to memory path `path`, as citations write it: up to the root, then `path`."""
    return UP * document.count("/") + path


def _cite(date: str, source: str, document: str) -> str:
    return f"[{date or UNDATED}]({link_to(source, document)})"


def _label(source: str) -> str:
    """The text of a further source's link: the note's name."""
    name = source.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


@dataclass(frozen=True)
class KeyedFact:
    """One `- key: value` line, with what its trailing parentheses say."""

    key: str
    value: str | None  # None: retracted (`~`)
    as_of: str | None = None  # explicit date written on the fact
    provenance: Provenance | None = None
    bad_date: str | None = None  # an `(as of ...)` that is not a real date
    bullet: str = "-"  # the bullet it was written with, kept when the line is rewritten

    @property
    def retracted(self) -> bool:
        return self.value is None


def parse_fact(line: str) -> KeyedFact | None:
    """The keyed fact on this line, or None when the line is not one (then it is an observation)."""
    line = line.rstrip("\r\n")
    bullet = _BULLET.match(line) if bullet_of(line) else None
    if not bullet:
        return None
    match = _FACT.match(bullet.group("rest"))
    if not match or not is_key(match.group("key")):
        return None
    key = match.group("key")
    value, provenance = split_provenance(match.group("value"))
    as_of = bad = None
    dated = _AS_OF.search(value)
    if dated:
        stamp = _in_utc(dated.group("date"))
        if valid_stamp(stamp):
            as_of = stamp
        else:
            bad = dated.group("date")
        value = value[: dated.start()]
    value = value.strip()
    if not value:
        return None
    return KeyedFact(key, None if value == RETRACTED else value, as_of, provenance, bad, bullet.group("mark"))


@dataclass(frozen=True)
class Observation:
    """A free observation line: its text and, if it carries one, its citation."""

    text: str
    provenance: Provenance | None = None
    bullet: str = "-"


def parse_observation(line: str) -> Observation | None:
    line = line.rstrip("\r\n")
    bullet = _BULLET.match(line) if bullet_of(line) else None
    if not bullet or not bullet.group("rest").strip():
        return None
    text, provenance = split_provenance(bullet.group("rest"))
    return Observation(text.strip(), provenance, bullet.group("mark"))


def render_current(key: str, value: str, first: Stamp, last: Stamp, document: str, bullet: str = "-") -> str:
    """A current fact as `document` shows it: its first record linked, and its last confirmation."""
    return f"{bullet} {key}: {value} ({_cite(first.date, first.source, document)}{_tail(first, last, document)})"


def render_superseded(
    key: str, value: str | None, first: Stamp, last: Stamp, to: str | None, document: str, bullet: str = "-"
) -> str:
    """A superseded value as `document` shows it: its first record linked, `to` when the next value came."""
    shown = RETRACTED if value is None else value
    span = _cite(first.date, first.source, document) + (f" to {to}" if to else "")
    return f"{bullet} {key}: {shown} ({span}{_tail(first, last, document)})"


def _tail(first: Stamp, last: Stamp, document: str) -> str:
    return f"; confirmed {_cite(last.date, last.source, document)}" if _confirmed(first, last) else ""


def _confirmed(first: Stamp, last: Stamp) -> bool:
    return (last.date, last.source) != (first.date, first.source)


def dated_first(sources: Iterable[str], dated: str | None) -> list[str]:
    """An observation's sources in the order its citation lists them: `dated`, the note whose date the line
    shows, first (that date links to it), then the others by name, sorted. A merged line shows its latest date:
    linked to another note, it was a date that note does not have."""
    rest = sorted(set(sources) - {dated})
    return [dated, *rest] if dated is not None and dated in sources else rest


def render_observation(text: str, date: str, sources: list[str], document: str, bullet: str = "-") -> str:
    """An observation as `document` shows it: its date linked to its first source (`dated_first`), the others by
    name."""
    links = [_cite(date, sources[0], document)] + [f"[{_label(s)}]({link_to(s, document)})" for s in sources[1:]]
    return f"{bullet} {text} ({'; '.join(links)})"


def slugify(name: str) -> str:
    """A file name for a subject: `Adam Smith` -> `adam-smith` (accents dropped, other scripts kept)."""
    folded = unicodedata.normalize("NFKD", name)
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    slug = re.sub(r"[^\w]+", "-", folded).strip("-_")
    slug = slug[:80].strip("-_") or "untitled"
    return slug + "_" if slug in DEVICE_NAMES else slug  # a subject named Con gets topics/con_.md, which Windows holds


def with_seq(stamp: Stamp, seq: int) -> Stamp:
    return replace(stamp, seq=seq)
