"""Run the `fsmem` CLI in a subprocess where chosen modules cannot be imported.

Two uses: without an extra's package (`anyio`, `mcp`, `matplotlib`…), as a user
who did not install that extra; and without what Windows lacks (`fcntl`, `pwd`,
`grp`, `termios`, `resource`, `os.geteuid` and the other POSIX-only calls of
`os`), which is how this Linux-only CI runs fsmem's portable code paths. The
bootstrap runs before fsmem loads: a finder first on `sys.meta_path` refuses
the modules, and the `os` functions are deleted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

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

for name in list(sys.modules):
    if name.split(".")[0] in hidden:
        del sys.modules[name]
sys.meta_path.insert(0, HiddenModules())
sys.argv = ["fsmem", *sys.argv[3:]]
from fsmem.cli import main
main()
"""


def run_fsmem(
    args: Sequence[str],
    *,
    hide: Sequence[str] = (),
    posix: bool = True,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """`fsmem ARGS` with the modules `hide` unimportable; with `posix=False`, also without POSIX-only parts."""
    modules = list(hide) + ([] if posix else list(POSIX_MODULES))
    calls = [] if posix else list(POSIX_CALLS)
    base = {k: v for k, v in os.environ.items() if not k.startswith("FSMEM_")}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, ",".join(modules), ",".join(calls), *args],
        input=input,
        capture_output=True,
        text=True,
        env=base,
        timeout=timeout,
    )
