"""The optional extras of fsmem, and the one way a command says that it needs one.

A command that needs an extra imports it late; when the import fails the user
reads which extra to install (`pip install 'fsmem[server]'`) and the command
exits 2, never a traceback or a bare "No module named 'anyio'".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fsmem.errors import MissingDependency


def install_hint(extra: str) -> str:
    return f"pip install 'fsmem[{extra}]'"


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn a module that cannot be found while `what` loads its stack into MissingDependency naming `extra`.

    Any missing module outside fsmem counts: the extra's packages pull in others (mcp needs anyio,
    starlette, pydantic), and a half-installed extra is fixed by the same pip command.
    """
    try:
        yield
    except ImportError as exc:  # ModuleNotFoundError, or an SDK too old to hold a name fsmem imports
        missing = (exc.name or "").split(".")[0]
        if missing == "fsmem":
            raise
        why = f"no module named {missing!r}" if isinstance(exc, ModuleNotFoundError) and missing else str(exc)
        raise MissingDependency(
            f"{what} needs the fsmem[{extra}] extra ({why}); install it with: {install_hint(extra)}"
        ) from None
