"""Consolidation's invariant at scale: batches, growing notes, crashes and SIGKILLs against one uninterrupted run.

The invariant: however notes are batched, ordered, grown or interrupted, the
next complete run leaves the same bytes as one uninterrupted run over all notes.

1. In-process: `--scenarios` seeded scenarios (tests/consolidation_scenarios.py,
   larger than the property test's: 12 notes, 4 steps), with a simulated crash
   after a random write and stray temporary files.
2. Real SIGKILLs: a memory of `--notes` notes (200 people, 8 keys, same-day notes,
   `as of` dates, retractions, near-duplicate observations) consolidated in two
   batches (the second holds older notes arriving late and notes that grew). The
   second run is SIGKILLed after its k-th file write (FSMEM_CONSOLIDATE_KILL_AFTER,
   `--kills` points spread over its writes) and at random moments (`--timed-kills`),
   then run again; every tree is compared with the uninterrupted one.

    python benchmarks/bench_consolidate_invariant.py [--scenarios 200] [--notes 1500] [--kills 24] [--timed-kills 8] [--json]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
NOW = "2026-12-01T08:00:00+00:00"
KEYS = ["employer", "role", "city", "team", "phone", "manager", "status", "timezone"]
WORDS = ["north", "south", "blue", "green", "alpha", "delta", "atlas", "orion"]
OBSERVATIONS = [
    "Prefers email over phone.",
    "prefers e-mail over phone",
    "Asked about proration twice.",
    "Asked about proration again.",
    "Moved to the Berlin office.",
    "Moved to the Berlin offices!",
]


def fsmem_bin() -> str:
    candidate = Path(sys.executable).with_name("fsmem")
    return str(candidate) if candidate.exists() else "fsmem"


def in_process(scenarios: int, seed: int) -> dict:
    import consolidation_scenarios as S

    converged = crashes = asked = 0
    started = time.perf_counter()
    for number in range(scenarios):
        scenario = S.random_scenario(random.Random(seed + number), notes=12, steps=4, lines=5)
        with tempfile.TemporaryDirectory() as folder:
            expected = S.reference(Path(folder) / "one-run", scenario)
            got, crashed, wanted = S.evolve(Path(folder) / "evolved", scenario)
        converged += got == expected
        crashes += crashed
        asked += wanted
    return {
        "scenarios": scenarios,
        "converged": converged,
        "crashes": crashes,
        "crash_points_asked": asked,
        "seconds": round(time.perf_counter() - started, 1),
    }


def write_notes(root: Path, count: int, seed: int) -> list[tuple[Path, str, int]]:
    """(path, text, batch) of `count` notes; batch 2 holds a third of them (older ones among them) and growth."""
    rng = random.Random(seed)
    start = _dt.date(2026, 1, 1)
    notes = []
    for number in range(count):
        day = start + _dt.timedelta(days=rng.randrange(60))
        session = f"s{number:04d}"
        lines = []
        for _ in range(10):
            lines.append(f"\n## people/Person {rng.randrange(200):03d}\n")
            if rng.random() < 0.75:
                value = "~" if rng.random() < 0.05 else f"{rng.choice(WORDS)} {rng.randint(1, 9)}"
                as_of = f" (as of {day - _dt.timedelta(days=rng.randrange(5))})" if rng.random() < 0.05 else ""
                lines.append(f"- {rng.choice(KEYS)}: {value}{as_of}\n")
            else:
                lines.append(f"- {rng.choice(OBSERVATIONS)}\n")
        text = f"---\ntitle: Session {session}\ntype: episodic\ncreated: {day}T10:00:00+00:00\n---\n" + "".join(lines)
        path = root / "sessions" / f"{day:%Y/%m/%d}" / f"{session}.md"
        notes.append((path, text, 2 if number % 3 == 0 else 1))
    return notes


def run(root: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    return subprocess.run(
        [fsmem_bin(), "--root", str(root), "consolidate", "--json"],
        capture_output=True,
        text=True,
        env={**clean, "FSMEM_NOW": NOW, **env},
        timeout=3600,
    )


def snapshot(root: Path) -> dict[str, bytes]:
    import consolidation_scenarios as S

    return S.snapshot(root)


def sigkills(notes: int, kills: int, timed: int, seed: int, folder: Path) -> dict:
    from fsmem import Memory

    base = folder / "base"
    Memory.init(base)
    written = write_notes(base, notes, seed)
    for path, text, batch in written:
        if batch == 1:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    first = run(base)
    assert first.returncode == 0, first.stderr
    for path, text, batch in written:
        if batch == 2:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    rng = random.Random(seed)
    first = [path for path, _text, batch in written if batch == 1]
    grown = rng.sample(first, len(written) // 30)  # notes that grow after they were consolidated
    for path in grown:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"- {rng.choice(KEYS)}: grown {rng.randint(1, 9)}\n- {rng.choice(OBSERVATIONS)}\n")
    reference = folder / "reference"
    shutil.copytree(base, reference)
    started = time.perf_counter()
    done = run(reference)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    writes = len(json.loads(done.stdout)["files_written"]) + 1
    expected = snapshot(reference)
    points = sorted({max(1, round(writes * (i + 0.5) / kills)) for i in range(kills)})
    tried = converged = 0
    for point in points:
        work = folder / f"k{point}"
        shutil.copytree(base, work)
        killed = run(work, FSMEM_CONSOLIDATE_KILL_AFTER=str(point))
        tried += 1
        again = run(work)
        converged += killed.returncode == -signal.SIGKILL and again.returncode in (0, 1) and snapshot(work) == expected
        shutil.rmtree(work)
    timed_converged = 0
    for number in range(timed):
        work = folder / f"t{number}"
        shutil.copytree(base, work)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
        proc = subprocess.Popen(
            [fsmem_bin(), "--root", str(work), "consolidate"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**clean, "FSMEM_NOW": NOW},
        )
        time.sleep(rng.uniform(0.2, 0.95) * seconds)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        again = run(work)
        timed_converged += again.returncode in (0, 1) and snapshot(work) == expected
        shutil.rmtree(work)
    return {
        "notes": notes,
        "notes_grown": len(grown),
        "second_run_writes": writes,
        "second_run_seconds": round(seconds, 1),
        "kill_points_tried": tried,
        "kill_points_converged": converged,
        "timed_kills_tried": timed,
        "timed_kills_converged": timed_converged,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=200)
    parser.add_argument("--notes", type=int, default=1500)
    parser.add_argument("--kills", type=int, default=24)
    parser.add_argument("--timed-kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    args, _ = parser.parse_known_args(argv)
    os.environ["FSMEM_NOW"] = NOW
    result = {"in_process": in_process(args.scenarios, args.seed * 1000)}
    with tempfile.TemporaryDirectory() as folder:
        result["sigkill"] = sigkills(args.notes, args.kills, args.timed_kills, args.seed, Path(folder))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        a, b = result["in_process"], result["sigkill"]
        print(
            f"{'in-process scenarios converged':<40}{a['converged']} / {a['scenarios']} ({a['crashes']} crashes, {a['seconds']} s)"
        )
        print(
            f"{'notes in the SIGKILL memory':<40}{b['notes']} ({b['second_run_writes']} writes in the second run, {b['second_run_seconds']} s)"
        )
        print(f"{'kill points converged':<40}{b['kill_points_converged']} / {b['kill_points_tried']}")
        print(f"{'kills at random moments converged':<40}{b['timed_kills_converged']} / {b['timed_kills_tried']}")
    ok = result["in_process"]["converged"] == args.scenarios
    ok &= result["sigkill"]["kill_points_converged"] == result["sigkill"]["kill_points_tried"]
    ok &= result["sigkill"]["timed_kills_converged"] == result["sigkill"]["timed_kills_tried"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
