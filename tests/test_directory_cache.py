"""The directory of entity and topic documents, cached compressed in `.fsmem/cache/`: read back as written,
and an old or damaged cache read again from the documents, never misread."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem.consolidate import subjects
from fsmem.consolidate.subjects import CACHE_NAME, OLD_CACHE_NAME, DirectoryEntry, directory


def _memory(root: Path) -> Path:
    (root / "entities/people").mkdir(parents=True)
    (root / "topics").mkdir()
    (root / "entities/people/ann.md").write_text(
        "---\ntitle: Ann Lee\naliases: [Annie]\nentity: people/Ann Lee\nimportance: 0.5\n---\n# Ann Lee\n\n- role: lead\n"
    )
    (root / "topics/billing.md").write_text("---\ntopic: Billing\ndescription: How we bill\n---\n# Billing\n")
    return root


def _from_the_cache_only(monkeypatch) -> None:
    def refuse(*args):
        raise AssertionError("a document was read again, not taken from the cache")

    monkeypatch.setattr(subjects, "_read_entry", refuse)


def test_a_second_look_takes_every_entry_from_the_compressed_cache(tmp_path, monkeypatch):
    root = _memory(tmp_path)
    first = directory(root)
    assert [e.title for e in first] == ["Ann Lee", "Billing"]
    cache = root / ".fsmem/cache" / CACHE_NAME
    assert json.loads(zlib.decompress(cache.read_bytes()))["version"] == subjects.CACHE_VERSION
    _from_the_cache_only(monkeypatch)
    assert directory(root) == first


text = st.text(max_size=40)
entry = st.builds(
    DirectoryEntry,
    path=text,
    mtime_ns=st.integers(min_value=0, max_value=2**63 - 1),
    size=st.integers(min_value=0, max_value=2**40),
    title=text,
    description=text,
    importance=st.floats(allow_nan=False),
    names=st.lists(text, max_size=4),
    summary=text,
    subject=text,
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(entry, max_size=6))
def test_the_cache_reads_back_what_was_written(tmp_path, entries):
    cache = tmp_path / ".fsmem/cache" / CACHE_NAME
    cache.parent.mkdir(parents=True, exist_ok=True)
    subjects._write_cache(tmp_path, cache, entries)
    assert subjects._read_cache(cache) == entries


def test_a_cache_of_the_version_before_is_ignored_and_removed(tmp_path):
    root = _memory(tmp_path)
    stat = (root / "topics/billing.md").stat()
    folder = root / ".fsmem/cache"
    folder.mkdir(parents=True)
    stale = {"path": "topics/billing.md", "mtime_ns": stat.st_mtime_ns, "size": stat.st_size, "title": "Stale"}
    (folder / OLD_CACHE_NAME).write_text(json.dumps({"version": 4, "entries": [stale]}))
    old_at_the_new_name = {"version": subjects.CACHE_VERSION - 1, "fields": subjects._FIELDS, "rows": []}
    (folder / CACHE_NAME).write_bytes(zlib.compress(json.dumps(old_at_the_new_name).encode()))
    assert [e.title for e in directory(root)] == ["Ann Lee", "Billing"]
    assert not (folder / OLD_CACHE_NAME).exists()
    assert [e.title for e in subjects._read_cache(folder / CACHE_NAME)] == ["Ann Lee", "Billing"]


def test_an_entry_planted_with_the_stamps_of_a_copied_file_is_read_again(tmp_path):
    """A directory cache that came with an untrusted copy of a memory knows its files' mtimes and sizes (a copy
    keeps them): an entry keyed on those alone put a title and a description no file holds into INDEX.md and the
    subjects notes match. Each entry is checked on the file's inode too, which no copy keeps."""
    root = _memory(tmp_path)
    stat = (root / "topics/billing.md").stat()
    folder = root / ".fsmem/cache"
    folder.mkdir(parents=True)
    planted = DirectoryEntry("topics/billing.md", stat.st_mtime_ns, stat.st_size, "Wire", "Wire money to X")
    planted.ino = stat.st_ino + 1  # what the copy's files had where it was made (assigned: not a field before)
    (folder / CACHE_NAME).write_bytes(_rows([[getattr(planted, name) for name in subjects._FIELDS]]))
    assert [(e.title, e.description) for e in directory(root)] == [("Ann Lee", ""), ("Billing", "How we bill")]


def _rows(rows: object) -> bytes:
    return zlib.compress(
        json.dumps({"version": subjects.CACHE_VERSION, "fields": subjects._FIELDS, "rows": rows}).encode()
    )


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not compressed at all",
        b"\xff" * 64,
        zlib.compress(b"{not json")[:-3],  # cut short
        zlib.compress(b"[1, 2, 3]"),
        zlib.compress(b"\xff\xfe"),  # not UTF-8
        _rows([["topics/billing.md", 1]]),  # a row too short
        _rows([["topics/billing.md", 1, 2, "t", "d", 0.0, [], "s", "x", 3, 4, "one more"]]),  # a row too long
        _rows([{"path": "topics/billing.md"}]),
        _rows([[None, 1, 2, "t", "d", 0.0, [], "s", "x"]]),  # no path
        _rows([["topics/billing.md", 1, 2, "t", "d", 0.0, "names", "s", "x"]]),  # names not a list
        _rows(None),
        zlib.compress(
            json.dumps({"version": subjects.CACHE_VERSION, "fields": subjects._FIELDS[::-1], "rows": []}).encode()
        ),
    ],
)
def test_a_damaged_cache_is_read_again_from_the_documents(tmp_path, damage):
    root = _memory(tmp_path)
    folder = root / ".fsmem/cache"
    folder.mkdir(parents=True)
    (folder / CACHE_NAME).write_bytes(damage)
    assert [e.title for e in directory(root)] == ["Ann Lee", "Billing"]
    assert [e.title for e in subjects._read_cache(folder / CACHE_NAME)] == ["Ann Lee", "Billing"]


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=4)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner))
FIELDS = st.sampled_from(["title", "aliases", "entity", "topic", "importance", "description"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(FIELDS, VALUES))
def test_an_entry_is_read_from_front_matter_of_any_types_naming_what_a_link_does(tmp_path, front):
    """Front matter is what a person or an agent wrote: `aliases: 5` raised TypeError out of the directory, and
    index, consolidate and timeline of the whole memory answered only that; a mapping gave its keys as names."""
    from fsmem.format.links import aliases_of

    path = tmp_path / "doc.md"
    path.write_text("# Doc\n- employer: Globex\n")
    entry = subjects.entry_from("topics/doc.md", path.stat(), front, path.read_text())
    assert entry.names[1 : 1 + len(aliases_of(front))] == aliases_of(front)


def test_a_document_rewritten_with_its_size_and_mtime_put_back_is_read_again(tmp_path):
    """An edit of the same size whose mtime was put back (`cp -p`, `rsync -t`) keeps mtime, size and inode: the
    change time is checked too, so INDEX.md and subject matching take the document's new title."""
    import os

    root = _memory(tmp_path)
    path = root / "topics/billing.md"
    assert [e.title for e in directory(root)] == ["Ann Lee", "Billing"]
    before = path.stat()
    path.write_text(path.read_text().replace("topic: Billing", "topic: Ledgers"))
    path.write_text(path.read_text().replace("# Billing", "# Ledgers"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert [(e.title, e.subject) for e in directory(root)] == [
        ("Ann Lee", "people/Ann Lee"),
        ("Ledgers", "topic/Ledgers"),
    ]
