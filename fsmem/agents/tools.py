"""The agent-facing tools over `Memory`, the dispatcher that runs them, and their exports.

Tools: list, grep, read, note, write, edit, and search (offered as soon as
`Memory` has a `search` method). Each is declared once here; the OpenAI and
Anthropic exports, `fsmem tools` and the MCP server all read the same registry.

`call(memory, name, arguments)` validates the arguments and never raises on
bad input: a model gets an error text it can act on, and nothing on disk
changes. Every answer fits the calling agent's token budget, and every call,
good or bad, appends one record to the retrieval log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from fsmem.agents.registry import FORMATS, REGISTRY, Param, Reply, Tool, json_type_name, tool, validate
from fsmem.errors import FsmemError, InvalidArgument, ReadOnly
from fsmem.memory import Memory, os_error_message
from fsmem.store import retrieval_log
from fsmem.store.paths import text_problem

# Tokens kept back from a tool's content for its trailer lines and the guard note.
TRAILER_RESERVE = 48
_LOGGED_STRING_CHARS = 200


@dataclass
class ToolAnswer:
    """The dispatcher's answer: the text a model reads, plus the figures the log records."""

    tool: str
    text: str
    tokens: int
    rows: int = 0
    paths: list[str] = field(default_factory=list)
    truncated: bool = False
    empty: bool = False
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def to_text(self) -> str:
        return self.text


# -- the tools ---------------------------------------------------------------------

PathArg = Annotated[str, Param("Path of a memory file relative to the memory root, such as 'topics/billing.md'")]


@tool("list")
def list_files(
    memory: Memory,
    path: Annotated[
        str | None,
        Param(
            "Folder (or file) to list, relative to the memory root, such as 'entities/people'; omit for the whole memory"
        ),
    ] = None,
    depth: Annotated[
        int | None, Param("Only files at most this many folders below path (1 = directly in it)", minimum=1)
    ] = None,
    type: Annotated[
        str | None, Param("Only files whose front matter type is this: semantic, episodic or procedural")
    ] = None,
    tag: Annotated[list[str] | None, Param("Only files carrying all of these tags")] = None,
    updated_after: Annotated[
        str | None, Param("Only files updated after this ISO 8601 date or time, such as '2026-11-01'")
    ] = None,
    max_results: Annotated[int | None, Param("At most this many rows (your budget caps it anyway)", minimum=1)] = None,
    *,
    max_tokens: int,
) -> Reply:
    """List memory files, one row each: path, size in tokens, type, last update, title and one-line description.

    Use it first, to see what the memory holds and which file to read: profile/ (the always-on core),
    entities/<kind>/<name>.md (people, projects, orgs...), topics/<name>.md, sessions/YYYY/MM/DD/ (dated notes).
    The answer is capped by your budget in rows and tokens; its last line says how many files were left out.
    When files were left out, call list again with a narrower path, or with type, tag or updated_after.
    """
    listing = memory.ls(
        path,
        depth=depth,
        type=type,
        tag=tag,
        updated_after=updated_after,
        max_results=max_results,
        max_tokens=max_tokens,
    )
    return Reply(
        listing.to_text(),
        rows=len(listing.entries),
        paths=[e.path for e in listing.entries],
        truncated=listing.truncated,
        empty=listing.total == 0,
    )


