"""The limit of the server's unique mix: each of its calls, one at a time, beside what the bare tools take for it.

    python benchmarks/bench_server.py --only limit [--files 100000 --keep DIR] [--limit-calls 96]

The calls are the unique mix's own (`bench_server.Unique` and `Plan`: the same questions, grep words, files
and listings, drawn in the order the clients draw them when they go in step). One long-lived `Memory` (an
agent's, as in the in-process phase) answers each through `fsmem.agents.tools.call`, and beside it, in the
same process, the sides' order turned call by call:

- search: the bare FTS5 query of the same words on the same index (`bench_search_unique.bare_query`: their
  OR, `bm25()`, 20 rows), and `fsmem --version` (what a one-shot search is held to);
- grep: bare `rg` over the whole memory with fsmem's own options (`fsmem.store.rg_command.build_args`):
  `--json` (every match printed, the grep target's limit), `--count` (the cheapest pass that gives the
  exact total an answer carries), `--files-with-matches`, and `--sort path` stopped once it printed a page
  (what a grep would cost with no exact total: rg reads files in order until the page is full); and, for
  what an index of positions would cost to count (not grep's answer: search rows, not lines; the
  analyzer's words, not a substring), an FTS5 `count(*)` of the search index's rows that hold the grep
  word's terms as a phrase;
- ls: a stat walk of the folder listed (`fsmem.store.walk.walk_stats`, the listing's limit);
- read: the file's bytes.

CPU of a call: fsmem's, the process's (its threads, the feed's check beside them) and its rg's; a bare rg's
or `fsmem --version`'s, that process's own; the FTS5 query's, a walk's or a read's, the calling thread's.
From the mean CPU a call of the mix (its four kinds in equal numbers): the calls a second the usable cores
allow, against the target's 80.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from pathlib import Path

TARGET_CALLS = 80.0  # issue #34: calls a second of the unique mix, at 10k and 100k files, two cores
FSMEM = "fsmem (in-process)"
FTS5 = "bare FTS5 (OR, bm25, 20 rows)"
VERSION = "fsmem --version"
RG_JSON, RG_COUNT, RG_FILES = "rg --json", "rg --count", "rg --files-with-matches"
PAGE = "rg --sort path, stopped at a page of 50 lines"
PAGE_LINES = 50  # a budget's rows by default (`BudgetSettings.max_results`)
PHRASE = "FTS5 count of the rows holding its words as a phrase"
WALK, READ = "stat walk of the folder", "the file's bytes"
SIDES = {
    "search": [FSMEM, FTS5, VERSION],
    "grep": [FSMEM, RG_JSON, RG_COUNT, RG_FILES, PAGE, PHRASE],
    "ls": [FSMEM, WALK],
}
SIDES["read"] = [FSMEM, READ]
# Per kind, the bare tool that gives what the answer must carry: the ranked rows; the exact total (the page's
# lines are a second pass over a few files, not counted); the folder's files; the file.
LIMIT = {"search": FTS5, "grep": RG_COUNT, "ls": WALK, "read": READ}


def _children() -> tuple[float, float]:
    """CPU seconds (user, system) of this process's children that ended."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def first_lines(argv: list[str], cwd: Path, lines: int) -> None:
    """Run `argv` until it printed `lines` lines (or ended), then stop it."""
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process:
        assert process.stdout is not None
        for number, _line in enumerate(process.stdout, 1):
            if number >= lines:
                process.kill()
                break
        process.stdout.read()


