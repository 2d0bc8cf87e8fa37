"""History on git: what a write costs with history on against off, a burst of writers, a sync, the full scenario.

    python benchmarks/bench_history.py [--sizes 1000,10000] [--runs 15] [--scenario-seconds 60]

1. One write (a note appended; an edit), in-process (`Memory`, what an agent
   behind MCP or the dispatcher pays) and through the CLI (`fsmem note`), on
   copies of the seeded corpus with history off and on, alternating write by
   write; and, as the naive alternative, `git add` + `git commit` per write on
   the same repository.
2. A burst: 8 processes x 40 notes at once, history off and on: writes per
   second, commits made, notes in HEAD.
3. A sync that brings in 100 notes written on another clone (fast-forward),
   and one where both clones wrote 100 notes (a merge), against `git pull` of
   the same commits; the sync's phases as it reports them.
4. The convergence scenario of tests/test_sync.py for the full period: two
   clones of a bare repository, four writers each, syncing every few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, REPO, compiled, corpus, fsmem_bin, load, table

sys.path.insert(0, str(REPO / "tests"))
BURST = """
import sys
from fsmem import Memory
memory = Memory(sys.argv[1])
for i in range(int(sys.argv[3])):
    memory.note(f"- burst {sys.argv[2]} {i}: x", session=f"burst-{sys.argv[2]}")
