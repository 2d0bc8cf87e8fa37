"""What the memory tool's `view` shows, in the reference's format, and how a view is cut to a token cap.

The reference (`memory_20250818`) lists a folder two levels deep with sizes and
shows a file with six-wide line numbers. fsmem keeps those strings exactly and
adds one thing: over a cap, a view is cut after whole lines or entries, and its
last line says what was left out and which `view_range` goes on.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fsmem.budget import Meter, fit_text
from fsmem.errors import FsmemError
from fsmem.store import beneath
from fsmem.store.beneath import Folder
from fsmem.store.paths import is_memory_name, is_memory_path, is_visible_folder, name_problem

if TYPE_CHECKING:
    from fsmem.tokens import TokenCounter

MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
_TRAILER_RESERVE = 45  # tokens kept free for the line that says where a cut view goes on


@dataclass
class CommandAnswer:
    """A command's text plus what the retrieval log records about it."""

    text: str
    paths: list[str] = field(default_factory=list)
    rows: int = 0
    truncated: bool = False
    lines: list[int] | None = None
    next_range: tuple[int, int] | None = None  # the view_range a cut file view names


def format_size(size: int) -> str:
    """Sizes as the reference's directory view shows them: 0B, 42B, 4K, 1.5M."""
    if size == 0:
        return "0B"
    unit = min((size.bit_length() - 1) // 10, 3)
    value = size / 1024**unit
    suffix = "BKMG"[unit]
    return f"{int(value)}{suffix}" if value == int(value) else f"{value:.1f}{suffix}"


def numbered_line(line_number: int, text: str) -> str:
    return f"{str(line_number).rjust(LINE_NUMBER_WIDTH)}\t{text}"


def folder_entries(root: str, folder: Folder, at: str, *, memory_only: bool) -> list[tuple[str, str]]:
    """(size, relative name) of what `folder` holds, two levels deep, hidden items and links out left out.

    `folder` is open below the real memory root `root`, at the memory path `at`, and is listed through its
    descriptor (`fsmem.store.beneath`): each entry is looked at in it, a subfolder opened in it without following
    a link, and a link's target, when it lies inside the root, reached from the root through no link. A folder
    swapped for a link out after the path was checked thus lists nothing outside the memory. With `memory_only`
    (the folder is an fsmem memory) only memory files and their folders are listed: never fsmem.yaml, `.git/`
    or a link into them.
    """
    items: list[tuple[str, str]] = []

    def collect(current: Folder, inside: str, prefix: str, depth: int) -> None:
        try:
            names = sorted(current.names())
        except OSError:
            return
        for name in names:
            if name.startswith("."):
                continue
            relative = f"{prefix}/{name}" if prefix else name
            found = _entry(root, current, name, f"{inside}/{name}" if inside else name)
            if found is None:
                continue
            info, where, linked = found
            is_dir = stat.S_ISDIR(info.st_mode)
            if memory_only and not _memory_entry(where, name, is_dir):
                continue
            if is_dir:
                items.append((format_size(info.st_size), relative + "/"))
                if depth < 2:
                    try:
                        below = beneath.open_folder(root, where, create=False) if linked else current.child(name)
                    except (OSError, FsmemError):
                        continue  # swapped for a link or a file meanwhile: not entered
                    with below:
                        collect(below, "" if where == "." else where, relative, depth + 1)
            elif stat.S_ISREG(info.st_mode):
                items.append((format_size(info.st_size), relative))

    collect(folder, "" if at == "." else at, "", 1)
    return items


def _entry(root: str, folder: Folder, name: str, inside: str) -> tuple[os.stat_result, str, bool] | None:
    """The entry `name` of `folder` (at the memory path `inside`): its stat, the memory path of what it is, and
    whether that was reached through a link (then its target, reached from the root through no link); None for
    a link that leads out of the root, dangles or meets a link swapped in, and for an entry gone meanwhile."""
    try:
        info = folder.lstat(name)
        if not stat.S_ISLNK(info.st_mode):
            return info, inside, False
        parent = os.path.join(root, inside.rpartition("/")[0])
        real = os.path.realpath(os.path.join(parent, folder.readlink(name)))
        if real != root and not real.startswith(root + os.sep):
            return None  # a link that leads out of the memory is not shown
        target = os.path.relpath(real, root).replace(os.sep, "/")
        if target == ".":
            with beneath.open_root(root) as top:
                return top.stat(), target, True
        reached = beneath.place(root, target, generated=True, follow=False, create=False, file=False)
        try:
            info = reached.folder.lstat(reached.name)
        finally:
            reached.folder.close()
    except (OSError, FsmemError):
        return None
    return None if stat.S_ISLNK(info.st_mode) else (info, target, True)


class ViewCap:
    """A cap of `max_tokens` on view answers, counted with `tokens`."""

    def __init__(self, max_tokens: int, tokens: TokenCounter):
        self.max_tokens = max_tokens
        self.tokens = tokens

    def fits(self, text: str) -> bool:
        # A token is at least one byte, so a short answer fits without being counted.
        return len(text.encode("utf-8")) <= self.max_tokens or self.tokens.count(text) <= self.max_tokens

    def bounded(self, header: str, note: str) -> str:
        """`header` and the `note` that the cap is too small, within the cap: the note alone when both do not
        fit (a view at 1 token was 32-55), cut by the last net below that."""
        if self.fits(header + note):
            return header + note
        return fit_text(self.tokens.count, self.tokens.truncate, note, self.max_tokens)[0]

    def cut_file(self, answer: CommandAnswer, header: str, numbered: list[str], first: int, total: int) -> None:
        """Cut a file view that exceeds the cap after whole lines and name the view_range that goes on."""
        cap = self.max_tokens
        if len(answer.text.encode("utf-8")) <= cap:
            return
        meter = Meter(self.tokens.count, max_tokens=cap, reserve=self.tokens.count(header) + _TRAILER_RESERVE)
        kept: list[str] = []
        for line in numbered:
            if not meter.take_text(line):
                break
            kept.append(line)
        if len(kept) == len(numbered) and self.fits(answer.text):
            return
        last_asked = first + len(numbered) - 1
        note = ""
        if not kept:  # one line longer than the whole budget: show its start, so paging still moves on
            head = meter.head_that_fits(  # a head of the line's text, under its number
                numbered[0].split("\t", 1)[1], lambda part: numbered_line(first, part), truncate=self.tokens.truncate
            )
            if head is None:
                answer.text = self.bounded(header, f"[this view stops at {cap} tokens, too few to show line {first}]")
                answer.truncated, answer.rows, answer.lines = True, 0, None
                return
            kept = [head]
            note = f" (line {first} is longer than that and is shown cut)"

        def render(lines: list[str]) -> str:
            last = first + len(lines) - 1
            more = f"view_range [{last + 1}, {last_asked}]" if last < last_asked else "nothing"
            return (
                header
                + "\n".join(lines)
                + f"\n[lines {first}-{last} of {total} shown: this view stops at {cap} tokens{note}; "
                + f"next: {more}]"
            )

        text = render(kept)
        while len(kept) > 1 and self.tokens.count(text) > cap:
            kept.pop()
            text = render(kept)
        answer.text, answer.truncated, answer.rows = text, True, len(kept)
        answer.lines = [first, first + len(kept) - 1]
        if answer.lines[1] < last_asked:
            answer.next_range = (answer.lines[1] + 1, last_asked)

    def cut_directory(self, answer: CommandAnswer, header: str, rows: list[str], first: int, total: int) -> None:
        """Cut a directory view that exceeds the cap after whole entries and name the view_range that goes on
        (entries numbered from `first`, of `total`)."""
        if self.fits(answer.text):
            return
        cap = self.max_tokens
        meter = Meter(self.tokens.count, max_tokens=cap, reserve=self.tokens.count(header + "\n") + _TRAILER_RESERVE)
        kept = rows[:1]  # the folder itself is always named
        meter.take_text(rows[0])
        for row in rows[1:]:
            if not meter.take_text(row):
                break
            kept.append(row)
        entries = len(kept) - 1
        last, last_asked = first + entries - 1, first + len(rows) - 2
        if not entries:
            trailer = f"[this view stops at {cap} tokens, too few to show entry {first} of {total}]"
            answer.text = self.bounded(header + "\n" + rows[0] + "\n", trailer)
            answer.truncated, answer.rows, answer.paths = True, 0, []
            return
        else:
            more = f"view_range [{last + 1}, {last_asked}]" if last < last_asked else "nothing"
            trailer = f"[entries {first}-{last} of {total} shown: this view stops at {cap} tokens; next: {more}]"
        answer.text = header + "\n" + "\n".join(kept) + "\n" + trailer
        answer.truncated, answer.rows, answer.paths = True, entries, answer.paths[:entries]


def _memory_entry(inside: str, name: str, is_dir: bool) -> bool:
    """Over an fsmem memory: is this directory entry (name as listed, memory path of what it is) a memory file
    or folder?"""
    if is_dir:
        return name_problem(name) is None and is_visible_folder(inside)
    return is_memory_name(name) and is_memory_path(inside)


__all__ = ["CommandAnswer", "ViewCap", "folder_entries", "format_size", "numbered_line", "MAX_LINES"]
