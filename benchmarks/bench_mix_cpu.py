"""CPU per call of bench_server's unique mix in-process, this tree beside another revision, in the same run.

    .venv/bin/python benchmarks/bench_mix_cpu.py --old main --root DIR [--calls 800] [--rounds 3]
        [--threads-seconds 15]

`DIR` is a warmed memory with bench_server's 32 agents: the copy `bench_server.py --keep KEEP` makes
(`KEEP/server-10k`), or a `cp -a` of it. Each run is a process of its own, with the clock pinned: one
`Memory` per agent calling `fsmem.agents.tools.call` through the unique mix (search, grep, ls, read; no
question asked twice), `--calls` calls on one thread after one untimed call of each tool, each call's CPU
time (its thread's, SQLite's included) recorded per tool. The two revisions alternate, `--rounds` times,
each from the same retrieval log (it is put back before every run, so usage counts, and with them the
scores, start equal), first one then the other first (a later run finds more token counts kept), and every
answer's text must be equal byte for byte, call by call. With
`--threads-seconds`, each round also runs bench_server's in-process phase (32 threads, the unique mix)
and reports its calls a second and CPU per call. The memory's Markdown is never written; its caches stay
warm; its retrieval log ends as it began.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOW = "2027-01-15T12:00:00+00:00"


def _worker(package: str, root: str, calls: int, threads_seconds: float, out: str) -> None:
    """Runs with the revision's package first on the path: the mix on one thread, then (optionally) on 32."""
    sys.path.insert(0, package)
    import fsmem  # before the benchmarks' helpers put this tree on the path

    sys.path.insert(1, str(REPO / "benchmarks"))
    from bench_server import MIX_TOOLS, Plan, Unique, read_targets, run_in_process

    from fsmem import Memory
    from fsmem.agents import tools

    where = Path(root)
    targets = read_targets(where)
    memories = [Memory(where, agent=f"bench-{n:02d}") for n in range(4)]
    warm = Plan(0, "warm", targets, MIX_TOOLS)
    for tool, arguments in (warm.next() for _ in MIX_TOOLS):
        tools.call(memories[0], tool, arguments)  # untimed: the index, the tokenizer, the word index
    unique = Unique(targets, root=where)  # questions and grep words from the memory's own lines
    plans = [Plan(n, "mix", targets, MIX_TOOLS, unique) for n in range(4)]
    cpu: dict[str, list[float]] = {}
    texts = []
    for n in range(calls):
        tool, arguments = plans[n % 4].next()
        started = time.thread_time()
        answer = tools.call(memories[n % 4], tool, arguments)
        cpu.setdefault(tool, []).append(time.thread_time() - started)
        texts.append([tool, arguments, answer.text])
    threads = None
    if threads_seconds:
        found = run_in_process(
            where, 32, threads_seconds, targets, "threads", MIX_TOOLS, Unique(targets, seed=12, root=where)
        )
        made = len(found["records"])
        threads = {"calls_per_second": made / found["wall"], "cpu_per_call": sum(found["cpu"]) / max(made, 1)}
    Path(out).write_text(json.dumps({"fsmem": fsmem.__file__, "cpu": cpu, "texts": texts, "threads": threads}))


def _restore(logs: Path, kept: Path) -> None:
    shutil.rmtree(logs, ignore_errors=True)
    shutil.copytree(kept, logs)


def _run(package: Path, root: Path, args, out: Path) -> dict:
    env = dict(os.environ, FSMEM_NOW=NOW)
    env.pop("PYTHONPATH", None)
    command = [sys.executable, __file__, "--worker", str(package), str(root), str(args.calls)]
    subprocess.run([*command, str(args.threads_seconds), str(out)], env=env, check=True, cwd=package)
    found = json.loads(out.read_text())
    if not found["fsmem"].startswith(str(package)):
        raise SystemExit(f"the worker imported {found['fsmem']}, not the package in {package}")
    return found


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="a revision (git archive) or a folder holding its fsmem package")
    parser.add_argument("--root", type=Path, required=True, help="a warmed memory with bench_server's agents")
    parser.add_argument("--calls", type=int, default=800, help="calls on one thread, per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads-seconds", type=float, default=0.0, help="the 32-thread phase, per run (0: none)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "benchmarks"))  # here, not at the top: the workers import the old fsmem
    from common import load, old_package

    root = args.root.resolve()
    logs = root / ".fsmem" / "logs"
    work = Path(tempfile.mkdtemp(prefix="mix-cpu-"))
    try:
        kept = work / "logs"
        shutil.copytree(logs, kept) if logs.is_dir() else kept.mkdir()
        sides = {"old": old_package(args.old, work / "old"), "new": REPO}
        print(f"{args.calls} calls a run, {args.rounds} rounds, old {args.old} / new {REPO}; {load()}", flush=True)
        found: dict[str, list[dict]] = {"old": [], "new": []}
        differences = 0
        for number in range(args.rounds):
            order = ["old", "new"] if number % 2 == 0 else ["new", "old"]  # the later run finds more counts kept
            for side in order:
                package = sides[side]
                _restore(logs, kept)
                found[side].append(_run(package, root, args, work / f"{side}-{number}.json"))
            old_texts, new_texts = found["old"][-1]["texts"], found["new"][-1]["texts"]
            for n, (a, b) in enumerate(zip(old_texts, new_texts, strict=True)):
                if a != b:
                    differences += 1
                    if differences <= 3:
                        print(f"round {number}, call {n} ({a[0]} {a[1]}): the answers differ", flush=True)
            print(f"round {number} done; {load()}", flush=True)
        _restore(logs, kept)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nCPU per call, ms (per run the mean over its calls; the median of {args.rounds} runs):")
    print(f"{'tool':<8} {'calls':>6} {'old':>8} {'new':>8} {'new/old':>8}")
    tools_ = list(found["old"][0]["cpu"])
    for tool in [*tools_, "all"]:

        def mean_ms(run: dict, tool: str = tool) -> float:
            samples = [s for t, v in run["cpu"].items() if tool in (t, "all") for s in v]
            return 1000 * statistics.mean(samples)

        old, new = (statistics.median(mean_ms(r) for r in found[s]) for s in ("old", "new"))
        count = sum(len(v) for t, v in found["old"][0]["cpu"].items() if tool in (t, "all"))
        print(f"{tool:<8} {count:>6} {old:>8.2f} {new:>8.2f} {new / old:>8.3f}")
    if args.threads_seconds:
        print("\n32 threads, in-process (bench_server's phase): calls/s and CPU per call (ms), each run")
        for side in ("old", "new"):
            runs = [r["threads"] for r in found[side]]
            rates = " ".join(f"{r['calls_per_second']:.1f}" for r in runs)
            cpus = " ".join(f"{1000 * r['cpu_per_call']:.2f}" for r in runs)
            print(f"{side}: {rates} calls/s; CPU {cpus} ms a call")
    calls = args.rounds * args.calls
    print(f"\nanswers: {calls} calls a side, {differences} differ byte for byte; {load()}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