@tool("grep")
def grep(
    memory: Memory,
    pattern: Annotated[str, Param("Regular expression (ripgrep syntax), or plain text with fixed_strings")],
    paths: Annotated[
        list[str] | None, Param("Only these files or folders, relative to the memory root; omit for the whole memory")
    ] = None,
    ignore_case: Annotated[bool, Param("Match regardless of case")] = False,
    fixed_strings: Annotated[bool, Param("Take pattern as plain text, not a regular expression")] = False,
    word: Annotated[bool, Param("Match whole words only")] = False,
    context: Annotated[int, Param("Also show this many lines before and after each match", minimum=0)] = 0,
    type: Annotated[
        str | None, Param("Only files whose front matter type is this: semantic, episodic or procedural")
    ] = None,
    tag: Annotated[list[str] | None, Param("Only files carrying all of these tags")] = None,
    updated_after: Annotated[str | None, Param("Only files updated after this ISO 8601 date or time")] = None,
    include_superseded: Annotated[bool, Param("Also match facts that newer facts replaced (history)")] = False,
    offset: Annotated[int, Param("Skip this many matches: the next page of a cut answer", minimum=0)] = 0,
    max_results: Annotated[
        int | None, Param("At most this many matches (your budget caps it anyway)", minimum=1)
    ] = None,
    *,
    max_tokens: int,
) -> Reply:
    """Find lines in memory files that match a pattern; each match shows its line number, grouped by file.

    Use it when you can name what you look for: a name, a word, a key such as '- employer:'. Then read around
    a match (read with lines). The last line gives the true total of matches. When it says 'Continue with
    --offset N', call grep again with offset N for the next page, or narrow pattern or paths. '(no matches)'
    means the memory holds no such text: try other words or list, rather than the same pattern again.
    Facts replaced by newer ones are left out unless include_superseded is true.
    """
    result = memory.grep(
        pattern,
        paths,
        ignore_case=ignore_case,
        fixed_strings=fixed_strings,
        word=word,
        context=context,
        type=type,
        tag=tag,
        updated_after=updated_after,
        include_superseded=include_superseded,
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
    )
    return Reply(
        result.to_text(),
        rows=len(result.matches),
        paths=[f"{m.path}:{m.line}" for m in result.matches],
        truncated=result.truncated,
        empty=result.total_matches == 0,
    )


@tool("read")
def read(
    memory: Memory,
    path: PathArg,
    lines: Annotated[str | None, Param("Only these lines: 'A:B', 'A:' (from A on) or 'A' (one line)")] = None,
    section: Annotated[str | None, Param("Only the section under this heading, such as 'Facts'")] = None,
    outline: Annotated[bool, Param("Only the headings, with their line ranges and token counts")] = False,
    include_superseded: Annotated[bool, Param("Also show facts that newer facts replaced (history)")] = False,
    *,
    max_tokens: int,
) -> Reply:
    """Read a memory file with line numbers: the whole file, a range of lines, one section, or its outline.

    Use it after list, grep or search pointed you at a file. For a large file, ask for the outline first,
    then a section or lines. The answer stops at your token budget; a cut answer ends with
    'next: --lines A:' -- call read again with lines 'A:' to continue. Line numbers are not part of the
    text: leave them out when you copy text into edit.
    """
    result = memory.read(
        path,
        lines=lines,
        section=section,
        outline=outline,
        include_superseded=include_superseded,
        max_tokens=max_tokens,
    )
    rows = len(result.outline) if result.outline is not None else len(result.lines)
    return Reply(result.to_text(), rows=rows, paths=[result.path], truncated=result.truncated, empty=rows == 0)


@tool("search", requires="search")
def search(
    memory: Memory,
    query: Annotated[str, Param("What you are looking for, in your own words")],
    k: Annotated[int | None, Param("At most this many results (your budget caps it anyway)", minimum=1)] = None,
    type: Annotated[
        str | None, Param("Only files whose front matter type is this: semantic, episodic or procedural")
    ] = None,
    tag: Annotated[list[str] | None, Param("Only files carrying all of these tags")] = None,
    updated_after: Annotated[str | None, Param("Only files updated after this ISO 8601 date or time")] = None,
    include_superseded: Annotated[bool, Param("Also rank facts that newer facts replaced (history)")] = False,
    *,
    max_tokens: int,
) -> Reply:
    """Ranked search: the facts, bullets and paragraphs most relevant to a description, each with path and line.

    Use it when you cannot name the exact words for grep. Results are whole rows, best first, within your
    token budget; the answer says how many were left out. An empty answer means nothing relevant is stored:
    do not repeat the same query. Read around a result with read (path, lines).
    """
    filters = {"k": k, "type": type, "tag": tag, "updated_after": updated_after}
    result = memory.search(
        query,
        include_superseded=include_superseded,
        max_tokens=max_tokens,
        **{key: value for key, value in filters.items() if value is not None},
    )
    rows = result.to_dict().get("results") or []
    return Reply(
        result.to_text(),
        rows=len(rows),
        paths=[f"{r['path']}:{r['line']}" if r.get("line") else str(r["path"]) for r in rows],
        truncated=bool(getattr(result, "truncated", False)),
        empty=not rows,
    )


