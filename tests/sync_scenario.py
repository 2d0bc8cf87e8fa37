"""Hosts that share one memory through one git remote: clones of a bare repository, writers, and `fsmem sync`.

Used by tests/test_sync.py (a fixed number of writes, so the run does the same
work however loaded the machine is) and benchmarks/bench_history.py (the full
minute). Each writer is a process that writes through `fsmem.Memory`
(session notes with facts about three shared people and unique observations,
guarded edits of a shared topic's hand-written fact, front matter set on it,
rewrites of its own topic) and logs what it wrote; each clone runs
`fsmem sync` every few seconds through the CLI, until the writers are done.
`check` compares the clones afterwards.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

FSMEM = str(Path(sys.executable).with_name("fsmem"))
PEOPLE = ("Ann Lee", "Bo Chen", "Cy Diaz")
KEYS = ("employer", "role", "city")
SHARED = "topics/shared.md"
SHARED_TEXT = """---
title: Shared
topic: Shared
created: 2026-01-01
updated: 2026-01-01
---
# Shared

A topic every writer on every host edits.

## Facts
- owner: nobody
- status: open
"""


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("FSMEM_", "GIT_"))}


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env()).stdout


def fsmem(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([FSMEM, "--root", str(root), *args], capture_output=True, text=True, env=env(), timeout=600)
    if check and proc.returncode:
        raise AssertionError(f"fsmem {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
    return proc


def make_hosts(base: Path, hosts: int = 2, writers: int = 4) -> tuple[Path, list[Path]]:
    """A bare origin and `hosts` clones; the first made with `fsmem init --git`, the others cloned and set up."""
    origin = base / "origin.git"
    git("init", "-q", "--bare", "--initial-branch=main", str(origin))
    first = base / "host0"
    fsmem(first, "init", "--git", str(first))
    config = first / "fsmem.yaml"
    agents = "".join(f"    w{n}:\n      max_tokens: 4000\n" for n in range(1, writers + 1))
    config.write_text(config.read_text().replace("  agents:\n", "  agents:\n" + agents, 1))
    (first / "topics").mkdir(exist_ok=True)
    (first / SHARED).write_text(SHARED_TEXT)
    git("remote", "add", "origin", str(origin), cwd=first)
    fsmem(first, "sync")  # commits fsmem.yaml and the topic (made outside fsmem), pushes
    roots = [first]
    for number in range(1, hosts):
        root = base / f"host{number}"
        git("clone", "-q", str(origin), str(root))
        fsmem(root, "sync", "--setup")
        roots.append(root)
    return origin, roots


def copy_hosts(origin: Path, roots: list[Path], base: Path) -> tuple[Path, list[Path]]:
    """A copy of what `make_hosts` made, under `base` (the same names), each clone's remote pointed at the copy's
    origin: a module builds its hosts once and each test takes a copy."""
    copied = Path(shutil.copytree(origin, base / origin.name, symlinks=True))
    clones = []
    for root in roots:
        clones.append(Path(shutil.copytree(root, base / root.name, symlinks=True)))
        git("remote", "set-url", "origin", str(copied), cwd=clones[-1])
    return copied, clones


def writer(root: Path, agent: str, seed: int, deadline: float, writes: int, out: Path) -> None:
    """Write through Memory `writes` times (0: until `deadline`); log every write that must survive to `out` (JSON
    lines)."""
    from fsmem import ChangedOnDisk, Memory

    memory = Memory(root, agent=agent)
    rng = random.Random(seed)
    host = root.name
    done = []
    number = 0
    while number < writes if writes else time.time() < deadline:
        number += 1
        mark = f"{host}-{agent}-{number}"
        kind = rng.choices(["fact", "observation", "edit", "field", "own"], weights=[5, 3, 2, 1, 1])[0]
        if kind == "fact":
            person, key = rng.choice(PEOPLE), rng.choice(KEYS)
            memory.note(f"- {key}: v-{mark}", subject=f"people/{person}")
            done.append({"kind": "fact", "person": person, "key": key, "value": f"v-{mark}"})
        elif kind == "observation":
            memory.note(f"Observation {mark} about the weather.", subject=f"people/{rng.choice(PEOPLE)}")
            done.append({"kind": "observation", "mark": mark})
        elif kind in ("edit", "field"):
            for _ in range(5):
                page = memory.read(SHARED)
                owner = next((t for _, t in page.lines if t.startswith("- owner: ")), None)
                try:
                    if kind == "edit" and owner is not None:
                        memory.edit(SHARED, old=owner, new=f"- owner: o-{mark}", expected_version=page.version)
                    else:
                        memory.write(SHARED, None, set={"reviewed_by": mark}, expected_version=page.version)
                    break
                except ChangedOnDisk:
                    continue
        else:
            memory.write(f"topics/{host}-{agent}.md", f"# {agent} on {host}\n\n- latest: {mark}\n")
            done.append({"kind": "own", "path": f"topics/{host}-{agent}.md", "mark": mark})
        time.sleep(rng.uniform(0.05, 0.3))  # a pace, not an order: the writes interleave with syncs at random
    out.write_text("".join(json.dumps(item) + "\n" for item in done))


def syncer(root: Path, deadline: float, every: float, stop: Path, out: Path) -> None:
    """`fsmem sync` every ~`every` s until `deadline`, or, with no deadline (0), until the file `stop` exists (the
    writers are done); each sync logged with whether it started while the writers still wrote."""
    codes = []
    while time.time() < deadline if deadline else not stop.exists():
        started, while_writing = time.time(), not stop.exists()
        proc = fsmem(root, "sync", "--json", check=False)
        phases = json.loads(proc.stdout)["seconds"] if proc.returncode == 0 else {}
        codes.append(
            {
                "code": proc.returncode,
                "seconds": round(time.time() - started, 2),
                "phases": phases,
                "error": proc.stderr[-300:],
                "while_writing": while_writing,
            }
        )
        pause = time.time() + max(0.0, every - (time.time() - started)) * random.uniform(0.5, 1.0)
        while time.time() < pause and not (stop.exists() and not deadline):  # a sync every ~`every` s: a pace
            time.sleep(0.05)
    out.write_text(json.dumps(codes))


def run(
    base: Path, *, seconds: float = 0.0, writes: int = 0, writers: int = 4, hosts: int = 2, every: float = 3.0
) -> dict:
    """The whole scenario, for `seconds` or `writes` writes a writer; returns what the checks need."""
    assert bool(seconds) != bool(writes), "a run is timed or counted"
    origin, roots = make_hosts(base, hosts, writers)
    deadline = time.time() + seconds if seconds else 0.0
    stop = base / "writers-done"
    writing, syncing = [], []
    logs = []
    for h, root in enumerate(roots):
        for n in range(1, writers + 1):
            log = base / f"writer-{h}-{n}.jsonl"
            logs.append(log)
            args = ["writer", str(root), f"w{n}", str(h * 100 + n), str(deadline), str(writes), str(log)]
            writing.append(subprocess.Popen([sys.executable, __file__, *args], env=env()))
        sync_log = base / f"sync-{h}.json"
        args = ["syncer", str(root), str(deadline), str(every), str(stop), str(sync_log)]
        syncing.append(subprocess.Popen([sys.executable, __file__, *args], env=env()))
    for proc in writing:
        assert proc.wait(timeout=seconds + 600) == 0
    stop.write_text("")  # the syncers finish the sync under way and stop
    for proc in syncing:
        assert proc.wait(timeout=600) == 0
    final_syncs = 0
    for _ in range(4):  # the last rounds: every clone once more, until all hold origin's commit
        for root in roots:
            fsmem(root, "sync")
            final_syncs += 1
        heads = {git("rev-parse", "HEAD", cwd=root).strip() for root in roots}
        if len(heads) == 1 and heads == {git("rev-parse", "main", cwd=origin).strip()}:
            break
    written = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    syncs = [{**item, "host": h} for h in range(hosts) for item in json.loads((base / f"sync-{h}.json").read_text())]
    return {"origin": origin, "roots": roots, "written": written, "syncs": syncs, "final_syncs": final_syncs}


def files_of(root: Path) -> dict[str, bytes]:
    """Every file of a clone but git's and fsmem's machine state."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".git/", ".fsmem/")):
            found[rel] = path.read_bytes()
    return found


if __name__ == "__main__":
    if sys.argv[1] == "writer":
        writer(
            Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), Path(sys.argv[7])
        )
    elif sys.argv[1] == "syncer":
        syncer(Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), Path(sys.argv[5]), Path(sys.argv[6]))
