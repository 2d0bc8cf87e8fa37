"""A test hook: SIGKILL this process at a chosen stage of a cache build, as a user's Ctrl-\\ or the OOM killer would.

With FSMEM_BUILD_KILL_AT=STAGE:N the process kills itself the Nth time it
reaches STAGE (tests/test_cold_build.py kills a real `fsmem` at each stage and
holds the next command's answers equal to a clean build's). With
FSMEM_PAUSE_AT=STAGE it says so on stderr and sleeps there instead, so that a
test signals a process known to be at that stage (tests/test_rendezvous.py stops a
watcher in the middle of its warm-up). Unset, `reached` costs two environment
lookups.
"""

from __future__ import annotations

import os
import signal
import sys
import time

KILL_ENV = "FSMEM_BUILD_KILL_AT"
PAUSE_ENV = "FSMEM_PAUSE_AT"
PAUSE_SECONDS = 60.0
_counts: dict[str, int] = {}


def reached(stage: str) -> None:
    if os.environ.get(PAUSE_ENV) == stage:
        sys.stderr.write(f"fsmem: paused at {stage} ({PAUSE_ENV}, pid {os.getpid()})\n")
        sys.stderr.flush()
        time.sleep(PAUSE_SECONDS)
    raw = os.environ.get(KILL_ENV)
    if not raw:
        return
    name, _, nth = raw.partition(":")
    if name != stage:
        return
    _counts[stage] = _counts.get(stage, 0) + 1
    if _counts[stage] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
