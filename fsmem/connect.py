"""What each MCP client needs to start fsmem, and adding it to that client's own config file.

A desktop app starts its servers without the user's PATH, so every entry names
this installation's `fsmem` by its absolute path (or this interpreter with
`-m fsmem`) and the memory by its absolute root. The entries are pure data
built here; `merged_json` and `merged_toml` add one to a config file's text
without touching its other servers or keys, and refuse a file they cannot
parse. A token for `fsmem serve` is never written: each entry names the
environment variable `FSMEM_TOKEN` in the client's own syntax.

Claude Code's hooks (`fsmem hook claude-code`) are a second block for the same
client, in its settings.json: `fsmem connect claude-code --hooks` prints it, and
with `--write` adds it there (`merged_hooks`), every other hook kept.

This module is long because it is one concern, merging into other programs' files in their three forms
(JSON, TOML, Claude Code's hooks), each refusing what it cannot read and keeping every other entry.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsmem.errors import InvalidArgument

SERVER_NAME = "fsmem"
TOKEN_ENV = "FSMEM_TOKEN"
CONFIG_LIMIT = 4 << 20  # a client's config file larger than this is not one
CLIENTS = ("claude-code", "claude-desktop", "codex", "cursor")
# the scopes each client has, its default first
SCOPES: dict[str, tuple[str, ...]] = {
    "claude-code": ("user", "project", "local"),
    "claude-desktop": ("user",),
    "codex": ("user", "project"),
    "cursor": ("user", "project"),
}


@dataclass(frozen=True)
class Plan:
    """What `fsmem connect` would change: the config file, its bytes now (None: absent) and after."""

    path: Path
    before: bytes | None
    after: bytes


def launcher() -> list[str]:
    """The command that starts this installation's fsmem: its `fsmem` script by absolute path, else `python -m fsmem`.

    The script is looked for beside the interpreter (a virtual environment's
    bin/ or Scripts/) and in the interpreter's scripts folder; the
    interpreter's path is kept as found, not resolved, so a venv stays a venv.
    """
    executable = os.path.abspath(sys.executable)
    name = "fsmem.exe" if os.name == "nt" else "fsmem"
    for folder in (os.path.dirname(executable), sysconfig.get_path("scripts")):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return [candidate]
    return [executable, "-m", "fsmem"]


def stdio_argv(root: Path, agent: str | None) -> list[str]:
    """The full command line a client runs for `fsmem mcp` on `root` (absolute), as `agent` when given."""
    argv = [*launcher(), "--root", str(root), "mcp"]
    return [*argv, "--agent", agent] if agent else argv


def stdio_entry(root: Path, agent: str | None) -> dict[str, Any]:
    """The `command`/`args` entry every client here takes for a server on stdio."""
    argv = stdio_argv(root, agent)
    return {"command": argv[0], "args": argv[1:]}


def http_entry(client: str, url: str) -> dict[str, Any]:
    """The entry for `fsmem serve` at `url`: the bearer token named by its environment variable, never its value."""
    if client == "codex":
        return {"url": url, "bearer_token_env_var": TOKEN_ENV}
    if client == "cursor":
        return {"url": url, "headers": {"Authorization": f"Bearer ${{env:{TOKEN_ENV}}}"}}
    if client == "claude-code":
        return {"type": "http", "url": url, "headers": {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}}
    raise InvalidArgument(
        "Claude Desktop adds remote servers in its Settings (Connectors), not in claude_desktop_config.json; "
        "connect it to a local memory instead (fsmem connect claude-desktop without --server)"
    )


def check_url(url: str) -> str:
    """`url` if it is an http(s) address, else a InvalidArgument."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgument(
            f"--server needs an http:// or https:// address, such as https://memory.example/mcp, not {url!r}"
        )
    return url


