"""Hostile machine state: what `.fsmem/` holds after a crash or when it came in an untrusted copy.

fsmem's state is disposable (caches, logs, records), so whatever is found at one of its names must give the
answers of the memory files, or a clear error, never a hang or a traceback. The commands run as real
subprocesses under a timeout, so a hang fails the test instead of the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tracemalloc
import zlib
from pathlib import Path

import pytest
from child_env import without_fsmem
from hypothesis import HealthCheck, given, settings, strategies as st
from test_hostile import FSMEM, NOW, cli, within

from fsmem import Memory
from fsmem.consolidate import subjects

BILLING = "---\ntitle: Billing\ntype: semantic\ntopic: Billing\n---\n# Billing\n- proration: daily\n"
# Every state file a command reads before it answers, one per reader (attack54b found each blocking on a FIFO).
READ_STATE = (
    "config.json",  # every command: the parsed copy of fsmem.yaml
    "cache/facts.json",  # check
    "cache/directory.json.zlib",  # index, consolidate
    "consolidate/digest.json",  # consolidate
    "logs/consolidate.jsonl",  # consolidate appends to it
    "logs/retrieval.jsonl",  # search ranks by it, every agent-facing command appends to it, stats reads it
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FSMEM_NOW", NOW)
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "billing.md").write_text(BILLING)
    memory.note("- proration: monthly", session="s", subject="topic/Billing")
    return memory.root


def _answers(root: Path) -> None:
    """Each command answers from the memory files within the timeout, with no traceback."""
    for args, out in (
        (("search", "proration"), "topics/billing.md"),
        (("check",), ""),
        (("consolidate",), "consolidated 1 of 1 note"),
        (("index",), ""),
        (("stats",), ""),
        (("read", "topics/billing.md"), "proration: monthly"),
    ):
        done = cli(root, *args, timeout=20)
        assert done.returncode in (0, 1), (args, done.stderr)
        assert "Traceback" not in done.stderr and out in done.stdout, (args, done.stdout, done.stderr)


@pytest.mark.slow
def test_a_fifo_at_any_state_name_never_blocks(root: Path) -> None:
    """A FIFO where a cache or log should be blocked every command (config.json), or search, check, index and
    consolidate, for ever; each is now taken as no cache (or replaced by the file written there)."""
    for name in READ_STATE:
        path = root / ".fsmem" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    _answers(root)
    assert (root / ".fsmem" / "logs" / "retrieval.jsonl").is_file()  # the FIFO was replaced, not written through
    assert (root / ".fsmem" / "cache" / "directory.json.zlib").is_file()


@pytest.mark.slow
def test_a_link_at_a_state_name_is_not_read_through(root: Path, tmp_path: Path) -> None:
    """A link to /dev/zero (or anywhere) at a cache's name is not followed when the cache is read."""
    for name in READ_STATE:
        path = root / ".fsmem" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        os.symlink("/dev/zero", path)
    _answers(root)


def test_a_zlib_bomb_as_the_directory_cache_is_a_miss(root: Path) -> None:
    """200 KB that inflate to 200 MB as the directory cache: `fsmem index` inflated it whole (2 MB for 2 GB took
    30 s); it now stops at 64 times the file's size, and the cache is rebuilt."""
    bomb = zlib.compressobj(9)
    spaces = b" " * (1 << 20)
    data = bomb.compress(b"[") + b"".join(bomb.compress(spaces) for _ in range(200)) + bomb.flush()
    cache = root / ".fsmem" / "cache" / "directory.json.zlib"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(data)
    tracemalloc.start()
    try:
        entries = subjects.directory(root)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, peak  # 400 MB before (the 200 MB inflated, then decoded)
    assert [e.path for e in entries] == ["topics/billing.md"]
    assert len(zlib.decompress(cache.read_bytes())) < 10_000  # rebuilt from the one document


def test_lines_fsmem_did_not_write_in_the_retrieval_log_are_skipped(root: Path) -> None:
    """A log line that is JSON but no record (`5`, `[1]`), or a record of odd figures, failed every search (the
    log ranks its results) and `fsmem stats` with AttributeError; such lines are skipped as a torn one is."""
    log = root / ".fsmem" / "logs" / "retrieval.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "5",
        "[1]",
        "null",
        '{"tool": "search", "paths": 5}',
        '{"tool": "read", "paths": [1, {}], "latency_ms": [1], "tokens": "x"}',
        '{"tool": "read", "latency_ms": 1e999, "tokens": 1' + "0" * 400 + "}",
        '{"tool": "read", "tokens": 1' + "0" * 5000 + "}",  # past Python's 4,300 digits: not JSON to it
        '{"time": "2026-11-30T09:00:00+00:00", "tool": "read", "paths": ["topics/billing.md"], "latency_ms": 2}',
    ]
    log.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    searched = cli(root, "search", "proration")
    assert searched.returncode == 0 and "topics/billing.md" in searched.stdout, searched.stderr
    counted = cli(root, "stats", "--json")
    assert counted.returncode == 0, counted.stderr
    read = next(tool for tool in json.loads(counted.stdout)["tools"] if tool["tool"] == "read")
    assert read["calls"] == 3 and read["p95_ms"] == 2.0


