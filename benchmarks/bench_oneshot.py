"""One-shot commands from the shell, with and without a running `fsmem watch` (issue #34, `fsmem.cli.rendezvous`).

On a copy of a corpus (`--corpus DIR`, copied once under bench-out/; default: the seeded corpus of
`--sizes`), with a regular install (bench_startup's), each run alternates `fsmem --version`,
`fsmem ls --max-results 5`, `fsmem search` of a 3-word question, `fsmem grep` of a rare word and `rg --json` of
the same word; every question and grep word is new to the run (`common.NewQuestions`), so
nothing kept from an earlier call answers it. First with no watcher (the walk, as before), then with
`fsmem watch` running (`--phases`: which of these run; `serve`, `fsmem serve` running). Targets, ratios
against the limit in the same phase: `search` and `ls` within 2x `fsmem --version` and `grep` within 1.5x
`rg --json` with the watcher; without it, no slower than FSMEM_SOCKET=off (the code path before the socket).
With a running fsmem, the CPU its threads spent within each search is given too (Linux: /proc's schedstat):
its main thread's, where `fsmem watch` answers, and the rest (the search's helper thread, `fsmem serve`'s
answering process), which the load inflates less than the wall.

`--baseline DIR` also runs each `fsmem grep` through the package in DIR (another checkout's, e.g.
`git archive main fsmem | tar -x -C DIR`, put first on PYTHONPATH), interleaved with this one's, and
checks that both print the same bytes. Before each of the two, the cache's memo of token counts is
emptied, so that the second does not find the page's lines counted by the first (a new name's lines
are not, and the first count of a process loads the tokenizer).

    python benchmarks/bench_oneshot.py [--sizes 10000] [--runs 15] [--corpus /work/wt/corpus-100k | --root COPY]
        [--phases off,alone,watch,serve] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_startup import installed_fsmem
from common import OUT, NewQuestions, corpus, load, ms, rg_bin, run_drained, sizes_from, table

from fsmem.cli import rendezvous


def copy_of(source: Path) -> Path:
    """A writable copy of `source` under bench-out/ (made once; fsmem writes its caches into it)."""
    if source.resolve().parent == OUT.resolve() and source.name.startswith("oneshot-"):
        return source  # a copy made before
    target = OUT / f"oneshot-{source.name}"
    if not (target / "fsmem.yaml").exists():
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
        subprocess.run(["chmod", "-R", "u+w", str(target)], check=True)
    return target


def phase(
    fsmem: str,
    root: Path,
    runs: int,
    fresh: NewQuestions,
    env: dict[str, str],
    search: bool,
    baseline: Path | None = None,
    watcher: subprocess.Popen | None = None,
) -> dict[str, float]:
    """Median seconds of each command, alternating them run by run (one warm-up each); for grep and rg also
    over the names found in some file and over those found in none (`GROUPS`), whose times are far apart
    (a name in 60 % of the files has its page counted in tokens), so that the median of all says little.
    With `watcher`, also the CPU its threads spent within each search (`WATCHER_CPU`): what the answer cost
    it, which the load does not inflate as it does the wall."""
    rg = rg_bin()
    names = ("--version", "ls", "search", "grep", "grep (baseline)", "rg --json")
    times: dict[str, list[float]] = {k: [] for k in names}
    if not search:
        del times["search"]
    if baseline is None:
        del times["grep (baseline)"]
    envs = {name: env for name in names}
    envs["grep (baseline)"] = {**env, "PYTHONPATH": str(baseline)}
    spent: dict[str, list[float]] = {name: [] for name in WATCHER_CPU}
    found: list[bool] = []  # per run: rg found the name
    for warm in (True,) + (False,) * runs:
        word = fresh.grep_word()
        commands = {
            "--version": [fsmem, "--version"],
            "ls": [fsmem, "ls", "--max-results", "5"],
            "search": [fsmem, "search", fresh.question()],
            "grep": [fsmem, "grep", word],
            "grep (baseline)": [fsmem, "grep", word],
            "rg --json": [rg, "--json", word],
        }
        printed: dict[str, bytes] = {}
        for name, argv in commands.items():
            if name not in times:
                continue
            if baseline is not None and name.startswith("grep"):
                _forget_counts(root)
            before = _threads_cpu(watcher.pid) if watcher is not None and name == "search" else None
            took, printed[name] = _timed(argv, root, envs[name])
            if not warm:
                times[name].append(took)
            if before is not None and not warm:
                main, others = _spent(watcher.pid, before, _threads_cpu(watcher.pid))
                spent[WATCHER_CPU[0]].append(main)
                spent[WATCHER_CPU[1]].append(others)
        if not warm:
            found.append(b'"type":"match"' in printed["rg --json"])
        if baseline is not None and printed["grep"] != printed["grep (baseline)"]:
            raise SystemExit(f"fsmem grep {word}: the baseline printed other bytes")
    medians = {name: statistics.median(values) for name, values in {**times, **spent}.items() if values}
    for group, wanted in GROUPS.items():
        for name in [n for n in ("grep", "grep (baseline)", "rg --json") if n in times]:
            values = [took for took, hit in zip(times[name], found, strict=True) if hit == wanted]
            if values:
                medians[f"{name}, {group}"] = statistics.median(values)
    return medians


GROUPS = {"names found": True, "names in no file": False}
WATCHER_CPU = ("the watcher's main thread's CPU within a search", "its other threads' and processes' CPU")


def _threads_cpu(pid: int) -> dict[tuple[int, int], int]:
    """Nanoseconds on a CPU of each thread of process `pid` and of its children ((process, thread): ns), from
    /proc's schedstat (Linux; elsewhere nothing)."""
    spent: dict[tuple[int, int], int] = {}
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return spent
    for process in [pid, *map(int, children)]:
        try:
            for thread in os.listdir(f"/proc/{process}/task"):
                spent[process, int(thread)] = int(
                    Path(f"/proc/{process}/task/{thread}/schedstat").read_text().split()[0]
                )
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return spent


