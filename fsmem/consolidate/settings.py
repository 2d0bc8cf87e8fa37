"""Consolidation settings (the `consolidate:` section of fsmem.yaml) and the names the consolidator's modules share."""

from __future__ import annotations

from collections.abc import Callable

from fsmem import format as fmt
from fsmem.config import ConsolidateSettings

CONSOLIDATED_FIELD = fmt.CONSOLIDATED_FIELD
body_digest = fmt.body_digest
KILL_ENV = "FSMEM_CONSOLIDATE_KILL_AFTER"  # test hook: SIGKILL this process after its Nth file write

Progress = Callable[[str, int, int], None]

# The `consolidate:` section of fsmem.yaml, typed and checked where the file is loaded (`fsmem.config`).
Settings = ConsolidateSettings