"""


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env()).stdout


def copies(files: int) -> tuple[Path, Path, Path]:
    """Three copies of the corpus: history off; history on (`fsmem init --git`, packed); a plain git repository
    with fsmem's history switched off (for `git add` + `git commit` per write)."""
    from fsmem import Memory

    source = corpus(files)
    label = f"{files // 1000}k"
    made = []
    for kind in ("off", "on", "porcelain"):
        target = OUT / f"history-{label}-{kind}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=True)
        made.append(target)
    off, on, porcelain = made
    started = time.perf_counter()
    Memory.init(on, git=True)
    git(on, "gc", "-q")
    print(
        f"(history on for {files:,} files: first commit and gc in {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )
    git(porcelain, "init", "-q")
    (porcelain / "fsmem.yaml").write_text((porcelain / "fsmem.yaml").read_text() + "history: {enabled: false}\n")
    git(porcelain, "add", "-A")
    git(porcelain, "-c", "gc.auto=0", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "corpus")
    git(porcelain, "gc", "-q")
    return off, on, porcelain


def write_costs(off: Path, on: Path, porcelain: Path, runs: int) -> list[list[str]]:
    """Median ms of one write in each setting, alternating the settings write by write."""
    from fsmem import Memory

    memories = {"off": Memory(off), "on": Memory(on), "porcelain": Memory(porcelain)}
    target = "topics/bench-history.md"
    for memory in memories.values():
        memory.write(target, "# Bench\n\n- value: a\n")
        memory.write("topics/bench-cli.md", "# Bench\n\n- value: a\n")
    times: dict[str, list[float]] = {
        f"{kind} {op}": [] for kind in ("off", "on", "porcelain", "cli off", "cli on") for op in ("note", "edit")
    }

    def porcelain_commit(path: str) -> None:
        git(porcelain, "add", "--", path)
        git(porcelain, "-c", "user.name=bench", "-c", "user.email=bench@fsmem", "commit", "-q", "-m", "write")

    for i in range(runs):
        for kind, memory in memories.items():
            started = time.perf_counter()
            result = memory.note(f"- bench {i}: value {i}", session="bench")
            if kind == "porcelain":
                porcelain_commit(result.path)
            times[f"{kind} note"].append(time.perf_counter() - started)
            old, new = ("a", "b") if i % 2 == 0 else ("b", "a")
            started = time.perf_counter()
            memory.edit(target, old=f"- value: {old}", new=f"- value: {new}")
            if kind == "porcelain":
                porcelain_commit(target)
            times[f"{kind} edit"].append(time.perf_counter() - started)
        for kind, root in (("cli off", off), ("cli on", on)):
            started = time.perf_counter()
            subprocess.run(
                [fsmem_bin(), "--root", str(root), "note", f"- cli {i}: x", "--session", "cli"],
                check=True,
                capture_output=True,
                env=env(),
            )
            times[f"{kind} note"].append(time.perf_counter() - started)
            old, new = ("a", "b") if i % 2 == 0 else ("b", "a")
            started = time.perf_counter()
            argv = [
                fsmem_bin(),
                "--root",
                str(root),
                "edit",
                "topics/bench-cli.md",
                "--old",
                f"- value: {old}",
                "--new",
                f"- value: {new}",
            ]
            subprocess.run(argv, check=True, capture_output=True, env=env())
            times[f"{kind} edit"].append(time.perf_counter() - started)
    med = {name: statistics.median(values) * 1000 for name, values in times.items() if values}
    commits = int(git(on, "rev-list", "--count", "HEAD"))
    dirty = [line for line in git(on, "status", "--porcelain").splitlines() if line.endswith(".md")]
    assert not dirty, f"history on left memory files uncommitted: {dirty[:3]}"
    rows = []
    for op in ("note", "edit"):
        rows.append(
            [
                f"in-process {op}",
                f"{med[f'off {op}']:.1f}",
                f"{med[f'on {op}']:.1f}",
                f"{med[f'on {op}'] / med[f'off {op}']:.2f}x",
                f"{med[f'porcelain {op}']:.1f} ({med[f'porcelain {op}'] / med[f'off {op}']:.2f}x)",
            ]
        )
    for op in ("note", "edit"):
        rows.append(
            [
                f"CLI {op}",
                f"{med[f'cli off {op}']:.1f}",
                f"{med[f'cli on {op}']:.1f}",
                f"{med[f'cli on {op}'] / med[f'cli off {op}']:.2f}x",
                "",
            ]
        )
    rows.append(["(commits in the history-on repository after the runs)", "", str(commits), "", ""])
    return rows


def burst(root: Path, history: bool, writers: int = 8, each: int = 40) -> dict[str, float]:
    before = int(git(root, "rev-list", "--count", "HEAD")) if history else 0
    started = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", BURST, str(root), str(w), str(each)], env=env()) for w in range(writers)
    ]
    assert all(p.wait() == 0 for p in procs)
    seconds = time.perf_counter() - started
    result = {"writes": writers * each, "seconds": seconds, "per_second": writers * each / seconds}
    if history:
        from fsmem import Memory
        from fsmem.history import journal

        journal.drain(Memory(root).history, wait=True)
        result["commits"] = int(git(root, "rev-list", "--count", "HEAD")) - before
        found = subprocess.run(
            ["git", "-C", str(root), "grep", "-h", "-c", "-e", "- burst ", "HEAD", "--", "sessions"],
            capture_output=True,
            text=True,
        ).stdout
        result["in_head"] = sum(int(line.rsplit(":", 1)[-1]) for line in found.splitlines() if line.strip())
    return result


def sync_costs(base: Path, notes: int = 100) -> list[list[str]]:
    """A sync that brings in `notes` notes: fast-forward, then with local notes too (a merge); against git pull."""
    import sync_scenario as S

    from fsmem import Memory

    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    rows = []
    for case in ("fast-forward", "merge"):
        work = base / case
        work.mkdir()
        origin, (first, second) = S.make_hosts(work, hosts=2, writers=1)
        mirror = work / "mirror"  # what plain git does with the same commits
        git(work, "clone", "-q", str(origin), str(mirror))
        writer = Memory(second, agent="w1")
        for i in range(notes):
            writer.note(f"- fact {i}: value {i}", subject=f"people/Person {i % 10}")
        S.fsmem(second, "sync")
        if case == "merge":
            local = Memory(first, agent="w1")
            for i in range(notes):
                local.note(f"- local {i}: value {i}", subject=f"people/Person {i % 10}")
            for i in range(notes):
                path = mirror / "sessions" / f"local-{i}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"- local {i}\n")
            git(mirror, "add", "-A")
            git(mirror, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "local")
        started = time.perf_counter()
        subprocess.run(
            [
                "git",
                "-C",
                str(mirror),
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "pull",
                "-q",
                "--no-rebase",
                "--no-edit",
            ],
            check=True,
            capture_output=True,
            env=env(),
        )
        pull = time.perf_counter() - started
        started = time.perf_counter()
        out = S.fsmem(first, "sync", "--json")
        took = time.perf_counter() - started
        phases = json.loads(out.stdout)["seconds"]
        shown = ", ".join(f"{k} {v * 1000:.0f}" for k, v in phases.items())
        rows.append(
            [f"{notes} notes in ({case})", f"{pull * 1000:.0f}", f"{took * 1000:.0f}", f"{took / pull:.1f}x", shown]
        )
    return rows


