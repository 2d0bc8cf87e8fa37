"""Start-up cost: `fsmem read` and `fsmem grep` on a small memory against `python -c pass`.

Also reports which heavy modules each command imported (none of tiktoken's
encoding, rapidfuzz, watchdog, mcp or bm25s should load for these).

    python benchmarks/bench_startup.py [--runs 15]
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from common import OUT, REPO, compiled, fsmem_bin, load, ms, side_by_side, sizes_from, table

HEAVY = ("tiktoken", "rapidfuzz", "watchdog", "mcp", "bm25s", "numpy", "anthropic")
PROBE = f"""
import sys, runpy
sys.argv = ["fsmem"] + sys.argv[1:]
try:
    from fsmem.cli import main
    main()
except SystemExit:
    pass
finally:
    heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
    print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def main() -> None:
    sizes_from(sys.argv[1:], "")
    import common

    compiled()
    before = load()

    root = OUT / "startup-memory"
    if not root.exists():
        shutil.copytree(REPO / "memory_template", root, symlinks=False)
        shutil.copytree(REPO / "examples" / "memory", root, dirs_exist_ok=True)
    fsmem = [fsmem_bin(), "--root", str(root)]
    commands = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "fsmem read": (fsmem + ["read", "topics/billing.md", "--max-tokens", "300"], None),
        "fsmem grep": (fsmem + ["grep", "-i", "proration"], None),
        "fsmem ls": (fsmem + ["ls"], None),
    }
    medians = side_by_side(commands, max(common.RUNS, 15))
    base = medians["python -c pass"]
    rows = []
    for name, (argv, _) in commands.items():
        heavy = "-"
        if name != "python -c pass":
            probe = subprocess.run([sys.executable, "-c", PROBE] + argv[1:], capture_output=True, text=True)
            heavy = probe.stderr.strip().rsplit("HEAVY:", 1)[-1] or "none"
        rows.append(
            [name, ms(medians[name]), f"+{ms(medians[name] - base)}" if name != "python -c pass" else "", heavy]
        )
    print(f"({before} before, {load()} after)")
    print(
        table(
            "start-up on a small memory (warm cache)",
            ["command", "median", "over python -c pass", "heavy imports"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
