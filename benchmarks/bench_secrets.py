"""The secret guard's recall and false positives (`fsmem/format/secrets.py`), as docs/safety.md reports them.

    python benchmarks/bench_secrets.py [FOLDER ...] [--against REV] [--show N] [--locomo FILE]

Recall: over `tests/secrets_corpus.positives()` — a fake of every provider format and rule the guard has,
the planted fakes of its tests, literal assignments in a dozen languages — a positive counts as found when
a secret the scan reports covers it. False positives: over the corpus's hand-written references to secrets
and near-misses (all of which must pass), LoCoMo's 5,882 conversation turns when the shared data is here,
and each FOLDER given: conversation exports or checkouts of source code. A folder is walked (not `.git`):
a `.json` file is parsed and each line of each of its strings scanned, a `.jsonl` file line by line the
same way, any other text file line by line; the table gives the files, lines and lines flagged, by kind.
`--show N` prints the first N flagged lines of each folder (path:line, kind, the line with the secret
redacted), to judge each by hand: a flagged line is a false positive unless it holds a real secret.

`--against REV` measures the guard of git revision REV beside this one (e.g. `main`, or the commit before
issue 32). Exits 1 when recall on the positives is under 100% or a reference or near-miss is flagged.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from common import REPO, table

sys.path.insert(0, str(REPO / "tests"))

from secrets_corpus import NEAR_MISSES, REFERENCES, positives  # noqa: E402

from fsmem.format import secrets as current  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo10.json"
TEXT_LIMIT = 64 << 20  # a file larger than this is skipped


def guard_at(rev: str) -> ModuleType:
    """`fsmem/format/secrets.py` as it was at git revision `rev`, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:fsmem/format/secrets.py"], capture_output=True, text=True, check=True
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="fsmem-secrets-"))
    path = folder / "secrets_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("secrets_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["secrets_at_rev"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def recall(guard: Any) -> tuple[int, int, list[str]]:
    """(found, of, the kinds missed)."""
    items = positives()
    missed = []
    for kind, text, secret in items:
        spans = [text[s.start : s.end] for s in guard.scan(text)]
        if not any(secret.splitlines()[0] in span or span in secret for span in spans):
            missed.append(kind)
    return len(items) - len(missed), len(items), missed


def lines_of(path: Path) -> list[tuple[int, str]]:
    """(line number in the file, line of text) of every text `path` holds; strings of JSON split at newlines."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return []
    text = data.decode("utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            return [(0, line) for value in strings(json.loads(text)) for line in value.splitlines()]
        except (ValueError, RecursionError):
            pass
    if path.suffix == ".jsonl":
        found = []
        for number, raw in enumerate(text.splitlines(), 1):
            try:
                found += [(number, line) for value in strings(json.loads(raw)) for line in value.splitlines()]
            except ValueError:
                found.append((number, raw))
        return found
    return list(enumerate(text.splitlines(), 1))


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings(item)]
    return []


def measure_folder(folder: Path, guard: Any) -> tuple[int, int, list[tuple[str, int, str, str]]]:
    """(files, lines, flagged: (path, line, kinds, the line redacted)) of every text file under `folder`."""
    files = lines = 0
    flagged = []
    for base, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(names):
            path = Path(base) / name
            if not path.is_file() or path.is_symlink() or path.stat().st_size > TEXT_LIMIT:
                continue
            found = lines_of(path)
            if not found:
                continue
            files += 1
            lines += len(found)
            for number, line in found:
                hits = guard.scan(line)
                if hits:
                    kinds = ", ".join(sorted({hit.kind for hit in hits}))
                    flagged.append((str(path.relative_to(folder)), number, kinds, guard.redact(line, hits)))
    return files, lines, flagged


def locomo_turns(path: Path) -> list[str]:
    samples = json.loads(path.read_text())
    return [
        turn["text"]
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="folders of conversation exports or source code to measure")
    parser.add_argument("--against", metavar="REV", help="also measure the guard of this git revision")
    parser.add_argument("--show", type=int, default=0, metavar="N", help="print the first N flagged lines per folder")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo's locomo10.json (skipped if absent)")
    args, _ = parser.parse_known_args()  # run_all.py passes every benchmark's options on
    guards: list[tuple[str, Any]] = [("this checkout", current)]
    if args.against:
        guards.append((args.against, guard_at(args.against)))

    rows, failed = [], False
    for name, guard in guards:
        found, of, missed = recall(guard)
        refs = sum(bool(guard.scan(text)) for text in REFERENCES)
        near = sum(bool(guard.scan(text)) for text in NEAR_MISSES)
        rows.append(
            [
                name,
                f"{found}/{of}",
                ", ".join(sorted(set(missed))) or "-",
                f"{refs}/{len(REFERENCES)}",
                f"{near}/{len(NEAR_MISSES)}",
            ]
        )
        if guard is current:
            failed = found < of or refs > 0 or near > 0
    print(
        table(
            "The shipped corpora (tests/secrets_corpus.py)",
            ["guard", "positives refused", "kinds missed", "references flagged", "near-misses flagged"],
            rows,
        )
    )

    measured: list[tuple[str, Path]] = []
    if args.locomo.exists():
        measured.append(("LoCoMo turns", args.locomo))
    for folder in args.folders:
        path = Path(folder)
        if path.is_dir():
            measured.append((str(path), path))
        else:
            print(f"{folder}: not a folder; skipped", file=sys.stderr)
    rows = []
    shown: list[str] = []
    for label, path in measured:
        for name, guard in guards:
            if path.is_file():
                turns = locomo_turns(path)
                flagged = [("locomo10.json", n, "", t) for n, t in enumerate(turns, 1) if guard.scan(t)]
                files, lines = 1, len(turns)
            else:
                files, lines, flagged = measure_folder(path, guard)
            kinds = Counter(kind for _, _, kind, _ in flagged)
            rows.append(
                [
                    label,
                    name,
                    str(files),
                    str(lines),
                    str(len(flagged)),
                    ", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "-",
                ]
            )
            if args.show and guard is current:
                shown += [f"{label}/{p}:{n}: [{k}] {line[:200]}" for p, n, k, line in flagged[: args.show]]
    if rows:
        print(table("Lines flagged", ["material", "guard", "files", "lines", "flagged", "by kind"], rows))
    if shown:
        print("\nflagged lines (this checkout), to judge by hand:")
        print("\n".join(shown))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
