"""The catalog answers in SQL (`fsmem.store.selection`): the same rows, totals, offsets and skipped entries as
the listing it replaced — a plain Python filter over the walk, kept here as the reference."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fsmem import Memory
from fsmem.errors import FsmemError, InvalidArgument
from fsmem.format import parse_timestamp
from fsmem.query.listing import list_entries, within_depth
from fsmem.store.meta import matches_filters, read_meta
from fsmem.store.scope import Scope
from fsmem.store.walk import folder_key, path_of, walk_key, walk_stats

BIG = "    big:\n      max_tokens: 100000\n      max_results: 1000\n"
TYPES = ["semantic", "episodic", "procedural", "Semantic", None]
TAGS = ["billing", "Billing", "x y", "a", "ä", "tag-1"]
DATES = ["2026-10-01", "2026-11-02T10:00:00+00:00", "2026-11-02T12:00:00+02:00", "2026-11-30", "soon", None]
NAMES = ["a.md", "a b.md", "a-b.md", "a!.md", "ab.md", "Z.md", "ä.md", "zz.markdown", "A.MD"]
FOLDERS = ["", "topics", "topics-old", "topics/a", "topics/a b", "topics/a!", "topics/ab", "entities/people"]
FOLDERS += ["entities/orgs", "sessions/2026/11/02", "profile", "deep/1/2/3/4"]


def _text(n: int) -> str:
    kind = TYPES[n % len(TYPES)]
    tags = [TAGS[(n + k) % len(TAGS)] for k in range(n % 3)]
    updated = DATES[n % len(DATES)]
    if n % 7 == 0:
        return f"# No front matter {n}\n\n- fact: {n}\n"
    fields = [f"title: File {n}", f"description: about {n}"]
    if kind is not None:
        fields.append(f"type: {kind}")
    if tags:
        fields.append("tags: [" + ", ".join(f'"{t}"' for t in tags) + "]")
    if updated is not None:
        fields.append(f"updated: {updated}")
    return "---\n" + "\n".join(fields) + f"\n---\n# File {n}\n\n- fact: {n}\n" + "word " * (n * 7 % 90)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A memory of nested folders whose names sort in every tricky way, files of every filter value, links
    in and out, and entries the walk must skip."""
    root = tmp_path_factory.mktemp("selection") / "mem"
    Memory.init(root)
    config = (root / "fsmem.yaml").read_text().replace("  agents:\n", "  agents:\n" + BIG, 1)
    (root / "fsmem.yaml").write_text(config)
    n = 0
    for folder in FOLDERS:
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in NAMES[: 3 + len(folder) % 6]:
            n += 1
            (root / folder / name).write_text(_text(n))
    os.symlink("../entities/people/a.md", root / "topics" / "link.md")  # in, to a file out of a topics scope
    os.symlink("a.md", root / "topics" / "a" / "same.md")  # in, to a file in scope
    os.symlink("/etc/hostname", root / "topics" / "out.md")  # out of the memory: skipped
    os.symlink("../fsmem.yaml", root / "entities" / "config.md")  # to a non-memory file: skipped
    (root / "topics" / "bad\nname.md").write_text("x")  # a control character: skipped
    os.mkfifo(root / "entities" / "orgs" / "pipe.md")  # not a regular file: skipped
    (root / ".hidden").mkdir()
    (root / ".hidden" / "x.md").write_text("hidden")
    return root


