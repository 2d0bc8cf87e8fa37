"""What the last `fsmem sync` held or refused at the trust boundary, kept for `fsmem check` until a sync gets past it.

One small JSON file under `.fsmem/history/` (this host's state, never
synced), written by `fsmem.history.trust` and read here without any git
machinery, so that `check` stays a read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem import faces
from fsmem.config import CONFIG_FILE, STATE_DIR
from fsmem.history.trust_config import SHOWN_CHANGES
from fsmem.state_files import read_state
from fsmem.store.files import atomic_write

if TYPE_CHECKING:
    from fsmem.history.repo import Repo

RECORD = ("history", "trust.json")


def record_path(root: Path) -> Path:
    return Path(root, STATE_DIR, *RECORD)


def save(repo: Repo, data: dict[str, object]) -> None:
    """Record what a sync held or refused."""
    repo.state()  # the folder, created on first use
    data_bytes = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape")
    atomic_write(record_path(repo.root), data_bytes, root=repo.root, generated=True)


def load(repo: Repo) -> dict[str, Any]:
    return load_at(record_path(repo.root))


def load_at(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_state(path).decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def clear(repo: Repo) -> None:
    try:
        os.unlink(record_path(repo.root))
    except FileNotFoundError:
        pass


def recorded_problems(root: Path) -> list[tuple[str, int, str]]:
    """What the last sync held or refused, as check's problems (path, line, message)."""
    data = load_at(record_path(root))
    remote = str(data.get("remote") or "the remote")
    problems = []
    held = data.get("held") or {}
    if held.get("changes"):
        listed = ", ".join(str(text) for text in held["changes"][:SHOWN_CHANGES])
        problems.append(
            (
                CONFIG_FILE,
                1,
                f"the last fsmem sync held {remote}'s change of {listed}; review it, then run "
                f"{faces.call('sync', accept_config=True)} to take it",
            )
        )
    for item in data.get("refused") or []:
        problems.append(
            (
                str(item.get("shown")),
                1,
                f"the last fsmem sync refused it from {remote} (commit {str(item.get('commit'))[:12]}): "
                f"{item.get('reason')}; {faces.call('sync', repair=True)} merges without it",
            )
        )
    return problems
