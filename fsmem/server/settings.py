"""What `fsmem serve` serves and how: the address, the memories by name, the token store, and the limits.

Read from a YAML file (`fsmem serve --config FILE`), then overridden by the
command line. Nothing here imports the web stack, so a wrong setting is
reported before any of it loads.

```yaml
host: 127.0.0.1            # any other address must be asked for, here or with --host
port: 8765
tokens: /etc/fsmem/tokens.json
log: /var/log/fsmem/requests.jsonl   # one JSON line per request; default: standard error
memories:
  team: /srv/memory/team
  research: /srv/memory/research
allowed_origins: []        # web pages (scheme://host[:port]) whose scripts may call; none by default
allowed_hosts: []          # Host names the server answers to besides 127.0.0.1, localhost and [::1]
processes: 1               # server processes (auto: one per usable core); each token is served by one of them
limits:
  max_request_bytes: 1048576
  max_answer_tokens: 8000
  rate_per_second: 10
  burst: 20
  concurrency: 4
  ...
```
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fsmem.config import CONFIG_FILE
from fsmem.errors import ConfigError, FsmemError
from fsmem.server.tokens import check_memory_name, default_path
from fsmem.store import outside_files

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
CONFIG_LIMIT = outside_files.MiB  # server.yaml: a few lines per memory
LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")  # as a Host header names them (without the port)


@dataclass(frozen=True)
class Limits:
    """Caps that keep one caller from holding the server: sizes, rates, concurrency and time."""

    max_request_bytes: int = 1 << 20  # a request body larger than this is refused (413)
    max_answer_tokens: int = 8000  # no answer is longer, whatever an agent's budget says
    rate_per_second: float = 10.0  # requests a token may make per second, on average ...
    burst: int = 20  # ... and at once after a quiet spell (429 with Retry-After past it)
    concurrency: int = 4  # one token's costly requests in flight at once, and apart from them its cheap ones (429)
    max_in_flight: int = 64  # requests in flight in all (503 past it)
    workers: int = 8  # threads that run costly read tools (and half as many for writes); the rest wait their turn
    cheap_workers: int = 8  # threads of their own for cheap reads (ls, read, show): never behind a search
    read_timeout_seconds: float = 10.0  # to receive a request body (408 past it)
    header_timeout_seconds: float = 10.0  # to receive a request's line and headers (the connection closed past it)
    tool_timeout_seconds: float = 30.0  # a read tool's answer is awaited this long, then refused
    send_timeout_seconds: float = 10.0  # to hand an answer to a client that does not read (then dropped)
    keep_alive_seconds: float = 5.0  # an idle connection is closed after this
    shutdown_grace_seconds: float = 30.0  # on SIGTERM, in-flight requests get this long to finish
    max_connections: int = 256  # open connections in all (503 past it); without a valid token, at most half
    streams: int = 1  # GET /mcp event streams one token may hold open (429 past it); not counted in concurrency
    max_streams: int = 32  # event streams open in all (503 past it)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"unknown server limit {key!r}; the limits are: {', '.join(known)}")
            kind = int if known[key].type in ("int", int) else float
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"server limit {key} must be a number above 0, not {value!r}")
            if kind is int and value != int(value):
                raise ConfigError(f"server limit {key} must be a whole number, not {value!r}")
            values[key] = kind(value)
        limits = cls(**values)
        if limits.burst < 1:
            raise ConfigError("server limit burst must be at least 1")
        return limits


@dataclass
class ServerSettings:
    """Where the server listens, what it serves, who may call (tokens; browser origins and Host names) and its limits.

    `allowed_origins`: a request with an `Origin` header (a browser's, on behalf of a web page) is refused
    (403) unless its origin is listed, exactly as `scheme://host[:port]`; with none listed no page may
    call, which is right for a server on this machine (the MCP specification's defence against DNS
    rebinding). `allowed_hosts`: the `Host` header must name 127.0.0.1, localhost or [::1] (any port)
    when the server listens on a loopback address, or one of these names (a reverse proxy's public
    name); listening elsewhere without any, the Host is not checked.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    memories: dict[str, Path] = field(default_factory=dict)
    tokens: Path = field(default_factory=default_path)
    log: Path | None = None
    limits: Limits = field(default_factory=Limits)
    allowed_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)
    processes: int = 1  # see `processes()`: 1 unless asked (`auto`: one per usable core)

    def hosts(self) -> frozenset[str] | None:
        """The Host names (lowercase, without a port) requests must name; None when any will do."""
        named = {h.lower() for h in self.allowed_hosts}
        if self.host in LOOPBACK:
            return frozenset(named | set(LOOPBACK_HOSTS))
        return frozenset(named) if named else None

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> ServerSettings:
        """Settings from a YAML file (or the defaults); paths in it are relative to the file's folder."""
        if path is None:
            return cls()
        file = Path(path).expanduser()
        text = outside_files.read_text(file, what="the server configuration", limit=CONFIG_LIMIT, error=ConfigError)
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{file} must be a mapping of settings")
        known = {"host", "port", "memories", "tokens", "log", "limits", "allowed_origins", "allowed_hosts", "processes"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"{file}: unknown setting(s) {', '.join(unknown)}; the settings are {', '.join(sorted(known))}"
            )
        base = file.resolve().parent
        settings = cls()
        if "host" in data:
            settings.host = str(data["host"])
        if "port" in data:
            settings.port = _port(data["port"])
        memories = data.get("memories") or {}
        if not isinstance(memories, dict):
            raise ConfigError(f"{file}: memories must map names to folders, such as 'team: /srv/memory/team'")
        for name, folder in memories.items():
            settings.add_memory(str(name), base / Path(str(folder)).expanduser())
        if data.get("tokens"):
            settings.tokens = base / Path(str(data["tokens"])).expanduser()
        if data.get("log"):
            settings.log = base / Path(str(data["log"])).expanduser()
        limits = data.get("limits") or {}
        if not isinstance(limits, dict):
            raise ConfigError(f"{file}: limits must be a mapping")
        settings.limits = Limits.from_dict(limits)
        settings.allowed_origins = [_origin(item, file) for item in _names(data, "allowed_origins", file)]
        settings.allowed_hosts = [_host_name(item, file) for item in _names(data, "allowed_hosts", file)]
        if "processes" in data:
            settings.processes = processes(data["processes"])
        return settings

    def add_memory(self, name: str, folder: str | os.PathLike[str]) -> None:
        """Serve the memory at `folder` as `name` (at /mcp/NAME, and at /mcp for its tokens)."""
        try:
            check_memory_name(name)
        except FsmemError as exc:
            raise ConfigError(str(exc)) from None
        root = Path(folder).expanduser().resolve()
        if os.path.lexists(root) and not root.is_dir():
            raise ConfigError(f"memory {name!r}: not an fsmem memory: {root} is not a folder")
        if not (root / CONFIG_FILE).is_file():
            raise ConfigError(
                f"memory {name!r}: not an fsmem memory: {root} holds no {CONFIG_FILE} (create one with: fsmem init {root})"
            )
        if name in self.memories and self.memories[name] != root:
            raise ConfigError(f"memory name {name!r} is given twice, for {self.memories[name]} and {root}")
        self.memories[name] = root

    def check(self) -> list[str]:
        """Refuse what cannot be served safely; return warnings for what can but should not be."""
        if not self.memories:
            raise ConfigError("no memory to serve: give --memory NAME=PATH (repeatable) or memories: in --config FILE")
        if self.processes > 1 and not hasattr(socket, "send_fds"):
            raise ConfigError(
                f"processes: {self.processes} needs a system that passes sockets between processes (SCM_RIGHTS), "
                "which this one (Windows) does not; serve with processes: 1"
            )
        store = Path(os.path.realpath(self.tokens))
        for name, root in self.memories.items():
            if store == root or root in store.parents:
                raise ConfigError(
                    f"the token store {self.tokens} is inside memory {name!r} ({root}); keep it outside every memory"
                )
        if self.log is not None:
            outside_files.output_file(self.log, what="the request log", error=ConfigError)
        if os.path.lexists(self.tokens):
            outside_files.output_file(self.tokens, what="the token store", error=ConfigError)
        warnings = []
        try:
            mode = os.stat(self.tokens).st_mode & 0o077
        except FileNotFoundError:
            warnings.append(
                f"the token store {self.tokens} does not exist yet: every request is refused until 'fsmem token create'"
            )
        else:
            if mode:
                warnings.append(f"the token store {self.tokens} is readable by other users; chmod 600 it")
        if self.host not in LOOPBACK:
            warnings.append(
                f"listening on {self.host}, not only this machine: put a reverse proxy with TLS in front (README, 'A memory server')"
            )
        return warnings


