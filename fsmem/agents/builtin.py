"""The built-in agent tools: ls, grep, read, search, note, write, edit, and (with history) log and show, each a
typed function over `Memory`.

They are registered through the same `@tool` hook a plugin would use, so the
registry path is always exercised. A tool's description is its docstring,
written for a model: what it does, its limits, when to use it and how to go
on after a cut answer. The dispatcher that runs them is `fsmem.agents.tools`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fsmem.agents.registry import Param, Reply, tool
from fsmem.memory import Memory

PathArg = Annotated[str, Param("Path of a memory file relative to the memory root, such as 'topics/billing.md'")]
# One declaration per idea, shared by every tool that has it (the CLI's option groups say the same).
TypeFilter = Annotated[
    str | None, Param("Only files whose front matter type is this: semantic, episodic or procedural")
]
TagFilter = Annotated[list[str] | None, Param("Only files carrying all of these tags")]
UpdatedAfter = Annotated[str | None, Param("Only files updated after this ISO 8601 date or time, such as '2026-11-01'")]
IncludeSuperseded = Annotated[bool, Param("Also include facts that newer facts replaced (history)")]
Offset = Annotated[
    int, Param("Skip this many results: the next page of a cut answer, as its last line says", minimum=0)
]
MaxResults = Annotated[int | None, Param("At most this many results (your budget caps it anyway)", minimum=1)]
ExpectedVersion = Annotated[
    str | None,
    Param(
        "The file's version as read last showed it ('version 1a2b3c4d5e6f' in its last line): nothing is written "
        "if the file changed since"
    ),
]


@tool("ls")
def ls(
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
    type: TypeFilter = None,
    tag: TagFilter = None,
    updated_after: UpdatedAfter = None,
    offset: Offset = 0,
    max_results: MaxResults = None,
    *,
    max_tokens: int,
) -> Reply:
    """List memory files, one row each: path, size in tokens, type, last update, title and one-line description.

    Use it first, to see what the memory holds and which file to read: profile/ (the always-on core),
    entities/<kind>/<name>.md (people, projects, orgs...), topics/<name>.md, sessions/YYYY/MM/DD/ (dated notes).
    The answer is capped by your budget in rows and tokens; its last line says how many files were left out.
    When it says 'Continue with offset=N', call ls again with offset N, or narrow with path, type, tag or
    updated_after.
    """
    listing = memory.ls(
        path,
        depth=depth,
        type=type,
        tag=tag,
        updated_after=updated_after,
        offset=offset,
        max_results=max_results,
        max_tokens=max_tokens,
    )
    return Reply(
        listing.to_text(),
        rows=len(listing.entries),
        paths=[e.path for e in listing.entries],
        truncated=listing.truncated,
        empty=listing.total == 0,
        next=listing.next_arguments,
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
    context_lines: Annotated[int, Param("Also show this many lines before and after each match", minimum=0)] = 0,
    type: TypeFilter = None,
    tag: TagFilter = None,
    updated_after: UpdatedAfter = None,
    include_superseded: IncludeSuperseded = False,
    offset: Offset = 0,
    max_results: MaxResults = None,
    *,
    max_tokens: int,
) -> Reply:
    """Find lines in memory files that match a pattern; each match shows its line number, grouped by file.

    Use it when you can name what you look for: a name, a word, a key such as '- employer:'. Then read around
    a match (read with lines). The last line gives the true total of matches. When it says 'Continue with
    offset=N', call grep again with offset N for the next page, or narrow pattern or paths. '(no matches)'
    means the memory holds no such text: try other words or ls, rather than the same pattern again.
    Facts replaced by newer ones are left out unless include_superseded is true.
    """
    result = memory.grep(
        pattern,
        paths,
        ignore_case=ignore_case,
        fixed_strings=fixed_strings,
        word=word,
        context_lines=context_lines,
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
        empty=result.total == 0,
        next=result.next_arguments,
    )


@tool("read")
def read(
    memory: Memory,
    path: PathArg,
    lines: Annotated[str | None, Param("Only these lines: 'A:B', 'A:' (from A on) or 'A' (one line)")] = None,
    section: Annotated[str | None, Param("Only the section under this heading, such as 'Facts'")] = None,
    outline: Annotated[
        bool, Param("Only the headings (within lines, if given), with their line ranges and token counts")
    ] = False,
    include_superseded: IncludeSuperseded = False,
    *,
    max_tokens: int,
) -> Reply:
    """Read a memory file with line numbers: the whole file, a range of lines, one section, or its outline.

    Use it after list, grep or search pointed you at a file. For a large file, ask for the outline first,
    then a section or lines. The answer stops at your token budget; a cut answer ends with
    'next: lines="A:"' -- call read again with lines 'A:' to continue. Line numbers are not part of the
    text: leave them out when you copy text into edit. The last line gives the file's version: pass it to
    write or edit as expected_version, so that you never overwrite a change you have not seen.
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
    return Reply(
        result.to_text(),
        rows=rows,
        paths=[result.path],
        truncated=result.truncated,
        empty=rows == 0,
        next=result.next_arguments,
    )