def claude_code_line(scope: str, *, root: Path | None = None, agent: str | None = None, url: str | None = None) -> str:
    """The `claude mcp add` command line, quoted for a POSIX shell (the token header single-quoted, so unexpanded)."""
    if url is not None:
        header = f"Authorization: Bearer ${{{TOKEN_ENV}}}"
        words = ["claude", "mcp", "add", "--scope", scope, "--transport", "http", SERVER_NAME, url, "--header", header]
    else:
        assert root is not None
        words = ["claude", "mcp", "add", "--scope", scope, SERVER_NAME, "--", *stdio_argv(root, agent)]
    return shlex.join(words)


def desktop_config_paths(home: Path, appdata: str | None) -> dict[str, Path | None]:
    """Where Claude Desktop keeps its config on each system (None: it has no official app there)."""
    windows = Path(appdata) if appdata else home / "AppData" / "Roaming"
    return {
        "macOS": home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json",
        "Windows": windows / "Claude" / "claude_desktop_config.json",
        "Linux": None,
    }


def system_name(platform: str = sys.platform) -> str:
    """This system as `desktop_config_paths` names it."""
    if platform == "darwin":
        return "macOS"
    return "Windows" if platform.startswith("win") else "Linux"


def config_path(client: str, scope: str, home: Path, cwd: Path, environ: dict[str, str]) -> Path | None:
    """The file `--write` changes for `client` in `scope` on this system (None: there is none to write)."""
    if client == "cursor":
        return (cwd if scope == "project" else home) / ".cursor" / "mcp.json"
    if client == "codex":
        if scope == "project":
            return cwd / ".codex" / "config.toml"
        return (
            Path(environ["CODEX_HOME"]) / "config.toml"
            if environ.get("CODEX_HOME")
            else home / ".codex" / "config.toml"
        )
    if client == "claude-desktop":
        return desktop_config_paths(home, environ.get("APPDATA"))[system_name()]
    if client == "claude-code" and scope == "project":
        return cwd / ".mcp.json"
    return None  # Claude Code's own ~/.claude.json is its to write: `claude mcp add` does it


def json_block(entry: dict[str, Any]) -> str:
    """The `mcpServers` block holding `entry`, as the JSON clients read it."""
    return json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2, ensure_ascii=False) + "\n"


def toml_string(value: str) -> str:
    """`value` as a TOML basic string (control characters and DEL escaped, as TOML requires)."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_table(entry: dict[str, Any]) -> str:
    """`entry` as codex's `[mcp_servers.fsmem]` table (strings and lists of strings only)."""
    lines = [f"[mcp_servers.{SERVER_NAME}]"]
    for key, value in entry.items():
        if isinstance(value, list):
            lines.append(f"{key} = [{', '.join(toml_string(v) for v in value)}]")
        else:
            lines.append(f"{key} = {toml_string(value)}")
    return "\n".join(lines) + "\n"


def _text(path: Path, before: bytes) -> str:
    try:
        return before.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{path} is not UTF-8 text (byte {exc.start}); nothing was changed") from None


