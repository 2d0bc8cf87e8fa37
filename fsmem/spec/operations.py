"""The declaration of every operation a memory has: the one list the faces are generated from.

This module is long because it is that one list, in the order the tools are offered: split by concern,
a reader would have to look in several places to see what a face offers.

Sync, init and watch stay hand-written commands (`fsmem.cli.history`, `core`, `watch`): sync --setup
runs before there is a memory to open, init creates one, and watch runs until stopped with callbacks
no other face has. tools, mcp, serve, token, connect, config, agent, hook, import locomo and evaluate are not
operations of a memory: they set up or run fsmem around one.
import_from is one, but never a tool: it reads a path outside the memory, on the operator's machine.
"""

from __future__ import annotations

from fsmem.spec import API, CLI, NOT_TOOLS, Cli, Operation, Param
from fsmem.spec.params import (
    AGENT,
    AS_OF,
    AT,
    EXPECTED_VERSION,
    FILTERS,
    FOLDER,
    IMPORT_FORMATS,
    INCLUDE_SUPERSEDED,
    LINES,
    MAX_TOKENS,
    PAGE,
    PATH,
    SINCE,
)

WRITE_PATH = PATH.but(
    description="Path of the file relative to the memory root, ending in .md, such as 'topics/billing.md'"
)
QUERY = Param("query", "str", "What you are looking for, in your own words", positional=True)

