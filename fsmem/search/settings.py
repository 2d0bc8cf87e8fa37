"""The `search:` section of fsmem.yaml: threshold, weights, recency, fuzzy matching and recall, typed and checked
where the file is loaded (`fsmem.config.sections`); the names search's modules import."""

from __future__ import annotations

from fsmem.config import RecallSettings, SearchSettings, SearchWeights

DEFAULT_WEIGHTS = dict(SearchWeights().items())

__all__ = ["DEFAULT_WEIGHTS", "RecallSettings", "SearchSettings", "SearchWeights"]
