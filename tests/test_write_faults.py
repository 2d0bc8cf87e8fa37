"""A process killed, or a system call failing, in the middle of a write: nothing stored is lost, the next works.

Each case runs the installed `fsmem` under strace (tests/syscall_faults.py), killed or refused at the Nth
call of one system call, then checks what a person would find: every file holds its old or its new bytes,
and the next command of the same kind exits 0.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import syscall_faults as F
from child_env import child_env

NOW = "2026-12-01T10:00:00+00:00"


def fsmem(root: Path, *args: str, env: dict[str, str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([F.FSMEM, *args], cwd=root, env=env, input=stdin, capture_output=True, timeout=120)


@pytest.fixture
def memory(tmp_path) -> tuple[Path, dict[str, str]]:
    env = dict(child_env(), FSMEM_NOW=NOW, FSMEM_SOCKET="off", XDG_CONFIG_HOME=str(tmp_path / "config"))
    root = tmp_path / "mem"
    subprocess.run([F.FSMEM, "init", "--git", str(root)], env=env, capture_output=True, check=True)
    return root, env


@pytest.mark.parametrize("fault", ["kill", "ENOSPC"])
def test_a_host_key_write_killed_or_refused_leaves_no_empty_key_and_the_next_config_works(memory, fault):
    """Before, the key was written in place: killed between its open and its write, `host-key` stayed empty, and
    every later `config --local distill.command` and `distill` exited 2 (`holds no key (delete it…)`)."""
    root, env = memory
    fsmem(
        root, "config", "--local", "distill.timeout", "30", env=env
    )  # every state fsmem keeps made: the key's writes alone
    key = Path(env["XDG_CONFIG_HOME"], "fsmem", "host-key")
    args = ["config", "--local", "distill.command", "echo hi"]
    writes = F.calls(args, ["write"], cwd=root, env=env)["write"]
    key.unlink()
    assert writes >= 2  # the key, and stdout
    for nth in range(1, writes + 1):
        key.unlink(missing_ok=True)
        F.run_faulted(args, "write", nth, fault, cwd=root, env=env)
        assert not key.exists() or len(key.read_text().strip()) == 64, (nth, key.read_bytes())
        after = fsmem(root, *args, env=env)
        assert after.returncode == 0, (nth, after.stderr)
        assert fsmem(root, "config", "--local", "distill.command", env=env).stdout == b"distill.command=echo hi\n"
