"""Load on `fsmem serve`: 32 clients mixing search, grep, ls and read on a 10k-file (or 100k) memory,
beside the same calls in-process, in the same run.

    python benchmarks/bench_server.py [--files 10000] [--clients 32] [--seconds 20] [--tools search,grep,ls,read]
        [--mixes repeated,unique] [--workers N] [--processes N] [--keep DIR] [--py-spy FILE [--py-spy-gil]]
        [--no-fairness] [--no-limit] [--limit-calls 96] [--only server|fairness|limit] [--limit NAME=VALUE]

The target (issues #20 and #34): no errors, search p99 at most 1 s, at least
80 calls a second in all, with `fsmem serve`'s default settings, at 10k and
at 100k files. Two mixes, each in its own server: `unique` (no call's
arguments twice in the run: three words of one of the memory's own lines as
a question and a word or two of one as a grep word, `common.NewQuestions`;
reads of files not read yet, listings at new offsets), since a server that
keeps answers gains nothing from a question it has not seen; and, beside it
and labelled so, `repeated` (eight fixed queries, six patterns, five
folders, 400 files, as a team's agents ask the same things: kept answers).
The last table gives, per mix, the server's calls a second beside the
in-process rate of the same mix in the same run (the limit), search p99,
errors, and CPU per call: the server's own (with its rg children; with
`--processes N`, the parent's and every worker's), the benchmark's clients'
(they share the two cores) and in-process's.
`--keep DIR` (outside the repository) builds the corpus and the warmed copy
there once and uses them again (at 100k files: 455 MB of Markdown and minutes
of cold caches); `--py-spy FILE` records the server during each mix.

Two phases on one copy of the seeded corpus (`bench-out/server-10k/`), each
preceded by one untimed call of every tool:
- in-process: 32 threads, each with its own `Memory` (its own agent, as a token
  gives it) calling `fsmem.agents.tools.call` in a loop: the baseline;
- server: `fsmem serve` in its own process, 32 MCP sessions of the SDK's own
  streamable HTTP client in this process, each with its own token, calling
  `call_tool` in a loop. The server runs with every setting at its default
  (`processes`, `workers`, `cheap_workers`, the rate limits: a client's
  calls stay within its token's: each client paces every HTTP request it
  sends to its token's rate, `Pace`), unless `--processes` or `--workers`
  say otherwise.

Each client cycles through the four tools (searches from fixed queries, reads
of seeded files, greps of names and words, notes of a unique fact). After each
phase every note a client was told was saved is looked for in its session
file. The server's resident memory (VmRSS, and its anonymous part: the index
arrays it maps from `.fsmem/search/` are file-backed) is sampled every second.
Reported: calls, errors, p50 and p95 per tool, and the ratios server/in-process. A call
the server refuses as busy (503, `fsmem.server.lanes.Backlog`) is asked again after its `retry_after`,
as a client should, and counted apart (its latency counts from the first ask); `--limit
tool_timeout_seconds=3` with `taskset -c 0` brings the overload of 100k files to 10k.

After the unique mix, its limit (`mix_limit.py`): the mix's own first calls, `--limit-calls` of each
kind, one at a time, by fsmem in-process and by the bare tools beside it (a bare FTS5 query of the same
words, bare rg over the memory, a stat walk, a read), their CPU a call and the calls a second it allows on
the usable cores; `--only limit` runs that part alone, `--no-limit` skips it.

Then fair sharing (`fairness.py`): the same copy served with every limit at
its default, a light token's reads and searches timed alone and beside a
heavy token that sends the costliest calls its limits let through; reported:
the light token's latencies and the delay the heavy token added (the bound).
`--only fairness` runs that part alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import fairness
import mix_limit
from common import OUT, NewQuestions, compiled, corpus, fsmem_bin, load, serve_until_listening, table
from corpus import _FIRST, _KEYS, _LAST, _ORGS, _PROJECTS, _TOPICS, _WORDS, SEARCH_QUERIES

from fsmem.server.door import BUSY
from fsmem.server.settings import Limits, ServerSettings

QUERIES = SEARCH_QUERIES
PATTERNS = ["zephyrine", "Priya Patel", "proration", "Project Atlas", "Globex", "renewal date"]
TOOLS = ("search", "read", "grep", "ls", "note")
MIX = "search,grep,ls,read"  # the mix (#20); --tools adds note
MIX_TOOLS = tuple(MIX.split(","))
LS_FOLDERS = [None, "topics", "entities", "entities/people", "sessions"]
MIX_LABELS = {"unique": "unique: every question new", "repeated": "repeated: kept answers"}


def prepare(files: int, clients: int, keep: Path | None = None) -> Path:
    """A fresh copy of the seeded corpus (with its warm .fsmem/), with one agent per client.

    With `keep` (a folder outside the repository, `--keep`), the copy is made there once and used again by
    later runs of as many clients: at 100k files the copy and its warming take many minutes (the corpus
    is built under `keep` too). The mix without notes writes nothing but logs, so a kept copy stays the
    memory the benchmark describes.
    """
    label = f"{files // 1000}k" if files >= 1000 else str(files)
    root = (keep or OUT) / f"server-{label}"
    stamp = root / ".bench-server-stamp"
    wanted = f"{files} files, {clients} agents, warmed"
    if keep is not None and stamp.is_file() and stamp.read_text() == wanted:
        return root
    if keep is None:
        source = corpus(files)
    else:
        from corpus import build

        source = build(keep / f"corpus-{label}", files)
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(source, root, symlinks=True)
    agents = "".join(f"    bench-{n:02d}: {{}}\n" for n in range(clients))
    config = (root / "fsmem.yaml").read_text()
    (root / "fsmem.yaml").write_text(config + f"budgets:\n  agents:\n{agents}")
    warm_copy(root)
    stamp.write_text(wanted)
    return root


def warm_copy(root: Path) -> None:
    """Bring the copy's caches in step with the copy, untimed: a copied file has a new inode, so every row the
    source's `.fsmem/` holds is stale and the server's first calls would rebuild both caches cold (at 10k
    files, 7 s of metadata and 19 s of search index that a server restarted on its own memory never pays)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    for command in (["ls", "--max-results", "1"], ["search", QUERIES[0]]):
        subprocess.run([fsmem_bin(), "--root", str(root), *command], env=env, capture_output=True, check=False)
    # grep's word index is built by a long-lived process (a Memory asked twice), as the server keeps it on disk
    warm = "import sys; from fsmem import Memory; m = Memory(sys.argv[1]); m.ls(); m.ls(); m.grep('warm up', fixed_strings=True)"
    subprocess.run([sys.executable, "-c", warm, str(root)], env=env, capture_output=True, check=False)