_DECLARED = (
    Operation(
        "ls",
        "List memory files, one row each: path, size in tokens, type, last update, title and one-line description.",
        "reads:ls",
        (
            FOLDER,
            Param(
                "depth",
                "int",
                "Only files at most this many folders below path (1 = directly in it)",
                default=None,
                minimum=1,
                metavar="N",
            ),
            *FILTERS,
            INCLUDE_SUPERSEDED,
            *PAGE,
        ),
        "page",
        guide="Use it first, to see what the memory holds and which file to read: profile/ (the always-on core),\n"
        "entities/<kind>/<name>.md (people, projects, orgs...), topics/<name>.md, sessions/YYYY/MM/DD/ (dated notes).\n"
        "The answer is capped by your budget in rows and tokens; its last line says how many files were left out.\n"
        "When it says 'Continue with offset=N', call ls again with offset N, or narrow with path, type, tag or\n"
        "updated_after. History files (NAME.history.md: every superseded value of the document NAME.md) are\n"
        "listed only with include_superseded.",
        tool=True,
        cli=Cli(exit_1="empty"),
    ),
    Operation(
        "grep",
        "Find lines in memory files that match a pattern; each match shows its line number, grouped by file.",
        "reads:grep",
        (
            Param(
                "pattern",
                "str",
                "Regular expression (ripgrep syntax), or plain text with fixed_strings",
                positional=True,
            ),
            Param(
                "paths",
                "list",
                "Only these files or folders, relative to the memory root; omit for the whole memory",
                default=None,
                positional=True,
            ),
            Param("ignore_case", "bool", "Match regardless of case", default=False, short="-i"),
            Param(
                "fixed_strings",
                "bool",
                "Take pattern as plain text, not a regular expression",
                default=False,
                short="-F",
            ),
            Param("word", "bool", "Match whole words only", default=False, short="-w"),
            Param(
                "context_lines",
                "int",
                "Also show this many lines before and after each match",
                default=0,
                minimum=0,
                short="-C",
                metavar="N",
            ),
            *FILTERS,
            INCLUDE_SUPERSEDED,
            AS_OF,
            *PAGE,
        ),
        "page",
        guide="Use it when you can name what you look for: a name, a word, a key such as '- employer:'. Then read around\n"
        "a match (read with lines). The last line gives the true total of matches. When it says 'Continue with\n"
        "offset=N', call grep again with offset N for the next page, or narrow pattern or paths. '(no matches)'\n"
        "means the memory holds no such text: try other words or ls, rather than the same pattern again.\n"
        "Facts replaced by newer ones are left out unless include_superseded is true.",
        tool=True,
        cli=Cli(note="The answer says how many matches exist in all; exit 1 when there is none.", exit_1="empty"),
    ),
    Operation(
        "read",
        "Read a memory file with line numbers: the whole file, a range of lines, one section, or its outline.",
        "reads:read",
        (
            PATH,
            LINES,
            Param(
                "section",
                "str",
                "Only the section under this heading, such as 'Facts' (with lines, those of its lines)",
                default=None,
                metavar="HEADING",
            ),
            Param(
                "outline",
                "bool",
                "Only the headings (within lines, if given), with their line ranges and token counts",
                default=False,
            ),
            INCLUDE_SUPERSEDED,
            AS_OF,
            EXPECTED_VERSION.but(
                description="The file's version as the read you go on from showed it: nothing is shown if the "
                "file changed since, as its lines may have moved (a cut read's next range carries it)"
            ),
            MAX_TOKENS,
        ),
        "text",
        guide="Use it after ls, grep or search pointed you at a file. For a large file, ask for the outline first,\n"
        "then a section or lines. The answer stops at your token budget; a cut answer ends with\n"
        "'next: lines=\"A:\", expected_version=\"V\"' -- call read again with lines 'A:' and that expected_version\n"
        "to continue (an error then says the file changed meanwhile: read it again from the start). Line numbers\n"
        "are not part of the text: leave them out when you copy text into edit. The last line gives the file's\n"
        "version: pass it to write or edit as expected_version, so that you never overwrite a change you have not\n"
        "seen.",
        tool=True,
        cli=Cli(
            note="Cut at the token budget with the next range named; exit 1 when there is no line to show.",
            exit_1="empty",
        ),
    ),
    Operation(
        "stat",
        "What one memory file holds, in figures: its size in tokens, its keyed facts (current and superseded), "
        "its last change and by whom, and its links out and in.",
        "stat:stat",
        (PATH, MAX_TOKENS),
        "text",
        guide="Use it to judge a file before reading it: how large it is, how many of its facts still hold, when it\n"
        "last changed and who changed it (from the history when the memory has one, else the file's time), and\n"
        "how linked it is. Then read it, or list its links with links.",
        tool=True,
    ),
    Operation(
        "search",
        "Ranked search: the facts, bullets and paragraphs most relevant to a description, each with path and line.",
        "search:search",
        (
            QUERY,
            *FILTERS,
            INCLUDE_SUPERSEDED,
            AS_OF,
            Param(
                "min_score",
                "float",
                "Rows scoring below this are not relevant (default: search.min_score in fsmem.yaml)",
                default=None,
                minimum=0,
                metavar="S",
                faces=NOT_TOOLS,
            ),
            *PAGE,
        ),
        "page",
        guide="Use it when you cannot name the exact words for grep. Results are whole rows, best first, within your\n"
        "token budget; the answer says how many were left out and the offset that shows them. An empty answer\n"
        "means nothing relevant is stored: do not repeat the same query. Read around a result with read (path, lines).",
        tool=True,
        cli=Cli(note="Whole rows within the budget; exit 1 when nothing is relevant.", exit_1="empty"),
    ),
    Operation(
        "links",
        "What a memory file's [[links]] lead to (a file, nothing, or several files), then which files link to it, "
        "each with its line.",
        "reads:links",
        (
            PATH.but(description="The file whose links and backlinks to list, such as 'entities/people/rosa-diaz.md'"),
            *PAGE,
        ),
        "page",
        guide="A link is [[Title]], [[kind/Name]] ('[[people/Rosa Diaz]]'), [[path]] or [[...|label]]; it leads to the\n"
        "file with that path, else that entity or topic name, else that title or alias, else that file name (any\n"
        "case). Use it to follow what a document refers to, or to find every note that mentions it. A cut answer\n"
        "names the offset of its next page: call links again with that offset.",
        tool=True,
        cli=Cli(note="Exit 1 when the file holds no link and none leads to it.", exit_1="empty"),
    ),
    Operation(
        "timeline",
        "Every value each key of a subject has had, oldest first: its dates, its source note and who wrote it.",
        "timeline:timeline",
        (
            Param(
                "subject",
                "str",
                "Who or what: as a note heading names it ('people/Nadia Okafor', 'topic/Build'), or the "
                "document's path",
                positional=True,
            ),
            Param(
                "key",
                "str",
                "Only this key, such as 'employer'; omit for every key",
                default=None,
                positional=True,
            ),
            *PAGE,
        ),
        "page",
        guide="Use it to learn how a fact changed: each value with the date it was recorded, until when it held, the\n"
        "note it came from and who wrote it. For what was true on one date, read, grep or search with as_of. When\n"
        "the answer says 'Continue with offset=N', call timeline again with offset N, or name one key.",
        tool=True,
        cli=Cli(note="Exit 1 when the document holds no keyed fact.", exit_1="empty"),
    ),
    Operation(
        "recall",
        "Search for pre-injection, or skip cheaply: the budget is spent, the query is already in what the agent "
        "holds, or nothing new was written.",
        "search:recall",
        (
            QUERY,
            Param(
                "seen",
                "str",
                "What the agent already holds in its context; recall skips when the query is already in it",
                default=None,
                flag="--seen-file",
                metavar="FILE",
            ),
            MAX_TOKENS.but(minimum=0),  # 0: the turn's budget is spent
        ),
        "text",
        cli=Cli(
            note="--seen-file names a file ('-' for stdin); --max-tokens 0 says the turn's budget is spent. "
            "Exit 1 when skipped or nothing is relevant.",
            inputs={"seen": "read_seen"},
            exit_1="empty",
            reserve=False,
            spent_at_zero=True,
        ),
    ),
    Operation(
        "context",
        "The block to pre-inject at the start of a turn: profile/ first, then INDEX.md, within the budget.",
        "upkeep:context",
        (AS_OF.but(description="The profile's facts as they stood on this date, such as '2026-04-30'"), MAX_TOKENS),
        "text",
        cli=Cli(reserve=False),
    ),
    Operation(
        "note",
        "Save what you learned: append it to today's session note (sessions/YYYY/MM/DD/<session>.md).",
        "writes:note",
        (
            Param(
                "text",
                "str",
                "What you learned: one or more lines, keyed facts as '- key: value'",
                positional=True,
            ),
            Param(
                "session",
                "str",
                "Session id (default: $FSMEM_SESSION, else the agent's name and this host's id)",
                default=None,
                metavar="ID",
                envvar="FSMEM_SESSION",
                faces=NOT_TOOLS,
            ),
            Param(
                "subject",
                "str",
                "Who or what it is about: 'people/Adam Smith', 'projects/Atlas' or 'topic/Billing'",
                default=None,
                metavar="SUBJECT",
            ),
        ),
        "receipt",
        guide="This is the normal way to remember something. Give the subject it is about, and write keyed facts as\n"
        "'- key: value' (the key is one to four lowercase words, such as '- employer: Globex'); other lines are\n"
        "kept as free observations. A later consolidation files notes into the entity and topic documents and\n"
        "marks facts that a newer value replaced.",
        needs=frozenset({"write", "sessions"}),
        read_only=False,
        idempotent=False,
        tool=True,
        cli=Cli(
            note='TEXT - reads the note from stdin. Write facts as "- key: value".', inputs={"text": "text_or_stdin"}
        ),
    ),
    Operation(
        "write",
        "Create a memory file, replace its body, or set front matter fields (omit body to change only fields).",
        "writes:write",
        (
            WRITE_PATH,
            Param(
                "body",
                "str",
                "The new Markdown body (replaces the old body; the front matter is kept)",
                default=None,
                faces=frozenset({API, "tool"}),
            ),
            Param(
                "set",
                "dict",
                'Front matter fields to set, such as {"description": "...", "tags": ["billing"]}',
                default=None,
                metavar="KEY=VALUE",
            ),
            EXPECTED_VERSION,
        ),
        "receipt",
        guide="Replacing a body overwrites what is there: read the file first, and pass the version read showed as\n"
        "expected_version. If another agent or a human changed the file since, nothing is written and the answer\n"
        "gives its current version: read it again, then retry. For a small change use edit; to record a new fact\n"
        "use note. New files get a title, created and updated; every write sets updated. The answer gives the new\n"
        "version, for a next write.",
        needs=frozenset({"write"}),
        read_only=False,
        destructive=True,
        tool=True,
        cli=Cli(
            note="The body is read from stdin (unless --keep-body, or stdin is empty or a terminal).",
            inputs={"body": "body_from_stdin", "set": "parse_sets"},
            extra=(
                Param(
                    "keep_body",
                    "bool",
                    "Do not read stdin; only set fields (also the case when stdin is empty or a terminal).",
                    default=False,
                    faces=frozenset({CLI}),
                ),
            ),
        ),
    ),
    Operation(
        "edit",
        "Replace one exact piece of text in a memory file.",
        "writes:edit",
        (
            PATH,
            Param(
                "old",
                "str",
                "The exact text to replace, copied from read without line numbers; it must occur once",
                metavar="TEXT",
            ),
            Param("new", "str", "The text to put in its place", metavar="TEXT"),
            EXPECTED_VERSION,
        ),
        "receipt",
        guide="old must occur exactly once in the file: when it occurs several times, include more of the surrounding\n"
        "text; when it is not found, read the file again and copy the text exactly. Pass the version read showed\n"
        "as expected_version: if the file changed since, nothing is changed and the answer gives the current\n"
        "version (read again, then retry). Use it to correct a line; to add a new fact, prefer note.",
        needs=frozenset({"write"}),
        read_only=False,
        destructive=True,
        idempotent=False,
        tool=True,
    ),
    Operation(
        "rm",
        "Remove a memory file (or an empty folder).",
        "writes:rm",
        (PATH.but(description="The file or empty folder to remove, relative to the memory root"),),
        "receipt",
        needs=frozenset({"write"}),
        read_only=False,
        destructive=True,
    ),
    Operation(
        "mv",
        "Move or rename a memory file; never overwrites.",
        "writes:mv",
        (
            Param("source", "str", "The file or folder to move, relative to the memory root", positional=True),
            Param("target", "str", "Where it goes; nothing may be there yet", positional=True),
        ),
        "receipt",
        needs=frozenset({"write"}),
        read_only=False,
        destructive=True,
    ),
    Operation(
        "check",
        "Validate every file; each problem is a line path:line: message.",
        "upkeep:check",
        (FOLDER.but(description="Only the files under this folder (or this file); omit for the whole memory"),),
        "report",
        cli=Cli(note="Exit 1 when there is a problem.", exit_1="problems"),
    ),
    Operation(
        "index",
        "Regenerate INDEX.md, the table of contents of entities and topics (also done by every consolidate run).",
        "upkeep:index",
        (),
        "report",
        needs=frozenset({"write", "whole"}),
        read_only=False,
    ),
    Operation(
        "consolidate",
        "Merge new session notes into entity and topic documents, mark superseded facts, rebuild INDEX.md.",
        "upkeep:consolidate",
        (
            Param("dry_run", "bool", "Print a unified diff of what would change; write nothing.", default=False),
            Param(
                "progress",
                "callable",
                "Called as progress(stage, done, total) as the work goes on",
                default=None,
                faces=frozenset({API}),
            ),
        ),
        "report",
        needs=frozenset({"write", "whole"}),
        read_only=False,
        idempotent=False,
        cli=Cli(
            note="Each line starts with the run's time. Exit 0 when notes were consolidated (or would be), 1 when "
            "there was nothing new, 3 when a note or document was skipped for a problem to fix, 75 when another "
            "consolidation is running (this one changed nothing), 2 on any other error.",
            inputs={"progress": "progress_bar"},
            exit_1="empty",
            exits=(("skipped", 3),),
            text="to_log",
        ),
    ),
    Operation(
        "stats",
        "Per tool, from the retrieval log: calls, p50/p95 latency, mean tokens, empty, cut, error and skip shares.",
        "upkeep:stats",
        (
            SINCE.but(description="Only calls at or after this ISO 8601 date or time"),
            AGENT.but(
                description="Only the calls this agent made (on the command line, the global --agent)",
                faces=frozenset({API}),
            ),
        ),
        "report",
        cli=Cli(
            note="With --agent NAME, only the calls that agent made.", inputs={"agent": "global_agent"}, exit_1="!calls"
        ),
    ),
    Operation(
        "log",
        "The history of the memory or of one file: who changed what, when, with what message, newest first.",
        "history:log",
        (
            FOLDER.but(description="File or folder whose changes to list, such as 'topics/billing.md'; omit for all"),
            SINCE.but(description="Only changes at or after this ISO 8601 date, such as '2026-11-01'"),
            AGENT,
            *PAGE,
        ),
        "page",
        guide="Use it to learn how a fact came to be, who wrote a file, or what changed since a date. Each row starts\n"
        "with a commit id: give it to show (as at) to read a file as it was then. The answer is capped by your\n"
        "budget; when it says 'Continue with offset=N', call log again with offset N, or narrow with path,\n"
        "since or agent.",
        needs=frozenset({"history"}),
        tool=True,
        cli=Cli(
            note="With --agent NAME, only the commits that agent made.",
            inputs={"agent": "global_agent"},
            exit_1="empty",
        ),
    ),
    Operation(
        "show",
        "Read a memory file as it was at a commit or on a date, with line numbers.",
        "history:show",
        (PATH, AT, LINES, MAX_TOKENS),
        "text",
        guide="Use it after log, to see what a file said before a change (the current file is what read shows). The\n"
        "answer stops at your token budget; a cut answer ends with 'next: lines=\"A:\"' -- call show again with\n"
        "the same at and lines 'A:' to continue.",
        needs=frozenset({"history"}),
        tool=True,
        cli=Cli(note="Cut at the token budget like read.", exit_1="empty"),
    ),
    Operation(
        "diff",
        "What changed since a revision, a date or A..B (default: what is not committed yet), as a unified diff "
        "cut at the token budget.",
        "history:diff",
        (
            Param(
                "rev",
                "str",
                "A revision, a date, or A..B; omit for what is not committed yet",
                default=None,
                positional=True,
            ),
            FOLDER.but(description="Only this file or folder; omit for the whole memory"),
            LINES.but(description="Only these lines of the diff: 'A:B', 'A:' (from A on) or 'A' (one line)"),
            MAX_TOKENS,
        ),
        "text",
        needs=frozenset({"history"}),
        cli=Cli(
            note="A single argument that names a memory file or folder is taken as PATH. Exit 1 when there is "
            "no difference.",
            inputs={"rev": "rev_or_path"},
            exit_1="empty",
        ),
    ),
    Operation(
        "restore",
        "Put a file back as it was at a revision or date, as a new commit (nothing in the history is rewritten).",
        "history:restore",
        (PATH, AT),
        "receipt",
        needs=frozenset({"write", "history"}),
        read_only=False,
        destructive=True,
    ),
    Operation(
        "revert",
        "Undo what one commit changed, as a new commit; refused, naming the later commit, when one changed the "
        "same lines, facts or fields since.",
        "history:revert",
        (Param("rev", "str", "The commit to undo (a commit id from log)", positional=True),),
        "receipt",
        needs=frozenset({"write", "history", "whole"}),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)

IMPORT_FROM = Operation(
    "import_from",
    "Import history from outside the memory: Claude Code transcripts, a ChatGPT or Claude.ai export "
    "(conversations.json), or a folder of Markdown notes.",
    "importing:import_from",
    (
        Param(
            "format",
            "str",
            f"What PATH holds: {', '.join(IMPORT_FORMATS)}",
            choices=tuple(IMPORT_FORMATS),
            positional=True,
        ),
        Param(
            "path",
            "str",
            "The transcript, the projects folder, the export's conversations.json, or the notes' folder",
            positional=True,
        ),
        Param(
            "into",
            "str",
            "markdown: the memory folder the notes go in, their relative paths kept (default: topics/<folder name>)",
            default=None,
            metavar="FOLDER",
        ),
    ),
    "report",
    needs=frozenset({"write", "whole"}),
    read_only=False,
    tool=False,  # it reads the operator's files: no agent, MCP client or server token is offered it
    cli=Cli(
        note="Conversations become session notes dated by their own start, one per conversation; importing "
        "again adds only what is new. A malformed file exits 2 naming its line, and nothing is written.",
        group="import",
        values=IMPORT_FORMATS,
    ),
)

DISTILL = Operation(
    "distill",
    "Run this host's command on each episode not yet distilled and keep what it answers as keyed notes.",
    "distill:distill",
    (
        Param(
            "command",
            "str",
            "The command to run (an argument list, split as a shell would, never run by one); "
            "default: this host's setting distill.command (fsmem config --local), never fsmem.yaml",
            default=None,
            metavar="CMD",
        ),
        Param(
            "timeout",
            "float",
            "Seconds the command may take on one part of an episode before its process group is killed (default 120)",
            default=None,
            metavar="SECONDS",
        ),
        Param(
            "episode_tokens",
            "int",
            "Most tokens of an episode given to the command at once; a longer one goes in parts (default 6000)",
            default=None,
            minimum=64,
            metavar="N",
        ),
    ),
    "report",
    needs=frozenset({"write", "whole"}),
    read_only=False,
    idempotent=False,
    tool=False,  # it runs a command on the operator's host: no agent, MCP client or token is offered it
    cli=Cli(
        note="The command reads fsmem's instructions and the episode on stdin and answers `## subject` headings "
        "with `- key: value` facts or observation bullets; each part becomes a session note beside its episode. "
        "Exit 0 when something was distilled, 1 when there was nothing new, 3 when an episode was skipped "
        "(its error is named, nothing is written for it), 2 on any other error.",
        exit_1="empty",
        exits=(("skipped", 3),),
    ),
)

OPERATIONS: dict[str, Operation] = {op.name: op for op in (*_DECLARED, IMPORT_FROM, DISTILL)}