@pytest.mark.slow
def test_a_trigger_planted_in_the_cache_is_thrown_away_with_it(root: Path) -> None:
    """A cache.sqlite from an untrusted copy with a trigger that rewrites each stored row's filter columns made
    `ls --type semantic` list every file and `ls --tag pwned` files without that tag, run after run (emptying
    the tables keeps a trigger); a database holding a trigger or view fsmem does not make is now thrown away."""
    import apsw

    (root / "topics" / "plain.md").write_text("# Plain\n- nothing typed here\n")
    assert cli(root, "ls").returncode == 0  # the cache is made
    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    conn.execute(
        "CREATE TRIGGER planted AFTER INSERT ON files BEGIN"
        " UPDATE files SET type = 'semantic', tags = '[\"pwned\"]' WHERE id = new.id; END;"
        "CREATE VIEW planted_view AS SELECT 1;"
        "DELETE FROM files"
    )
    conn.close()
    for _ in range(2):  # the first run stores the rows, the second reads them
        typed = cli(root, "ls", "--type", "semantic", "--json")
        assert [e["path"] for e in json.loads(typed.stdout)["entries"]] == ["topics/billing.md"]
        assert cli(root, "ls", "--tag", "pwned").returncode == 1
    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == [("files_gone",)]


@pytest.mark.slow
def test_a_fifo_or_link_among_the_journal_entries_is_kept_aside(tmp_path: Path) -> None:
    """A FIFO where a history journal entry should be blocked the commit that reads the journal; it is now kept
    aside (`journal-damaged/`) as a damaged entry is, and so is a link, and the write is committed."""
    root = tmp_path / "mem"
    assert cli(root, "init", "--git", str(root)).returncode == 0
    assert cli(root, "write", "topics/a.md", input="- first\n").returncode == 0
    journal = root / ".fsmem" / "history" / "journal"
    os.mkfifo(journal / "0000000001-planted")
    os.symlink("/dev/zero", journal / "0000000002-planted")
    written = cli(root, "write", "topics/b.md", input="- second\n", timeout=20)
    assert written.returncode == 0, written.stderr
    assert "write topics/b.md" in cli(root, "log", timeout=20).stdout
    aside = root / ".fsmem" / "history" / "journal-damaged"
    assert sorted(p.name for p in aside.iterdir()) == ["0000000001-planted", "0000000002-planted"]


def _files_up_to(size: int):
    def limit() -> None:  # no file past `size` bytes: a disk nearly full
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


@pytest.mark.slow
def test_a_disk_that_refuses_the_caches_writes_still_answers(root: Path) -> None:
    """Under RLIMIT_FSIZE (EFBIG, as ENOSPC on a full disk) the search index (2.8 MB for these 300 files) and
    the consolidation ledger could not grow: search failed with 'IOError: disk I/O error' and consolidate with
    'OperationalError: disk I/O error'. Each keeps its cache in memory for the run instead; the memory files are
    written whole or not at all."""
    words = [f"w{n:04d}x" for n in range(3000)]
    for i in range(300):
        lines = ["- " + " ".join(words[(i * 37 + j * 11 + k * 101) % 3000] for k in range(12)) for j in range(20)]
        (root / "topics" / f"t{i}.md").write_text(f"# T{i}\n" + "\n".join(lines) + "\n")
    env = without_fsmem()
    env["FSMEM_NOW"] = NOW

    def limited(size: int, *args: str) -> subprocess.CompletedProcess:
        command = [FSMEM, "--root", str(root), *args]
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=60, preexec_fn=_files_up_to(size)
        )

    assert limited(512 << 10, "ls").returncode == 0  # the metadata cache fits (176 KB)
    searched = limited(512 << 10, "search", "proration")
    assert searched.returncode == 0 and "topics/billing.md" in searched.stdout, searched.stderr
    consolidated = limited(32 << 10, "consolidate")
    assert consolidated.returncode == 0 and "consolidated 1 of 1 note" in consolidated.stdout, consolidated.stderr
    assert "- proration: monthly" in (root / "topics" / "billing.md").read_text()
    again = cli(root, "search", "proration")  # no limit: the file caches serve again
    assert again.returncode == 0 and "topics/billing.md" in again.stdout


def test_json_of_another_shape_as_the_parsed_configuration_is_no_copy(root: Path) -> None:
    """`.fsmem/config.json` holding JSON that is no object (`null`, `[1]`) failed every command with
    'AttributeError: 'NoneType' object has no attribute 'get'' (found by this module's hypothesis test)."""
    for text in ("null", "[1]", "5"):
        (root / ".fsmem" / "config.json").write_text(text)
        listed = cli(root, "ls", "topics")
        assert listed.returncode == 0 and "topics/billing.md" in listed.stdout, listed.stderr