def _names(data: dict[str, Any], key: str, file: Path) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ConfigError(f"{file}: {key} must be a list of names, such as [https://app.example.com]")
    return [item.strip() for item in value]


def _origin(value: str, file: Path) -> str:
    """An origin as browsers send it: scheme://host[:port], lowercase, no path."""
    origin = value.rstrip("/").lower()
    if not re.fullmatch(r"https?://[a-z0-9.\-]+(:\d{1,5})?|https?://\[[0-9a-f:.]+\](:\d{1,5})?", origin):
        raise ConfigError(
            f"{file}: allowed_origins takes origins such as https://app.example.com or http://localhost:3000, "
            f"not {value!r}"
        )
    return origin


def _host_name(value: str, file: Path) -> str:
    """A Host header's name without its port: memory.example.com, 10.0.0.5, [fd00::1]."""
    name = value.lower()
    if not re.fullmatch(r"[a-z0-9.\-]+|\[[0-9a-f:.]+\]", name):
        raise ConfigError(f"{file}: allowed_hosts takes host names such as memory.example.com (no port), not {value!r}")
    return name


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def processes(value: Any) -> int:
    """A `processes` setting: a whole number from 1, or "auto" (`usable_cores()`).

    The default is 1. More serve more: on two cores a team's server answered 72 calls a second of new
    questions with one process and 117 with two (10k files). But each more costs its own views of the
    memories and its own mapping of their search index, its own `max_in_flight`, `max_connections` and
    `max_streams`, and concurrent writers then wait for the memory's write lock across processes (with
    sixteen clients writing at once on a loaded machine a write could be given up); a proxy must not reuse
    one connection for several tokens (docs/server.md, "Several processes"). So an operator who wants every
    core says `auto`. Where sockets cannot be passed between processes (Windows), `auto` is 1 and a number
    above 1 is refused by `check()`: a server quietly running one process where several were asked for would hide why it is slower.
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        return usable_cores() if hasattr(socket, "send_fds") else 1
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
        raise ConfigError(f"processes must be a whole number from 1 to 64, or auto, not {value!r}")
    return value


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"port must be a number from 0 to 65535, not {value!r}")
    return value
