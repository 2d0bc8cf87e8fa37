"""Ranked search over SQLite FTS5 and fsmem's own postings, kept in `.fsmem/cache.sqlite`."""
