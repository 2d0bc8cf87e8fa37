"""Names already stored that a Windows or macOS copy of the memory cannot hold, and the `fsmem mv` for each.

fsmem refuses to create such names (`fsmem.store.paths`) and `fsmem sync`
refuses them from a remote (`fsmem.history.incoming`), but a memory may hold
them from before or from a human's editor: they are reported by `fsmem check`,
never hidden and never a reason for sync to stop. Each report carries a rename that fsmem would accept, in the order
to run them (a folder before what it holds).
"""

from __future__ import annotations

import shlex
import unicodedata
from collections.abc import Iterable

from fsmem.format.portable import DEVICE_NAMES, UNPORTABLE_CHARACTERS, portable_problem, twin_key, twin_problem
from fsmem.store.paths import MEMORY_SUFFIXES, shown


def unportable(rels: Iterable[str]) -> list[tuple[str, str]]:
    """(path, message) for each file or folder among `rels` (memory files) whose own name cannot be held."""
    found: dict[str, str] = {}
    renamed: dict[str, str] = {}  # path -> its path once everything reported above it is renamed
    taken: dict[str, set[str]] = {}  # parent path -> the case-folded names in it
    names: dict[str, set[str]] = {}
    for rel in rels:
        parent = ""
        for name in rel.split("/"):
            names.setdefault(parent, set()).add(name)
            parent = f"{parent}/{name}" if parent else name
    for parent, held in names.items():
        taken[parent] = {twin_key(name) for name in held}
    for parent in sorted(names, key=lambda p: (p.count("/") if p else -1, p)):
        seen: dict[str, str] = {}
        # of two twins, keep a lower-case one, and the composed (NFC) one
        for name in sorted(
            names[parent], key=lambda n: (n != n.lower(), not n.isascii() and n != unicodedata.normalize("NFC", n), n)
        ):
            path = f"{parent}/{name}" if parent else name
            problem = portable_problem(name)
            twin = seen.setdefault(twin_key(name), name)
            if problem is None and twin != name:
                problem = twin_problem(name, twin, shown(_join(parent, twin)))
            source = _join(renamed.get(parent, parent), name)
            if problem is None:
                if source != path:
                    renamed[path] = source
                continue
            if "\\" in name:
                found[path] = f"{problem}; rename it outside fsmem (fsmem reads '\\' as a folder separator)"
                continue
            target = _free(_fixed(name), taken[parent])
            renamed[path] = _join(renamed.get(parent, parent), target)
            found[path] = f"{problem}; rename it with: fsmem mv {shlex.quote(source)} {shlex.quote(renamed[path])}"
    return sorted(found.items())


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _fixed(name: str) -> str:
    """A name every system holds, as close to `name` as it can be."""
    suffix = next((s for s in MEMORY_SUFFIXES if name.lower().endswith(s)), "")
    stem = name[: len(name) - len(suffix)] if suffix else name
    for character in UNPORTABLE_CHARACTERS:
        stem = stem.replace(character, "-")
    stem = stem.rstrip(". ") or "untitled"
    head, dot, rest = stem.partition(".")
    if head.rstrip(" ").lower() in DEVICE_NAMES:
        stem = f"{head.rstrip(' ')}_{dot}{rest}"
    return stem + suffix


def _free(name: str, taken: set[str]) -> str:
    """`name`, or `name-2`, `name-3`… : one that no other entry of its folder holds in any case."""
    suffix = next((s for s in MEMORY_SUFFIXES if name.lower().endswith(s)), "")
    stem = name[: len(name) - len(suffix)] if suffix else name
    candidate, number = name, 1
    while twin_key(candidate) in taken:
        number += 1
        candidate = f"{stem}-{number}{suffix}"
    taken.add(twin_key(candidate))
    return candidate
