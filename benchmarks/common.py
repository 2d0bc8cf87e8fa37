"""Shared helpers for the benchmark scripts: where corpora live, how to time a command, how to print a table.

Timings are wall-clock medians of several runs of real subprocesses with all
output drained through a pipe (rg stops early when it sees /dev/null). The
baseline and fsmem alternate run by run in the same process, so a busy machine
slows both, and results are reported as ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench-out"
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))


def fsmem_bin() -> str:
    candidate = Path(sys.executable).with_name("fsmem")
    return str(candidate) if candidate.exists() else "fsmem"


def serve_until_listening(config: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """`fsmem serve --config CONFIG` started with no FSMEM_ variable of this process, and its URL, read from
    the "listening" record of its JSON log `log` (which CONFIG names); exits the benchmark if it does not start."""
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    proc = subprocess.Popen([fsmem_bin(), "serve", "--config", str(config)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if log.exists():
            for line in log.read_text().splitlines():
                record = json.loads(line)
                if record.get("event") == "listening":
                    return proc, record["url"]
        if proc.poll() is not None:
            raise SystemExit(f"fsmem serve exited: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("fsmem serve did not start within 60 s")


def rg_bin() -> str:
    from fsmem.store.rg import find_rg

    return find_rg()


def run_drained(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[float, int, bytes]:
    """Seconds to run `argv` to completion with stdout read through a pipe."""
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1) or b"Traceback" in proc.stderr:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[:500]}")
    return elapsed, len(proc.stdout), proc.stdout


def side_by_side(
    commands: dict[str, tuple[list[str], Path | None]], runs: int, before_each=None, envs: dict[str, dict] | None = None
) -> dict[str, float]:
    """Median seconds of each command, alternating them run by run after one warm-up each (`envs`: the
    environment of a command, by its name, where it is not this process's)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    env = (envs or {}).get
    for name, (argv, cwd) in commands.items():
        if before_each:
            before_each(name)
        run_drained(argv, cwd, env(name))
    for _ in range(runs):
        for name, (argv, cwd) in commands.items():
            if before_each:
                before_each(name)
            times[name].append(run_drained(argv, cwd, env(name))[0])
    return {name: statistics.median(values) for name, values in times.items()}


def compiled() -> None:
    """Write fsmem's bytecode first: with PYTHONDONTWRITEBYTECODE set, every run would compile it again."""
    import compileall

    compileall.compile_dir(REPO / "fsmem", quiet=1)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"  # noqa: E731
    out = [f"\n{title}", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in rows]
    return "\n".join(out)


def sizes_from(argv: list[str], default: str) -> list[int]:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", default))
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "7")))
    args, _ = parser.parse_known_args(argv)
    global RUNS
    RUNS = args.runs
    return [int(s) for s in args.sizes.split(",") if s]


RUNS = 7


def memory_arguments(parser) -> None:
    """The options `memories` reads: --root (a memory whose caches are built) or --sizes (the seeded corpora)."""
    parser.add_argument("--root", type=Path, help="a memory whose caches are built (a scratch copy)")
    parser.add_argument("--sizes", default="10000", help="corpus sizes when no --root is given")


def memories(root: Path | None, sizes: str) -> list[Path]:
    """The memory a benchmark was given (--root, a scratch copy with its caches built), else the seeded corpus of
    each of `sizes` (comma-separated file counts), built if need be."""
    return [root] if root else [corpus(int(size)) for size in sizes.split(",")]


def corpus(files: int) -> Path:
    from corpus import build

    label = f"{files // 1000}k" if files >= 1000 else str(files)
    started = time.perf_counter()
    root = build(OUT / f"corpus-{label}", files)
    took = time.perf_counter() - started
    if took > 1:
        print(f"(built the {label} corpus in {took:.0f} s)", file=sys.stderr)
    return root


