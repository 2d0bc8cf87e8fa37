"""The parameters several operations share, declared once: the same name, type and description on every face."""

from __future__ import annotations

from fsmem.faces import RENAMED_FLAGS
from fsmem.spec import API, NOT_TOOLS, Param

# the types a file's front matter may have (`fsmem.format.MEMORY_TYPES`, which `fsmem check` holds files to):
# a filter by another finds nothing, so it is refused as a typo on every face
MEMORY_TYPES = ("semantic", "episodic", "procedural")

PATH = Param(
    "path",
    "str",
    "Path of a memory file relative to the memory root, such as 'topics/billing.md'",
    positional=True,
)
FOLDER = Param(
    "path",
    "str",
    "Folder (or file) to list, relative to the memory root, such as 'entities/people'; omit for the whole memory",
    default=None,
    positional=True,
)
TYPE = Param(
    "type",
    "str",
    "Only files whose front matter type is this: semantic, episodic or procedural",
    default=None,
    choices=MEMORY_TYPES,
    metavar="T",
)
TAG = Param(
    "tag",
    "list",
    "Only files carrying all of these tags",
    default=None,
    metavar="T",
)
UPDATED_AFTER = Param(
    "updated_after",
    "str",
    "Only files updated after this ISO 8601 date or time, such as '2026-11-01'",
    default=None,
    metavar="DATE",
)
FILTERS = (TYPE, TAG, UPDATED_AFTER)
INCLUDE_SUPERSEDED = Param(
    "include_superseded", "bool", "Also include facts that newer facts replaced (history)", default=False
)
AS_OF = Param(
    "as_of",
    "str",
    "Answer as the memory stood on this date, such as '2026-04-30' (or at a UTC time, '2026-04-30T12:00:00Z'): "
    "the value each fact had then is shown as current, values recorded later are left out",
    default=None,
    metavar="DATE",
)
OFFSET = Param(
    "offset",
    "int",
    "Skip this many results: the next page of a cut answer, as its last line says",
    default=0,
    minimum=0,
    metavar="N",
)
MAX_RESULTS = Param(
    "max_results", "int", "At most this many results (your budget caps it anyway)", default=None, minimum=1, metavar="N"
)
# granted by the dispatcher to a tool (the room left in the agent's budget), chosen by a person elsewhere
MAX_TOKENS = Param(
    "max_tokens",
    "int",
    "At most this many tokens in the answer (the agent's budget caps it anyway)",
    default=None,
    minimum=1,
    metavar="N",
    faces=NOT_TOOLS,
)
PAGE = (OFFSET, MAX_RESULTS, MAX_TOKENS)
LINES = Param(
    "lines", "str", "Only these lines: 'A:B', 'A:' (from A on) or 'A' (one line)", default=None, metavar="A:B"
)
EXPECTED_VERSION = Param(
    "expected_version",
    "str",
    "The file's version as read last showed it ('version 1a2b3c4d5e6f' in its last line): nothing is written "
    "if the file changed since",
    default=None,
    flag=RENAMED_FLAGS["expected_version"],
    metavar="V",
)
AT = Param(
    "at",
    "str",
    "A commit id from log, or a date such as '2026-11-01' (the file as it was then)",
    metavar="REV|DATE",
)
SINCE = Param(
    "since",
    "str",
    "Only what happened at or after this ISO 8601 date, such as '2026-11-01'",
    default=None,
    metavar="DATE",
)
# on the command line the agent is the global --agent; a tool and Python name it
AGENT = Param("agent", "str", "Only the changes this agent made", default=None, faces=frozenset({API, "tool"}))

# what `fsmem import` reads (fsmem.importers.FORMATS): one subcommand of `fsmem import` each
IMPORT_FORMATS = {
    "claude-code": "Import Claude Code transcripts: one <session>.jsonl, or a projects folder of them.",
    "chatgpt": "Import a ChatGPT export's conversations.json.",
    "claude": "Import a Claude.ai export's conversations.json.",
    "markdown": "Import a folder of Markdown notes (an Obsidian vault...), their relative paths kept.",
}
