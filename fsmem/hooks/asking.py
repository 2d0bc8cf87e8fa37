"""The Stop hook: once per session, ask the agent to save what it learned as keyed notes, at the moment it stops.

A Stop hook may answer `{"decision": "block", "reason": "..."}`; Claude Code then
does not stop and gives the model the reason as its next instruction, and the
next Stop event carries `"stop_hook_active": true` (Claude Code's hooks reference,
https://code.claude.com/docs/en/hooks, "Stop and SubagentStop" input and decision
control; the same schema is in Claude Code 2.1's own settings check: `decision`
is `"approve"` or `"block"`, `reason` a string). This is the one event on which
fsmem's hook may block, and it asks only when all of these hold:

- `stop_hook_active` is false (never a second round in one turn);
- it has not asked in this session before (`Looked.asked`, host-local state);
- the session brought new material: at least `NEW_LINES` lines of transcript
  beyond what the memory's session note holds (its `imported_bytes`);
- the agent wrote nothing to the memory during the session: no successful call
  of fsmem's `note`, `write` or `edit` tool, and no `fsmem ... note|write|edit`
  shell command, in the session's own transcript.

Why the transcript: it is this session's own record of what the agent did. The
memory cannot say which session wrote a note: the MCP server never learns
Claude Code's session id, and `fsmem note` files a note under the agent's name
and this host, shared by every session of that agent.

Whatever goes wrong here (a broken memory, an unreadable transcript, state that
cannot be written, the time budget spent) means no block: the caller prints
nothing unless this returns a decision, and a memory that fails must never keep
an agent from stopping.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsmem.hooks import claude_code as cc
from fsmem.hooks.runner import Outcome
from fsmem.state_files import read_state
from fsmem.store.files import atomic_write, state_dir

if TYPE_CHECKING:
    from fsmem.memory import Memory

NEW_LINES = 8  # one block of a session note: a greeting and an answer are not worth asking about
FRONT_BYTES = 64 << 10  # a session note's front matter lies in its first bytes
WRITING_TOOLS = ("note", "write", "edit")
# an MCP tool of fsmem's server, as Claude Code names it: mcp__<server>__<tool> (a plugin's: mcp__plugin_x_fsmem__…)
_MCP_TOOL = re.compile(r"^mcp__(?:.*[^A-Za-z0-9])?fsmem(?:[^A-Za-z0-9].*)?__(?P<tool>[a-z_]+)$")
# longer is no tool's name (the Messages API takes 64 characters), and the pattern takes cubic time in a name:
# 5,000 characters of `fsmem__` took 3 s, 21,000 minutes
TOOL_NAME_CHARS = 256
_GLOBAL_VALUES = ("--root", "--agent")  # fsmem's global options that take a value
_SHELL_TOOLS = ("Bash", "PowerShell")


@dataclass
class Looked:
    """How far the Stop hook has read one session's transcript, and what it found: host-local, under `.fsmem/`."""

    transcript: str
    offset: int = 0  # bytes of the transcript read
    new_lines: int = 0  # summary lines beyond what the memory held when they were read
    wrote: bool = False  # the agent wrote to the memory during the session
    asked: bool = False  # the hook asked once; it never asks again
    calls: list[str] = field(default_factory=list)  # writing calls whose result is not read yet


def _state_path(root: Path, session_id: str) -> Path:
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return state_dir(root, *cc.STATE, "asked") / f"{digest}.json"


def load(root: Path, session_id: str, transcript: str) -> Looked:
    """The state of this session's transcript (a fresh one when there is none, or it is of another transcript)."""
    try:
        data = json.loads(read_state(_state_path(root, session_id)).decode("utf-8"))
        looked = Looked(**data)
    except FileNotFoundError:
        return Looked(transcript)
    if not (isinstance(looked.offset, int) and isinstance(looked.calls, list) and looked.transcript == transcript):
        if looked.asked is True:
            return Looked(transcript, asked=True)  # asked once is asked for the session, whatever else changed
        return Looked(transcript)
    return looked


def save(root: Path, session_id: str, looked: Looked) -> None:
    data = json.dumps(asdict(looked)).encode("utf-8")
    atomic_write(_state_path(root, session_id), data, durable=False, root=root, generated=True)


def held_bytes(root: Path, session_id: str, archive_dir: str) -> int:
    """The bytes of the session's transcript that its session note holds (0: no note, or none recorded), the
    note under `sessions/` or in the archive (`archive_dir`)."""
    from fsmem import format as fmt
    from fsmem.errors import InvalidArgument
    from fsmem.importers.notes import held_in
    from fsmem.store.note_folders import NoteFolders
    from fsmem.store.paths import read_regular

    note = NoteFolders(root, archive_dir).find(cc.session_name(session_id))
    if note is None:
        return 0
    try:  # a FIFO or device named as the note must not hang the hook: it holds nothing
        head = read_regular(note, FRONT_BYTES).decode("utf-8", "replace")
    except InvalidArgument:
        return 0
    held = held_in(fmt.split(head).front_matter)
    return held.bytes if held is not None and held.bytes is not None else 0


