"""The file format: YAML front matter over a Markdown body. Pure functions, no I/O.

Humans edit these files, so nothing here reflows, re-sorts or re-encodes text:
splitting keeps exact offsets, and `set_fields` rewrites only the lines of the
fields it changes. A file that does not parse is still a file: the problems are
reported and the whole text is treated as body.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from fsmem.config import first_alias
from fsmem.format.fences import FENCE, fences
from fsmem.format.simple_fields import simple_fields
from fsmem.format.timestamps import parse_timestamp


@functools.cache
def _yaml() -> SimpleNamespace:
    """PyYAML and fsmem's loader, imported on first use: a warm grep or read parses no front matter.

    The safe loader (in C: several times faster on large front matter), but a timestamp-shaped value that is no
    date (`created: 2026-13-45`) stays its string, for `validate` to report; a `!!set` is its members in the order
    written (a set's order of strings, and so an answer, changed per process), a `!!binary` its base64 text."""
    import yaml

    safe_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    safe_dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class FrontMatterLoader(safe_loader):  # type: ignore[misc, valid-type]
        pass

    def timestamp_or_text(loader: Any, node: Any) -> Any:
        try:
            return loader.construct_yaml_timestamp(node)
        except ValueError:
            return loader.construct_scalar(node)

    def set_as_list(loader: Any, node: Any) -> Any:
        return [loader.construct_object(key, deep=True) for key, _value in node.value]

    def binary_as_text(loader: Any, node: Any) -> Any:
        return "".join(loader.construct_scalar(node).split())

    FrontMatterLoader.add_constructor("tag:yaml.org,2002:timestamp", timestamp_or_text)
    FrontMatterLoader.add_constructor("tag:yaml.org,2002:set", set_as_list)
    FrontMatterLoader.add_constructor("tag:yaml.org,2002:binary", binary_as_text)
    return SimpleNamespace(module=yaml, loader=FrontMatterLoader, safe_loader=safe_loader, dumper=safe_dumper)


MEMORY_TYPES = ("semantic", "episodic", "procedural")
CONSOLIDATED_FIELD = "consolidated"
# Front matter longer than this is reported and not parsed: a header is a few hundred bytes.
MAX_FRONT_MATTER_CHARS = 64 * 1024
# Lists and mappings in a field, one in another: a header holds one or two; more is refused, not read. As
# deep as a write may set (`fsmem.store.fields.MAX_FIELD_DEPTH`), so whatever fsmem wrote it reads.
MAX_NESTING = 32


@dataclass
class Problem:
    """Something wrong with a file, located by 1-based line number."""

    line: int
    message: str


@dataclass
class Document:
    """A memory file split into front matter and body, with exact positions.

    `body_start_line` is the 1-based line number of the first body line, so a
    line number inside the body maps back to the file without recounting.
    """

    text: str
    front_matter: dict[str, Any] = field(default_factory=dict)
    has_front_matter: bool = False
    front_matter_text: str = ""
    body: str = ""
    body_start_line: int = 1
    problems: list[Problem] = field(default_factory=list)

    @property
    def title(self) -> str | None:
        value = self.front_matter.get("title")
        return str(value) if value is not None else None

    @property
    def description(self) -> str | None:
        value = self.front_matter.get("description")
        return " ".join(str(value).split()) if value is not None else None

    @property
    def tags(self) -> list[str]:
        return normalize_tags(self.front_matter.get("tags"))


def normalize_tags(value: Any) -> list[str]:
    """Tags may be written as a YAML list or as a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)):
        return [str(t).strip() for t in value if str(t).strip()]
    return [str(value)]


def decode(data: bytes) -> tuple[str, list[Problem]]:
    """Bytes to text without ever failing: invalid UTF-8 is replaced and reported, and so is a NUL byte.

    A NUL is valid UTF-8 but not text: tools treat such a file as binary, so a
    note carrying one must not be copied into the documents agents read.
    """
    problems: list[Problem] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        text = data.decode("utf-8", errors="replace")
        problems.append(Problem(line, f"not valid UTF-8 (byte {exc.start}); shown with replacement characters"))
    nul = data.find(b"\x00")
    if nul != -1:
        problems.append(Problem(data[:nul].count(b"\n") + 1, f"contains a NUL byte (byte {nul}); not text"))
    return text, problems


def split(text: str) -> Document:
    """Split text into front matter and body; never raises.

    The opening fence must be the very first line (after an optional BOM); the
    closing fence is the next line that is exactly `---` or `...`. CRLF line
    endings are accepted. YAML dates and times become ISO 8601 strings so that
    what a caller sees is what the file says.
    """
    doc = Document(text=text, body=text)
    fenced = fences(text)
    if fenced is None:
        return doc
    if isinstance(fenced, str):  # "unclosed"
        doc.problems.append(Problem(1, "front matter opened with '---' but never closed"))
        return doc
    raw, closing, body = fenced
    if len(raw) > MAX_FRONT_MATTER_CHARS:
        doc.problems.append(
            Problem(1, f"front matter is longer than {MAX_FRONT_MATTER_CHARS // 1024} KiB; not read as YAML")
        )
        return doc
    yaml = _yaml().module
    try:
        alias = first_alias(raw)
        if alias is not None:
            doc.problems.append(
                Problem(alias + 2, "front matter uses a YAML anchor or alias (& or *); fsmem does not expand them")
            )
            return doc
        fields = simple_fields(raw) if raw.strip() else {}
        loaded = fields if fields is not None else yaml.load(raw, Loader=_yaml().loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        doc.problems.append(Problem(line, f"front matter is not valid YAML: {reason}"))
        return doc
    except RecursionError:
        doc.problems.append(Problem(1, "front matter is nested too deeply to read"))
        return doc
    except ValueError as exc:  # a scalar its tag cannot hold (`!!int abc`), an integer of over 4,300 digits
        reason = str(exc).split(";")[0]
        doc.problems.append(Problem(1, f"front matter holds a value YAML cannot construct: {reason}"))
        return doc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        doc.problems.append(Problem(2, "front matter must be a mapping of fields"))
        return doc
    try:
        front = loaded if fields is not None else {str(k): _plain(v) for k, v in loaded.items()}
    except _TooDeep:
        doc.problems.append(Problem(1, "front matter is nested too deeply to read"))
        return doc
    doc.has_front_matter = True
    doc.front_matter = front
    doc.front_matter_text = raw
    doc.body = body
    doc.body_start_line = closing + 2
    return doc


class _TooDeep(Exception):
    pass


def _plain(value: Any, depth: int = 1) -> Any:
    """YAML turns dates into objects; keep them as the ISO strings the file holds.

    A value nested past MAX_NESTING is refused (_TooDeep): the C parser reads a thousand levels, and every reader
    of the value after it (this function, `str`, JSON) recurses, so one file's `[[[...]]]` failed ls of them all."""
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, (dict, list)) and depth > MAX_NESTING:
        raise _TooDeep
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    return value


