"""`ls`: one row per memory file, capped by rows, honest about what it left out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

    @classmethod
    def from_meta(cls, meta: FileMeta) -> ListEntry:
        return cls(meta.path, meta.title, meta.type, meta.updated, meta.tokens, meta.description, list(meta.tags))


@dataclass
class Listing:
    """The answer to `ls`: the rows shown, and how many matching files were left out."""

    entries: list[ListEntry]
    total: int
    left_out: int
    tokens: int = 0
    skipped: list[str] = field(default_factory=list)  # memory-named files that could not be read

    @property
    def truncated(self) -> bool:
        return self.left_out > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [vars(e) for e in self.entries],
            "total": self.total,
            "left_out": self.left_out,
            "truncated": self.truncated,
            "tokens": self.tokens,
            "skipped": self.skipped,
        }

    def to_text(self) -> str:
        lines = [format_entry(e) for e in self.entries]
        if not self.entries:
            lines.append("(no memory files match)")
        if self.left_out:
            lines.append(
                f"[{self.left_out} of {self.total} files left out; narrow with PATH, --type, --tag or "
                f"--updated-after, or raise --max-results]"
            )
        else:
            lines.append(f"[{self.total} files]")
        if self.skipped:
            names = ", ".join(self.skipped[:3]) + (
                f" and {len(self.skipped) - 3} more" if len(self.skipped) > 3 else ""
            )
            lines.append(
                f"[{len(self.skipped)} file(s) left out, unreadable or not memory: {names}; fsmem check says why]"
            )
        return "\n".join(lines)


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
