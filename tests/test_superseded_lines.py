"""Superseded ranges of many files at once (a grep's matches, no change feed): a plain row (no ranges, never
cited) answers without being decoded, and only at its file's stamp, so a file changed since its row was
written is read again whatever its size."""

import json
import os
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
