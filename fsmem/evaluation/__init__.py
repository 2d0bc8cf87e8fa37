"""Evaluation tooling, not memory: the retrieval harness (`evaluate`) and the LoCoMo importer."""

from fsmem.evaluation.harness import EvalReport, evaluate
from fsmem.evaluation.locomo import import_locomo

__all__ = ["EvalReport", "evaluate", "import_locomo"]
