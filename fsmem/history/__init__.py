"""History on git: every change a commit, attributed; log, show, diff, restore, revert; sync between hosts.

A memory has history when it lies in a git work tree (`fsmem init --git DIR`
makes one) that does not ignore it, unless fsmem.yaml says
`history: {enabled: false}`. This module only answers "might it?" with a few
`stat` calls, so that nothing below imports git machinery or starts a git
process for a memory without history, or for a read:

- `fsmem.history.repo` finds the repository (one `git rev-parse`);
- `journal` records each write (its exact bytes, as git objects) and commits
  what is pending, several writes per git update when writers come in bursts;
- `trees` edits only the trees on the changed paths; `git` runs git and writes
  objects; `queries` answers log, show and diff within a budget; `undo` plans
  restore and revert; `merge` is the merge driver; `sync` fetches, merges and
  pushes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fsmem import faces

GIT_MARKER = ".git"


def git_marker(root: Path) -> Path | None:
    """The nearest `.git` (folder, or file for a linked work tree) at or above `root`; None when there is none."""
    here = Path(os.path.realpath(root))
    for folder in (here, *here.parents):
        candidate = folder / GIT_MARKER
        if os.path.lexists(candidate):
            return candidate
    return None


def may_have_history(root: Path, enabled: bool) -> bool:
    """A cheap guess (no git process): history is not switched off (`history.enabled`) and a `.git` lies at or
    above the root."""
    return enabled and git_marker(root) is not None


# Settings that name this host live in the clone's own `.git/config`, which git never sends to a remote nor takes
# from one: `fsmem.hostId` (this copy's id in note names), `fsmem.acceptConfig` (`fsmem.history.trust_config`).
HOST_ID_KEY = "fsmem.hostId"


def host_setting(root: Path, key: str) -> str | None:
    """A host-local setting (`git config --local KEY` of the repository around `root`), or None: no repository,
    no git, or not set. One git process, only where a `.git` lies above."""
    from fsmem.errors import HistoryError

    try:
        proc = local_config(root, "--get", key)
    except HistoryError:
        return None
    if proc is None:
        return None
    value = proc.stdout.decode("utf-8", "replace").strip()
    return value if proc.returncode == 0 and value else None


def local_config(root: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """`git config --local ARGS` in the repository around `root`, None where no `.git` lies above: its git dir
    checked first (no FIFO git would wait on, no other repository's config: `git_dir.check`), and none of the
    caller's variables pointing git elsewhere (`git_env.clean_env`). HistoryError where the check refuses the
    repository or git cannot be run."""
    marker = git_marker(root)
    if marker is None:
        return None
    from fsmem.errors import HistoryError
    from fsmem.history.git_dir import check
    from fsmem.history.git_env import clean_env

    check(marker)
    try:
        return subprocess.run(
            ["git", "-C", os.fspath(root), "config", "--local", *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=clean_env(),
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise HistoryError(f"could not run git config: {exc}") from None


def turn_on(root: object) -> str:
    """How to give a memory history, in the words of the face that asked."""
    return f"turn it on with: {faces.call('init', directory=str(root), git=True)}"
