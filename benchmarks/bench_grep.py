"""`fsmem grep --json` (the CLI, end to end, honest total) against bare `rg --json PATTERN`, output drained.

fsmem is a regular install, as a user runs it (bench_startup's: the editable install's import hook costs
every start).

python benchmarks/bench_grep.py [--sizes 10000,100000] [--runs 7]
"""

from __future__ import annotations

import json
import sys

from bench_startup import installed_fsmem
from common import corpus, load, ms, rg_bin, run_drained, side_by_side, sizes_from, table
from corpus import COMMON_WORD, RARE_WORD


def main() -> None:
    sizes = sizes_from(sys.argv[1:], "10000,100000")
    import common

    fsmem = str(installed_fsmem() / "fsmem")
    before = load()
    rows = []
    for files in sizes:
        root = corpus(files)
        # The steady state: a memory whose metadata cache is warm (as `fsmem watch` or any ls leaves it).
        run_drained([fsmem, "--root", str(root), "ls", "--max-results", "1"])
        for label, pattern in (("few matches", RARE_WORD), ("many matches", COMMON_WORD)):
            commands = {
                "rg": ([rg_bin(), "--json", pattern], root),
                "fsmem": ([fsmem, "--root", str(root), "grep", "--json", pattern], None),
            }
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
            )
    print(f"({before} before, {load()} after)")
    print(
        table(
            f"grep: fsmem grep --json vs bare rg --json (median of {common.RUNS} runs)",
            ["files", "pattern", "total (fsmem)", "rg --json", "fsmem grep --json", "ratio"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
