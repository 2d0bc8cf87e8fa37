"""A real fsmem process killed, or refused by the system, at the Nth call of one system call (strace's inject).

`strace -e inject=SYSCALL:signal=SIGKILL:when=N` kills the process as it enters its Nth SYSCALL, before the
call is made, as the OOM killer or a power-off would at that instant; `error=ENOSPC` makes that call fail as a
full disk would. fsmem has no test-only code path for this, and nothing is mocked: the process is the
installed `fsmem`, its children (git) run untouched. Only fsmem's own process is traced (no `-f`). Where
strace is missing or may not trace (a container without ptrace), the test is skipped, never faked.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FSMEM = str(Path(sys.executable).with_name("fsmem"))
KILLED = -9


@functools.cache
def _strace() -> str | None:
    found = shutil.which("strace")
    if found is None:
        return None
    probe = subprocess.run([found, "-o", os.devnull, "true"], capture_output=True)
    return found if probe.returncode == 0 else None


def strace() -> str:
    """strace's path, or the calling test is skipped."""
    found = _strace()
    if found is None:
        pytest.skip("strace is not installed or may not trace here")
    return found


def nth_call(
    args: list[str],
    syscall: str,
    matching: str,
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: bytes | None = None,
    program: str = FSMEM,
) -> int:
    """Which call of `syscall` (1 for the first) a clean run of `fsmem ARGS` makes with a line that matches the
    regular expression `matching` (its path, say), as strace shows it."""
    log = Path(cwd).parent / f".strace-{os.getpid()}.log"
    try:
        subprocess.run(
            [strace(), "-o", str(log), "-e", f"trace={syscall}", program, *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=120,
            check=True,
        )
        made = [line for line in log.read_text().splitlines() if line.startswith(syscall + "(")]
    finally:
        log.unlink(missing_ok=True)
    found = [number for number, line in enumerate(made, 1) if re.search(matching, line)]
    assert found, f"no {syscall} call matches {matching!r}: {made}"
    return found[0]


def calls(
    args: list[str], syscalls: list[str], *, cwd: Path, env: dict[str, str], stdin: bytes | None = None
) -> dict[str, int]:
    """How many times a clean run of `fsmem ARGS` enters each of `syscalls` (its own process)."""
    log = Path(cwd).parent / f".strace-{os.getpid()}.log"
    try:
        subprocess.run(
            [strace(), "-o", str(log), "-e", "trace=" + ",".join(syscalls), FSMEM, *args],
            cwd=cwd,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=120,
            check=True,
        )
        counts = dict.fromkeys(syscalls, 0)
        for line in log.read_text().splitlines():
            found = re.match(r"(\w+)\(", line)
            if found and found.group(1) in counts:
                counts[found.group(1)] += 1
        return counts
    finally:
        log.unlink(missing_ok=True)


def run_faulted(
    args: list[str],
    syscall: str,
    nth: int,
    fault: str,
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: bytes | None = None,
    program: str = FSMEM,
) -> subprocess.CompletedProcess[bytes]:
    """`fsmem ARGS` (or `program ARGS`) with its `nth` `syscall` killed (`fault="kill"`) or failed with errno
    `fault` ("ENOSPC")."""
    action = "signal=SIGKILL" if fault == "kill" else f"error={fault}"
    done = subprocess.run(
        [
            strace(),
            "-o",
            os.devnull,
            "-e",
            f"trace={syscall}",
            "-e",
            f"inject={syscall}:{action}:when={nth}",
            program,
            *args,
        ],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    if done.returncode == 128 + 9 or b"+++ killed by SIGKILL +++" in done.stderr:
        done.returncode = KILLED  # strace exits as its tracee did
    return done
