"""Consolidation settings (the `consolidate:` section of fsmem.yaml) and the names the consolidator's modules share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsmem import format as fmt

CONSOLIDATED_FIELD = fmt.CONSOLIDATED_FIELD
body_digest = fmt.body_digest
KILL_ENV = "FSMEM_CONSOLIDATE_KILL_AFTER"  # test hook: SIGKILL this process after its Nth file write

DEFAULTS: dict[str, Any] = {
    "default_subject": "topic/Inbox",
    "subject_match_threshold": 90,
    "near_duplicate_threshold": 90,
    "extractors": ["rules"],
    "archive": False,
    "archive_dir": "archive/sessions",
    "index_max_tokens": 1500,
    "progress_min_notes": 50,
    "max_attempts": 3,
}

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Settings:
    default_subject: str
    subject_match_threshold: float
    near_duplicate_threshold: float
    extractors: tuple[str, ...]
    archive: bool
    archive_dir: str
    index_max_tokens: int
    progress_min_notes: int
    max_attempts: int

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> Settings:
        from fsmem.errors import ConfigError
        from fsmem.store.paths import config_dir

        data = {**DEFAULTS, **(section or {})}
        unknown = sorted(set(data) - set(DEFAULTS))
        if unknown:
            raise ConfigError(f"fsmem.yaml consolidate: unknown setting(s) {', '.join(unknown)}")
        names = data["extractors"]
        if isinstance(names, str):
            names = [names]
        try:
            return cls(
                default_subject=str(data["default_subject"]),
                subject_match_threshold=float(data["subject_match_threshold"]),
                near_duplicate_threshold=float(data["near_duplicate_threshold"]),
                extractors=tuple(str(n) for n in names),
                archive=bool(data["archive"]),
                archive_dir=config_dir(data["archive_dir"], "consolidate.archive_dir"),
                index_max_tokens=int(data["index_max_tokens"]),
                progress_min_notes=int(data["progress_min_notes"]),
                max_attempts=max(1, int(data["max_attempts"])),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"fsmem.yaml consolidate: {exc}") from None