def read_targets(root: Path, count: int = 400) -> list[str]:
    from fsmem.store.walk import walk_stats

    found = [rel for rel, _, _ in walk_stats(root) if rel.startswith(("entities/", "topics/"))]
    return random.Random(3).sample(found, min(count, len(found)))


class Unique:
    """Arguments no call of the run has used before, shared by every client of a phase (`--unique`): a
    server that keeps answers gains nothing from them. With `root`, questions and grep words drawn from
    the memory's own lines (`common.NewQuestions`: three words of a line; a word or two adjacent words);
    without it, searches of a key, a name and a word or two of the corpus's word lists and greps of a
    name, an organisation or project and a word. Reads of files not read yet (the targets in turn);
    listings of a folder at an offset not asked yet."""

    def __init__(self, targets: list[str], seed: int = 11, root: Path | None = None):
        self.new = NewQuestions(root, seed) if root is not None else None  # the memory's own words
        self.rng = random.Random(seed)
        self.targets = list(targets)
        self.rng.shuffle(self.targets)
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        self.n = 0

    def _fresh(self, make) -> str:
        with self.lock:
            for _ in range(100_000):  # the space of each kind is finite (greps: ~1,600): say so, never spin
                value = make()
                if value not in self.seen:
                    self.seen.add(value)
                    return value
        raise RuntimeError(f"the unique mix ran out of new arguments after {len(self.seen)}: run it for fewer seconds")

    def query(self) -> str:
        if self.new is not None:
            return self.new.question()
        r = self.rng
        return self._fresh(
            lambda: (
                f"{r.choice(_KEYS)} {r.choice(_FIRST)} {r.choice(_LAST)} {r.choice(_WORDS[12:])} {r.choice(_TOPICS)}"
            )
        )

    def pattern(self) -> str:
        if self.new is not None:
            return self.new.grep_word()
        r = self.rng
        return self._fresh(
            lambda: r.choice(
                [f"{r.choice(_FIRST)} {r.choice(_LAST)}", f"{r.choice(_ORGS + _PROJECTS)} {r.choice(_WORDS[12:])}"]
            )
        )

    def target(self) -> str:
        with self.lock:
            self.n += 1
            return self.targets[self.n % len(self.targets)]  # only more reads than targets repeat one

    def offset(self) -> int:
        with self.lock:
            self.n += 1
            return self.n


class Plan:
    """The calls one client makes, in order: the four tools in turn, arguments drawn from a seeded stream
    (from a few fixed queries and patterns, as an agent team asks the same things; with `unique`, never twice)."""

    def __init__(
        self,
        client: int,
        phase: str,
        targets: list[str],
        tools: tuple[str, ...] = ("search", "read", "grep", "note"),
        unique: Unique | None = None,
    ):
        self.client, self.phase, self.targets, self.tools = client, phase, targets, tools
        self.rng = random.Random(client)
        self.n = 0
        self.unique = unique

    def next(self) -> tuple[str, dict]:
        tool = self.tools[(self.client + self.n) % len(self.tools)]
        self.n += 1
        if self.unique is not None and tool != "note":
            return tool, self._unique(tool, self.unique)
        if tool == "search":
            return tool, {"query": self.rng.choice(QUERIES)}
        if tool == "read":
            return tool, {"path": self.rng.choice(self.targets)}
        if tool == "grep":
            return tool, {"pattern": self.rng.choice(PATTERNS), "fixed_strings": True}
        if tool == "ls":
            folder = self.rng.choice(LS_FOLDERS)
            return tool, ({"path": folder} if folder else {}) | {"max_results": 20}
        return tool, {"text": f"- bench {self.phase} {self.client}-{self.n}: ok", "subject": "topic/Bench load"}

    def _unique(self, tool: str, unique: Unique) -> dict:
        if tool == "search":
            return {"query": unique.query()}
        if tool == "read":
            return {"path": unique.target()}
        if tool == "grep":
            return {"pattern": unique.pattern(), "fixed_strings": True}
        folder = self.rng.choice(LS_FOLDERS)
        return ({"path": folder} if folder else {}) | {"max_results": 5, "offset": unique.offset()}


