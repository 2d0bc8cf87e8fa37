"""LoCoMo: fsmem search vs fsmem grep vs plain BM25 over raw dialog turns, at 500 / 1,000 / 2,000 tokens.

    .venv/bin/python benchmarks/bench_locomo.py [--data ../shared/data/locomo10.json] [--plot FILE.png] [--json]

All ten conversations are imported as dated session notes (fsmem.locomo), one
memory each. Questions of categories 1-4; a question is found when any of its
evidence turns is in the answer within the budget. The baseline reproduces the
issue's reference (bm25s, English stop words removed, no stemming, each turn
indexed as "date speaker: text", its cost the tokens of its text); fsmem's cost
is everything its answer shows (file headers, headings, line numbers, markers).
Then the k sweep of fsmem search at 2,000 tokens: recall per k, the knee and d'.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
BUDGETS = (500, 1000, 2000)
KS = (1, 2, 4, 8, 12, 20, 30, 50)


def raw_turns(sample):
    from fsmem.evaluation.locomo import sessions_of

    conversation = sample["conversation"]
    turns = []
    for number, _when, session in sessions_of(conversation):
        stamp = conversation[f"session_{number}_date_time"]
        turns.extend(dict(t, date=stamp) for t in session)
    return turns


def bm25_baseline(sample, questions, counter):
    """Plain BM25 over raw turns: found at each budget (whole turns in score order)."""
    import bm25s
    import numpy as np

    turns = raw_turns(sample)
    docs = [f"{t['date']} {t['speaker']}: {t['text']}" for t in turns]
    cost = [counter.count(t["text"]) for t in turns]
    model = bm25s.BM25()
    model.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
    tokenized = bm25s.tokenize([q.question for q in questions], stopwords="en", show_progress=False)
    order, _ = model.retrieve(tokenized, k=len(docs), show_progress=False)
    found = {b: [] for b in BUDGETS}
    for question, ranked in zip(questions, np.asarray(order), strict=False):
        gold = {g["text"].strip("[]") for g in question.gold}
        for budget in BUDGETS:
            spent, hit = 0, False
            for i in ranked:
                if spent + cost[i] > budget:
                    break
                spent += cost[i]
                if turns[i]["dia_id"] in gold:
                    hit = True
                    break
            found[budget].append(hit)
    return found


def grep_keywords(memory, analyzer, questions):
    """fsmem grep for the question's words (stop words removed), in file order, within the budget."""
    import re

    found = {b: [] for b in BUDGETS}
    for question in questions:
        words = [w for w in analyzer.words(question.question) if len(w) > 2]
        gold = [g["text"] for g in question.gold]
        for budget in BUDGETS:
            if not words:
                found[budget].append(False)
                continue
            pattern = r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b"
            result = memory.grep(pattern, ignore_case=True, max_tokens=budget, max_results=500)
            found[budget].append(any(g in m.text for m in result.matches for g in gold))
    return found


def fsmem_search(memory, questions):
    from fsmem.evaluation.harness import is_gold
    from fsmem.search.ranking import search

    found = {b: [] for b in BUDGETS}
    latency = []
    for question in questions:
        for budget in BUDGETS:
            started = time.perf_counter()
            result, _r = search(
                memory.search_index, memory.tokens, memory.search_settings, question.question, k=500, max_tokens=budget
            )
            latency.append((time.perf_counter() - started) * 1000)
            found[budget].append(any(is_gold(h.path, h.line, h.end_line, h.text, question.gold) for h in result.hits))
    return found, latency


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (see ../shared/data/README.md)")
        return 0
    from fsmem import Memory
    from fsmem.evaluation.harness import EvalReport, ScoreStats, _percentile, load_evalset, plot, run_questions
    from fsmem.evaluation.locomo import import_locomo, load

    samples = load(args.data)
    totals = {name: {b: [] for b in BUDGETS} for name in ("fsmem search", "fsmem grep (keywords)", "BM25 raw turns")}
    runs_all, stats_all, latency_all = [], ScoreStats(), []
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        imported = import_locomo(args.data, tmp)
        import_seconds = time.perf_counter() - started
        for sample, root, evalset in zip(samples, imported.memories, imported.evalsets, strict=False):
            memory = Memory(root)
            questions = load_evalset(evalset)
            analyzer = memory.search_index.analyzer
            found, latency = fsmem_search(memory, questions)
            latency_all.extend(latency)
            for name, result in (
                ("fsmem search", found),
                ("fsmem grep (keywords)", grep_keywords(memory, analyzer, questions)),
                ("BM25 raw turns", bm25_baseline(sample, questions, memory.tokens)),
            ):
                for budget in BUDGETS:
                    totals[name][budget].extend(result[budget])
            runs, stats, budget_tokens = run_questions(memory, questions, list(KS), 2000)
            runs_all.extend(runs)
            stats_all.merge(stats)
    report = EvalReport.from_runs(runs_all, list(KS), stats_all, 2000)
    questions_total = len(totals["fsmem search"][BUDGETS[0]])
    table = {name: {b: round(sum(v) / len(v), 3) for b, v in per.items()} for name, per in totals.items()}
    summary = {
        "conversations": len(samples),
        "questions": questions_total,
        "import_seconds": round(import_seconds, 1),
        "recall_at_budget": table,
        "search_latency_ms": {
            "p50": round(_percentile(latency_all, 50), 2),
            "p95": round(_percentile(latency_all, 95), 2),
        },
        "k_sweep_2000_tokens": report.to_dict(),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"LoCoMo: {len(samples)} conversations, {questions_total} questions (categories 1-4), imported in {import_seconds:.1f} s"
        )
        print("| retriever | 500 tokens | 1,000 tokens | 2,000 tokens |")
        print("| --- | --- | --- | --- |")
        for name, per in table.items():
            print(f"| {name} | " + " | ".join(f"{per[b]:.3f}" for b in BUDGETS) + " |")
        base = table["BM25 raw turns"]
        gain = " / ".join(f"{table['fsmem search'][b] - base[b]:+.3f}" for b in BUDGETS)
        print(f"fsmem search vs BM25 raw turns: {gain} (500 / 1,000 / 2,000 tokens)")
        print(
            f"fsmem search latency: p50 {summary['search_latency_ms']['p50']} ms, p95 {summary['search_latency_ms']['p95']} ms"
        )
        print()
        print("k sweep of fsmem search at 2,000 tokens:")
        print(report.to_text())
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
