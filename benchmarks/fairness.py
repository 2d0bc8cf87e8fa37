"""Fair sharing on `fsmem serve`: a heavy token hammering, a light token's calls timed, the server's defaults.

    python benchmarks/bench_server.py --only fairness [--fairness-seconds 30]

One server with its default limits (8 reader threads, 4 requests in flight and
10 a second per token, 30 s per read tool) on the seeded corpus. First the
light token alone: reads of seeded files and small searches, one at a time,
each timed. Then the same while a heavy token runs eight clients at once, as
many as its limits let through (a 429 is waited out as Retry-After says), each
sending the costliest calls there are: the searches of the report (20,000
distinct words), searches of the memory's 100 commonest words (every row
matches), and 900-character regular expressions of bounded repeats. Reported:
the light token's p50, p95 and worst latency alone and beside the heavy one,
the added delay at p95 and at worst (bench_server.py holds it under 1 s and
1.5 s), and what the heavy token was answered.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from pathlib import Path

from common import serve_until_listening

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HEAVY_CLIENTS = 8


def _call(name: str, arguments: dict, number: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return json.dumps(message).encode()


def _start(root: Path, tmp: Path) -> tuple[subprocess.Popen, str, str, str]:
    from fsmem.server.tokens import TokenStore

    store_path = tmp / "fair-tokens.json"
    store_path.unlink(missing_ok=True)
    store = TokenStore(store_path)
    heavy = store.create(memory="bench", agent="bench-00").token
    light = store.create(memory="bench", agent="bench-01").token
    log = tmp / "fair-requests.jsonl"
    config = tmp / "fair-server.yaml"
    config.write_text(f"memories:\n  bench: {root}\ntokens: {store_path}\nlog: {log}\nport: 0\n")
    proc, url = serve_until_listening(config, log)
    return proc, url, heavy, light


def heavy_calls(root: Path) -> list[tuple[str, dict]]:
    from fsmem import Memory

    memory = Memory(root)
    memory.search("warm the index")
    common = memory.search_index.reading(
        lambda conn: [t for (t,) in conn.execute("SELECT term FROM search_vocab ORDER BY doc DESC LIMIT 100")]
    )
    rng = random.Random(5)
    letters = "bcdfghjklmnpqrstvwxz"
    words = [a + b + c + d for a in letters for b in "aeiou" for c in letters for d in "aeiou"]
    report = " ".join(rng.sample(words, 10_000) + [f"w{n}" for n in range(10_000)])
    return [
        ("search", {"query": report}),
        ("search", {"query": " ".join(common)}),
        ("grep", {"pattern": "(a|b|c)*x{1,50}" * 60}),
        ("search", {"query": " ".join(reversed(common))}),
    ]


def light_calls(targets: list[str]) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = [("read", {"path": path, "lines": "1:40"}) for path in targets[:40]]
    calls += [("search", {"query": q}) for q in ("Priya Patel employer", "renewal date", "proration")]
    return calls


def _timed(http, url: str, token: str, calls: list[tuple[str, dict]], deadline: float, out: list, stop=None):
    number = 0
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        name, arguments = calls[number % len(calls)]
        number += 1
        started = time.perf_counter()
        answer = http.post(url, content=_call(name, arguments, number), headers={"Authorization": f"Bearer {token}"})
        elapsed = time.perf_counter() - started
        if answer.status_code == 429:
            out.append((name, elapsed, 429, False))
            time.sleep(float(answer.headers.get("retry-after", "1")))
            continue
        error = answer.status_code != 200 or bool(answer.json().get("result", {}).get("isError"))
        out.append((name, elapsed, answer.status_code, error))


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"calls": 0, "p50_ms": float("nan"), "p95_ms": float("nan"), "max_ms": float("nan")}
    pick = lambda q: ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]  # noqa: E731
    return {
        "calls": len(ordered),
        "p50_ms": pick(0.5) * 1000,
        "p95_ms": pick(0.95) * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def run(root: Path, tmp: Path, seconds: float, targets: list[str]) -> dict:
    """The light token's latency alone and beside the heavy token; what the heavy token was answered."""
    import httpx2

    heavy_plan, light_plan = heavy_calls(root), light_calls(targets)
    proc, url, heavy, light = _start(root, tmp)
    try:
        with httpx2.Client(headers=HEADERS, timeout=120) as http:
            warm: list = []
            _timed(http, url, light, light_plan, time.monotonic() + 3, warm)
            alone: list = []
            _timed(http, url, light, light_plan, time.monotonic() + seconds, alone)
        heavy_out: list = []
        beside: list = []
        stop = threading.Event()
        deadline = time.monotonic() + seconds + 5

        def hammer(offset: int) -> None:
            with httpx2.Client(headers=HEADERS, timeout=120) as own:
                plan = heavy_plan[offset % len(heavy_plan) :] + heavy_plan[: offset % len(heavy_plan)]
                _timed(own, url, heavy, plan, deadline, heavy_out, stop)

        workers = [threading.Thread(target=hammer, args=(n,), daemon=True) for n in range(HEAVY_CLIENTS)]
        for worker in workers:
            worker.start()
        time.sleep(3)  # the heavy calls are running
        with httpx2.Client(headers=HEADERS, timeout=120) as http:
            _timed(http, url, light, light_plan, time.monotonic() + seconds, beside)
        stop.set()
        for worker in workers:
            worker.join(150)
    finally:
        proc.terminate()
        proc.wait(120)
    result = {
        "alone": _stats([e for _, e, status, _ in alone if status == 200]),
        "beside_heavy": _stats([e for _, e, status, _ in beside if status == 200]),
        "light_errors": sum(1 for *_, error in alone + beside if error),
        "heavy": {},
    }
    for name, _elapsed, status, error in heavy_out:
        key = f"{name} {status}{' isError' if error and status == 200 else ''}"
        result["heavy"][key] = result["heavy"].get(key, 0) + 1
    heavy_times = [e for _, e, status, error in heavy_out if status == 200 and not error]
    result["heavy_answered"] = _stats(heavy_times)
    a, b = result["alone"], result["beside_heavy"]
    result["added_p95_ms"] = b["p95_ms"] - a["p95_ms"]
    result["added_max_ms"] = b["max_ms"] - a["max_ms"]
    return result


def rows(result: dict) -> list[list[str]]:
    out = []
    for label, key in (("light token alone", "alone"), ("light token beside the heavy one", "beside_heavy")):
        s = result[key]
        out.append([label, str(s["calls"]), f"{s['p50_ms']:.0f} ms", f"{s['p95_ms']:.0f} ms", f"{s['max_ms']:.0f} ms"])
    h = result["heavy_answered"]
    out.append(["heavy token's answered calls", str(h["calls"]), f"{h['p50_ms']:.0f} ms", f"{h['p95_ms']:.0f} ms", f"{h['max_ms']:.0f} ms"])  # fmt: skip
    return out
