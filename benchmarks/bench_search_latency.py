"""Search latency: a cold search (index built from the files), a warm one, and one after a single edit,
as ratios against `fsmem grep` on the same memory in the same run.

    .venv/bin/python benchmarks/bench_search_latency.py [--data ../shared/data/locomo10.json]

The memory is all ten LoCoMo conversations imported and consolidated side by side (about 5,900 rows).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10.json"
QUERIES = ["support group", "adoption agencies", "pottery class", "camping trip with the kids", "marathon training"]


def timed(function, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (see ../shared/data/README.md)")
        return 0
    from fsmem import Memory
    from fsmem.evaluation.locomo import import_locomo

    with tempfile.TemporaryDirectory() as tmp:
        imported = import_locomo(args.data, Path(tmp) / "parts")
        root = Path(tmp) / "all"
        Memory.init(root)
        for part in imported.memories:  # the consolidated speaker files (one folder per conversation) and the notes
            shutil.copytree(Path(part) / "sessions", root / "sessions", dirs_exist_ok=True)
            shutil.copytree(Path(part) / "entities" / "people", root / "entities" / Path(part).name)
        memory = Memory(root)

        def cold():
            shutil.rmtree(root / ".fsmem", ignore_errors=True)
            Memory(root).search(QUERIES[0], max_results=20)

        cold_ms = timed(cold, repeat=3)
        memory.search(QUERIES[0])
        warm_ms = statistics.median(timed(lambda q=q: memory.search(q, max_results=20)) for q in QUERIES)
        process_ms = timed(
            lambda: Memory(root).search(QUERIES[1], max_results=20)
        )  # a new process's Memory, cache on disk
        note = next(root.rglob("*.md"))

        def after_edit():
            note.write_text(note.read_text() + "\n- walrus sighting\n")
            memory.search("walrus", max_results=20)

        edit_ms = timed(after_edit)
        grep_ms = statistics.median(
            timed(lambda q=q: memory.grep(q, ignore_case=True, max_results=20)) for q in QUERIES
        )
        rows = memory.search_index.guarded(
            lambda conn: conn.execute("SELECT value FROM search_meta WHERE key = 'rows'").fetchone()[0]
        )
        files = len(list(root.rglob("*.md")))
    print(f"memory: {rows} rows in {files} files")
    print(f"{'case':<34} {'ms':>8} {'x grep':>8}")
    for name, value in (
        ("grep (baseline)", grep_ms),
        ("search, warm (same Memory)", warm_ms),
        ("search, new Memory, cache on disk", process_ms),
        ("search after one edit", edit_ms),
        ("search, cold (.fsmem deleted)", cold_ms),
    ):
        print(f"{name:<34} {value:>8.1f} {value / grep_ms:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
