"""rg's outputs kept while the change feed says nothing changed (fsmem.query.grep_cache): every change, through
every face, is seen by the next grep; a scope never sees another's lines; no feed, nothing kept."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.agents import tools
from fsmem.query import grep_cache

DOC = "---\ntitle: {title}\n---\n- walrus: {text}\n"


def _kept(memory: Memory) -> int:
    outputs = grep_cache.kept_for(memory.root)
    return len(outputs.entries) if outputs is not None else 0


def _lines(memory: Memory, pattern: str = "walrus", **kw) -> list[tuple[str, str]]:
    return [(m.path, m.text) for m in memory.grep(pattern, fixed_strings=True, **kw).matches]


@pytest.fixture
def watched(tmp_path):
    """A Memory on a trusted feed that has grepped twice: the second answer came from what the first kept."""
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text(DOC.format(title="A", text="one"))
    memory.ls()
    memory.ls()
    assert memory.catalog._feed is not None and memory.catalog._feed.trusted
    first = _lines(memory)
    assert _kept(memory) == 1 and _lines(memory) == first == [("topics/a.md", "- walrus: one")]
    yield memory
    memory.close()
    grep_cache.forget(memory.root)


def _editor_in_place(memory: Memory) -> None:
    with open(memory.root / "topics" / "a.md", "r+") as handle:  # same size, same second: only the event tells
        handle.write(DOC.format(title="A", text="two"))


def _editor_rename(memory: Memory) -> None:
    (memory.root / "topics" / ".a.md.swp").write_text(DOC.format(title="A", text="two"))
    os.replace(memory.root / "topics" / ".a.md.swp", memory.root / "topics" / "a.md")


def _api_write(memory: Memory) -> None:
    memory.write("topics/a.md", DOC.format(title="A", text="two"))


def _tool_write(memory: Memory) -> None:
    answer = tools.call(memory, "write", {"path": "topics/a.md", "body": DOC.format(title="A", text="two")})
    assert not answer.is_error, answer.text


def _other_process(memory: Memory) -> None:
    fsmem = Path(sys.executable).with_name("fsmem")
    env = {**os.environ, "FSMEM_ROOT": str(memory.root)}
    subprocess.run([str(fsmem), "write", "topics/a.md"], input=DOC.format(title="A", text="two").encode(), env=env)


@pytest.mark.parametrize("change", [_editor_in_place, _editor_rename, _api_write, _tool_write, _other_process])
def test_a_change_through_any_face_is_seen_by_the_next_grep(watched, change):
    change(watched)
    assert _lines(watched) == [("topics/a.md", "- walrus: two")]
    assert _lines(watched) == [("topics/a.md", "- walrus: two")]  # kept again, for the new state


def test_new_moved_and_deleted_files_are_seen_by_the_next_grep(watched):
    (watched.root / "people").mkdir()
    (watched.root / "people" / "b.md").write_text(DOC.format(title="B", text="new"))
    assert _lines(watched) == [("people/b.md", "- walrus: new"), ("topics/a.md", "- walrus: one")]
    os.rename(watched.root / "people", watched.root / "folks")
    assert _lines(watched) == [("folks/b.md", "- walrus: new"), ("topics/a.md", "- walrus: one")]
    (watched.root / "topics" / "a.md").unlink()
    assert _lines(watched) == [("folks/b.md", "- walrus: new")]


def test_views_with_other_scopes_never_see_each_others_lines(watched):
    (watched.root / "people").mkdir()
    (watched.root / "people" / "b.md").write_text(DOC.format(title="B", text="secret"))
    everything = _lines(watched)
    topics, people = Memory(watched.root, scope=["topics/"]), Memory(watched.root, scope=["people/"])
    try:
        for _ in range(2):  # the second time from what was kept
            assert _lines(topics) == [("topics/a.md", "- walrus: one")]
            assert _lines(people) == [("people/b.md", "- walrus: secret")]
            assert _lines(watched) == everything
    finally:
        topics.close()
        people.close()


def test_large_answers_are_kept_too_and_stay_exact(watched):
    text = "".join(f"- walrus: fact {n}\n" for n in range(3000))  # past one pass: counts, then a page
    (watched.root / "topics" / "big.md").write_text(f"---\ntitle: Big\n---\n{text}")
    first = watched.grep("walrus", fixed_strings=True, max_results=5, offset=100)
    again = watched.grep("walrus", fixed_strings=True, max_results=5, offset=100)
    assert [m.line for m in again.matches] == [m.line for m in first.matches] and again.page.total == 3001
    (watched.root / "topics" / "big.md").write_text(f"---\ntitle: Big\n---\n- walrus: first\n{text}")
    after = watched.grep("walrus", fixed_strings=True, max_results=5, offset=100)
    assert [m.text for m in first.matches] == [f"- walrus: fact {n}" for n in range(99, 104)]  # a.md's comes first
    assert after.page.total == 3002 and [m.text for m in after.matches] == [
        f"- walrus: fact {n}" for n in range(98, 103)
    ]


def test_nothing_is_kept_without_a_trusted_feed(tmp_path):
    memory = Memory.init(tmp_path / "mem")
    (memory.root / "topics").mkdir()
    (memory.root / "topics" / "a.md").write_text(DOC.format(title="A", text="one"))
    assert _lines(memory)  # a one-shot process: no feed
    assert memory.catalog._feed is None and _kept(memory) == 0
    memory.ls()
    memory.ls()
    feed = memory.catalog._feed
    feed._distrust("a test distrusts it")
    assert _lines(memory) and _lines(memory) and _kept(memory) == 0
    memory.close()


def test_an_output_made_before_a_change_is_not_kept_after_it():
    outputs = grep_cache.Outputs()
    generation = outputs.generation
    outputs.generation += 1  # another call caught up on a change meanwhile
    outputs.clear()
    outputs.put(("rg", "x"), generation, b"old")
    assert outputs.get(("rg", "x"), outputs.generation) == (False, None)
    outputs.put(("rg", "x"), outputs.generation, None)  # "too long" is an answer too
    assert outputs.get(("rg", "x"), outputs.generation) == (True, None)


def test_what_a_root_kept_goes_with_its_feed(tmp_path):
    import gc

    memory = Memory.init(tmp_path / "mem")
    (memory.root / "a.md").write_text(DOC.format(title="A", text="one"))
    memory.ls()
    memory.ls()
    assert _lines(memory) and _kept(memory) == 1
    memory.close()  # the root's last Memory: its feed stops
    gc.collect()
    assert not [feed for feed in grep_cache._kept if feed.root == memory.root.resolve()]


def test_what_is_kept_is_bounded(monkeypatch):
    monkeypatch.setattr(grep_cache, "MAX_BYTES", 10)
    outputs = grep_cache.Outputs()
    for n in range(5):
        outputs.put((n,), 0, b"1234")
    assert list(outputs.entries) == [(3,), (4,)] and outputs.size == 8