def writes_memory(name: str, tool_input: Any) -> bool:
    """Whether a tool call writes to an fsmem memory: fsmem's MCP note/write/edit, or a shell running `fsmem note`."""
    match = _MCP_TOOL.match(name) if len(name) <= TOOL_NAME_CHARS else None
    if match:
        return match.group("tool") in WRITING_TOOLS
    if name in _SHELL_TOOLS and isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        return any(_fsmem_writes(words) for words in _commands(tool_input["command"]))
    return False


def _commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line, as words (split at `;`, `&&`, `||`, `|` and newlines)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|\n")
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unclosed quote: the words up to it
        words = line.split()
    commands: list[list[str]] = [[]]
    for word in words:
        if word and set(word) <= set(";&|\n"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _fsmem_writes(words: list[str]) -> bool:
    """Whether `words` run fsmem's note, write or edit (`fsmem ...`, `/path/fsmem ...`, `python -m fsmem ...`)."""
    for index, word in enumerate(words):
        base = os.path.basename(word)
        if base in ("fsmem", "fsmem.exe"):
            rest = words[index + 1 :]
        elif word == "fsmem" and index > 0 and words[index - 1] == "-m":
            rest = words[index + 1 :]
        else:
            continue
        skip = False
        for item in rest:
            if skip:
                skip = False
            elif item in _GLOBAL_VALUES:
                skip = True
            elif not item.startswith("-"):
                return item in WRITING_TOOLS
    return False


def read_on(transcript: str, looked: Looked, held: int, deadline: float | None) -> bool:
    """Read the transcript's whole lines after `looked.offset` into `looked`, until its end (True) or `deadline`."""
    from fsmem.store import outside_files

    fd, _ = outside_files.open_regular(transcript, what="the transcript")
    with os.fdopen(fd, "rb") as stream:
        stream.seek(looked.offset)
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            line = cc.read_line(stream)
            if not line.whole:  # the end, or a last line still being written
                return True
            start = looked.offset
            looked.offset += line.size
            for _, record in cc.records([line.raw] if line.raw is not None else []):
                _take(looked, record, new=start >= held)


def _take(looked: Looked, record: Any, *, new: bool) -> None:
    """What one transcript record adds: its summary lines (when new), writing calls, and their results."""
    if new:
        looked.new_lines += len(cc.summarise(record))
    if not isinstance(record, dict) or not isinstance(record.get("message"), dict):
        return
    content = record["message"].get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            if writes_memory(block["name"], block.get("input")) and isinstance(block.get("id"), str):
                looked.calls.append(block["id"])
        elif block.get("type") == "tool_result" and block.get("tool_use_id") in looked.calls:
            looked.calls.remove(block["tool_use_id"])
            looked.wrote = looked.wrote or not block.get("is_error")


def reason(root: Path, launcher: list[str]) -> str:
    """What the agent is asked: keyed notes, the subject and key form, and the command if fsmem's tools are absent."""
    words = [*launcher, "--root", str(root), "note", "--subject", "people/Adam Smith", "- employer: Globex"]
    command = shlex.join(words) if os.name != "nt" else " ".join(words)
    return (
        "Before you stop: fsmem, the shared memory, keeps this session's transcript but no facts from it. "
        "Save what you learned that will matter in a later session (decisions, facts about people, projects and "
        "systems, preferences, how things work) as keyed notes with fsmem's `note` tool: one subject per "
        "heading, such as `## people/Adam Smith` or `## topic/Billing` (or the tool's `subject`), each fact as "
        "`- key: value` with a key of one to four lowercase words, such as `- employer: Globex`; other bullets "
        "are kept as observations. If fsmem's tools are not connected, run one command per subject, such as:\n"
        f"{command}\n"
        "If nothing here is worth keeping, say so in one line and stop. fsmem asks this once per session."
    )


def ask_to_save(memory: Memory, event: cc.HookEvent, *, deadline: float | None = None) -> Outcome:
    """The Stop event's answer: a block asking for keyed notes when the module docstring's conditions hold, else
    nothing (an empty `stdout`)."""
    from fsmem.connect import launcher

    outcome = Outcome()
    if event.stop_hook_active or not event.session_id or event.transcript_path is None:
        return outcome
    if memory.budget.read_only:
        return outcome  # an agent that may not write is not asked to
    transcript = os.path.abspath(event.transcript_path)
    looked = load(memory.root, event.session_id, transcript)
    if looked.asked or looked.wrote:
        return outcome
    finished = read_on(
        transcript, looked, held_bytes(memory.root, event.session_id, memory.config.consolidate.archive_dir), deadline
    )
    ask = finished and not looked.wrote and not looked.calls and looked.new_lines >= NEW_LINES
    looked.asked = ask
    save(memory.root, event.session_id, looked)  # first: a block whose state is not written is never sent
    if ask:
        outcome.stdout = json.dumps({"decision": "block", "reason": reason(memory.root, launcher())})
    return outcome
