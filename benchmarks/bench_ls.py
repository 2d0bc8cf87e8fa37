"""`fsmem ls --json` over a memory: cold cache (`.fsmem/` deleted before each run) against warm cache.

    python benchmarks/bench_ls.py [--sizes 10000] [--runs 7]
"""

from __future__ import annotations

import shutil
import sys

from common import corpus, fsmem_bin, ms, side_by_side, sizes_from, table


def main() -> None:
    sizes = sizes_from(sys.argv[1:], "10000")
    import common

    rows = []
    for files in sizes:
        root = corpus(files)
        argv = [fsmem_bin(), "--root", str(root), "ls", "--json"]

        def before(name: str) -> None:
            if name == "cold":
                shutil.rmtree(root / ".fsmem", ignore_errors=True)

        medians = side_by_side({"cold": (argv, None), "warm": (argv, None)}, max(3, common.RUNS // 2), before)
        rows.append([f"{files:,}", ms(medians["cold"]), ms(medians["warm"]), f"{medians['cold'] / medians['warm']:.1f}x"])
    print(table("ls --json: cold cache vs warm cache", ["files", "cold", "warm", "cold / warm"], rows))


if __name__ == "__main__":
    main()
