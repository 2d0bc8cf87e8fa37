"""How far long work is: the library counts, and a face that wants it shows it (the CLI, on a terminal).

The library never prints (docs/development.md); a cold build reports its files
done through `Progress`, and the CLI's printer (`fsmem.cli.printing`) is the
one `shower` it sets, writing to stderr only when that is a terminal. Nothing
is shown for work done within `AFTER_S`, nor more than every `EVERY_S`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from fsmem.errors import ConfigError

AFTER_S = 1.0
AFTER_ENV = "FSMEM_PROGRESS_AFTER"  # seconds before progress shows, instead of AFTER_S (tests: 0)
EVERY_S = 0.2

# what shows a line of progress ("" when the work is over: the line is cleared); None: nothing is shown
shower: Callable[[str], None] | None = None


def after_seconds() -> float:
    """FSMEM_PROGRESS_AFTER when set, else `AFTER_S`. A value that is no number of seconds from 0 on is refused
    (as FSMEM_WORKERS is): read as unset, a typo such as `0,5` silently showed nothing for the first second."""
    raw = os.environ.get(AFTER_ENV, "").strip()
    if not raw:
        return AFTER_S
    try:
        seconds = float(raw) if raw.isascii() else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        from fsmem.budget import echo

        raise ConfigError(f"{AFTER_ENV} is {echo(raw)}, not a number of seconds (0 or more)")
    return seconds


class Progress:
    """Counts the items of one piece of work (`what`: "indexing files for search") and reports now and then."""

    def __init__(self, what: str, total: int):
        self.what, self.total, self.done = what, total, 0
        self.started = time.monotonic()
        self.after = after_seconds()
        self._shown_at = 0.0
        self._showing = False

    def step(self, items: int = 1) -> None:
        self.done += items
        show = shower
        if show is None:
            return
        now = time.monotonic()
        if now - self.started < self.after or now - self._shown_at < EVERY_S:
            return
        self._shown_at, self._showing = now, True
        percent = 100 * self.done // max(self.total, 1)
        show(f"fsmem: {self.what}: {self.done:,} of {self.total:,} files ({percent}%)")

    def finish(self) -> None:
        if self._showing and shower is not None:
            shower("")
        self._showing = False
