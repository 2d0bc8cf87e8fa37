"""The stand-in distiller of bench_locomo_distill.py, run by `fsmem distill --command`: for the LoCoMo session an
episode holds, it answers LoCoMo's own per-session `observation` lists (human-written facts, each citing its
evidence turns), as observation bullets under each speaker.

    python benchmarks/locomo_observations.py ../shared/data/locomo10.json < what fsmem distill sends
"""

from __future__ import annotations

import json
import re
import sys


def main(data: str) -> int:
    said = sys.stdin.read()
    head = re.search(r"^Episode sessions/\S*/(?P<sample>[^/\s]+)-s(?P<number>\d+)\.md ", said, re.M)
    if head is None:
        sys.stderr.write("no LoCoMo episode named on stdin\n")
        return 2
    samples = {str(s["sample_id"]): s for s in json.load(open(data, encoding="utf-8"))}
    observed = samples[head.group("sample")].get("observation", {}).get(f"session_{head.group('number')}_observation")
    out = []
    for speaker, facts in (observed or {}).items():
        if not facts:  # a speaker LoCoMo observed nothing of: no heading without a bullet
            continue
        out.append(f"## people/{speaker}")
        for text, evidence in facts:
            ids = evidence if isinstance(evidence, list) else [evidence]
            cited = " ".join(f"[{i.strip()}]" for i in ids if isinstance(i, str) and i.strip())
            out.append(f"- {' '.join(str(text).split())} {cited}".rstrip())
        out.append("")
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
