"""`ls`: one row per memory file, capped by rows, honest about what it left out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from fsmem import faces
from fsmem.budget import CUT_BY_TOKENS, Count, Meter, Metered, Page, Paged, long_path
from fsmem.store.catalog import FileMeta


@dataclass
class ListEntry:
    path: str
    title: str | None
    type: str | None
    updated: str | None
    tokens: int
    description: str | None
    tags: list[str] = field(default_factory=list)
    version: str | None = None  # pass it back as expected_version to write or edit only this version

    @classmethod
    def from_meta(cls, meta: FileMeta) -> ListEntry:
        return cls(
            meta.path, meta.title, meta.type, meta.updated, meta.tokens, meta.description, list(meta.tags), meta.version
        )


@dataclass
class Listing(Paged, Metered):
    """The answer to `ls`: the rows shown, and where they stand among all matching files (`page`)."""

    entries: list[ListEntry]
    page: Page
    meter: Meter | None = field(default=None, repr=False, compare=False)
    skipped: list[str] = field(default_factory=list)  # memory-named files that could not be read

    @property
    def cited(self) -> list[str]:
        return [e.path for e in self.entries]

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [vars(e) for e in self.entries],
            **self.page.to_dict(),
            "tokens": self.tokens,
            "skipped": self.skipped,
        }

    def to_text(self) -> str:
        lines = [format_entry(e) for e in self.entries]
        if not self.entries and not self.total:
            lines.append("(no memory files match)")
        lines.append(self.page.trailer("files", narrow=faces.narrowing("ls", ("path", "type", "tag", "updated_after"))))
        if self.skipped:
            names = ", ".join(self.skipped[:3]) + (
                f" and {len(self.skipped) - 3} more" if len(self.skipped) > 3 else ""
            )
            why = f"; {faces.call('check')} says why" if faces.current().kind != faces.TOOLS else ""
            lines.append(f"[{len(self.skipped)} file(s) left out, unreadable or not memory: {names}{why}]")
        return "\n".join(lines)


def list_entries(
    metas: Iterable[FileMeta],
    count: Count,
    *,
    offset: int,
    max_results: int,
    max_tokens: int,
    total: int | None = None,
) -> Listing:
    """Rows, whole, until the row or token cap; the page says what was left out.

    `metas` are every matching file (then `total` is None), or, with `total`, the matching files from
    `offset` on, as the catalog's SQL listing gives them: only the rows taken are decoded."""
    meter = Meter(count, max_tokens=max_tokens, max_results=max_results)
    shown: list[ListEntry] = []
    if total is None:
        metas = list(metas)
        total = len(metas)
        metas = metas[offset:]
    for meta in metas:
        entry = ListEntry.from_meta(meta)
        if not meter.take_text(format_entry(entry)):
            cut = _cut_to_fit(entry, meter, count) if not shown else None
            if cut is not None:
                shown.append(cut)
            break
        shown.append(entry)
    page = Page(offset=offset, shown=len(shown), total=total, cut_by=meter.cut_by)
    return Listing(entries=shown, page=page, meter=meter)


CUT_ROW = "[row cut by the token budget]"


def _cut_to_fit(entry: ListEntry, meter: Meter, count: Count) -> ListEntry | None:
    """`entry`, the first row of a page and longer than the room left, cut to fit: its description left out and
    its title cut, then its path too (4,096 bytes may be 4,000 tokens), marked; None when not even the mark
    fits. A file whose title was 3,000 words, first in path order, stopped `ls` with no next page."""
    if meter.cut_by != CUT_BY_TOKENS:
        return None
    room = meter.room
    for field_name in ("title", "path") if long_path(entry.path) else ("title",):
        text = getattr(entry, field_name) or ""
        head = text[: room * 4]
        while field_name == "title" or head:  # a path is shown by a head of it, never by the mark alone
            if field_name == "title":
                cut = replace(entry, title=f"{head} … {CUT_ROW}" if head else CUT_ROW, description=None)
            else:
                cut = replace(entry, path=f"{head}…", title=CUT_ROW, description=None)
            row = format_entry(cut) + "\n"
            if count(row) <= room:
                meter.spend(row)
                return cut
            if not head:
                break
            head = head[: len(head) * 3 // 4]
    return None


def format_entry(entry: ListEntry) -> str:
    updated = (entry.updated or "-")[:10]
    parts = [entry.path, f"{entry.tokens} tok", entry.type or "-", updated]
    head = "  ".join(parts)
    title = entry.title or ""
    desc = f" — {entry.description}" if entry.description else ""
    return f"{head}  {title}{desc}".rstrip()


def within_depth(rel: str, base: str, depth: int | None) -> bool:
    """True when `rel` lies at most `depth` folders below `base` (depth 1 = files directly in it)."""
    if depth is None:
        return True
    inner = rel if base in ("", ".") else rel[len(base.rstrip("/")) + 1 :]
    return inner.count("/") < depth