def measure(root: Path, calls: list[tuple[str, dict]], warm: list[tuple[str, dict]]) -> dict:
    """Each of `calls` (tool, arguments) by fsmem and by its bare sides, alternating; the figures and the limit.

    `warm` are calls made first, untimed, twice (the in-process phase's: the second search starts the change
    feed; the first answer's tokens load the tokenizer's table, the first listing the metadata)."""
    from bench_search_unique import bare_query
    from common import fsmem_bin, rg_bin

    from fsmem import Memory
    from fsmem.agents import tools
    from fsmem.search.documents import quoted
    from fsmem.search.scoring import query_terms
    from fsmem.store import cache
    from fsmem.store.rg_command import build_args
    from fsmem.store.walk import walk_stats

    memory = Memory(root, agent="bench-00")
    for tool, arguments in warm + warm:
        tools.call(memory, tool, arguments)
    index = memory.search_index
    bare = cache.connect(index.path)
    rg = rg_bin()

    def run(argv: list[str], cwd: Path | None = None) -> None:
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)  # drained through a pipe, as fsmem reads

    def bare_side(tool: str, side: str, arguments: dict):
        if side == FTS5:
            return lambda: bare_query(index, bare, arguments["query"])
        if side == PHRASE:
            terms, _ = query_terms(index.analyzer, arguments["pattern"])
            phrase = " + ".join(quoted(t) for t in terms)
            count = "SELECT count(*) FROM search_fts WHERE search_fts MATCH ?"
            return lambda: bare.execute(count, (phrase,)).fetchone() if terms else None
        if side == VERSION:
            return lambda: run([fsmem_bin(), "--version"])
        if side == PAGE:
            argv = [rg, *build_args(arguments["pattern"], fixed_strings=True), "--sort", "path", "--", "./"]
            return lambda: first_lines(argv, root, PAGE_LINES)
        if tool == "grep":
            how = {RG_JSON: ["--json"], RG_COUNT: ["--count"], RG_FILES: ["--files-with-matches"]}[side]
            argv = [rg, *build_args(arguments["pattern"], fixed_strings=True), *how, "--", "./"]
            return lambda: run(argv, root)
        if side == WALK:
            start = root / arguments["path"] if arguments.get("path") else None
            return lambda: sum(1 for _ in walk_stats(root, start))
        return lambda: (root / arguments["path"]).read_bytes()

    records: list[dict] = []
    background: list[tuple[float, float]] = []  # (wall, CPU of the process's other threads) during thread sides
    loads = [os.getloadavg()[0]]
    turns = dict.fromkeys(SIDES, 0)
    for tool, arguments in calls:
        sides = SIDES[tool]
        turn = turns[tool] % len(sides)  # each side first as often as the others
        turns[tool] += 1
        for side in sides[turn:] + sides[:turn]:
            if side == FSMEM:
                act = lambda: tools.call(memory, tool, arguments)  # noqa: B023, E731
            else:
                act = bare_side(tool, side, arguments)
            process, thread, (user, system) = time.process_time(), time.thread_time(), _children()
            started = time.perf_counter()
            act()
            wall = time.perf_counter() - started
            process, thread = time.process_time() - process, time.thread_time() - thread
            after = _children()
            user, system = after[0] - user, after[1] - system
            children = user + system
            if side == FSMEM:
                cpu = process + children
            elif side in (VERSION, RG_JSON, RG_COUNT, RG_FILES, PAGE):
                cpu = children
            else:
                cpu = thread
                background.append((wall, process - thread))
            records.append({"tool": tool, "side": side, "wall": wall, "cpu": cpu, "rg": children, "system": system})
        loads.append(os.getloadavg()[0])
    bare.close()
    return summarise(records, background, loads)


