"""A plain grep's first rg pass started before the imports (`fsmem.cli.early`): adopted only when it is exactly
the pass the grep runs, stopped otherwise, and the answer the same either way."""

import pytest
from conftest import configure, write_file

from fsmem import Memory
from fsmem.cli import early, lean, lean_tables
from fsmem.store import rg_command

ARGUMENTS = lean.parse(["grep", "zephyr"]).arguments  # a plain grep, as fsmem.cli.lean parses one


@pytest.fixture
def root(empty_memory):
    write_file(empty_memory.root, "topics/billing.md", "# Billing\n\n- the zephyr plan\n- " + "zephyr " * 40 + "\n")
    write_file(empty_memory.root, "notes/other.md", "- no match here\n")
    return empty_memory.root


def started():
    assert len(rg_command._started) == 1
    return rg_command._started[0][2]


def test_the_first_pass_adopts_the_process_started_for_it(root):
    expected = Memory(root).grep("zephyr").to_text()
    early.start(str(root), ARGUMENTS, max_line_chars=lean_tables.MAX_LINE_CHARS)
    process = started()
    assert Memory(root).grep("zephyr").to_text() == expected
    assert rg_command._started == [] and process.returncode == 0  # claimed and run to its end


def test_a_pass_with_another_command_line_stops_the_early_one(root):
    configure(root, {"read": {"max_line_chars": 20}})
    expected = Memory(root).grep("zephyr").to_text()
    assert "line cut" in expected
    early.start(str(root), ARGUMENTS, max_line_chars=lean_tables.MAX_LINE_CHARS)
    process = started()
    assert Memory(root).grep("zephyr").to_text() == expected  # its uncut lines were not taken
    # stopped and reaped: killed, unless it had finished first (a tiny memory, a loaded machine: exit 0)
    assert rg_command._started == [] and process.returncode is not None and process.returncode in (0, -9)


@pytest.mark.parametrize("narrowed", [{"paths": ["topics"]}, {"type": "entity"}, {"tag": ["money"]}])
def test_named_paths_and_filters_start_nothing(root, narrowed):
    early.start(str(root), {**ARGUMENTS, **narrowed}, max_line_chars=lean_tables.MAX_LINE_CHARS)
    assert rg_command._started == []


def test_no_memory_and_a_refused_pattern_start_nothing(root, tmp_path):
    early.start(str(tmp_path), ARGUMENTS, max_line_chars=lean_tables.MAX_LINE_CHARS)  # no fsmem.yaml there
    early.start(
        str(root),
        {**ARGUMENTS, "pattern": "x" * (rg_command.MAX_PATTERN_CHARS + 1)},
        max_line_chars=lean_tables.MAX_LINE_CHARS,
    )
    assert rg_command._started == []


def test_the_root_is_found_as_memory_finds_it(root, monkeypatch):
    monkeypatch.delenv("FSMEM_ROOT", raising=False)
    monkeypatch.chdir(root / "topics")
    early.start(None, ARGUMENTS, max_line_chars=lean_tables.MAX_LINE_CHARS)
    assert rg_command._started[0][1] == str(Memory().root)
    rg_command.discard()
    assert rg_command._started == []


def test_an_early_pass_bigger_than_a_pipe_runs_to_its_end_before_it_is_claimed(root):
    """A name in many files prints more than a pipe holds (64 KB): the early rg's output is read as it comes
    (`rg_command.Drained`), so rg ends while Python still imports, not after; the grep adopts what was read."""
    import time

    for n in range(400):
        write_file(root, f"entities/many-{n:03}.md", "".join(f"- zephyr, line {i} of file {n}\n" for i in range(12)))
    expected = Memory(root).grep("zephyr").to_text()
    early.start(str(root), ARGUMENTS, max_line_chars=lean.MAX_LINE_CHARS)
    process = started()
    deadline = time.monotonic() + 60
    while process.poll() is None:  # nothing of this process reads its output yet
        assert time.monotonic() < deadline, "the early rg waited on a full pipe"
        time.sleep(0.01)
    drained = rg_command._started[0][3]
    drained.thread.join(60)  # rg has ended: its reader ends at the output's end (or at DRAINED_BYTES)
    assert not drained.thread.is_alive() and sum(len(chunk) for chunk in drained.chunks) > 1 << 17
    assert Memory(root).grep("zephyr").to_text() == expected
    assert rg_command._started == [] and process.returncode == 0


def test_an_early_pass_never_claimed_is_stopped_and_its_reader_ended(root):
    early.start(str(root), ARGUMENTS, max_line_chars=lean.MAX_LINE_CHARS)
    drained = rg_command._started[0][3]
    rg_command.discard()
    assert not drained.thread.is_alive() and rg_command._started == []
