"""fsmem killed at every git step of a write, a consolidation and a sync, in both ways, and at random moments.

    python benchmarks/hostile_kills.py [--timed 4] [--seed 7]

The harness is tests/kill_scenario.py: two clones of one bare remote with
work on both sides; a `git` wrapper first on PATH kills fsmem's process group
at a chosen git command, either holding that command's lock files (as a git
killed mid-step leaves them) or right after the command finished; `--timed`
more kills per command land at random moments of an uninterrupted run's
duration (wherever fsmem then is). After each kill the first host writes
again and both hosts sync; a kill converged when both hosts and the remote
hold one commit, identical files with every acknowledged write, nothing of
git's locks or merges left, `git status` clean and `fsmem check` clean.
tests/test_history_kills.py runs the same at every step in the lock mode
(and after the merge and its commit); this is the fuller sweep, part of
`benchmarks/bench_hostile.py`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, table

sys.path.insert(0, str(REPO / "tests"))
import kill_scenario as K  # noqa: E402


def sweep(folder: Path, timed: int = 4, seed: int = 7) -> tuple[dict[str, list[int]], list[str]]:
    """Per command: [kills tried, converged]; and one line per kill that did not converge."""
    wrapper = K.install_wrapper(folder / "bin")
    template = K.build(folder / "template")
    rng = random.Random(seed)
    counts: dict[str, list[int]] = {}
    failures: list[str] = []
    for command in K.COMMANDS:
        started = time.monotonic()
        calls = K.steps(template, folder / f"{command}-steps", command, wrapper)
        whole = time.monotonic() - started
        tally = counts.setdefault(command, [0, 0])
        outcomes = [
            K.converge(template, folder / f"{command}-{number}-{mode}", command, number, mode, wrapper)
            for number in range(1, len(calls) + 1)
            for mode in ("lock", "after")
        ]
        for _ in range(timed):
            outcome = K.converge_timed(
                template, folder / f"{command}-timed-{_}", command, rng.uniform(0.4 * whole, whole)
            )
            if outcome.problems != ["finished before the kill"]:
                outcomes.append(outcome)
        for outcome in outcomes:
            tally[0] += 1
            tally[1] += outcome.converged
            if not outcome.converged:
                failures.append(f"{command} at {outcome.step} {outcome.git} ({outcome.mode}): {outcome.problems}")
        for path in folder.glob(f"{command}-*"):
            shutil.rmtree(path, ignore_errors=True)
    return counts, failures


def git_kills(timed: int = 4, seed: int = 7) -> tuple[dict[str, list[int]], list[str]]:
    with tempfile.TemporaryDirectory() as folder:
        return sweep(Path(folder), timed, seed)


def report(counts: dict[str, list[int]], seconds: float) -> str:
    rows = [[command, str(tried), str(converged)] for command, (tried, converged) in counts.items()]
    tried, converged = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    rows.append(["all", str(tried), f"{converged} ({100 * converged / max(tried, 1):.1f}%)"])
    return table(
        f"fsmem killed at every git step, and at random moments ({seconds:.0f} s)", ["", "kills", "converged"], rows
    )


def run_and_print(timed: int = 4, seed: int = 7) -> tuple[dict[str, int], list[str]]:
    """The sweep with its table printed; the figures for a JSON summary, and the kills that did not converge."""
    started = time.monotonic()
    counts, failures = git_kills(timed, seed)
    print(report(counts, time.monotonic() - started))
    for failure in failures:
        print("FAILED " + failure.replace("\n", "\\n"))
    tried, converged = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    return {"git_kills_tried": tried, "git_kills_converged": converged}, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timed", type=int, default=4, help="kills at random moments, per command")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    _, failures = run_and_print(args.timed, args.seed)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
