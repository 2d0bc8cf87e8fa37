"""The server's own cost of one call: `fsmem serve`'s CPU per cheap tool call, beside the same call in-process.

    python benchmarks/bench_server_call.py [--calls 2000] [--clients 1] [--root DIR]

One token; each client posts `tools/call` of a cheap read (a kept `read` of a
small file, a 5-row `ls`) over one keep-alive HTTP connection of the
standard library's `http.client`, one call after the other, and the server's
CPU (user and system, from /proc) is divided by the calls. The same calls
through `fsmem.agents.tools.call` in this process give the tool's own CPU;
the difference is what HTTP, the door, MCP and the thread hand-off cost a
call. With no other client the server's threads do not wait for the GIL, so
the figure is steadier under load than calls a second (the 32-client mix of
`bench_server.py` is what the issue's target is about). Without `--root`, a
memory of 200 seeded files under `bench-out/`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench_server import _cpu_of
from common import OUT, corpus, load, serve_until_listening, table


def post(conn: http.client.HTTPConnection, path: str, token: str, body: bytes) -> dict:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    conn.request("POST", path, body=body, headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise SystemExit(f"the server answered {answer.status}: {data[:200]!r}")
    return json.loads(data)


def calls_of(root: Path) -> dict[str, dict]:
    target = next(p for p in sorted((root / "topics").glob("*.md")))
    return {
        "read": {"path": str(target.relative_to(root))},
        "ls": {"path": "topics", "max_results": 5},
    }


def through_server(url: str, token: str, tool: str, arguments: dict, calls: int, clients: int, pid: int) -> float:
    """The server's CPU seconds per call."""
    parts = urlsplit(url)
    bodies = [
        json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        ).encode()
        for n in range(calls)
    ]

    def client(share: list[bytes]) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        for body in share:
            answer = post(conn, parts.path, token, body)
            if answer.get("result", {}).get("isError"):
                raise SystemExit(f"{tool} failed: {answer}")
        conn.close()

    client(bodies[:20])  # warm: the token's view of the memory, the kept answer
    before = _cpu_of(pid)[0]
    threads = [threading.Thread(target=client, args=(bodies[n::clients],)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (_cpu_of(pid)[0] - before) / calls


def in_process(root: Path, tool: str, arguments: dict, calls: int) -> float:
    """This process's CPU seconds per call of the same tool through the agents' dispatcher."""
    from fsmem.agents import tools
    from fsmem.memory import Memory

    memory = Memory(root, agent="bench-00")
    for _ in range(20):
        tools.call(memory, tool, arguments)
    started = time.process_time()
    for _ in range(calls):
        tools.call(memory, tool, arguments)
    return (time.process_time() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=1, help="connections posting at once")
    parser.add_argument("--root", type=Path, help="a memory to serve (default: 200 seeded files)")
    parser.add_argument("--py-spy", type=Path, help="record the server's thread holding the GIL into FILE.TOOL (raw)")
    args = parser.parse_args()
    if args.root is None:
        root = OUT / "server-call"
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(corpus(200), root, symlinks=True)
    else:
        root = args.root.resolve()
    config_text = (root / "fsmem.yaml").read_text()
    if "bench-00" not in config_text:
        (root / "fsmem.yaml").write_text(config_text + "budgets:\n  agents:\n    bench-00: {}\n")
    tmp = OUT / "server-call-run"
    tmp.mkdir(parents=True, exist_ok=True)
    from fsmem.server.tokens import TokenStore

    store_path = tmp / "tokens.json"
    store_path.unlink(missing_ok=True)
    token = TokenStore(store_path).create(memory="bench", agent="bench-00").token
    log = tmp / "requests.jsonl"
    config = tmp / "server.yaml"
    config.write_text(
        f"memories:\n  bench: {root}\ntokens: {store_path}\nlog: {log}\nport: 0\n"
        "limits:\n  rate_per_second: 100000\n  burst: 100000\n"
    )
    print(f"{args.calls} calls, {args.clients} client(s), {root}; {load()}", flush=True)
    rows = []
    proc, url = serve_until_listening(config, log)
    try:
        for tool, arguments in calls_of(root).items():
            spy = None
            if args.py_spy:
                spy = subprocess.Popen(
                    [str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(proc.pid), "-r", "500"]
                    + ["-f", "raw", "-o", f"{args.py_spy}.{tool}", "--threads", "--gil"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            served = through_server(url, token, tool, arguments, args.calls, args.clients, proc.pid)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
            local = in_process(root, tool, arguments, args.calls)
            rows.append(
                [tool, f"{served * 1000:.2f} ms", f"{local * 1000:.2f} ms", f"{(served - local) * 1000:.2f} ms"]
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    header = ["tool", "server CPU per call", "in-process CPU per call", "the server's own"]
    print(table(f"CPU per call; {load()}", header, rows))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