def _spent(pid: int, before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> tuple[float, float]:
    """Seconds of CPU between two `_threads_cpu`: of the main thread of `pid`, and of every other thread."""
    main = (after.get((pid, pid), 0) - before.get((pid, pid), 0)) / 1e9
    others = sum(ns - before.get(key, 0) for key, ns in after.items() if key != (pid, pid)) / 1e9
    return main, others


def _forget_counts(root: Path) -> None:
    """Empty the metadata cache's memo of token counts (`fsmem.store.cache`, table `counts`)."""
    import apsw

    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    try:
        conn.setbusytimeout(5000)
        conn.execute("DELETE FROM counts")
    finally:
        conn.close()


def _timed(argv: list[str], root: Path, env: dict[str, str]) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=root, capture_output=True, env=env)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1) or b"Traceback" in done.stderr:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[:500]}")
    return took, done.stdout


def watching(fsmem: str, root: Path, env: dict[str, str], search: bool, serve: bool = False) -> subprocess.Popen:
    """`fsmem watch` on `root` (with `serve`: `fsmem serve` of it, on a free port with no token), once its socket
    is there (and has answered one command)."""
    command = ["watch"]
    if serve:
        command = ["serve", "--memory", f"bench={root}", "--port", "0", "--tokens", str(OUT / "oneshot-tokens.json")]
    watcher = subprocess.Popen([fsmem, *command], cwd=root, env=env, stderr=subprocess.DEVNULL)
    path = rendezvous.socket_path(os.path.realpath(root))
    deadline = time.monotonic() + 1800
    while not (path and os.path.exists(path)):
        if watcher.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("fsmem watch did not start")
        time.sleep(0.1)
    run_drained([fsmem, "grep", "warm up"], cwd=root, env=env)  # the word index, once (it may outlast a client)
    run_drained([fsmem, "ls", "--max-results", "1"], cwd=root, env={**env, rendezvous.MODE_ENV: "require"})
    run_drained([fsmem, "grep", "warmed up"], cwd=root, env={**env, rendezvous.MODE_ENV: "require"})
    if search:
        run_drained([fsmem, "search", "warm up"], cwd=root, env={**env, rendezvous.MODE_ENV: "require"})
    return watcher


