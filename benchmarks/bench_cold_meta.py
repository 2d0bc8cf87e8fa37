"""The first `fsmem ls` on a memory with no `.fsmem/` (its metadata cache built), against its limit.

Each round deletes `.fsmem/`, runs `fsmem --root ROOT ls --max-results 5` as a
subprocess (wall seconds, and CPU seconds of it and its worker processes), and
times a stat walk and a read of every memory file in this process, the limit
(wall). The two alternate round by round, and each round prints the load
average, so a busy machine slows both:

    .venv/bin/python benchmarks/bench_cold_meta.py --root COPY --runs 3

ROOT is modified (its `.fsmem/` deleted and made again): give it a copy.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from common import fsmem_bin


def read_all(root: Path) -> float:
    from fsmem.store.walk import walk_stats

    started = time.perf_counter()
    for _rel, full, _stat in walk_stats(root):
        with open(full, "rb") as handle:
            handle.read()
    return time.perf_counter() - started


def cold_ls(root: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one first `fsmem ls`: CPU is the command's and its workers' (user and system)."""
    shutil.rmtree(root / ".fsmem", ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([fsmem_bin(), "--root", str(root), "ls", "--max-results", "5"], capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="a copy of a memory (its .fsmem/ is deleted)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    walls, cpus, limits = [], [], []
    for n in range(args.runs):
        wall, cpu = cold_ls(args.root)
        limit = read_all(args.root)
        walls.append(wall)
        cpus.append(cpu)
        limits.append(limit)
        print(
            f"run {n + 1}: first ls {wall:.2f} s wall, {cpu:.2f} s CPU; stat walk + read {limit:.3f} s;"
            f" load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    wall, cpu, limit = statistics.median(walls), statistics.median(cpus), statistics.median(limits)
    print(
        f"median: first ls {wall:.2f} s wall ({wall / limit:.0f}x the stat walk + read, {limit:.3f} s), {cpu:.2f} s CPU"
    )


if __name__ == "__main__":
    main()
