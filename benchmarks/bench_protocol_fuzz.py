"""The protocol fuzzer, long: every kind of message sent to a real `fsmem mcp` and a real `fsmem serve`.

    python benchmarks/bench_protocol_fuzz.py [--examples 100] [--seed N]

The run of tests/test_protocol_fuzz.py with more examples (tests/protocol_fuzz.py
draws them: random JSON, wrong types, lone surrogates, batches, deep nesting,
huge strings within the body limit, unknown and known methods, notifications,
params as a list, malformed text, and a `tools/call` of every tool with
arbitrary arguments). Every message must get one well-formed answer (none for
a notification) or a documented refusal, and both servers stay up; it prints
what it tried per kind of message and face, and how each kind was answered.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from common import OUT, REPO, load, table

sys.path.insert(0, str(REPO / "tests"))
from protocol_faces import Http, Stdio  # noqa: E402
from protocol_fuzz import Tally, run  # noqa: E402
from test_tools import build_memory  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="draws of one message of every kind")
    parser.add_argument("--seed", type=int, default=None, help="derandomise (the same draws every run)")
    args, _ = parser.parse_known_args()
    before = load()
    work = OUT / "protocol-fuzz"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = build_memory(work)
    faces = [Stdio(root), Http(root, work)]
    tally = Tally()
    started = time.monotonic()
    fault = None
    try:
        run(faces, args.examples, tally, args.seed)
    except AssertionError as exc:
        fault = exc
    finally:
        codes = [face.stop() for face in reversed(faces)]
    seconds = time.monotonic() - started
    names = [face.name for face in faces]
    print(f"({before} before, {load()} after; {args.examples} examples in {seconds:.0f} s)")
    print(table("messages tried, per kind and face", ["kind", *names, "answers (both faces)"], tally.rows(names)))
    print(f"\n{sum(tally.tried.values())} messages; servers exited {codes} (0: stopped cleanly)")
    missing = tally.missing(names)
    if fault is not None or missing or codes != [0, 0]:
        print(f"FAULT: {fault!s:.2000}" if fault is not None else f"not tried: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
