"""Consolidation at scale: 1,000 session notes of 10 facts each into a store of 10,000 documents, then one more note.

The baseline, measured in the same run, is reading and splitting every
document once (what any approach that re-parses the whole store pays). The
full run must stay within 10x of it (it parses each document it touches once,
writes them and the notes' marks, fsynced); the incremental run must cost a
small fraction of it: it reads only the documents that the new note names
(plus a stat of each file for INDEX.md's cache).

    python benchmarks/bench_consolidate.py [--notes 1000] [--documents 10000] [--json]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

KEYS = ["employer", "role", "city", "team", "phone", "manager", "status", "timezone"]
WORDS = ["north", "south", "blue", "green", "alpha", "delta", "atlas", "orion", "lumen", "vega", "kilo", "zulu"]


def person(number: int) -> str:
    return f"Person {number:05d}"


def generate(root: Path, notes: int, documents: int, seed: int = 1) -> None:
    """A memory with `documents` people (3 facts, 2 observations each) and `notes` session notes of 10 facts."""
    from fsmem import Memory

    Memory.init(root)
    rng = random.Random(seed)
    folder = root / "entities" / "people"
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(documents):
        name = person(number)
        facts = "".join(f"- {key}: {rng.choice(WORDS)} {rng.randint(1, 99)}\n" for key in KEYS[:3])
        (folder / f"person-{number:05d}.md").write_text(
            f"---\ntitle: {name}\ndescription: Generated person {number}\ntype: semantic\n"
            f"entity: people/{name}\ncreated: 2025-01-01\nupdated: 2025-01-01\n---\n# {name}\n\n## Facts\n{facts}\n"
            f"## Notes\n- Met at the {rng.choice(WORDS)} offsite. (2025-01-01, sessions/2025/01/01/seed.md)\n"
            f"- Works closely with {person(rng.randrange(documents))}. (2025-01-01, sessions/2025/01/01/seed.md)\n",
            encoding="utf-8",
        )
    start = _dt.date(2026, 1, 1)
    for number in range(notes):
        write_note(root, start + _dt.timedelta(days=number // 10), f"bench-{number:04d}", rng, documents)


def write_note(root: Path, day: _dt.date, session: str, rng: random.Random, documents: int) -> None:
    lines = [f"---\ntitle: Session {session}\ntype: episodic\nsession: {session}\ncreated: {day}T10:00:00+00:00\n---\n"]
    for _ in range(10):
        lines.append(
            f"\n## people/{person(rng.randrange(documents))}\n- {rng.choice(KEYS)}: {rng.choice(WORDS)} {rng.randint(1, 99)}\n"
        )
    path = root / "sessions" / f"{day:%Y/%m/%d}" / f"{session}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def load_average() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def read_everything(root: Path) -> float:
    """Baseline: read and split every entity document once."""
    from fsmem import format as fmt

    started = time.perf_counter()
    for path in (root / "entities").rglob("*.md"):
        fmt.split(path.read_text(encoding="utf-8"))
    return time.perf_counter() - started


def many_keys(keys: int) -> float:
    """Seconds to consolidate a second note giving new values to `keys` keys of one subject (the first made them)."""
    from fsmem import Memory

    with tempfile.TemporaryDirectory() as folder:
        memory = Memory.init(Path(folder) / "mem")
        for day, word in (("01", "old"), ("02", "new")):
            path = memory.root / f"sessions/2026/01/{day}/keys.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            body = "".join(f"- key {n}: {word} {n}\n" for n in range(keys))
            path.write_text(f"---\ntitle: Keys\n---\n## topic/Many Keys\n{body}", encoding="utf-8")
            started = time.perf_counter()
            memory.consolidate()
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--documents", type=int, default=10000)
    parser.add_argument("--keys", default="1000,2000,4000,8000", help="keys of one subject, for the scaling runs")
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    args, _ = parser.parse_known_args(argv)  # run_all.py passes every script the same arguments
    os.environ.setdefault("FSMEM_NOW", "2026-12-01T00:00:00+00:00")
    from fsmem import Memory

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "mem"
        started = time.perf_counter()
        generate(root, args.notes, args.documents)
        generated = time.perf_counter() - started
        baselines = [read_everything(root), read_everything(root)]
        memory = Memory(root)
        started = time.perf_counter()
        full = memory.consolidate()
        full_seconds = time.perf_counter() - started
        baselines.append(read_everything(root))  # the machine is shared: the baseline is the median of three
        baseline = statistics.median(baselines)
        write_note(root, _dt.date(2026, 12, 1), "one-more", random.Random(99), args.documents)
        started = time.perf_counter()
        one = memory.consolidate()
        one_seconds = time.perf_counter() - started
        result = {
            "notes": args.notes,
            "documents": args.documents,
            "generate_seconds": round(generated, 2),
            "baseline_read_all_seconds": round(baseline, 3),
            "baseline_runs": [round(b, 3) for b in baselines],
            "full_seconds": round(full_seconds, 2),
            "full_vs_baseline": round(full_seconds / baseline, 2) if baseline else None,
            "full_documents_read": full.counts["documents_read"],
            "full_facts_added": full.counts["facts_added"],
            "full_superseded": full.counts["superseded"],
            "incremental_seconds": round(one_seconds, 3),
            "incremental_documents_read": one.counts["documents_read"],
            "incremental_vs_baseline": round(one_seconds / baseline, 2) if baseline else None,
        }
    result["keys_of_one_subject_seconds"] = {
        n: round(many_keys(n), 2) for n in map(int, args.keys.split(",") if args.keys else [])
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"store: {args.documents} documents, {args.notes} notes of 10 facts (generated in {generated:.1f} s); {load_average()}"
        )
        print(f"{'run':<36}{'seconds':>10}{'documents read':>16}{'x baseline':>12}")
        print(f"{'baseline: read + split every document':<36}{baseline:>10.2f}{args.documents:>16}{1:>12.2f}")
        print(
            f"{f'consolidate {args.notes:,} notes':<36}{full_seconds:>10.2f}{result['full_documents_read']:>16}{full_seconds / baseline:>12.2f}"
        )
        print(
            f"{'consolidate 1 more note':<36}{one_seconds:>10.3f}{result['incremental_documents_read']:>16}{one_seconds / baseline:>12.2f}"
        )
        print("one subject, N keys given new values in one run (linear: seconds grow like N):")
        for keys, seconds in result["keys_of_one_subject_seconds"].items():
            print(f"  {keys:>6} keys  {seconds:>7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
