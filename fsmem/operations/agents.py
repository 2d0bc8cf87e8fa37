"""`fsmem agent add`: declare an agent in fsmem.yaml without opening an editor, keeping the file as written.

Not an operation of a memory's contents (no agent tool offers it, as none offers `token`): it changes who
gets which budget, a setting that `fsmem sync` holds when a remote changes it (`history.trust_config`).
The text edit is `fsmem.config.edit.with_agent`; here the file is read, the result checked as fsmem.yaml
is checked, and written atomically under the memory's write lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsmem.config import CONFIG_FILE, Config
from fsmem.config.edit import with_agent
from fsmem.config.parse import MAX_CONFIG_BYTES, parse_config
from fsmem.errors import ConfigError
from fsmem.store.files import atomic_write, file_lock
from fsmem.store.root import discover_root


@dataclass
class AgentAdded:
    """What `fsmem agent add` declared, and where."""

    agent: str
    config: str
    settings: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        own = ", ".join(f"{key} {_shown(value)}" for key, value in self.settings.items()) or "the default budget"
        whole = ", ".join(f"{key} {_shown(value)}" for key, value in self.budget.items())
        return f"declared agent {self.agent} in {self.config} ({own}; its budget: {whole})"


def _shown(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def add_agent(
    root: str | Path | None,
    name: str,
    *,
    read_only: bool | None = None,
    max_tokens: int | None = None,
    max_results: int | None = None,
) -> AgentAdded:
    """Declare agent `name` under `budgets.agents` of the memory's fsmem.yaml, with what is given of its budget."""
    folder = discover_root(root)
    path = folder / CONFIG_FILE
    settings: dict[str, Any] = {}
    if max_tokens is not None:
        settings["max_tokens"] = max_tokens
    if max_results is not None:
        settings["max_results"] = max_results
    if read_only is not None:
        settings["read_only"] = read_only
    with file_lock(folder):
        data = path.read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; fsmem does not edit it")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not UTF-8 text; fsmem edits only a file it can read whole") from None
        edited = with_agent(text, name, settings).encode("utf-8")
        before, after = parse_config(data, str(path)), parse_config(edited, str(path))
        config = Config.checked(after, str(path), lambda: edited.decode("utf-8"))
        if _without(after, name) != _without(before, name) or name not in config.budgets.agents:
            raise ConfigError(f"{path}: the edit would change more than budgets.agents.{name}; declare it by hand")
        atomic_write(path, edited, root=folder, generated=True)  # fsmem.yaml itself, never a link's target
    budget = config.budget_for(name)
    whole = {"max_tokens": budget.max_tokens, "max_results": budget.max_results, "read_only": budget.read_only}
    return AgentAdded(name, str(path), settings, whole)


def _without(data: dict[str, Any], name: str) -> Any:
    """The parsed file with agent `name` (and an `agents:` that held only it) left out, to compare."""
    budgets = dict(data.get("budgets") or {})
    agents = dict(budgets.get("agents") or {})
    agents.pop(name, None)
    budgets["agents"] = agents
    return {**data, "budgets": budgets}
