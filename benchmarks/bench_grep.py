"""`fsmem grep --json` (the CLI, end to end, honest total) against bare `rg --json PATTERN`, output drained.

fsmem is a regular install, as a user runs it (bench_startup's: the editable install's import hook costs
every start).

`--root DIR` measures a warm copy made before (`cp -a` of a corpus) instead of the seeded corpora;
`--baseline DIR` also runs each `fsmem grep` through the package in DIR (another checkout's, e.g.
`git archive main fsmem | tar -x -C DIR`, put first on PYTHONPATH), alternating with this one's, and
checks that both print the same bytes.

python benchmarks/bench_grep.py [--sizes 10000,100000] [--runs 7] [--root DIR] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_startup import installed_fsmem
from common import corpus, load, ms, rg_bin, run_drained, side_by_side, sizes_from, table
from corpus import COMMON_WORD, RARE_WORD


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, help="a warm copy of a corpus, used as it is")
    parser.add_argument("--baseline", type=Path, help="a folder holding another fsmem package, its grep alternated")
    args, rest = parser.parse_known_args()
    sizes = sizes_from(rest, "10000,100000")
    import common

    fsmem = str(installed_fsmem() / "fsmem")
    before = load()
    rows = []
    for root in [args.root.resolve()] if args.root else [corpus(files) for files in sizes]:
        files = sum(1 for _ in root.rglob("*.md"))
        # The steady state: a memory whose metadata cache is warm (as `fsmem watch` or any ls leaves it).
        run_drained([fsmem, "--root", str(root), "ls", "--max-results", "1"])
        for label, pattern in (("few matches", RARE_WORD), ("many matches", COMMON_WORD)):
            commands = {
                "rg": ([rg_bin(), "--json", pattern], root),
                "fsmem": ([fsmem, "--root", str(root), "grep", "--json", pattern], None),
            }
            if args.baseline:
                baseline = ["env", f"PYTHONPATH={args.baseline}"]
                commands["baseline"] = (baseline + commands["fsmem"][0], None)
                if run_drained(commands["baseline"][0])[2] != run_drained(commands["fsmem"][0])[2]:
                    raise SystemExit(f"fsmem grep {pattern}: the baseline printed other bytes")
            medians = side_by_side(commands, common.RUNS)
            total = json.loads(run_drained(commands["fsmem"][0])[2])["total"]
            rows.append(
                [
                    f"{files:,}",
                    label,
                    f"{total:,}",
                    ms(medians["rg"]),
                    ms(medians["fsmem"]),
                    f"{medians['fsmem'] / medians['rg']:.2f}x",
                ]
                + ([ms(medians["baseline"]), f"{medians['baseline'] / medians['rg']:.2f}x"] if args.baseline else [])
            )
    print(f"({before} before, {load()} after)")
    header = ["files", "pattern", "total (fsmem)", "rg --json", "fsmem grep --json", "ratio"]
    print(
        table(
            f"grep: fsmem grep --json vs bare rg --json (median of {common.RUNS} runs)",
            header + (["the baseline's", "ratio"] if args.baseline else []),
            rows,
        )
    )


if __name__ == "__main__":
    main()
