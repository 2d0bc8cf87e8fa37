"""`fsmem hook claude-code`: the command Claude Code runs as its SessionStart, UserPromptSubmit, Stop, PreCompact
and SessionEnd hook.

It never blocks the session, with one documented exception: on Stop, once per
session, it may ask the agent to save what it learned (`fsmem.hooks.asking`).
Whatever goes wrong (bad input, a broken or missing transcript, no memory, a
disk that refuses the write, a hang past `--timeout`) it exits 0 and prints
nothing, and says what happened in `.fsmem/logs/hooks.jsonl` (or on stderr when
there is no memory to log in, which Claude Code shows only in verbose mode). An
exit 2 would block PreCompact's compaction.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from fsmem.cli.options import command
from fsmem.cli.printing import echo

HOOK_LOG = "hooks.jsonl"
DEFAULT_TIMEOUT = 10.0  # seconds; the printed block gives Claude Code's `timeout` 5 more, so fsmem stops first
PROMPT_TIMEOUT = 4.0  # UserPromptSubmit: the person waits for it on every prompt


@click.group("hook")
def hook_group() -> None:
    """Commands that agent hosts run as hooks."""


def _log(root: Path | None, record: dict[str, Any]) -> None:
    """One line in the memory's hook log; on stderr when there is no memory or the log cannot be written."""
    if root is not None:
        from fsmem.store import logs

        try:
            logs.append(root, HOOK_LOG, {"hook": "claude-code", **record})
            return
        except Exception:  # noqa: BLE001 - an unwritable log falls back to stderr, never fails the hook
            pass
    try:
        echo(f"fsmem hook: {record.get('error') or record}", err=True)
    except (OSError, ValueError):
        pass


def _root_of(ctx: click.Context, cwd: str | None) -> Path:
    from fsmem.store.root import discover_root

    obj = ctx.find_root().obj or {}
    start = Path(cwd) if cwd and os.path.isdir(cwd) else None
    return discover_root(obj.get("root"), start=start)


def _fsmem_command() -> str:
    """The absolute path of this installation's `fsmem` (beside the interpreter, else on PATH)."""
    beside = Path(sys.executable).parent / ("fsmem.exe" if os.name == "nt" else "fsmem")
    found = str(beside) if beside.is_file() else shutil.which("fsmem") or str(beside)
    return os.path.abspath(found)  # absolute and without `..`, symlinks kept: a venv's python links elsewhere


def _entry(root: Path, timeout: float) -> dict[str, Any]:
    words = [_fsmem_command(), "--root", str(root), "hook", "claude-code", "--timeout", f"{timeout:g}"]
    line = subprocess.list2cmdline(words) if os.name == "nt" else shlex.join(words)
    return {"type": "command", "command": line, "timeout": int(timeout) + 5}


def hooks_config(root: Path, timeout: float, *, ask_to_save: bool = True) -> dict[str, Any]:
    """The `hooks` block of Claude Code's settings.json registering this command on its events (Stop only when
    `ask_to_save`); UserPromptSubmit, which the person waits for, gets a shorter time limit."""
    entry = _entry(root, timeout)
    events = {
        "SessionStart": entry,
        "UserPromptSubmit": _entry(root, min(timeout, PROMPT_TIMEOUT)),
        "Stop": entry,
        "PreCompact": entry,
        "SessionEnd": entry,
    }
    if not ask_to_save:
        del events["Stop"]
    return {"hooks": {event: [{"hooks": [hook]}] for event, hook in events.items()}}