def _json_with_object(path: Path, before: bytes | None, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A client's JSON config (empty when there is none) and its object at `key`, made when missing; a file
    that is not a JSON object, or whose `key` is not one, is refused with nothing changed."""
    document: Any = {}
    if before is not None and before.strip():
        try:
            document = json.loads(_text(path, before))
        except json.JSONDecodeError as e:
            raise InvalidArgument(f"{path} is not valid JSON ({e.msg}, line {e.lineno}); nothing was changed") from None
        except (ValueError, RecursionError):  # a number of over 4,300 digits; nesting deeper than Python's stack
            raise InvalidArgument(f"{path} is JSON that fsmem cannot read; nothing was changed") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object; nothing was changed")
    found = document.setdefault(key, {})
    if not isinstance(found, dict):
        raise InvalidArgument(f"{path}: {key} is not a JSON object; nothing was changed")
    return document, found


def merged_json(path: Path, before: bytes | None, entry: dict[str, Any], *, force: bool) -> bytes | None:
    """The config file `path` with `entry` as its `mcpServers.fsmem` (None: already so), every other key kept.

    The file is rewritten with two-space indents in its own key order: a file
    already so written changes only by the entry's lines.
    """
    document, servers = _json_with_object(path, before, "mcpServers")
    if servers.get(SERVER_NAME) == entry:
        return None
    if SERVER_NAME in servers and not force:
        raise InvalidArgument(
            f"{path} already has an {SERVER_NAME!r} server, different from this one; nothing was changed "
            "(--force replaces it)"
        )
    servers[SERVER_NAME] = entry
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def merged_toml(path: Path, before: bytes | None, entry: dict[str, Any], *, force: bool) -> bytes | None:
    """Codex's config `path` with `entry` as `[mcp_servers.fsmem]` (None: already so), the rest kept byte for byte.

    The table is appended as text; with `force`, an existing `[mcp_servers.fsmem]`
    table (and its sub-tables) is cut out first. The result is parsed again
    and must hold exactly the old document plus the entry.
    """
    import tomllib

    text = _text(path, before) if before is not None else ""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{path} is not valid TOML ({exc}); nothing was changed") from None
    servers = document.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise InvalidArgument(f"{path}: mcp_servers is not a table; nothing was changed")
    if servers.get(SERVER_NAME) == entry:
        return None
    if SERVER_NAME in servers:
        if not force:
            raise InvalidArgument(
                f"{path} already has an [mcp_servers.{SERVER_NAME}] server, different from this one; "
                "nothing was changed (--force replaces it)"
            )
        text = _without_table(text)
    if text and not text.endswith("\n"):
        text += "\n"
    after = text + ("\n" if text.strip() else "") + toml_table(entry)
    expected = {**document, "mcp_servers": {**servers, SERVER_NAME: entry}}
    try:
        parsed = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed != expected:
        raise InvalidArgument(
            f"{path} defines mcp_servers in a form fsmem cannot extend as text (an inline table, or "
            f"[mcp_servers.{SERVER_NAME}] written another way); nothing was changed: add this table by hand:\n"
            + toml_table(entry).rstrip("\n")
        )
    return after.encode()


def _without_table(text: str) -> str:
    """`text` without its `[mcp_servers.fsmem]` table and sub-tables (header line up to the next other header)."""
    import re

    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    own = re.compile(rf"^mcp_servers\s*\.\s*\"?{SERVER_NAME}\"?(\s*\..*)?$")
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        match = header.match(line)
        if match:
            skipping = bool(own.match(match.group(1)))
        if not skipping:
            kept.append(line)
    return "".join(kept).rstrip("\n") + "\n" if kept else ""


def read_config(path: Path) -> bytes | None:
    """The bytes of the config file `path` (None: there is none yet), refused at once if it is a FIFO or a device."""
    from fsmem.errors import NotFound
    from fsmem.store import outside_files

    try:
        return outside_files.read_bytes(path, what="config file", limit=CONFIG_LIMIT, error=InvalidArgument)
    except NotFound:
        return None


def plan(client: str, path: Path, entry: dict[str, Any], *, force: bool) -> Plan | None:
    """What writing `entry` into `client`'s config file `path` changes (None: nothing to change)."""
    before = read_config(path)
    merge = merged_toml if client == "codex" else merged_json
    after = merge(path, before, entry, force=force)
    return None if after is None else Plan(path, before, after)


def diff(change: Plan) -> str:
    """`change` as a unified diff, as `git diff` would show it, each secret in it redacted: a file the write
    reformats (one written on one line) shows every line, an `env` API key among them, and the diff goes to a
    terminal and its logs. The file itself keeps them."""
    import difflib

    from fsmem.format import secrets

    before = change.before.decode("utf-8-sig", "replace") if change.before is not None else ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        change.after.decode().splitlines(keepends=True),
        fromfile=str(change.path) if change.before is not None else "/dev/null",
        tofile=str(change.path),
    )
    return secrets.redact(
        "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    )


def apply(change: Plan) -> None:
    """Write `change` atomically (a reader sees the old file or the new one), unless the file changed meanwhile.
    A link (a dotfiles folder's) is written where it leads if a file is there: one that leads nowhere would make
    folders and a file wherever it says (a project's `.claude/settings.json` comes with the project)."""
    from fsmem.store.files import atomic_write

    path = change.path.resolve() if change.path.is_symlink() else change.path
    if path != change.path and not path.is_file():
        raise InvalidArgument(f"{change.path} is a link to {path}, which is no file; nothing was changed")
    if read_config(path) != change.before:
        raise InvalidArgument(f"{change.path} changed while fsmem was reading it; nothing was changed: run again")
    atomic_write(path, change.after)


HOOK_MARK = " hook claude-code"  # what every fsmem hook command holds, whatever fsmem's path


def hooks_settings_path(scope: str, home: Path, cwd: Path) -> Path:
    """Claude Code's settings file for `scope`: the user's, the project's shared one, or the project's local one."""
    if scope == "project":
        return cwd / ".claude" / "settings.json"
    if scope == "local":
        return cwd / ".claude" / "settings.local.json"
    return home / ".claude" / "settings.json"


def _is_fsmem_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and HOOK_MARK in hook["command"]


def merged_hooks(
    path: Path, before: bytes | None, block: dict[str, Any], *, force: bool, left_out: tuple[str, ...] = ()
) -> bytes | None:
    """Claude Code's settings `path` with fsmem's hook on each event of `block` and on none of `left_out` (None:
    already so).

    Every other hook, matcher and setting is kept; an fsmem hook that runs another command (an older
    install) is replaced only with `force`.
    """
    document, hooks = _json_with_object(path, before, "hooks")
    changed = False
    for event in left_out:
        present = hooks.get(event)
        if not isinstance(present, list) or not any(
            _is_fsmem_hook(h) for g in present if isinstance(g, dict) for h in _hooks_of(path, event, g)
        ):
            continue
        _drop_fsmem_hooks(present)
        if not present:
            del hooks[event]
        changed = True
    for event, groups in block["hooks"].items():
        ours = groups[0]["hooks"][0]
        present = hooks.setdefault(event, [])
        if not isinstance(present, list) or not all(isinstance(g, dict) for g in present):
            raise InvalidArgument(f"{path}: hooks.{event} is not a list of matcher groups; nothing was changed")
        found = [h for g in present for h in _hooks_of(path, event, g) if _is_fsmem_hook(h)]
        if any(h == ours for h in found) and len(found) == 1:
            continue
        if found and not force:
            raise InvalidArgument(
                f"{path} already runs another fsmem hook on {event}; nothing was changed (--force replaces it)"
            )
        _drop_fsmem_hooks(present)
        present.append({"hooks": [ours]})
        changed = True
    if not changed:
        return None
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def _hooks_of(path: Path, event: str, group: dict[str, Any]) -> list[Any]:
    """A matcher group's hooks (none when it names none); a group whose `hooks` is no list is refused."""
    if isinstance(hooks := group.get("hooks") or [], list):
        return hooks
    raise InvalidArgument(f"{path}: a matcher group of hooks.{event} has hooks that are no list; nothing was changed")


def _drop_fsmem_hooks(groups: list[Any]) -> None:
    """`groups` (one event's matcher groups) without fsmem's hooks, and without a group they leave empty."""
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            group["hooks"] = [h for h in group["hooks"] if not _is_fsmem_hook(h)]
    groups[:] = [g for g in groups if not isinstance(g, dict) or g.get("hooks") or not isinstance(g.get("hooks"), list)]


def plan_hooks(path: Path, block: dict[str, Any], *, force: bool, left_out: tuple[str, ...] = ()) -> Plan | None:
    """What adding fsmem's hooks to Claude Code's settings `path` (and removing them from `left_out`) changes
    (None: nothing to change)."""
    before = read_config(path)
    after = merged_hooks(path, before, block, force=force, left_out=left_out)
    return None if after is None else Plan(path, before, after)
