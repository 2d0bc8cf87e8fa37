"""What the argument check at `Memory`'s methods costs per call: each method with it against the same method without.

    python benchmarks/bench_arguments.py [--runs 7]

Every public `Memory` method checks its arguments against its annotations, and a declared operation's
against the limits its spec declares (`fsmem.arguments.ArgumentCheck`), before it runs. Here the same calls run through the
guarded method and through the function underneath (`__wrapped__`, which
skips the argument check and the error boundary), interleaved, best of `--runs` rounds
of many calls each; the ratio is the check's share of a call. The check alone
is timed too, in microseconds.
"""

from __future__ import annotations

import shutil
import sys
import time

import common
from common import OUT, sizes_from, table

from fsmem import Memory
from fsmem.arguments import ArgumentCheck


def best_per_call(function, calls: int, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def main() -> None:
    sizes_from(sys.argv[1:], "0")  # sets common.RUNS from --runs
    runs = common.RUNS
    root = OUT / "arguments"
    shutil.rmtree(root, ignore_errors=True)
    memory = Memory.init(root)
    (root / "topics").mkdir()
    (root / "topics" / "a.md").write_text("---\ntitle: A\n---\n# A\n" + "".join(f"- k{i}: v{i}\n" for i in range(40)))
    cases = {
        "path (resolve one path)": ("path", ("topics/a.md",), {"want": "file"}, 2000),
        "read (a 40-line file)": ("read", ("topics/a.md",), {"max_tokens": 500}, 300),
        "ls (one folder)": ("ls", ("topics",), {"max_results": 10}, 200),
        "ls (three limited arguments)": ("ls", ("topics",), {"depth": 1, "offset": 0, "max_results": 10}, 200),
        "grep (one file, rg)": ("grep", ("k1",), {"paths": ["topics/a.md"]}, 30),
    }
    rows = []
    for label, (name, args, kwargs, calls) in cases.items():
        guarded = getattr(Memory, name)
        raw = guarded.__wrapped__
        check = ArgumentCheck(raw, f"Memory.{name}()", name)  # a declared operation: its limits too
        with_check = best_per_call(lambda g=guarded, a=args, k=kwargs: g(memory, *a, **k), calls, runs)
        without = best_per_call(lambda r=raw, a=args, k=kwargs: r(memory, *a, **k), calls, runs)
        alone = best_per_call(lambda d=check, a=args, k=kwargs: d((memory, *a), dict(k)), 20000, runs)
        rows.append(
            [
                label,
                f"{without * 1e6:.1f}",
                f"{with_check * 1e6:.1f}",
                f"{with_check / without:.3f}x",
                f"{alone * 1e6:.2f}",
            ]
        )
    print(
        table(
            f"argument check per call (best of {runs} rounds)",
            ["call", "without µs", "with µs", "ratio", "check alone µs"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