def validate(doc: Document) -> list[Problem]:
    """Problems with the known fields of a parsed document (beyond parse errors)."""
    problems = list(doc.problems)
    if not doc.has_front_matter:
        if not doc.problems:
            problems.append(Problem(1, "no front matter (expected a '---' fenced YAML block)"))
        return problems
    fm = doc.front_matter
    line_of = _field_lines(doc.front_matter_text)

    def at(key: str) -> int:
        return line_of.get(key, 1) + 1

    kind = fm.get("type")
    if kind is not None and kind not in MEMORY_TYPES:
        problems.append(Problem(at("type"), f"type must be one of {', '.join(MEMORY_TYPES)}, not {kind!r}"))
    importance = fm.get("importance")
    if importance is not None:
        if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
            problems.append(Problem(at("importance"), f"importance must be a number from 0 to 1, not {importance!r}"))
    for key in ("created", "updated"):
        value = fm.get(key)
        if value is not None and parse_timestamp(str(value)) is None:
            problems.append(Problem(at(key), f"{key} must be an ISO 8601 date or time, not {value!r}"))
    for key in ("title", "description"):
        value = fm.get(key)
        if value is not None and not isinstance(value, (str, int, float)):
            problems.append(Problem(at(key), f"{key} must be a single line of text"))
    tags = fm.get("tags")
    if tags is not None and not isinstance(tags, (list, str)):
        problems.append(Problem(at("tags"), "tags must be a list or a comma-separated string"))
    return problems


_TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][\w\-]*)[ \t]*:")


def _field_lines(front_matter_text: str) -> dict[str, int]:
    """Top-level field name -> 1-based line within the front matter block."""
    found: dict[str, int] = {}
    for number, line in enumerate(front_matter_text.splitlines(), start=1):
        match = _TOP_LEVEL_KEY.match(line)
        if match and match.group(1) not in found:
            found[match.group(1)] = number
    return found


def _continues_value(line: str) -> bool:
    """True for the indented or `- item` lines that belong to the field above."""
    return line[:1] in (" ", "\t") or line.startswith(("- ", "-\t")) or line.rstrip("\r\n") == "-"


_ISO_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")


def dump_field(key: str, value: Any) -> str:
    """One field as one YAML line: dates unquoted, lists and mappings in flow style."""
    if isinstance(value, str) and _ISO_STAMP.match(value):
        return f"{key}: {value}"
    yaml = _yaml()
    if isinstance(value, (list, tuple, dict)):
        flow = yaml.module.dump(
            list(value) if isinstance(value, tuple) else value,
            Dumper=yaml.dumper,
            default_flow_style=True,
            allow_unicode=True,
            width=10_000,
        )
        return f"{key}: {flow.strip()}"
    dumped = yaml.module.dump(
        {key: value}, Dumper=yaml.dumper, default_flow_style=False, allow_unicode=True, sort_keys=False, width=10_000
    )
    return dumped.rstrip("\n")


def render(front_matter: dict[str, Any], body: str, newline: str = "\n") -> str:
    """A new file: front matter fields in the given order, then the body."""
    lines = [FENCE] + [dump_field(k, v) for k, v in front_matter.items() if v is not None] + [FENCE]
    head = newline.join(lines) + newline
    return head + body


def set_fields(text: str, changes: dict[str, Any]) -> str:
    """Set (or, with None, remove) front matter fields, touching only their lines.

    Every other byte of the file stays as it was: unknown fields, comments,
    ordering, quoting and line endings. A file with no front matter gets one.
    """
    doc = split(text)
    first_line = text.split("\n", 1)[0]
    newline = "\r\n" if first_line.endswith("\r") else "\n"  # new lines follow the fence's own ending
    if not doc.has_front_matter:
        if doc.problems:
            raise ValueError("cannot set fields: " + doc.problems[0].message)
        fields = {k: v for k, v in changes.items() if v is not None}
        return render(fields, text, newline)
    lines = text.splitlines(keepends=True)
    closing = doc.body_start_line - 2  # index of the closing fence line
    block = lines[1:closing]
    for key, value in changes.items():
        start = None
        for index, line in enumerate(block):
            match = _TOP_LEVEL_KEY.match(line)
            if match and match.group(1) == key:
                start = index
                break
        replacement = [] if value is None else [dump_field(key, value) + newline]
        if start is None:
            if replacement:
                block.extend(replacement)
            continue
        end = start + 1
        while end < len(block) and _continues_value(block[end]):
            end += 1
        block[start:end] = replacement
    return "".join(lines[:1] + block + lines[closing:])


def body_digest(text: str) -> str:
    """What a session note's `consolidated:` field records: a hash of its body (front matter does not count)."""
    import hashlib

    return "sha256-" + hashlib.sha256(split(text).body.encode("utf-8")).hexdigest()[:16]


def is_consolidated(text: str) -> bool:
    """True when a note's `consolidated:` field matches its body: everything in it is in the documents.

    A fast path without YAML: the common LF file with the field written by the consolidator.
    """
    import hashlib

    if not text.startswith("---\n"):
        return False
    end = text.find("\n---\n", 3)
    if end == -1:
        return False
    digest = "sha256-" + hashlib.sha256(text[end + 5 :].encode("utf-8")).hexdigest()[:16]
    return f"\n{CONSOLIDATED_FIELD}: {digest}\n" in text[3 : end + 1]
