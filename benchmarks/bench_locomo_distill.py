"""LoCoMo with and without distilled notes: evidence recall of fsmem search at 500 / 1,000 / 2,000 tokens.

    .venv/bin/python benchmarks/bench_locomo_distill.py [--data ../shared/data/locomo10.json] [--json]

Each conversation becomes two memories in the same run, its sessions saved as episodes exactly as `fsmem import`
saves a conversation (fenced lines `Speaker: text [D1:3]`, the record of the lines held); in the second,
`fsmem distill --command` runs a stand-in distiller (benchmarks/locomo_observations.py) that answers LoCoMo's own
per-session `observation` lists, one derived note per session. Both are consolidated, then searched for the
questions of categories 1-4: a question is found when any of its evidence turns is in the answer within the
budget. The stand-in is human-written and cites its evidence, so the gain is an upper bound for a distiller of
that quality, not what a model would reach.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
FSMEM = str(Path(sys.executable).with_name("fsmem"))


def episode(sample_id: str, number: int, when, turns) -> str:
    """A LoCoMo session as `fsmem import` would save a conversation: an episode, its lines fenced."""
    from fsmem import format as fmt
    from fsmem.hooks.claude_code import fenced
    from fsmem.importers.notes import Held, digest

    lines = [f"{t['speaker']}: {' '.join(str(t.get('text', '')).split())} [{t['dia_id']}]" for t in turns]
    stamp = when.isoformat(timespec="seconds").replace("+00:00", "Z")
    front = {
        "title": f"LoCoMo {sample_id} session {number}",
        "description": "a LoCoMo session saved as an episode",
        "type": "episodic",
        "session": f"{sample_id}-s{number}",
        "source": "locomo",
        "conversation": f"{sample_id}-s{number}",
        "created": stamp,
        "updated": stamp,
        **Held(len(lines), digest(lines)).fields(),
    }
    return fmt.render(front, "\n".join([f"# LoCoMo {sample_id} session {number}", *fenced(lines)]) + "\n")


def build(sample, root: Path, data: Path, distill: bool) -> tuple[object, float]:
    from fsmem import Memory
    from fsmem.evaluation.locomo import sessions_of

    memory = Memory.init(root)
    config = root / "fsmem.yaml"
    config.write_text(config.read_text().replace("    max_results: 50\n", "    max_results: 500\n", 1))
    memory = Memory(root)
    sample_id = str(sample["sample_id"])
    for number, when, turns in sessions_of(sample["conversation"]):
        memory.write(f"sessions/{when:%Y/%m/%d}/{sample_id}-s{number}.md", episode(sample_id, number, when, turns))
    seconds = 0.0
    if distill:
        started = time.perf_counter()
        command = f"{sys.executable} {REPO / 'benchmarks' / 'locomo_observations.py'} {data}"
        done = subprocess.run(
            [FSMEM, "--root", str(root), "distill", "--command", command, "--episode-tokens", "1000000"],
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"fsmem distill failed ({done.returncode}): {done.stdout}{done.stderr}")
    memory = Memory(root)
    memory.consolidate()
    return memory, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--samples", nargs="*", help="only these sample ids (default: all ten)")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (see ../shared/data/README.md)")
        return 0
    from bench_locomo import BUDGETS, fsmem_search

    from fsmem.evaluation.harness import load_evalset
    from fsmem.evaluation.locomo import evalset_rows, load, sessions_of

    samples = [s for s in load(args.data) if not args.samples or str(s["sample_id"]) in args.samples]
    names = ("episodes only", "episodes + one distilled note per session")
    totals = {name: {b: [] for b in BUDGETS} for name in names}
    distill_seconds = 0.0
    sessions = 0
    with tempfile.TemporaryDirectory() as tmp:
        for sample in samples:
            known = {t["dia_id"] for _n, _w, turns in sessions_of(sample["conversation"]) for t in turns}
            sessions += len(sessions_of(sample["conversation"]))
            evalset = Path(tmp, f"{sample['sample_id']}.eval.jsonl")
            rows = evalset_rows(sample, known)
            evalset.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in rows))
            questions = load_evalset(evalset)
            for name, distill in zip(names, (False, True), strict=True):
                memory, seconds = build(
                    sample, Path(tmp, "distilled" if distill else "plain", str(sample["sample_id"])), args.data, distill
                )
                distill_seconds += seconds
                found, _latency = fsmem_search(memory, questions)
                for budget in BUDGETS:
                    totals[name][budget].extend(found[budget])
    table = {name: {b: round(sum(v) / len(v), 3) for b, v in per.items()} for name, per in totals.items()}
    questions_total = len(totals[names[0]][BUDGETS[0]])
    if args.json:
        print(json.dumps({"questions": questions_total, "sessions": sessions, "recall_at_budget": table}, indent=2))
        return 0
    print(
        f"LoCoMo: {len(samples)} conversations, {sessions} sessions, {questions_total} questions (categories 1-4); "
        f"fsmem distill ran the stand-in on every session in {distill_seconds:.1f} s"
    )
    print("| memory | 500 tokens | 1,000 tokens | 2,000 tokens |")
    print("| --- | --- | --- | --- |")
    for name, per in table.items():
        print(f"| {name} | " + " | ".join(f"{per[b]:.3f}" for b in BUDGETS) + " |")
    gain = " / ".join(f"{table[names[1]][b] - table[names[0]][b]:+.3f}" for b in BUDGETS)
    print(f"distilled notes: {gain} (500 / 1,000 / 2,000 tokens; an upper bound for a distiller of that quality)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
