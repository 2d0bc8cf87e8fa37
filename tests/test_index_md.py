"""INDEX.md: a table of contents of entities and topics under a token cap, rewritten only when it changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fsmem import Memory
from fsmem.consolidate import index_md
from fsmem.consolidate.subjects import DirectoryEntry

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "memory"


@pytest.fixture
def demo(tmp_path, monkeypatch) -> Memory:
    monkeypatch.delenv("FSMEM_NOW", raising=False)
    memory = Memory.init(tmp_path / "demo")
    shutil.copytree(EXAMPLES, memory.root, dirs_exist_ok=True)
    return memory


def test_index_lists_entities_by_kind_then_topics(demo):
    assert demo.index().changed is True
    text = (demo.root / "INDEX.md").read_text()
    assert text.startswith("---\ntitle: Index\n")
    body = text.split("overwritten.\n", 1)[1]
    assert body == (
        "\n## Entities: orgs\n"
        "- [Acme Corp](entities/orgs/acme.md): Customer; 1,200 seats on the enterprise plan, migrating billing with Project Atlas\n"
        "\n## Entities: people\n"
        "- [Adam Smith](entities/people/adam-smith.md): Customer-side finance lead at Acme; owns the billing migration on their side\n"
        "- [Maria Lopez](entities/people/maria-lopez.md): Our on-call SRE lead; decides deployment windows\n"
        "\n## Entities: projects\n"
        "- [Project Atlas](entities/projects/atlas.md): Migration of Acme's billing from the legacy invoicing system to usage-based billing\n"
        "\n## Topics\n"
        "- [Billing](topics/billing.md): How we bill customers: cycles, proration, invoices and the usage-based migration\n"
        "- [Deployments](topics/deployments.md): When and how we deploy, freezes, and the rollback rule\n"
    )
    mtime = (demo.root / "INDEX.md").stat().st_mtime_ns
    assert demo.index().changed is False
    assert (demo.root / "INDEX.md").stat().st_mtime_ns == mtime


def test_document_without_description_is_summarised_by_its_current_facts(demo):
    path = demo.root / "topics/office.md"
    path.write_text(
        "---\ntitle: Office\n---\n# Office\n\n## Facts\n- address: 1 Main St\n- floor: 3\n\n## Superseded\n- floor: 2 ([2026-01-01](../sessions/a.md) to 2026-02-01)\n"
    )
    demo.index()
    assert "- [Office](topics/office.md): address: 1 Main St; floor: 3\n" in (demo.root / "INDEX.md").read_text()


def test_token_cap_keeps_the_most_important_and_says_what_was_left_out():
    def count(text: str) -> int:  # a simple, exact stand-in tokenizer
        return len(text.split())

    entries = [
        DirectoryEntry(
            path=f"topics/t{n:03d}.md",
            mtime_ns=0,
            size=0,
            title=f"T{n}",
            description="word " * 10,
            importance=1.0 if n == 150 else 0.0,
        )
        for n in range(200)
    ]
    text = index_md.render(entries, 300, count)
    assert count(text) <= 300
    assert "[T150](topics/t150.md)" in text and "[T0](topics/t000.md)" in text
    listed = text.count("\n- [")
    assert 0 < listed < 200
    assert f"[{200 - listed} of 200 documents not listed (token cap 300); `fsmem ls entities`" in text
    assert index_md.render([], 300, count).endswith("No entity or topic documents yet.\n")


def test_an_index_that_fits_in_bytes_is_written_without_counting_and_is_what_counting_gives():
    """A token is at least one byte: an index whose bytes fit the cap never loads the tokenizer (a `fsmem sync`
    of a small memory paid more for it than for the rest of its work), and its text is the counted one."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return len(text.split())

    entries = [
        DirectoryEntry(path=f"topics/t{n}.md", mtime_ns=0, size=0, title=f"T{n}", description="word " * 3)
        for n in range(5)
    ]
    text = index_md.render(entries, 1500, count)
    assert counted == [] and text.count("\n- [") == 5
    assert index_md.render(entries, len(text.encode()) - 1, count) == text and counted  # counted, the same bytes


def test_an_index_that_is_a_link_is_replaced_never_written_through(demo, tmp_path):
    """Finding 2 (issue 31): INDEX.md arrived as a link to topics/billing.md; consolidate and `fsmem index`
    regenerated the index through the link, and billing.md became the index. A generated file is never written
    through a link: the link is replaced by a regular INDEX.md, billing.md keeps every byte, and the command
    says what it replaced."""
    from test_cli import fsmem

    root = demo.root
    billing = (root / "topics" / "billing.md").read_bytes()
    (root / "INDEX.md").unlink(missing_ok=True)
    (root / "INDEX.md").symlink_to("topics/billing.md")
    indexed = fsmem("--root", str(root), "index")
    assert indexed.returncode == 0, indexed.stderr
    assert "INDEX.md was a symbolic link to topics/billing.md" in indexed.stdout + indexed.stderr
    assert (root / "topics" / "billing.md").read_bytes() == billing
    assert not (root / "INDEX.md").is_symlink() and (root / "INDEX.md").read_text().startswith("---\ntitle: Index\n")

    (root / "INDEX.md").unlink()
    (root / "INDEX.md").symlink_to("topics/billing.md")
    consolidated = fsmem("--root", str(root), "consolidate")
    assert consolidated.returncode in (0, 1), consolidated.stderr
    assert "INDEX.md:1: was a symbolic link to topics/billing.md" in consolidated.stdout + consolidated.stderr
    kept = (root / "topics" / "billing.md").read_text()  # consolidated (its notes merged), never the index
    assert kept.startswith("---\ntitle: Billing\n") and "# Index" not in kept
    assert not (root / "INDEX.md").is_symlink()