class Pace:
    """A client's own token bucket for its token's rate limit: every HTTP request it sends waits its turn.

    The server refuses a request past its token's rate (429, `fsmem.server.limits.RateLimiter`), which the
    SDK's client raises and the benchmark counts as a failed session. One client alone (the one-client
    phase; its ls and read take a few milliseconds at 10k files) sent 20 to 30 requests a second, and each
    run had one 429 once the burst was spent. Every request counts, the session's own (initialize, its
    notification, tools/list) too, so the bucket is an httpx request hook. It keeps half the burst back:
    the server counts a request when it arrives, later than here, and a notification may be in flight
    beside a call. One `Pace` per token, for every session of that token (the warm-up's, the one-client
    phase's and the timed phase's); its state is plain numbers, so it outlives each phase's event loop.
    """

    def __init__(self, rate: float, burst: int, clock=time.monotonic):
        self.rate = rate
        self.burst = max(1, burst // 2)
        self.clock = clock
        self.left = float(self.burst)
        self.then = clock()

    def delay(self) -> float:
        """Seconds this request must wait; its place is taken at once (requests sent meanwhile queue after it)."""
        now = self.clock()
        self.left = min(float(self.burst), self.left + (now - self.then) * self.rate) - 1.0
        self.then = now
        return 0.0 if self.left >= 0.0 else -self.left / self.rate

    async def __call__(self, request) -> None:
        import anyio

        wait = self.delay()
        if wait > 0:
            await anyio.sleep(wait)


def paces(tokens: list[str], limits: Limits) -> dict[str, Pace]:
    """One `Pace` per token, at the server's limits."""
    return {token: Pace(limits.rate_per_second, limits.burst) for token in tokens}


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank `q` quantile of sorted samples."""
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else float("nan")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    if not ordered:
        return float("nan"), float("nan")
    return statistics.median(ordered), percentile(ordered, 0.95)


# -- in process -------------------------------------------------------------------------------------


def run_in_process(
    root: Path,
    clients: int,
    seconds: float,
    targets: list[str],
    phase: str = "inproc",
    tools_=MIX_TOOLS,
    unique: Unique | None = None,
) -> dict:
    from fsmem import Memory
    from fsmem.agents import tools

    memories = [Memory(root, agent=f"bench-{n:02d}") for n in range(clients)]
    warm = Plan(0, "warm", targets, tools_)
    for tool, arguments in (warm.next() for _ in tools_):
        tools.call(memories[0], tool, arguments)  # untimed: loads the index and the tokenizer
    records: list[tuple[str, float, bool, str | None]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(number: int) -> None:
        plan = Plan(number, phase, targets, tools_, unique)
        while time.monotonic() < deadline:
            tool, arguments = plan.next()
            started = time.perf_counter()
            answer = tools.call(memories[number], tool, arguments)
            elapsed = time.perf_counter() - started
            with lock:
                records.append((tool, elapsed, answer.is_error, arguments.get("text") if tool == "note" else None))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.monotonic()
    cpu = _cpu_of(os.getpid())
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = [b - a for a, b in zip(cpu, _cpu_of(os.getpid()), strict=True)]
    return {"records": records, "wall": time.monotonic() - began, "cpu": spent}


def _cpu_of(pid: int) -> tuple[float, float]:
    """(CPU seconds of the process, CPU seconds of its children that ended: rg), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


# -- through the server ------------------------------------------------------------------------------


def start_server(
    root: Path,
    clients: int,
    tmp: Path,
    workers: int | None = None,
    processes: int | None = None,
    limits: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str, list[str], Path]:
    """`fsmem serve` on `root` with a token per client; every limit at its default but `workers` and `limits`."""
    from fsmem.server.tokens import TokenStore

    store_path = tmp / "tokens.json"
    store_path.unlink(missing_ok=True)
    store = TokenStore(store_path)
    tokens = [store.create(memory="bench", agent=f"bench-{n:02d}").token for n in range(clients)]
    log = tmp / "requests.jsonl"
    config = tmp / "server.yaml"
    asked = dict(limits or {}) | ({} if workers is None else {"workers": str(workers)})
    limits_yaml = "limits:\n" + "".join(f"  {name}: {value}\n" for name, value in asked.items()) if asked else ""
    config.write_text(
        f"memories:\n  bench: {root}\ntokens: {store_path}\nlog: {log}\nport: 0\n"
        + ("" if processes is None else f"processes: {processes}\n")
        + limits_yaml
    )
    proc, url = serve_until_listening(config, log)
    return proc, url, tokens, log


def server_pids(pid: int, log: Path) -> list[int]:
    """The server's processes: `pid`, and with `processes` above 1 its workers (the last started of each)."""
    workers: dict[int, int] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "worker started":
            workers[record["worker"]] = record["pid"]
    return [pid, *workers.values()]


def _cpu_of_all(pids: list[int]) -> tuple[float, float]:
    spent = [_cpu_of(pid) for pid in pids]
    return sum(own for own, _ in spent), sum(children for _, children in spent)


def tokens_per_worker(tokens: list[str], processes: int) -> tuple[list[int], list[str]]:
    """How many of `tokens` each server process serves, and one token of each (to warm them all)."""
    from fsmem.server.pinning import worker_for

    owners = [worker_for(token.encode(), processes) for token in tokens]
    return [owners.count(n) for n in range(processes)], [
        tokens[owners.index(n)] for n in range(processes) if n in owners
    ]


def calls_per_worker(log: Path, skip: int = 0) -> dict[int, int]:
    """Tool calls each server process answered, in the log's lines after the first `skip`."""
    counts: dict[int, int] = {}
    for line in log.read_text().splitlines()[skip:]:
        record = json.loads(line)
        if record.get("event") == "request" and record.get("tool"):
            counts[record.get("worker", 0)] = counts.get(record.get("worker", 0), 0) + 1
    return dict(sorted(counts.items()))


def server_timing(log: Path, skip: int = 0) -> dict[str, dict[str, float]]:
    """Per tool, from the server's log lines after the first `skip`: where its calls' time went in the server
    (`fsmem.server.handlers.Timing`): p50 and p99 of the wait for a thread of its lane (a cheap call's p99 says
    whether it ever waited behind costly ones), p50 of the run on it and of the run's own CPU (its rg apart), and
    the mean CPU, in ms."""
    by_tool: dict[str, list[dict]] = {}
    for line in log.read_text().splitlines()[skip:]:
        record = json.loads(line)
        if record.get("event") == "request" and record.get("tool") and record.get("run_ms") is not None:
            by_tool.setdefault(record["tool"], []).append(record)
    out = {}
    for tool, records in by_tool.items():
        p50 = lambda key: statistics.median(r[key] for r in records)  # noqa: B023, E731
        out[tool] = {
            "calls": len(records),
            "wait_p50_ms": p50("wait_ms"),
            "wait_p99_ms": percentile(sorted(r["wait_ms"] for r in records), 0.99),
            "run_p50_ms": p50("run_ms"),
            "cpu_p50_ms": p50("cpu_ms"),
            "cpu_mean_ms": statistics.fmean(r["cpu_ms"] for r in records),
        }
    return out


class Sampler(threading.Thread):
    """The server's VmRSS and RssAnon (KiB) every second, from /proc: summed over its processes."""

    def __init__(self, pids: list[int]):
        super().__init__(daemon=True)
        self.pids = pids
        self.samples: list[tuple[float, int, int]] = []
        self.stop = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self.stop.is_set():
            rss = anon = 0
            for pid in self.pids:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    return
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                rss += int(fields.get("VmRSS", "0 kB").split()[0])
                anon += int(fields.get("RssAnon", "0 kB").split()[0])
            self.samples.append((time.monotonic() - self.started_at, rss, anon))
            self.stop.wait(1.0)


def run_server(
    url: str,
    tokens: list[str],
    seconds: float,
    targets: list[str],
    phase: str = "server",
    tools_=MIX_TOOLS,
    unique: Unique | None = None,
    pids: list[int] | None = None,
    warm_tokens: list[str] | None = None,
    pace: dict[str, Pace] | None = None,
) -> dict:
    """`tokens` clients of `url` calling in a loop for `seconds` (after the warm-up of `warm_tokens`), each
    request paced to its token's rate (`pace`, made at the default limits unless given: a server of other
    limits needs its own)."""
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    records: list[tuple[str, float, bool, str | None]] = []
    failures: list[str] = []
    pace = pace if pace is not None else paces(tokens + (warm_tokens or []), ServerSettings().limits)

    def http_client(token: str):
        hooks = {"request": [pace[token]]}
        return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120, event_hooks=hooks)

    ready: list[int] = []
    go = anyio.Event()
    refused: dict[str, int] = {}

    async def answered(session, tool: str, arguments: dict):
        """The call's answer, asked again after each busy refusal (503) as its `retry_after` says: a client
        that acts on it; its latency counts from the first ask."""
        from mcp.shared.exceptions import MCPError

        while True:
            try:
                return await session.call_tool(tool, arguments)
            except MCPError as exc:
                if exc.code != BUSY or not isinstance(exc.data, dict):
                    raise
                refused[tool] = refused.get(tool, 0) + 1
                await anyio.sleep(exc.data["retry_after"])

    timed: dict[str, float] = {}

    async def client(number: int) -> None:
        plan = Plan(number, phase, targets, tools_, unique)
        try:
            async with http_client(tokens[number]) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        await session.list_tools()
                        ready.append(number)
                        if len(ready) == len(tokens):  # the clock starts once every session is open
                            timed["began"] = time.monotonic()
                            timed["cpu"] = (_cpu_of(os.getpid()), _cpu_of_all(pids) if pids else (0.0, 0.0))
                            go.set()
                        await go.wait()
                        deadline = timed["began"] + seconds
                        while time.monotonic() < deadline:
                            tool, arguments = plan.next()
                            started = time.perf_counter()
                            result = await answered(session, tool, arguments)
                            elapsed = time.perf_counter() - started
                            note = arguments.get("text") if tool == "note" else None
                            records.append((tool, elapsed, bool(result.is_error), note))
        except Exception as exc:  # a failed session is an error of the run, reported below
            failures.append(f"client {number}: {type(exc).__name__}: {exc}")
            ready.append(number)
            if len(ready) == len(tokens) and not go.is_set():
                timed["began"] = time.monotonic()
                timed["cpu"] = (_cpu_of(os.getpid()), _cpu_of_all(pids) if pids else (0.0, 0.0))
                go.set()

    async def warm(token: str) -> None:
        async with http_client(token) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    plan = Plan(0, "warm", targets, tools_)
                    for _ in tools_:
                        await session.call_tool(*plan.next())

    wall = {}

    async def main() -> None:
        for token in warm_tokens or tokens[:1]:  # one of each server process, whose caches open on first use
            await warm(token)
        async with anyio.create_task_group() as group:  # sessions opened (TLS contexts, handshakes) untimed
            for number in range(len(tokens)):
                group.start_soon(client, number)
        began, before = timed["began"], timed["cpu"]
        wall["seconds"] = time.monotonic() - began
        after = (_cpu_of(os.getpid()), _cpu_of_all(pids) if pids else (0.0, 0.0))
        wall["client_cpu"] = after[0][0] - before[0][0]
        wall["cpu"] = [b - a for a, b in zip(before[1], after[1], strict=True)]

    anyio.run(main)
    return {
        "records": records,
        "failures": failures,
        "refused": refused,
        "wall": wall["seconds"],
        "cpu": wall["cpu"],
        "client_cpu": wall["client_cpu"],
    }


