"""The cold build (issue #34): a real `fsmem` killed with SIGKILL at every stage of building the search index and
the metadata cache leaves a cache the next command continues, and whose answers are a clean build's, byte for byte;
a build in worker processes answers as one in a single process does; progress shows on a terminal only.

Every command is a real process, forked from a parent that has imported fsmem and loaded the tokenizer
(tests/preloaded.py): the SIGKILL ends a process and the builds start their worker processes as a user's command does,
without an interpreter's start for each. The one-process build's answers are also asked of processes started as a
user starts them, which must give the same bytes; progress on a terminal is such a process's too."""

from __future__ import annotations

import os
import pty
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import apsw
import preloaded
import pytest

from fsmem import Memory
from fsmem.store.kill_points import KILL_ENV
from fsmem.store.progress import AFTER_ENV
from fsmem.store.workers import WORKERS_ENV

pytestmark = pytest.mark.slow
NOW = "2026-09-01T12:00:00+00:00"
FILES = 1010  # more than two batches of 500 (search index and metadata rows), and enough for worker processes
WORDS = (
    "renewal budget ledger schema deploy rollback latency invoice proration seats owner handover pipeline "
    "dashboard alert contract migration staging release customer discount review cycle ticket"
).split()
QUERIES = ["renewal budget owner", "zephyrine proration"]


def _write_memory(root: Path) -> None:
    Memory.init(root)
    rng = random.Random(34)
    for number in range(FILES):
        folder = ("entities/people", "topics", "sessions/2026/07")[number % 3]
        words = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(rng.randint(2, 6))]
        if number % 97 == 0:
            words.append("zephyrine account")
        body = "\n".join(f"- {line}, per the ledger." for line in words)
        path = root / folder / f"note-{number:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\ntitle: Note {number}\ntype: semantic\ntags: [t{number % 5}]\n"
            f"updated: 2026-0{1 + number % 8}-1{number % 9}T10:00:00+00:00\n---\n"
            f"# Note {number}\n\n## Facts\n{body}\n",
            encoding="utf-8",
        )
    # Every file older than the clock's tick: a file changed within it is indexed without its stamp and read again
    # by the next command, so a build that follows the writing at once (a fast one: the clean build) would leave
    # more segments than one that comes later (after a kill), and the two could not be compared.
    settled = time.time() - 60
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (settled, settled))


ASKED = [("search", q, "--json") for q in QUERIES]
ASKED += [("ls", "--json", "--max-results", "5000"), ("read", "topics/note-0001.md"), ("context",)]


def _env(**env: str) -> dict[str, str]:
    full = {**os.environ, "FSMEM_NOW": NOW, **env}
    full.pop("FSMEM_ROOT", None)
    return full


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cold") / "memory"
    _write_memory(root)
    return root


