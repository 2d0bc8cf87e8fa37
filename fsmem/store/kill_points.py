"""A test hook: SIGKILL this process at a chosen stage of a cache build, as a user's Ctrl-\\ or the OOM killer would.

With FSMEM_BUILD_KILL_AT=STAGE:N the process kills itself the Nth time it
reaches STAGE (tests/test_cold_build.py kills a real `fsmem` at each stage and
holds the next command's answers equal to a clean build's). Unset, `reached`
costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "FSMEM_BUILD_KILL_AT"
_counts: dict[str, int] = {}


def reached(stage: str) -> None:
    raw = os.environ.get(KILL_ENV)
    if not raw:
        return
    name, _, nth = raw.partition(":")
    if name != stage:
        return
    _counts[stage] = _counts.get(stage, 0) + 1
    if _counts[stage] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
