"""The evaluation harness: how well search finds gold evidence within a budget of rows and tokens.

An eval set is YAML (a list, or `questions: [...]`) or JSONL, one question each:
`{"question": ..., "gold": [{"path": ..., "line": N} | {"text": ...}, ...]}`.
An empty `gold` means nothing relevant should come back. For each k it reports
recall (share of questions with a gold row in the answer), mean and p95 tokens,
p50 and p95 latency; then the knee of the recall curve, the retriever's d'
(gold-row scores against all other rows, in pooled standard deviations) and the
share of empty-gold questions answered with nothing.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsmem.memory import Memory

from fsmem.errors import InvalidArgument
from fsmem.store import outside_files

DEFAULT_KS = (1, 2, 4, 8, 12, 20, 30)


@dataclass
class Question:
    question: str
    gold: list[dict[str, Any]]
    id: str | None = None
    category: Any = None


def _gold_item(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, str):
        return {"text": raw}
    if isinstance(raw, dict):
        if "text" in raw and isinstance(raw["text"], str) and raw["text"].strip():
            return {"text": raw["text"]}
        if "path" in raw and isinstance(raw.get("line"), int):
            return {"path": str(raw["path"]), "line": int(raw["line"])}
    raise InvalidArgument(f"{where}: each gold item is {{path, line}} or {{text}}, not {raw!r}")


def parse_questions(items: Iterable[Any], source: str = "eval set") -> list[Question]:
    questions = []
    for number, item in enumerate(items, start=1):
        where = f"{source}: question {number}"
        if not isinstance(item, dict) or not isinstance(item.get("question"), str) or not item["question"].strip():
            raise InvalidArgument(f"{where}: needs a non-empty 'question'")
        gold = item.get("gold")
        if not isinstance(gold, list):
            raise InvalidArgument(f"{where}: needs 'gold', a list (empty when nothing relevant should come back)")
        questions.append(
            Question(item["question"], [_gold_item(g, where) for g in gold], item.get("id"), item.get("category"))
        )
    if not questions:
        raise InvalidArgument(f"{source} holds no questions")
    return questions


EVALSET_LIMIT = 64 * outside_files.MiB  # LoCoMo's ten eval sets together are 0.3 MB


def load_evalset(path: str | Path) -> list[Question]:
    """Questions from a .jsonl file, or a YAML file (a list, or a mapping with `questions`)."""
    path = Path(path)
    text = outside_files.read_text(path, what="the eval set", limit=EVALSET_LIMIT)
    if path.suffix.lower() == ".jsonl":
        items = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidArgument(f"{path}:{number}: not a JSON object ({exc.msg})") from None
        return parse_questions(items, str(path))
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{path} is neither JSONL nor valid YAML: {exc}") from None
    if isinstance(data, dict):
        data = data.get("questions")
    if not isinstance(data, list):
        raise InvalidArgument(f"{path}: expected a list of questions (or 'questions:' holding one)")
    return parse_questions(data, str(path))


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def is_gold(path: str, line: int, end_line: int, text: str, gold: list[dict[str, Any]]) -> bool:
    """A row is gold when it spans a gold path:line, or contains a gold text."""
    for item in gold:
        if "text" in item:
            if _norm(item["text"]) in _norm(text):
                return True
        elif item["path"] == path and line <= item["line"] <= end_line:
            return True
    return False


@dataclass
class ScoreStats:
    """Running sums of gold and other row scores, for d'; mergeable across memories."""

    gold: list[float] = field(default_factory=lambda: [0, 0.0, 0.0])  # count, sum, sum of squares
    other: list[float] = field(default_factory=lambda: [0, 0.0, 0.0])

    def add(self, scores: Iterable[float], gold_mask: Iterable[bool]) -> None:
        for value, gold in zip(scores, gold_mask, strict=True):
            bucket = self.gold if gold else self.other
            bucket[0] += 1
            bucket[1] += value
            bucket[2] += value * value

    def merge(self, other: ScoreStats) -> None:
        for mine, theirs in ((self.gold, other.gold), (self.other, other.other)):
            for i in range(3):
                mine[i] += theirs[i]

    @staticmethod
    def _mean_var(bucket: list[float]) -> tuple[float, float]:
        n, s, ss = bucket
        mean = s / n
        return mean, max(ss / n - mean * mean, 0.0)

    def d_prime(self) -> float | None:
        if self.gold[0] < 2 or self.other[0] < 2:
            return None
        mg, vg = self._mean_var(self.gold)
        mo, vo = self._mean_var(self.other)
        pooled = math.sqrt((vg + vo) / 2)
        return (mg - mo) / pooled if pooled > 0 else None