def fsmem(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS`, a process forked from the preloaded parent."""
    return preloaded.run(["--root", str(root), *args], env=_env(**env), timeout=120)


def killed(root: Path, *args: str, stage: str) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` in a process that kills itself at `stage`."""
    return fsmem(root, *args, **{KILL_ENV: stage})


def process(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` as a process of its own, started as a user starts it."""
    return subprocess.run(
        [sys.executable, "-m", "fsmem", "--root", str(root), *args], capture_output=True, text=True, env=_env(**env)
    )


def answers(root: Path, ask=fsmem) -> list[str]:
    """What a user asks after the build: searches, a listing, a read and the context block (stdout and exit)."""
    out = []
    for args in ASKED:
        done = ask(root, *args)
        out.append(f"{' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}")
    return out


def _copy(template: Path, to: Path) -> Path:
    """A copy of `template` (its files' times kept, as shutil.copytree keeps them, for a fifth of its CPU)."""
    subprocess.run(["cp", "-a", str(template), str(to)], check=True)
    return to


@pytest.fixture(scope="module")
def listed(template, tmp_path_factory) -> Path:
    """The memory after a user's first `fsmem ls`: its metadata cache built, its search index not yet begun. A
    search killed from here is killed at the same stage as one from the bare memory (a search builds no
    metadata), and the cases that start here are spared a second whole build after the one they kill."""
    root = _copy(template, tmp_path_factory.mktemp("listed") / "memory")
    assert fsmem(root, "ls").returncode == 0
    shutil.rmtree(root / ".fsmem" / "logs", ignore_errors=True)  # the clean memory logged only `answers`
    return root


@pytest.fixture(scope="module")
def clean(template, tmp_path_factory) -> tuple[list[str], Path]:
    """The answers of a memory built in one go, and that memory."""
    root = _copy(template, tmp_path_factory.mktemp("clean") / "memory")
    return answers(root), root


def _scalar(root: Path, sql: str) -> int:
    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


# (the command killed, the stage, its Nth arrival, where it starts): every stage of both builds. A kill from the
# bare memory is followed by the other build from scratch beside what the killed one left (`answers` runs both);
# the other search kills start where `ls` has run, and are followed by the search build only.
KILLS = [
    ("search", "search-parsed:1", "listed"),  # the first task parsed, nothing written
    ("search", "search-parsed:2", "listed"),  # one batch committed, the first task of the next parsed
    ("search", "search-batch:2", "bare"),  # inside the second batch's transaction
    ("search", "search-committed:1", "listed"),  # every file indexed, the segments not merged
    ("search", "search-merge:1", "listed"),
    ("search", "search-merged:1", "listed"),  # merged, the walk's digest not stored
    ("ls", "meta-committed:1", "bare"),
]


@pytest.mark.parametrize(("command", "stage", "start"), KILLS)
def test_a_build_killed_at_any_stage_is_continued_and_answers_as_a_clean_build(
    template, listed, clean, tmp_path, command, stage, start
):
    root = _copy(template if start == "bare" else listed, tmp_path / "memory")
    args = ("search", QUERIES[0]) if command == "search" else ("ls",)
    done = killed(root, *args, stage=stage)
    assert done.returncode == -9, done.stderr
    if stage == "search-committed:1":  # what a killed command leaves is kept, not thrown away
        assert _scalar(root, "SELECT count(*) FROM search_files") == 500
        assert _scalar(root, "SELECT count(*) FROM search_meta WHERE key = 'unmerged'") == 1
        # FTS5 merges none of the build's segments as they come (fsmem.search.tables.building) ...
        assert _scalar(root, "SELECT v FROM search_fts_config WHERE k = 'automerge'") == 0
    if stage == "meta-committed:1":
        assert _scalar(root, "SELECT count(*) FROM files") == 500
    assert answers(root) == clean[0]
    if command == "search":  # the build the next command finished is merged as a build in one go is
        for table in ("search_fts_data", "search_names_data"):
            sql = f"SELECT count(*) FROM {table}"
            assert _scalar(root, sql) == _scalar(clean[1], sql), table
        assert _scalar(root, "SELECT count(*) FROM search_meta WHERE key = 'unmerged'") == 0
        # ... and merges as it writes again once the next command has merged them (FTS5's default)
        assert _scalar(root, "SELECT v FROM search_fts_config WHERE k = 'automerge'") == 4


def test_a_build_in_one_process_answers_as_one_in_workers(template, clean, tmp_path):
    root = _copy(template, tmp_path / "memory")
    fsmem(root, "ls", **{WORKERS_ENV: "1"})
    fsmem(root, "search", QUERIES[0], **{WORKERS_ENV: "1"})
    shutil.rmtree(root / ".fsmem" / "logs", ignore_errors=True)  # the clean memory logged only `answers`
    again = _copy(root, tmp_path / "again")  # the same built memory, asked by processes
    assert answers(root) == clean[0]
    assert answers(again, ask=process) == clean[0]  # what is asked here is what a process answers


def _built(root: Path) -> str:
    """The id the search tables drew when they were last made empty (fsmem.search.index: a new one each build)."""
    conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
    try:
        return str(conn.execute("SELECT value FROM search_meta WHERE key = 'built'").fetchone()[0])
    finally:
        conn.close()


def test_a_copy_of_a_built_memory_is_built_again_not_updated_file_by_file(clean, tmp_path):
    copy = _copy(clean[1], tmp_path / "copy")  # every file a new inode and change time: every stamp moved
    shutil.rmtree(copy / ".fsmem" / "logs", ignore_errors=True)  # the clean memory logged only `answers`
    before = _built(copy)
    assert answers(copy) == clean[0]
    assert _built(copy) != before  # made empty and built, not each file's rows removed and added again
    for table in ("search_fts_data", "search_names_data", "search_postings"):
        sql = f"SELECT count(*) FROM {table}"
        assert _scalar(copy, sql) == _scalar(clean[1], sql), table  # the size of a build, not twice it
    # a few files changed are indexed again on their own
    for number in range(0, 30, 3):
        path = copy / "entities" / "people" / f"note-{number:04d}.md"
        path.write_text(path.read_text(encoding="utf-8") + "- one more line, per the ledger.\n", encoding="utf-8")
    built = _built(copy)
    assert fsmem(copy, "search", QUERIES[0]).returncode == 0
    assert _built(copy) == built


def _on_a_terminal(root: Path, *args: str, **env: str) -> tuple[int, str]:
    """Run `fsmem` with stderr on a pseudo-terminal (stdout a pipe): (exit code, what the terminal got)."""
    leader, follower = pty.openpty()
    full = {**os.environ, "FSMEM_NOW": NOW, **env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsmem", "--root", str(root), *args],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=full,
    )
    os.close(follower)
    got = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        got += chunk
    os.close(leader)
    return proc.wait(), got.decode("utf-8", "replace")


def test_progress_shows_on_a_terminal_only(template, tmp_path):
    on_terminal = _copy(template, tmp_path / "tty")
    code, shown = _on_a_terminal(on_terminal, "search", QUERIES[0], **{AFTER_ENV: "0"})
    assert code == 0
    assert "fsmem: indexing files for search: " in shown
    files = sum(1 for _ in on_terminal.rglob("*.md"))
    assert re.search(rf"\rfsmem: indexing files for search: [0-9,]+ of {files:,} files \([0-9]+%\)\x1b\[K", shown)
    assert shown.endswith("\r\x1b[K")  # the line is cleared when the work is over
    piped = _copy(template, tmp_path / "pipe")
    done = process(piped, "search", QUERIES[0], **{AFTER_ENV: "0"})
    assert done.returncode == 0
    assert done.stderr == ""


def test_no_progress_for_work_under_a_second(tmp_path):
    root = tmp_path / "small"
    Memory.init(root)
    (root / "topics").mkdir(exist_ok=True)
    (root / "topics" / "one.md").write_text("# One\n\n- renewal budget\n", encoding="utf-8")
    code, shown = _on_a_terminal(root, "search", "renewal")
    assert code == 0
    assert shown == ""


def test_a_build_is_given_each_task_of_parsed_files_as_the_workers_finish_it(template, monkeypatch):
    """The command writes a task's 50 files while the workers parse the rest of the batch, not the 500 at once; the
    build's first 50 files come in tasks of 10, so that the command begins writing after 10 files are parsed."""
    from fsmem.search.analyzer import Analyzer
    from fsmem.search.index import BATCH_FILES, FIRST_TASK_FILES, _parsed_batches

    monkeypatch.setenv(WORKERS_ENV, "2")
    todo = sorted((str(p.relative_to(template)), str(p)) for p in template.rglob("*.md"))
    batches = _parsed_batches(template, todo, Analyzer())
    try:
        first = [[p.path for p in task.files] for task in next(batches)]
        second = [[p.path for p in task.files] for task in next(batches)]
    finally:
        batches.close()
    assert FIRST_TASK_FILES == 10
    assert [len(task) for task in first] == [10] * 5 + [BATCH_FILES // 10] * 9
    assert [path for task in first for path in task] == [rel for rel, _full in todo[:BATCH_FILES]]
    assert [len(task) for task in second] == [BATCH_FILES // 10] * 10
    assert [path for task in second for path in task] == [rel for rel, _full in todo[BATCH_FILES : 2 * BATCH_FILES]]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_build_digests_the_files_of_a_task_the_index_holds_one_of_and_no_other_old_file(
    template, monkeypatch, workers
):
    """The rest of a killed build reads files the index does not hold: their digests, which only a file's row
    kept or compared (`_same_bytes`) wants, are not taken; a worker's task with a file the index holds is
    digested whole, a file read in the process on its own."""
    from fsmem.search.analyzer import Analyzer
    from fsmem.search.index import _parsed_batches

    monkeypatch.setenv(WORKERS_ENV, workers)
    todo = sorted((str(p.relative_to(template)), str(p)) for p in template.rglob("*.md"))[:600]
    held = {todo[0][0]}
    racy_from = time.time_ns() + 10**12  # later than every file's mtime: none is racy
    batches = _parsed_batches(template, todo, Analyzer(), racy_from=racy_from, known=held)
    tasks = [[(p.path, p.digest is not None) for p in task.files] for batch in batches for task in batch]
    assert [rel for task in tasks for rel, _ in task] == [rel for rel, _full in todo]
    digested = [rel for task in tasks for rel, digests in task if digests]
    if workers == "1":  # files read one at a time in the process: the held one's alone
        assert digested == [todo[0][0]]
    else:  # the first task's files, the held one with them; none of the other tasks'
        assert digested == [rel for rel, _ in tasks[0]]
        assert len(tasks) > 1


def _parse_marked(task):
    """`parse_files`, leaving a mark beside the memory once a worker has begun a task."""
    from fsmem.search.parsing import parse_files

    (Path(task[0]).parent / "parsing").touch()
    return parse_files(task)


@pytest.mark.parametrize("start", ["listed", "killed"])
def test_a_build_s_workers_parse_its_first_files_while_its_walk_goes_on(listed, tmp_path, monkeypatch, start):
    """The command hands a task's files to the workers as soon as its walk has found them, so that they are parsed
    by the time the walk ends, in a build from nothing and in one continuing a killed build (whose files to read
    begin halfway through the walk): where the command walked, then started its workers and waited for them."""
    from fsmem.search import index as search_index

    root = _copy(listed, tmp_path / "memory")
    if start == "killed":
        assert killed(root, "search", QUERIES[0], stage="search-committed:1").returncode == -9
    monkeypatch.setenv(WORKERS_ENV, "2")
    mark = tmp_path / "parsing"
    walk = search_index.walk_stats
    began: list[bool] = []

    def walked(*args, **kwargs):
        yield from walk(*args, **kwargs)
        deadline = time.monotonic() + 5  # a worker given a task during the walk has begun it by then
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        began.append(mark.exists())

    monkeypatch.setattr(search_index, "walk_stats", walked)
    monkeypatch.setattr(search_index, "parse_files", _parse_marked)
    index = search_index.SearchIndex(root)
    try:
        assert index.refresh() >= (FILES if start == "listed" else FILES - 500)
        assert index.refresh() == 0
    finally:
        index.close()
    assert began[:1] == [True]  # the first walk: the second found the index settled


def test_a_build_checkpoints_its_wal_seldom_and_as_sqlite_does_after_its_merge(template, tmp_path, monkeypatch):
    """While a build commits its batches its connection copies the WAL into the database every 16,384 pages, not
    every 1,000 (SQLite's default, fsmem.search.tables._CHECKPOINT_PAGES); its merge puts SQLite's back."""
    from fsmem.search.index import SearchIndex
    from fsmem.store import kill_points

    root = _copy(template, tmp_path / "memory")
    monkeypatch.setenv(WORKERS_ENV, "1")
    index = SearchIndex(root)
    during: list[int] = []

    def reached(stage: str) -> None:
        if stage == "search-batch":
            during.append(index.connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    monkeypatch.setattr(kill_points, "reached", reached)
    assert index.refresh() >= FILES
    index.wait_merged()
    assert during == [16384] * 3
    assert index.connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    index.close()


def test_ctrl_c_while_the_builds_merge_runs_behind_the_answer_ends_the_command_at_once(template, tmp_path):
    """A first search answers while the build's FTS5 merge runs behind it (one 'optimize' statement per table:
    7-18 s of CPU at 100k files), and the command's end waits for it. Ctrl-C then waited the whole merge
    (here held 60 s by FSMEM_PAUSE_AT, standing for it): the merge is now interrupted and abandoned, exit 130
    at once, the index left `unmerged` (one transaction, rolled back), and the next command merges it and
    gives the clean build's answers."""
    import signal

    from fsmem.store.kill_points import PAUSE_ENV

    root = _copy(template, tmp_path / "interrupted")
    env = _env(**{PAUSE_ENV: "search-merge"})
    build = preloaded.start(
        ["--root", str(root), "search", QUERIES[0]], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert build.stderr is not None and build.stdout is not None
        assert "paused at search-merge" in build.stderr.readline()
        assert build.stdout.readline()  # the answer, from what the build committed
        os.killpg(build.pid, signal.SIGINT)  # the group, as a terminal's Ctrl-C reaches it
        assert build.wait(30) == 130  # a hang guard: the held merge would end 60 s after it began
        said = build.stderr.read()
        assert "Traceback" not in said, said
    finally:
        build.kill()
        build.wait()

    def unmerged() -> list:
        conn = apsw.Connection(str(root / ".fsmem" / "cache.sqlite"))
        try:
            return conn.execute("SELECT value FROM search_meta WHERE key = 'unmerged'").fetchall()
        finally:
            conn.close()

    assert unmerged() == [(1,)]
    clean = _copy(template, tmp_path / "clean")
    assert fsmem(clean, "search", QUERIES[0]).returncode == 0  # the same search, in the retrieval log as there
    assert answers(root) == answers(clean)
    assert unmerged() == []


def test_ctrl_c_in_a_build_with_workers_ends_it_at_once_in_one_line_and_the_next_command_goes_on(template, tmp_path):
    """Ctrl-C at a terminal (SIGINT to the whole process group, workers included) while a first search builds
    (held after a batch by FSMEM_PAUSE_AT): exit 130 at once, the one line "interrupted"; no worker's traceback
    (each printed its KeyboardInterrupt's). The next command gives the clean build's answers."""
    import signal

    from fsmem.store.kill_points import PAUSE_ENV

    root = _copy(template, tmp_path / "interrupted")
    env = _env(**{WORKERS_ENV: "2", PAUSE_ENV: "search-parsed"})
    command = [sys.executable, "-m", "fsmem", "--root", str(root), "search", QUERIES[0]]
    build = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True, start_new_session=True
    )
    try:
        assert build.stderr is not None
        assert "paused at search-parsed" in build.stderr.readline()
        asked = time.monotonic()
        os.killpg(build.pid, signal.SIGINT)  # the group, as a terminal's Ctrl-C reaches it
        assert build.wait(5) == 130
        assert time.monotonic() - asked < 5
        said = build.stderr.read()
        assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    finally:
        build.kill()
        build.wait()
    clean = _copy(template, tmp_path / "clean")
    assert answers(root) == answers(clean)
