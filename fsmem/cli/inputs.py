"""How a shell hands an operation its inputs: the adapters the specs name (`fsmem.spec.Cli.inputs`).

Each takes what was typed (None when the command line has no such option),
the other values given, and the command being run (`Invocation`: click's
context, or the lean path's), and returns the value the operation takes: a
`-` that means stdin, a body read from stdin, `KEY=VALUE` pairs parsed as
YAML, a file of what the agent already holds, the global --agent, a progress
bar on a terminal. They are the command line's alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fsmem.budget import echo
from fsmem.errors import InvalidArgument
from fsmem.store import outside_files

if TYPE_CHECKING:
    import click

    from fsmem.memory import Memory

STDIN_LIMIT = 64 * outside_files.MiB  # a note or a body read from standard input
SEEN_LIMIT = 16 * outside_files.MiB  # what an agent holds in its context is far smaller


class Invocation(Protocol):
    """The command an adapter serves: the global --agent, its memory (opened once), and what runs at its end."""

    @property
    def agent(self) -> str | None: ...

    def memory(self) -> Memory: ...

    def on_close(self, callback: Callable[[], Any]) -> None: ...


Input = Callable[[Any, dict[str, Any], Invocation], Any]


def adapted(inputs: dict[str, str], given: dict[str, Any], invocation: Invocation) -> dict[str, Any]:
    """`given` with each input its adapter's value (`inputs`: parameter -> adapter, the spec's `Cli.inputs`)."""
    for name, adapter in inputs.items():
        given[name] = INPUTS[adapter](given.get(name), given, invocation)
    return given


def text_or_stdin(text: str, given: dict[str, Any], invocation: Invocation) -> str:
    """note's TEXT, or standard input for `-`."""
    if text == "-":
        return outside_files.read_stdin(what="the note", limit=STDIN_LIMIT)
    return text


def body_from_stdin(_: None, given: dict[str, Any], invocation: Invocation) -> str | None:
    """write's body: standard input, unless --keep-body or stdin is a terminal; an empty stdin keeps the body."""
    if given.get("keep_body") or sys.stdin.isatty():
        return None
    return outside_files.read_stdin(what="the body", limit=STDIN_LIMIT) or None


def parse_sets(pairs: tuple[str, ...], given: dict[str, Any], invocation: Invocation) -> dict[str, Any]:
    """write's --set KEY=VALUE pairs, each value read as YAML (a mapping, an anchor or an alias stays text)."""
    import yaml

    fields = {}
    for pair in pairs:
        if "=" not in pair:
            raise InvalidArgument(f"--set takes key=value, not {echo(pair)}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if not key.replace("_", "").replace("-", "").isalnum():
            raise InvalidArgument(f"--set: {echo(key)} is not a valid field name")
        try:
            if ("&" in value or "*" in value) and _has_alias(yaml, value):
                raise InvalidArgument(
                    f"--set {key}: YAML anchors and aliases (&name, *name) are not taken in a value; "
                    f"to set it as text, quote it: --set '{key}=\"…\"'"
                )
            parsed = yaml.safe_load(value) if value.strip() else ""
        except (yaml.YAMLError, ValueError):  # ValueError: a date-shaped value that is no date, 2026-13-45
            parsed = value
        except RecursionError:
            raise InvalidArgument(f"--set {key}: the value is nested too deeply; give a plain value") from None
        if isinstance(parsed, dict):
            parsed = value  # 'a: b' is meant as text, not a nested mapping
        fields[key] = parsed
    return fields


def _has_alias(yaml: Any, value: str) -> bool:
    """True when the YAML value names an anchor or an alias: `&a [*a]` would be a list that holds itself."""
    try:
        return any(isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) for event in yaml.parse(value))
    except yaml.YAMLError:
        return False


def read_seen(path: str | None, given: dict[str, Any], invocation: Invocation) -> str | None:
    """recall's --seen-file: the file's text ('-': stdin)."""
    if path is None:
        return None
    return outside_files.read_bytes(path, what="--seen-file", limit=SEEN_LIMIT, stdin=True).decode("utf-8", "replace")


def global_agent(_: None, given: dict[str, Any], invocation: Invocation) -> str | None:
    """The agent a history or stats query narrows to: on the command line, the global --agent."""
    return invocation.agent


def rev_or_path(rev: str | None, given: dict[str, Any], invocation: Invocation) -> str | None:
    """diff's one argument, taken as PATH when it names a memory file or folder."""
    if rev is None or given.get("path") is not None:
        return rev
    root = invocation.memory().root
    if rev.lower().endswith((".md", ".markdown")) or (".." not in rev and (root / rev).is_dir() and rev[:1] != "-"):
        given["path"] = rev
        return None
    return rev


class ProgressBar:
    """A progress bar on stderr, only on a terminal and only when there is much to do (quiet under cron)."""

    def __init__(self, min_items: int):
        self.min_items = min_items
        self.bar: click.progressbar | None = None  # type: ignore[valid-type]
        self.stage: str | None = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if total < self.min_items or not sys.stderr.isatty():
            return
        if stage != self.stage:
            self.close()
            self.stage = stage
            import click

            from fsmem.cli.printing import visible

            self.bar = click.progressbar(length=total, label=visible(stage), file=sys.stderr)  # click writes it
            self.bar.__enter__()
        assert self.bar is not None
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def progress_bar(_: None, given: dict[str, Any], invocation: Invocation) -> ProgressBar:
    """consolidate's progress: a bar past `consolidate.progress_min_notes` notes, closed when the command ends."""
    bar = ProgressBar(invocation.memory().config.consolidate.progress_min_notes)
    invocation.on_close(bar.close)
    return bar


INPUTS: dict[str, Input] = {
    "text_or_stdin": text_or_stdin,
    "body_from_stdin": body_from_stdin,
    "parse_sets": parse_sets,
    "read_seen": read_seen,
    "global_agent": global_agent,
    "rev_or_path": rev_or_path,
    "progress_bar": progress_bar,
}