# -- checks and the report ------------------------------------------------------------------------------


def lost_notes(root: Path, records: list[tuple[str, float, bool, str | None]]) -> int:
    """Notes a client was told were saved that are not in any session file."""
    saved = [note for tool, _, error, note in records if tool == "note" and not error and note]
    text = "".join(path.read_text() for path in (root / "sessions").rglob("bench-*.md"))
    return sum(1 for note in saved if note not in text)


def summary(records, tools_=TOOLS) -> dict[str, dict]:
    out = {}
    for tool in tools_:
        times = sorted(elapsed for name, elapsed, _, _ in records if name == tool)
        p50, p95 = percentiles(times)
        out[tool] = {
            "calls": len(times),
            "errors": sum(1 for name, _, error, _ in records if name == tool and error),
            "p50_ms": p50 * 1000,
            "p95_ms": p95 * 1000,
            "p99_ms": percentile(times, 0.99) * 1000,
        }
    return out


def rows_of(a: dict, b: dict) -> list[list[str]]:
    rows = []
    for tool in b:
        x, y = a.get(tool), b[tool]
        if x is None:  # no in-process phase
            rows.append(
                [
                    tool,
                    str(y["calls"]),
                    str(y["errors"]),
                    "",
                    f"{y['p50_ms']:.0f} / {y['p95_ms']:.0f} / {y['p99_ms']:.0f} ms",
                    "",
                ]
            )
            continue
        rows.append(
            [
                tool,
                f"{x['calls']} / {y['calls']}",
                f"{x['errors']} / {y['errors']}",
                f"{x['p50_ms']:.0f} / {x['p95_ms']:.0f} / {x['p99_ms']:.0f} ms",
                f"{y['p50_ms']:.0f} / {y['p95_ms']:.0f} / {y['p99_ms']:.0f} ms",
                f"{y['p50_ms'] / x['p50_ms']:.2f}x / {y['p95_ms'] / x['p95_ms']:.2f}x",
            ]
        )
    return rows


