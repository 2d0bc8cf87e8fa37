"""Run every `benchmarks/bench_*.py` present, one after the other, passing the arguments on.

    python benchmarks/run_all.py [--sizes 10000,100000] [--runs 7]

Each script builds what it needs under bench-out/ (git-ignored) and prints its
own table; the 100k-file and 1 GB cases take minutes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *sys.argv[1:]], cwd=HERE.parent)
        print(f"({script.name}: {time.perf_counter() - started:.0f} s, exit {code})", flush=True)
        if code != 0:
            failed.append(script.name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