@tool("search", requires="search")
def search(
    memory: Memory,
    query: Annotated[str, Param("What you are looking for, in your own words")],
    type: TypeFilter = None,
    tag: TagFilter = None,
    updated_after: UpdatedAfter = None,
    include_superseded: IncludeSuperseded = False,
    offset: Offset = 0,
    max_results: MaxResults = None,
    *,
    max_tokens: int,
) -> Reply:
    """Ranked search: the facts, bullets and paragraphs most relevant to a description, each with path and line.

    Use it when you cannot name the exact words for grep. Results are whole rows, best first, within your
    token budget; the answer says how many were left out and the offset that shows them. An empty answer
    means nothing relevant is stored: do not repeat the same query. Read around a result with read (path, lines).
    """
    result = memory.search(
        query,
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
        rows=len(result.hits),
        paths=[h.location for h in result.hits],
        truncated=result.truncated,
        empty=result.empty,
        next=result.next_arguments,
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
    expected_version: ExpectedVersion = None,
    *,
    max_tokens: int,
) -> Reply:
    """Create a memory file, replace its body, or set front matter fields (omit body to change only fields).

    Replacing a body overwrites what is there: read the file first, and pass the version read showed as
    expected_version. If another agent or a human changed the file since, nothing is written and the answer
    gives its current version: read it again, then retry. For a small change use edit; to record a new fact
    use note. New files get a title, created and updated; every write sets updated. The answer gives the new
    version, for a next write.
    """
    result = memory.write(path, body, set=set, expected_version=expected_version)
    return Reply(result.to_text(), rows=1, paths=[result.path])


@tool("edit", writes=True)
def edit(
    memory: Memory,
    path: PathArg,
    old: Annotated[str, Param("The exact text to replace, copied from read without line numbers; it must occur once")],
    new: Annotated[str, Param("The text to put in its place")],
    expected_version: ExpectedVersion = None,
    *,
    max_tokens: int,
) -> Reply:
    """Replace one exact piece of text in a memory file.

    old must occur exactly once in the file: when it occurs several times, include more of the surrounding
    text; when it is not found, read the file again and copy the text exactly. Pass the version read showed
    as expected_version: if the file changed since, nothing is changed and the answer gives the current
    version (read again, then retry). Use it to correct a line; to add a new fact, prefer note.
    """
    result = memory.edit(path, old=old, new=new, expected_version=expected_version)
    where = f"{result.path}:{result.line}" if result.line else result.path
    return Reply(result.to_text(), rows=1, paths=[where])


@tool("log", requires="history")
def log(
    memory: Memory,
    path: Annotated[
        str | None, Param("File or folder whose changes to list, such as 'topics/billing.md'; omit for all")
    ] = None,
    since: Annotated[str | None, Param("Only changes at or after this ISO 8601 date, such as '2026-11-01'")] = None,
    agent: Annotated[str | None, Param("Only the changes this agent made")] = None,
    offset: Offset = 0,
    max_results: MaxResults = None,
    *,
    max_tokens: int,
) -> Reply:
    """The history of the memory or of one file: who changed what, when, with what message, newest first.

    Use it to learn how a fact came to be, who wrote a file, or what changed since a date. Each row starts
    with a commit id: give it to show (as at) to read a file as it was then. The answer is capped by your
    budget; when it says 'Continue with offset=N', call log again with offset N, or narrow with path,
    since or agent.
    """
    result = memory.log(path, since=since, agent=agent, offset=offset, max_results=max_results, max_tokens=max_tokens)
    return Reply(
        result.to_text(),
        rows=len(result.entries),
        paths=[entry.commit for entry in result.entries],
        truncated=result.truncated,
        empty=result.total == 0,
        next=result.next_arguments,
    )


@tool("show", requires="history")
def show(
    memory: Memory,
    path: PathArg,
    at: Annotated[str, Param("A commit id from log, or a date such as '2026-11-01' (the file as it was then)")],
    lines: Annotated[str | None, Param("Only these lines: 'A:B', 'A:' (from A on) or 'A' (one line)")] = None,
    *,
    max_tokens: int,
) -> Reply:
    """Read a memory file as it was at a commit or on a date, with line numbers.

    Use it after log, to see what a file said before a change (the current file is what read shows). The
    answer stops at your token budget; a cut answer ends with 'next: lines="A:"' -- call show again with
    the same at and lines 'A:' to continue.
    """
    result = memory.show(path, at=at, lines=lines, max_tokens=max_tokens)
    rows = len(result.read.lines)
    return Reply(
        result.to_text(),
        rows=rows,
        paths=[result.read.path],
        truncated=result.truncated,
        empty=rows == 0,
        next=result.next_arguments,
    )