@tool("note", writes=True)
def note(
    memory: Memory,
    text: Annotated[str, Param("What you learned: one or more lines, keyed facts as '- key: value'")],
    subject: Annotated[
        str | None, Param("Who or what it is about: 'people/Adam Smith', 'projects/Atlas' or 'topic/Billing'")
    ] = None,
    *,
    max_tokens: int,
) -> Reply:
    """Save what you learned: append it to today's session note (sessions/YYYY/MM/DD/<session>.md).

    This is the normal way to remember something. Give the subject it is about, and write keyed facts as
    '- key: value' (the key is one to four lowercase words, such as '- employer: Globex'); other lines are
    kept as free observations. A later consolidation files notes into the entity and topic documents and
    marks facts that a newer value replaced.
    """
    result = memory.note(text, subject=subject)
    where = f"{result.path}:{result.line}" if result.line else result.path
    return Reply(result.to_text(), rows=1, paths=[where])


@tool("write", writes=True)
def write(
    memory: Memory,
    path: Annotated[
        str, Param("Path of the file relative to the memory root, ending in .md, such as 'topics/billing.md'")
    ],
    body: Annotated[
        str | None, Param("The new Markdown body (replaces the old body; the front matter is kept)")
    ] = None,
    set: Annotated[
        dict[str, Any] | None, Param('Front matter fields to set, such as {"description": "...", "tags": ["billing"]}')
    ] = None,
    *,
    max_tokens: int,
) -> Reply:
    """Create a memory file, replace its body, or set front matter fields (omit body to change only fields).

    Replacing a body overwrites what is there: read the file first. For a small change use edit; to record
    a new fact use note. New files get a title, created and updated; every write sets updated.
    """
    result = memory.write(path, body, set=set)
    return Reply(result.to_text(), rows=1, paths=[result.path])


@tool("edit", writes=True)
def edit(
    memory: Memory,
    path: PathArg,
    old: Annotated[str, Param("The exact text to replace, copied from read without line numbers; it must occur once")],
    new: Annotated[str, Param("The text to put in its place")],
    *,
    max_tokens: int,
) -> Reply:
    """Replace one exact piece of text in a memory file.

    old must occur exactly once in the file: when it occurs several times, include more of the surrounding
    text; when it is not found, read the file again and copy the text exactly. Use it to correct a line;
    to add a new fact, prefer note.
    """
    result = memory.edit(path, old=old, new=new)
    where = f"{result.path}:{result.line}" if result.line else result.path
    return Reply(result.to_text(), rows=1, paths=[where])


# -- definitions and the dispatcher ---------------------------------------------


def offered(memory: Memory) -> list[Tool]:
    """The tools this memory's agent may use: no write tools for a read-only agent."""
    return [t for t in REGISTRY.values() if t.available(memory) and not (t.writes and memory.budget.read_only)]


def definitions(memory: Memory, format: str = "json") -> list[dict[str, Any]]:
    """Tool definitions for `memory`'s agent: `openai` (Chat Completions `tools=`),
    `anthropic` (Messages `tools=`) or `json` (fsmem's neutral form)."""
    if format not in FORMATS:
        raise FsmemError(f"unknown tool format {format!r}; choose one of: {', '.join(FORMATS)}")
    return [t.definition(format) for t in offered(memory)]


def read_only(memory: Memory) -> Memory:
    """Make `memory` refuse every write (its own check, not only the tool list); returns it."""
    memory.budget = replace(memory.budget, read_only=True)
    return memory


def call(memory: Memory, name: str, arguments: dict[str, Any] | str | None = None) -> ToolAnswer:
    """Run tool `name` with `arguments` (a dict, or the JSON text an SDK hands over).

    Bad input never raises: the answer is an error text (`is_error`) a model
    can act on, and nothing on disk changes. The answer fits the agent's token
    budget, and the call is appended to the retrieval log.
    """
    started = time.perf_counter()
    is_error = False
    try:
        reply = _run(memory, name, arguments)
    except FsmemError as exc:
        reply, is_error = Reply(f"error: {exc}"), True
    except OSError as exc:
        reply, is_error = Reply(f"error: {os_error_message(exc, memory.root)}"), True
    except Exception as exc:  # never raise to the model's harness: an answer it can read, always
        reply, is_error = Reply(f"error: {name} failed: {type(exc).__name__}: {exc}"), True
    # Whatever the input held, the answer is text that encodes as UTF-8 (a lone surrogate is escaped).
    text, cut = fit(memory, reply.text.encode("utf-8", "backslashreplace").decode("utf-8"), memory.budget.max_tokens)
    answer = ToolAnswer(
        tool=name,
        text=text,
        tokens=memory.tokens.count(text),
        rows=reply.rows,
        paths=reply.paths,
        truncated=reply.truncated or cut,
        empty=reply.empty,
        is_error=is_error,
    )
    _log(memory, answer, arguments, started)
    return answer


