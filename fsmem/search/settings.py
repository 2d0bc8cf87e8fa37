"""The `search:` section of fsmem.yaml, checked: threshold, weights, recency and fuzzy matching."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fsmem.config import CONFIG_FILE
from fsmem.errors import ConfigError

DEFAULT_WEIGHTS = {
    "text": 1.0,
    "headings": 0.5,
    "row": 1.0,
    "subject": 3.0,
    "neighbours": 0.5,
    "document": 0.4,
    "fuzzy": 0.6,
    "importance": 0.1,
    "recency": 0.1,
    "usage": 0.1,
}


@dataclass(frozen=True)
class SearchSettings:
    """The `search:` section of fsmem.yaml, checked."""

    min_score: float = 0.06
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    recency_half_life_days: float = 30.0
    fuzzy_cutoff: float = 85.0

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> SearchSettings:
        weights = dict(DEFAULT_WEIGHTS)
        given = section.get("weights") or {}
        if not isinstance(given, dict):
            raise ConfigError(f"{CONFIG_FILE}: search.weights must be a mapping")
        for key, value in given.items():
            if key not in DEFAULT_WEIGHTS:
                raise ConfigError(f"{CONFIG_FILE}: unknown search weight {key!r} (known: {', '.join(DEFAULT_WEIGHTS)})")
            weights[key] = _number(f"search.weights.{key}", value, minimum=0.0)
        if weights["row"] + weights["neighbours"] + weights["document"] + weights["subject"] <= 0:
            raise ConfigError(f"{CONFIG_FILE}: search.weights row, neighbours, document and subject cannot all be 0")
        if weights["text"] + weights["headings"] <= 0:
            raise ConfigError(f"{CONFIG_FILE}: search.weights text and headings cannot both be 0")
        return cls(
            min_score=_number("search.min_score", section.get("min_score", cls.min_score), minimum=0.0),
            weights=weights,
            recency_half_life_days=_number(
                "search.recency_half_life_days",
                section.get("recency_half_life_days", cls.recency_half_life_days),
                minimum=0.001,
            ),
            fuzzy_cutoff=_number("search.fuzzy_cutoff", section.get("fuzzy_cutoff", cls.fuzzy_cutoff), minimum=0.0),
        )


def _number(name: str, value: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"{CONFIG_FILE}: {name} must be a number of at least {minimum:g}, not {value!r}")
    return float(value)
