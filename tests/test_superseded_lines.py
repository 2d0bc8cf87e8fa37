"""Superseded ranges of many files at once (a grep's matches, no change feed): a plain row (no ranges, never
cited) answers without being decoded, and only at its file's stamp, so a file changed since its row was
written is read again whatever its size."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from cli_runner import real
from conftest import write_file

from fsmem import Memory
from fsmem.store.cache import SCAN_FROM
from fsmem.store.superseded_lines import superseded_of, superseded_ranges

OLD_NS = 1_700_000_000 * 10**9  # long before the rows are written: no row is racy
PLAIN = "---\ntitle: f\n---\n- a: needle\n## Background\n- b: needle\n"
SECTION = "---\ntitle: f\n---\n- a: needle\n## Superseded\n- b: needle\n"  # the same size as PLAIN
FILES = SCAN_FROM + 20


def _memory(tmp_path: Path) -> tuple[Memory, list[str]]:
    """More files than SCAN_FROM, a tenth of them with a superseded section, their rows in the cache."""
    memory = Memory.init(tmp_path / "mem")
    rels = [f"d{i % 7}/f{i:04}.md" for i in range(FILES)]
    for i, rel in enumerate(rels):
        os.utime(write_file(memory.root, rel, SECTION if i % 10 == 0 else PLAIN), ns=(OLD_NS, OLD_NS))
    memory.ls(max_results=1)  # every row written
    plain = {path for path, *_ in memory.catalog.cache.superseded_rows()[0]}
    assert len(plain.intersection(rels)) == FILES - FILES // 10
    return memory, rels


def _rewrite(root: Path, rel: str, text: str) -> None:
    """The same file (inode) with new bytes and a new mtime, long past: only its stamp says it changed."""
    path = root / rel
    with open(path, "r+b") as handle:
        handle.truncate(0)
        handle.write(text.encode())
    os.utime(path, ns=(OLD_NS + 10**9, OLD_NS + 10**9))


def test_ranges_of_many_files_follow_files_changed_since_their_rows(tmp_path):
    memory, rels = _memory(tmp_path)
    gained, lost, new = rels[1], rels[10], "d0/new.md"
    assert len(PLAIN) == len(SECTION)
    _rewrite(memory.root, gained, SECTION)  # a plain row, now a superseded section: the same size
    _rewrite(memory.root, lost, PLAIN)  # a row with ranges, the section gone
    write_file(memory.root, new, SECTION)  # no row yet
    asked = rels + [new]
    found = superseded_ranges(memory.root, memory.catalog.cache, asked)
    assert found[gained] == found[new] == [(5, 6)] and found[lost] == []
    assert found == {rel: superseded_of(memory.root / rel) for rel in asked}
    assert sum(1 for ranges in found.values() if ranges) == FILES // 10 + 1 + 1 - 1


def test_a_grep_from_the_shell_leaves_out_a_section_gained_after_the_rows(tmp_path):
    memory, rels = _memory(tmp_path)
    env = {**os.environ, "FSMEM_SOCKET": "off"}
    before = real(["grep", "--json", "needle"], cwd=memory.root, env=env, text=True)
    assert json.loads(before.stdout)["total"] == 2 * FILES - FILES // 10
    _rewrite(memory.root, rels[1], SECTION)
    _rewrite(memory.root, rels[10], PLAIN)
    write_file(memory.root, "d0/new.md", SECTION)
    after = real(["grep", "--json", "needle"], cwd=memory.root, env=env, text=True)
    assert json.loads(after.stdout)["total"] == 2 * FILES - FILES // 10 + 1


def test_the_files_with_ranges_alone_are_those_of_every_file_that_have_some(tmp_path):
    """grep asks for the ranges of the files that have some (`every_file=False`): the same ranges, with or
    without rows caught up just now (`Fresh`), a file changed since its row and one with no row among them."""
    from fsmem.store.superseded_lines import fresh_rows

    memory, rels = _memory(tmp_path)
    _rewrite(memory.root, rels[1], SECTION)
    _rewrite(memory.root, rels[10], PLAIN)
    write_file(memory.root, "d0/new.md", SECTION)
    asked = rels + ["d0/new.md", "d0/missing.md"]
    for fresh in (None, fresh_rows(memory.catalog.cache)):
        every = superseded_ranges(memory.root, memory.catalog.cache, asked, fresh)
        some = superseded_ranges(memory.root, memory.catalog.cache, asked, fresh, every_file=False)
        assert some == {rel: ranges for rel, ranges in every.items() if ranges}
        assert len(every) == FILES + 1 and len(some) == FILES // 10 + 1


# -- the rows caught up in a long-lived process (`Fresh`), kept from one change of them to the next ------------

# another process on the same memory, fsmem writing there: one line of JSON a call, [root, method, args]
OTHER_WRITER = """
import json, sys
from fsmem import Memory
from fsmem.errors import FsmemError
memories = {}
for line in sys.stdin:
    root, method, args, options = json.loads(line)
    memory = memories.get(root) or memories.setdefault(root, Memory(root))
    try:
        getattr(memory, method)(*args, **options)
    except FsmemError as exc:  # a move or removal of a file that is not there (or onto one that is)
        print("refused", type(exc).__name__, flush=True)
    else:
        print("done", flush=True)
    if method == "close":
        del memories[root]