def rate(phase: dict) -> str:
    """Calls a second over the phase's wall time (its last calls end after the deadline)."""
    return f"{len(phase['records']) / phase['wall']:.1f} calls/s" if phase.get("wall") else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=int(os.environ.get("BENCH_SERVER_FILES", "10000")))
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_SERVER_SECONDS", "20")))
    parser.add_argument("--solo-seconds", type=float, default=10.0, help="one client alone first, for each side")
    parser.add_argument("--fairness-seconds", type=float, default=20.0, help="each half of the fairness scenario")
    parser.add_argument("--tools", default=MIX, help=f"the calls each client cycles through (default {MIX}; add note)")
    parser.add_argument("--only", choices=["fairness", "server", "limit"], help="run only this part")
    parser.add_argument("--no-fairness", action="store_true", help="skip the fair-sharing scenario")
    parser.add_argument("--no-limit", action="store_true", help="skip the unique mix's calls against the bare tools")
    parser.add_argument(
        "--limit-calls",
        type=int,
        default=96,
        help="calls of each kind in the limit part (default 96: the first 40 grep words are costlier than the later)",
    )
    parser.add_argument(
        "--mixes",
        default=os.environ.get("BENCH_SERVER_MIXES", "repeated,unique"),
        help="repeated: arguments from a few fixed queries and patterns; unique: no call's arguments twice",
    )
    parser.add_argument("--workers", type=int, help="the server's costly read workers (default: fsmem serve's)")
    parser.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server limit other than its default (repeatable), e.g. tool_timeout_seconds=3 to bring the overload "
        "of a larger memory to a smaller one; not the rate limits, which the clients pace themselves to",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=ServerSettings().processes,
        help="the server's processes (default: fsmem serve's, which the output says)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=os.environ.get("BENCH_SERVER_KEEP"),
        help="a folder outside the repository where the corpus and the warmed copy are made once and kept",
    )
    parser.add_argument("--py-spy", type=Path, help="record the server with py-spy (raw format) into this file")
    parser.add_argument(
        "--py-spy-gil",
        action="store_true",
        help="with --py-spy: sample only the thread holding the GIL (what the one Python thread at a time spends)",
    )
    args, _ = parser.parse_known_args()
    tools_ = tuple(t for t in args.tools.split(",") if t)
    unknown = set(tools_) - set(TOOLS)
    if unknown or not tools_:
        raise SystemExit(f"--tools takes some of {', '.join(TOOLS)}")
    mixes = [m for m in args.mixes.split(",") if m]
    if not mixes or set(mixes) - {"repeated", "unique"}:
        raise SystemExit("--mixes takes repeated, unique or both")
    compiled()
    keep = Path(args.keep).resolve() if args.keep else None
    if keep is not None and keep.is_relative_to(Path(__file__).resolve().parent.parent):
        raise SystemExit("--keep must name a folder outside the repository")
    root = prepare(args.files, args.clients, keep)
    targets = read_targets(root)
    tmp = OUT / "server-run"
    tmp.mkdir(parents=True, exist_ok=True)
    if args.only == "fairness":
        return 0 if report_fairness(root, tmp, args, targets) else 1
    if args.only == "limit":
        report_limit(root, tmp, args, tools_, targets)
        return 0
    results, ok = {}, True
    for mix in mixes:
        result, fine = measure(root, tmp, args, tools_, targets, mix)
        results[mix] = result
        ok = ok and fine
    print("\n" + table(f"issue #20's server target, {args.files} files; {load()}", *target_rows(results)))
    if "unique" in mixes and not args.no_limit and args.only != "server":
        report_limit(root, tmp, args, tools_, targets)
    fair_ok = True if args.no_fairness or args.only == "server" else report_fairness(root, tmp, args, targets)
    (tmp / "result.json").write_text(json.dumps(results, indent=1))
    ok = ok and fair_ok
    print("\nOK" if ok else "\nFAILED: errors, lost notes, failed sessions, an unclean stop or unfairness (above)")
    return 0 if ok else 1


