"""Hostile input: path escapes tried and refused on every face, bad files tried and answered by every command.

    python benchmarks/bench_hostile.py [--time-limit 30]

Escapes: the payloads of tests/hostile.py (absolute paths, `..`, links out of
the root and into .fsmem/ and .git/, fsmem.yaml in several cases, control
characters, NUL, a lone surrogate, very deep and long paths, a FIFO, a loop),
each also written as `./P` and `topics/../P`, through six faces: `Memory`,
`tools.call`, the MCP server (SDK client), `MemoryTool` over the memory, the
Anthropic SDK drop-in class, and the CLI (real subprocesses). An attempt is
refused when it gets a clear error within the time limit, its answer holds no
planted secret, and the tree and the outside folder hash as before.

Bad files: one memory per kind of bad file (a YAML alias bomb, oversized or
broken front matter, a FIFO, loops, links out, names with control
characters, a 50 MB sparse file…), and every command (ls, check, read, grep,
search, context, consolidate, index) run on it as a subprocess. A command
answered when it exited 0 or 1, or 2 with one line on stderr and no
traceback, within the time limit; ls, grep and search must also still show
the healthy file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import OUT, REPO, compiled, fsmem_bin, load, table

sys.path.insert(0, str(REPO / "tests"))
from hostile import FOLDER_AS_FILE, PAYLOADS, SECRETS, build, tree_state  # noqa: E402

BILLING = "---\ntitle: Billing\n---\n# Billing\n- proration: daily\n"


# -- escapes -------------------------------------------------------------------------------------------
def variants(outside: Path) -> list[tuple[str, str]]:
    out = []
    for what, path in PAYLOADS + [FOLDER_AS_FILE]:
        if path.startswith(("/", "{outside}")):
            out.append((what, path.replace("{outside}", str(outside))))
            continue
        out += [(what, path), (what + " (./)", "./" + path), (what + " (topics/../)", "topics/../" + path)]
    return out


class Tally:
    def __init__(self, root: Path, outside: Path, limit: float):
        self.root, self.outside, self.limit = root, outside, limit
        self.state = (tree_state(root), tree_state(outside))
        self.tried: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        self.failures: list[str] = []

    def record(self, face: str, label: str, refused: bool, text: str, seconds: float) -> None:
        leaked = any(secret in text for secret in SECRETS)
        changed = (tree_state(self.root), tree_state(self.outside)) != self.state
        ok = refused and not leaked and not changed and seconds < self.limit
        self.tried[face] = self.tried.get(face, 0) + 1
        self.refused[face] = self.refused.get(face, 0) + ok
        if not ok:
            self.failures.append(
                f"{face}: {label!r}: refused={refused} leaked={leaked} changed={changed} {seconds:.1f}s"
            )
            self.state = (tree_state(self.root), tree_state(self.outside))

    def call(self, face: str, label: str, run: Callable[[], Any], refused_if: Callable[[Any], bool]) -> None:
        """Run one in-process attempt in a worker thread, so that one that hangs is counted, not waited for."""
        outcome: list[tuple[bool, str]] = []

        def attempt() -> None:
            try:
                value = run()
                outcome.append((refused_if(value), str(getattr(value, "text", value))))
            except Exception as exc:  # the faces refuse by raising their own error types
                outcome.append((_clear_error(face, exc), str(exc)))

        started = time.monotonic()
        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        worker.join(self.limit)
        refused, text = outcome[0] if outcome else (False, "no answer")
        self.record(face, label, refused, text, time.monotonic() - started)


def _clear_error(face: str, exc: Exception) -> bool:
    from fsmem.errors import FsmemError

    if face == "anthropic SDK class":
        from anthropic.lib.tools import ToolError

        return isinstance(exc, ToolError)
    return isinstance(exc, FsmemError)


def escapes(work: Path, limit: float) -> Tally:
    from fsmem import Memory
    from fsmem.agents import tools
    from fsmem.agents.memory_tool import MemoryTool

    base, root, outside = build(work)
    attempts = variants(outside)
    tally = Tally(root, outside, limit)
    memory = Memory(root)
    never = lambda value: False  # noqa: E731  an answer (rather than an error) is an escape
    for what, path in attempts:
        for name, op in {
            "read": lambda p: memory.read(p),
            "ls": lambda p: memory.ls(p),
            "grep": lambda p: memory.grep("SECRET", [p]),
            "check": lambda p: memory.check(p),
            "write": lambda p: memory.write(p, "SECRET-OVERWRITE\n"),
            "edit": lambda p: memory.edit(p, old="proration", new="x"),
            "rm": lambda p: memory.rm(p),
            "mv": lambda p: memory.mv(p, "topics/moved.md"),
        }.items():
            if what.startswith("folder given as a file") and name in ("ls", "grep", "check", "rm", "mv"):
                continue
            tally.call("Memory", f"{name} {what}", lambda op=op, path=path: op(path), never)
        for name, arguments in _tool_calls(path):
            if what.startswith("folder given as a file") and name in ("ls", "grep"):
                continue
            tally.call(
                "tools.call",
                f"{name} {what}",
                lambda name=name, arguments=arguments: tools.call(memory, name, arguments),
                lambda answer: answer.is_error,
            )
    tool = MemoryTool.over(memory)
    for what, path in attempts:
        for command, arguments in _memory_tool_commands(path):
            if what.startswith("folder given as a file") and command in ("view", "delete", "rename"):
                continue
            tally.call("MemoryTool", f"{command} {what}", lambda c=command, a=arguments: getattr(tool, c)(**a), never)
    _sdk(tally, base, attempts)
    _mcp(tally, root, attempts)
    _cli(tally, root, attempts, limit)
    return tally


def _tool_calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read", {"path": path}),
        ("ls", {"path": path}),
        ("grep", {"pattern": "SECRET", "paths": [path]}),
        ("write", {"path": path, "body": "SECRET-OVERWRITE\n"}),
        ("edit", {"path": path, "old": "proration", "new": "x"}),
    ]


def _memory_tool_commands(path: str) -> list[tuple[str, dict[str, Any]]]:
    full = path if path.startswith("/") else "/memories/" + path
    return [
        ("view", {"path": full}),
        ("create", {"path": full, "file_text": "SECRET-OVERWRITE\n"}),
        ("str_replace", {"path": full, "old_str": "proration", "new_str": "x"}),
        ("insert", {"path": full, "insert_line": 0, "insert_text": "x"}),
        ("delete", {"path": full}),
        ("rename", {"old_path": full, "new_path": "/memories/topics/moved.md"}),
        ("rename", {"old_path": "/memories/topics/billing.md", "new_path": full}),
    ]


def _sdk(tally: Tally, base: Path, attempts: list[tuple[str, str]]) -> None:
    try:
        from anthropic.types.beta import (
            BetaMemoryTool20250818CreateCommand as Create,
            BetaMemoryTool20250818DeleteCommand as Delete,
            BetaMemoryTool20250818InsertCommand as Insert,
            BetaMemoryTool20250818RenameCommand as Rename,
            BetaMemoryTool20250818StrReplaceCommand as StrReplace,
            BetaMemoryTool20250818ViewCommand as View,
        )

        from fsmem.integrations.anthropic import FsmemMemoryTool
    except ImportError:
        print("(anthropic is not installed: the SDK face is left out)", file=sys.stderr)
        return
    kinds = {"view": View, "create": Create, "str_replace": StrReplace, "insert": Insert, "delete": Delete}
    kinds["rename"] = Rename
    tool = FsmemMemoryTool(str(base))
    for what, path in attempts:
        for command, arguments in _memory_tool_commands(path):
            if what.startswith("folder given as a file") and command in ("view", "delete", "rename"):
                continue
            sdk = kinds[command](command=command, **arguments)
            tally.call("anthropic SDK class", f"{command} {what}", lambda sdk=sdk: tool.execute(sdk), lambda v: False)


def _mcp(tally: Tally, root: Path, attempts: list[tuple[str, str]]) -> None:
    try:
        import anyio
        import mcp.types as types
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError:
        print("(mcp is not installed: the MCP face is left out)", file=sys.stderr)
        return

    def ascii_json(self, **options) -> str:  # a lone surrogate travels as its JSON escape
        return json.dumps(self.model_dump(mode="json", **options), ensure_ascii=True, separators=(",", ":"))

    types.JSONRPCRequest.model_dump_json = ascii_json  # type: ignore[method-assign]
    calls = [
        (what, name, arguments)
        for what, path in attempts
        for name, arguments in _tool_calls(path)
        if not (what.startswith("folder given as a file") and name in ("ls", "grep"))
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "fsmem", "--root", str(root), "mcp"], env=env)

    async def main() -> None:
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                for what, name, arguments in calls:
                    started = time.monotonic()
                    try:
                        with anyio.fail_after(tally.limit):
                            result = await session.call_tool(name, arguments)
                        refused, text = result.is_error, result.content[0].text
                    except Exception as exc:  # a timeout or a protocol error: not a clear refusal
                        refused, text = False, repr(exc)
                    tally.record("MCP (SDK client)", f"{name} {what}", refused, text, time.monotonic() - started)

    anyio.run(main)


def _cli(tally: Tally, root: Path, attempts: list[tuple[str, str]], limit: float) -> None:
    import concurrent.futures

    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    jobs = []
    for what, path in attempts:
        if "\x00" in path:
            continue  # the operating system cannot pass a NUL byte in an argument
        arg = path.replace("\ud800", "").encode() + b"\xed\xa0\x80" if "\ud800" in path else os.fsencode(path)
        for name, argv in {
            "read": [b"read", arg],
            "ls": [b"ls", arg],
            "grep": [b"grep", b"SECRET", arg],
            "write": [b"write", arg],
            "edit": [b"edit", arg, b"--old", b"proration", b"--new", b"x"],
            "mv": [b"mv", arg, b"topics/moved.md"],
        }.items():
            if what.startswith("folder given as a file") and name in ("ls", "grep", "mv"):
                continue
            jobs.append((f"{name} {what}", [fsmem_bin().encode(), b"--root", os.fsencode(root), *argv]))

    def run(job):
        label, argv = job
        started = time.monotonic()
        try:
            done = subprocess.run(argv, input=b"SECRET-OVERWRITE\n", capture_output=True, env=env, timeout=limit)
        except subprocess.TimeoutExpired:
            return label, False, "timeout", limit
        stderr = done.stderr.decode("utf-8", "replace")
        clear = done.returncode == 2 and stderr.startswith("fsmem: error: ") and stderr.count("\n") == 1
        return label, clear, done.stdout.decode("utf-8", "replace") + stderr, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for label, refused, text, seconds in pool.map(run, jobs):
            tally.record("CLI (subprocess)", label, refused, text, seconds)


# -- bad files -----------------------------------------------------------------------------------------
def alias_bomb() -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 10)]
    return "---\ntitle: Laughs\n" + "\n".join(lines) + "\n---\n# Laughs\n"


def _text(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)


def bad_files(outside: Path) -> dict[str, tuple[str, Callable[[Path], None]]]:
    """kind -> (the path `read` is asked for, how to plant it in a memory root)."""
    deep = "/".join(["n"] * 70)
    kinds: dict[str, tuple[str, Callable[[Path], None]]] = {
        "YAML alias bomb": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", alias_bomb())),
        "front matter over 64 KiB": (
            "topics/bad.md",
            lambda r: _text(r / "topics/bad.md", "---\n" + "k: " + "v" * 70_000 + "\n---\nbody\n"),
        ),
        "front matter nested 10,000 deep": (
            "topics/bad.md",
            lambda r: _text(r / "topics/bad.md", "---\nk: " + "[" * 10_000 + "]" * 10_000 + "\n---\n"),
        ),
        "front matter never closed": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "---\ntitle: x\nbody\n")),
        "front matter not YAML": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "---\n: : [\n---\nbody\n")),
        "front matter a list": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "---\n- a\n- b\n---\nbody\n")),
        "front matter with a Python tag": (
            "topics/bad.md",
            lambda r: _text(r / "topics/bad.md", "---\nx: !!python/object/apply:os.system ['true']\n---\n"),
        ),
        "impossible date": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "---\ncreated: 2026-13-45\n---\n")),
        "title a mapping": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "---\ntitle: {a: 1}\n---\n")),
        "invalid UTF-8": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", b"caf\xe9\n\xff\xfe\n")),
        "NUL bytes": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", b"a\x00b\n- proration\x00: x\n")),
        "BOM and CRLF": (
            "topics/bad.md",
            lambda r: _text(r / "topics/bad.md", b"\xef\xbb\xbf---\r\ntitle: x\r\n---\r\n"),
        ),
        "CR-only line ends": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", b"---\rtitle: x\r---\rbody\r")),
        "empty file": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "")),
        "a 20 MB line": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "x" * 20_000_000)),
        "100,000 headings": ("topics/bad.md", lambda r: _text(r / "topics/bad.md", "# h\n" * 100_000)),
        "a 50 MB sparse file": ("topics/bad.md", lambda r: _sparse(r / "topics/bad.md", 50 << 20)),
        "FIFO": ("topics/bad.md", lambda r: os.mkfifo(r / "topics/bad.md")),
        "socket": ("topics/bad.md", lambda r: _socket(r / "topics/bad.md")),
        "folder named .md": ("topics/bad.md", lambda r: (r / "topics/bad.md").mkdir()),
        "symbolic link loop": ("topics/bad.md", lambda r: os.symlink("bad.md", r / "topics/bad.md")),
        "two links in a loop": (
            "topics/bad.md",
            lambda r: (os.symlink("other.md", r / "topics/bad.md"), os.symlink("bad.md", r / "topics/other.md")),
        ),
        "dangling link": ("topics/bad.md", lambda r: os.symlink("gone.md", r / "topics/bad.md")),
        "link out of the root": ("topics/bad.md", lambda r: os.symlink(outside / "secret.md", r / "topics/bad.md")),
        "link into .fsmem/": ("topics/bad.md", lambda r: _link_in(r, ".fsmem/state.md")),
        "link into .git/": ("topics/bad.md", lambda r: _link_in(r, ".git/config")),
        "link to fsmem.yaml": ("topics/bad.md", lambda r: os.symlink(r / "fsmem.yaml", r / "topics/bad.md")),
        "name with a newline": ("topics/a\nb.md", lambda r: _text(r / "topics/a\nb.md", "- proration: spoof\n")),
        "name not UTF-8": ("topics/bad.md", lambda r: _text(Path(os.fsdecode(bytes(r / "topics") + b"/\xff.md")), "x")),
        "folders 70 deep": (f"{deep}/bad.md", lambda r: _text(r / deep / "bad.md", "- proration: deep\n")),
        "unreadable (chmod 000)": (
            "topics/bad.md",
            lambda r: (_text(r / "topics/bad.md", "x"), os.chmod(r / "topics/bad.md", 0)),
        ),
        "billion laughs in the body": (
            "topics/bad.md",
            lambda r: _text(r / "topics/bad.md", "# x\n" + alias_bomb()[4:]),
        ),
    }
    return kinds


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def _link_in(root: Path, target: str) -> None:
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    (root / target).write_text("SECRET-STATE\n")
    os.symlink(root / target, root / "topics/bad.md")


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def bad_file_commands(work: Path, limit: float) -> tuple[dict[str, list[int]], list[str]]:
    """Per kind of bad file: [commands tried, commands answered]; and what went wrong."""
    outside = work / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("SECRET-OUTSIDE\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    env["FSMEM_NOW"] = "2026-11-30T10:00:00+00:00"
    kinds = list(bad_files(outside).items())

    def one(number: int) -> tuple[str, list[int], list[str]]:
        kind, (read_path, plant) = kinds[number]
        failures: list[str] = []
        root = work / f"m{number:02d}"
        shutil.copytree(REPO / "memory_template", root)
        _text(root / "topics" / "billing.md", BILLING)
        _text(root / "sessions" / "2026" / "11" / "30" / "s.md", "## people/Adam Smith\n- employer: Globex\n")
        plant(root)
        commands = {
            "ls": (["ls"], "topics/billing.md"),
            "check": (["check"], None),
            "read": (["read", read_path], None),
            "grep": (["grep", "proration"], "topics/billing.md"),
            "search": (["search", "proration daily"], "topics/billing.md"),
            "context": (["context"], None),
            "consolidate": (["consolidate"], None),
            "index": (["index"], None),
        }
        tried = answered = 0
        for name, (args, must_show) in commands.items():
            tried += 1
            argv = [os.fsencode(fsmem_bin()), b"--root", os.fsencode(root)] + [os.fsencode(a) for a in args]
            started = time.monotonic()
            try:
                done = subprocess.run(argv, capture_output=True, env=env, timeout=limit, preexec_fn=_limit_memory)
            except subprocess.TimeoutExpired:
                failures.append(f"{kind}: {name}: no answer within {limit:g} s")
                continue
            out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
            bounded = done.returncode in (0, 1) and (must_show is None or must_show in out)
            clear = done.returncode == 2 and err.startswith("fsmem: error: ") and err.count("\n") == 1
            if (bounded or clear) and "Traceback" not in err and "SECRET" not in out + err:
                answered += 1
            else:
                failures.append(f"{kind}: {name}: exit {done.returncode}, {err.strip()[:200]!r}")
            if time.monotonic() - started > limit:
                failures.append(f"{kind}: {name}: took {time.monotonic() - started:.1f} s")
        return kind, [tried, answered], failures

    import concurrent.futures

    results: dict[str, list[int]] = {}
    failures: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two memories at a time: each command is a process
        for kind, counts, problems in pool.map(one, range(len(kinds))):
            results[kind] = counts
            failures += problems
    return results, failures


def kill_points() -> tuple[int, int] | None:
    """Consolidation kill points (tried, converged): SIGKILL a run after a chosen write, rerun, compare the bytes.

    The same harness as bench_consolidate_invariant.py (its `sigkills`), smaller:
    300 notes, 12 kill points spread over the run's writes and 4 kills at random
    moments, each rerun compared byte for byte with an uninterrupted run.
    """
    import tempfile

    from bench_consolidate_invariant import NOW, sigkills

    os.environ["FSMEM_NOW"] = NOW
    with tempfile.TemporaryDirectory() as folder:
        result = sigkills(300, 12, 4, 7, Path(folder))
    tried = result["kill_points_tried"] + result["timed_kills_tried"]
    converged = result["kill_points_converged"] + result["timed_kills_converged"]
    return tried, converged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds an answer may take")
    args, _ = parser.parse_known_args()
    compiled()
    before = load()
    work = OUT / "hostile"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    tally = escapes(work / "escapes", args.time_limit)
    escape_seconds = time.monotonic() - started
    started = time.monotonic()
    (work / "files").mkdir()
    kinds, file_failures = bad_file_commands(work / "files", args.time_limit)
    files_seconds = time.monotonic() - started
    from hostile_cli import run as cli_cases  # issue #19's CLI and API cases

    cli_rows, cli_failures, cli_summary = cli_cases(work / "cli", args.time_limit)

    print(f"({before} before, {load()} after; time limit {args.time_limit:g} s per answer)")
    rows = [[face, str(tally.tried[face]), str(tally.refused[face])] for face in tally.tried]
    tried, refused = sum(tally.tried.values()), sum(tally.refused.values())
    rows.append(["all faces", str(tried), f"{refused} ({100 * refused / tried:.1f}%)"])
    print(table(f"path escapes ({escape_seconds:.0f} s)", ["face", "tried", "refused"], rows))
    answered = sum(a for _, a in kinds.values())
    commands = sum(t for t, _ in kinds.values())
    whole = sum(1 for t, a in kinds.values() if t == a)
    rows = [
        ["bad files (kinds)", str(len(kinds)), f"{whole} ({100 * whole / len(kinds):.1f}%)"],
        ["commands on them", str(commands), f"{answered} ({100 * answered / commands:.1f}%)"],
    ]
    print(table(f"bad files, every command on each ({files_seconds:.0f} s)", ["", "tried", "answered"], rows))
    print(table("CLI and API cases (issue #19)", ["cases", "tried", "answered as they must"], cli_rows))
    import hostile_server  # the team server's door, from outside (hostile_server.py)

    started = time.monotonic()
    groups, server_failures = hostile_server.server_cases(work / "server", args.time_limit)
    held, tried_server = sum(h for _, h in groups.values()), sum(t for t, _ in groups.values())
    rows = [[group, str(t), str(h)] for group, (t, h) in groups.items()]
    rows.append(["all cases", str(tried_server), f"{held} ({100 * held / max(1, tried_server):.1f}%)"])
    print(table(f"fsmem serve, hostile requests ({time.monotonic() - started:.0f} s)", ["", "tried", "held"], rows))
    file_failures += server_failures
    killed = kill_points()
    if killed is not None:
        print(
            table(
                "consolidation killed at each write", ["", "tried", "converged"], [["kill points", *map(str, killed)]]
            )
        )
    from hostile_sync import bench_sync_attacks, report as sync_report  # what a hostile clone pushes (issue 18)

    started = time.monotonic()
    sync_counts, sync_failures = bench_sync_attacks(work / "sync", args.time_limit)
    print(sync_report(sync_counts, time.monotonic() - started))
    file_failures += sync_failures
    import hostile_kills  # fsmem killed at every git step of write, consolidate and sync (issue #18)

    git_killed, git_failures = hostile_kills.run_and_print()
    for failure in tally.failures + file_failures + cli_failures:
        print("FAILED " + failure.replace("\n", "\\n"))
    summary = {
        "kill_points_tried": killed[0] if killed else 0,
        "kill_points_converged": killed[1] if killed else 0,
        "escapes_tried": tried,
        "escapes_refused": refused,
        "bad_file_kinds": len(kinds),
        "bad_file_commands_tried": commands,
        "bad_file_commands_answered": answered,
        "sync_attacks_tried": sum(tried for tried, _ in sync_counts.values()),
        "sync_attacks_held": sum(held for _, held in sync_counts.values()),
        **git_killed,
        **cli_summary,
        "server_cases_tried": tried_server,
        "server_cases_held": held,
    }
    print(json.dumps(summary))
    if (
        tally.failures
        or file_failures
        or git_failures
        or cli_failures
        or (killed is not None and killed[0] != killed[1])
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
