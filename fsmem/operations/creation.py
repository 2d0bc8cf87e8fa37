"""How a folder becomes a memory: `init` (the template, and history with `git`) and the set-up of a git clone.

Both are made on the class (`Memory.init(DIR)`), which they open over the
folder once it is a memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fsmem.config import CONFIG_FILE
from fsmem.errors import AlreadyExists, NotAMemory
from fsmem.operations.core import Core
from fsmem.operations.history import setup_history, sync
from fsmem.store import host, template
from fsmem.store.root import ROOT_ENV, remedy

if TYPE_CHECKING:
    from fsmem.history.sync import SyncResult

C = TypeVar("C", bound=Core)


def init(cls: type[C], directory: str | os.PathLike[str], *, git: bool = False) -> C:
    """Make `directory` a memory: a new folder gets the template; a folder that already holds files (an
    Obsidian vault, a folder of notes) gets only the template files it lacks, and no file already there
    changes. A folder that is already a memory is refused, unless `git` is asked for.

    With `git`, the memory gets history: a git repository (unless it already
    lies in a git work tree, which is then used as it is), `.fsmem/` ignored,
    fsmem's merge driver set up, and a first commit. An existing memory is
    given history the same way, its files untouched.
    """
    target = Path(directory).expanduser()
    if git and (target / CONFIG_FILE).is_file():
        memory = cls(target)
        setup_history(memory, create=True)
        return memory
    if os.path.lexists(target / CONFIG_FILE):
        raise AlreadyExists(f"{target} already holds a memory ({CONFIG_FILE}); nothing was changed")
    if os.path.lexists(target) and not target.is_dir():
        raise AlreadyExists(f"{target} exists and is not a folder")
    template.add_missing(template.template_dir(), target)
    memory = cls(target)
    if git:
        setup_history(memory, create=True)
    return memory


def setup_clone(
    cls: type[Core],
    directory: str | os.PathLike[str] | None = None,
    *,
    agent: str | None = None,
    remote: str | None = None,
) -> SyncResult:
    """`fsmem sync --setup` of a git clone: `sync(setup=True)`, and the one way a folder without fsmem.yaml
    becomes a memory by sync. A clone of a bare remote whose HEAD names a branch it does not hold has no
    commit and no file yet; it takes the remote's branch first, through the trust boundary, and must then
    hold fsmem.yaml. `directory` defaults to $FSMEM_ROOT, else the current folder."""
    from fsmem.history import host_rules, remote as remotes

    target = Path(directory or os.environ.get(ROOT_ENV) or ".").expanduser()
    notes: list[str] = []
    if target.is_dir():
        host_rules.remove_state_link(target, notes)  # what the clone checked out, before fsmem writes state
    found = ""
    if target.is_dir() and not os.path.lexists(target / CONFIG_FILE):
        found = remotes.take_remote_branch(target.resolve(), host.host_id(target.resolve()))
        if not (target / CONFIG_FILE).is_file():
            raise NotAMemory(
                f"not an fsmem memory: {target} holds no {CONFIG_FILE}, and neither does the branch of its "
                f"remote{' it took' if found else ''} ({remedy(target)})"
            )
    result = sync(cls(target, agent=agent), remote, setup=True)
    result.found = "\n".join(line for line in (found, result.found) if line)
    result.boundary[:0] = notes
    return result
