"""Usage counts from the retrieval log (`fsmem.search.usage`): read once, then only what was appended."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from fsmem.search.usage import usage_counts
from fsmem.store import retrieval_log


def recount(root) -> dict[str, int]:
    """What reading the whole log gives: the counts a search is meant to see."""
    counts: dict[str, int] = {}
    for record in retrieval_log.records(root):
        if record.get("tool") in ("search", "recall"):
            for location in record.get("paths") or []:
                if isinstance(location, str):
                    counts[location] = counts.get(location, 0) + 1
    return counts


def by_path(usage: dict[str, int]) -> dict[str, dict[int, int]]:
    """The counts of the locations a ranking can spell (`f"{path}:{line}"`), as path -> {line: count}."""
    found: dict[str, dict[int, int]] = {}
    for location, count in usage.items():
        path, _colon, line = location.rpartition(":")
        if _colon and line.isdigit() and f"{path}:{int(line)}" == location:
            found.setdefault(path, {})[int(line)] = count
    return found


# Locations a search logs, and some it never does (a hand-written log): a colon in the path, no line, a line
# with a leading zero (a ranking's "topics/c.md:5" must not find the count of "topics/c.md:05").
LOCATIONS = [f"topics/{c}.md:{n}" for c in "abc" for n in (1, 5)] + ["a:b.md:2", "topics/c.md", "topics/c.md:05"]

calls = st.lists(
    st.tuples(
        st.sampled_from(["search", "recall", "grep", "ls"]),
        st.lists(st.sampled_from(LOCATIONS), max_size=4),
        st.booleans(),  # count now (a search between the calls)
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(calls=calls, cap=st.sampled_from([1024, 1500, 1 << 20]))
def test_counts_equal_a_recount_through_appends_and_rotations(tmp_path_factory, calls, cap):
    root = tmp_path_factory.mktemp("mem")
    (root / ".fsmem" / "logs").mkdir(parents=True)
    for tool, paths, look in calls:
        retrieval_log.append(root, {"tool": tool, "paths": paths, "arguments": {"q": "x" * 40}}, max_bytes=cap)
        if look:
            usage = usage_counts(root)
            assert dict(usage) == recount(root)
            assert usage.by_path == by_path(recount(root))
            assert usage.top == max(recount(root).values(), default=0)
    assert dict(usage_counts(root)) == recount(root)
    assert usage_counts(root).by_path == by_path(recount(root))


def test_a_line_still_being_written_is_counted_once_it_ends(tmp_path):
    log = tmp_path / ".fsmem" / "logs" / "retrieval.jsonl"
    log.parent.mkdir(parents=True)
    line = json.dumps({"tool": "search", "paths": ["topics/a.md:3"]})
    log.write_text(line + "\n" + line[:10])
    assert dict(usage_counts(tmp_path)) == {"topics/a.md:3": 1}
    with open(log, "a") as handle:
        handle.write(line[10:] + "\n")
    assert dict(usage_counts(tmp_path)) == {"topics/a.md:3": 2}


def test_lines_already_counted_are_not_read_again(tmp_path):
    """Every call appends to the log: a search of a busy server read up to 16 MiB of it each time."""
    log = tmp_path / ".fsmem" / "logs" / "retrieval.jsonl"
    log.parent.mkdir(parents=True)
    first = json.dumps({"tool": "search", "paths": ["topics/a.md:3"]}) + "\n"
    log.write_text(first)
    assert dict(usage_counts(tmp_path)) == {"topics/a.md:3": 1}
    with open(log, "r+b") as handle:  # the counted line blanked in place: only a re-read would notice
        handle.write(b" " * (len(first) - 1))
    with open(log, "a") as handle:
        handle.write(json.dumps({"tool": "recall", "paths": ["topics/b.md:1"]}) + "\n")
    assert dict(usage_counts(tmp_path)) == {"topics/a.md:3": 1, "topics/b.md:1": 1}


def test_a_log_replaced_or_emptied_is_read_again_from_its_start(tmp_path):
    log = tmp_path / ".fsmem" / "logs" / "retrieval.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps({"tool": "search", "paths": ["topics/a.md:3"]}) + "\n")
    assert dict(usage_counts(tmp_path)) == {"topics/a.md:3": 1}
    log.write_text("")  # truncated in place
    assert dict(usage_counts(tmp_path)) == {}
    replacement = tmp_path / "other.jsonl"
    replacement.write_text(json.dumps({"tool": "search", "paths": ["topics/c.md:9"]}) + "\n")
    replacement.replace(log)
    assert dict(usage_counts(tmp_path)) == {"topics/c.md:9": 1}
    log.unlink()
    assert dict(usage_counts(tmp_path)) == {}
