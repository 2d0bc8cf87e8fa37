"""The sync fuzzer (issue 31): a hostile host pushes arbitrary trees; two honest hosts write, sync and stay whole.

A hypothesis state machine over one world of tests/sync_fuzz.py: each step is one round (the
hostile host pushes one to three trees, each honest host makes ordinary writes, then both
sync, one sync in ten through the CLI), and after every sync the oracle of
tests/sync_fuzz.py checks the host whole. The test asserts what the run did: at least 50
syncs, every hostile action tried (but those EXCLUDED names, each with the finding it waits
for), no violation. `make bench` runs it longer (benchmarks/bench_sync_fuzz.py).
HYPOTHESIS_PROFILE=explore draws a new example; FSMEM_FUZZ_SCALE=N runs N examples (`make fuzz`);
FSMEM_FUZZ_SHRINK=1 lets hypothesis shrink a failure to its shortest example (minutes);
FSMEM_FUZZ_KEEP=1 keeps the world to look at.
"""

from __future__ import annotations

import os

from sync_fuzz import ACTIONS, fuzz
from sync_fuzz_hostile import NOW

ROUNDS = 25  # two syncs a round
# An action whose finding is still open is left out of the asserted run, by name, with the finding it waits for
# (none is open: F11, honest writes through links, was fixed on branch link-history).
EXCLUDED: dict[str, str] = {}


def test_sync_fuzz_keeps_every_honest_host_whole(tmp_path, monkeypatch):
    """At least 50 syncs, every hostile action tried, a file kept from a remote's link at least once, the
    invariants of tests/sync_fuzz.py after each sync."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    shrink = os.environ.get("FSMEM_FUZZ_SHRINK") == "1"
    explore = os.environ.get("HYPOTHESIS_PROFILE") == "explore"  # new draws, as tests/conftest.py's profile says
    examples = int(os.environ.get("FSMEM_FUZZ_SCALE", "1"))
    tally = fuzz(tmp_path, rounds=ROUNDS, examples=examples, skip=frozenset(EXCLUDED), shrink=shrink, explore=explore)
    assert tally.syncs >= 50, tally
    assert sorted(set(ACTIONS) - set(EXCLUDED) - set(tally.tried)) == [], tally.tried
    # a remote made an honest host's file a link and the host kept its file: the fixed draws reach it
    # (file_to_link); a new draw (explore) may pick only paths no honest host holds
    assert tally.kept or explore, tally
    assert not tally.violations, tally.violations
