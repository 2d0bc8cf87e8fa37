"""Consolidation: session notes filed into entity and topic documents, a pure function of the notes."""