def _reference(memory: Memory, path, depth, type, tag, updated_after, offset, max_results, max_tokens):
    """The listing as it was before SQL: walk, parse every file, filter in Python, page."""
    root = memory.root
    start = memory.path(path) if path else None
    if start is not None and not start.exists():
        raise FsmemError("no such path")
    if updated_after is not None and parse_timestamp(updated_after) is None:
        raise InvalidArgument("not a date")
    skipped: list[tuple[str, str]] = []
    metas = []
    for rel, full, stat in walk_stats(root, start, skipped, scope=memory.scope):
        try:
            metas.append(read_meta(root, Path(full), memory.tokens, stat))
        except (OSError, FsmemError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            skipped.append((rel, f"skipped: {reason.lower()}"))
    base = os.path.relpath(start, root).replace(os.sep, "/") if start else "."
    kept = [
        m
        for m in metas
        if matches_filters(m, type=type, tag=tag, updated_after=updated_after) and within_depth(m.path, base, depth)
    ]
    budget = memory.budget.narrowed(max_tokens, max_results)
    listing = list_entries(
        kept, memory.tokens.count, offset=offset, max_results=budget.max_results, max_tokens=budget.max_tokens
    )
    listing.skipped = [p for p, _ in skipped]
    return listing


def _starts(root: Path) -> list[str | None]:
    files = [
        os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
        for d, _dirs, names in os.walk(root)
        for f in names
        if f.endswith(".md") and ".fsmem" not in d and ".hidden" not in d
    ]
    return [None, ".", *FOLDERS[1:], "deep/1", *sorted(files)[:12]]


SCOPES = [None, ["topics"], ["topics/a", "entities/people/a.md"], ["entities"], ["deep/1/2"], ["sessions", "profile"]]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sql_listing_gives_the_rows_totals_offsets_and_skips_of_the_walk(tree, data):
    scope = data.draw(st.sampled_from(SCOPES))
    memory = Memory(tree, agent="big", scope=scope)
    path = data.draw(st.sampled_from(_starts(tree)))
    depth = data.draw(st.one_of(st.none(), st.integers(1, 5)))
    type_ = data.draw(st.sampled_from([t for t in TYPES if t is None or t.islower()]))  # files' types vary more
    tag = data.draw(st.one_of(st.none(), st.sampled_from(TAGS), st.lists(st.sampled_from(TAGS), max_size=2)))
    updated = data.draw(st.sampled_from([None, "2026-10-01", "2026-11-02T10:00:00+00:00", "2026-11-02", "2027"]))
    offset = data.draw(st.integers(0, 40))
    max_results = data.draw(st.one_of(st.none(), st.integers(1, 60)))
    max_tokens = data.draw(st.one_of(st.none(), st.integers(40, 3000)))
    args = dict(depth=depth, type=type_, tag=tag, updated_after=updated, offset=offset)
    args.update(max_results=max_results, max_tokens=max_tokens)
    try:
        expected = _reference(memory, path, **args)
    except FsmemError as exc:
        with pytest.raises(InvalidArgument if isinstance(exc, InvalidArgument) else FsmemError):
            memory.ls(path, **args)
        return
    for _ in range(2):  # the first call walks, the second takes the change feed
        got = memory.ls(path, **args)
        assert [vars(e) for e in got.entries] == [vars(e) for e in expected.entries]
        assert got.page == expected.page
        assert sorted(got.skipped) == sorted(expected.skipped)
    memory.close()


def test_walk_keys_sort_as_the_walk_yields(tree):
    """Files of a folder (by name), then each subfolder, depth first: the order `walk` gives, as text."""
    walked = [rel for rel, _full, _stat in walk_stats(tree)]
    assert walked == sorted(walked, key=walk_key)
    assert all(path_of(walk_key(rel)) == rel for rel in walked)
    assert all(walk_key(rel).startswith(folder_key("topics")) == rel.startswith("topics/") for rel in walked)


def test_a_scope_in_sql_hides_a_link_whose_target_is_out_of_it(tree):
    memory = Memory(tree, agent="big", scope=Scope.of("topics"))
    paths = [e.path for e in memory.ls(max_results=1000).entries]
    assert "topics/link.md" not in paths and "topics/a/same.md" in paths
    assert "topics/link.md" in [e.path for e in Memory(tree, agent="big").ls("topics", max_results=1000).entries]
