"""What a search answers: its rows (`SearchHit`), the answer with its page (`SearchResult`), and how it reads.

Rows are grouped by file (files in order of their best row) and by heading; a
consolidated row's citation is cut to its dates, its sources kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fsmem import faces
from fsmem.budget import Page, Paged, echo
from fsmem.format.facts import split_provenance
from fsmem.format.rows import Row
from fsmem.store.meta import EXACT_COUNT_LIMIT, LEFT_OUT_LIMIT

UNSEARCHED_SHOWN = 5  # files too large for the index named in an answer; the rest counted


@dataclass
class SearchHit(Row):
    """One row of the answer: the row (where it is, what it says, what it is about), and its score."""

    score: float = 0.0
    tokens: int = 0  # what this row added to the answer (its line, plus any header it opened)
    sources: list[str] = field(default_factory=list)  # the notes a consolidated row cites

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "score": round(self.score, 4),
            "tokens": self.tokens,
            "sources": list(self.sources),
        }


@dataclass
class SearchResult(Paged):
    """Rows in score order from `page.offset`, the tokens they cost, and what the budget left out (`page`)."""

    query: str
    hits: list[SearchHit]
    tokens: int
    page: Page
    min_score: float
    best_score: float | None = None
    note: str | None = None
    unsearched: list[tuple[str, int]] = field(default_factory=list)  # (path, bytes): too large for the index

    @property
    def empty(self) -> bool:
        return not self.hits

    @property
    def cited(self) -> list[str]:
        return [h.location for h in self.hits]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "results": [h.to_dict() for h in self.hits],
            "tokens": self.tokens,
            **self.page.to_dict(),
            "min_score": self.min_score,
            "best_score": None if self.best_score is None else round(self.best_score, 4),
            "unsearched": [{"path": path, "bytes": size} for path, size in self.unsearched],
        }

    def body_lines(self) -> list[str]:
        """The rows as shown, grouped by file (files in order of their best row) and by heading."""
        return render_lines(self.hits)

    def to_text(self) -> str:
        if not self.hits:
            return "\n".join(filter(None, [self.no_result_message(), self.unsearched_line()]))
        lines = self.body_lines()
        if self.unsearched:
            lines.append(self.unsearched_line())
        trailer = self.page.trailer(self._noun(), narrow=faces.narrowing("search", ("type", "tag"))).rstrip("]")
        around = faces.call("read", path="PATH", lines="A:B")
        lines.append(f"{trailer}; {self.tokens} tokens. Read around a row with: {around}]")
        return "\n".join(lines)

    def unsearched_line(self) -> str:
        """What the search could not look in: files too large for its index, named (a few) and counted."""
        if not self.unsearched:
            return ""
        shown = ", ".join(path for path, _ in self.unsearched[:UNSEARCHED_SHOWN])
        more = len(self.unsearched) - UNSEARCHED_SHOWN
        count = f"{len(self.unsearched)} file{'s' if len(self.unsearched) > 1 else ''}"
        grep = f"grep finds {'their' if len(self.unsearched) > 1 else 'its'} lines"
        if any(size > LEFT_OUT_LIMIT for _, size in self.unsearched):
            grep = f"grep reads none over {LEFT_OUT_LIMIT:,} bytes"
        return (
            f"(not searched: {count} over {EXACT_COUNT_LIMIT:,} bytes, too large for the index: {shown}"
            f"{f' and {more} more' if more > 0 else ''}; {grep})"
        )

    def _noun(self) -> str:
        """`rows above min_score 0.2`, named as the caller can set it (a tool without the argument: `score`)."""
        name = faces.arg("min_score") if faces.offers("min_score") else "score"
        return f"rows above {name} {self.min_score:g}"

    def no_result_message(self) -> str:
        if self.note:
            return self.note
        if self.page.offset and self.page.total:
            return self.page.trailer(self._noun())
        threshold = faces.arg("min_score") if faces.offers("min_score") else "the threshold"
        best = (
            "" if self.best_score is None else f" (best score {self.best_score:.3f} < {threshold} {self.min_score:g})"
        )
        tries = (
            f"try other words, grep for a name, or lower {faces.arg('min_score')}"
            if faces.offers("min_score")
            else "try other words, or grep for a name"
        )
        return f"no relevant memory for {echo(self.query)}{best}; {tries}"


def compact_citation(text: str) -> tuple[str, list[str]]:
    """A consolidated row's text with its citation cut to its dates, and the sources it cited.

    `- Went hiking. (2023-05-08, sessions/2023/05/08/conv-26-s1.md)` costs about
    twenty tokens more than `- Went hiking. (2023-05-08)`; the budget buys more
    rows this way, and the agent reads the full line (or `sources`) when it
    needs the provenance.
    """
    body, provenance = split_provenance(text)
    if provenance is None:
        return text, []
    span = provenance.first
    if provenance.to:
        span = f"{span} to {provenance.to}"
    if provenance.confirmed is not None and provenance.confirmed.date:
        span = f"{span}; confirmed {provenance.confirmed.date}"
    return (f"{body} ({span})" if span else body), list(provenance.sources)


def _hit_lines(hit: SearchHit) -> list[str]:
    text_lines = hit.text.splitlines() or [""]
    mark = " [superseded]" if hit.superseded else ""
    first = f"{hit.line}: {text_lines[0]}{mark if len(text_lines) == 1 else ''}"
    rest = [f"    {t}" for t in text_lines[1:]]
    if rest and mark:
        rest[-1] += mark
    return [first, *rest]


def _file_header(hit: SearchHit) -> str:
    """The path; the title too when no heading line will say what the row is about."""
    return f"{hit.path} ({hit.title})" if hit.title and not hit.headings else hit.path


def _heading_line(hit: SearchHit) -> str | None:
    return f"[{' > '.join(hit.headings)}]" if hit.headings else None


def render_lines(hits: list[SearchHit]) -> list[str]:
    order: dict[str, list[SearchHit]] = {}
    for hit in hits:
        order.setdefault(hit.path, []).append(hit)
    out: list[str] = []
    for group in order.values():
        out.append(_file_header(group[0]))
        current = None
        for hit in sorted(group, key=lambda h: h.line):
            heading = _heading_line(hit)
            if heading is not None and heading != current:
                out.append(heading)
            current = heading
            out.extend(_hit_lines(hit))
    return out
