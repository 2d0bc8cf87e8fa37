"""The layout shows the layers: imports point down, nothing below `Memory` knows it, no cycles, small modules.

Layers, bottom up (README, "Code map"): the foundation (errors, budget,
tokens, config), format/ (pure), store/ (disk), the queries, search,
consolidation, watch and history, then operations/ (each operation one function,
every write one transaction), then memory.py (the facade), then the faces: agents/,
cli/, integrations/ and evaluation/ (tooling). A module may import its own
layer and the ones below; every import is checked, including lazy ones inside
functions and those under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fsmem"
LAYERS = [
    (
        "foundation",
        (
            "fsmem.errors",
            "fsmem.names",  # the two names a root holds and where it is, importing only os (for fsmem.cli.early)
            "fsmem.state_files",  # fsmem's own files under .fsmem/ read as regular files only (os, stat, errno)
            "fsmem.extras",
            "fsmem.budget",
            "fsmem.tokens",
            "fsmem.config",
            "fsmem.arguments",
            "fsmem.spec",
            "fsmem.faces",
        ),
    ),
    ("format", ("fsmem.format",)),
    ("store", ("fsmem.store",)),
    (
        "queries",
        (
            "fsmem.query",
            "fsmem.search",
            "fsmem.consolidate",
            "fsmem.watch",
            "fsmem.warming",  # a long-lived process's caches caught up (watch, serve, the answering process)
            "fsmem.history",
            "fsmem.importers",  # read what is outside the memory; written by operations.importing
            "fsmem.hooks.claude_code",  # the transcript reader the hook and the importer share
        ),
    ),
    ("operations", ("fsmem.operations",)),
    ("facade", ("fsmem.memory",)),
    (
        "faces",
        (
            "fsmem.agents",
            "fsmem.cli",
            "fsmem.connect",
            "fsmem.hooks",
            "fsmem.integrations",
            "fsmem.evaluation",
            "fsmem.server",
            "fsmem.__main__",
        ),
    ),
]
MAX_LINES = 400

LONG_REASON = "This module is long because"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


@functools.cache  # the package's files do not change during a run; every test asks
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if "memory_template" not in path.parts}


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def imports_of(path: Path, module: str) -> frozenset[str]:
    """Every fsmem module `path` imports, wherever the import statement stands."""
    tree = parsed(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    known = modules()
    return frozenset(name for name in found if name in known and name != "fsmem")


def test_every_module_belongs_to_a_layer():
    unplaced = [name for name in modules() if name != "fsmem" and layer_of(name) is None]
    assert not unplaced, unplaced


@pytest.mark.parametrize("module", sorted(set(modules()) - {"fsmem"}))
def test_imports_point_down(module):
    path = modules()[module]
    own = layer_of(module)
    assert own is not None
    upward = sorted(target for target in imports_of(path, module) if (layer_of(target) or 0) > own)
    assert not upward, f"{module} ({LAYERS[own][0]}) imports from a higher layer: {upward}"


def test_nothing_below_the_facade_knows_memory():
    facade = layer_of("fsmem.memory")
    for module, path in modules().items():
        if module == "fsmem" or (layer_of(module) or 0) >= (facade or 0):
            continue
        assert "fsmem.memory" not in imports_of(path, module), module
        named = [node for node in ast.walk(parsed(path)) if isinstance(node, ast.Name) and node.id == "Memory"]
        assert not named, f"{module} names Memory: pass the root, catalog, counter or budget it needs instead"


def test_no_import_cycles():
    graph = {module: imports_of(path, module) for module, path in modules().items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + ".") or node == "fsmem":
                continue  # a package importing its own modules (lazy re-exports) is no cycle
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


@pytest.mark.parametrize("module", sorted(modules()))
def test_modules_stay_small_or_say_why(module):
    path = modules()[module]
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    if lines <= MAX_LINES:
        return
    docstring = ast.get_docstring(parsed(path)) or ""
    assert LONG_REASON in docstring, f"{module} has {lines} lines; split it, or say at its top why it is long"
