"""Which folder is the memory: the root a command names, `$FSMEM_ROOT`, or the nearest folder above holding fsmem.yaml.

Found once, when a `Memory` opens, before anything is read or written there;
a `.fsmem` that is a symbolic link is refused at the same moment.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsmem import faces
from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.errors import ConfigError, NotAMemory, RootNotFound, StorageError, quoted
from fsmem.names import ROOT_ENV, find_root


def remedy(path: Path) -> str:
    """What to run to make `path` a memory (for the message that says it is none)."""
    import shlex  # only when there is no memory to open

    return f"create one with: fsmem init {shlex.quote(str(path))}"


def discover_root(root: str | os.PathLike[str] | None = None, start: Path | None = None) -> Path:
    """`root` if given, else $FSMEM_ROOT, else the nearest ancestor holding fsmem.yaml (`fsmem.names.find_root`,
    the one rule, which a plain grep and the one-shot client also follow); where there is none, why."""
    found = find_root(os.fspath(root) if root else None, os.fspath(start) if start is not None else None)
    if found is not None:
        return Path(found)
    chosen = root or os.environ.get(ROOT_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir():
            what = "is not a folder" if os.path.lexists(path) else "does not exist"
            raise RootNotFound(f"not an fsmem memory: {path} {what} ({remedy(path)})")
        config = path / CONFIG_FILE
        if os.path.lexists(config) and not config.is_file():
            raise ConfigError(f"{config} is not a regular file; fsmem reads its settings from a plain YAML file")
        raise NotAMemory(f"not an fsmem memory: {path} holds no {CONFIG_FILE} ({remedy(path)})")
    here = (start or Path.cwd()).resolve()
    raise RootNotFound(
        f"no memory found: no {CONFIG_FILE} in {here} or any folder above it. "
        f"Create one with {faces.call('init', directory='DIR')}, or point to one with "
        f"{'--root DIR' if faces.current().kind == faces.CLI else 'Memory(DIR)'} or FSMEM_ROOT"
    )


def refuse_state_link(root: Path) -> None:
    """A `.fsmem` that is a symbolic link (a clone checks out what a remote pushed) would put this host's cache,
    locks and retrieval log wherever it points: refused before anything is read or written there."""
    state = root / STATE_DIR
    if os.path.islink(state):
        raise StorageError(
            f"{state} is a symbolic link (to {quoted(os.readlink(state))}): fsmem keeps its machine state "
            f"only in a real folder of the memory, so nothing was read or written. Remove the link (rm {state}; "
            "fsmem sync --setup removes it too) and run the command again"
        )