def scenario(seconds: float) -> list[list[str]]:
    import sync_scenario as S

    base = OUT / "history-scenario"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    started = time.perf_counter()
    result = S.run(base, seconds=seconds, writers=4, hosts=2, every=3.0)
    took = time.perf_counter() - started
    first, second = (S.files_of(root) for root in result["roots"])
    syncs = result["syncs"]
    failed = sum(1 for s in syncs if s["code"])
    notes = "".join(t.decode() for r, t in first.items() if r.startswith("sessions/"))
    lost = sum(
        1 for item in result["written"] if item["kind"] == "observation" and f"Observation {item['mark']} " not in notes
    )
    durations = sorted(s["seconds"] for s in syncs)
    return [
        [
            "writes",
            str(len(result["written"])),
            f"{len(result['written']) / seconds:.1f} per second over {seconds:.0f} s",
        ],
        [
            "syncs during the run",
            str(len(syncs)),
            f"failed {failed}; median {statistics.median(durations):.1f} s, max {durations[-1]:.1f} s",
        ],
        [
            "final syncs until both clones held origin's commit",
            str(result["final_syncs"]),
            f"whole scenario {took:.0f} s",
        ],
        ["clones byte-identical", str(first == second), f"{len(first)} files"],
        ["notes lost", str(lost), ""],
        [
            "files with a conflict marker",
            str(sum(1 for t in first.values() if b"<<<<<<<" in t or b"<!-- fsmem merge:" in t)),
            "",
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=os.environ.get("BENCH_HISTORY_SIZES", "1000,10000"))
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "15")))
    parser.add_argument("--scenario-seconds", type=float, default=60.0)
    args, _ = parser.parse_known_args()
    compiled()
    print(load(), file=sys.stderr)
    for files in [int(s) for s in args.sizes.split(",") if s]:
        off, on, porcelain = copies(files)
        rows = write_costs(off, on, porcelain, args.runs)
        print(
            table(
                f"one write, {files:,} files (median ms of {args.runs}; {load()})",
                ["write", "history off", "history on", "on / off", "git add + commit (x off)"],
                rows,
            )
        )
        quiet, loud = burst(off, False), burst(on, True)
        print(
            table(
                f"burst: 8 processes x 40 notes at once, {files:,} files",
                ["history", "writes/s", "seconds", "commits", "notes in HEAD"],
                [
                    ["off", f"{quiet['per_second']:.1f}", f"{quiet['seconds']:.1f}", "-", "-"],
                    [
                        "on",
                        f"{loud['per_second']:.1f}",
                        f"{loud['seconds']:.1f}",
                        str(loud["commits"]),
                        f"{loud['in_head']} of {loud['writes']}",
                    ],
                    ["on / off", f"{loud['per_second'] / quiet['per_second']:.2f}x", "", "", ""],
                ],
            )
        )
    print(
        table(
            f"fsmem sync (ms; {load()})",
            ["case", "git pull", "fsmem sync", "sync / pull", "sync phases (ms)"],
            sync_costs(OUT / "history-sync"),
        )
    )
    print(
        table(f"convergence, full period ({load()})", ["measure", "value", "detail"], scenario(args.scenario_seconds))
    )


if __name__ == "__main__":
    main()
