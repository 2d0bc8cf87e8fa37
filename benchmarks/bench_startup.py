"""Start-up: `fsmem --version` against `python -c pass`, and `fsmem grep` on a 10k-file memory against bare `rg --json`.

What a user runs is a regular install, not the editable one `make` sets up for
development (its import hook adds ~10 ms), so fsmem is installed from a wheel
into a venv of its own under bench-out/ whose other packages come from .venv.
Targets: `fsmem --version` within 30 ms of `python -c pass` (issue #11);
`fsmem grep` at most 2x `rg --json`, with few matches and with many (issue #20;
a plain grep runs without click, `fsmem.cli.lean`). Also reports which heavy
modules each command imported, and the import budget of each command.

    python benchmarks/bench_startup.py [--sizes 10000] [--runs 15]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from common import OUT, REPO, corpus, load, ms, rg_bin, run_drained, side_by_side, sizes_from, table
from corpus import COMMON_WORD, RARE_WORD

HEAVY = ("tiktoken", "rapidfuzz", "watchdog", "mcp", "numpy", "anthropic", "yaml", "sqlite3", "apsw")
PROBE = """
import sys
sys.argv = ["fsmem"] + sys.argv[1:]
try:
    from fsmem.cli import main
    main()
except SystemExit:
    pass
finally:
    heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def installed_fsmem() -> Path:
    """A venv with fsmem installed from a wheel of this checkout; its dependencies come from .venv."""
    target = OUT / "startup-venv"
    wheels = OUT / "startup-wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True,
    )
    if not (target / "bin" / "python").exists():
        venv.create(target, with_pip=True)
    python = target / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # .venv's packages, without processing .venv's .pth files (so its editable fsmem is not seen)
    Path(site, "dev-venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("fsmem-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)],
        check=True,
    )
    subprocess.run([str(python), "-m", "compileall", "-q", site + "/fsmem"], check=True)
    rg = target / "bin" / "rg"  # the ripgrep wheel puts rg beside the venv's python; here it is .venv's
    if not rg.exists():
        rg.symlink_to(rg_bin())
    return target / "bin"


def heavy_imports(python: Path, argv: list[str]) -> str:
    probe = PROBE.replace("set(HEAVY)", repr(set(HEAVY)))
    done = subprocess.run([str(python), "-c", probe, *argv], capture_output=True, text=True)
    return done.stderr.strip().rsplit("HEAVY:", 1)[-1] or "none"


GROUPS = ("fsmem", "click", "apsw", "yaml", "tiktoken", "watchdog", "rapidfuzz", "Stemmer")
COMMANDS = {
    "ls": ["ls", "--max-results", "5"],
    "grep": ["grep", RARE_WORD],
    "read": ["read", "README.md", "--max-tokens", "500"],
    "search": ["search", "renewal date"],
    "note": ["note", "the start-up benchmark wrote this"],
}


def import_budget(python: Path, argv: list[str]) -> dict[str, float]:
    """Milliseconds of imports a command makes (`python -X importtime`), summed by package (self times)."""
    probe = PROBE.replace("set(HEAVY)", repr(set(HEAVY)))
    done = subprocess.run([str(python), "-X", "importtime", "-c", probe, *argv], capture_output=True, text=True)
    spent: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _total, name = (part.strip() for part in line[len("import time:") :].split("|"))
        top = name.split(".")[0]
        group = top if top in GROUPS else "the standard library and the rest"
        spent[group] = spent.get(group, 0.0) + int(own) / 1000
    return spent


def budget_rows(python: Path, root: Path) -> list[list[str]]:
    import tempfile

    rows = []
    scratch = Path(tempfile.mkdtemp()) / "scratch"
    subprocess.run([str(python), "-m", "fsmem", "init", str(scratch)], capture_output=True, check=True)
    for command, args in COMMANDS.items():
        where = scratch if command == "note" else root  # the note goes to a scratch memory, not the corpus
        spent = import_budget(python, ["--root", str(where), *args])
        total = sum(spent.values())
        parts = ", ".join(
            f"{name} {ms:.0f}" for name, ms in sorted(spent.items(), key=lambda item: -item[1]) if ms >= 1
        )
        rows.append([f"fsmem {command}", f"{total:.0f} ms", parts])
    shutil.rmtree(scratch.parent, ignore_errors=True)
    return rows


def main() -> None:
    sizes = sizes_from(sys.argv[1:], "10000")
    import common

    before = load()
    bin_dir = installed_fsmem()
    fsmem, python = str(bin_dir / "fsmem"), bin_dir / "python"
    runs = max(common.RUNS, 15)

    medians = side_by_side(
        {"python -c pass": ([str(python), "-c", "pass"], None), "fsmem --version": ([fsmem, "--version"], None)},
        runs,
    )
    base = medians["python -c pass"]
    rows = [
        ["python -c pass", ms(base), "", "-"],
        [
            "fsmem --version",
            ms(medians["fsmem --version"]),
            f"+{ms(medians['fsmem --version'] - base)} (target: +30 ms)",
            heavy_imports(python, ["--version"]),
        ],
    ]
    for files in sizes:
        root = corpus(files)
        run_drained([fsmem, "--root", str(root), "ls", "--max-results", "1"])  # a warm metadata cache
        for label, args in (("few matches", [RARE_WORD]), ("many matches, --json", ["--json", COMMON_WORD])):
            grep = [fsmem, "--root", str(root), "grep", *args]
            rg = [rg_bin(), "--json", args[-1]]
            timed = side_by_side({"rg --json": (rg, root), "fsmem grep": (grep, None)}, runs)
            ratio = timed["fsmem grep"] / timed["rg --json"]
            rows.append([f"rg --json, {files:,} files, {label}", ms(timed["rg --json"]), "", "-"])
            rows.append(
                [
                    f"fsmem grep, {files:,} files, {label}",
                    ms(timed["fsmem grep"]),
                    f"{ratio:.2f}x rg --json (target: 2x)",
                    heavy_imports(python, ["--root", str(root), "grep", *args]),
                ]
            )
    print(f"({before} before, {load()} after)")
    print(table("start-up of a regular install", ["command", "median", "against the baseline", "heavy imports"], rows))
    for files in sizes:
        root = corpus(files)
        print(
            table(
                f"import budget of each command on {files:,} files (python -X importtime, self times in ms)",
                ["command", "imports", "by package"],
                budget_rows(python, root),
            )
        )


if __name__ == "__main__":
    main()