def summarise(records: list[dict], background: list[tuple[float, float]], loads: list[float]) -> dict:
    """Per kind and side, the CPU and wall of its calls; per way of answering the mix, its CPU a call and the calls a
    second the usable cores allow."""
    from common import percentile

    cores = len(os.sched_getaffinity(0))
    kinds: dict[str, dict[str, dict]] = {}
    for tool, sides in SIDES.items():
        for side in sides:
            mine = [r for r in records if r["tool"] == tool and r["side"] == side]
            if not mine:
                continue
            kinds.setdefault(tool, {})[side] = {
                "calls": len(mine),
                "cpu_mean": statistics.fmean(r["cpu"] for r in mine),
                "cpu_p50": statistics.median(r["cpu"] for r in mine),
                "rg_mean": statistics.fmean(r["rg"] for r in mine),
                "system_mean": statistics.fmean(r["system"] for r in mine),
                "wall_p50": statistics.median(r["wall"] for r in mine),
                "wall_p99": percentile([r["wall"] for r in mine], 0.99),
            }
    mixes = {
        "fsmem": {tool: sides[FSMEM]["cpu_mean"] for tool, sides in kinds.items()},
        "bare": {tool: sides[LIMIT[tool]]["cpu_mean"] for tool, sides in kinds.items()},
    }
    mixes["cheapest"] = {tool: min(mixes["fsmem"][tool], mixes["bare"][tool]) for tool in kinds}
    per_call = {name: statistics.fmean(mix.values()) for name, mix in mixes.items()}
    other = max(0.0, sum(cpu for _, cpu in background) / (sum(wall for wall, _ in background) or 1))  # clocks' rounding
    return {
        "cores": cores,
        "kinds": kinds,
        "mixes": mixes,
        "cpu_per_call": per_call,
        "calls_per_second": {name: cores / cpu for name, cpu in per_call.items()},
        "background_cores": other,
        "load": (min(loads), max(loads)),
    }


def tables(result: dict, files: int) -> list[tuple[str, list[str], list[list[str]]]]:
    """The limit's tables (title, header, rows) for `common.table`."""
    ms = lambda seconds: f"{seconds * 1000:,.1f} ms"  # noqa: E731
    low, high = result["load"]
    rows = []
    for tool, sides in result["kinds"].items():
        for side, f in sides.items():
            rg = f" ({ms(f['rg_mean'])} rg)" if side == FSMEM and tool == "grep" else ""
            if side in (RG_JSON, RG_COUNT, RG_FILES, PAGE):
                rg = f" ({ms(f['system_mean'])} system)"
            mark = " (the limit)" if LIMIT[tool] == side else ""
            rows.append(
                [tool, side + mark, str(f["calls"]), ms(f["cpu_mean"]) + rg, ms(f["cpu_p50"])]
                + [ms(f["wall_p50"]), ms(f["wall_p99"])]
            )
    first = (
        f"the unique mix's calls one at a time, {files:,} files, load {low:.1f}-{high:.1f}",
        ["call", "side", "calls", "CPU mean", "CPU p50", "wall p50", "wall p99 (nearest rank)"],
        rows,
    )
    names = {
        "fsmem": "fsmem's calls (in-process, one at a time)",
        "bare": "the bare tools: " + ", ".join(f"{tool}: {side}" for tool, side in LIMIT.items()),
        "cheapest": "the cheaper of the two for each kind",
    }
    rows = [
        [names[name]]
        + [ms(result["mixes"][name][tool]) for tool in result["mixes"][name]]
        + [ms(result["cpu_per_call"][name]), f"{result['calls_per_second'][name]:.1f}"]
        for name in names
    ]
    cores = result["cores"]
    budget = cores / TARGET_CALLS
    rows.append(["the target", "", "", "", "", ms(budget), f"{TARGET_CALLS:.0f}"])
    second = (
        f"what {cores} cores allow the mix (CPU a call, the mean of its four kinds; the process's other threads "
        f"took {result['background_cores']:.2f} of a core beside)",
        ["", *result["mixes"]["fsmem"], "CPU a call", f"calls/s on {cores} cores"],
        rows,
    )
    search = result["kinds"].get("search")
    if not search:
        return [first, second]
    fts5, version, fsmem = search[FTS5], search[VERSION], search[FSMEM]
    third = (
        "search: the limit against the search targets (p99 at most 100 ms at 100k; a one-shot search within 2x "
        "`fsmem --version`)",
        ["", "p50", "p99", "p50 / fsmem --version p50"],
        [
            [FSMEM, ms(fsmem["wall_p50"]), ms(fsmem["wall_p99"]), f"{fsmem['wall_p50'] / version['wall_p50']:.1f}x"],
            [FTS5, ms(fts5["wall_p50"]), ms(fts5["wall_p99"]), f"{fts5['wall_p50'] / version['wall_p50']:.1f}x"],
            [VERSION, ms(version["wall_p50"]), ms(version["wall_p99"]), "1.0x"],
        ],
    )
    return [first, second, third]
