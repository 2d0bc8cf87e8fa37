"""Peak memory of `fsmem restore` of a large file, beside the floor: git writing the same blob to a file.

    python benchmarks/bench_restore_memory.py [--mb 200] [--runs 2] [--code DIR]

A memory with history holds `big.md` (MB megabytes of text lines) at two versions, committed by git;
`fsmem restore big.md --at HEAD~1` puts the first back. The baseline, `git cat-file blob` of the same blob
into a file (what any restore from git must at least do), runs in a wrapper process that reads
`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` once it has waited for it; fsmem's CLI runs in the wrapper
itself (`runpy`), so that its own peak (RUSAGE_SELF) and its git processes' (RUSAGE_CHILDREN) are told apart.
The two alternate in one run; the restored file is checked against the blob by its id.
`--code DIR` runs the fsmem of another source tree (an older checkout: `git archive REV | tar -x -C DIR`) to
compare before and after a change. CPU time (user + system, children included) is printed beside.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from common import OUT, REPO, load, table

# argv: a file for the figures, a file for the command's output ("-": none), the command
COMMAND = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[3:], stdout=open(sys.argv[2], "wb") if sys.argv[2] != "-" else subprocess.DEVNULL)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(f"{proc.returncode} 0 {used.ru_maxrss} {used.ru_utime + used.ru_stime}")
"""
# argv: a file for the figures, then fsmem's arguments: fsmem run in this process, so that its own peak
# (RUSAGE_SELF) and that of the git processes it waited for (RUSAGE_CHILDREN) are told apart
FSMEM = """
import resource, runpy, sys
figures, sys.argv = sys.argv[1], ["fsmem", *sys.argv[2:]]
try:
    runpy.run_module("fsmem", run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code or 0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
open(figures, "w").write(f"{code} {me.ru_maxrss} {kids.ru_maxrss} {cpu}")
"""


def env(code: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}
    clean["PYTHONPATH"] = str(code)
    clean["FSMEM_NOW"] = "2026-12-01T10:00:00Z"
    return clean


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def big_text(path: Path, megabytes: int, seed: int) -> None:
    """Lines of seeded hexadecimal words, `megabytes` MB, written a chunk at a time."""
    rng = random.Random(seed)
    line = 96
    lines = megabytes * 1024 * 1024 // (line + 1)
    with open(path, "wb") as out:
        out.write(b"# Big\n\n")
        for start in range(0, lines, 10_000):
            count = min(10_000, lines - start)
            out.write(b"".join(rng.randbytes(line // 2).hex().encode() + b"\n" for _ in range(count)))


def setup(megabytes: int, code: Path) -> tuple[Path, str]:
    """A memory with history whose big.md has two committed versions; the first one's blob id."""
    root = OUT / "restore-memory"
    shutil.rmtree(root, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "fsmem", "init", "--git", str(root)], check=True, env=env(code), cwd=code)
    for seed in (1, 2):
        big_text(root / "big.md", megabytes, seed)
        git(root, "add", "big.md")
        git(root, "-c", "user.name=bench", "-c", "user.email=bench@fsmem", "commit", "-q", "-m", f"big {seed}")
    return root, git(root, "rev-parse", "HEAD~1:big.md").strip()


def measured(wrapper: str, argv: list[str], code: Path) -> tuple[float, float, float]:
    """(peak resident MB of the process, of the processes it waited for, CPU seconds of all) of `argv`."""
    figures = OUT / "restore-figures"
    # run from `code`: `python -c` puts the current folder ahead of PYTHONPATH
    subprocess.run([sys.executable, "-c", wrapper, str(figures), *argv], env=env(code), cwd=code, check=True)
    status, own_kb, children_kb, cpu = figures.read_text().split()
    if status != "0":
        raise SystemExit(f"{argv} exited {status}")
    return int(own_kb) / 1024, int(children_kb) / 1024, float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--code", type=Path, default=REPO, help="the fsmem source tree to run")
    args, _ = parser.parse_known_args()  # run_all passes every benchmark the same arguments (--sizes)
    code = args.code.resolve()
    root, blob = setup(args.mb, code)
    print(f"load before: {load()}")
    rows = []
    floor_file = OUT / "restore-floor.md"
    for run in range(args.runs):
        _, floor, floor_cpu = measured(
            COMMAND, [str(floor_file), "git", "-C", str(root), "cat-file", "blob", blob], code
        )
        rows.append(
            [run + 1, "git cat-file blob > file", f"{floor:.0f} MB", "-", f"{floor:.0f} MB", f"{floor_cpu:.2f} s"]
        )
        own, children, cpu = measured(FSMEM, ["--root", str(root), "restore", "big.md", "--at", "HEAD~1"], code)
        if git(root, "rev-parse", "HEAD:big.md").strip() != blob:
            raise SystemExit("the restore did not commit the first version")
        if git(root, "hash-object", "--no-filters", str(root / "big.md")).strip() != blob:
            raise SystemExit("the restored file differs from the blob")
        peak = max(own, children)
        rows.append(
            [
                run + 1,
                "fsmem restore",
                f"{peak:.0f} MB ({peak / floor:.1f}x)",
                f"{own:.0f} MB",
                f"{children:.0f} MB",
                f"{cpu:.2f} s",
            ]
        )
        git(root, "-c", "user.name=bench", "-c", "user.email=bench@fsmem", "revert", "--no-edit", "HEAD")
    print(f"load after: {load()}")
    header = ["run", "command", "peak RSS", "fsmem's process", "git's processes", "CPU"]
    print(table(f"restore of a {args.mb} MB file ({code})", header, rows))
    shutil.rmtree(root, ignore_errors=True)
    floor_file.unlink(missing_ok=True)
    (OUT / "restore-figures").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
