"""The sync fuzzer, longer than `make test` runs it, with what it tried per hostile action.

    python benchmarks/bench_sync_fuzz.py [--rounds 60] [--examples 2] [--explore] [--all]

Two honest hosts and a hostile one share a bare remote (tests/sync_fuzz.py): each round the
hostile host pushes trees plain git makes (links in and out, type swaps, refused and twin names,
forged generated files, fsmem.yaml edits), the honest hosts write and both sync, and the oracle
checks each honest host whole after every sync. Prints, per action, how often it was pushed and
what the honest hosts' next syncs did with it (merged, refused then repaired, held then
accepted); then every violation found, with the steps before it. `--all` also runs the actions
tests/test_sync_fuzz.py leaves out while their finding is open; `--explore` draws new examples
(without it, every run draws the same). Exit 1 when a violation was found.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from common import OUT, REPO, load, table

sys.path.insert(0, str(REPO / "tests"))
from sync_fuzz import ACTIONS, fuzz  # noqa: E402
from sync_fuzz_hostile import NOW  # noqa: E402
from test_sync_fuzz import EXCLUDED  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60, help="rounds an example runs (two syncs a round)")
    parser.add_argument("--examples", type=int, default=2)
    parser.add_argument("--explore", action="store_true", help="draw new examples (default: the same every run)")
    parser.add_argument("--all", action="store_true", help="also the actions whose finding is still open")
    args, _ = parser.parse_known_args()
    os.environ["FSMEM_NOW"] = NOW
    skip = frozenset() if args.all else frozenset(EXCLUDED)
    started = time.perf_counter()
    tally = fuzz(
        OUT / "sync-fuzz",
        rounds=args.rounds,
        examples=args.examples,
        skip=skip,
        explore=args.explore,
        keep_going=True,
    )
    seconds = time.perf_counter() - started
    rows = []
    for name in ACTIONS:
        outcomes = tally.outcomes.get(name, {})
        state = "left out: " + EXCLUDED[name] if name in skip else ""
        rows.append([name, tally.tried[name], *(outcomes.get(k, 0) for k in ("merged", "refused", "held")), state[:60]])
    print(table("hostile actions", ["action", "pushed", "merged", "refused", "held", ""], rows))
    print(
        "(merged / refused / held: what each honest host's next sync answered, both hosts counted; the second "
        "often merges the remote as the first one's --repair left it)"
    )
    others = sorted(set(skip) - set(ACTIONS))
    if others:
        print("also left out: " + "; ".join(f"{name}: {EXCLUDED[name]}" for name in others))
    print(
        f"\n{args.examples} example(s) of {args.rounds} rounds: {tally.syncs} syncs ({tally.cli_syncs} on the CLI), "
        f"{tally.repairs} remedies (--repair, --accept-config), honest writes {dict(tally.honest)}; "
        f"{seconds:.0f} s, {load()}"
    )
    print(f"violations: {len(tally.violations)}")
    for violation in tally.violations:
        print("  " + violation.replace("\n", "\n  "))
    return 1 if tally.violations else 0


if __name__ == "__main__":
    sys.exit(main())
