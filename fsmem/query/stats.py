"""`fsmem stats`: what agents fetched, per tool, from the retrieval log, so budgets are tuned from data.

Per tool: calls, p50 and p95 latency, mean tokens returned, and the shares of
answers that were empty, cut by the budget, errors, and (for recall records,
which carry `skipped`) skipped. Percentiles are nearest-rank: the value of a
logged call, never an interpolation between two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fsmem import faces, format as fmt
from fsmem.budget import echo
from fsmem.errors import InvalidArgument
from fsmem.store import retrieval_log


@dataclass
class ToolStats:
    tool: str
    calls: int
    p50_ms: float
    p95_ms: float
    mean_tokens: float
    empty_share: float
    truncated_share: float
    error_share: float
    skip_share: float | None = None  # only for tools whose records say whether they skipped (recall)


@dataclass
class StatsResult:
    since: str | None
    agent: str | None
    tools: list[ToolStats]

    @property
    def calls(self) -> int:
        return sum(t.calls for t in self.tools)

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "agent": self.agent, "calls": self.calls, "tools": [asdict(t) for t in self.tools]}

    def to_text(self) -> str:
        scope = []
        if self.agent:
            scope.append(f"agent {self.agent}")
        if self.since:
            scope.append(f"since {self.since}")
        where = f" ({', '.join(scope)})" if scope else ""
        if not self.tools:
            return f"(no tool calls logged{where})"
        header = ("tool", "calls", "p50 ms", "p95 ms", "mean tok", "empty", "cut", "errors", "skipped")
        rows = [header] + [
            (
                t.tool,
                str(t.calls),
                f"{t.p50_ms:.1f}",
                f"{t.p95_ms:.1f}",
                f"{t.mean_tokens:.1f}",
                _percent(t.empty_share),
                _percent(t.truncated_share),
                _percent(t.error_share),
                _percent(t.skip_share) if t.skip_share is not None else "-",
            )
            for t in self.tools
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=False))
            )
            for row in rows
        ]
        lines.append(f"[{self.calls} calls{where}]")
        return "\n".join(lines)


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _number(value: Any) -> float:
    """A logged figure, 0 where the record holds no finite number (a line fsmem did not write)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        number = float(value)
    except OverflowError:  # an integer of 400 digits
        return 0.0
    return number if math.isfinite(number) else 0.0


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `fraction` of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarise(records: Iterable[dict[str, Any]]) -> list[ToolStats]:
    """Per-tool figures, tools in order of first appearance in the log."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(str(record.get("tool")), []).append(record)
    result = []
    for tool, items in groups.items():
        n = len(items)
        latencies = [_number(r.get("latency_ms")) for r in items]
        with_skip = [r for r in items if "skipped" in r]
        result.append(
            ToolStats(
                tool=tool,
                calls=n,
                p50_ms=percentile(latencies, 0.50),
                p95_ms=percentile(latencies, 0.95),
                mean_tokens=sum(_number(r.get("tokens")) for r in items) / n,
                empty_share=sum(1 for r in items if r.get("empty")) / n,
                truncated_share=sum(1 for r in items if r.get("truncated")) / n,
                error_share=sum(1 for r in items if r.get("error")) / n,
                skip_share=sum(1 for r in with_skip if r.get("skipped")) / len(with_skip) if with_skip else None,
            )
        )
    return result


def stats(root: Path, *, since: str | None = None, agent: str | None = None) -> StatsResult:
    if since is not None and fmt.parse_timestamp(since) is None:
        raise InvalidArgument(
            f"{faces.arg('since')} takes an ISO 8601 date or time such as 2026-11-01, not {echo(since)}"
        )
    records = retrieval_log.records(root, since=since, agent=agent)
    return StatsResult(since=since, agent=agent, tools=summarise(records))
