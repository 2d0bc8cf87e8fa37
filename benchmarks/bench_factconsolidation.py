"""FactConsolidation (MemoryAgentBench): do the newest values win after consolidating out-of-order notes?

The 455 numbered facts become keyed facts (`- relation: object` under
`## topic/<subject>`) in dated session notes: five consecutive facts per note,
one day per note, so a larger serial is always newer. The notes are written in
a shuffled order and consolidated in several runs, so older notes often arrive
after newer ones. A slot (subject + relation) is correct when exactly its
current value is visible and every older value sits under `## Superseded`.

    python benchmarks/bench_factconsolidation.py [--runs 5] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# ../shared/data beside the repository (FSMEM_SHARED_DATA may point elsewhere, e.g. from a git worktree)
SHARED = Path(os.environ.get("FSMEM_SHARED_DATA") or REPO.parent / "shared" / "data")
DATA = SHARED / "factconsolidation" / "factconsolidation_6k_slots.jsonl"
QUESTIONS = SHARED / "factconsolidation" / "factconsolidation_sh_6k_qmap.jsonl"
FACTS_PER_NOTE = 5


def load(path: Path = DATA) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_notes(rows: list[dict]) -> list[tuple[str, str]]:
    """(relative path, text) of each session note, in serial order."""
    start = _dt.date(2020, 1, 1)
    notes = []
    for number in range(0, len(rows), FACTS_PER_NOTE):
        chunk = sorted(rows[number : number + FACTS_PER_NOTE], key=lambda r: r["serial"])
        day = start + _dt.timedelta(days=number // FACTS_PER_NOTE)
        lines = [f"---\ntitle: Facts {day}\ntype: episodic\ncreated: {day}T12:00:00+00:00\n---\n"]
        for row in chunk:
            lines.append(f"\n## topic/{row['subject']}\n- {row['relation']}: {row['object']}\n")
        notes.append((f"sessions/{day:%Y/%m/%d}/facts-{number // FACTS_PER_NOTE:03d}.md", "".join(lines)))
    return notes


def consolidate_shuffled(root: Path, rows: list[dict], runs: int, seed: int) -> dict:
    from fsmem import Memory

    memory = Memory.init(root)
    notes = write_notes(sorted(rows, key=lambda r: r["serial"]))
    random.Random(seed).shuffle(notes)
    seconds = 0.0
    for batch in range(runs):
        for rel, text in notes[batch::runs]:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        started = time.perf_counter()
        memory.consolidate()
        seconds += time.perf_counter() - started
    again = memory.consolidate()
    return {"notes": len(notes), "runs": runs, "seconds": seconds, "idempotent": not again.files_written}


def evaluate(root: Path, rows: list[dict]) -> dict:
    """Slots with exactly the current value visible and every older value superseded."""
    from fsmem.consolidate.documents import EntityDocument
    from fsmem.format.facts import normalize_value, slugify

    slots: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        slots.setdefault((row["subject"], row["relation"]), []).append(row)
    correct, wrong = 0, []
    superseded_facts = marked = 0
    for (subject, relation), facts in sorted(slots.items()):
        rel = f"topics/{slugify(subject)}.md"
        doc = EntityDocument(rel, (root / rel).read_text(encoding="utf-8"))
        lines = doc.fact_lines(relation)
        visible = [normalize_value(line.value or "") for line in lines if not line.superseded]
        history = {normalize_value(line.value or "") for line in lines if line.superseded}
        current = [f for f in facts if f["is_current"]]
        older = [f for f in facts if not f["is_current"]]
        superseded_facts += len(older)
        marked += sum(normalize_value(f["object"]) in history for f in older)
        ok = visible == [normalize_value(current[0]["object"])] and all(
            normalize_value(f["object"]) in history for f in older
        )
        correct += ok
        if not ok:
            wrong.append({"subject": subject, "relation": relation, "visible": visible})
    return {
        "slots": len(slots),
        "slots_correct": correct,
        "superseded_facts": superseded_facts,
        "superseded_marked": marked,
        "wrong": wrong[:10],
    }


def tree(root: Path) -> dict[str, bytes]:
    """Every file outside machine state (.fsmem/), with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".fsmem" not in p.relative_to(root).parts
    }


def search_top1(root: Path) -> dict:
    """Single-hop questions whose answer is in the top row of `fsmem search QUESTION` (no LLM)."""
    from fsmem import Memory
    from fsmem.format.facts import normalize_value

    if not QUESTIONS.exists():
        return {}
    memory = Memory(root)
    questions = load(QUESTIONS)
    right, wrong = 0, []
    started = time.perf_counter()
    for item in questions:
        hits = memory.search(item["question"], max_results=1).hits
        text = normalize_value(hits[0].text) if hits else ""
        if any(normalize_value(answer) in text for answer in item["answer"]):
            right += 1
        else:
            wrong.append(
                {"question": item["question"], "answer": item["answer"], "top": hits[0].text if hits else None}
            )
    seconds = time.perf_counter() - started
    return {"search_questions": len(questions), "search_top1": right, "search_seconds": seconds, "search_wrong": wrong}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="consolidation runs the shuffled notes are split over")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    args, _ = parser.parse_known_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} not found", file=sys.stderr)
        return 0
    rows = load()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "mem"
        run = consolidate_shuffled(root, rows, args.runs, args.seed)
        result = {**run, **evaluate(root, rows), "facts": len(rows), **search_top1(root)}
        consolidate_shuffled(Path(folder) / "one-run", rows, 1, args.seed)
        result["same_bytes_as_one_run"] = tree(root) == tree(Path(folder) / "one-run")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'facts':<28}{result['facts']}")
        print(f"{'session notes (shuffled)':<28}{result['notes']} in {result['runs']} runs")
        print(f"{'slots correct':<28}{result['slots_correct']} / {result['slots']}")
        print(f"{'older facts superseded':<28}{result['superseded_marked']} / {result['superseded_facts']}")
        print(f"{'second run idempotent':<28}{result['idempotent']}")
        print(f"{'same bytes as one run':<28}{result['same_bytes_as_one_run']}")
        print(f"{'consolidation time':<28}{result['seconds']:.2f} s")
        if "search_top1" in result:
            print(f"{'search top-1 right':<28}{result['search_top1']} / {result['search_questions']}")
            for miss in result["search_wrong"]:
                print(f"  missed: {miss['question']} -> {miss['top']!r} (answer {miss['answer'][0]!r})")
    return 0 if result["slots_correct"] == result["slots"] and result["same_bytes_as_one_run"] else 1


if __name__ == "__main__":
    sys.exit(main())