def _check_arguments(value: Any, where: str = "") -> None:
    """Refuse, at the door, any string argument (or key) holding a NUL byte or a lone surrogate."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise InvalidArgument(f"argument {where or 'text'!r} {problem}; send plain text")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _check_arguments(key, where)
            _check_arguments(inner, where or (key if isinstance(key, str) and not text_problem(key) else ""))
    elif isinstance(value, (list, tuple)):
        for inner in value:
            _check_arguments(inner, where)


def _run(memory: Memory, name: str, arguments: dict[str, Any] | str | None) -> Reply:
    if not isinstance(name, str) or text_problem(name):
        raise InvalidArgument("the tool name must be plain text")
    parsed = _parse_arguments(arguments)
    _check_arguments(parsed)
    tool_ = REGISTRY.get(name)
    if tool_ is None or not tool_.available(memory):
        names = ", ".join(t.name for t in offered(memory))
        raise InvalidArgument(f"unknown tool {name!r}; the tools are: {names}")
    if tool_.writes and memory.budget.read_only:
        who = f"agent {memory.agent!r}" if memory.agent else "this agent"
        readers = ", ".join(t.name for t in offered(memory))
        raise ReadOnly(f"{who} is read-only; it may use {readers}, not {name}")
    problem = validate(tool_, parsed)
    if problem:
        raise InvalidArgument(problem)
    given = {key: value for key, value in parsed.items() if value is not None}
    budget = memory.budget.max_tokens
    room = _content_budget(budget)
    for _ in range(4):
        reply = tool_.function(memory, **given, max_tokens=room)
        over = memory.tokens.count(reply.text) - budget
        if over <= 0 or tool_.writes or room <= 1:
            return reply
        # The trailer did not fit: ask again for less content, so the tool's own hint of
        # how to continue stays exact (a cut made afterwards would skip lines silently).
        room = max(1, room - max(over + 4, room // 4))
    return reply


def _parse_arguments(arguments: dict[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(
                f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}); send one JSON object"
            ) from None
    if not isinstance(arguments, dict):
        raise InvalidArgument(
            f'the arguments must be a JSON object such as {{"path": "topics/billing.md"}}, '
            f"not {json_type_name(arguments)}"
        )
    return arguments


def _content_budget(max_tokens: int) -> int:
    return max(1, max_tokens - min(TRAILER_RESERVE, max_tokens // 4))


def fit(memory: Memory, text: str, max_tokens: int) -> tuple[str, bool]:
    """`text` cut in whole lines to `max_tokens`, with a note saying so; (text, was_cut)."""
    count = memory.tokens.count
    if count(text) <= max_tokens:
        return text, False
    lines = text.split("\n")
    note = f"[answer cut at the {max_tokens}-token budget after line {{shown}} of {len(lines)}; ask for less]"
    room = max_tokens - count(note.format(shown=len(lines)))
    kept: list[str] = []
    spent = 0
    for line in lines:
        cost = count(line + "\n")
        if spent + cost > room:
            break
        kept.append(line)
        spent += cost
    if kept:
        return "\n".join(kept + [note.format(shown=len(kept))]), True
    return memory.tokens.truncate(text, max_tokens), True


def _loggable(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _LOGGED_STRING_CHARS:
        return value[:_LOGGED_STRING_CHARS] + f"… ({len(value)} chars)"
    if isinstance(value, dict):
        return {k: _loggable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_loggable(v) for v in value]
    return value


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def _log(memory: Memory, answer: ToolAnswer, arguments: Any, started: float) -> None:
    record: dict[str, Any] = {
        "agent": memory.agent,
        "tool": answer.tool,
        "arguments": _loggable(_decoded(arguments)),
        "paths": answer.paths,
        "rows": answer.rows,
        "tokens": answer.tokens,
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        "truncated": answer.truncated,
        "empty": answer.empty,
    }
    if answer.is_error:
        record["error"] = answer.text
    try:
        retrieval_log.append(memory.root, record)
    except (OSError, FsmemError, ValueError):
        pass  # a read-only or full disk must not cost the agent its answer
