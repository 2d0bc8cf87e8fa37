"""Run the `fsmem` CLI in a subprocess where chosen modules cannot be imported.

Two uses: without an extra's package (`anyio`, `mcp`, `matplotlib`…), as a user
who did not install that extra; and without what Windows lacks (`fcntl`, `pwd`,
`grp`, `termios`, `resource`, `os.geteuid` and the other POSIX-only calls of
`os`), which is how this Linux-only CI runs fsmem's portable code paths. The
bootstrap runs before fsmem loads: a finder first on `sys.meta_path` refuses
the modules, and the `os` functions are deleted.

Without fcntl, fsmem locks with `msvcrt.locking`, as on Windows. Linux has
no msvcrt, so the bootstrap then gives it one whose `locking` takes the same
byte-range lock through `os.lockf` and fails as Windows does (EACCES),
imported after the standard modules that probe for msvcrt to detect Windows: the
calls fsmem makes on Windows run here against real locks between processes,
though Windows' own implementation of them does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from child_env import without_fsmem

REPO = Path(__file__).resolve().parent.parent
POSIX_MODULES = ("fcntl", "pwd", "grp", "termios", "resource")
POSIX_CALLS = ("geteuid", "getuid", "getgid", "getegid", "getgroups", "chown", "fchown", "lchown", "mkfifo", "fchmod")

BOOTSTRAP = r"""
import os, sys
hidden = set(filter(None, sys.argv[1].split(",")))
for call in filter(None, sys.argv[2].split(",")):
    if hasattr(os, call):
        delattr(os, call)

class HiddenModules:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

    def find_module(self, name, path=None):
        return None

if "fcntl" in hidden and "msvcrt" not in hidden:
    import errno, types
    import getpass, subprocess  # before there is an msvcrt: they take its presence for Windows
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_UNLCK, msvcrt.LK_LOCK, msvcrt.LK_NBLCK = 0, 1, 2

    def locking(fd, mode, nbytes):
        if mode not in (0, 2):
            raise ValueError("fsmem locks only with LK_NBLCK and LK_UNLCK")
        try:
            os.lockf(fd, os.F_ULOCK if mode == 0 else os.F_TLOCK, nbytes)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise PermissionError(errno.EACCES, "Permission denied") from None
            raise

    msvcrt.locking = locking
    sys.modules["msvcrt"] = msvcrt
for name in list(sys.modules):
    if name.split(".")[0] in hidden:
        del sys.modules[name]
sys.meta_path.insert(0, HiddenModules())
if sys.argv[3] == "-c":
    code, sys.argv = sys.argv[4], ["-c", *sys.argv[5:]]
    exec(compile(code, "<hidden_modules>", "exec"), {"__name__": "__main__"})
else:
    sys.argv = ["fsmem", *sys.argv[3:]]
    from fsmem.cli import main
    main()
"""


def command(
    args: Sequence[str], *, hide: Sequence[str] = (), posix: bool = True, env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of `run_fsmem`, for a caller that needs the process itself (Popen)."""
    modules = list(hide) + ([] if posix else list(POSIX_MODULES))
    calls = [] if posix else list(POSIX_CALLS)
    base = without_fsmem()
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    base.update(env or {})
    return [sys.executable, "-c", BOOTSTRAP, ",".join(modules), ",".join(calls), *args], base


def run_fsmem(
    args: Sequence[str],
    *,
    hide: Sequence[str] = (),
    posix: bool = True,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """`fsmem ARGS` with the modules `hide` unimportable; with `posix=False`, also without POSIX-only parts.

    ARGS `-c CODE ARG…` runs the Python CODE there instead of the CLI.
    """
    argv, full_env = command(args, hide=hide, posix=posix, env=env)
    return subprocess.run(argv, input=input, capture_output=True, text=True, env=full_env, timeout=timeout)
