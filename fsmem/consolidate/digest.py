"""The project digest: for Claude Code sessions, one topic document per working folder, a short line per session.

No model is involved: the line is read from the episode's own summary lines (what the hook and `fsmem import
claude-code` write, `fsmem.hooks.claude_code.content_lines`) and its front matter (`cwd`, the session's working
folder): the first request, the files it changed, the commands it ran, its errors and how it ended, cited by a
link to the episode. The document is named by the folder's last component (`topics/<slug>.md`) and the lines
live under its `## Sessions` section, sorted by the sessions' start; everything else in the document is left as
it is. No absolute path reaches a document: file paths are shown relative to the working folder, and any other
absolute path is cut to its last component.

This module is pure: which episodes changed, and the writing, are `fsmem.consolidate.digest_run`'s.
"""

from __future__ import annotations

import ntpath
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt
from fsmem.consolidate import documents as docs
from fsmem.consolidate.dates import note_date
from fsmem.consolidate.index_md import link_path
from fsmem.consolidate.notes import source_of
from fsmem.format.facts import slugify
from fsmem.hooks.claude_code import one_line, title_of
from fsmem.importers.notes import CWD_FIELD

SECTION = docs.SESSIONS
PREFIX = "claude-code-"  # the file names of Claude Code episodes (fsmem.hooks.claude_code.session_name)
REQUEST_CHARS = 100
ENDING_CHARS = 100
ERROR_CHARS = 60
FILES_SHOWN = 3
COMMANDS_SHOWN = 3
PART_CHARS = 50  # a file path or a command as listed
_CHANGING_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}
_TOOL_CALL = re.compile(r"^tool call ([^:]+): (.*)$")
_ERROR = re.compile(r"^tool error(?: \(\d+ lines\))?: (.*)$")
_INTERRUPTED = "[Request interrupted by user"
_COMMAND = re.compile(r"<command-name>([^<]*)</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)(?:</command-args>|$)")
# an absolute path of two or more components (POSIX, or Windows with a drive or a UNC host): cut to its last one
_ABSOLUTE = re.compile(r"(?<![\w.~$-])(?:[A-Za-z]:[\\/]|\\\\|/)(?:[^\s\\/'\"`|;&<>()]+[\\/])+(?=[^\s\\/'\"`|;&<>()]*)")


# an episode's mtime_ns, size, its line (None: not a session) and its inode: (mtime, size) alone let a cache that came
# with an untrusted copy (whose episodes' mtimes it knows) give a project document a line no episode holds
Entry = tuple[int, int, "dict[str, str] | None", int]


# what would start a link, a code span or HTML in text someone wrote (emphasis marks stay, so a grep finds the words)
_PROSE_ESCAPES = str.maketrans({c: "\\" + c for c in "\\[]`<>"})


@dataclass(frozen=True)
class SessionLine:
    """One session as its project's digest shows it: where it is cited from, and the line without its citation."""

    source: str  # the episode as documents cite it (sessions/YYYY/MM/DD/claude-code-….md)
    date: str  # its day
    start: str  # its `created` (sorts sessions of one day)
    project: str  # the working folder's last component, as written
    text: str

    @property
    def slug(self) -> str:
        return slugify(self.project)

    @property
    def path(self) -> str:
        return f"topics/{self.slug}.md"


def project_name(cwd: Any) -> str | None:
    """The last component of a working folder (POSIX or Windows), printable; None when there is none (`/`, empty,
    a name of dots, one of only control characters)."""
    if not isinstance(cwd, str):
        return None
    cleaned = "".join(c if c.isprintable() else " " for c in cwd).strip()
    if not cleaned:
        return None
    if "\\" in cleaned and "/" not in cleaned:
        name = ntpath.basename(ntpath.normpath(cleaned))
    else:
        name = posixpath.basename(posixpath.normpath(cleaned))
    name = " ".join(name.split())
    if not name or set(name) <= {"."} or name.endswith(":"):
        return None
    return name[:100]


