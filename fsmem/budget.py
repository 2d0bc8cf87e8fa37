"""The one budget mechanism: every answer an agent gets is filled, cut and described here.

A read budget has two dimensions, rows and tokens (`Budget`), and belongs to
the agent that reads; a call may ask for less, never for more. An answer is
filled item by item with `Meter`, which takes whole items only and says which
cap stopped it. A list-shaped answer describes where it stands with `Page`: how
many it showed, of how many, and the offset that shows the next ones. The rule
every continuation follows: it moves forward, or there is none and the answer
says the budget is too small for one item. `fit_text` is the last net under
any text answer: cut in whole lines, marked, never over the cap.

This module is long because it is that one mechanism: the meter, the page and
its trailer, the nets and how an answer repeats an argument or names a long
path are read together when a face's answer is fitted, and split they would
drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, TypeVar, overload

from fsmem import faces
from fsmem.tokens import LONGEST_TOKEN_CHARS

Count = Callable[[str], int]
T = TypeVar("T")
CUT_BY_TOKENS = "tokens"
CUT_BY_RESULTS = "results"
CUT_BY_READ_LIMIT = "read_limit"  # a file read no further than its first 64 MiB (`LEFT_OUT_LIMIT`): no next part


@dataclass(frozen=True)
class Budget:
    """What one answer may cost the agent that asked: tokens and rows (and whether it may write)."""

    max_tokens: int
    max_results: int
    read_only: bool = False

    def narrowed(self, max_tokens: int | None = None, max_results: int | None = None) -> Budget:
        """A caller may ask for less than its budget, never for more. The caps were checked on the way in
        (`fsmem.arguments`, against the spec's `minimum` of 1), so here they only narrow."""
        return replace(
            self,
            max_tokens=self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens),
            max_results=self.max_results if max_results is None else min(self.max_results, max_results),
        )


class Meter:
    """Fills one answer with whole items until its row cap or its token cap would be passed.

    `take_text(lines)` adds an item when both caps allow it; the first item
    that does not fit closes the meter (`full`) and names the cap that stopped
    it (`cut_by`). Nothing is added after that, so a ranked or paged answer
    never skips an item and shows a later, smaller one. A selection that is no
    page (INDEX.md picks documents by importance) passes `skip=True`: an item
    that does not fit is left out and the next is tried.

    Tokens are counted only when they matter. A token is at least one byte, so
    while the bytes taken stay within the cap the answer certainly fits and
    nothing is counted (a small `fsmem grep` never loads the tokenizer); near
    the cap every decision is exact. `tokens` is always the exact count,
    computed when first asked for.
    """

    def __init__(
        self, count: Count, *, max_tokens: int, max_results: int | None = None, reserve: int = 0, skip: bool = False
    ):
        self.count = count
        self.skip = skip
        self.max_tokens = max_tokens
        self.max_results = max_results
        self.reserve = reserve  # tokens kept back for the trailer line
        self.items = 0
        self.cut_by: str | None = None
        self._taken: list[str] = []  # what was taken while only bytes were counted
        self._bytes = 0
        self._exact: int | None = None  # tokens spent, once counting started

    @property
    def tokens(self) -> int:
        """Tokens spent so far, counted exactly."""
        if self._exact is None:
            self._exact = sum(self.count(text) for text in self._taken)
            self._taken = []
        return self._exact

    @property
    def full(self) -> bool:
        return self.cut_by is not None

    @property
    def room(self) -> int:
        """Tokens still free for content."""
        return max(0, self.max_tokens - self.reserve - self.tokens)

    def cost(self, pieces: str | Iterable[str]) -> int:
        """Tokens of an item rendered as these lines (each with its newline)."""
        if isinstance(pieces, str):
            pieces = (pieces,)
        return sum(self.count(piece + "\n") for piece in pieces)

    def _row_cap_reached(self) -> bool:
        if self.max_results is not None and self.items >= self.max_results:
            self.cut_by = CUT_BY_RESULTS
            return True
        return False

    def take(self, cost: int) -> bool:
        """Spend `cost` tokens on one more item if both caps allow it; else close the meter."""
        if self.full or self._row_cap_reached():
            return False
        if cost > self.room:
            if not self.skip:
                self.cut_by = CUT_BY_TOKENS
            return False
        self._exact = self.tokens + cost
        self.items += 1
        return True

    def take_text(self, pieces: str | Iterable[str]) -> bool:
        """Take an item rendered as these lines, counting its tokens only if its bytes might not fit."""
        lines = (pieces,) if isinstance(pieces, str) else tuple(pieces)
        if self.full or self._row_cap_reached():
            return False
        if self._exact is None:
            text = "".join(line + "\n" for line in lines)
            size = len(text.encode("utf-8"))
            if self._bytes + size <= self.max_tokens - self.reserve:
                self._bytes += size
                self._taken.append(text)
                self.items += 1
                return True
        return self.take(self.cost(lines))

    def add_to_last(self, cost: int) -> bool:
        """Grow the last item taken (a match's trailing context line) when the room allows it."""
        if self.items == 0 or cost > self.room:
            return False
        self._exact = self.tokens + cost
        return True

    def add_text_to_last(self, line: str) -> bool:
        """`add_to_last` for a rendered line, counted only when its bytes might not fit."""
        if self.items == 0:
            return False
        if self._exact is None:
            text = line + "\n"
            size = len(text.encode("utf-8"))
            if self._bytes + size <= self.max_tokens - self.reserve:
                self._bytes += size
                self._taken.append(text)
                return True
        return self.add_to_last(self.count(line + "\n"))

    def spend(self, text: str) -> None:
        """Count a line the answer shows outside its items (a cut head already checked against `room`)."""
        self._exact = self.tokens + self.count(text)

    def close(self, cut_by: str) -> None:
        """Stop taking items: the caller knows more exist and why they are left out."""
        if self.cut_by is None:
            self.cut_by = cut_by

    def head_that_fits(
        self, text: str, render: Callable[[str], str], *, truncate: Callable[[str, int], str]
    ) -> str | None:
        """The longest head of `text` whose rendered line fits the room left (marked as cut), or None.

        For the one item an answer must show even when it is longer than the
        whole budget (a huge line), so that paging still moves past it.
        """
        room = self.room
        allowance = room
        while allowance > 0:
            head = truncate(text, allowance)
            line = render(head)
            cost = self.count(line + "\n")
            if cost <= room:
                return line
            allowance -= max(1, cost - room)
        return None


