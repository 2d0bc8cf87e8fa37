"""One-shot commands from the shell, this checkout's code against another revision's, alternating run by run.

The lean path (`fsmem.cli.lean`) runs a plain command line of an operation without importing click; this
measures what that saves as a user sees it: each command's wall time from the shell, no running fsmem,
against the same command of `--old` (a revision, or a folder holding an fsmem package) run by the same
interpreter. Both must print the same bytes.

    .venv/bin/python benchmarks/bench_lean.py --root COPY --old main --runs 11
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from common import REPO, load, ms, old_package, run_drained, side_by_side, table


def commands(root: Path) -> dict[str, list[str]]:
    """The commands measured, on a file of `root` (the first Markdown file under topics/, else any)."""
    found = sorted((root / "topics").glob("*.md")) or sorted(p for p in root.rglob("*.md") if ".fsmem" not in p.parts)
    path = found[0].relative_to(root).as_posix()
    return {
        "--version": ["--version"],
        "ls --max-results 5": ["ls", "--max-results", "5"],
        f"read {path} --max-tokens 200": ["read", path, "--max-tokens", "200"],
        f"stat {path}": ["stat", path],
        f"links {path}": ["links", path],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True, help="a warm, writable copy of a memory")
    parser.add_argument("--old", default="main", help="a revision or a folder holding an fsmem package")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        old = old_package(args.old, Path(scratch))
        env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
        env["FSMEM_SOCKET"] = "off"  # a running watcher of the copy would answer instead
        sides = {"this": {**env, "PYTHONPATH": str(REPO)}, "old": {**env, "PYTHONPATH": str(old)}}
        print(f"({load()} before)")
        rows = []
        for name, argv in commands(args.root).items():
            lines = {side: [sys.executable, "-m", "fsmem", *argv] for side in sides}
            outputs = {side: run_drained(line, args.root, sides[side])[2] for side, line in lines.items()}
            if outputs["this"] != outputs["old"]:
                raise SystemExit(f"fsmem {name}: the two revisions printed different answers")
            times = side_by_side({side: (line, args.root) for side, line in lines.items()}, args.runs, envs=sides)
            rows.append([f"fsmem {name}", ms(times["this"]), ms(times["old"]), f"{times['this'] / times['old']:.2f}x"])
        print(
            table(
                f"one-shot commands, {args.runs} runs each, medians ({load()} after)",
                ["command", "this", "old", "ratio"],
                rows,
            )
        )


if __name__ == "__main__":
    main()