def test_a_folder_at_a_state_name_is_a_clear_error(root: Path) -> None:
    """A folder where fsmem writes a cache or log (no crash leaves one) is refused by name, exit 2, and
    nothing is written; the commands that only read it answer."""
    (root / ".fsmem" / "cache").mkdir(exist_ok=True)
    (root / ".fsmem" / "cache" / "directory.json.zlib").mkdir()
    indexed = cli(root, "index")
    assert indexed.returncode == 2 and "Traceback" not in indexed.stderr
    assert "'.fsmem/cache/directory.json.zlib' is a folder; nothing was written" in indexed.stderr
    assert cli(root, "search", "proration").returncode == 0


# -- the invariant: whatever `.fsmem/` holds, the answers are those of the memory files ---------------------
# every state file a command reads or writes, and the databases beside them
STATE_NAMES = (*READ_STATE, "cache.sqlite", "consolidate/ledger.sqlite", "history/commits", "host-settings.json")
KINDS = ("fifo", "link to /dev/zero", "empty", "bytes")  # a folder there: test_a_folder_at_a_state_name_...
EXAMPLES = 8 * int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _plant(path: Path, kind: str, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", path)
    else:
        path.write_bytes(b"" if kind == "empty" else data)


def _answers_of(root: Path) -> dict:
    """What each command answers on `root`, as far as it depends on the memory files alone."""
    memory = Memory(root)
    try:
        answers = {
            "ls": [(e.path, e.title) for e in memory.ls().entries],
            "search": sorted({h.path for h in memory.search("proration").hits}),
            "check": sorted(memory.check().problems),
            "context": memory.context().sources,
        }
        report = memory.consolidate()
        answers["consolidate"] = (report.counts, sorted(report.files_written))
        memory.index()
        answers["files"] = {
            p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.md")) if ".fsmem" not in p.parts
        }
        answers["search after"] = sorted({h.path for h in memory.search("proration").hits})
        return answers
    finally:
        memory.close()


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    planted=st.dictionaries(
        st.sampled_from(STATE_NAMES),
        st.tuples(st.sampled_from(KINDS), st.binary(max_size=64) | JSON_VALUES.map(lambda v: json.dumps(v).encode())),
        min_size=1,
    )
)
def test_whatever_the_state_holds_the_answers_are_the_files(tmp_path_factory, monkeypatch, planted) -> None:
    """Any mix of FIFOs, links to /dev/zero, empty files, bytes and JSON of any shape at the state's names gives
    the answers a memory without them gives, each within a time limit (a FIFO once blocked for ever)."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    base = tmp_path_factory.mktemp("state")
    clean, hostile = base / "clean", base / "hostile"
    for root in (clean, hostile):
        memory = Memory.init(root)
        (root / "topics").mkdir()
        (root / "topics" / "billing.md").write_text(BILLING)
        memory.note("- proration: monthly", session="s", subject="topic/Billing")
        memory.close()
    for name, (kind, data) in planted.items():
        _plant(hostile / ".fsmem" / name, kind, data)
    expected = within(60, lambda: _answers_of(clean))
    assert within(60, lambda: _answers_of(hostile)) == expected


@pytest.mark.slow
def test_a_sparse_retrieval_log_is_read_from_its_last_part(root: Path) -> None:
    """A 4 GB retrieval log that takes no room on disk (sparse, all NUL bytes) was read whole by every search (the
    log ranks its results: a 3 GB one took 7-25 s and held 3.2 GB) and by `fsmem stats` (twice that held); each
    reads at most the last 64 MiB of a log file now, far more than fsmem's own (8 MiB by default)."""
    log = root / ".fsmem" / "logs" / "retrieval.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        handle.write(b'{"tool": "read", "paths": ["topics/billing.md"], "latency_ms": 1}\n')
        handle.truncate(4 << 30)
    searched = cli(root, "search", "proration")
    assert searched.returncode == 0 and "topics/billing.md" in searched.stdout, searched.stderr
    counted = cli(root, "stats", "--json")
    assert counted.returncode == 0, counted.stderr
    assert [tool["tool"] for tool in json.loads(counted.stdout)["tools"]] == ["search"]


@pytest.mark.slow
def test_a_sparse_state_file_is_not_read_whole(root: Path) -> None:
    """A 4 GB cache that takes no room on disk (sparse) was read whole: at config.json by every command (3 GB
    held `ls` 33 s and 6.3 GB), at facts.json by check, at directory.json.zlib and digest.json by index and
    consolidate; one past 64 MiB (fsmem's largest, facts.json, is about 2 MB at 100k files) is no cache now."""
    for name in ("config.json", "cache/facts.json", "cache/directory.json.zlib", "consolidate/digest.json"):
        path = root / ".fsmem" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            handle.truncate(4 << 30)
    _answers(root)
