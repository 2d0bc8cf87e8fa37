import json
import os
import subprocess
import sys

import pytest
from conftest import write_file

from fsmem.errors import InvalidArgument, NotFound, PathEscape
from fsmem.store.files import file_version


def test_read_shows_numbered_lines_and_the_whole_small_file(demo_memory):
    result = demo_memory.read("topics/deployments.md")
    assert result.lines[0] == (1, "---")
    assert result.lines[-1] == (19, "- The last failed deploy (2026-10-19) was rolled back in 6 minutes.")
    assert not result.truncated and result.total_lines == 19
    assert result.to_text().splitlines()[1] == "     2\ttitle: Deployments"
    assert result.version == file_version(demo_memory.root / "topics/deployments.md")
    assert result.to_text().endswith(f"[topics/deployments.md: lines 1-19 of 19; version {result.version}]")


def test_read_cut_names_the_exact_next_range_and_paging_covers_the_file(demo_memory):
    rel = "topics/billing.md"
    expected = (demo_memory.root / rel).read_text().splitlines()
    seen, spec = [], "1:"
    while spec:
        page = demo_memory.read(rel, lines=spec, max_tokens=60)
        assert page.tokens <= 60
        seen.extend(text for _, text in page.lines)
        if page.truncated:
            assert f'next: lines="{page.next_lines}"' in page.to_text()
        spec = page.next_lines
    assert seen == expected


def test_read_lines_and_section(demo_memory):
    assert demo_memory.read("topics/billing.md", lines="14:15").lines == [
        (14, "- billing cycle: monthly, on the 1st"),
        (15, "- proration: daily, for seat changes mid-cycle"),
    ]
    assert demo_memory.read("topics/billing.md", lines="16").lines == [
        (16, "- invoice format: PDF, emailed to the billing contact")
    ]
    section = demo_memory.read("topics/billing.md", section="Procedures")
    assert [n for n, _ in section.lines] == list(range(19, 24))
    assert section.lines[-1] == (23, "")
    assert section.lines[0][1] == "## Procedures"


def test_read_outline_lists_headings_with_ranges_and_tokens(demo_memory):
    outline = demo_memory.read("topics/billing.md", outline=True).outline
    assert [(o.level, o.title, o.start, o.end) for o in outline] == [
        (1, "Billing", 11, 25),
        (2, "Facts", 13, 18),
        (2, "Procedures", 19, 23),
        (2, "Notes", 24, 25),
    ]
    assert all(o.tokens > 0 for o in outline)


def test_read_hides_superseded_facts_unless_asked(empty_memory):
    write_file(
        empty_memory.root,
        "entities/people/a.md",
        "---\ntitle: A\n---\n## Facts\n- employer: Globex\n## Superseded\n- employer: Acme (old)\n## Notes\n- n\n",
    )
    default = empty_memory.read("entities/people/a.md")
    assert [n for n, _ in default.lines] == [1, 2, 3, 4, 5, 8, 9]
    assert default.hidden_superseded == 2
    assert "2 superseded line(s) hidden" in default.to_text()
    full = empty_memory.read("entities/people/a.md", include_superseded=True)
    assert [n for n, _ in full.lines] == list(range(1, 10))


def test_read_over_long_line_is_cut_and_paging_still_advances(empty_memory):
    write_file(empty_memory.root, "long.md", "short\n" + "word " * 20_000 + "\nafter\n")
    first = empty_memory.read("long.md", max_tokens=200)
    assert first.lines == [(1, "short")] and first.truncated and first.next_lines == "2:"
    second = empty_memory.read("long.md", lines="2:", max_tokens=1000)
    number, text = second.lines[0]
    assert number == 2 and text.endswith("… [line cut: 100000 bytes in all]")
    assert len(text) < 2100
    assert second.lines[1] == (3, "after")


def test_read_budget_smaller_than_one_line_still_advances(empty_memory):
    write_file(empty_memory.root, "wide.md", "alpha " * 300 + "\nsecond\n")
    page = empty_memory.read("wide.md", max_tokens=20)
    assert page.lines[0][0] == 1 and page.lines[0][1].endswith("…")
    assert page.truncated and page.next_lines == "2:"
    assert page.tokens <= 20


def test_read_bad_input(demo_memory):
    with pytest.raises(PathEscape):
        demo_memory.read("../../etc/passwd")
    with pytest.raises(NotFound):
        demo_memory.read("topics/nope.md")
    with pytest.raises(InvalidArgument):
        demo_memory.read("topics")
    for spec in ("x:y", "0:3", "5:2"):
        with pytest.raises(InvalidArgument):
            demo_memory.read("topics/billing.md", lines=spec)
    with pytest.raises(InvalidArgument, match="its headings are"):
        demo_memory.read("topics/billing.md", section="Nope")
    with pytest.raises(InvalidArgument):
        demo_memory.read("topics/billing.md", lines="1:2", section="Facts")


@pytest.mark.slow
def test_read_of_a_1gb_file_costs_what_a_small_read_costs(empty_memory):
    """The file is 1 GiB (sparse after 1 MiB of text); a bounded read must not load it."""
    big = empty_memory.root / "huge.md"
    with open(big, "wb") as handle:
        handle.write(b"".join(b"line %d of a very large memory file\n" % i for i in range(30_000)))
    os.truncate(big, 1 << 30)
    script = (
        "import json, re, sys\n"
        "from fsmem import Memory\n"
        "r = Memory(sys.argv[1]).read('huge.md', lines='100:', max_tokens=1000)\n"
        "print(json.dumps({'first': r.lines[0], 'end': r.end, 'next': r.next_lines, 'tokens': r.tokens,\n"
        "  'rss_mb': int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) / 1024}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(empty_memory.root)], capture_output=True, text=True, check=True
    )
    data = json.loads(out.stdout)
    assert data["first"] == [100, "line 99 of a very large memory file"]
    assert data["tokens"] <= 1000 and data["next"] == f"{data['end'] + 1}:"
    assert data["rss_mb"] < 300  # peak RSS of this process: 1 GiB was never held in memory
    listing = empty_memory.ls()
    huge = next(e for e in listing.entries if e.path == "huge.md")
    assert huge.tokens == (1 << 30) // 4  # estimated, not counted