def episode_line(rel: str, text: str, archive_dir: str) -> SessionLine | None:
    """The digest line of one episode (its path `rel` and text), or None when it is no Claude Code session with a
    working folder (another note, a subagent's transcript, one saved before fsmem kept the folder). Pure."""
    doc = fmt.split(text)
    front = doc.front_matter
    if front.get("source") != "claude-code" or front.get("parent_session"):
        return None
    cwd = front.get(CWD_FIELD)
    project = project_name(cwd)
    if project is None:
        return None
    source = source_of(rel, archive_dir)
    date = note_date(source, front)
    if date is None:
        return None
    lines = _summary_lines(text.splitlines()[doc.body_start_line - 1 :])
    return SessionLine(source, date, str(front.get("created") or ""), project, _describe(lines, str(cwd), front))


def _summary_lines(body: list[str]) -> list[str]:
    """The lines inside the episode's fenced blocks: one per message, tool call and tool result."""
    out, inside = [], False
    for line in body:
        if fmt.FENCED_CODE.match(line):
            inside = not inside
        elif inside:
            out.append(line)
    return out


def _describe(lines: list[str], cwd: str, front: dict[str, Any]) -> str:
    request = ending = None
    files: list[str] = []
    commands: list[str] = []
    errors: list[str] = []
    for line in lines:
        if line.startswith("user: "):
            said = line[6:]
            if request is None:
                request = _request(said)
            if said.startswith(_INTERRUPTED):
                ending = "interrupted by the user"
        elif line.startswith("assistant: "):
            ending = f'"{_prose(line[11:], cwd, ENDING_CHARS)}"'
        elif (error := _ERROR.match(line)) is not None:
            errors.append(error.group(1))
        elif (call := _TOOL_CALL.match(line)) is not None:
            name, arguments = call.group(1), call.group(2)
            if name in _CHANGING_TOOLS:
                found = _argument(arguments, _CHANGING_TOOLS[name])
                if found:
                    shown = _relative(found, cwd)
                    if shown not in files:
                        files.append(shown)
            elif name == "Bash":
                command = _argument(arguments, "command")
                if command:
                    shown = one_line(_scrub(command, cwd), PART_CHARS)
                    if shown not in commands:
                        commands.append(shown)
    if request is None:
        title = front.get("title")
        request = title if isinstance(title, str) else ""
    parts = [f'"{_prose(request, cwd, REQUEST_CHARS)}"']
    if files:
        parts.append("changed " + _listed(files, FILES_SHOWN))
    if commands:
        parts.append("ran " + _listed(commands, COMMANDS_SHOWN))
    if errors:
        first = _prose(errors[0], cwd, ERROR_CHARS)
        parts.append(f'{len(errors)} error{"s" if len(errors) > 1 else ""} (first: "{first}")')
    parts.append(f"ended: {ending or 'no reply'}")
    return "; ".join(parts)


def _request(said: str) -> str | None:
    """What a person asked in one user line: the text typed, or a slash command with its arguments (never a bare
    command such as `/clear`, a command's output or a hook's markup)."""
    command = _COMMAND.search(said)
    if command is not None:
        found = _COMMAND_ARGS.search(said)
        arguments = found.group(1).strip() if found else ""
        return f"{command.group(1).strip()} {arguments}" if arguments else None
    typed = title_of({"type": "user", "message": {"content": said}}) is not None
    return said if typed and not said.lstrip().startswith("<") else None


def _argument(arguments: str, name: str) -> str | None:
    """One argument of a tool call line (`key=value, key=value`, as `_tool_input` writes it)."""
    found = re.search(rf"(?:^|, ){re.escape(name)}=(.*?)(?=, [A-Za-z_][A-Za-z0-9_]*=|$)", arguments)
    return found.group(1).strip() if found and found.group(1).strip() else None