def old_package(old: str, into: Path) -> Path:
    """A folder whose `fsmem` package is `old`'s: `old` itself when it holds one, else revision `old` unpacked
    into `into` by `git archive` (with the template its package links to; nothing of this checkout touched)
    and compiled to bytecode, as an installed package is: the runs set PYTHONDONTWRITEBYTECODE, so an
    uncompiled one paid for compiling every module in every process it timed. Its C modules are built as
    its own pyproject.toml says (`_build_extensions`), so that both sides run C where the revision has it."""
    if Path(old, "fsmem", "__init__.py").is_file():
        return Path(old)
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", old, "fsmem", "memory_template"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "fsmem")], check=True)
    project = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{old}:pyproject.toml"], check=True, capture_output=True, text=True
    ).stdout
    _build_extensions(project, into)
    return into


_BUILD = """
import json, sys
from setuptools import Distribution, Extension
from setuptools.command.build_ext import build_ext
modules = [Extension(m["name"], m["sources"], extra_compile_args=m.get("extra-compile-args", [])) for m in json.loads(sys.argv[1])]
command = build_ext(Distribution({"ext_modules": modules}))
command.inplace = True
command.ensure_finalized()
command.run()
"""


def _build_extensions(project: str, into: Path) -> None:
    """Compile the C extensions a revision's pyproject.toml names (`[tool.setuptools] ext-modules`), in place in
    its unpacked tree, with its own compile arguments, through setuptools as `pip install` builds them. One that
    does not build is said, and that side runs its Python twin, as an install where it is optional would."""
    import tomllib

    modules = tomllib.loads(project).get("tool", {}).get("setuptools", {}).get("ext-modules", [])
    if not modules:
        return
    built = subprocess.run(
        [sys.executable, "-c", _BUILD, json.dumps(modules)], cwd=into, capture_output=True, text=True
    )
    if built.returncode:
        print(f"# the old revision's C modules did not build; it runs their Python twins:\n{built.stderr[-800:]}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (the one at index `share * n` of the sorted values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class PartTimes:
    """The thread's CPU in each part of some work since `spent` was last emptied: `parts` are (label, module,
    attribute), an attribute a function of the module or `Class.method`, replaced by a timed wrapper; a part's
    time is counted where it is called outside another call of itself."""

    def __init__(self, parts: list[tuple[str, str, str]]) -> None:
        import importlib

        self.spent: dict[str, float] = {}
        for label, module, attribute in parts:
            self._time(label, importlib.import_module(module), attribute)

    def _time(self, label: str, owner: object, attribute: str) -> None:
        import functools

        *path, name = attribute.split(".")
        for step in path:
            owner = getattr(owner, step)
        original = getattr(owner, name)
        inside = [0]

        @functools.wraps(original)  # the CLI reads an operation's signature
        def timed(*args, **kwargs):
            if inside[0]:
                return original(*args, **kwargs)
            inside[0] += 1
            started = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + time.thread_time() - started
                inside[0] -= 1

        setattr(owner, name, timed)


class CollectorPauses:
    """The pauses of Python's cyclic garbage collector while `timing` is set: (generation, seconds) each.

    A collection of the oldest generation walks every container the process holds, and falls inside
    whichever call allocated at that moment: a slow question may be the collector's, not the ranking's."""

    def __init__(self) -> None:
        import gc

        self.timing = False
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.timing:
            self.pauses.append((info["generation"], time.perf_counter() - self._started))

    def summary(self) -> str:
        full = sorted(seconds for generation, seconds in self.pauses if generation == 2)
        if not full:
            return "no full collection"
        return f"{len(full)} full collection(s), {1000 * full[len(full) // 2]:.1f} ms (p50), {1000 * full[-1]:.1f} ms the longest"

    @staticmethod
    def full_now() -> str:
        """A full collection now: its CPU time (the least of three) and how many objects the collector walks."""
        import gc

        spent = []
        for _ in range(3):
            started = time.process_time()
            gc.collect()
            spent.append(time.process_time() - started)
        return f"{1000 * min(spent):.1f} ms of CPU (the least of 3), {len(gc.get_objects()):,} objects tracked"


class NewQuestions:
    """Questions and grep words no call of a run has asked before, drawn (seeded) from the memory's own text.

    A server or a process that keeps answers gains nothing from a question it has not seen, so a benchmark
    that asks the same few questions measures the kept answers, not the ranking. Each question is three
    words of one line of a file of the memory, in the line's order, one of them a word of few lines (in
    under `RARE` of the sampled lines: a name, a key, a term, as an agent asks about something in
    particular) and the others any of the line's, common ones included; each grep word is such a word of
    few lines, alone or with its neighbour on the line. None is given twice. `sample` files (seeded, from
    the sorted list of the memory's Markdown files) are read once; draws are thread-safe.
    """

    RARE = 0.05

    WORD = r"[A-Za-z0-9][A-Za-z0-9'-]{2,}"

    def __init__(self, root: Path, seed: int = 11, sample: int = 2000):
        import gc
        import random
        import re
        import threading

        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.asked: set[str] = set()
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".md")]
        self.lines: list[tuple[str, ...]] = []
        for path in self.rng.sample(files, min(sample, len(files))):
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            if text.startswith("---\n"):  # the body only: front matter is keys an agent does not ask about
                text = text[text.find("\n---\n", 4) + 5 :] if "\n---\n" in text[4:] else ""
            for line in text.splitlines():
                words = re.findall(self.WORD, line)
                if len(words) >= 3:
                    self.lines.append(tuple(words))
        lines_with: dict[str, int] = {}
        for words in self.lines:
            for word in {w.lower() for w in words}:
                lines_with[word] = lines_with.get(word, 0) + 1
        few = self.RARE * len(self.lines)
        # each line with the places of its words of few lines: a question or grep word is built around one
        self.anchored = [
            (words, rare)
            for words in self.lines
            if (rare := tuple(i for i, w in enumerate(words) if lines_with[w.lower()] < few))
        ]
        if not self.anchored:
            raise SystemExit(f"{root} has no lines of three words or more, one of them rare, to draw questions from")
        # Tuples of strings and numbers leave the garbage collector's lists once a collection has seen them:
        # kept as lists, the sample (some 90,000 lines at 100k files) was walked by every full collection of
        # the process it shares with the fsmem it measures, adding 100-200 ms to the questions it fell in.
        gc.collect()

    def _fresh(self, make) -> str:
        with self.lock:
            for _ in range(100_000):
                value = make()
                if value.lower() not in self.asked:
                    self.asked.add(value.lower())
                    return value
        raise RuntimeError(f"no new question or grep word after {len(self.asked)}: ask fewer, or sample more files")

    def question(self, words: int = 3) -> str:
        """`words` words of one line in its order, one of them of few lines, never asked before."""

        def make() -> str:
            line, rare = self.rng.choice(self.anchored)
            anchor = self.rng.choice(rare)
            others = [i for i in range(len(line)) if i != anchor]
            chosen = sorted([anchor, *self.rng.sample(others, min(words - 1, len(others)))])
            return " ".join(line[i] for i in chosen)

        return self._fresh(make)

    def grep_word(self) -> str:
        """A word of few lines, alone or with a neighbour (a fixed string found in the memory), never given before."""

        def make() -> str:
            line, rare = self.rng.choice(self.anchored)
            anchor = self.rng.choice(rare)
            start = self.rng.choice([anchor, max(0, anchor - 1)])
            return " ".join(line[start : start + (2 if start < anchor else self.rng.choice((1, 2)))])

        return self._fresh(make)


def row_parts_asked(memory, root: Path, seed: int, queries: int) -> list[tuple]:
    """What each of `queries` new questions asked of the row part where it scored file by file: the arguments
    of each call of `fsmem.search.rowscores.best_row_scores`, its connection first, to replay without the rest
    of a search (bench_rowscores.py, bench_row_halves.py)."""
    from fsmem.search import rowscores

    asked: list[tuple] = []
    inner = rowscores.best_row_scores
    rowscores.best_row_scores = lambda *call: asked.append(call) or inner(*call)  # type: ignore[assignment,misc]
    try:
        sampler = NewQuestions(Path(root), seed=seed)
        for _ in range(queries):
            memory.search(sampler.question(3))
    finally:
        rowscores.best_row_scores = inner
    return asked


def reader(memory):
    """A connection to `memory`'s search index as a long-lived process's reader holds one: its page cache, and
    the native score functions loaded before any clock starts."""
    from fsmem.search import rowscores
    from fsmem.search.index import READER_CACHE_KIB
    from fsmem.store import cache

    conn = cache.connect(memory.search_index.path)
    conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
    rowscores.native_loaded(conn)
    return conn
