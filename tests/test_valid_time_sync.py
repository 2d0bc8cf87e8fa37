"""Two same-day writes on two hosts order by their time through `fsmem sync`'s merge, whichever host syncs first
and whoever's note path sorts first (issue #22): two clones of one bare remote, the CLI with the clock pinned."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cli_runner
import pytest
import sync_scenario as S

NADIA = "people/Nadia Okafor"
DOC = "entities/people/nadia-okafor.md"


def run(root: Path, *args: str, now: str, session: str | None = None) -> subprocess.CompletedProcess:
    """`fsmem --root ROOT ARGS` on the clock `now` (and FSMEM_SESSION `session`), through the CLI's entry point in
    this process (tests/cli_runner.py): what is tested is the order sync's merge gives, not the process."""
    code, out, err = cli_runner.fsmem_here(root, *args, now=now, **({"FSMEM_SESSION": session} if session else {}))
    assert code in (0, 1), f"fsmem {' '.join(args)}: exit {code}: {err}"
    return subprocess.CompletedProcess([S.FSMEM, "--root", str(root), *args], code, out, err)


def facts_of(root: Path) -> tuple[str, str]:
    text = (root / DOC).read_text()
    facts, _, superseded = text.partition("## Superseded\n")
    return facts.split("## Facts\n")[1], superseded


LATER = "2026-12-01T16:00:00Z"


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, list[Path]]:
    """Two hosts, each with its own same-day write consolidated (the documents then conflict), not synced yet;
    built once, each test syncs a copy (tests/sync_scenario.py)."""
    origin, (zed_host, alice_host) = S.make_hosts(tmp_path_factory.mktemp("hosts"), hosts=2, writers=0)
    run(zed_host, "note", "- employer: Acme", "--subject", NADIA, now="2026-12-01T15:32:07Z", session="zed")
    run(alice_host, "note", "- employer: Globex", "--subject", NADIA, now="2026-12-01T15:32:09Z", session="alice")
    for root in (zed_host, alice_host):  # each host files its own note first: the documents then conflict
        run(root, "consolidate", now=LATER)
    return origin, [zed_host, alice_host]


@pytest.mark.slow
@pytest.mark.parametrize("first", ["zed's host", "alice's host"])
def test_same_day_writes_on_two_hosts_order_by_time_through_sync(written, tmp_path, first):
    _, (zed_host, alice_host) = S.copy_hosts(*written, tmp_path)
    later = LATER
    assert "employer: Acme" in facts_of(zed_host)[0] and "employer: Globex" in facts_of(alice_host)[0]
    order = [zed_host, alice_host] if first == "zed's host" else [alice_host, zed_host]
    for root in [*order, order[0]]:
        run(root, "sync", now=later)
    for root in (zed_host, alice_host):
        facts, superseded = facts_of(root)
        assert facts.strip() == "- employer: Globex ([2026-12-01T15:32:09Z](../../sessions/2026/12/01/alice.md))"
        assert superseded.strip() == (
            "- employer: Acme ([2026-12-01T15:32:07Z](../../sessions/2026/12/01/zed.md) to 2026-12-01T15:32:09Z)"
        )
    assert (zed_host / DOC).read_bytes() == (alice_host / DOC).read_bytes()
    timeline = run(zed_host, "timeline", NADIA, "employer", now=later).stdout.splitlines()
    assert [row.split("  ")[0] for row in timeline[1:-1]] == ["employer: Acme", "employer: Globex"]