def server_limits(given: list[str]) -> dict[str, str]:
    """`--limit NAME=VALUE` options as a mapping, checked against the server's limits (not its rate limits)."""
    limits = {}
    for item in given:
        name, _, value = item.partition("=")
        if name not in Limits.__dataclass_fields__ or name in ("rate_per_second", "burst") or not value:
            raise SystemExit(f"--limit takes NAME=VALUE, NAME a server limit but the rate limits, not {item!r}")
        limits[name] = value
    return limits


def target_rows(results: dict[str, dict]) -> tuple[list[str], list[list[str]]]:
    """One row per mix: calls a second beside the in-process limit, search p99, errors, CPU per call."""
    header = [
        "mix (server processes)",
        "server calls/s",
        "in-process calls/s (the limit)",
        "server / in-process",
        "search p99",
        "errors",
        "CPU per call: server (rg) / clients / in-process (rg)",
    ]
    rows = []
    for mix, r in results.items():
        server, inproc = r["server_calls_per_second"], r["in_process_calls_per_second"]
        ratio = f"{server / inproc:.2f}x" if server and inproc else ""
        rows.append(
            [
                f"{MIX_LABELS.get(mix, mix)} ({r.get('processes', 1)})",
                f"{server:.1f}" if server else "",
                f"{inproc:.1f}" if inproc else "",
                ratio,
                f"{r['server']['search']['p99_ms']:.0f} ms" if "search" in r["server"] else "",
                str(r["errors"]),
                r["cpu_per_call"],
            ]
        )
    return header, rows