def rows_of(label: str, medians: dict[str, float]) -> list[list[str]]:
    version, rg = medians["--version"], medians["rg --json"]
    medians.setdefault("search", float("nan"))
    rows = [
        [label, "fsmem --version", ms(version), ""],
        [label, "fsmem ls --max-results 5", ms(medians["ls"]), f"{medians['ls'] / version:.2f}x --version"],
        [
            label,
            "fsmem search (new 3-word question)",
            ms(medians["search"]),
            f"{medians['search'] / version:.2f}x --version",
        ],
        [label, "rg --json NAME", ms(rg), ""],
        [label, "fsmem grep NAME (new name)", ms(medians["grep"]), f"{medians['grep'] / rg:.2f}x rg --json"],
    ]
    for name in WATCHER_CPU:
        if name in medians:
            rows.append([label, name, f"{medians[name] * 1000:.1f} ms", ""])
    if "grep (baseline)" in medians:
        ratio = f"{medians['grep (baseline)'] / rg:.2f}x rg --json"
        rows.append([label, "the same, the baseline's package", ms(medians["grep (baseline)"]), ratio])
    for group in GROUPS:
        if f"rg --json, {group}" not in medians:
            continue
        limit = medians[f"rg --json, {group}"]
        rows.append([label, f"rg --json NAME, {group}", ms(limit), ""])
        for name, shown in (("grep", "fsmem grep NAME"), ("grep (baseline)", "the same, the baseline's package")):
            if f"{name}, {group}" in medians:
                took = medians[f"{name}, {group}"]
                rows.append([label, f"{shown}, {group}", ms(took), f"{took / limit:.2f}x rg --json"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, help="a corpus folder to copy (default: the seeded one of --sizes)")
    parser.add_argument("--no-search", action="store_true", help="leave search out (no search index is built)")
    parser.add_argument(
        "--phases",
        default="off,alone,watch",
        help="of off (no watcher, FSMEM_SOCKET=off), alone (no watcher), watch, serve (fsmem serve running)",
    )
    parser.add_argument("--root", type=Path, help="a writable copy made before, used as it is (its caches warm)")
    parser.add_argument("--baseline", type=Path, help="a folder holding another fsmem package, its grep interleaved")
    args, rest = parser.parse_known_args()
    sizes = sizes_from(rest, "10000")
    phases = set(args.phases.split(","))
    import common

    runs = max(common.RUNS, 9)
    bin_dir = installed_fsmem()
    fsmem = str(bin_dir / "fsmem")
    sources = [args.root or args.corpus] if args.root or args.corpus else [corpus(files) for files in sizes]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    for source in sources:
        root = (source if args.root else copy_of(source)).resolve()  # absolute: `fsmem serve --memory` is given it
        files = sum(1 for _ in root.rglob("*.md"))
        fresh = NewQuestions(root, seed=34)
        run_drained([fsmem, "ls", "--max-results", "1"], cwd=root, env=base_env)  # warm caches, as before
        if not args.no_search:
            run_drained([fsmem, "search", "warm up"], cwd=root, env=base_env)
        rows: list[list[str]] = []
        before = load()
        search = not args.no_search
        during = before
        if "off" in phases:
            off = phase(fsmem, root, runs, fresh, {**base_env, rendezvous.MODE_ENV: "off"}, search, args.baseline)
            rows += rows_of("no watcher, FSMEM_SOCKET=off (as before)", off)
        if "alone" in phases:
            alone = phase(fsmem, root, runs, fresh, base_env, search, args.baseline)
            rows += rows_of("no watcher", alone)
        for serve in [name == "serve" for name in ("watch", "serve") if name in phases]:
            watcher = watching(fsmem, root, base_env, search, serve)
            try:
                during = load()
                asked = phase(fsmem, root, runs, fresh, base_env, search, args.baseline, watcher)
                rows += rows_of("fsmem serve running" if serve else "fsmem watch running", asked)
            finally:
                watcher.send_signal(signal.SIGTERM)
                watcher.wait(60)
            while os.path.exists(rendezvous.socket_path(os.path.realpath(root)) or ""):
                time.sleep(0.1)  # its answering process may finish after it
        print(f"({before} before; {during} with the watcher; {load()} after; {runs} runs, medians)")
        print(table(f"one-shot commands on {files:,} files ({source})", ["phase", "command", "median", "ratio"], rows))


if __name__ == "__main__":
    sys.exit(main())
