"""The sync fuzzer (issue 31): a hostile host pushes arbitrary trees; two honest hosts write, sync and stay whole.

A hypothesis state machine over one world of tests/sync_fuzz.py: each step is one round (the
hostile host pushes one to three trees, each honest host makes ordinary writes, then both
sync, one sync in five through the CLI), and after every sync the oracle of
tests/sync_fuzz.py checks the host whole. The test asserts what the run did: at least 50
syncs, every hostile action tried (but those EXCLUDED names, each with the finding it waits
for), no violation. `make bench` runs it longer (benchmarks/bench_sync_fuzz.py).
FSMEM_FUZZ_SHRINK=1 lets hypothesis shrink a failure to its shortest example (slow).
"""

from __future__ import annotations

import os

from sync_fuzz import ACTIONS, NOW, fuzz

ROUNDS = 25  # two syncs a round
# An action whose finding is still open is left out of the asserted run, by name, with the finding it waits for.
EXCLUDED: dict[str, str] = {
    "link_out_in_two_pushes": "issue 31 finding 1 (sync-invariants): the first link is never judged again",
    "forged_index": "issue 31 finding 2, FUZZ-FINDINGS F1 (sync-invariants): INDEX.md as a link or a folder",
    "git_refused_names": "issue 31 finding 3 (sync-invariants): GIT~1 names block sync for good",
    "file_to_folder": "issue 31 finding 4 (sync-invariants): a type change meets a local edit",
    "folder_to_file": "issue 31 finding 4, FUZZ-FINDINGS F5 (sync-invariants): a type change meets a local edit",
    "folder_to_link": "FUZZ-FINDINGS F4, F7 (sync-invariants): a link's target retyped; folder to link vs an edit",
    "link_to_file_or_folder": "FUZZ-FINDINGS F4 (sync-invariants): a link's target retyped, never judged again",
    "retarget_link": "FUZZ-FINDINGS F4 (sync-invariants): a link's target retyped, never judged again",
    "unicode_twins": "issue 31 finding 5 (sync-invariants): unportable names taken",
    "case_twins": "issue 31 finding 5 (sync-invariants): unportable names taken",
    "device_names": "issue 31 finding 5 (sync-invariants): unportable names taken",
    "trailing_dot_or_space": "issue 31 finding 5 (sync-invariants): unportable names taken",
    "backslash_and_reserved_characters": "issue 31 finding 5 (sync-invariants): unportable names taken",
    "link_to_generated": "FUZZ-FINDINGS F2 (sync-invariants): a link to INDEX.md or a history file is taken",
    "forged_history_file": "FUZZ-FINDINGS F6 (sync-invariants): a history file pushed as a link is taken",
}


def test_sync_fuzz_keeps_every_honest_host_whole(tmp_path, monkeypatch):
    """At least 50 syncs, every hostile action tried, the invariants of tests/sync_fuzz.py after each sync."""
    monkeypatch.setenv("FSMEM_NOW", NOW)
    shrink = os.environ.get("FSMEM_FUZZ_SHRINK") == "1"
    tally = fuzz(tmp_path, rounds=ROUNDS, skip=frozenset(EXCLUDED), shrink=shrink)
    assert tally.syncs >= 50, tally
    assert sorted(set(ACTIONS) - set(EXCLUDED) - set(tally.tried)) == [], tally.tried
    assert not tally.violations, tally.violations