def measure(root: Path, tmp: Path, args, tools_: tuple[str, ...], targets: list[str], mix: str) -> tuple[dict, bool]:
    """One mix in-process and through a new server; its tables printed, its figures returned."""
    every_file = read_targets(root, 10**9) if mix == "unique" else []  # reads of files not read yet
    fresh = (lambda: Unique(every_file, root=root)) if mix == "unique" else (lambda: None)
    print(
        f"\n{mix} mix: {args.clients} clients ({', '.join(tools_)}), {args.seconds:g} s, {args.files} files; {load()}",
        flush=True,
    )
    empty = {"records": [], "wall": 0.0, "cpu": [0.0, 0.0]}
    inproc_solo, inproc = empty, empty
    if args.only != "server":
        inproc_solo = run_in_process(root, 1, args.solo_seconds, targets, "inproc-solo", tools_, fresh())
        inproc = run_in_process(root, args.clients, args.seconds, targets, "inproc", tools_, fresh())
        print(f"in-process phase done ({rate(inproc)}); {load()}", flush=True)

    asked = None if args.processes == ServerSettings().processes else args.processes  # the default unsaid
    proc, url, tokens, log = start_server(root, args.clients, tmp, args.workers, asked, server_limits(args.limit))
    pids = server_pids(proc.pid, log)
    default = "fsmem serve's default" if args.processes == ServerSettings().processes else "--processes"
    pinned = tokens_per_worker(tokens, args.processes)
    from fsmem.server.settings import usable_cores  # here: bench_mix_cpu imports this module beside an older fsmem

    print(
        f"server processes: {args.processes} ({default}; {usable_cores()} usable cores here); "
        f"clients per process (each token pinned to one): {pinned[0]}",
        flush=True,
    )
    sampler = Sampler(pids)
    sampler.start()
    spy = None
    pace = paces(tokens, ServerSettings().limits)  # the server's limits are the defaults: one bucket per token
    try:
        served_solo = run_server(
            url, tokens[:1], args.solo_seconds, targets, "server-solo", tools_, fresh(), None, pinned[1], pace
        )
        if args.py_spy:
            spy = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(proc.pid)]
                + ["-r", "200" if args.py_spy_gil else "40"]
                + ["-d", str(int(args.seconds)), "-f", "raw", "-o", f"{args.py_spy}.{mix}", "--threads"]
                + (["--gil"] if args.py_spy_gil else ["--idle"])
                + (["--subprocesses"] if args.processes > 1 else []),
                stdout=subprocess.DEVNULL,
            )
        solo_lines = len(log.read_text().splitlines())
        served = run_server(url, tokens, args.seconds, targets, "server", tools_, fresh(), pids, pinned[1], pace)
    finally:
        sampler.stop.set()
        if spy is not None:
            spy.wait(60)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
    print(f"server phase done ({rate(served)}, exit {code}); {load()}", flush=True)

    header = [
        "tool",
        "calls in-process / server",
        "errors",
        "in-process p50 / p95 / p99",
        "server p50 / p95 / p99",
        "ratio p50 / p95",
    ]
    a1, b1 = summary(inproc_solo["records"], tools_), summary(served_solo["records"], tools_)
    if args.only == "server":
        a1 = {}
    print(table(f"one client for {args.solo_seconds:g} s on {args.files} files", header, rows_of(a1, b1)))
    a, b = summary(inproc["records"], tools_), summary(served["records"], tools_)
    if args.only == "server":
        a = {}
    title = (
        f"{args.clients} clients for {args.seconds:g} s on {args.files} files ({mix} mix): "
        f"in-process {rate(inproc)}, server {rate(served)}"
    )
    print(table(title, header, rows_of(a, b)))
    every = inproc_solo["records"] + inproc["records"], served_solo["records"] + served["records"]
    lost = (lost_notes(root, every[0]), lost_notes(root, every[1]))
    statuses: dict[int, int] = {}
    reasons: dict[str, int] = {}  # why a request was refused (the busy backlog) or cut short (a tool timeout)
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "request":
            statuses[record["status"]] = statuses.get(record["status"], 0) + 1
            if record.get("reason"):
                reasons[record["reason"]] = reasons.get(record["reason"], 0) + 1
    timing = server_timing(log, solo_lines)
    if timing:
        print(
            table(
                "where a call's time went in the server (its log: wait for a thread of its lane, run on it, "
                "the run's own CPU, rg apart)",
                ["tool", "calls", "wait p50", "wait p99", "run p50", "CPU p50", "CPU mean"],
                [
                    [tool, str(t["calls"])]
                    + [
                        f"{t[key]:.0f} ms"
                        for key in ("wait_p50_ms", "wait_p99_ms", "run_p50_ms", "cpu_p50_ms", "cpu_mean_ms")
                    ]
                    for tool, t in timing.items()
                ],
            )
        )
    samples = sampler.samples
    mib = lambda kib: f"{kib / 1024:.0f} MiB"  # noqa: E731
    n_server, n_inproc = len(served["records"]) or 1, len(inproc["records"]) or 1
    cpu = (
        f"{served['cpu'][0] / n_server * 1000:.1f} ({served['cpu'][1] / n_server * 1000:.1f}) / "
        f"{served['client_cpu'] / n_server * 1000:.1f} / "
        f"{inproc['cpu'][0] / n_inproc * 1000:.1f} ({inproc['cpu'][1] / n_inproc * 1000:.1f}) ms"
    )
    print(f"CPU per call, server (its rg) / the benchmark's clients / in-process (its rg): {cpu}")
    if served["wall"]:  # what the machine gave each side: one process's Python runs on at most about one core
        print(
            f"cores used (CPU seconds / wall seconds): server {sum(served['cpu']) / served['wall']:.2f}, "
            f"clients {served['client_cpu'] / served['wall']:.2f}"
        )
    print(f"notes lost: {lost[0]} in-process, {lost[1]} through the server")
    print(f"server sessions that failed: {len(served['failures'])} {served['failures'][:3]}")
    print(f"calls refused as busy and asked again after their retry_after: {served['refused']}")
    print(f"HTTP statuses in the server's log: {dict(sorted(statuses.items()))}; reasons: {reasons}")
    if args.processes > 1:
        print(
            f"tool calls per worker, {args.clients} clients (each token pinned to one): {calls_per_worker(log, solo_lines)}"
        )
    if samples:
        print(
            f"server memory (VmRSS, anonymous part): highest {mib(max(s[1] for s in samples))} "
            f"({mib(max(s[2] for s in samples))}), at the end {mib(samples[-1][1])} ({mib(samples[-1][2])})"
        )
    errors = sum(t["errors"] for part in (a, b, a1, b1) for t in part.values())
    failures = served["failures"] + served_solo["failures"]
    result = {
        "clients": args.clients,
        "seconds": args.seconds,
        "files": args.files,
        "tools": tools_,
        "mix": mix,
        "in_process": a,
        "server": b,
        "in_process_calls_per_second": len(inproc["records"]) / inproc["wall"] if inproc["wall"] else None,
        "server_calls_per_second": len(served["records"]) / served["wall"] if served["wall"] else None,
        "in_process_one_client": a1,
        "server_one_client": b1,
        "server_timing": timing,
        "cpu_per_call": cpu,
        "server_cores": sum(served["cpu"]) / served["wall"] if served["wall"] else None,
        "processes": args.processes,
        "errors": errors + len(failures),
        "lost_notes": lost,
        "failures": served["failures"],
        "refused_busy": served["refused"],
        "statuses": statuses,
        "reasons": reasons,
        "memory_kib": samples,
        "server_exit": code,
    }
    return result, not errors and not any(lost) and not failures and code == 0


