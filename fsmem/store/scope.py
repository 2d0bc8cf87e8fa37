"""A scope: the part of a memory one agent may reach, as path prefixes (`topics/`, `entities/people/`).

Outside its scope an agent finds nothing: a path it names there is refused
the same way whether or not the file exists, walks never enter or report
what lies outside, and so no answer (a listing, a total, a search result, the
pre-injected context) holds, counts or names a file out of scope. A prefix
matches whole path components: `topics` reaches `topics/billing.md`, not
`topics-old/x.md`. A symbolic link is in scope only when both its name and
its real target are.

The check is applied where paths are resolved (`fsmem.store.paths.resolve`)
and where files are enumerated (`fsmem.store.walk.walk_stats`); the queries
above take a `within` predicate built from it. History (log, show, diff,
restore) is seen through `fsmem.history.view`, which resolves revisions within
the scope's own commits and withholds the messages of commits that reached
outside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fsmem.budget import echo
from fsmem.errors import InvalidArgument, OutOfScope
from fsmem.store.paths import MEMORY_SUFFIXES, lexical_parts, quoted


@dataclass(frozen=True)
class Scope:
    """Memory-relative prefixes (POSIX, no trailing slash), none inside another."""

    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, given: Scope | str | Iterable[str] | None) -> Scope | None:
        """The scope of `given` prefixes; None (the whole memory) for none, or when one of them is the root.

        Each prefix passes the lexical containment rule: relative, no `..`
        above the root, nothing hidden (InvalidArgument or PathEscape otherwise).
        """
        if given is None or isinstance(given, Scope):
            return given
        items = [given] if isinstance(given, str) else list(given)
        if not items:
            return None
        prefixes: set[str] = set()
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise InvalidArgument(f"a scope prefix must be a path such as 'topics/', not {echo(item)}")
            parts = lexical_parts(item)
            if not parts:
                return None  # the root itself: everything
            prefixes.add("/".join(parts))
        kept = sorted(p for p in prefixes if not any(p.startswith(q + "/") for q in prefixes))
        return cls(tuple(kept))

    def contains(self, rel: str) -> bool:
        """True when `rel` is a prefix or lies under one."""
        return any(rel == p or rel.startswith(p + "/") for p in self.prefixes)

    def leads_to(self, rel: str) -> bool:
        """True when `rel` is a folder above a prefix (the root included): it may be listed, filtered."""
        if rel in ("", "."):
            return True
        return any(p.startswith(rel + "/") for p in self.prefixes)

    def reaches(self, rel: str) -> bool:
        return self.contains(rel) or self.leads_to(rel)

    def roots_under(self, rel: str) -> list[str]:
        """The part of folder `rel` in scope, as the fewest paths: `rel` itself, or the prefixes under it."""
        if self.contains(rel):
            return [rel]
        return [p for p in self.prefixes if rel in ("", ".") or p.startswith(rel + "/")]

    def check(self, rel: str, raw: str, want: str = "file") -> None:
        """Refuse `rel` (the path given as `raw`) unless in scope; `want="any"` also lets folders above a prefix pass.

        The refusal is the same whether or not the path exists.
        """
        if self.contains(rel) or (want != "file" and self.leads_to(rel)):
            return
        raise OutOfScope(
            f"path {quoted(raw)} is outside this agent's scope ({self.describe()}); "
            "it reaches only files under those paths"
        )

    def describe(self) -> str:
        return ", ".join(p if p.lower().endswith(MEMORY_SUFFIXES) else p + "/" for p in self.prefixes)

    def to_list(self) -> list[str]:
        return list(self.prefixes)
