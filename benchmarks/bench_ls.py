"""`fsmem ls --json` over a memory: cold cache (`.fsmem/` deleted before each run) against warm cache.

BENCH_LS_SIZES=10000 python benchmarks/bench_ls.py [--runs 7]
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from common import corpus, fsmem_bin, ms, side_by_side, sizes_from, table


def main() -> None:
    sizes_from(sys.argv[1:], "")
    # The case is 10k files; --sizes (meant for grep) does not apply here.
    sizes = [int(s) for s in os.environ.get("BENCH_LS_SIZES", "10000").split(",")]
    import common

    rows = []
    for files in sizes:
        root = corpus(files)
        argv = [fsmem_bin(), "--root", str(root), "ls", "--json"]

        def before(name: str, root: Path = root) -> None:
            if name == "cold":
                shutil.rmtree(root / ".fsmem", ignore_errors=True)

        medians = side_by_side({"cold": (argv, None), "warm": (argv, None)}, max(3, common.RUNS // 2), before)
        rows.append(
            [f"{files:,}", ms(medians["cold"]), ms(medians["warm"]), f"{medians['cold'] / medians['warm']:.1f}x"]
        )
    print(table("ls --json: cold cache vs warm cache", ["files", "cold", "warm", "cold / warm"], rows))


if __name__ == "__main__":
    main()
