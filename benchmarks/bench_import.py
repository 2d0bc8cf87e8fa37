"""`fsmem import chatgpt` of a large generated export: peak memory against the file's size, and throughput.

A ChatGPT-shaped `conversations.json` (conversations of 40 messages in a `mapping` tree, as the export
writes them) is generated under bench-out/import/, then imported into a fresh memory by a child
process whose peak RSS is read from `os.wait4`. The baseline is `json.load` of the same file in a child
of its own: its peak RSS grows with the file, the import's must not. Both also run on a small export
(--import-small-mb), so the two peaks show whether memory is bounded; the script exits 1 if the large
import's peak exceeds the small one's by more than BOUND_MB. json.load runs on the large file only up
to --json-max-mb (it needs several times the file in memory), else on the small one alone.

    python benchmarks/bench_import.py [--import-mb 300] [--import-small-mb 30] [--json-max-mb 400]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, fsmem_bin, load, table

BOUND_MB = 64  # what the large import's peak RSS may exceed the small one's by
WORDS = "alpha beta gamma delta memory billing atlas launch proration Lisbon café migration".split()


def conversation(number: int, rng: random.Random) -> dict:
    """One conversation as the ChatGPT export writes it: a root, a hidden system message, 40 turns."""
    start = 1_700_000_000 + number * 600
    mapping: dict = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for turn in range(40):
        nid = f"{number}-{turn}"
        role = "system" if turn == 0 else ("user" if turn % 2 else "assistant")
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
        mapping[nid] = {
            "id": nid,
            "parent": parent,
            "children": [],
            "message": {
                "id": nid,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": start + turn,
                "update_time": None,
                "content": {"content_type": "text", "parts": ["" if role == "system" else text]},
                "status": "finished_successfully",
                "end_turn": True,
                "weight": 1.0,
                "metadata": {"model_slug": "gpt-4o", "finish_details": {"type": "stop"}, "citations": []},
                "recipient": "all",
            },
        }
        mapping[parent]["children"].append(nid)
        parent = nid
    return {
        "title": f"Conversation {number}",
        "create_time": start,
        "update_time": start + 40,
        "mapping": mapping,
        "current_node": parent,
        "conversation_id": f"bench-{number:07d}",
        "id": f"bench-{number:07d}",
    }


def export(megabytes: int) -> tuple[Path, int]:
    """The generated export of about `megabytes` MB (kept between runs), and how many conversations it holds."""
    folder = OUT / "import"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"conversations-{megabytes}mb.json"
    count_file = path.with_suffix(".count")
    if path.exists() and count_file.exists():
        return path, int(count_file.read_text())
    rng = random.Random(megabytes)
    target = megabytes * 1_000_000
    count = 0
    with open(path, "w", encoding="utf-8") as out:  # written one conversation at a time: bounded too
        out.write("[")
        while out.tell() < target:
            out.write(",\n" if count else "\n")
            json.dump(conversation(count, rng), out, ensure_ascii=False)
            count += 1
        out.write("\n]\n")
    count_file.write_text(str(count))
    return path, count


def measured(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit code of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.stderr.write(child.stderr.read().decode(errors="replace") if child.stderr else "")
    peak = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / (1 << 20)
    return elapsed, peak, child.returncode


def import_run(path: Path) -> tuple[float, float, int]:
    memory = OUT / "import" / f"memory-{path.stem}"
    shutil.rmtree(memory, ignore_errors=True)
    subprocess.run([fsmem_bin(), "init", str(memory)], check=True, capture_output=True)
    return measured([fsmem_bin(), "--root", str(memory), "import", "chatgpt", str(path)], cwd=OUT)


def json_run(path: Path) -> tuple[float, float, int]:
    probe = "import json, sys\nwith open(sys.argv[1], encoding='utf-8') as f:\n    json.load(f)\n"
    return measured([sys.executable, "-c", probe, str(path)], cwd=OUT)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--import-mb", type=int, default=int(os.environ.get("BENCH_IMPORT_MB", "300")))
    parser.add_argument("--import-small-mb", type=int, default=30)
    parser.add_argument("--json-max-mb", type=int, default=400)
    args, _ = parser.parse_known_args(argv)
    rows = []
    peaks = {}
    for megabytes in sorted({args.import_small_mb, args.import_mb}):
        path, count = export(megabytes)
        size = path.stat().st_size / 1e6
        seconds, peak, code = import_run(path)
        if code != 0:
            print(f"fsmem import failed on {path} (exit {code})", file=sys.stderr)
            return 1
        peaks[megabytes] = peak
        row = [
            f"{size:.0f}",
            str(count),
            f"{seconds:.1f}",
            f"{size / seconds:.1f}",
            f"{peak:.0f}",
            f"{peak / size:.2f}",
        ]
        if megabytes <= args.json_max_mb:
            j_seconds, j_peak, j_code = json_run(path)
            row += [f"{j_seconds:.1f}", f"{size / j_seconds:.1f}", f"{j_peak:.0f}", f"{seconds / j_seconds:.1f}x"]
        else:
            row += ["-", "-", "-", "-"]
        rows.append(row)
    print(
        table(
            f"fsmem import chatgpt: peak RSS against file size, and throughput, against json.load ({load()})",
            [
                "file MB",
                "conversations",
                "import s",
                "import MB/s",
                "import peak RSS MB",
                "RSS/file",
                "json.load s",
                "json.load MB/s",
                "json.load peak RSS MB",
                "import/json.load time",
            ],
            rows,
        )
    )
    small, large = peaks[min(peaks)], peaks[max(peaks)]
    bounded = large <= small + BOUND_MB
    print(
        f"\nbounded memory: the {max(peaks)} MB import peaked at {large:.0f} MB RSS, the {min(peaks)} MB one at "
        f"{small:.0f} MB: {'yes' if bounded else 'NO'} (allowed: {BOUND_MB} MB more)"
    )
    print(
        "the import reads the file twice (checked whole before anything is written) and writes one note per conversation"
    )
    return 0 if bounded else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