@command("claude-code")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=55.0),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds after which the hook stops and exits 0, whatever it was doing.",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0.0, max=55.0),
    default=None,
    help="Seconds the hook spends saving before it stops between two parts and leaves the rest to the next "
    "command (default: half of --timeout); each event saves at least one part.",
)
@click.option("--print-config", is_flag=True, help="Print the hooks block for Claude Code's settings.json and exit.")
@click.option(
    "--ask-to-save/--no-ask-to-save",
    default=True,
    help="With --print-config: include the Stop hook, which asks the agent once per session to save what it "
    "learned as keyed notes (default: included).",
)
@click.pass_context
def claude_code_cmd(
    ctx: click.Context, timeout: float, budget: float | None, print_config: bool, ask_to_save: bool
) -> None:
    """Run as Claude Code's hook: the event's JSON on stdin; context on SessionStart, relevant memory on
    UserPromptSubmit, once per session a request for keyed notes on Stop, the session saved on SessionEnd and
    PreCompact. Always exits 0; problems go to .fsmem/logs/hooks.jsonl."""
    if print_config:
        root = _root_of(ctx, None)  # a missing memory is an error here: a person is asking
        echo(json.dumps(hooks_config(root, timeout, ask_to_save=ask_to_save), indent=2))
        return
    deadline = time.monotonic() + (timeout / 2 if budget is None else min(budget, timeout))
    state: dict[str, Any] = {"root": None, "event": None, "deadline": deadline}

    def give_up() -> None:
        _log(state["root"], {"event": state["event"], "error": f"stopped after the {timeout:g} s time limit"})
        os._exit(0)  # writes are atomic and locks die with the process: nothing is left half-done

    timer = threading.Timer(timeout, give_up)
    timer.daemon = True
    timer.start()
    try:
        _run(ctx, state)
    except BaseException as exc:  # noqa: BLE001 - the hook never fails the session, whatever happened
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        _log(state["root"], {"event": state["event"], "error": _message(exc)})
    finally:
        timer.cancel()
    ctx.exit(0)


def _message(exc: BaseException) -> str:
    from fsmem.errors import FsmemError, translated

    if isinstance(exc, FsmemError):
        return str(exc)
    error = translated(exc) if isinstance(exc, Exception) else None
    return str(error) if error is not None else f"{type(exc).__name__}: {exc}"


def _run(ctx: click.Context, state: dict[str, Any]) -> None:
    from fsmem.hooks import asking, claude_code as cc, prompting, runner
    from fsmem.memory import Memory
    from fsmem.store.outside_files import read_stdin

    try:  # known before stdin is read, so that an error there (or the time limit) is logged in the memory
        state["root"] = _root_of(ctx, None)
    except Exception:  # noqa: BLE001 - the event's cwd may still lead to one
        pass
    event = cc.parse_event(read_stdin(what="the hook's input", limit=cc.STDIN_LIMIT))
    state["event"] = event.name
    state["root"] = root = state["root"] or _root_of(ctx, event.cwd)
    if event.name not in cc.EVENTS:
        _log(root, {"event": event.name, "error": f"not an event fsmem handles ({', '.join(cc.EVENTS)}); ignored"})
        return
    obj = ctx.find_root().obj or {}
    with Memory(root, agent=obj.get("agent")) as memory:
        if event.name == "SessionStart":
            outcome = runner.session_start(memory)
        elif event.name == "UserPromptSubmit":
            outcome = prompting.recall_for_prompt(memory, event)
        elif event.name == "Stop":
            outcome = asking.ask_to_save(memory, event, deadline=state["deadline"])
        else:
            outcome = runner.save_session(memory, event, deadline=state["deadline"])
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
        sys.stdout.flush()
    record: dict[str, Any] = {"event": event.name, "session_id": event.session_id}
    if event.name == "Stop":
        record.update(asked_to_save=bool(outcome.stdout))
    elif event.name == "UserPromptSubmit":
        record.update(added_context=bool(outcome.stdout))
    if outcome.note is not None:
        record.update(note=outcome.note, lines=outcome.saved_lines)
    if outcome.subagent_lines:
        record.update(subagent_lines=outcome.subagent_lines)
    if not outcome.finished:
        record.update(unfinished="the time budget ran out; the next event, import or consolidate saves the rest")
    for problem in outcome.problems:
        _log(root, {**record, "error": problem})
    if not outcome.problems:
        _log(root, record)


hook_group.add_command(claude_code_cmd)
