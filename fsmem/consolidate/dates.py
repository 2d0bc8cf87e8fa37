"""When a session note counts from, and what "today" is for consolidation (FSMEM_NOW when set). Pure but for the clock."""

from __future__ import annotations

from typing import Any

from fsmem.format import now_iso
from fsmem.format.valid_time import note_date
from fsmem.store.note_folders import SESSIONS


def today() -> str:
    """The date consolidation runs on (FSMEM_NOW when set): notes dated later are held back."""
    return now_iso()[:10]


def future_note_problem(rel: str, front: dict[str, Any], day: str) -> str | None:
    """`fsmem check`'s message for a session note dated after `day`, else None."""
    if not rel.startswith(SESSIONS + "/"):
        return None
    date = note_date(rel, front)
    if date and date > day:
        return f"dated {date}, after today ({day}): consolidate holds it back until then"
    return None