def _relative(path: str, cwd: str) -> str:
    """A file path as the digest lists it: relative to the working folder, else its last component."""
    base = cwd.rstrip("/\\")
    if base and path.startswith(base + "/"):
        path = path[len(base) + 1 :]
    elif base and path.startswith(base + "\\"):
        path = path[len(base) + 1 :]
    elif path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        path = "…/" + re.split(r"[\\/]", path.rstrip("/\\"))[-1]
    return one_line(_scrub(path, cwd), PART_CHARS)


def _scrub(text: str, cwd: str) -> str:
    """`text` with the working folder made relative and every other absolute path cut to its last component."""
    base = cwd.rstrip("/\\")
    if base:
        text = text.replace(base + "/", "").replace(base + "\\", "")
        text = re.sub(re.escape(base) + r"(?![\w.-])", ".", text)
    return _ABSOLUTE.sub("…/", text)


def _prose(text: str, cwd: str, limit: int) -> str:
    """Text someone wrote, on one line, cut, without absolute paths, shown as written in Markdown."""
    return one_line(_scrub(text, cwd), limit).translate(_PROSE_ESCAPES).replace('"', "'")


def _listed(items: list[str], shown: int) -> str:
    """`a`, `b` and `+N more`: code spans, so nothing in them is a link or markup."""
    spans = ", ".join(_code(item) for item in items[:shown])
    more = len(items) - shown
    return spans + (f" (+{more} more)" if more > 0 else "")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def render(line: SessionLine, located: Callable[[str], str]) -> str:
    """The bullet for one session: its line, then its citation as consolidation writes one (`([DATE](SOURCE))`),
    linked from `topics/`."""
    return f"- {line.text} ([{line.date}](../{link_path(located(line.source))}))"


def section_lines(lines: list[SessionLine], located: Callable[[str], str]) -> list[str]:
    """The `## Sessions` bullets of one project: its sessions by start, then by path."""
    return [render(line, located) for line in sorted(lines, key=lambda s: (s.date, s.start, s.source))]


def with_section(text: str | None, project: str, path: str, lines: list[SessionLine], bullets: list[str]) -> str:
    """The document `text` (None: a new one) with its `## Sessions` section holding `bullets` and its dates widened
    to the sessions'; nothing else in it changes."""
    dates = sorted(line.date for line in lines)
    if text is None:
        text = docs.new_document(path, "topic", project, project, dates[0])
        heading = f"# {project}\n"
        text = text[: -len(heading)] + f"# {project.translate(_PROSE_ESCAPES)}\n"  # a folder named [[x]] links nowhere
    all_lines = text.splitlines(keepends=True)
    newline = "\r\n" if all_lines and all_lines[0].endswith("\r\n") else "\n"
    body_start = fmt.split(text).body_start_line
    found = [h for h in fmt.headings(text) if h.level == 2 and h.title.strip().lower() == SECTION.lower()]
    block = [b + newline for b in bullets]
    if found:
        start, end = found[0].line, found[0].end_line  # 1-based: the heading, the section's last line
        tail = all_lines[end:]
        keep_blank = [newline] if tail else []
        all_lines = [*all_lines[:start], *block, *keep_blank, *tail]
    else:
        if all_lines and not all_lines[-1].endswith(("\n", "\r")):
            all_lines[-1] += newline
        if all_lines and len(all_lines) >= body_start and all_lines[-1].strip():
            all_lines.append(newline)
        all_lines += [f"## {SECTION}{newline}", *block]
    new = "".join(all_lines)
    return _widen_dates(new, dates[0], dates[-1])


def _widen_dates(text: str, oldest: str, newest: str) -> str:
    doc = fmt.split(text)
    if not doc.has_front_matter:
        return text
    front = doc.front_matter
    changes: dict[str, str] = {}
    updated = fmt.parse_timestamp(str(front.get("updated") or ""))
    wanted = fmt.parse_timestamp(newest)
    if wanted is not None and (updated is None or updated < wanted):
        changes["updated"] = newest
    created = str(front.get("created") or "")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", created) and oldest < created:
        changes["created"] = oldest
    return fmt.set_fields(text, changes) if changes else text
