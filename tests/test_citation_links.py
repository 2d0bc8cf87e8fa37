"""Citations as links (issue #22): every source a consolidated document cites is a Markdown link relative to the
document, which resolves from the document's folder to the note, also once `archive: true` has moved it; old
plain-text citations are still read, and a line moves to the linked form when consolidation rewrites it."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

import pytest
from consolidation_scenarios import session_note

from fsmem import Memory

NOW = "2026-12-01T08:00:00+00:00"
LINK = re.compile(r"\]\(([^()\s]+)\)")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("FSMEM_NOW", NOW)  # after conftest's _isolated_env, which clears the other FSMEM_* names


def citation_links(root: Path) -> dict[str, list[str]]:
    """document -> the targets of the links in its citations (a bullet's trailing parenthesis)."""
    found: dict[str, list[str]] = {}
    for folder in ("entities", "topics"):
        for path in sorted((root / folder).rglob("*.md")):
            rel = path.relative_to(root).as_posix()
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith("- ") and line.endswith(")") and " ([" in line:
                    found.setdefault(rel, []).extend(LINK.findall(line[line.rindex(" ([") :]))
    return found


def unresolved(root: Path) -> list[tuple[str, str]]:
    bad = []
    for document, targets in citation_links(root).items():
        for target in targets:
            where = posixpath.normpath(posixpath.join(posixpath.dirname(document), target))
            if where.startswith("..") or not (root / where).is_file():
                bad.append((document, target))
    return bad


def a_week_of_notes(root: Path, start: int = 1) -> None:
    for day in range(start, start + 4):
        date = f"2026-03-{day:02d}"
        session_note(
            root,
            date,
            f"s{day}",
            f"## people/Nadia Okafor\n- employer: E{day % 3}\n- city: Lagos\n- Prefers email.\n"
            + ("- phone: 555-0100\n" if day == 1 else "")
            + f"## topic/Build\n- status: s{day}\n- Flaky test on CI.\n",
        )


def test_every_citation_links_its_note_relative_to_the_document(tmp_path):
    memory = Memory.init(tmp_path / "m")
    a_week_of_notes(memory.root)
    memory.consolidate()
    links = citation_links(memory.root)
    assert set(links) == {
        "entities/people/nadia-okafor.md",
        "entities/people/nadia-okafor.history.md",
        "topics/build.md",
        "topics/build.history.md",
    }
    assert "../../sessions/2026/03/01/s1.md" in links["entities/people/nadia-okafor.md"]
    assert "../sessions/2026/03/04/s4.md" in links["topics/build.md"]
    text = (memory.root / "entities/people/nadia-okafor.md").read_text()
    assert (
        "- city: Lagos ([2026-03-01](../../sessions/2026/03/01/s1.md); "
        "confirmed [2026-03-04](../../sessions/2026/03/04/s4.md))\n"
    ) in text
    assert "- employer: E1 ([2026-03-01](../../sessions/2026/03/01/s1.md) to 2026-03-02)\n" in text
    assert unresolved(memory.root) == []
    assert [e.source for e in memory.timeline("people/Nadia Okafor", "city").entries] == ["sessions/2026/03/01/s1.md"]


def test_citations_still_resolve_after_the_archive_moves_the_notes(tmp_path):
    memory = Memory.init(tmp_path / "m")
    a_week_of_notes(memory.root)
    memory.consolidate()  # linked to sessions/, archive off
    config = memory.root / "fsmem.yaml"
    config.write_text(config.read_text().replace("archive: false", "archive: true"))
    memory = Memory(memory.root)
    a_week_of_notes(memory.root, start=5)
    report = memory.consolidate()
    assert len(report.notes_archived) == 8 and not list((memory.root / "sessions").rglob("*.md"))
    assert unresolved(memory.root) == []
    text = (memory.root / "entities/people/nadia-okafor.md").read_text()
    # a key the new notes do not touch: its line was written before, linking sessions/, and is rewritten
    assert "- phone: 555-0100 ([2026-03-01](../../archive/sessions/2026/03/01/s1.md))\n" in text
    assert "[2026-03-08](../../archive/sessions/2026/03/08/s8.md)" in text  # linked where the archive put it
    assert [e.value for e in memory.timeline("people/Nadia Okafor", "employer").entries] == [
        "E1",
        "E2",
        "E0",
        "E1",
        "E2",
        "E0",
        "E1",
        "E2",
    ]
    assert Memory(memory.root).consolidate().empty  # the archived citations are the notes' own: nothing to redo


def test_plain_citations_are_read_and_a_rewritten_line_moves_to_the_linked_form(tmp_path):
    memory = Memory.init(tmp_path / "m")
    session_note(memory.root, "2026-03-01", "a", "## people/Nadia Okafor\n- employer: Acme\n- city: Lagos\n")
    memory.consolidate()
    path = memory.root / "entities/people/nadia-okafor.md"
    linked = path.read_text()
    plain = linked.replace(
        "- employer: Acme ([2026-03-01](../../sessions/2026/03/01/a.md))",
        "- employer: Acme (2026-03-01, sessions/2026/03/01/a.md)",
    ).replace(
        "- city: Lagos ([2026-03-01](../../sessions/2026/03/01/a.md))",
        "- city: Lagos (2026-03-01, sessions/2026/03/01/a.md)",
    )
    path.write_text(plain)  # as a document written before citations were links
    assert [e.source for e in memory.timeline("people/Nadia Okafor").entries] == ["sessions/2026/03/01/a.md"] * 2
    session_note(memory.root, "2026-03-02", "b", "## people/Nadia Okafor\n- employer: Globex\n")
    memory.consolidate()
    text = path.read_text()
    assert "- city: Lagos (2026-03-01, sessions/2026/03/01/a.md)\n" in text  # a key not merged keeps its bytes
    assert "- employer: Globex ([2026-03-02](../../sessions/2026/03/02/b.md))\n" in text
    assert "- employer: Acme ([2026-03-01](../../sessions/2026/03/01/a.md) to 2026-03-02)\n" in text
    assert text.count("Acme") == 1  # the plain line was recognised as the same record, not kept beside it