@dataclass
class Run:
    """One question answered at one k."""

    k: int
    found: bool
    tokens: int
    latency_ms: float
    empty: bool
    has_gold: bool


def _percentile(values: Sequence[float], q: float) -> float:
    """numpy's default (linear) percentile, without numpy."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def knee(ks: list[int], recalls: list[float]) -> int | None:
    """The k where the recall curve flattens (Kneedle: farthest above the chord of the normalised curve)."""
    if not ks:
        return None
    if len(ks) < 3 or max(recalls) - min(recalls) <= 0:
        return ks[0]
    x0, x1, y0, y1 = ks[0], ks[-1], min(recalls), max(recalls)
    gaps = [((r - y0) / (y1 - y0)) - ((k - x0) / (x1 - x0)) for k, r in zip(ks, recalls, strict=False)]
    return ks[max(range(len(ks)), key=lambda i: (gaps[i], -i))]


@dataclass
class EvalReport:
    """Per-k figures, the knee, d' and the empty-gold share."""

    questions: int
    gold_questions: int
    empty_gold_questions: int
    max_tokens: int
    per_k: list[dict[str, Any]]
    knee: int | None
    d_prime: float | None
    empty_gold_correct: float | None

    @classmethod
    def from_runs(cls, runs: list[Run], ks: list[int], stats: ScoreStats, max_tokens: int) -> EvalReport:
        per_k: list[dict[str, Any]] = []
        for k in ks:
            mine = [r for r in runs if r.k == k]
            gold = [r for r in mine if r.has_gold]
            tokens = [r.tokens for r in mine]
            latency = [r.latency_ms for r in mine]
            per_k.append(
                {
                    "k": k,
                    "recall": round(sum(r.found for r in gold) / len(gold), 4) if gold else None,
                    "mean_tokens": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
                    "p95_tokens": round(_percentile(tokens, 95), 1),
                    "p50_latency_ms": round(_percentile(latency, 50), 3),
                    "p95_latency_ms": round(_percentile(latency, 95), 3),
                }
            )
        first = [r for r in runs if r.k == ks[0]]
        empties = [r for r in first if not r.has_gold]
        curve = [(int(row["k"]), float(row["recall"])) for row in per_k if row["recall"] is not None]
        d = stats.d_prime()
        return cls(
            questions=len(first),
            gold_questions=len(first) - len(empties),
            empty_gold_questions=len(empties),
            max_tokens=max_tokens,
            per_k=per_k,
            knee=knee([c[0] for c in curve], [c[1] for c in curve]) if curve else None,
            d_prime=round(d, 3) if d is not None else None,
            empty_gold_correct=round(sum(r.empty for r in empties) / len(empties), 4) if empties else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        lines = [
            f"{self.questions} questions ({self.gold_questions} with gold evidence, "
            f"{self.empty_gold_questions} expecting nothing); budget {self.max_tokens} tokens",
            f"{'k':>4}  {'recall':>6}  {'mean tok':>8}  {'p95 tok':>7}  {'p50 ms':>7}  {'p95 ms':>7}",
        ]
        for row in self.per_k:
            recall = "-" if row["recall"] is None else f"{row['recall']:.3f}"
            lines.append(
                f"{row['k']:>4}  {recall:>6}  {row['mean_tokens']:>8.1f}  {row['p95_tokens']:>7.1f}  "
                f"{row['p50_latency_ms']:>7.2f}  {row['p95_latency_ms']:>7.2f}"
            )
        lines.append(f"knee: k={self.knee}" if self.knee is not None else "knee: - (no questions with gold)")
        lines.append(f"d': {self.d_prime:.2f}" if self.d_prime is not None else "d': - (too few gold rows)")
        if self.empty_gold_correct is not None:
            lines.append(f"empty-gold questions answered with nothing: {self.empty_gold_correct:.3f}")
        return "\n".join(lines)


def parse_ks(text: str | Iterable[int] | None) -> list[int]:
    if text is None:
        return list(DEFAULT_KS)
    if isinstance(text, str):
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise InvalidArgument(
                f"--k takes whole numbers separated by commas, such as 1,2,4,8, not {text!r}"
            ) from None
    else:
        values = [int(v) for v in text]
    if not values or any(v < 1 for v in values):
        raise InvalidArgument("--sweep needs at least one row cap, each 1 or more")
    return sorted(set(values))


def run_questions(
    memory: Any, questions: list[Question], ks: list[int], max_tokens: int | None
) -> tuple[list[Run], ScoreStats, int]:
    """Answer every question at every k (unlogged: an evaluation is not agent traffic)."""
    from fsmem.search.ranking import search, usage_counts

    stats = ScoreStats()
    usage = usage_counts(memory.root)
    runs: list[Run] = []
    budget_tokens = memory.budget.narrowed(max_tokens, None).max_tokens
    index = memory.search_index
    for question in questions:
        for position, k in enumerate(ks):
            budget = memory.budget.narrowed(max_tokens, k)
            started = time.perf_counter()
            result, ranking = search(
                index,
                memory.tokens,
                memory.search_settings,
                question.question,
                k=budget.max_results,
                max_tokens=budget.max_tokens,
                usage=usage,
            )
            latency = (time.perf_counter() - started) * 1000
            found = any(is_gold(h.path, h.line, h.end_line, h.text, question.gold) for h in result.hits)
            runs.append(Run(k, found, result.tokens, latency, result.empty, bool(question.gold)))
            if position == 0 and question.gold:
                score_of = {(ranking.paths[i], ranking.lines[i]): ranking.scores[i] for i in ranking.candidates}
                scores, mask = [], []
                for row in index.visible_rows():  # every other row scores 0
                    scores.append(score_of.get((row.path, row.line), 0.0))
                    mask.append(is_gold(row.path, row.line, row.end_line, row.text, question.gold))
                if any(mask):
                    stats.add(scores, mask)
    return runs, stats, budget_tokens


def evaluate(
    memory: Memory,
    evalset: str | Path | list[Any],
    *,
    sweep: str | Iterable[int] | None = None,
    max_tokens: int | None = None,
) -> EvalReport:
    """Recall, tokens and latency at each row cap of `sweep` (k = max_results), the knee, d' and the empty-gold share."""
    questions = parse_questions(evalset) if isinstance(evalset, list) else load_evalset(evalset)
    ks = parse_ks(sweep if sweep is None or isinstance(sweep, str) else list(sweep))
    runs, stats, budget_tokens = run_questions(memory, questions, ks, max_tokens)
    return EvalReport.from_runs(runs, ks, stats, budget_tokens)


def require_matplotlib():
    from fsmem.extras import needs_extra

    with needs_extra("plot", "fsmem evaluate --plot"):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    return plt


def plot(report: EvalReport, path: str | Path) -> None:
    """Recall and p95 latency against k, one PNG."""
    path = outside_files.output_file(path, what="the plot")
    plt = require_matplotlib()
    ks = [row["k"] for row in report.per_k]
    figure, left = plt.subplots(figsize=(6, 4))
    left.plot(ks, [row["recall"] or 0 for row in report.per_k], marker="o", color="tab:blue", label="recall")
    left.set_xlabel("k (rows)")
    left.set_ylabel("recall", color="tab:blue")
    left.set_ylim(0, 1)
    if report.knee is not None:
        left.axvline(report.knee, color="grey", linestyle=":", label=f"knee k={report.knee}")
    right = left.twinx()
    right.plot(ks, [row["p95_latency_ms"] for row in report.per_k], marker="s", color="tab:red", label="p95 latency")
    right.set_ylabel("p95 latency (ms)", color="tab:red")
    right.set_ylim(bottom=0)  # from zero, so run-to-run noise does not look like a trend
    d = "-" if report.d_prime is None else f"{report.d_prime:.2f}"
    left.set_title(f"{report.questions} questions, {report.max_tokens} tokens, d'={d}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