@dataclass(frozen=True)
class Page:
    """Where a list-shaped answer stands: `shown` items from `offset`, of `total`, and why it stopped.

    `next_offset` is None both when nothing is left and when the budget could
    not show even one item: a continuation that would ask for the same page
    again is never offered (`too_small` says which).
    """

    offset: int
    shown: int
    total: int
    cut_by: str | None = None

    @property
    def left_out(self) -> int:
        return max(0, self.total - self.offset - self.shown)

    @property
    def truncated(self) -> bool:
        return self.left_out > 0

    @property
    def too_small(self) -> bool:
        """Items are left, but the budget could not show the first of them."""
        return self.left_out > 0 and self.shown == 0 and self.offset < self.total

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.shown if self.left_out and self.shown else None

    @property
    def next_arguments(self) -> dict[str, Any] | None:
        """What to send again for the next page, or None: the continuation as data."""
        return None if self.next_offset is None else {"offset": self.next_offset}

    def to_dict(self) -> dict[str, Any]:
        return {
            **named(self, "total", "offset", "left_out", "next_offset", "truncated"),
            "cut_by": self.cut_by if self.truncated else None,
        }

    def reason(self) -> str:
        return "token budget" if self.cut_by == CUT_BY_TOKENS else "result limit"

    def trailer(self, noun: str, *, narrow: str = "") -> str:
        """The last line of a text answer: what was shown, what was left out, and how to get it, in the words
        of the face that asked (`narrow` comes from `faces.narrowing`)."""
        first, last = self.offset + 1, self.offset + self.shown
        if self.too_small:
            larger = faces.larger_budget()
            return (
                f"[{self.left_out} {noun} left out: the token budget is too small to show even one"
                f"{larger}{narrow if larger else ''}]"
            )
        if self.truncated:
            return (
                f"[{noun} {first}-{last} of {self.total}; {self.left_out} left out by the {self.reason()}. "
                f"Continue with {faces.ask(offset=self.next_offset)}{narrow}]"
            )
        if self.shown:
            return f"[{noun} {first}-{last} of {self.total}]"
        if self.offset and self.total:
            return f"[no {noun} at offset {self.offset}; there are {self.total} in all]"
        return f"[0 {noun}]"


def named(part: Any, *names: str) -> dict[str, Any]:
    """The JSON form of an answer part that says its attributes as they are: these, or a dataclass's fields."""
    return {name: getattr(part, name) for name in names or [f.name for f in fields(part)]}


