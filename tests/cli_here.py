"""A command line run in the test's process through `fsmem.cli.dispatch` (the `fsmem` script's path and error
boundary), for the runs of a test whose process boundary is not what it tests: a consolidate run again after a
real one was SIGKILLed costs no interpreter start and no imports."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path


def fsmem(root: Path, *args: str, now: str, **variables: str) -> tuple[int, str, str]:
    """`fsmem --root ROOT ARGS` here, on the clock `now` (FSMEM_NOW) and with `variables` set for the run, as the
    script would run in an environment that holds them: exit code, stdout, stderr. The other FSMEM_ variables are
    the caller's to clear (a test's monkeypatch)."""
    from fsmem.cli import dispatch

    out, err = io.StringIO(), io.StringIO()
    given = {"FSMEM_NOW": now, **variables}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            dispatch(["--root", str(root), *args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    return code, out.getvalue(), err.getvalue()
