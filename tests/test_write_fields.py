"""A write's `set` never gives a known field a value `fsmem check` reports, through any face.

`type: bogus` or `created: not-a-date` set by an agent used to be written, and check then reported the file;
now the write is refused (exit 2 on the CLI, InvalidArgument in Python, an error answer from a tool), the field
and what it takes named, and nothing changes. A file a person wrote so is still read, and still reported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from child_env import without_fsmem

from fsmem import Memory
from fsmem.agents import tools
from fsmem.errors import InvalidArgument

NOW = "2026-11-30T10:00:00+00:00"
FSMEM = str(Path(sys.executable).with_name("fsmem"))
FILE = "topics/billing.md"
BILLING = "---\ntitle: Billing\ntype: semantic\n---\n- cycle: monthly\n"

# (--set, the value as Python or a tool gives it, what the refusal must say)
BAD = [
    ("type=bogus", {"type": "bogus"}, "type must be one of semantic, episodic, procedural, not 'bogus'"),
    ("created=not-a-date", {"created": "not-a-date"}, "created must be an ISO 8601 date or time, not 'not-a-date'"),
    ("updated=soon", {"updated": "soon"}, "updated must be an ISO 8601 date or time, not 'soon'"),
    ("importance=2", {"importance": 2}, "importance must be a number from 0 to 1, not 2"),
]


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Memory:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / FILE).write_text(BILLING)
    return memory


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW
    return subprocess.run(
        [FSMEM, "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(("pair", "fields", "said"), BAD, ids=[b[0] for b in BAD])
def test_every_face_refuses_a_value_check_would_report(memory: Memory, pair: str, fields: dict, said: str) -> None:
    before = (memory.root / FILE).read_bytes()
    done = cli(memory.root, "write", FILE, "--set", pair, "--keep-body")
    assert done.returncode == 2, done.stdout
    assert done.stderr == f"fsmem: error: cannot set that front matter: {said}; nothing was written\n"
    new = cli(memory.root, "write", "topics/new.md", "--set", pair)
    assert new.returncode == 2 and not (memory.root / "topics" / "new.md").exists()

    with pytest.raises(InvalidArgument, match=f"^cannot set that front matter: {said}; nothing was written$"):
        memory.write(FILE, set=fields)
    answer = tools.call(memory, "write", {"path": FILE, "set": fields})
    assert answer.is_error and said in answer.text

    assert (memory.root / FILE).read_bytes() == before
    assert cli(memory.root, "check").returncode == 0


def test_the_mcp_server_refuses_it_too(memory: Memory) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fsmem", "--root", str(memory.root), "mcp"], env={"FSMEM_NOW": NOW}
    )

    async def main():
        async with stdio_client(params) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                return await session.call_tool("write", {"path": FILE, "set": {"type": "bogus"}})

    answer = anyio.run(main)
    assert answer.is_error and "type must be one of semantic, episodic, procedural" in answer.content[0].text
    assert (memory.root / FILE).read_text() == BILLING


def test_good_values_are_written_and_a_persons_bad_value_is_still_read_and_reported(memory: Memory) -> None:
    done = cli(memory.root, "write", FILE, "--set", "type=episodic", "--set", "created=2024-01-02", "--keep-body")
    assert done.returncode == 0, done.stderr
    memory.write(FILE, set={"importance": 0.5, "custom": "anything", "type": None})
    text = (memory.root / FILE).read_text()
    assert "created: 2024-01-02\n" in text and "importance: 0.5\n" in text and "type:" not in text
    assert cli(memory.root, "check").returncode == 0

    (memory.root / FILE).write_text("---\ntitle: Billing\ntype: bogus\n---\n- cycle: monthly\n")
    assert "- cycle: monthly" in cli(memory.root, "read", FILE).stdout
    check = cli(memory.root, "check")
    assert check.returncode == 1 and "type must be one of" in check.stdout
    memory.write(FILE, set={"description": "how we bill"})  # a field set beside it is still written
    assert "type: bogus\n" in (memory.root / FILE).read_text()
