"""Times as the files hold them (ISO 8601, read by `parse_timestamp`) and the one place fsmem reads the clock.

`wall_clock` is the only reading of the real date (tests/test_clock.py holds fsmem to it); `now_iso`, the time
every stamp fsmem writes carries, takes FSMEM_NOW instead when it is set.
"""

from __future__ import annotations

import datetime as _dt

from fsmem.errors import ConfigError


def parse_timestamp(value: str) -> _dt.datetime | None:
    """ISO 8601 date or date-time to an aware datetime (naive values are read as UTC); None for a time that is no
    time in UTC (`0001-01-01T00:00:00+14:00` is in year 0 there): every comparison and every `--as-of`, `FSMEM_NOW`
    or note stamp converts to UTC, and raised OverflowError."""
    text = value.strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            parsed = _dt.datetime.combine(_dt.date.fromisoformat(text), _dt.time())
        else:
            parsed = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=_dt.UTC)
    try:
        parsed.astimezone(_dt.UTC)
    except OverflowError:
        return None
    return parsed


def now_iso() -> str:
    """The current local time, ISO 8601 with its UTC offset, to the second.

    FSMEM_NOW overrides the clock, so tests and reproducible runs can fix it; a value that is no time is
    refused, not read as the real clock (a run meant to be reproducible would silently not be)."""
    import os

    fixed = os.environ.get("FSMEM_NOW")
    if fixed:
        parsed = parse_timestamp(fixed)
        if parsed is None:
            from fsmem.budget import echo

            raise ConfigError(f"FSMEM_NOW is {echo(fixed)}, not a date or time (ISO 8601: 2026-03-01T09:30:00+00:00)")
        return parsed.isoformat(timespec="seconds")
    return wall_clock().isoformat(timespec="seconds")


def wall_clock() -> _dt.datetime:
    """The real clock, local time with its UTC offset: the one place fsmem reads the date.

    Its audit event tells tests/conftest.py which tests read the real date (FSMEM_NOW unset); those run
    again with the clock moved to another day, to catch a test that hard-codes today."""
    import sys

    sys.audit("fsmem.wall_clock")
    return _dt.datetime.now().astimezone()