"""
RELS = ["topics/a.md", "topics/b.md", "d/c.md", "sessions/n1.md", "sessions/n2.md"]
BODIES = {  # a plain file, one with a superseded section, a note a document may cite, one without front matter
    "plain": ("- a: needle\n", {"title": "t"}),
    "section": ("- a: needle\n## Superseded\n- b: needle\n", {"title": "t"}),
    "cited": ("- a: needle\n- b: needle\n", {"title": "t", "consolidated": "2026-01-01"}),
    "bare": ("- a: needle\n", None),
}


def _text(kind: str) -> str:
    """The whole file of a kind, as an editor writes it."""
    body, front = BODIES[kind]
    if front is None:
        return body
    return "---\n" + "".join(f"{key}: {value}\n" for key, value in front.items()) + "---\n" + body


def _rows_checked(memory: Memory, pattern: str = "needle") -> None:
    """The `Fresh` this process kept and brought up to date equals one made from every row; so do the ranges and
    a grep's answer with each."""
    from fsmem.query import grep_cache
    from fsmem.store import superseded_lines
    from fsmem.store.superseded_lines import fresh_rows

    cache = memory.catalog.cache
    name = os.fspath(cache.path)
    kept = memory.catalog._fresh_rows()
    assert kept is not None
    state = superseded_lines._fresh[name][0]
    grep_cache.forget(memory.root)
    answer = memory.grep(pattern, max_results=100)
    superseded_lines._fresh.pop(name)
    rebuilt = fresh_rows(cache)
    assert superseded_lines._fresh[name][0] == state and rebuilt is not None and rebuilt is not kept
    assert kept.whole() == rebuilt.whole()
    present = sorted(str(p.relative_to(memory.root)) for p in memory.root.rglob("*.md") if ".fsmem" not in p.parts)
    assert rebuilt.whole()[0] == frozenset(present)
    asked = [*present, "topics/missing.md"]
    assert superseded_ranges(memory.root, cache, asked, kept) == superseded_ranges(memory.root, cache, asked)
    grep_cache.forget(memory.root)
    assert memory.grep(pattern, max_results=100) == answer
    superseded_lines._fresh[name] = (state, kept)  # the next change is applied to the kept one again


def test_the_kept_rows_follow_every_change_as_a_rebuild_would(tmp_path):
    """Writes, edits outside fsmem, deletions, renames and notes a document may cite, by this process and by
    another one: after each, the `Fresh` brought up to date by the rows changed since equals one made from
    every row, and answers are those of the rows read whole; so too with two changed keys kept by the cache (a
    check after several changes reads every row), and with the kept `Fresh` made whole again after a few."""
    from unittest import mock

    from hypothesis import given, settings, strategies as st

    from fsmem.store import cache as cache_module, superseded_lines

    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_WRITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def ask_other(root: Path, method: str, *args, **options) -> None:
        other.stdin.write(json.dumps([str(root), method, args, options]) + "\n")
        other.stdin.flush()
        got = other.stdout.readline()
        assert got == "done\n" or (got.startswith("refused") and method in ("rm", "mv")), got

    rel = st.sampled_from(RELS)
    kind = st.sampled_from(sorted(BODIES))
    step = st.one_of(
        st.tuples(st.sampled_from(["write", "outside", "other write"]), rel, kind),
        st.tuples(st.sampled_from(["rm", "outside rm", "other rm"]), rel),
        st.tuples(st.sampled_from(["mv", "outside mv", "other mv"]), rel, rel),
        st.tuples(st.just("other ls"), rel),
    )
    steps = st.lists(st.tuples(step, st.booleans()), min_size=1, max_size=10)  # with a check after it, or not
    runs = iter(range(10**6))

    @settings(max_examples=30, deadline=None)
    @given(steps=steps, kept=st.sampled_from([cache_module.CHANGES_KEPT, 2]), whole=st.sampled_from([64, 0]))
    def run(steps, kept, whole):
        root = tmp_path / f"m{next(runs)}"
        memory = Memory.init(root)
        for i, name in enumerate(RELS[:3]):
            write_file(root, name, _text(sorted(BODIES)[i]))
        memory.ls()
        memory.ls()  # the second call: the feed runs
        assert memory.catalog._feed is not None and memory.catalog._feed.trusted
        try:
            with mock.patch.object(cache_module, "CHANGES_KEPT", kept):
                with mock.patch.object(superseded_lines, "WHOLE_AFTER", whole):
                    _rows_checked(memory)
                    for step, check in steps:
                        _step(memory, ask_other, *step)
                        if check:  # else the next check catches up by several changes of the rows
                            _rows_checked(memory)
                    _rows_checked(memory)
        finally:
            ask_other(root, "close")
            memory.close()

    try:
        run()
    finally:
        other.stdin.close()
        other.wait()


def _step(memory: Memory, ask_other, action: str, rel: str, *rest: str) -> None:
    from fsmem.errors import FsmemError

    root = memory.root
    if action in ("write", "other write"):
        body, front = BODIES[rest[0]]
        if action == "write":
            memory.write(rel, body, set=front)
        else:
            ask_other(root, "write", rel, body, set=front)
    elif action == "outside":
        write_file(root, rel, _text(rest[0]))
    elif action == "rm":
        with contextlib.suppress(FsmemError):
            memory.rm(rel)
    elif action == "outside rm":
        (root / rel).unlink(missing_ok=True)
    elif action == "other rm":
        ask_other(root, "rm", rel)
    elif action == "mv":
        with contextlib.suppress(FsmemError):
            memory.mv(rel, rest[0])
    elif action == "outside mv":
        if (root / rel).exists():
            (root / rest[0]).parent.mkdir(parents=True, exist_ok=True)
            os.replace(root / rel, root / rest[0])
    elif action == "other mv":
        ask_other(root, "mv", rel, rest[0])
    else:
        ask_other(root, "ls")