def mix_calls(
    root: Path, targets: list[str], tools_: tuple[str, ...], clients: int, each: int
) -> list[tuple[str, dict]]:
    """The unique mix's first calls, `each` of every tool: what `clients` clients in step draw, in that order
    (the draws of a phase's `Unique`, as `measure` makes it)."""
    unique = Unique(read_targets(root, 10**9), root=root)
    plans = [Plan(n, "limit", targets, tools_, unique) for n in range(clients)]
    calls: list[tuple[str, dict]] = []
    counts = dict.fromkeys(tools_, 0)
    while min(counts.values()) < each:
        for plan in plans:
            tool, arguments = plan.next()
            if counts[tool] < each:
                counts[tool] += 1
                calls.append((tool, arguments))
    return calls


def report_limit(root: Path, tmp: Path, args, tools_: tuple[str, ...], targets: list[str]) -> dict:
    """The unique mix's calls by fsmem and by the bare tools, one at a time (`mix_limit`); printed, kept in
    limit.json."""
    kinds = tuple(t for t in tools_ if t in mix_limit.SIDES)
    print(f"\nthe unique mix's limit: {args.limit_calls} calls of each of {', '.join(kinds)}; {load()}", flush=True)
    warm = Plan(0, "warm", targets, kinds)  # as the in-process phase warms up: one call of each tool
    calls = mix_calls(root, targets, kinds, args.clients, args.limit_calls)
    result = mix_limit.measure(root, calls, [warm.next() for _ in kinds])
    for title, header, rows in mix_limit.tables(result, args.files):
        print(table(title, header, rows))
    print(load())
    (tmp / "limit.json").write_text(json.dumps(result, indent=1))
    return result


# The delay one token may add to another's calls under the default limits, at p95 and at worst. Measured on
# 10k files, two cores: 97 / 492 ms (busy with other work: 539 / 581 ms); before the bounds, 781 / 2270 ms.
FAIR_BOUND_MS = 1000.0
FAIR_WORST_MS = 1500.0


def report_fairness(root: Path, tmp: Path, args, targets: list[str]) -> bool:
    """Run the fairness scenario, print it, keep it in fairness.json; True when within the bounds."""
    print(f"fairness: {args.fairness_seconds:g} s alone, {args.fairness_seconds:g} s beside a heavy token; {load()}")
    result = fairness.run(root, tmp, args.fairness_seconds, targets)
    header = ["", "calls", "p50", "p95", "worst"]
    print(table(f"fair sharing on {args.files} files, default limits", header, fairness.rows(result)))
    print(f"heavy token's answers: {dict(sorted(result['heavy'].items()))}")
    added_p95, added_max = result["added_p95_ms"], result["added_max_ms"]
    print(f"delay the heavy token added to the light one: {added_p95:.0f} ms at p95, {added_max:.0f} ms at worst")
    (tmp / "fairness.json").write_text(json.dumps(result, indent=1))
    ok = added_p95 <= FAIR_BOUND_MS and added_max <= FAIR_WORST_MS and result["light_errors"] == 0
    bound = f"{FAIR_BOUND_MS:.0f} ms at p95, {FAIR_WORST_MS:.0f} ms at worst"
    print(f"bound: {bound}: {'held' if ok else 'NOT held'}; {load()}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