class ReadOff(Generic[T]):
    """A figure an answer reads off a part it holds (`Paged`'s page, the read a past version wraps), by the
    same name: `total = ReadOff[int]("page")` is `self.page.total`."""

    def __init__(self, part: str):
        self.part = part

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> ReadOff[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> ReadOff[T] | T:
        return self if obj is None else getattr(getattr(obj, self.part), self.name)


class Paged:
    """What a paged answer says of itself, read off its `page`: one definition for ls, grep, search and log."""

    page: Page

    total = ReadOff[int]("page")
    offset = ReadOff[int]("page")
    left_out = ReadOff[int]("page")
    next_offset = ReadOff[int | None]("page")
    next_arguments = ReadOff[dict[str, Any] | None]("page")

    @property
    def truncated(self) -> bool:
        return self.page.truncated

    @property
    def cut_by(self) -> str | None:
        return self.page.cut_by if self.truncated else None

    @property
    def empty(self) -> bool:
        """Nothing matches at all (not: this page is past the end)."""
        return self.page.total == 0

    @property
    def rows(self) -> int:
        return len(self.cited)

    @property
    def cited(self) -> list[str]:
        """What the rows shown point at (paths, path:line, commits): the retrieval log records them."""
        raise NotImplementedError


class Metered:
    """An answer that kept the `meter` it was fitted with: the tokens it spent."""

    meter: Meter | None

    @property
    def tokens(self) -> int:
        return self.meter.tokens if self.meter is not None else 0


def fit_text(count: Count, truncate: Callable[[str, int], str], text: str, max_tokens: int) -> tuple[str, bool]:
    """`text` within `max_tokens`: whole lines, then a note saying where it was cut; (text, was_cut).

    The last net under every text answer: answers fit their budget by
    construction, and this only catches what a renderer could not foresee.
    Its cost follows the budget, not the text: a text or line too long to fit
    (more than `LONGEST_TOKEN_CHARS` a token) is not counted.
    """
    if len(text.encode("utf-8", "surrogatepass")) <= max_tokens:
        return text, False  # a token is at least one byte: short text fits without the tokenizer
    if len(text) <= max_tokens * LONGEST_TOKEN_CHARS and count(text) <= max_tokens:
        return text, False
    lines = text.split("\n")
    template = "[answer cut at the {budget}-token budget after line {shown} of {total}; ask for less]"
    note = template.format(budget=max_tokens, shown=len(lines), total=len(lines))
    meter = Meter(count, max_tokens=max_tokens, reserve=count(note))
    kept: list[str] = []
    for line in lines:
        if len(line) > max_tokens * LONGEST_TOKEN_CHARS or not meter.take_text(line):
            break
        kept.append(line)
    if kept:
        return "\n".join(kept + [template.format(budget=max_tokens, shown=len(kept), total=len(lines))]), True
    return marked_head(count, truncate, text, max_tokens), True


CUT_MARK = "[…]"  # one token: what is left of an answer's note of a cut when the budget holds no more


def marked_head(count: Count, truncate: Callable[[str, int], str], text: str, max_tokens: int) -> str:
    """The head of `text` that fits `max_tokens` with `CUT_MARK` after it. At a budget smaller than any
    note, the last net showed the head unmarked ("[" at 1 token, "[the token budget is" at 5), as if whole."""
    text = text[: (max_tokens + 1) * 32]  # more than the budget holds: a token is rarely over 32 characters
    room = max_tokens - count(" " + CUT_MARK)
    while room >= 0:
        head = truncate(text, room).rstrip("\ufffd")
        marked = f"{head}{CUT_MARK}" if not head or head.endswith((" ", "\n")) else f"{head} {CUT_MARK}"
        over = count(marked) - max_tokens
        if over <= 0:
            return marked
        room -= max(1, over)
    return CUT_MARK if count(CUT_MARK) <= max_tokens else ""


# A path longer than this is one an answer may show cut (its head and `…`): a path of 4,096 bytes may be 4,000
# tokens, over a whole budget; a shorter one is shown whole, or the answer says its budget is too small.
LONG_PATH_BYTES = 256


def long_path(path: str) -> bool:
    return len(path.encode("utf-8", "surrogatepass")) > LONG_PATH_BYTES


# Tokens kept back from an answer's content for its trailer lines (what was left out, how to go on).
TRAILER_RESERVE = 48


def content_budget(max_tokens: int) -> int:
    """The tokens an answer's content may take so that its trailer still fits in `max_tokens`."""
    return max(1, max_tokens - min(TRAILER_RESERVE, max_tokens // 4))


def within(
    ask: Callable[[int], T], render: Callable[[T], str], count: Count, max_tokens: int, *, reserve: bool = True
) -> tuple[T, str]:
    """An answer whose text fits `max_tokens`, trailer included: (the answer, its text).

    `ask(room)` makes the answer with `room` tokens for its content. When the
    text comes out over the budget, the answer is asked for again with less
    room, so that its own hint of how to go on stays exact (a cut made
    afterwards would skip lines silently); the caller's last net is `fit_text`.
    An answer that counts its own trailer in its budget passes `reserve=False`.
    Eight tries: at a small budget a trailer is a third of it, and four tries
    could stop with one row still over, whose text the last net then cut,
    continuation and all (a grep at 47 tokens, found by test_faces).
    """
    room = content_budget(max_tokens) if reserve else max_tokens
    for _ in range(8):
        answer = ask(room)
        text = render(answer)
        over = (0 if len(text.encode("utf-8", "surrogatepass")) <= max_tokens else count(text)) - max_tokens
        if over <= 0 or room <= 1:
            break
        room = max(1, room - max(over + 4, room // 4))
    return answer, text


ECHO_CHARS = 32


def echo(value: object, chars: int = ECHO_CHARS) -> str:
    """`value` as an answer or an error repeats what it was given: whole when short, else its start and its size.

    A query of 5,000 words echoed whole made a "no relevant memory" answer of
    29 KB; no input floods an answer this way.
    """
    if isinstance(value, str):
        if len(value) <= chars:
            return repr(value)
        return f"{value[:chars]!r}… ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of {value.bit_length()} bits"
    try:
        shown = repr(value)
    except Exception:  # a repr that fails says nothing; its type does
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= chars else f"{shown[:chars]}… ({type(value).__name__})"
