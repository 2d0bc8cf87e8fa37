"""fsmem.errors: every error fsmem can raise is exported from `fsmem` and documented, and an error from below the
library (an OSError) is worded one way at every face: Memory, the tool dispatcher (and MCP through it), the CLI
and Claude's memory tool."""

from __future__ import annotations

import ast
import errno
import inspect
from pathlib import Path

import pytest

import fsmem
from fsmem import Memory, errors
from fsmem.agents import tools
from fsmem.agents.memory_tool import MemoryTool
from fsmem.agents.registry import Reply, tool, unregister
from fsmem.cli.app import run
from fsmem.errors import FsmemError, MemoryToolError, StorageError
from fsmem.store import files, writing

PACKAGE = Path(fsmem.__file__).resolve().parent
BILLING = "---\ntitle: Billing\n---\n# Billing\n\n- payment terms: net 30\n"
FULL = "no space left on device"


def error_classes() -> dict[str, type]:
    return {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }


def sources() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "memory_template" not in path.parts:
            found[path.relative_to(PACKAGE).as_posix()] = ast.parse(path.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("name", sorted(error_classes()))
def test_every_error_is_exported_from_fsmem_and_documented(name):
    """Issue 21: StorageError and SecretFound (and SyncRefused, ConfigHeld) were raised but not exported."""
    cls = error_classes()[name]
    assert issubclass(cls, FsmemError)
    assert name in fsmem.__all__ and getattr(fsmem, name) is cls
    assert name in dir(fsmem)
    doc = inspect.cleandoc(vars(cls).get("__doc__") or "")
    assert len(doc.split()) >= 5, f"{name} needs a docstring that says when it is raised"


def test_every_error_is_raised_somewhere_and_no_module_keeps_a_public_error_of_its_own():
    names = set(error_classes())
    used: set[str] = set()
    for rel, tree in sources().items():
        for node in ast.walk(tree):
            if rel not in ("errors.py", "__init__.py") and isinstance(node, ast.Name) and node.id in names:
                used.add(node.id)
            if isinstance(node, ast.ClassDef) and rel != "errors.py":
                bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
                assert not (bases & names) or node.name.startswith("_"), (
                    f"{rel} defines {node.name}, an error of its own: put it in fsmem.errors and export it"
                )
    assert used >= names - {"FsmemError"}, sorted(names - used - {"FsmemError"})


def full_disk(path, data, **options):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


@pytest.fixture
def memory(tmp_path) -> Memory:
    memory = Memory.init(tmp_path / "mem")
    memory.write("topics/billing.md", BILLING)
    return memory


def test_an_os_error_reads_the_same_on_every_face(memory, monkeypatch, capsys):
    """Issue 21: four boundaries printed an OSError three ways. Now each maps it once, through
    `fsmem.errors.translated`: the reason in lower case and the file it concerns, relative to the memory."""
    monkeypatch.setattr(writing, "atomic_write", full_disk)
    monkeypatch.setattr("fsmem.agents.memory_tool.atomic_write", full_disk)
    where = "('topics/billing.md')"
    with pytest.raises(StorageError, match=rf"^{FULL} \('topics/billing.md'\)$"):
        memory.edit("topics/billing.md", old="net 30", new="net 45")
    answer = tools.call(memory, "edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"})
    assert answer.is_error and answer.text == f"error: {FULL} {where}"
    with pytest.raises(SystemExit) as done:
        run(["--root", str(memory.root), "edit", "topics/billing.md", "--old", "net 30", "--new", "net 45"])
    assert (done.value.code, capsys.readouterr().err) == (2, f"fsmem: error: {FULL} {where}\n")
    tool = MemoryTool.over(memory)
    with pytest.raises(MemoryToolError) as refused:
        tool.str_replace("/memories/topics/billing.md", "net 30", "net 45")
    assert str(refused.value) == (
        f"The str_replace of /memories/topics/billing.md failed: {FULL} ('/memories/topics/billing.md')"
    )
    assert (memory.root / "topics" / "billing.md").read_text() == BILLING
    result = over_mcp(memory, "edit", {"path": "topics/billing.md", "old": "net 30", "new": "net 45"})
    assert result.is_error and [c.text for c in result.content] == [f"error: {FULL} {where}"]
    assert (memory.root / "topics" / "billing.md").read_text() == BILLING


def over_mcp(memory: Memory, name: str, arguments: dict):
    """One `tools/call` from the MCP SDK's own client to fsmem's MCP server over `memory`, in this process
    (so that a fault planted here reaches the server)."""
    mcp = pytest.importorskip("mcp")
    import anyio

    from fsmem.agents.mcp_server import build_server

    async def call():
        async with mcp.Client(build_server(memory)) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(call)


def test_an_os_error_that_reaches_the_cli_itself_is_worded_alike(memory, monkeypatch, capsys):
    """The CLI's own boundary (an OSError that no library call turned into StorageError) said
    `No space left on device (/x)`; it says what every face says."""

    def broken(ctx):
        raise OSError(errno.ENOSPC, "No space left on device", "/var/spool/x")

    monkeypatch.setattr("fsmem.cli.generated.open_memory", broken)
    with pytest.raises(SystemExit) as done:
        run(["--root", str(memory.root), "ls", "--json"])
    out, err = capsys.readouterr()
    assert (done.value.code, err) == (2, f"fsmem: error: {FULL} ('/var/spool/x')\n")
    assert out == f'{{"error": {{"message": "{FULL} (\'/var/spool/x\')", "exit": 2}}}}\n'


def test_text_that_is_not_unicode_reads_the_same_in_python_and_at_the_tools(memory, monkeypatch):
    def undecodable(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(files, "file_version", undecodable)
    monkeypatch.setattr("fsmem.operations.reads.file_version", undecodable)
    message = "text that is not valid Unicode (invalid start byte)"
    with pytest.raises(fsmem.InvalidArgument, match=rf"^{message.replace('(', '[(]').replace(')', '[)]')}$"):
        memory.read("topics/billing.md")
    answer = tools.call(memory, "read", {"path": "topics/billing.md"})
    assert answer.is_error and answer.text == f"error: {message}"


def test_an_error_from_below_that_reaches_the_dispatcher_or_the_cli_itself_is_worded_as_memory_words_it(
    memory, monkeypatch, capsys
):
    """What fails outside `Memory`'s methods (a tool of one's own, the CLI's opening of the memory) met a
    boundary of its own: the dispatcher said `lookup failed: UnicodeDecodeError: ...`, the CLI `input that
    is not valid UTF-8 text (...)`. Both now say what `Memory` says."""
    message = "text that is not valid Unicode (invalid start byte)"

    def undecodable(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    @tool("lookup")
    def lookup(memory: Memory, *, max_tokens: int | None = None) -> Reply:
        """Look something up (a tool of the caller's own, registered for this test)."""
        undecodable()
        raise AssertionError("unreachable")

    try:
        answer = tools.call(memory, "lookup", {})
    finally:
        unregister("lookup")
    assert answer.is_error and answer.text == f"error: {message}"
    monkeypatch.setattr("fsmem.cli.generated.open_memory", undecodable)
    with pytest.raises(SystemExit) as done:
        run(["--root", str(memory.root), "ls"])
    assert (done.value.code, capsys.readouterr().err) == (2, f"fsmem: error: {message}\n")
